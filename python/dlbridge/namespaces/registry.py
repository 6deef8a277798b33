"""The registry of namespaces: :func:`get` a namespace by module or name, the :func:`owner` of
an array, a :func:`device_helper` for devices dlbridge cannot reach, the :func:`installed`
ones."""

from __future__ import annotations

from typing import Any

from .._native import Device
from .arrow import Pandas, PyArrow
from .base import Namespace
from .cuda import CuPy
from .dlbridge import Dlbridge
from .jax import Jax
from .mlx import Mlx
from .numpy import ArrayApiStrict, NumPy
from .paddle import Paddle
from .sycl import Dpnp
from .tensorflow import TensorFlow
from .torch import Torch
from .tvm import TvmFfi
from .warp import Warp

#: every library dlbridge knows, one row each (each class holds its library's facts)
_CLASSES: list[type[Namespace]] = [
    NumPy, Torch, Jax, Dpnp, PyArrow, TensorFlow, ArrayApiStrict, CuPy, TvmFfi, Dlbridge,
    Paddle, Mlx, Warp, Pandas,
]
_INSTANCES: dict[str, Namespace] = {cls.name: cls() for cls in _CLASSES}
_ALIASES: dict[str, Namespace] = {
    alias: ns for ns in _INSTANCES.values() for alias in (ns.name, *ns.aliases)
}
#: module names (``module.__name__``) that stand for a namespace
_MODULES = {
    module: ns.name for ns in _INSTANCES.values() for module in (ns.module, *ns.modules)
}

NAMES: tuple[str, ...] = tuple(_INSTANCES)


def get(to: Any) -> Namespace:
    """The namespace ``to`` names: a module (``numpy``, ``torch``, ``jax.numpy``...) or a name
    (``"numpy"``, ``"np"``, ``"torch"``, ``"jax"``...). ValueError when unknown."""
    if isinstance(to, Namespace):
        return to
    if isinstance(to, str):
        ns = _ALIASES.get(to)
        if ns is not None:
            return ns
    else:
        name = getattr(to, "__name__", None)
        if isinstance(name, str) and name in _MODULES:
            return _INSTANCES[_MODULES[name]]
    raise ValueError(
        f"unknown target {to!r}: pass a module or one of the names "
        f"{', '.join(repr(n) for n in NAMES)}"
    )


def owner(x: Any) -> Namespace | None:
    """The namespace whose array ``x`` is (None for other objects)."""
    for ns in _INSTANCES.values():
        if ns.loaded() is not None and ns.owns(x):
            return ns
    return None


def device_helper(device: Device) -> Namespace | None:
    """An installed library that can copy data on ``device``, which dlbridge cannot reach
    itself (dpnp for oneAPI devices)."""
    for name in ("dpnp", "cupy"):
        ns = _INSTANCES[name]
        overrides = type(ns).copy_on_device is not Namespace.copy_on_device
        if ns.installed() and ns.can_hold(device) and overrides:
            return ns
    return None


def installed() -> list[str]:
    """Names of the namespaces whose library is installed."""
    return [ns.name for ns in _INSTANCES.values() if ns.installed()]


__all__ = ["NAMES", "device_helper", "get", "installed", "owner"]
