"""Adapters from outside dlbridge: what a name on the checker's command line that is not one of
dlbridge's own libraries stands for.

A name is, in this order:

- the name of an entry point in the group ``dlbridge.check`` of an installed distribution,
  whose object is an :class:`~dlbridge_check.adapters.base.Adapter` subclass (how a library's
  own package registers its adapter);
- ``module:object``, an Adapter subclass named directly;
- an importable module whose arrays have ``__array_namespace__``: the automatic adapter
  (:mod:`dlbridge_check.adapters.array_api`).

Resolving a name imports the adapter's module; the automatic adapter also imports the library,
to find its namespace. Each worker process resolves the same names again (they are strings).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util

from .adapters.array_api import ArrayApiAdapter
from .adapters.base import Adapter

#: the entry point group in which a package registers its library's adapter
ENTRY_POINT_GROUP = "dlbridge.check"


def entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """The adapters installed distributions register, by entry point name."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def resolve(spec: str) -> Adapter:
    """The adapter ``spec`` names; LookupError when it names none, with the forms a name takes,
    and TypeError when what it names is not an adapter."""
    registered = entry_points().get(spec)
    if registered is not None:
        return _instantiate(registered.load(), f"entry point {spec} = {registered.value}", spec)
    if ":" in spec:
        module, _, attr = spec.partition(":")
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return _instantiate(obj, spec, "")
    if _importable(spec):
        adapter = ArrayApiAdapter(spec)
        adapter.load()  # TypeError now, naming the way out, when it has no array API
        return adapter
    raise LookupError(
        f"unknown library {spec}: neither one of dlbridge's libraries, an entry point of the "
        f"group {ENTRY_POINT_GROUP}, a module:object naming an adapter, nor an importable module"
    )


def _instantiate(obj: object, where: str, default_name: str) -> Adapter:
    if not (isinstance(obj, type) and issubclass(obj, Adapter)):
        raise TypeError(f"{where} is {obj!r}, not a subclass of dlbridge_check.Adapter")
    adapter = obj()
    if not adapter.name:
        if not default_name:
            raise TypeError(f"{where} has no name: set the class attribute name")
        adapter.name = default_name
    if not adapter.module:
        raise TypeError(f"{where} has no module: set the class attribute module")
    return adapter


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
