"""The checker's adapter of tvm_ffi."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import refcapsule as rc
from .base import Adapter, Observed, Unsupported, dlpack_device, from_capsule_info


def _device_values(y: Any) -> np.ndarray | None:
    """Host copy of an array on a device the checker can reach through a library (oneAPI)."""
    dev = dlpack_device(y)
    if dev is not None and dev[0] == 14:
        try:
            import dpnp

            return np.array(dpnp.asnumpy(dpnp.from_dlpack(y)), copy=True, order="C")
        except Exception:  # noqa: BLE001
            return None
    return None


class TvmFfiLib(Adapter, library="tvm_ffi"):
    result_modules = ("tvm_ffi",)
    takes_kwargs = False
    devices = frozenset({1, 2, 3, 4, 7, 8, 10, 13, 14})

    @staticmethod
    def read_result(y: Any) -> Observed:
        obs = Observed(kind="tvm_ffi.Tensor")
        dev = dlpack_device(y)
        if dev is not None and not rc.host_readable(dev):
            info = rc.probe(y)
            if info is None:
                raise BufferError("cannot read the tensor's capsule")
            from_capsule_info(obs, info)
            obs.values = _device_values(y)
        else:
            info = rc.read_object(y)
            from_capsule_info(obs, info)
        obs.dtype = info.dtype
        obs.ptr = info.data_ptr if info.size else None
        obs.device = info.device
        obs.writable = None  # tvm_ffi tensors carry no read-only flag; kernels may write them
        return obs

    def make(self, recipe, ref):
        tvm_ffi = self.load()
        if recipe.readonly:
            raise Unsupported("tvm_ffi tensors have no read-only flag")
        return tvm_ffi.from_dlpack(ref)

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj, **kw)
