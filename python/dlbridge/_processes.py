"""Tensors across processes: the ``multiprocessing`` reduction of a :class:`Tensor`.

``multiprocessing`` (pools, queues, ``Process`` arguments, ``ProcessPoolExecutor``, torch's
``DataLoader`` workers) pickles with ``multiprocessing.reduction.ForkingPickler``. For a tensor
made by :func:`dlbridge.to_shared`, the reduction registered here sends a handle: host memory as
its memfd, duplicated into the receiving process (``multiprocessing.reduction.DupFd``), CUDA
memory as a CUDA IPC handle, each with the dtype and layout; the receiver maps the same memory.
Every other tensor travels by value, as ``pickle.dumps`` writes it. Plain ``pickle`` never sends
a handle: one written to a file or a socket would name memory that dies with its process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from multiprocessing import reduction
from typing import Any

from ._native import Tensor, _map_shared, _open_cuda_ipc, _shared_handle


def _rebuild_memfd(fd: Any, length: int, metadata: tuple) -> Tensor:
    """Receive a shared host tensor: map the memfd ``fd`` (a ``DupFd``) as ``metadata`` says."""
    own = fd.detach()
    try:
        return _map_shared(own, length, metadata)
    finally:
        os.close(own)


def _rebuild_cuda_ipc(sender: int, handle: bytes, size: int, metadata: tuple) -> Tensor:
    """Receive a shared CUDA tensor: open its CUDA IPC handle (not in the sending process)."""
    if sender == os.getpid():
        raise BufferError(
            "a CUDA IPC handle cannot be opened in the process that shared it; "
            "use the original tensor there"
        )
    return _open_cuda_ipc(handle, size, metadata)


def _reduce(t: Tensor) -> tuple[Callable[..., Tensor], tuple]:
    """``ForkingPickler`` reduction: a handle for shared memory, the data otherwise."""
    handle = _shared_handle(t)
    if handle is None:
        # Protocol 4: the data in band, as ForkingPickler has no out-of-band buffers.
        return t.__reduce_ex__(4)
    kind, resource, length, metadata = handle
    if kind == "cuda_ipc":
        return _rebuild_cuda_ipc, (os.getpid(), resource, length, metadata)
    return _rebuild_memfd, (reduction.DupFd(resource), length, metadata)


reduction.ForkingPickler.register(Tensor, _reduce)
