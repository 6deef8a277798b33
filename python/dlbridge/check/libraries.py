"""The checker's libraries: every adapter of the modules of :mod:`dlbridge.check.adapters`
(``ALL_LIBRARIES``; a new library's adapter needs no entry here, see that package's docstring),
which of them are installed (:func:`discover`), and :func:`observe`.

Results of any library are inspected by :func:`observe` (dtype, shape, values, data pointer,
writability, device), which dispatches on the result's type to the adapter that reads it
(``result_modules``), so a consumer that returns another library's array (dpnp returns NumPy
arrays for host data) is still read correctly.

Adapters import their library lazily, so discovery costs a ``find_spec`` per library and a worker
subprocess imports only the libraries of the pairs it runs.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..namespaces.base import HOST_TYPES
from . import adapters
from . import refcapsule as rc
from .adapters.base import (
    Library,
    Observed,
    Recipe,
    RefResult,
    Unsupported,
    det_values,
    from_capsule_info,
    observe_numpy,
    reference,
)


def _discover_adapters() -> list[type[Library]]:
    """The adapter classes of the modules of :mod:`dlbridge.check.adapters`, in the order of
    their ``rank``, the built-in ones last (each module imports no library: cheap)."""
    found: list[type[Library]] = []
    for info in pkgutil.iter_modules(adapters.__path__):
        if info.name == "base":
            continue
        module = importlib.import_module(f"{adapters.__name__}.{info.name}")
        found += [
            cls
            for cls in vars(module).values()
            if isinstance(cls, type)
            and issubclass(cls, Library)
            and cls.__module__ == module.__name__  # not one imported from another module
            and cls.name
        ]
    return sorted(found, key=lambda cls: (cls.builtin, cls.rank, cls.name))


ALL_LIBRARIES: list[type[Library]] = _discover_adapters()

#: The library each top-level module belongs to: its import name and the modules of its
#: results (an exception's class names the library that raised it).
LIBRARY_OF_MODULE: dict[str, str] = {
    module: cls.name
    for cls in ALL_LIBRARIES
    if not cls.builtin
    for module in (cls.module.split(".")[0], *cls.result_modules)
}


def _observe_dlbridge(y: Any) -> Observed:
    obs = Observed(kind="dlbridge.Tensor")
    obs.dtype = y.dtype.name
    obs.shape = tuple(y.shape)
    obs.strides = tuple(y.strides)
    obs.ptr = int(y.data_ptr) if y.size else None
    obs.writable = not y.readonly
    obs.is_copied = bool(y.is_copied)
    d = y.device
    obs.device = (int(d.type), int(d.id))
    if obs.device[0] in HOST_TYPES:
        info = rc.read_object(y)
        obs.values = info.values
        if info.dtype != obs.dtype:
            obs.problems.append(f"Tensor.dtype is {obs.dtype} but its capsule says {info.dtype}")
    return obs


def _observe_ref(y: RefResult) -> Observed:
    info = y.info
    obs = Observed(kind="capsule")
    from_capsule_info(obs, info)
    obs.ptr = info.data_ptr if info.size else None
    obs.writable = not info.readonly
    obs.device = info.device
    obs.is_copied = info.is_copied if info.versioned else None
    obs.problems = list(y.problems)
    obs.notes.append(info.describe())
    return obs


#: The reader of each library's results, by the top-level module of the result's type.
_READERS: dict[str, Callable[[Any], Observed]] = {
    "dlbridge": _observe_dlbridge,
    **{module: cls.read_result for cls in ALL_LIBRARIES for module in cls.result_modules},
}


def observe(y: Any) -> Observed:
    """Inspect any result array (dispatch on its type's module)."""
    mod = type(y).__module__ or ""
    name = type(y).__name__
    if isinstance(y, np.ndarray):
        return observe_numpy(y)
    if isinstance(y, RefResult):
        return _observe_ref(y)
    reader = _READERS.get(mod.split(".", 1)[0])
    if reader is not None:
        return reader(y)
    # unknown: read it through DLPack
    obs = Observed(kind=f"{mod}.{name}")
    info = rc.read_object(y)
    from_capsule_info(obs, info)
    obs.ptr = info.data_ptr if info.size else None
    obs.device = info.device
    return obs


def by_name() -> dict[str, Library]:
    return {cls.name: cls() for cls in ALL_LIBRARIES}


@dataclass
class Discovered:
    name: str
    installed: bool
    version: str | None
    producer: bool
    consumer: bool
    builtin: bool
    note: str = ""
    slow_import: bool = False
    #: why an installed library cannot be used here (then ``installed`` is False), e.g. CuPy
    #: without a CUDA device
    reason: str = ""


def discover(selected: list[str] | None = None) -> list[Discovered]:
    """Which libraries are installed (no imports: versions come from package metadata)."""
    out = []
    for lib in by_name().values():
        if selected is not None and lib.name not in selected and not lib.builtin:
            continue
        inst = lib.installed()
        ver = None
        if inst:
            try:
                ver = lib.version()
            except Exception:  # noqa: BLE001
                ver = "?"
        reason = ""
        probe = getattr(lib, "probe", None)
        if not inst and probe is not None and Library.installed(lib):
            reason = probe()[1]  # found, but not usable here
            try:
                ver = lib.version()
            except Exception:  # noqa: BLE001
                ver = "?"
        out.append(
            Discovered(
                lib.name,
                inst,
                ver,
                lib.producer,
                lib.consumer,
                lib.builtin,
                lib.note,
                lib.slow_import,
                reason,
            )
        )
    return out


__all__ = [
    "ALL_LIBRARIES",
    "LIBRARY_OF_MODULE",
    "Discovered",
    "Library",
    "Observed",
    "Recipe",
    "RefResult",
    "Unsupported",
    "by_name",
    "det_values",
    "discover",
    "observe",
    "reference",
]
