"""Exact lifetimes, seen from Python (issue 8, CASES C7, C9, C17-C19, C22).

Counting producers (``dlpack_ctypes.FakeManagedTensor``: a ctypes struct whose deleter counts
its calls and the threads they come from) prove that the deleter runs exactly once:

- on success, when the last user of the memory goes (and not before);
- on every failure path (the capsule is left fresh, so the producer's destructor deletes it);
- for capsules dlbridge produces that nobody consumes;
- after a second consumption attempt (refused, no double free);
- for NULL-data and zero-size tensors;
- when the last reference is dropped on a thread that does not hold the GIL: a native thread
  (``pthread_create`` through ctypes, never seen by Python) or a Python thread inside a ctypes
  call (which releases the GIL) calls the deleter of a dlbridge capsule directly, as a C
  consumer would;
- when the interpreter shuts down with tensors, capsules and foreign tensors still alive.

The Rust side of the same guarantees is ``crates/dlbridge/tests/lifetimes.rs``.
"""

from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import sys
import textwrap
import threading
import weakref

import numpy as np
import pytest

import dlbridge
from dlb_testing import SameCapsule
from dlpack_ctypes import (
    DLManagedTensor,
    DLManagedTensorVersioned,
    FakeManagedTensor,
    _PyCapsule_GetPointer,
    c_strides,
    capsule_name,
    rename_capsule,
)

HERE = os.path.dirname(os.path.abspath(__file__))


def _fake(arr: np.ndarray, **kw) -> FakeManagedTensor:
    kw.setdefault("shape", arr.shape)
    kw.setdefault("strides", tuple(s // arr.itemsize for s in arr.strides))
    kw.setdefault("dtype", arr.dtype.name)
    return FakeManagedTensor(data=arr, **kw)


def _settle() -> None:
    """Collect cycles and let dlbridge apply decrefs deferred by threads without the GIL (any
    call into the extension does)."""
    gc.collect()
    dlbridge.from_dlpack(b"x")
    gc.collect()


# --------------------------------------------------------------------------------------------
# Success: exactly once, at the last drop
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("versioned", [True, False])
def test_success_deletes_once_when_the_last_user_goes(versioned):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    fake = _fake(a, versioned=versioned)
    cap = fake.capsule()
    t = dlbridge.from_dlpack(cap)
    assert capsule_name(cap).startswith("used_")
    views = [np.from_dlpack(t), dlbridge.from_dlpack(t), t.copy()]
    if not t.readonly:
        views.append(dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 3))))
    del t, cap
    _settle()
    assert fake.deleter_calls == 0, "deleted while views are alive"
    assert views[0][2, 3] == 11
    del views
    _settle()
    # dlbridge called the deleter itself; the producer's destructor has nothing left to do.
    assert fake.deleter_calls == 1
    assert fake.finalize() == 1


# --------------------------------------------------------------------------------------------
# Failure paths: the capsule stays fresh; the producer's destructor deletes exactly once
# --------------------------------------------------------------------------------------------
_BASE = np.zeros(64, dtype=np.float64)

FAILURES = [
    pytest.param(dict(version=(2, 0)), id="major-2-C17"),
    pytest.param(dict(version=(0, 5)), id="major-0"),
    pytest.param(dict(version=(1, 2), strides=None), id="null-strides-1.2-C7"),
    pytest.param(dict(version=(1, 3), strides=None), id="null-strides-1.3-C7"),
    pytest.param(dict(shape=(2, -3)), id="negative-extent"),
    pytest.param(dict(shape=(2**62, 8)), id="overflowing-shape"),
    pytest.param(dict(shape=(0, 2**62, 4), strides=(1, 1, 1)), id="overflowing-zero-size"),
    pytest.param(dict(strides=(2**62, 1)), id="overflowing-strides"),
    pytest.param(dict(ndim=-1), id="negative-ndim"),
    pytest.param(dict(ndim=65, shape=(1,) * 65, strides=(1,) * 65), id="ndim-65"),
    pytest.param(dict(null_shape=True), id="null-shape"),
    pytest.param(dict(dtype=(200, 32, 1)), id="unknown-dtype"),
    pytest.param(dict(dtype=(2, 32, 0)), id="zero-lanes"),
    pytest.param(dict(data_ptr=0), id="null-data-non-empty"),
    pytest.param(dict(data_ptr=2**64 - 16, byte_offset=64), id="pointer-overflow"),
]


