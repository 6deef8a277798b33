"""The checker's adapter of Warp."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbridge.libraries import library

from .base import Adapter, Observed, Unsupported, observe_capsule_of

#: the element types Warp holds (dlbridge's published data, not its conclusions)
_DTYPES = library("warp").dtypes or ()


class WarpLib(Adapter, library="warp"):
    result_modules = ("warp",)
    takes_kwargs = False
    legacy_capsules = True
    note = ("warp.array on its CPU device: __dlpack__(stream=) only, legacy capsules; consumer: "
            "wp.from_dlpack(x), no device= / copy=; producer: plain cases are Warp's own "
            "allocations, views are wp.from_dlpack of the NumPy reference")

    @staticmethod
    def read_result(y: Any) -> Observed:
        return observe_capsule_of(y, "warp.array", True)  # warp arrays have no read-only flag

    def setup(self):
        import warp as wp

        config: Any = wp.config  # warp 1.19 reads config.quiet but does not declare it
        config.quiet = True
        wp.init()

    def make(self, recipe, ref):
        wp = self.load()
        if recipe.dtype not in _DTYPES:
            raise Unsupported(f"warp has no dtype {recipe.dtype}")
        if recipe.readonly:
            raise Unsupported("warp arrays cannot be read-only")
        if ref.ndim == 0:
            raise Unsupported("warp has no 0-d arrays (wp.array of a 0-d array has shape (1,))")
        if recipe.plain:
            return wp.array(
                np.array(ref, copy=True, order="C"),
                dtype=wp.dtype_from_numpy(ref.dtype),
                device="cpu",
            )
        # a Warp view of the reference's memory (Warp keeps any strides, negative and zero ones too)
        x = wp.from_dlpack(ref)
        want = tuple(ref.strides)
        if tuple(x.strides) != want or tuple(x.shape) != tuple(ref.shape):
            raise Unsupported(f"warp did not keep the layout: strides {x.strides}, expected {want}")
        return x

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj)

    def native_reduce(self, y):
        wp = self.load()
        if y.dtype not in (wp.float32, wp.float64):
            raise Unsupported("wp.utils.array_sum takes float arrays")
        return complex(float(wp.utils.array_sum(y)))
