"""Threads (CASES C22/C23): 8 Python threads exchange and drop tensors
concurrently — importing from one shared producer, converting through NumPy, torch and
dlbridge, handing tensors, capsules and arrays to each other through a queue so that they are
dropped on a different thread than the one that made them — with no error and no leak.

Duration: ``DLBRIDGE_THREADS_SECONDS`` (default 2 s; 10 s with ``DLBRIDGE_SOAK=full``).
"No leak" is checked three ways: counting producers end at exactly one deleter call, every
sampled source array is freed once its last user is gone, and resident memory does not grow
beyond a bound after a warm-up.

The tests after it each run for at most 2 s (``DLBRIDGE_THREADS_SECONDS`` when shorter), and
would run truly in parallel on a free-threaded interpreter (scripts/freethreaded.sh): the same
and distinct arrays imported, exported, converted and pickled from every thread (exact values,
read-only kept, every private source freed); one DLPack capsule imported by several threads at
once (exactly one takes it, the others get BufferError, the deleter runs once); tensors dropped
from many threads at once, so that deleters run concurrently; and bad input, which keeps its
exception under threads.
"""

from __future__ import annotations

import gc
import os
import queue
import random
import threading
import time
import weakref

import numpy as np
import pytest

import dlbridge
from dlpack_ctypes import FakeManagedTensor

