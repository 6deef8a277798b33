"""The checker's adapter of MLX."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbridge.libraries import library

from .base import Adapter, Observed, Unsupported, det_values, observe_capsule_of, ops_view

#: the element types Mlx holds (dlbridge's published data, not its conclusions)
_DTYPES = library("mlx").dtypes or ()


class MlxLib(Adapter, library="mlx"):
    result_modules = ("mlx",)
    legacy_capsules = True
    note = (
        "mlx.core.array on the CPU: exports legacy capsules only; consumer: "
        "mx.from_dlpack(x, copy=), which always copies CPU data and has no device="
    )

    @staticmethod
    def read_result(y: Any) -> Observed:
        import mlx.core as mx

        if y.dtype == mx.bfloat16:  # MLX 0.32 cannot export bfloat16 through DLPack
            import ml_dtypes

            obs = Observed(
                kind="mlx.core.array",
                dtype="bfloat16",
                shape=tuple(y.shape),
                writable=True,
                device=(1, 0),
            )
            obs.values = np.array(y.astype(mx.float32)).astype(ml_dtypes.bfloat16)
            return obs
        # MLX arrays export writable buffers (np.asarray(x) writes into them): writable
        return observe_capsule_of(y, "mlx.core.array", True)

    def _dt(self, name):
        mx = self.load()
        if name not in _DTYPES:
            raise Unsupported(f"mlx has no dtype {name}")
        return getattr(mx, "bool_" if name == "bool" else name)

    def make(self, recipe, ref):
        mx = self.load()
        dt = self._dt(recipe.dtype)
        if recipe.readonly:
            raise Unsupported("mlx arrays cannot be read-only")
        if any(op[0] in ("misalign", "shift8") for op in recipe.ops):
            raise Unsupported("not expressible with mlx (it allocates its own memory)")
        base = det_values(recipe.dtype, recipe.shape, recipe.order)
        if recipe.dtype == "bfloat16":
            host = np.ascontiguousarray(base.astype(np.float32))
        else:
            host = np.ascontiguousarray(base)
        if recipe.order == "F" and base.ndim > 1:  # an F-order view of a C-order buffer
            x = mx.array(np.ascontiguousarray(host.T), dtype=dt).T
        elif base.ndim == 0:  # mx.array(0-d ndarray) has shape (1,) in MLX 0.32
            x = mx.array(host.reshape(1), dtype=dt).reshape(())
        else:
            x = mx.array(host, dtype=dt)
        x = ops_view(
            x, recipe,
            transpose=lambda v: v.T,
            index=lambda v, ix: v[ix],
            broadcast=lambda v, shape: mx.broadcast_to(v, shape),
        )
        mx.eval(x)
        return x

    def consume(self, obj, *, device=None, copy=None):
        if device is not None:
            raise Unsupported("mx.from_dlpack has no device= argument")
        kw = {} if copy is None else {"copy": copy}
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y):
        mx = self.load()
        return complex(mx.sum(y.astype(mx.float32) if y.dtype == mx.bfloat16 else y).item())
