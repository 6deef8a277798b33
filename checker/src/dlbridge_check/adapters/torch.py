"""The checker's adapter of torch."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import refcapsule as rc
from ..layout import negative_strides
from .base import Adapter, Observed, Unsupported, det_values, dlpack_device


def _torch_dtype(torch: Any, name: str) -> Any:
    dt = getattr(torch, name, None)
    if dt is None or not isinstance(dt, torch.dtype):
        raise Unsupported(f"torch has no dtype {name}")
    return dt


class TorchLib(Adapter, library="torch"):
    result_modules = ("torch",)
    modes = frozenset({"torch_conj", "torch_grad"})
    fresh_modes = frozenset({"torch_grad"})

    def in_mode(self, mode, x, ref):
        """``torch_conj``: the conjugate view (its conjugate bit set); ``torch_grad``: a tensor
        that requires grad."""
        if mode == "torch_conj":
            return x.conj(), np.conj(ref)
        if mode == "torch_grad":
            return x.clone().requires_grad_(True), ref
        return super().in_mode(mode, x, ref)

    @staticmethod
    def read_result(y: Any) -> Observed:
        obs = Observed(kind="torch.Tensor")
        obs.dtype = str(y.dtype).replace("torch.", "")
        obs.shape = tuple(y.shape)
        obs.ptr = int(y.data_ptr()) if y.numel() else None
        obs.writable = True  # torch has no read-only tensors
        obs.strides = tuple(y.stride())
        obs.device = (1, 0) if y.device.type == "cpu" else dlpack_device(y)
        if obs.device == (1, 0):
            info = rc.read_object(y.detach().resolve_conj().resolve_neg())
            obs.values = info.values
        return obs

    def make(self, recipe, ref):
        torch = self.load()
        dt = _torch_dtype(torch, recipe.dtype)
        if recipe.readonly:
            raise Unsupported("torch tensors cannot be read-only")
        if negative_strides(ref.shape, ref.strides):
            raise Unsupported("torch tensors cannot have negative strides")
        if any(op[0] == "misalign" for op in recipe.ops):
            raise Unsupported("not expressible with torch")
        if any(op[0] == "shift8" for op in recipe.ops):
            t = torch.from_numpy(ref)  # shares the shifted buffer
            return t
        base = det_values(recipe.dtype, recipe.shape, recipe.order)
        if recipe.dtype == "bfloat16" or recipe.dtype.startswith(
            "float8"
        ):  # ml_dtypes: via float32, exact here
            t = torch.from_numpy(base.astype(np.float32)).to(dt)
        else:
            t = torch.from_numpy(base)
        for op in recipe.ops:
            if op[0] == "T":
                t = t.permute(*reversed(range(t.ndim)))
            elif op[0] == "ix":
                t = t[op[1]]
            elif op[0] == "broadcast":
                t = t.expand(*op[1])
        return t

    def src_ptr(self, x):
        return int(x.data_ptr())

    def src_device(self, x):
        return (1, 0) if x.device.type == "cpu" else super().src_device(x)

    def device_arg(self, which):
        if which in ("cpu", "native"):
            return "cpu"  # the CPU build: torch's default device
        return super().device_arg(which)

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y):
        return complex(y.sum().item())
