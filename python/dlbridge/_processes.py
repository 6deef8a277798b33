"""Tensors across processes: the ``multiprocessing`` reduction of a :class:`Tensor`.

``multiprocessing`` (pools, queues, ``Process`` arguments, ``ProcessPoolExecutor``, torch's
``DataLoader`` workers) pickles with ``multiprocessing.reduction.ForkingPickler``. For a tensor
made by :func:`dlbridge.to_shared` the reduction registered here sends a handle: the memfd,
duplicated into the receiving process (``multiprocessing.reduction.DupFd``), plus the dtype and
layout; the receiver maps the same memory. Every other tensor travels by value, exactly as
``pickle.dumps`` writes it. Plain ``pickle`` never sends a handle: one written to a file or a
socket would name memory that dies with its process.
"""

from __future__ import annotations

import os
from multiprocessing import reduction
from typing import Any, Callable

from ._native import Tensor, _map_shared, _shared_handle


def _rebuild_shared(fd: Any, length: int, metadata: tuple) -> Tensor:
    """Receive a shared tensor: map the memfd ``fd`` (a ``DupFd``) as ``metadata`` says."""
    own = fd.detach()
    try:
        return _map_shared(own, length, metadata)
    finally:
        os.close(own)


def _reduce(t: Tensor) -> tuple[Callable[..., Tensor], tuple]:
    """``ForkingPickler`` reduction: a handle for shared memory, the data otherwise."""
    handle = _shared_handle(t)
    if handle is None:
        # Protocol 4: the data in band, as ForkingPickler has no out-of-band buffers.
        return t.__reduce_ex__(4)
    fd, length, metadata = handle
    return _rebuild_shared, (reduction.DupFd(fd), length, metadata)


reduction.ForkingPickler.register(Tensor, _reduce)
