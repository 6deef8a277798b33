"""The checker's adapters of NumPy and array_api_strict."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Adapter, Observed, Unsupported, observe_numpy, reference


class NumPyLib(Adapter, library="numpy"):
    readonly_results = True

    def make(self, recipe, ref):
        return reference(recipe)  # a fresh array with the reference's layout and flags

    def src_readonly(self, x):
        return not x.flags.writeable

    def src_ptr(self, x):
        return x.__array_interface__["data"][0]

    def device_arg(self, which):
        if which in ("cpu", "native"):
            return "cpu"
        return super().device_arg(which)

    def from_dlpack(self, obj, **kw):
        return np.from_dlpack(obj, **kw)

    def native_reduce(self, y):
        return complex(np.sum(y))


class ArrayApiStrictLib(Adapter, library="array_api_strict"):
    result_modules = ("array_api_strict",)
    readonly_results = True

    @staticmethod
    def read_result(y: Any) -> Observed:
        obs = observe_numpy(y._array)
        obs.kind = "array_api_strict.Array"
        return obs

    def make(self, recipe, ref):
        xps = self.load()
        if recipe.dtype in ("float16", "bfloat16") or recipe.dtype.startswith("float8"):
            raise Unsupported(f"array_api_strict has no {recipe.dtype}")
        x = xps.asarray(ref)
        if x._array.ctypes.data != ref.ctypes.data or x._array.strides != ref.strides:
            raise Unsupported("array_api_strict copied the data (layout not expressible)")
        return x

    def src_readonly(self, x):
        return not x._array.flags.writeable

    def src_ptr(self, x):
        return x._array.__array_interface__["data"][0]

    def device_arg(self, which):
        xps = self.load()
        if which in ("cpu", "native"):
            return xps.Device("CPU_DEVICE")
        return super().device_arg(which)

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y):
        return complex(self.load().sum(y)._array)
