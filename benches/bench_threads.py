#!/usr/bin/env python3
"""Exchanges from several threads at once: does dlbridge scale when the GIL is off?

    python benches/bench_threads.py            # full run, writes benches/results/threads.md
    python benches/bench_threads.py --quick    # smoke test, writes results/threads-quick.md
    python benches/bench_threads.py --gil-python PATH   # also time one thread under PATH

Run it with a free-threaded interpreter (``scripts/freethreaded.sh`` builds one and its venv)
to measure what matters; under a GIL build the threads take turns and the ratios stay near
1.0, which the table then says.

Throughput rows: each of N threads (N = 1, then 2) runs one workload on its own arrays for a
fixed time, starting together at a barrier, through a workload function of its own (threads
that share one Python function contend on its reference count on a free-threaded build, a cost
of the harness rather than of the workload); the row reports the calls per second of all
threads together and the ratio ``2 threads / 1 thread``. The samples of 1 and 2 threads are
interleaved (a b, b a, ...), so load drift on the shared machine hits both alike; the medians
are compared. Workloads, each on a distinct 16-element float32 array per thread:

- ``dlbridge.from_dlpack(a)``: an import of a NumPy array, and its release;
- ``np.from_dlpack(dlbridge.from_dlpack(a))``: an import and an export, with their deleters;
- ``dlbridge.convert(a, "torch")`` (``"numpy"`` without torch): the planner and a zero-copy
  exchange;
- the same pair through NumPy alone (``np.from_dlpack(a)``), the peer's own scaling;
- a pure-Python loop (``sum`` over a range), the machine's limit: how far two threads of plain
  interpreted code scale on this machine, whatever dlbridge does.

One-thread cost row (``--gil-python``): the ns per call of ``dlbridge.from_dlpack(a)`` on one
thread under this interpreter and under the one given (a GIL build with dlbridge and NumPy
installed), and their ratio, so the price of the free-threaded build is in the table too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (
    command_line,
    cpu_model,
    fmt_ratio,
    format_versions,
    git_rev,
    loadavg,
    native_build,
    sample_interleaved,
    try_import,
    utc_now,
    write_results,
)

FULL = {"seconds": 0.5, "samples": 11, "one_thread_calls": 20000, "one_thread_samples": 21}
QUICK = {"seconds": 0.1, "samples": 3, "one_thread_calls": 2000, "one_thread_samples": 5}
#: The target for the dlbridge rows on a free-threaded build with two idle cores.
TARGET = 1.6
#: The target for the one-thread cost on the free-threaded build against a GIL build.
ONE_THREAD_TARGET = 1.05


def free_threaded() -> bool:
    """Whether this interpreter is a free-threaded build with the GIL off right now."""
    built = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    return built and not sys._is_gil_enabled()


def workloads(np: Any, dlbridge: Any, torch: Any | None) -> dict[str, Callable[[Any], None]]:
    """The workloads by row name, each a function of one thread's own array."""
    target = "torch" if torch is not None else "numpy"

    def import_only(a: Any) -> None:
        dlbridge.from_dlpack(a)

    def through_dlbridge(a: Any) -> None:
        np.from_dlpack(dlbridge.from_dlpack(a))

    def convert(a: Any) -> None:
        dlbridge.convert(a, target)

    def numpy_alone(a: Any) -> None:
        np.from_dlpack(a)

    def pure_python(_a: Any) -> None:
        sum(range(64))

    return {
        "`dlbridge.from_dlpack(a)`": import_only,
        "`np.from_dlpack(dlbridge.from_dlpack(a))`": through_dlbridge,
        f'`dlbridge.convert(a, "{target}")`': convert,
        "`np.from_dlpack(a)` (NumPy alone)": numpy_alone,
        "`sum(range(64))` (pure Python: the machine's limit)": pure_python,
    }


def throughput(
    make_work: Callable[[], Callable[[Any], None]], arrays: list[Any], seconds: float
) -> float:
    """Calls per second of ``len(arrays)`` threads, each calling a workload function of its own
    (made by ``make_work``) on its own array for ``seconds`` after starting together.

    Each thread has its own function object because a call takes a reference to the function
    and to its closure cells: on a free-threaded build, threads calling one shared nested
    function contend on those reference counts, a cost of the harness, not of the workload."""
    n = len(arrays)
    counts = [0] * n
    start = threading.Barrier(n + 1)
    stop = [0.0]

    def run(k: int) -> None:
        a = arrays[k]
        work = make_work()
        start.wait()
        i = 0
        deadline = stop[0]
        while time.perf_counter() < deadline:
            for _ in range(50):
                work(a)
            i += 50
        counts[k] = i

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for th in threads:
        th.start()
    stop[0] = time.perf_counter() + seconds
    t0 = time.perf_counter()
    start.wait()
    for th in threads:
        th.join()
    return sum(counts) / (time.perf_counter() - t0)