N_THREADS = 8
DURATION = float(
    os.environ.get(
        "DLBRIDGE_THREADS_SECONDS", "10" if os.environ.get("DLBRIDGE_SOAK") == "full" else "2"
    )
)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _run(duration: float, torch, shared: np.ndarray, stats: dict) -> None:
    errors: list[BaseException] = []
    fakes: list[FakeManagedTensor] = []
    fakes_lock = threading.Lock()
    sampled: list[weakref.ref] = []
    handoff: queue.Queue = queue.Queue(maxsize=256)
    stop = time.monotonic() + duration
    start = threading.Barrier(N_THREADS)
    ops = [0] * N_THREADS

    def work(k: int) -> None:
        rng = random.Random(k)
        try:
            start.wait()
            i = 0
            while i == 0 or time.monotonic() < stop:  # at least once, however loaded
                i += 1
                # C23: every thread imports from one producer at once.
                t = dlbridge.from_dlpack(shared)
                assert t.data_ptr == shared.ctypes.data
                # A private source, sampled to check that it is freed at the end.
                src = np.arange(64, dtype=np.float32) + k
                if i % 64 == 0:
                    sampled.append(weakref.ref(src))
                u = dlbridge.from_dlpack(src)
                n = np.from_dlpack(u)
                assert n[63] == 63 + k
                objs = [t, u, n, u.__dlpack__(max_version=(1, 3)), u.__dlpack__()]
                if torch is not None:
                    tt = torch.from_dlpack(u)
                    back = dlbridge.from_dlpack(tt)
                    assert back.data_ptr == u.data_ptr
                    objs += [tt, back]
                if i % 500 == 0:
                    # (dlpack_ctypes keeps its data alive forever: use the shared array)
                    fake = FakeManagedTensor(
                        data=shared, shape=(64,), strides=(1,), dtype="float64"
                    )
                    with fakes_lock:
                        fakes.append(fake)
                    objs.append(dlbridge.from_dlpack(fake.capsule()))
                if i % 7 == 0:
                    objs.append(u.copy())
                # Hand some objects to other threads, drop what others handed over.
                for obj in rng.sample(objs, 2):
                    try:
                        handoff.put_nowait(obj)
                    except queue.Full:
                        pass
                for _ in range(2):
                    try:
                        got = handoff.get_nowait()
                    except queue.Empty:
                        break
                    if isinstance(got, dlbridge.Tensor) and rng.random() < 0.3:
                        got = dlbridge.from_dlpack(got.__dlpack__(max_version=(1, 3)))
                    del got
                del objs, t, u, n, src
            ops[k] = i
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(N_THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    while not handoff.empty():
        handoff.get_nowait()
    gc.collect()
    dlbridge.from_dlpack(b"x")  # apply decrefs deferred by threads without the GIL
    gc.collect()
    assert not errors, errors[:3]
    assert all(n > 0 for n in ops), ops
    stats["iterations"] = sum(ops)
    stats["fakes"] = len(fakes)
    stats["sampled"] = len(sampled)
    assert [f.finalize() for f in fakes] == [1] * len(fakes), "deleter counts"
    assert all(r() is None for r in sampled), "a source array was never freed"


def test_eight_threads_exchange_and_drop():
    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None
    shared = np.arange(1024, dtype=np.float64)
    warm: dict = {}
    _run(min(0.5, DURATION / 4), torch, shared, warm)
    before = rss_bytes()
    stats: dict = {}
    _run(DURATION, torch, shared, stats)
    growth = rss_bytes() - before
    print(
        f"\nthreads: {N_THREADS} x {DURATION:.0f} s, {stats['iterations']} iterations, "
        f"{stats['fakes']} counting producers, RSS growth {growth / 2**20:.2f} MiB"
    )
    # A leak of one 64-element array (or one managed tensor) per iteration would be several
    # MiB here; ctypes producers kept alive by dlpack_ctypes cost a few KiB each. Under
    # ThreadSanitizer (scripts/tsan_python.sh sets TSAN_OPTIONS) resident memory also holds
    # the sanitizer's shadow and history, which grow with every access: no bound holds there,
    # and the deleter counts and freed sources above still check for leaks.
    if "TSAN_OPTIONS" not in os.environ:
        assert growth < 4 * 2**20 + stats["fakes"] * 8192, f"RSS grew {growth} bytes"


# ---------------------------------------------------------------------------------------------
# The same and distinct arrays through every path at once; one capsule raced by many threads;
# deleters run concurrently. Each test is bounded to a few seconds (SHORT).
# ---------------------------------------------------------------------------------------------

SHORT = min(DURATION, 2.0)


def _in_threads(n: int, work) -> list:
    """Run ``work(k)`` on ``n`` threads released together; return their results, re-raising
    the first exception any of them raised."""
    start = threading.Barrier(n)
    results: list = [None] * n
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            start.wait()
            results[k] = work(k)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not any(th.is_alive() for th in threads), "a thread hung"
    if errors:
        raise errors[0]
    return results


def test_threads_import_export_convert_and_pickle_same_and_distinct_arrays():
    import pickle
    import sys
    from multiprocessing.reduction import ForkingPickler

    shared = np.arange(256, dtype=np.float64)
    frozen = np.arange(256, dtype=np.int32)
    frozen.flags.writeable = False
    # One dlbridge Tensor exported, converted and pickled by every thread at once.
    one = dlbridge.from_dlpack(shared)
    one_frozen = dlbridge.from_dlpack(frozen)
    sampled: list[weakref.ref] = []
    stop = time.monotonic() + SHORT

    def work(k: int) -> int:
        i = 0
        while i == 0 or time.monotonic() < stop:  # at least once, however loaded
            i += 1
            # one and one_frozen are deleted below, after the threads end (not seen by F821)
            for t, src in ((one, shared), (one_frozen, frozen)):  # noqa: F821
                back = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 3)))
                assert back.data_ptr == src.ctypes.data and back.readonly is t.readonly
                np.testing.assert_array_equal(np.from_dlpack(t), src)
                np.testing.assert_array_equal(dlbridge.to_numpy(t), src)
                loaded = pickle.loads(pickle.dumps(t, protocol=5))
                assert loaded.readonly is t.readonly
                np.testing.assert_array_equal(np.from_dlpack(loaded), src)
            if sys.platform == "linux" and i % 8 == 0:
                # Shared memory, and its handle mapped again as multiprocessing would.
                moved = dlbridge.to_shared(one_frozen)  # noqa: F821
                assert moved.readonly
                again = pickle.loads(ForkingPickler.dumps(moved))
                assert again.readonly and again.data_ptr != moved.data_ptr
                np.testing.assert_array_equal(np.from_dlpack(again), frozen)
                del moved, again
            own = np.arange(64, dtype=np.float32) * (k + 1)
            if i % 32 == 0:
                sampled.append(weakref.ref(own))
            for src, readonly in ((shared, False), (frozen, True), (own, False)):
                t = dlbridge.from_dlpack(src)
                assert t.readonly is readonly
                back = np.from_dlpack(t)
                np.testing.assert_array_equal(back, src)
                assert back.flags.writeable is not readonly
                assert memoryview(t).readonly is readonly
                again = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 3)))
                assert again.readonly is readonly and again.data_ptr == src.ctypes.data
                converted = dlbridge.to_numpy(t)
                np.testing.assert_array_equal(converted, src)
                assert converted.flags.writeable is not readonly
                copied = t.copy()
                assert not copied.readonly and copied.is_copied
                assert copied.tolist() == src.tolist()
                for protocol in (2, 5):
                    loaded = pickle.loads(pickle.dumps(t, protocol=protocol))
                    assert loaded.readonly is readonly, protocol
                    np.testing.assert_array_equal(np.from_dlpack(loaded), src)
                if readonly:
                    # A read-only producer never yields a writable view, whatever the path.
                    with pytest.raises(BufferError):
                        t.__dlpack__(copy=False)  # a legacy capsule cannot carry the flag
                    legacy = dlbridge.from_dlpack(t.__dlpack__())  # so it gets a copy
                    assert legacy.data_ptr != src.ctypes.data
                    del legacy
                    with pytest.raises((BufferError, ValueError)):
                        dlbridge.copyto(t, src)
                del t, back, again, converted, copied, loaded
            del own
        return i

    counts = _in_threads(N_THREADS, work)
    assert all(c > 0 for c in counts), counts
    del one, one_frozen
    gc.collect()
    assert all(r() is None for r in sampled), "an imported array was never freed"
    np.testing.assert_array_equal(shared, np.arange(256, dtype=np.float64))
    assert not frozen.flags.writeable


