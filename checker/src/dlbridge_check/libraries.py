"""The checker's libraries: every adapter of the modules of :mod:`dlbridge_check.adapters`
(``ALL_LIBRARIES``; a new library's adapter needs no entry here, see that package's docstring),
the adapters from outside dlbridge this process uses (:func:`use_names`, resolved by
:mod:`dlbridge_check.external`), which of them are installed (:func:`discover`), and
:func:`observe`.

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

from . import adapters, external
from . import refcapsule as rc
from .adapters.base import (
    Adapter,
    Observed,
    Recipe,
    RefResult,
    Unsupported,
    det_values,
    from_capsule_info,
    observe_dlpack,
    observe_numpy,
    reference,
)


def _discover_adapters() -> list[type[Adapter]]:
    """The adapter classes of the modules of :mod:`dlbridge_check.adapters`, in the order of
    their ``rank``, the built-in ones last."""
    found: list[type[Adapter]] = []
    for info in pkgutil.iter_modules(adapters.__path__):
        if info.name == "base":
            continue
        module = importlib.import_module(f"{adapters.__name__}.{info.name}")
        found += [
            cls
            for cls in vars(module).values()
            if isinstance(cls, type)
            and issubclass(cls, Adapter)
            and cls.__module__ == module.__name__  # defined there, not imported
            and cls.name
        ]
    return sorted(found, key=lambda cls: (cls.builtin, cls.rank, cls.name))


ALL_LIBRARIES: list[type[Adapter]] = _discover_adapters()

BUILTIN_NAMES = frozenset(cls.name for cls in ALL_LIBRARIES)

#: The adapters from outside dlbridge this process uses, by name, with the name on the command
#: line that resolved each (the spec a worker process resolves again).
_EXTERNAL: dict[str, tuple[str, Adapter]] = {}

#: Entry points of a run of every library that resolve to no adapter, and why.
_BROKEN: dict[str, str] = {}


def use_names(specs: list[str] | None) -> list[str] | None:
    """The library names of ``specs`` (names on the command line), resolving and keeping the
    adapters from outside dlbridge; None (every library) keeps those that installed
    distributions register. LookupError or TypeError for a name that resolves to no adapter."""
    if specs is None:
        for name in external.entry_points():
            if name in BUILTIN_NAMES or name in _EXTERNAL or name in _BROKEN:
                continue
            try:
                _use(name)
            except Exception as e:  # noqa: BLE001 - one broken package must not stop the run
                _BROKEN[name] = f"its adapter does not load: {type(e).__name__}: {e}"
        return None
    return [spec if spec in BUILTIN_NAMES else _use(spec) for spec in specs]


def _use(spec: str) -> str:
    for name, (known, _) in _EXTERNAL.items():
        if spec in (known, name):  # the name that resolved it, or the adapter's own name
            return name
    adapter = external.resolve(spec)
    if adapter.name in BUILTIN_NAMES or adapter.name in _EXTERNAL:
        raise LookupError(f"{spec} names an adapter called {adapter.name}, a name already taken")
    _EXTERNAL[adapter.name] = (spec, adapter)
    return adapter.name


def external_specs() -> list[str]:
    """The names that resolved this process's adapters from outside dlbridge."""
    return [spec for spec, _ in _EXTERNAL.values()]


def _adapters() -> list[Adapter]:
    return [cls() for cls in ALL_LIBRARIES] + [adapter for _, adapter in _EXTERNAL.values()]


def library_of_module(module: str) -> str | None:
    """The library a top-level module belongs to: its import name or the module of its results
    (an exception's class names the library that raised it)."""
    if module in _BUILTIN_OF_MODULE:
        return _BUILTIN_OF_MODULE[module]
    for _, lib in _EXTERNAL.values():
        if module in (lib.module.split(".")[0], *lib.result_modules):
            return lib.name
    return None


#: dlbridge's libraries by their import name and the modules of their results (class data: no
#: adapter is made to answer :func:`library_of_module`)
_BUILTIN_OF_MODULE: dict[str, str] = {
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
    if rc.host_readable(obs.device):
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


#: The reader of each of dlbridge's libraries' results, by the top-level module of the result's
#: type.
_READERS: dict[str, Callable[[Any], Observed]] = {
    "dlbridge": _observe_dlbridge,
    **{module: cls.read_result for cls in ALL_LIBRARIES for module in cls.result_modules},
}


def _reader(module: str) -> Callable[[Any], Observed]:
    """The reader of results whose type's top-level module is ``module``: dlbridge's adapters'
    first, then those from outside, then DLPack."""
    if module in _READERS:
        return _READERS[module]
    for _, adapter in _EXTERNAL.values():
        if module in adapter.result_modules:
            return adapter.read_result
    return observe_dlpack


def observe(y: Any) -> Observed:
    """Inspect any result array (dispatch on its type's module)."""
    mod = type(y).__module__ or ""
    name = type(y).__name__
    if isinstance(y, np.ndarray):
        return observe_numpy(y)
    if isinstance(y, RefResult):
        return _observe_ref(y)
    obs = _reader(mod.split(".", 1)[0])(y)
    obs.kind = obs.kind or f"{mod}.{name}"
    return obs


def by_name() -> dict[str, Adapter]:
    """A fresh adapter of each of dlbridge's libraries, and this process's adapters from
    outside dlbridge, by name."""
    return {lib.name: lib for lib in _adapters()}


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
        if not inst and probe is not None and Adapter.installed(lib):
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
                lib.described(),
                lib.slow_import,
                reason,
            )
        )
    for name, why in _BROKEN.items():
        out.append(Discovered(name, False, None, False, False, False, reason=why))
    return out


__all__ = [
    "ALL_LIBRARIES",
    "BUILTIN_NAMES",
    "Discovered",
    "Adapter",
    "Observed",
    "Recipe",
    "RefResult",
    "Unsupported",
    "by_name",
    "external_specs",
    "library_of_module",
    "use_names",
    "det_values",
    "discover",
    "observe",
    "reference",
]
