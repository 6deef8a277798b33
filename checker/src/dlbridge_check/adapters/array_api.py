"""The automatic adapter: checks a library dlbridge has no adapter for, through the array API.

``python -m dlbridge check --libraries mylib`` accepts any importable module whose arrays have
``__array_namespace__``. The source of each case is the namespace's ``asarray`` of the case's
NumPy reference, and the consumer is the namespace's ``from_dlpack``. Everything the checker
judges it reads through DLPack (the flags of a versioned capsule) or the buffer protocol.

What the namespace cannot express is unsupported, never a failure: a dtype it lacks, a layout
its ``asarray`` does not keep (a copy with other strides), a read-only array when ``asarray``
copies into writable memory. The adapter knows one truth the library's export may hide: an array
that aliases the reference's read-only memory is read-only, whatever its capsule says.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import numpy as np

from .. import refcapsule as rc
from .base import Adapter, Recipe, Unsupported, require_layout


class ArrayApiAdapter(Adapter):
    """The adapter of ``module``, a library with the array API and no adapter of its own."""

    readonly_results = True  # whether a result is writable is read off each result
    note = "checked through the array API (automatic adapter)"

    def __init__(self, module: str) -> None:
        super().__init__()
        self.name = self.module = module
        top = module.split(".")[0]
        self.result_modules = (top,)
        self.dists = tuple(importlib.metadata.packages_distributions().get(top, ()))
        self.xp: Any = None
        #: what make() learnt of its arrays: id -> (array, read-only in truth)
        self._made: dict[int, tuple[Any, bool]] = {}

    def setup(self) -> None:
        self.xp = namespace_of(self._mod, self.module)
        version = str(getattr(self.xp, "__array_api_version__", "2023.12"))
        self.takes_kwargs = version >= "2023.12"  # device= and copy= came with 2023.12

    def namespace(self) -> Any:
        """The library's array API namespace (imports the library on first use)."""
        self.load()
        return self.xp

    # producer side
    def make(self, recipe: Recipe, ref: np.ndarray) -> Any:
        xp = self.namespace()
        dtype = getattr(xp, recipe.dtype, None)
        if dtype is None:
            raise Unsupported(f"{self.name} has no {recipe.dtype}")
        x = _asarray(xp, ref, dtype)
        info = rc.probe(x)
        if info is None:
            raise Unsupported(f"{self.name}'s arrays have no working __dlpack__")
        require_layout(info, ref, recipe)
        aliases = info.data_ptr == ref.__array_interface__["data"][0]
        readonly = (aliases and not ref.flags.writeable) or bool(info.flags & rc.READ_ONLY)
        if recipe.readonly and not readonly:
            raise Unsupported(f"{self.name}'s asarray copies read-only data into writable memory")
        self._made[id(x)] = (x, readonly)
        return x

    def src_readonly(self, x: Any) -> bool:
        made = self._made.get(id(x))
        return made is not None and made[0] is x and made[1]

    # consumer side
    def device_arg(self, which: str) -> Any:
        info = getattr(self.namespace(), "__array_namespace_info__", None)
        if info is None:
            raise Unsupported(f"{self.name} has no __array_namespace_info__ to name a device")
        if which == "native":
            return info().default_device()
        for device in info().devices():
            if "cpu" in str(device).lower():
                return device
        raise Unsupported(f"none of {self.name}'s devices is named like a CPU")

    def from_dlpack(self, obj: Any, **kw: Any) -> Any:
        return self.namespace().from_dlpack(obj, **kw)

    def native_reduce(self, y: Any) -> complex:
        try:
            return complex(self.namespace().sum(y))
        except (TypeError, ValueError, AttributeError) as e:
            raise Unsupported(f"{self.name}'s sum cannot be read as a number: {e}") from e


def namespace_of(module: Any, name: str) -> Any:
    """The array API namespace of ``module``'s arrays; TypeError naming the way out when its
    arrays have none."""
    asarray = getattr(module, "asarray", None)
    if asarray is None:
        raise TypeError(
            f"{name} has no asarray: the checker's automatic adapter needs an array API "
            "namespace; write an adapter (dlbridge_check.Adapter) and name it as module:object"
        )
    probe = asarray([0.0])
    get = getattr(probe, "__array_namespace__", None)
    if get is None:
        raise TypeError(
            f"{name}'s arrays ({type(probe).__name__}) have no __array_namespace__: write an "
            "adapter (dlbridge_check.Adapter) and name it as module:object"
        )
    return get()


def _asarray(xp: Any, ref: np.ndarray, dtype: Any) -> Any:
    """``asarray`` of the reference, aliasing it where the library can (views and read-only
    data keep their meaning only then)."""
    try:
        return xp.asarray(ref, dtype=dtype, copy=False)
    except Exception:  # noqa: BLE001 - any refusal to alias: fall back to a copy
        pass
    try:
        return xp.asarray(ref, dtype=dtype)
    except Exception as e:
        raise Unsupported(f"asarray cannot take this array: {type(e).__name__}: {e}") from e
