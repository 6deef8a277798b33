"""The array libraries dlbridge knows, as data: what a tool outside dlbridge (the conformance
checker ``dlbridge-check``, a library's own CI) may read without reaching into dlbridge's
internals.

- :func:`known_libraries` lists them (name, import module, pip spec, distribution, order, and
  the element types of those that hold fewer than DLPack names);
  :func:`library` finds one by name or alias.
- :data:`LEGACY_CAPSULES_WRITABLE` is the table of packages whose legacy (unversioned) DLPack
  capsules dlbridge imports as writable. A legacy capsule cannot carry the read-only flag, so a
  producer outside this table gets read-only tensors from ``dlbridge.from_dlpack``.

The data comes from the same place dlbridge's own rules read it (the namespaces of
:func:`dlbridge.convert`, the extension's table), so it cannot disagree with what dlbridge does.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._native import _LEGACY_CAPSULES_WRITABLE

__all__ = ["LEGACY_CAPSULES_WRITABLE", "Library", "known_libraries", "library"]

#: The top-level packages whose arrays' legacy DLPack capsules dlbridge imports writable: the
#: package is read from ``type(producer).__module__`` up to its first dot.
LEGACY_CAPSULES_WRITABLE: frozenset[str] = frozenset(_LEGACY_CAPSULES_WRITABLE)


@dataclass(frozen=True)
class Library:
    """One array library dlbridge knows (a target of :func:`dlbridge.convert`)."""

    #: the name ``convert`` and the reports use (``"numpy"``, ``"torch"``, ``"dpnp"``...)
    name: str
    #: the module to import (``"jax.numpy"`` for JAX)
    module: str
    #: how to install it (``"jax[cpu]"``)
    pip: str
    #: the place in dlbridge's order of libraries (lower first)
    rank: int
    #: other names ``convert`` accepts for it (``"np"``)
    aliases: tuple[str, ...] = ()
    #: the element types (``DType`` names) the library holds, for a library that holds fewer
    #: than its DLPack import names (MLX, Warp); None for the others
    dtypes: tuple[str, ...] | None = None

    @property
    def distribution(self) -> str:
        """The distribution the pip spec installs (``"jax"`` for ``"jax[cpu]"``), whose version
        is the library's."""
        return self.pip.split()[0].split("[")[0]


#: the list, made on the first call (two threads that race make it twice, with equal results)
_KNOWN: tuple[Library, ...] | None = None


def known_libraries() -> tuple[Library, ...]:
    """Every library dlbridge knows, in its order (importing none of them). The same tuple on
    every call: the list is fixed when dlbridge is imported."""
    global _KNOWN
    if _KNOWN is None:
        from .namespaces import registry

        _KNOWN = tuple(
            Library(
                ns.name,
                ns.module,
                ns.pip,
                ns.rank,
                tuple(a for a in ns.aliases if a != ns.name),
                getattr(ns, "DTYPES", None),
            )
            for ns in (registry.get(name) for name in registry.NAMES)
        )
    return _KNOWN

def library(name: str) -> Library:
    """The library ``name`` (or one of its aliases) names. LookupError when dlbridge knows no
    such library; :func:`known_libraries` lists them."""
    for lib in known_libraries():
        if name == lib.name or name in lib.aliases:
            return lib
    known = ", ".join(lib.name for lib in known_libraries())
    raise LookupError(f"dlbridge knows no array library {name!r}; it knows {known}")