def test_one_capsule_imported_from_many_threads_is_taken_once():
    rounds = 0
    stop = time.monotonic() + SHORT
    while rounds == 0 or time.monotonic() < stop:
        rounds += 1
        data = np.arange(16, dtype=np.float64) + rounds
        versioned = rounds % 2 == 0
        fake = FakeManagedTensor(
            data=data, shape=(16,), strides=(1,), dtype="float64", versioned=versioned
        )
        capsule = fake.capsule()

        def take(_k: int):
            try:
                t = dlbridge.from_dlpack(capsule)
            except BufferError as exc:
                assert "already consumed" in str(exc), exc
                return None
            values = np.from_dlpack(t).copy()
            del t
            return values

        results = _in_threads(4, take)
        winners = [r for r in results if r is not None]
        assert len(winners) == 1, f"{len(winners)} threads took one capsule"
        np.testing.assert_array_equal(winners[0], data)
        gc.collect()
        assert fake.finalize() == 1, "the producer's deleter must run exactly once"
    assert rounds > 0


def test_many_threads_drop_tensors_so_deleters_run_concurrently():
    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None
    stop = time.monotonic() + SHORT
    rounds = 0
    while rounds == 0 or time.monotonic() < stop:
        rounds += 1
        fakes = [
            FakeManagedTensor(
                data=np.arange(8, dtype=np.float64), shape=(8,), strides=(1,), dtype="float64"
            )
            for _ in range(N_THREADS)
        ]
        held: list[list] = []
        for fake in fakes:
            t = dlbridge.from_dlpack(fake.capsule())
            objs = [t, t.view("int64"), np.from_dlpack(t)]
            objs.append(dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 3))))
            if torch is not None:
                objs.append(torch.from_dlpack(t))
            held.append(objs)
            del t
        source = np.arange(32, dtype=np.float32)
        sampled = weakref.ref(source)
        shared = dlbridge.from_dlpack(source)
        for objs in held:
            objs.extend(
                dlbridge.from_dlpack(shared.__dlpack__(max_version=(1, 3))) for _ in range(4)
            )
        del source, shared

        def drop(k: int) -> None:
            objs = held[k]
            held[k] = []
            objs.clear()

        _in_threads(N_THREADS, drop)
        gc.collect()
        assert [f.finalize() for f in fakes] == [1] * N_THREADS, "deleter counts"
        assert sampled() is None, "the shared source was never freed"
    assert rounds > 0


