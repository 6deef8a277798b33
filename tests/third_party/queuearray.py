"""queuearray: a stand-in for a oneAPI (SYCL) array library that passes streams, with its adapters
for dlbridge's checker, named on the command line as ``module:object``::

    PYTHONPATH=tests:tests/third_party python -m dlbridge check --cases device/oneapi_stream \\
        --libraries queuearray:QueueArrayAdapter,queuearray:IntStreamAdapter

No installed consumer passes ``stream=`` for oneAPI memory (dpnp and the others pass none), so
the checker's case ``device/oneapi_stream`` is tested against this one. Its arrays claim the
oneAPI device (``kDLOneAPI`` = 14); their memory is host memory, which a CPU-only machine has.
Its producer checks ``stream=`` as dpctl does: None or a :class:`Queue`, and None only for a CPU
target. Its consumer, :func:`from_dlpack`, passes its :class:`Queue` for oneAPI memory (what the
standard leaves to the libraries' agreement); :func:`from_dlpack_cuda_style` passes what CUDA
code passes, the integer 1 (the legacy default stream), and its queue for a CPU target: both
wrong, and the checker says so. The capsules are built with the tests' ctypes helpers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbridge_check import Adapter, Recipe, Unsupported
from dlpack_ctypes import FakeManagedTensor

__version__ = "1.0"
ONEAPI = 14


class Queue:
    """An in-order queue of the stand-in device (dpctl's SyclQueue plays this part)."""


QUEUE = Queue()


class Array:
    """An array on the stand-in oneAPI device."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def __dlpack_device__(self) -> tuple[int, int]:
        return (ONEAPI, 0)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        if stream is not None and not isinstance(stream, Queue):
            raise TypeError(f"stream must be None or a queuearray.Queue, not {stream!r}")
        if dl_device is not None and tuple(dl_device) == (1, 0):
            if stream is not None:
                raise ValueError("stream must be None for a CPU target")
            if copy is False:
                raise BufferError("the device's memory reaches the host only by a copy")
            return np.array(self.data).__dlpack__(max_version=max_version, copy=True)
        if dl_device is not None and tuple(dl_device) != (ONEAPI, 0):
            raise BufferError(f"cannot export to {dl_device}")
        if copy:
            raise BufferError("this stand-in copies only to the host")
        a = self.data
        strides = tuple(s // a.itemsize for s in a.strides)
        versioned = max_version is not None and max_version[0] >= 1
        tensor = FakeManagedTensor(data=a, shape=a.shape, strides=strides, dtype=a.dtype.name,
                                   device=(ONEAPI, 0), versioned=versioned)
        return tensor.capsule()


def _import(x: Any, own_stream: Any, cpu_stream: Any, device: Any, copy: bool | None) -> Any:
    if device is None and x.__dlpack_device__()[0] == ONEAPI:
        # order the producer's pending work before this library's queue, then read the data
        # through the host (the stand-in device's memory is host memory)
        x.__dlpack__(stream=own_stream, max_version=(1, 0))
    return np.from_dlpack(_CpuTarget(x, cpu_stream), copy=copy)


class _CpuTarget:
    """``x``, asked for a host copy with the given stream."""

    def __init__(self, x: Any, stream: Any) -> None:
        self.x, self.stream = x, stream

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)

    def __dlpack__(self, **kw: Any) -> Any:
        kw.pop("dl_device", None)
        return self.x.__dlpack__(stream=self.stream, dl_device=(1, 0), **kw)


def from_dlpack(x: Any, *, device: Any = None, copy: bool | None = None) -> np.ndarray:
    """Import with the streams the standard allows: this library's queue for its own device,
    None for a CPU target."""
    return _import(x, QUEUE, None, device, copy)


def from_dlpack_cuda_style(x: Any, *, device: Any = None, copy: bool | None = None) -> np.ndarray:
    """Import as CUDA code would: stream 1 for the device, and the queue for a CPU target."""
    return _import(x, 1, QUEUE, device, copy)


class QueueArrayAdapter(Adapter):
    name = "queuearray"
    module = "queuearray"
    devices = frozenset({1, ONEAPI})
    readonly_results = True

    def make(self, recipe: Recipe, ref: np.ndarray) -> Any:
        if not ref.flags.c_contiguous:
            raise Unsupported("the stand-in makes C-contiguous arrays only")
        return self.load().Array(np.array(ref, copy=True))

    def from_dlpack(self, obj: Any, **kw: Any) -> Any:
        return self.load().from_dlpack(obj, **kw)


class IntStreamAdapter(QueueArrayAdapter):
    name = "intstream"
    producer = False

    def from_dlpack(self, obj: Any, **kw: Any) -> Any:
        return self.load().from_dlpack_cuda_style(obj, **kw)
