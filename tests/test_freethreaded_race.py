"""One DLPack capsule, many consumers at once (catalog C72).

Each round, eight threads wait at a barrier and then import the same capsule: each is handed an
object whose ``__dlpack__`` returns that one capsule (a producer that caches its capsule, or a
caller that shares one between threads). The capsule is a counting FakeManagedTensor, whose
memory stays valid whatever a consumer does, so a double free is counted, not suffered.

With the GIL, every consumer's check-read-rename of the capsule runs without a switch: exactly
one thread takes it, the others get their library's error for a consumed capsule, and the
deleter runs once. On free-threaded CPython with the GIL off (scripts/freethreaded.sh runs this
file there) NumPy and torch can both take it: each import is a separate step from the rename,
so two threads read the capsule before either renames it, and the deleter runs twice. That is
the hazard C72 records; dlbridge takes the capsule's critical section, so two dlbridge imports
never both take one (the first test), but it cannot stop a consumer that does not lock.

Each test runs for about a second (``DLBRIDGE_THREADS_SECONDS`` when shorter).
"""

from __future__ import annotations

import collections
import gc
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import dlbridge
from dlpack_ctypes import FakeManagedTensor

N_THREADS = 8
SECONDS = min(1.0, float(os.environ.get("DLBRIDGE_THREADS_SECONDS", "1")))
MAX_ROUNDS = 3000
FREE_THREADED = not getattr(sys, "_is_gil_enabled", lambda: True)()


class OneCapsule:
    """A producer whose ``__dlpack__`` returns one capsule made beforehand, to every caller."""

    def __init__(self, capsule: Any) -> None:
        self.capsule = capsule

    def __dlpack__(self, **_kw: Any) -> Any:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


@dataclass
class Race:
    """What the rounds of a race gave: per round, the names of the consumers that took the
    capsule, and the deleter calls it had in the end; every loser's (consumer, error)."""

    winners: list[list[str]] = field(default_factory=list)
    deleter_calls: list[int] = field(default_factory=list)
    errors: collections.Counter = field(default_factory=collections.Counter)

    def summary(self) -> str:
        doubles = collections.Counter("+".join(sorted(w)) for w in self.winners if len(w) > 1)
        return (f"{len(self.winners)} rounds, {N_THREADS} threads: winners per round "
                f"{dict(collections.Counter(map(len, self.winners)))}, deleter calls per round "
                f"{dict(collections.Counter(self.deleter_calls))}, double takes {dict(doubles)}")


def race(consumers: dict[str, Callable[[Any], Any]], *, raw: bool = False) -> Race:
    """Rounds of ``N_THREADS`` threads (the consumers in turn) importing one capsule at once,
    for ``SECONDS``; the capsule is handed over raw (``raw``, every other round) or through
    :class:`OneCapsule`."""
    names = list(consumers)
    start = threading.Barrier(N_THREADS + 1, timeout=60)
    done = threading.Barrier(N_THREADS + 1, timeout=60)
    job: dict[str, Any] = {"source": None}
    outcomes: list[tuple[str, Any]] = [("", None)] * N_THREADS

    def run(i: int) -> None:
        name = names[i % len(names)]
        while True:
            start.wait()
            source = job["source"]
            if source is None:
                return
            try:
                outcomes[i] = (name, consumers[name](source))
            except Exception as e:  # noqa: BLE001 - a loser's error is what is recorded
                outcomes[i] = (name, e)
            del source
            done.wait()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(N_THREADS)]
    for t in threads:
        t.start()
    result, fakes = Race(), []
    stop = time.monotonic() + SECONDS
    try:
        while len(fakes) < MAX_ROUNDS and (not fakes or time.monotonic() < stop):
            n = len(fakes)
            data = np.arange(16, dtype=np.float64) + n
            fake = FakeManagedTensor(data=data, shape=(16,), strides=(1,), dtype="float64",
                                     versioned=n % 2 == 0)
            fakes.append(fake)
            capsule = fake.capsule()
            job["source"] = capsule if raw and n % 2 else OneCapsule(capsule)
            start.wait()
            done.wait()
            job["source"] = None
            del capsule
            winners = []
            for name, got in outcomes:
                if isinstance(got, Exception):
                    result.errors[name, type(got).__name__] += 1
                else:
                    assert np.array_equal(np.from_dlpack(got) if name == "dlbridge" else
                                          np.asarray(got), data), name
                    winners.append(name)
            result.winners.append(winners)
            outcomes[:] = [("", None)] * N_THREADS
            del got
    finally:
        job["source"] = None
        start.wait()
        for t in threads:
            t.join()
    gc.collect()
    # what each capsule's destructor would do for one nobody took, then the count
    result.deleter_calls = [fake.finalize() for fake in fakes]
    return result


def test_dlbridge_takes_a_shared_capsule_once(record_property):
    """dlbridge's imports lock the capsule: one winner and one deleter call in every round,
    the capsule handed over raw or through a producer, with or without the GIL."""
    got = race({"dlbridge": dlbridge.from_dlpack}, raw=True)
    record_property("race", got.summary())
    print(got.summary())
    assert [len(w) for w in got.winners] == [1] * len(got.winners), got.summary()
    assert got.deleter_calls == [1] * len(got.winners), got.summary()
    assert set(got.errors) == {("dlbridge", "BufferError")}, got.errors


def test_numpy_and_torch_race_for_one_capsule(record_property):
    """NumPy, torch and dlbridge importing one capsule at once. Every round has a winner and
    every winner frees the capsule once (the deleter calls equal the winners); the losers raise
    the error each library raises for a consumed capsule. With the GIL there is one winner;
    with the GIL off two can win (the hazard of C72, measured and shown here), never two
    dlbridge imports."""
    torch = pytest.importorskip("torch")
    consumers = {"numpy": np.from_dlpack, "torch": torch.from_dlpack,
                 "dlbridge": dlbridge.from_dlpack}
    got = race(consumers)
    record_property("race", got.summary())
    print(got.summary())
    assert all(got.winners), "a round where no consumer took the capsule"
    assert got.deleter_calls == [len(w) for w in got.winners], got.summary()
    # what each raises for a capsule consumed before (NumPy: PyCapsule_GetPointer's ValueError)
    clean = {("numpy", "ValueError"), ("numpy", "BufferError"), ("torch", "RuntimeError"),
             ("torch", "BufferError"), ("dlbridge", "BufferError")}
    assert set(got.errors) <= clean, got.errors
    assert not [w for w in got.winners if w.count("dlbridge") > 1], got.summary()
    if not FREE_THREADED:
        assert [len(w) for w in got.winners] == [1] * len(got.winners), got.summary()
