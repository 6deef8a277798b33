"""The registry of namespaces: :func:`get` a namespace by module or name, the :func:`owner` of
an array, a :func:`device_helper` for devices dlbridge cannot reach, the :func:`installed`
ones.

It lists no library itself: every :class:`Namespace` subclass with a ``name`` defined in a
module of this package is one (a new library is its module and nothing else), in the order of
their ``rank``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._discover import classes_in
from .._native import Device
from .base import Namespace

_PACKAGE = __name__.rpartition(".")[0]
#: the modules of the package that hold no library
_NOT_LIBRARIES = frozenset({"base", "registry"})


def _discover() -> list[type[Namespace]]:
    """The library classes of the package's modules, in the order of their ``rank``."""
    found = classes_in(_PACKAGE, [str(Path(__file__).parent)], Namespace, _NOT_LIBRARIES)
    return sorted(found, key=lambda cls: (cls.rank, cls.name))


_INSTANCES: dict[str, Namespace] = {cls.name: cls() for cls in _discover()}
_ALIASES: dict[str, Namespace] = {
    alias: ns for ns in _INSTANCES.values() for alias in (ns.name, *ns.aliases)
}
#: module names (``module.__name__``) that stand for a namespace
_MODULES = {
    module: ns.name for ns in _INSTANCES.values() for module in (ns.module, *ns.modules)
}

#: the names of every library dlbridge knows, in the order of their ``rank``
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
    itself (dpnp for oneAPI devices): one whose namespace makes copies on its devices."""
    for ns in _INSTANCES.values():
        overrides = type(ns).copy_on_device is not Namespace.copy_on_device
        if overrides and ns.installed() and ns.can_hold(device):
            return ns
    return None


def installed() -> list[str]:
    """Names of the namespaces whose library is installed."""
    return [ns.name for ns in _INSTANCES.values() if ns.installed()]


__all__ = ["NAMES", "device_helper", "get", "installed", "owner"]
