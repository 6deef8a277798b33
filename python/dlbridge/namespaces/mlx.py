"""MLX: copies host data on import.

Measured peer facts:

- mlx 0.32: ``mx.from_dlpack`` always copies host data and narrows float64/complex128 (so the
  target imports with ``mx.array(t, dtype=...)``, a copy); MLX exports legacy capsules only.
"""

from __future__ import annotations

from .._layout import negative_strides
from .base import Device, ImportRoute, Namespace, device_of


class Mlx(Namespace):
    """MLX: ``mx.from_dlpack`` copies host data (always), narrows float64 to float32 and
    complex128 to complex64 on import, and refuses negative strides (ValueError); its arrays
    export legacy capsules only, so dlbridge imports them read-only."""

    name = "mlx"
    module = "mlx.core"
    pip = "mlx[cpu]"
    modules = ("mlx",)
    aliases = ("mlx", "mlx.core", "mx")
    rank = 12
    routes = {
        # MLX on the CPU copies host data on import, always
        "import_copy": ImportRoute(
            "the library's import, which copies (it cannot alias memory it did not allocate)",
            copies=True,
            why="mlx copies on import",
        ),
    }
    result = "mlx.core.array"
    #: dtypes MLX holds (on the CPU; its GPU has no float64); the checker's MLX producer reads
    #: the same list
    DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "bfloat16", "float32", "float64", "complex64")

    def owns(self, x):
        mx = self.loaded()
        return mx is not None and isinstance(x, mx.array)

    def device(self, x):
        return device_of(x) or Device("cpu")

    def to_host(self, x):
        return x

    def dtype_route(self, dtype):
        if dtype in self.DTYPES:
            return "import_copy"  # MLX copies host data on import, always
        return f"refuse: mlx has no {dtype} dtype"

    def layout_problem(self, t):
        if negative_strides(t.shape, t.strides):
            return "mx.from_dlpack refuses negative strides"
        return None

    def from_tensor(self, t, route):
        mx = self.load()
        dt = getattr(mx, "bool_" if t.dtype.name == "bool" else t.dtype.name)
        # mx.from_dlpack copies anyway, and would narrow float64/complex128; mx.array keeps the
        # dtype it is given
        y = mx.array(t, dtype=dt)
        mx.eval(y)
        return y


__all__ = ["Mlx"]
