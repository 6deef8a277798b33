"""The checker's adapter of JAX."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Adapter, Observed, Unsupported, dlpack_device


class JaxLib(Adapter, library="jax"):
    result_modules = ("jax", "jaxlib")
    readonly_results = True
    note = "run with jax_enable_x64=True so that 64-bit dtypes exist"

    @staticmethod
    def read_result(y: Any) -> Observed:
        obs = Observed(kind="jax.Array")
        obs.dtype = np.dtype(y.dtype).name
        obs.shape = tuple(y.shape)
        obs.writable = False  # jax arrays are immutable
        obs.device = dlpack_device(y)
        try:
            obs.ptr = int(y.unsafe_buffer_pointer()) if y.size else None
        except Exception:  # noqa: BLE001
            pass
        obs.values = np.array(np.asarray(y), copy=True, order="C")
        return obs

    def setup(self):
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy

    def make(self, recipe, ref):
        self.load()
        import jax.numpy as jnp

        if not recipe.plain:
            raise Unsupported(
                "JAX arrays have no user-visible layout (always its "
                "own C-contiguous, aligned buffer)"
            )
        try:
            dt = jnp.dtype(recipe.dtype)
        except TypeError as e:
            raise Unsupported(f"jax has no dtype {recipe.dtype}") from e
        return jnp.asarray(np.array(ref, copy=True, order="C"), dtype=dt)

    def src_readonly(self, x):
        return True  # immutable

    def src_ptr(self, x):
        return int(x.unsafe_buffer_pointer())

    def device_arg(self, which):
        import jax

        if which in ("cpu", "native"):
            return jax.devices("cpu")[0]
        return super().device_arg(which)

    def from_dlpack(self, obj, **kw):
        self.load()
        import jax.numpy as jnp

        return jnp.from_dlpack(obj, **kw)

    def native_reduce(self, y):
        import jax.numpy as jnp

        return complex(jnp.sum(y))
