"""Host copies for tests and I/O: ``to_numpy``, ``to_memoryview``, ``to_host``."""

from __future__ import annotations

from typing import Any

from . import namespaces as nsmod
from ._native import _to_numpy
from .convert import convert


def to_numpy(x: Any, *, copy: bool | None = None) -> Any:
    """A NumPy array on the host with the values of ``x``, from any library on any device.

    ``convert(x, numpy, device="cpu", copy=copy)``: zero-copy for host data NumPy can take, a
    device-to-host copy otherwise (asked of the producer: dpnp, CuPy, torch...). Read-only
    sources stay read-only unless copied. bfloat16 and float8 come back as ml_dtypes arrays
    (zero-copy; BufferError naming ``pip install ml_dtypes`` without it). ``copy=False``:
    BufferError when a copy would be needed (device data, data that must be realigned).
    Framework state is not resolved silently: a torch tensor that requires grad or has its
    conjugate/negative bit set is a BufferError naming ``.detach()`` / ``.resolve_conj()``.
    """
    y = _to_numpy(x, copy)  # the common cases, natively; None: the general path decides
    return convert(x, "numpy", device="cpu", copy=copy) if y is None else y


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
    (NumPy, torch, JAX, pyarrow, array_api_strict, TensorFlow, tvm_ffi, dlbridge), and as a
    NumPy array otherwise (dpnp, CuPy, buffers and any other producer).

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
