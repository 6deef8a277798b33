"""virtarray: a tiny array library over NumPy with virtual devices, whose DLPack device claim
is wrong on purpose.

Like array-api-strict, it offers devices besides the CPU that exist only so that code using it
can test its device handling ("device1", "device2"); their arrays are host memory like any
other. Its ``__dlpack_device__`` and its capsules report an array on "deviceN" as CUDA device N
(what array-api-strict 2.6.0 did, and took back): a consumer that believes the claim hands host
memory to CUDA. The claim that fits host memory is the CPU's, ``(kDLCPU, N)`` where a virtual
device wants its own number. dlbridge's checker finds it where a CUDA driver is loaded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__version__ = "1.0"
__all__ = ["DEVICES", "Array", "asarray", "from_dlpack"]

DEVICES = ("cpu", "device1", "device2")
KDLCPU, KDLCUDA = 1, 2


class Array:
    """An n-dimensional array that keeps its data in a NumPy array, on one of :data:`DEVICES`."""

    def __init__(self, data: np.ndarray, device: str = "cpu") -> None:
        if device not in DEVICES:
            raise ValueError(f"unknown device {device!r}; virtarray has {DEVICES}")
        self._data = data
        self.device = device

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    def __dlpack_device__(self) -> tuple[int, int]:
        index = DEVICES.index(self.device)
        # BUG (on purpose): a virtual device's host memory is claimed as CUDA memory
        return (KDLCUDA, index) if index else (KDLCPU, 0)

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        here = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) not in (here, (KDLCPU, 0)):
            raise BufferError(f"virtarray exports to {here} or the CPU, not {dl_device}")
        kw = {"max_version": max_version, "copy": copy}
        cap = self._data.__dlpack__(**{k: v for k, v in kw.items() if v is not None})
        if here != (KDLCPU, 0) and dl_device is None:
            _set_device(cap, here)
        return cap

    def __repr__(self) -> str:
        return f"virtarray.Array({self._data!r}, device={self.device!r})"


def _set_device(cap: Any, device: tuple[int, int]) -> None:
    """Write ``device`` into the DLTensor of a fresh NumPy capsule (the field follows the data
    pointer in both managed tensor layouts: after the version and manager context and deleter
    and flags in a versioned one, first in a legacy one)."""
    import ctypes

    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                  ctypes.c_char_p]
    name = get_name(cap)
    # versioned: version (8 bytes), manager_ctx, deleter, flags (8 each), then the DLTensor
    tensor = get_pointer(cap, name) + (32 if name == b"dltensor_versioned" else 0)
    pair = (ctypes.c_int32 * 2).from_address(tensor + ctypes.sizeof(ctypes.c_void_p))
    pair[0], pair[1] = device


def asarray(obj: Any, *, device: str = "cpu", copy: bool | None = None) -> Array:
    """An Array of ``obj`` on ``device``; it shares a NumPy array's memory unless ``copy``."""
    return Array(np.asarray(obj) if copy is None else np.array(obj, copy=copy), device)


def from_dlpack(x: Any, *, device: Any = None, copy: bool | None = None) -> Array:
    """Import an array of any DLPack producer (host memory), onto the CPU."""
    return Array(np.from_dlpack(x, device=device, copy=copy))