def _failure_cases():
    for p in FAILURES:
        kw = p.values[0]
        for versioned in (True, False):
            # legacy capsules have no version, and NULL strides are valid in them (C6)
            if not versioned and ("version" in kw or kw.get("strides", ()) is None):
                continue
            yield pytest.param(kw, versioned, id=f"{p.id}-{'v' if versioned else 'legacy'}")


@pytest.mark.parametrize("kw, versioned", list(_failure_cases()))
def test_failure_paths_leave_the_capsule_to_the_producer(kw, versioned):
    kw = dict(kw)
    kw.setdefault("shape", (2, 3))
    kw.setdefault("strides", c_strides(kw["shape"]))
    if "data_ptr" not in kw:
        kw["data"] = _BASE
    fake = FakeManagedTensor(versioned=versioned, dtype=kw.pop("dtype", "float64"), **kw)
    cap = fake.capsule()
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(cap)
    # Not consumed: still fresh, and dlbridge did not delete it.
    assert capsule_name(cap) == fake.fresh_name.decode()
    assert fake.deleter_calls == 0
    # A second attempt fails the same way (no partial state left behind).
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(cap)
    assert fake.finalize() == 1


def test_failing_producer_object_deletes_once():
    """Through ``__dlpack__``: the producer hands out a capsule dlbridge refuses."""
    fake = FakeManagedTensor(data=_BASE, shape=(2,), strides=(1,), version=(2, 0))

    class Producer:
        def __dlpack__(self, **kw):
            return fake.capsule()

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(BufferError):
        dlbridge.from_dlpack(Producer())
    assert fake.finalize() == 1


# --------------------------------------------------------------------------------------------
# Capsules never consumed, consumed twice
# --------------------------------------------------------------------------------------------
def test_dlbridge_capsule_never_consumed_releases_its_source():  # C19
    a = np.arange(8.0)
    fake = _fake(a)
    t = dlbridge.from_dlpack(fake.capsule())
    capsules = [t.__dlpack__(max_version=(1, 3)), t.__dlpack__(), t.__dlpack__(max_version=(1, 0))]
    del t
    _settle()
    assert fake.deleter_calls == 0, "the capsules still own the memory"
    capsules.pop()
    capsules.pop()
    _settle()
    assert fake.deleter_calls == 0
    del capsules
    _settle()
    assert fake.deleter_calls == 1


@pytest.mark.parametrize("max_version", [None, (1, 3)])
def test_second_consumption_raises_and_frees_once(max_version):  # C18
    a = np.arange(4.0)
    fake = _fake(a)
    t = dlbridge.from_dlpack(fake.capsule())
    cap = t.__dlpack__(max_version=max_version)
    del t
    u = dlbridge.from_dlpack(cap)
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(cap)
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(SameCapsule(cap))
    del u, cap
    _settle()
    assert fake.deleter_calls == 1




# --------------------------------------------------------------------------------------------
# NULL data, zero size
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.parametrize(
    "shape, strides",
    [((0, 3), (3, 1)), ((0, 3), (0, 0)), ((3, 0), None), ((0,), (1,)), ((5, 0, 2**40), None)],
)
def test_null_data_zero_size(versioned, shape, strides):  # C9
    if strides is None and versioned:
        strides = c_strides(shape)
    fake = FakeManagedTensor(data_ptr=0, shape=shape, strides=strides, versioned=versioned)
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.shape == shape and t.size == 0
    assert np.from_dlpack(t).shape == shape
    assert t.copy().size == 0
    assert t.tolist() == np.zeros(shape).tolist()
    del t
    _settle()
    assert fake.deleter_calls == 1
    assert fake.finalize() == 1


