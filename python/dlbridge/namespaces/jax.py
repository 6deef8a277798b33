"""JAX: compact, 64-byte aligned layouts only; 64-bit types need x64. JAX 0.12's from_dlpack
asks for versioned capsules (read-only flag and float8 travel); older JAX asks for legacy ones.

Measured peer facts:

- JAX 0.10: ``jnp.from_dlpack`` asks for legacy capsules only, so read-only data cannot reach it
  zero-copy (and no float8); it takes compact strides only (a permutation of a dense layout),
  aliases only 64-byte aligned data (copies otherwise, ``ValueError`` under ``copy=False``), and
  without ``jax_enable_x64`` it silently narrows 64-bit types (float64 -> float32).
"""

from __future__ import annotations

from typing import Any

from .._layout import compact
from .base import CPU, FLOAT8, SIXTY_FOUR_BIT, SUBBYTE, Device, ImportRoute, Namespace, State
from .numpy import ml_dtypes_view


class _Spy:
    """A host producer that records the ``max_version`` each consumer asks it for."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.asked: list[tuple[int, int] | None] = []

    def __dlpack__(self, **kwargs: Any) -> Any:
        self.asked.append(kwargs.get("max_version"))
        return self.source.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


class Jax(Namespace):
    name = module = "jax"
    pip = "jax[cpu]"
    modules = ("jax.numpy",)
    aliases = ("jax", "jax.numpy", "jnp")
    rank = 3
    routes = {
        "host_copy": ImportRoute(
            "jax.numpy.array of an ml_dtypes view (a copy: JAX's legacy capsules cannot carry "
            "float8)",
            copies=True,
            why="JAX's legacy capsules cannot carry float8: a copy",
        ),
    }
    importer = "jax.numpy.from_dlpack"
    immutable = True
    readonly_why = (
        "this JAX's jnp.from_dlpack asks for legacy DLPack capsules only, which cannot carry "
        "the read-only flag (dlbridge answers them with a copy)"
    )
    result = "jax.Array"
    #: JAX aliases only data aligned to this many bytes (it copies otherwise)
    alignment = 64

    def __init__(self) -> None:
        super().__init__()
        self._asks_for: tuple[tuple[int, int] | None] | None = None

    def load(self):
        if self._mod is None:
            import jax
            import jax.numpy

            self._mod = jax
        return self._mod

    @property
    def asks_for(self) -> tuple[int, int] | None:
        """The ``max_version`` jnp.from_dlpack passes to producers (None: legacy only), asked
        once of a four-byte producer."""
        if self._asks_for is None:
            from .._native import from_dlpack

            spy = _Spy(from_dlpack(bytearray(4)))
            self.load().numpy.from_dlpack(spy)
            self._asks_for = (spy.asked[-1] if spy.asked else None,)
        return self._asks_for[0]

    @property
    def alias_readonly(self) -> bool:  # type: ignore[override]
        """A versioned capsule carries the read-only flag, and JAX's arrays are immutable."""
        return self.asks_for is not None and self.asks_for >= (1, 0)

    def owns(self, x):
        jax = self.loaded()
        return jax is not None and isinstance(x, jax.Array)

    def device(self, x):
        devs = list(x.devices())
        if len(devs) != 1:
            return None
        return Device(devs[0])

    def state(self, x):
        out = []
        try:
            ndev = len(x.devices())
        except Exception:  # noqa: BLE001 - tracers
            ndev = 1
        if ndev > 1:
            out.append(State(
                f"is sharded over {ndev} devices (DLPack describes one buffer)",
                "jax.device_get(x) or x.addressable_data(0)", None, 0, None, refuse=True,
            ))
        is_ready = getattr(x, "is_ready", None)
        if is_ready is not None and not is_ready():
            out.append(State(
                "is still being computed", ".block_until_ready()", None, 0,
                lambda v: v.block_until_ready(),
            ))
        return out

    def to_host(self, x):
        jax = self.load()
        if all(d.platform == "cpu" for d in x.devices()):
            return x
        return jax.device_put(x, jax.devices("cpu")[0])

    def devices(self):
        jax = self.load()
        out = [Device("cpu")]
        try:
            out += [Device(d) for d in jax.devices() if d.platform != "cpu"]
        except Exception:  # noqa: BLE001
            pass
        return out

    def can_hold(self, device):
        if device.type == CPU:
            return True
        return any(d == device for d in self.devices())

    def x64(self) -> bool:
        return bool(self.load().config.jax_enable_x64)

    def dtype_route(self, dtype):
        jax = self.load()
        if dtype.startswith(SUBBYTE):
            return f"refuse: JAX has no packed {dtype}"
        try:
            jax.numpy.dtype(dtype)
        except TypeError:
            return f"refuse: JAX has no {dtype} dtype"
        if dtype == "bcomplex32":  # an ml_dtypes type to jax.numpy, unknown to its DLPack code
            return "refuse: JAX takes no bcomplex32 through DLPack"
        if dtype in SIXTY_FOUR_BIT and not self.x64():
            return (
                f"refuse: without jax_enable_x64 JAX would silently narrow {dtype} to "
                f"{dtype.replace('64', '32').replace('complex128', 'complex64')}; call "
                "jax.config.update('jax_enable_x64', True) first"
            )
        if dtype.startswith(FLOAT8) and (self.asks_for or (0, 0)) < (1, 1):
            # this JAX asks for capsules older than DLPack 1.1, which cannot carry float8
            return "host_copy"
        return "dlpack"

    def layout_problem(self, t):
        if not compact(t.shape, t.strides):
            return (
                "JAX takes only compact strides (a permutation of a dense layout), not "
                f"strides {t.strides} for shape {t.shape}"
            )
        if t.size and t.data_ptr % self.alignment:
            return f"JAX aliases only {self.alignment}-byte aligned data (it would copy it itself)"
        return None

    def _device(self, device: Device | None) -> Any:
        jax = self.load()
        if device is None or device.type == CPU:
            return jax.devices("cpu")[0]
        for d in jax.devices():
            if Device(d) == device:
                return d
        raise BufferError(f"JAX has no device {device}")

    def from_tensor(self, t, route):
        jax = self.load()
        if route == "host_copy":  # float8: through an ml_dtypes NumPy view, copied by JAX
            return jax.numpy.array(ml_dtypes_view(t), copy=True)
        return jax.numpy.from_dlpack(t)

    def from_host(self, t, device, route):
        import numpy as np

        jax = self.load()
        host_view = ml_dtypes_view(t) if route == "host_copy" else np.from_dlpack(t)
        return jax.device_put(host_view, self._device(device))


__all__ = ["Jax"]
