"""Leaks (issue 8 item 3, CASES C19-C21): resident memory stays flat over long runs.

- the soak: numpy -> dlbridge -> torch -> dlbridge -> numpy round trips (C20's CPU twin);
  100,000 by default, 1,000,000 with ``DLBRIDGE_SOAK=full`` (or ``DLBRIDGE_SOAK_N=<n>``);
  resident memory may grow by less than 1 MiB after a warm-up;
- 100,000 failing exports (a dtype the negotiated version cannot carry, C21), failing imports
  (a hostile capsule, refused every time), and capsules never consumed (C19);
- Arrow round trips (numpy -> dlbridge -> pyarrow -> dlbridge -> numpy).

Resident memory is read from /proc/self/statm (Linux). The figures are printed (run with
``-s``) and recorded in docs/reliability.md. Valgrind runs are described there too.
"""

from __future__ import annotations

import gc
import os
import sys
import time

import numpy as np
import pytest

import dlbridge
from dlpack_ctypes import FakeManagedTensor

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

FULL = os.environ.get("DLBRIDGE_SOAK") == "full"
SOAK_N = int(os.environ.get("DLBRIDGE_SOAK_N", 1_000_000 if FULL else 100_000))
MIB = 2**20


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(label: str, n: int, step, warmup: int | None = None) -> int:
    """Run ``step(i)`` ``warmup`` times, then ``n`` times; return and print the RSS growth
    over the measured part."""
    warmup = min(n // 5, 20_000) if warmup is None else warmup
    for i in range(warmup):
        step(i)
    gc.collect()
    before = rss_bytes()
    t0 = time.perf_counter()
    for i in range(n):
        step(i)
    elapsed = time.perf_counter() - t0
    gc.collect()
    growth = rss_bytes() - before
    print(
        f"\n{label}: {n} iterations in {elapsed:.1f} s ({elapsed / n * 1e6:.1f} us each), "
        f"RSS {before / MIB:.1f} MiB -> growth {growth / 1024:.0f} KiB"
    )
    return growth


def test_soak_numpy_dlbridge_torch_round_trips():
    torch = pytest.importorskip("torch")
    src = np.arange(256, dtype=np.float32).reshape(16, 16)

    def step(i):
        t = dlbridge.from_dlpack(src)
        tt = torch.from_dlpack(t)
        back = dlbridge.from_dlpack(tt)
        out = np.from_dlpack(back)
        if i % 4096 == 0:
            assert out.ctypes.data == src.ctypes.data
            assert out[15, 15] == 255.0

    growth = measure("numpy -> dlbridge -> torch -> dlbridge -> numpy", SOAK_N, step)
    assert growth < MIB, f"RSS grew {growth} bytes over {SOAK_N} round trips"


def test_soak_with_copies_and_views():
    """Each round trip also makes a copy and a strided view: allocations that must all go."""
    src = np.arange(4096, dtype=np.float64).reshape(64, 64)

    def step(i):
        t = dlbridge.from_dlpack(src[::2, ::-1])
        c = t.copy("F")
        n = np.from_dlpack(dlbridge.from_dlpack(c.__dlpack__(max_version=(1, 3))))
        if i % 4096 == 0:
            assert n[0, 0] == 63.0

    growth = measure("strided import + F copy + re-export", SOAK_N // 10, step)
    assert growth < MIB


def test_failing_exports_do_not_grow_memory():  # C21
    fake = FakeManagedTensor(
        data=np.zeros(16, np.uint8), shape=(16,), strides=(1,), dtype="float8_e4m3fn"
    )
    t = dlbridge.from_dlpack(fake.capsule())

    def step(i):
        try:
            t.__dlpack__(max_version=(1, 0))  # noqa: F821 - deleted below, after the loop
        except BufferError:
            return
        raise AssertionError("float8 exported to a DLPack 1.0 consumer")

    growth = measure("failing exports (float8 to max_version=(1, 0))", 100_000, step)
    assert growth < MIB
    del t
    gc.collect()
    assert fake.finalize() == 1


def test_failing_imports_do_not_grow_memory():
    fake = FakeManagedTensor(data=np.zeros(4), shape=(4,), strides=(1,), version=(2, 0),
                             dtype="float64")
    cap = fake.capsule()

    def step(i):
        try:
            dlbridge.from_dlpack(cap)
        except BufferError:
            return
        raise AssertionError("major version 2 accepted")

    growth = measure("failing imports (major version 2)", 100_000, step)
    assert growth < MIB
    assert fake.deleter_calls == 0
    assert fake.finalize() == 1


def test_capsules_never_consumed_do_not_grow_memory():  # C19
    t = dlbridge.from_dlpack(np.arange(64.0))

    def step(i):
        t.__dlpack__(max_version=(1, 3) if i % 2 else None)

    growth = measure("capsules made and dropped unconsumed", 100_000, step)
    assert growth < MIB


def test_arrow_round_trips_do_not_grow_memory():
    pa = pytest.importorskip("pyarrow")
    src = np.arange(1024, dtype=np.float64)

    def step(i):
        t = dlbridge.from_dlpack(src)
        arr = pa.array(t)
        back = dlbridge.from_dlpack(arr)
        out = np.from_dlpack(back)
        if i % 4096 == 0:
            assert out[1023] == 1023.0

    growth = measure("numpy -> dlbridge -> pyarrow -> dlbridge -> numpy", 20_000, step)
    assert growth < MIB


def test_c20_device_memory_flat():  # C20
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("C20 needs a CUDA device (10 000 exchanges of a 4 MB GPU array)")
    x = torch.zeros(1 << 20, device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(10_000):
        y = torch.from_dlpack(dlbridge.from_dlpack(x))
        del y
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before