def test_zero_size_with_data_and_0d():
    fake = FakeManagedTensor(data=_BASE, shape=(0, 4), strides=(4, 1), dtype="float64")
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.size == 0
    del t
    scalar = np.array(3.5)
    fake0 = FakeManagedTensor(data=scalar, shape=(), strides=None, dtype="float64")
    s = dlbridge.from_dlpack(fake0.capsule())
    assert s.ndim == 0 and s.tolist() == 3.5
    del s
    _settle()
    assert fake.deleter_calls == 1 and fake0.deleter_calls == 1


# --------------------------------------------------------------------------------------------
# The last reference dropped on a thread that does not hold the GIL (C22)
# --------------------------------------------------------------------------------------------
_libc = ctypes.CDLL(None)
_pthread_create = _libc.pthread_create
_pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_void_p]
_pthread_create.restype = ctypes.c_int
_pthread_join = _libc.pthread_join
_pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
_pthread_join.restype = ctypes.c_int


def _take_like_a_c_consumer(cap) -> tuple[int, int]:
    """Consume a dlbridge capsule as a C library would: rename it ``used_*`` and keep the
    managed tensor. Returns (struct address, deleter address)."""
    name = capsule_name(cap)
    ptr = _PyCapsule_GetPointer(cap, name.encode())
    rename_capsule(cap, b"used_" + name.encode())
    struct = DLManagedTensorVersioned if name == "dltensor_versioned" else DLManagedTensor
    mt = ctypes.cast(ptr, ctypes.POINTER(struct)).contents
    deleter = ctypes.cast(mt.deleter, ctypes.c_void_p).value
    assert deleter
    return ptr, deleter


def _delete_on_native_thread(ptr: int, deleter: int) -> None:
    """Run ``deleter(ptr)`` on a thread made by pthread_create: Python has never seen it and it
    does not hold the GIL. This thread waits in pthread_join with the GIL released (ctypes
    releases it around foreign calls)."""
    tid = ctypes.c_ulong()
    # The deleter has the start-routine ABI (one pointer argument; its return value is ignored).
    assert _pthread_create(ctypes.byref(tid), None, deleter, ptr) == 0
    assert _pthread_join(tid.value, None) == 0


def _delete_on_python_thread_without_gil(ptr: int, deleter: int) -> None:
    """Call the deleter from a Python thread through a ctypes CFUNCTYPE call, which releases
    the GIL for the duration of the call."""
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(deleter)
    th = threading.Thread(target=fn, args=(ptr,))
    th.start()
    th.join()


class _ArrayInterfaceSource:
    """A weak-referenceable producer offering only ``__array_interface__``: dlbridge keeps the
    object itself (a Python reference) as the owner of the memory."""

    def __init__(self, n: int):
        self.arr = np.arange(n, dtype=np.float64)

    @property
    def __array_interface__(self):
        return self.arr.__array_interface__


@pytest.mark.parametrize("how", [_delete_on_native_thread, _delete_on_python_thread_without_gil])
@pytest.mark.parametrize("max_version", [(1, 3), None])
def test_python_owner_released_from_a_thread_without_the_gil(how, max_version):
    src = _ArrayInterfaceSource(16)
    alive = weakref.ref(src)
    t = dlbridge.from_dlpack(src)
    cap = t.__dlpack__(max_version=max_version)
    del t, src
    _settle()
    assert alive() is not None, "the capsule keeps the source alive"
    ptr, deleter = _take_like_a_c_consumer(cap)
    del cap  # used: its destructor does nothing
    _settle()
    assert alive() is not None, "the consumer keeps the source alive"
    how(ptr, deleter)
    _settle()
    assert alive() is None, "the Python owner was never released"


@pytest.mark.parametrize("how", [_delete_on_native_thread, _delete_on_python_thread_without_gil])
def test_foreign_producer_chain_released_from_a_thread_without_the_gil(how):
    """numpy -> dlbridge -> capsule -> deleter on a no-GIL thread -> dlbridge drops numpy's
    managed tensor there -> numpy's deleter takes the GIL itself and releases the array."""
    a = np.arange(32, dtype=np.int64)
    alive = weakref.ref(a)
    t = dlbridge.from_dlpack(a)
    cap = t.__dlpack__(max_version=(1, 3))
    del t, a
    ptr, deleter = _take_like_a_c_consumer(cap)
    del cap
    _settle()
    assert alive() is not None
    how(ptr, deleter)
    _settle()
    assert alive() is None


