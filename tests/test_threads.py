"""Threads (issue 8 item 4, CASES C22/C23): 8 Python threads exchange and drop tensors
concurrently — importing from one shared producer, converting through NumPy, torch and
dlbridge, handing tensors, capsules and arrays to each other through a queue so that they are
dropped on a different thread than the one that made them — with no error and no leak.

Duration: ``DLBRIDGE_THREADS_SECONDS`` (default 2 s; 10 s with ``DLBRIDGE_SOAK=full``).
"No leak" is checked three ways: counting producers end at exactly one deleter call, every
sampled source array is freed once its last user is gone, and resident memory does not grow
beyond a bound after a warm-up.
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
            while time.monotonic() < stop:
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
                    fake = FakeManagedTensor(data=shared, shape=(64,), strides=(1,), dtype="float64")
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
    # MiB here; ctypes producers kept alive by dlpack_ctypes cost a few KiB each.
    assert growth < 4 * 2**20 + stats["fakes"] * 8192, f"RSS grew {growth} bytes"