def test_bad_input_keeps_its_answer_under_threads():
    """Refusals raced from many threads: the same clear exception every time, the producer's
    deleter called once for each refused tensor, and read-only memory never handed out
    writable."""
    frozen = np.arange(8, dtype=np.float32)
    frozen.flags.writeable = False
    stop = time.monotonic() + SHORT

    def work(_k: int) -> int:
        i = 0
        while i == 0 or time.monotonic() < stop:  # at least once, however loaded
            i += 1
            with pytest.raises(TypeError):  # NoProtocolError
                dlbridge.from_dlpack(object())
            bad = FakeManagedTensor(
                data=np.arange(4.0), shape=(-4,), strides=(1,), dtype="float64"
            )
            with pytest.raises(BufferError, match="negative extent"):
                dlbridge.from_dlpack(bad.capsule())
            assert bad.finalize() == 1
            used = dlbridge.from_dlpack(frozen).__dlpack__(max_version=(1, 3))
            dlbridge.from_dlpack(used)
            with pytest.raises(BufferError, match="already consumed"):
                dlbridge.from_dlpack(used)
            t = dlbridge.from_dlpack(frozen)
            with pytest.raises(BufferError):
                dlbridge.copyto(t, np.zeros(8, dtype=np.float32))
            assert not np.from_dlpack(t).flags.writeable
            assert memoryview(t).readonly
        return i

    counts = _in_threads(N_THREADS, work)
    assert all(c > 0 for c in counts), counts
    np.testing.assert_array_equal(frozen, np.arange(8, dtype=np.float32))


def test_one_tensor_read_by_threads_while_others_export_it():
    """Half the threads read one Tensor (its description, a NumPy view, its buffer, a copy)
    while the other half export it again and again, versioned and legacy, and drop the
    exports: the readers always see the same values, and the exports never change them."""
    source = np.arange(1024, dtype=np.float32).reshape(32, 32)
    one = dlbridge.from_dlpack(source)
    stop = time.monotonic() + SHORT

    def work(k: int) -> int:
        i = 0
        while i == 0 or time.monotonic() < stop:  # at least once, however loaded
            i += 1
            if k % 2 == 0:
                assert one.shape == (32, 32) and one.dtype == "float32"
                assert one.data_ptr == source.ctypes.data
                np.testing.assert_array_equal(np.from_dlpack(one), source)
                assert memoryview(one).tobytes() == source.tobytes()
                assert one.copy().tolist() == source.tolist()
            else:
                capsules = [one.__dlpack__(max_version=(1, 3)), one.__dlpack__()]
                if i % 2:
                    views = [dlbridge.from_dlpack(c) for c in capsules]
                    assert all(v.data_ptr == source.ctypes.data for v in views)
                    del views
                del capsules
        return i

    counts = _in_threads(N_THREADS, work)
    assert all(c > 0 for c in counts), counts
    held = weakref.ref(source)
    one = source = None  # the last references (the threads have ended)
    gc.collect()
    assert held() is None, "the source outlived every export"


