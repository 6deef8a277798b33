"""Host copies for tests and I/O: ``to_numpy``, ``to_memoryview``, ``to_host``."""

from __future__ import annotations

from typing import Any

from . import namespaces as nsmod
from ._native import to_numpy
from .convert import convert


def _to_numpy_general(x: Any, *, copy: bool | None = None) -> Any:
    """What :func:`to_numpy` (native, in ``_native``) does for the calls its native path
    leaves to :func:`convert`: ``convert(x, numpy, device="cpu", copy=copy)``."""
    return convert(x, "numpy", device="cpu", copy=copy)


def to_memoryview(x: Any, *, copy: bool | None = None) -> memoryview:
    """A ``memoryview`` of ``x``'s values in host memory; no NumPy needed.

    The view keeps the memory alive, is read-only when the source is, and has ``x``'s shape
    and strides (a C-contiguous copy only with ``copy=True``). Data on a device is copied to
    the host first (BufferError under ``copy=False``). dtypes without a buffer-protocol
    format (bfloat16, float8) are a BufferError.
    """
    return memoryview(convert(x, "dlbridge", device="cpu", copy=copy))


def to_host(x: Any) -> Any:
    """``x`` on the host, as an array of its own library where that library has host arrays
    (torch, JAX, pyarrow...: every library whose namespace says ``has_host``), and as a NumPy
    array otherwise (dpnp and CuPy, whose arrays live on devices, buffers and any other
    producer).

    ``x`` itself when it is already in host memory; else the library's own transfer
    (``tensor.cpu()``, ``jax.device_put``...) or a device-to-host copy through dlbridge.
    """
    ns = nsmod.owner(x)
    if ns is not None and ns.has_host:
        y = ns.to_host(x)
        if y is not None:
            return y
        return convert(x, ns.name, device="cpu")
    return to_numpy(x)


__all__ = ["to_host", "to_memoryview", "to_numpy"]
