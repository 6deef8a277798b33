"""leakyarray: a tiny array library over NumPy whose DLPack export is wrong on purpose.

Its arrays can be read-only, but ``__dlpack__`` exports every array through a writable alias
of its memory (the way a C extension does that fills a DLManagedTensorVersioned and forgets
its flags): a read-only array's capsule has no READ_ONLY flag, so a consumer hands out a
writable array over memory nobody may write. It also ignores ``copy=``: copy=True still
exports its own memory. dlbridge's checker finds both (docs/check-your-library.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__version__ = "1.0"
__all__ = ["Array", "asarray", "from_dlpack"]


class Array:
    """An n-dimensional array that keeps its data in a NumPy array, read-only or not."""

    def __init__(self, data: np.ndarray) -> None:
        self._data = data

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def readonly(self) -> bool:
        """Writes through this array are refused (but not through its DLPack export)."""
        return not self._data.flags.writeable

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        # BUG (on purpose): the export drops the read-only flag, and copy= is ignored
        return _writable_alias(self._data).__dlpack__(
            stream=stream, max_version=max_version, dl_device=dl_device
        )

    def __repr__(self) -> str:
        return f"leakyarray.Array({self._data!r})"


class _WritableView:
    """An array interface of ``a``'s memory that says writable (and keeps ``a`` alive)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a
        self.__array_interface__ = {**a.__array_interface__, "data": (a.ctypes.data, False)}


def _writable_alias(a: np.ndarray) -> np.ndarray:
    """A writable NumPy array over ``a``'s memory."""
    if a.flags.writeable:
        return a
    return np.asarray(_WritableView(a)).view(a.dtype)  # view: dtypes the interface spells V2


def asarray(obj: Any, *, copy: bool | None = None) -> Array:
    """An Array of ``obj``; it shares a NumPy array's memory (and its read-only flag) unless
    ``copy`` is True."""
    return Array(np.asarray(obj) if copy is None else np.array(obj, copy=copy))


def from_dlpack(x: Any, *, device: Any = None, copy: bool | None = None) -> Array:
    """Import an array of any DLPack producer (host memory)."""
    return Array(np.from_dlpack(x, device=device, copy=copy))


def sum(x: Array) -> Any:
    return x._data.sum()