_SHUTDOWN_SCRIPT = """
import sys, threading, time
import numpy as np
import dlbridge

def exchange():
    a = np.arange(4096, dtype=np.float64)
    while True:
        t = dlbridge.from_dlpack(a)
        dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 3)))
        np.from_dlpack(t)
        dlbridge.convert(t, "numpy", copy=True)
        dlbridge.from_dlpack(t.__dlpack__())

threads = [threading.Thread(target=exchange, daemon=True) for _ in range(4)]
for th in threads:
    th.start()
time.sleep(0.3)
print("exiting with", sum(th.is_alive() for th in threads), "threads exchanging", flush=True)
"""


def test_interpreter_shutdown_while_threads_exchange():
    """The interpreter exits while daemon threads are in the middle of exchanges (capsules,
    tensors and deleters in flight): it exits cleanly, without a crash or a fatal error."""
    import subprocess
    import sys

    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", _SHUTDOWN_SCRIPT],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "exiting with 4 threads exchanging" in done.stdout
        assert "Fatal Python error" not in done.stderr, done.stderr[-2000:]


def test_gil_stays_off_with_dlbridge_and_the_peers_imported():
    """On a free-threaded interpreter, importing dlbridge (and the peers that have
    free-threaded builds) leaves the GIL off, so the tests above really run in parallel.
    Checked in a fresh interpreter without PYTHON_GIL, which would force the answer."""
    import subprocess
    import sys
    import sysconfig

    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("not a free-threaded interpreter: the GIL is always on")
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_GIL"}
    script = (
        "import importlib.util, sys, dlbridge\n"
        "peers = ['numpy', 'torch', 'jax', 'pyarrow', 'ml_dtypes', 'pandas']\n"
        "here = [p for p in peers if importlib.util.find_spec(p)]\n"
        "for p in here: __import__(p)\n"
        "print(sys._is_gil_enabled(), ','.join(here))\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    enabled, imported = done.stdout.split()
    assert enabled == "False", f"the GIL came back with {imported} imported"


def test_module_functions_take_no_shared_reference_count():
    """On a free-threaded interpreter, the extension's functions have deferred reference
    counting, as CPython gives the functions of its own modules (``math.sqrt``): a thread that
    loads ``dlbridge.from_dlpack`` then takes no reference to it, so threads calling it do not
    all write one reference count (a cache line passed between cores on every call). CPython
    reports the count of such an object with a large bias, which is what is compared."""
    import math
    import sys
    import sysconfig
    import types

    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("not a free-threaded interpreter: references are plain increments")
    bias = sys.getrefcount(math.sqrt)
    assert bias > 2**32, "CPython's own functions are not deferred here: nothing to compare"
    from dlbridge import _native

    functions = {
        name: f
        for name in dir(_native)
        if isinstance(f := getattr(_native, name), types.BuiltinFunctionType)
    }
    assert {"from_dlpack", "to_numpy", "copyto"} <= functions.keys()
    for name, f in functions.items():
        assert sys.getrefcount(f) > bias // 2, f"{name} has a plain reference count"


def test_class_types_take_no_shared_reference_count():
    """On a free-threaded interpreter, ``Tensor``, ``DType`` and ``Device`` are immortal, as
    CPython's static types are: every instance holds a reference to its type, and freeing one
    would otherwise change the type's shared count from every thread (an import makes and
    frees a ``Tensor`` on each call)."""
    import sys
    import sysconfig

    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("not a free-threaded interpreter: references are plain increments")
    for ty in (dlbridge.Tensor, dlbridge.DType, dlbridge.Device):
        assert sys._is_immortal(ty), ty
    # Instances still come and go as before.
    t = dlbridge.from_dlpack(np.arange(3.0))
    assert (type(t), str(t.dtype), str(t.device)) == (dlbridge.Tensor, "float64", "cpu")
    assert np.from_dlpack(t).tolist() == [0.0, 1.0, 2.0]
