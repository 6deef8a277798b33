"""NumPy (and array_api_strict, which wraps it): ml_dtypes views for bfloat16 and float8.

Measured peer facts:

- NumPy 2.4: ``numpy.from_dlpack`` has no bfloat16/float8 (``RuntimeError``/``BufferError``);
  with ml_dtypes installed dlbridge hands NumPy such data as an ml_dtypes view instead.
- array_api_strict 2.6: wraps NumPy (honours READ_ONLY), has no float16/bfloat16.
"""

from __future__ import annotations

import sys
from typing import Any

from .._native import DType, Tensor
from .base import (
    BASIC_DTYPES,
    FLOAT8,
    SUBBYTE,
    Device,
    ImportRoute,
    Namespace,
    has_ml_dtypes,
)


class NumPy(Namespace):
    name = module = pip = "numpy"
    aliases = ("np", "numpy")
    rank = 1
    routes = {
        "ml_dtypes": ImportRoute(
            "an ml_dtypes view of the bytes (numpy.from_dlpack has no bfloat16 / float8; "
            "zero-copy)"
        ),
    }
    result = "numpy.ndarray"

    def owns(self, x):
        np = self.loaded()
        return np is not None and isinstance(x, np.ndarray)

    def device(self, x):
        return Device("cpu")

    def source(self, x):
        # NumPy's __dlpack__ refuses ml_dtypes types (bfloat16, float8, bcomplex32): hand
        # dlbridge the same bytes as unsigned ints and view them as the real dtype (zero-copy).
        name = x.dtype.name
        if (
            name not in BASIC_DTYPES
            and not name.startswith(SUBBYTE)
            and x.dtype.itemsize in (1, 2, 4)
        ):
            try:
                target = DType(name)
            except ValueError:
                return x
            if target.itemsize != x.dtype.itemsize:
                return x
            np = self.load()
            unsigned = x.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[x.dtype.itemsize])
            from .._native import from_dlpack

            return from_dlpack(unsigned).view(target)
        return x

    def to_host(self, x):
        return x

    def dtype_route(self, dtype):
        if dtype in BASIC_DTYPES:
            return "dlpack"
        if dtype.startswith(SUBBYTE):
            return f"refuse: NumPy has no packed {dtype} (DLPack packs two 4-bit values per byte)"
        if dtype in ("bfloat16", "bcomplex32") or dtype.startswith(FLOAT8):
            if has_ml_dtypes():
                return "ml_dtypes"
            return (
                f"refuse: numpy.from_dlpack has no {dtype}; install ml_dtypes "
                f"(pip install ml_dtypes) and dlbridge returns an ml_dtypes.{dtype} array"
            )
        return f"refuse: NumPy has no {dtype} dtype"

    def from_tensor(self, t, route):
        np = self.load()
        if route == "ml_dtypes":
            return ml_dtypes_view(t)
        return np.from_dlpack(t)


class _ArrayInterface:
    """Keeps a Tensor alive behind a NumPy view built from an ``__array_interface__``."""

    def __init__(self, tensor: Tensor, iface: dict) -> None:
        self.tensor = tensor
        self.__array_interface__ = iface


def ml_dtypes_view(t: Tensor) -> Any:
    """A zero-copy NumPy view of a host tensor whose dtype NumPy only knows through ml_dtypes
    (bfloat16, float8, bcomplex32): the bytes as unsigned ints, then viewed as the ml_dtypes
    type."""
    import ml_dtypes
    import numpy as np

    dt = np.dtype(getattr(ml_dtypes, t.dtype.name))
    size = t.itemsize
    iface = {
        "version": 3,
        "shape": tuple(t.shape),
        "typestr": f"{'<' if sys.byteorder == 'little' else '>'}u{size}" if size > 1 else "|u1",
        "data": (t.data_ptr, bool(t.readonly)),
        "strides": tuple(s * size for s in t.strides),
    }
    return np.asarray(_ArrayInterface(t, iface)).view(dt)


class ArrayApiStrict(Namespace):
    name = module = "array_api_strict"
    pip = "array-api-strict"
    aliases = ("array_api_strict", "xps")
    rank = 7
    result = "array_api_strict.Array"

    def owns(self, x):
        xps = self.loaded()
        return (
            xps is not None
            and type(x).__module__.startswith("array_api_strict")
            and hasattr(x, "__array_namespace__")
        )

    def device(self, x):
        return Device("cpu")

    def to_host(self, x):
        xps = self.load()
        cpu = xps.Device("CPU_DEVICE")
        return x if x.device == cpu else x.to_device(cpu)

    def dtype_route(self, dtype):
        if dtype in BASIC_DTYPES and dtype != "float16":
            return "dlpack"
        return f"refuse: array_api_strict has no {dtype} dtype (the array API has none)"

    def from_tensor(self, t, route):
        return self.load().from_dlpack(t)


__all__ = ["ArrayApiStrict", "NumPy", "ml_dtypes_view"]
