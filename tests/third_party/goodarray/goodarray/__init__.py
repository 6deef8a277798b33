"""goodarray: a tiny array library over NumPy whose arrays speak DLPack as the standard says.

A worked example of ``python -m dlbridge check`` for a library dlbridge does not know: the
package registers its adapter (:mod:`goodarray._dlbridge_check`) with an entry point. Its export
is NumPy's; its import is dlbridge's, which validates what it is given.
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
        """Writes are refused (the array holds read-only memory)."""
        return not self._data.flags.writeable

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU: the data is host memory

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """The data as a DLPack capsule: every argument is passed on, so a read-only array's
        versioned capsule carries the READ_ONLY flag, copy=True exports a copy, copy=False
        refuses to copy, and a consumer that asks for a legacy capsule of read-only data gets
        BufferError (a legacy capsule cannot say read-only)."""
        return self._data.__dlpack__(
            stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )

    def __repr__(self) -> str:
        return f"goodarray.Array({self._data!r})"


def asarray(obj: Any, *, copy: bool | None = None) -> Array:
    """An Array of ``obj``; it shares a NumPy array's memory (and its read-only flag) unless
    ``copy`` is True."""
    return Array(np.asarray(obj) if copy is None else np.array(obj, copy=copy))


def from_dlpack(x: Any, *, device: Any = None, copy: bool | None = None) -> Array:
    """Import an array of any DLPack producer (host memory). dlbridge reads and validates the
    producer's capsule, and gives the NumPy array: NumPy's own import lets through a DLPack 1.2
    capsule without strides, raises ValueError for a capsule already consumed and
    AttributeError for an object with no DLPack at all (the standard asks for BufferError and
    TypeError), and knows bfloat16 and float8 (ml_dtypes) only when they are registered."""
    import dlbridge

    tensor = dlbridge.from_dlpack(x, device=device, copy=copy)
    return Array(dlbridge.to_numpy(tensor))


def sum(x: Array) -> Any:
    return x._data.sum()