def test_counting_producer_deleter_runs_once_on_the_native_thread():
    """FakeManagedTensor -> dlbridge -> capsule -> native thread: the fake's deleter (a ctypes
    callback, which takes the GIL itself) runs exactly once, on that thread."""
    a = np.arange(6, dtype=np.float32)
    fake = _fake(a)
    t = dlbridge.from_dlpack(fake.capsule())
    ptr, deleter = _take_like_a_c_consumer(t.__dlpack__(max_version=(1, 3)))
    del t
    _settle()
    assert fake.deleter_calls == 0
    _delete_on_native_thread(ptr, deleter)
    _settle()
    assert fake.deleter_calls == 1
    assert fake.deleter_threads[0] != threading.get_ident()
    assert fake.finalize() == 1


def test_torch_tensor_deleted_on_another_thread():
    torch = pytest.importorskip("torch")
    a = np.arange(10, dtype=np.float32)
    fake = _fake(a)
    t = dlbridge.from_dlpack(fake.capsule())
    holder = [torch.from_dlpack(t)]
    del t
    _settle()
    assert fake.deleter_calls == 0
    assert float(holder[0][9]) == 9.0

    def drop():
        holder.clear()
        gc.collect()

    th = threading.Thread(target=drop)
    th.start()
    th.join()
    _settle()
    assert fake.deleter_calls == 1
    assert fake.finalize() == 1


# --------------------------------------------------------------------------------------------
# Interpreter shutdown with everything still alive (C22)
# --------------------------------------------------------------------------------------------
_SHUTDOWN_SCRIPT = textwrap.dedent(
    r"""
    import sys, threading, time
    sys.path.insert(0, {here!r})
    import numpy as np
    import dlbridge
    from dlpack_ctypes import FakeManagedTensor

    a = np.arange(100.0)
    T = dlbridge.from_dlpack(a)
    CAPS = [T.__dlpack__(max_version=(1, 3)) for _ in range(3)]     # never consumed
    FAKE = FakeManagedTensor(data=a, shape=(100,), strides=(1,), dtype="float64")
    F = dlbridge.from_dlpack(FAKE.capsule())                         # ctypes deleter at exit
    CYCLE = [dlbridge.from_dlpack(T)]
    CYCLE.append(CYCLE)                                              # collected (or not) late
    try:
        import pyarrow as pa
        ARROW = dlbridge.from_dlpack(pa.array(np.arange(10.0)))      # release at shutdown
    except ImportError:
        pass
    if {torch!r}:
        import torch
        TORCH = torch.from_dlpack(dlbridge.from_dlpack(a))

    def hold():                                                      # a daemon thread holding
        x = dlbridge.from_dlpack(np.ones(5))                          # tensors while the
        while True:                                                  # interpreter exits
            y = dlbridge.from_dlpack(x.__dlpack__(max_version=(1, 3)))
            time.sleep(0.001)

    threading.Thread(target=hold, daemon=True).start()
    time.sleep(0.05)
    print("ok")
    """
)


@pytest.mark.parametrize("with_torch", [False, True])
def test_interpreter_shutdown_with_live_tensors(with_torch):
    if with_torch:
        pytest.importorskip("torch")
    script = _SHUTDOWN_SCRIPT.format(here=HERE, torch=with_torch)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"
    assert "Fatal Python error" not in proc.stderr
    assert "panicked" not in proc.stderr


def test_a_consumers_refusal_survives_the_producers_python_deleter():
    """When a consumer refuses a temporary Tensor, its last owner goes while the consumer's
    exception is in flight, and the producer's deleter then runs Python code (the reference
    producer's is a ctypes callback): the consumer's exception must come out, not a
    SystemError ("error return without exception set")."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from dlbridge_check.refcapsule import RefArray

    for _ in range(3):
        source = RefArray(np.arange(4.0).astype(ml_dtypes.bfloat16))
        with pytest.raises(BufferError):  # NumPy has no bfloat16 of its own
            np.from_dlpack(dlbridge.from_dlpack(source))
        assert source.deleter_calls == source.exports == 1
