"""Finding the classes a package's modules define: the one discovery loop that the registry of
namespaces and the checker's list of adapters share, so that a new library is a module and
nothing else."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import TypeVar

B = TypeVar("B")


def classes_in(
    package: str, paths: Iterable[str], base: type[B], skip: Iterable[str] = ()
) -> list[type[B]]:
    """The subclasses of ``base`` with a ``name`` that the modules of ``package`` (found on
    ``paths``, its ``__path__``) define themselves, not those they import from another
    module; the modules named in ``skip`` hold none. Importing the modules must be cheap: they
    import no library."""
    skipped = set(skip)
    found: list[type[B]] = []
    for info in pkgutil.iter_modules(list(paths)):
        if info.name in skipped:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        found += [
            cls
            for cls in vars(module).values()
            if isinstance(cls, type)
            and issubclass(cls, base)
            and cls.__module__ == module.__name__
            and getattr(cls, "name", None)
        ]
    return found
