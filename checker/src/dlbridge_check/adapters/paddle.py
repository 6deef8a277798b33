"""The checker's adapter of paddle."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..layout import negative_strides
from .base import Adapter, Observed, Recipe, Unsupported, det_values, observe_capsule_of, ops_view


def _steps(recipe: Recipe) -> list[int]:
    return [
        s.step
        for op in recipe.ops
        if op[0] == "ix"
        for s in (op[1] if isinstance(op[1], tuple) else (op[1],))
        if isinstance(s, slice) and s.step is not None
    ]


class PaddleLib(Adapter, library="paddle"):
    result_modules = ("paddle",)
    slow_import = True  # about 3 s
    note = ("paddle.Tensor (CPU); consumer: paddle.from_dlpack(x, device=, copy=), which asks for "
            "max_version=(1, 2); also offers __dlpack_c_exchange_api__")

    @staticmethod
    def read_result(y: Any) -> Observed:
        # the dtype comes from the capsule: paddle 3.3 prints its uint16 as "paddle.bfloat16"
        return observe_capsule_of(y, "paddle.Tensor", True)  # paddle tensors cannot be read-only

    def setup(self):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "No ccache found" on import
            import paddle

        paddle.set_device("cpu")

    def load(self):
        if self._mod is None:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return super().load()
        return self._mod

    def make(self, recipe, ref):
        paddle = self.load()
        dt = getattr(paddle, recipe.dtype if recipe.dtype != "bool" else "bool", None)
        if dt is None or recipe.dtype.startswith("float8_e4m3fnuz"):
            raise Unsupported(f"paddle has no dtype {recipe.dtype}")
        if recipe.readonly:
            raise Unsupported("paddle tensors cannot be read-only")
        if negative_strides(ref.shape, ref.strides) or any(s < 0 for s in _steps(recipe)):
            raise Unsupported("paddle tensors cannot have negative strides (paddle.flip copies)")
        if any(op[0] in ("misalign", "broadcast") for op in recipe.ops):
            raise Unsupported(
                "not expressible with paddle (expand copies; it allocates aligned memory)"
            )
        if any(op[0] == "shift8" for op in recipe.ops):
            return paddle.from_dlpack(ref)  # shares the shifted NumPy buffer
        base = det_values(recipe.dtype, recipe.shape, recipe.order)
        if recipe.dtype in ("bfloat16",) or recipe.dtype.startswith("float8"):  # exact via float32
            t = paddle.to_tensor(base.astype(np.float32)).astype(dt)
            if recipe.order == "F" and len(recipe.shape) > 1:
                raise Unsupported("F-order bfloat16/float8 not built")
        else:
            t = paddle.from_dlpack(base)  # paddle aliases the NumPy buffer, F order included
        return ops_view(
            t, recipe,
            transpose=lambda v: v.transpose(list(reversed(range(v.ndim)))),
            index=lambda v, ix: v[ix],
        )

    def device_arg(self, which):
        if which in ("cpu", "native"):
            return "cpu"
        return super().device_arg(which)

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y):
        return complex(self.load().sum(y).item())