def one_thread_ns(calls: int, samples: int) -> float:
    """Median ns per call of ``dlbridge.from_dlpack(a)`` on one thread (what ``--gil-python``
    runs under the other interpreter, through ``--one-thread``)."""
    import numpy as np

    import dlbridge

    a = np.arange(16, dtype=np.float32)
    for _ in range(1000):
        dlbridge.from_dlpack(a)

    def sample() -> float:
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            dlbridge.from_dlpack(a)
        return (time.perf_counter_ns() - t0) / calls

    values, _ = sample_interleaved([sample], samples)
    return statistics.median(values[0])


def interpreter() -> str:
    """This interpreter in words: version, and whether it is free-threaded with the GIL off."""
    kind = "free-threaded, GIL off" if free_threaded() else "GIL"
    if sysconfig.get_config_var("Py_GIL_DISABLED") and sys._is_gil_enabled():
        kind = "free-threaded build, GIL on"
    return f"CPython {platform.python_version()} ({kind})"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the table and write it (unless ``--no-write``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of seconds")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--out", type=Path, help="where to write the table")
    parser.add_argument("--gil-python", help="a GIL interpreter to time one thread under")
    parser.add_argument("--one-thread", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args.one_thread:
        ns = one_thread_ns(cfg["one_thread_calls"], cfg["one_thread_samples"])
        print(json.dumps({"ns": ns, "interpreter": interpreter()}))
        return 0

    import numpy as np

    import dlbridge

    torch = try_import("torch")
    rows = []
    for name in workloads(np, dlbridge, torch):

        def make(name: str = name) -> Callable[[Any], None]:
            return workloads(np, dlbridge, torch)[name]

        ones = [np.arange(16, dtype=np.float32)]
        twos = [np.arange(16, dtype=np.float32) for _ in range(2)]
        throughput(make, twos, cfg["seconds"] / 5)  # warm-up, both threads
        values, errors = sample_interleaved(
            [
                lambda arrays=ones: throughput(make, arrays, cfg["seconds"]),
                lambda arrays=twos: throughput(make, arrays, cfg["seconds"]),
            ],
            cfg["samples"],
        )
        if errors[0] or errors[1]:
            failed = errors[0] or errors[1]
            rows.append(f"| {name} | error: {type(failed).__name__} | | | |")
            continue
        one, two = statistics.median(values[0]), statistics.median(values[1])
        target = "—" if "dlbridge" not in name else f"≥ {TARGET}x"
        rows.append(f"| {name} | {one:,.0f} | {two:,.0f} | {fmt_ratio(two / one)} | {target} |")

    lines = [
        "# Threads: throughput of 1 against 2 threads",
        "",
        f"- date: {utc_now()}; command: `{command_line('benches/bench_threads.py', argv)}`",
        f"- interpreter: {interpreter()}; {os.cpu_count()} CPUs ({cpu_model()}); "
        f"load average at start: {loadavg()}",
        f"- versions: {format_versions({'numpy': np, 'torch': torch, 'dlbridge': dlbridge})}",
        f"- dlbridge: {git_rev()}, {native_build(dlbridge)}",
        f"- {cfg['samples']} samples of {cfg['seconds']} s per side, interleaved; medians",
        "",
        "| workload | 1 thread (calls/s) | 2 threads (calls/s) | 2 / 1 | target |",
        "|---|---:|---:|---:|---:|",
        *rows,
    ]
    if not free_threaded():
        lines += ["", "The GIL is on here: threads take turns, so no row can scale."]
    if args.gil_python:
        here = one_thread_ns(cfg["one_thread_calls"], cfg["one_thread_samples"])
        other = json.loads(
            subprocess.run(
                [args.gil_python, __file__, "--one-thread", *(["--quick"] if args.quick else [])],
                capture_output=True, text=True, check=True,
            ).stdout
        )
        lines += [
            "",
            "| one thread: `dlbridge.from_dlpack(a)` | ns per call | ratio | target |",
            "|---|---:|---:|---:|",
            f"| {other['interpreter']} | {other['ns']:,.0f} | 1.00x | |",
            f"| {interpreter()} | {here:,.0f} | {fmt_ratio(here / other['ns'])} "
            f"| ≤ {ONE_THREAD_TARGET}x |",
        ]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        print(f"written: {write_results(text, args.out, 'threads', args.quick)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
