"""The checker's adapter of dpnp."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Adapter, Observed, Unsupported, det_values, dlpack_device


class DpnpLib(Adapter, library="dpnp"):
    result_modules = ("dpnp", "dpctl")
    readonly_results = True
    devices = frozenset({1, 14})
    note = "arrays live on a SYCL device (kDLOneAPI = 14): the real cross-device cases"

    @staticmethod
    def read_result(y: Any) -> Observed:
        import dpnp

        u = y.get_array() if hasattr(y, "get_array") else y
        obs = Observed(kind=type(y).__module__.split(".")[0] + "." + type(y).__name__)
        obs.dtype = np.dtype(y.dtype).name
        obs.shape = tuple(y.shape)
        obs.writable = bool(u.flags.writable)
        obs.device = dlpack_device(y)
        obs.ptr = int(u._pointer) if y.size else None
        obs.strides = tuple(u.strides)
        obs.values = np.array(dpnp.asnumpy(y), copy=True, order="C")
        return obs

    def setup(self):
        import dpnp

        dpnp.arange(2)  # fail early if the SYCL device is unavailable

    def make(self, recipe, ref):
        dpnp = self.load()
        if recipe.dtype in ("bfloat16",) or recipe.dtype.startswith("float8"):
            raise Unsupported(f"dpnp has no {recipe.dtype}")
        if any(op[0] in ("misalign", "shift8") for op in recipe.ops):
            raise Unsupported("not expressible with dpnp (it allocates its own memory)")
        base = det_values(recipe.dtype, recipe.shape, recipe.order)
        x = dpnp.asarray(np.array(base, copy=True, order="C"))
        if recipe.order == "F":
            x = dpnp.asfortranarray(x)
        for op in recipe.ops:
            if op[0] == "T":
                x = x.T
            elif op[0] == "ix":
                x = x[op[1]]
            elif op[0] == "broadcast":
                x = dpnp.broadcast_to(x, op[1])
        if recipe.readonly:
            x.get_array().flags.writable = False
        return x

    def src_readonly(self, x):
        return not bool(x.get_array().flags.writable)

    def src_ptr(self, x):
        return int(x.get_array()._pointer)

    def device_arg(self, which):
        if which == "cpu":
            return (1, 0)
        if which == "native":
            return self.load().arange(1).sycl_device
        return super().device_arg(which)

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y):
        return complex(self.load().sum(y))
