#!/usr/bin/env python3
"""Moving tensors between processes: pickling, shared memory, Ray's object store.

    python benches/bench_processes.py            # full run, writes benches/results/processes.md
    python benches/bench_processes.py --quick    # smoke test, writes results/processes-quick.md

Three groups, each timing dlbridge against its peers on the same data in one process run,
samples interleaved (the order rotates every sample), with the garbage collector off:

- pickle protocol 5 round trip: ``pickle.loads(pickle.dumps(x, protocol=5,
  buffer_callback=bufs.append), buffers=bufs)`` of a float32 tensor, dlbridge against NumPy
  and torch, at a small and a large size (an out-of-band pickle costs the same at both);
- sending a tensor to a worker process and getting its checksum back (two pairs, each timed
  on its own so that neither pays for the other's traffic): the parent puts the
  object on a ``multiprocessing`` queue, a worker (started before timing, spawn) reads all
  its bytes and replies with their sum; a ``dlbridge.to_shared`` Tensor (its handle travels)
  against a NumPy array (a plain pickle: the bytes travel through the queue's pipe) and
  against a torch tensor after ``share_memory_()`` (torch's own fd reduction). Each
  shared-memory side makes a fresh copy of the data before every sample, untimed, after
  freeing its previous one (so both get their pages the same way); the worker drops what it
  received before it replies, so every sample maps the memory anew and pays for its own
  unmapping, not the next sample; each round trip ends with a small echo, so that the
  parent's queue frees the pickle it sent within the same sample;
- ``ray.get`` of a float32 tensor already in a local Ray's object store (two CPUs), a dlbridge
  Tensor against a NumPy array.

Reported: min and median time per round trip and ratio = dlbridge median / peer median (below
1.0 means dlbridge is faster), with the target where one is set. A missing library skips its
rows; a statement that raises is reported as ``error: <Type>``.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import pickle
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (
    command_line,
    cpu_model,
    error_name,
    fmt_ratio,
    format_versions,
    git_rev,
    loadavg,
    make_loop,
    native_build,
    sample_interleaved,
    try_import,
    utc_now,
    write_results,
)

MiB = 1 << 20
FULL = {
    "pickle_sizes": [MiB, 256 * MiB], "pickle_samples": 21,
    "send_size": 1024 * MiB, "send_samples": 11,
    "ray_size": 256 * MiB, "ray_samples": 21,
}
QUICK = {
    "pickle_sizes": [MiB, 16 * MiB], "pickle_samples": 5,
    "send_size": 16 * MiB, "send_samples": 3,
    "ray_size": 16 * MiB, "ray_samples": 5,
}
#: Calls per sample of the O(1) statements (pickle-5 round trips, ray.get); torch's pickle
#: copies the data, so its rows use fewer.
FAST_CALLS = 200
COPYING_CALLS = 2
#: Round trips dropped before timing a shared-memory side: the first ones are slower and
#: erratic (the worker's first import of the library, the kernel settling the mappings).
SHARED_WARMUP = 5
#: A small message the worker echoes (see ``Worker.round_trip``).
FLUSH = "flush"


@dataclass
class Side:
    """One contender: the statement shown, and how a sample of it is taken (seconds)."""

    label: str
    sample: Callable[[], float] | None = None
    warmup: int = 1  # samples taken and dropped before timing (the first also checks it works)
    times: list[float] = field(default_factory=list)
    error: str | None = None
    skipped: str | None = None

    @property
    def med(self) -> float | None:
        return statistics.median(self.times) if self.times and not self.error else None

    def cell(self) -> str:
        if self.skipped:
            return f"skipped: {self.skipped}"
        if self.error:
            return self.error
        if not self.times:
            return "—"
        return f"{fmt_time(min(self.times))} / {fmt_time(statistics.median(self.times))}"


@dataclass
class Group:
    """dlbridge's side (first) and its peers on the same data."""

    title: str
    size: str
    sides: list[Side]
    targets: dict[str, float] = field(default_factory=dict)  # peer label -> max ratio
    note: str = ""


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:,.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:,.1f} ms"
    return f"{seconds:,.2f} s"


def fmt_size(nbytes: int) -> str:
    return f"{nbytes // (1 << 30)} GiB" if nbytes >= 1 << 30 else f"{nbytes // MiB} MiB"


def measure(group: Group, samples: int) -> None:
    """Warm every side up (its first call also tells whether it works), then take ``samples``
    interleaved samples of those that work."""
    fns: list[Callable[[], float] | None] = []
    for side in group.sides:
        if side.sample is None or side.error:
            fns.append(None)
            continue
        try:
            for _ in range(side.warmup):
                side.sample()
        except Exception as exc:  # noqa: BLE001 - reported in the table
            side.error = error_name(exc)
            print(f"  {side.label}: {type(exc).__name__}: {exc}", file=sys.stderr)
            fns.append(None)
            continue
        fns.append(side.sample)
    values, errors = sample_interleaved(fns, samples)
    for side, times, err in zip(group.sides, values, errors):
        if err is not None:
            side.error = error_name(err)
        else:
            side.times = times


# ---------------------------------------------------------------------------- pickle


PICKLE_STMT = (
    "_b = []; pickle.loads(pickle.dumps({x}, protocol=5, buffer_callback=_b.append), buffers=_b)"
)


def loop_sample(stmt: str, ns: dict[str, Any], calls: int) -> Callable[[], float]:
    loop = make_loop(stmt, ns)
    return lambda: loop(calls) / calls / 1e9


def pickle_group(nbytes: int, mods: dict[str, Any]) -> Group:
    np, torch, dlbridge = mods["numpy"], mods["torch"], mods["dlbridge"]
    n = nbytes // 4
    np_array = np.arange(n, dtype=np.float32)
    ns: dict[str, Any] = {"pickle": pickle, "np_array": np_array,
                          "tensor": dlbridge.from_dlpack(np_array.copy())}
    sides = [
        Side("dlbridge.Tensor", loop_sample(PICKLE_STMT.format(x="tensor"), ns, FAST_CALLS)),
        Side("numpy.ndarray", loop_sample(PICKLE_STMT.format(x="np_array"), ns, FAST_CALLS)),
    ]
    if torch is None:
        sides.append(Side("torch.Tensor", skipped="torch not installed"))
    else:
        ns["torch_t"] = torch.arange(n, dtype=torch.float32)
        torch_sample = loop_sample(PICKLE_STMT.format(x="torch_t"), ns, COPYING_CALLS)
        sides.append(Side("torch.Tensor", torch_sample))
    return Group(
        "pickle protocol 5 round trip (dumps with buffer_callback, loads with buffers)",
        fmt_size(nbytes), sides, targets={"numpy.ndarray": 1.5},
        note="NumPy and dlbridge hand their memory out of band (no copy either way); torch "
        "pickles its storage in band (a copy at dumps and at loads).",
    )


# ---------------------------------------------------------------------------- worker process


def worker_main(inbox, outbox) -> None:
    """Runs in the worker: for each object received, the sum of all its bytes (as uint64,
    wrapping), then the object is dropped; ``FLUSH`` is echoed back; None ends the loop."""
    import numpy as np

    outbox.put("ready")
    while True:
        x = inbox.get()
        if x is None:
            return
        if isinstance(x, str):
            outbox.put(x)
            continue
        total = checksum(np, x)
        del x  # unmapped (or freed) before the reply: each sample pays for its own cleanup
        outbox.put(total)


def checksum(np, x) -> int:
    """Sum of the bytes of ``x`` read as uint64 (wrapping): every byte is read."""
    return int(np.from_dlpack(x).reshape(-1).view(np.uint64).sum(dtype=np.uint64))


class Worker:
    """A worker process started with ``spawn`` and fed through two queues."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.inbox, self.outbox = ctx.Queue(), ctx.Queue()
        self.process = ctx.Process(target=worker_main, args=(self.inbox, self.outbox), daemon=True)
        self.process.start()
        assert self.outbox.get(timeout=120) == "ready"

    def round_trip(self, x: Any, want: int) -> float:
        """Seconds to send ``x`` and get its checksum back, then to echo ``FLUSH``: the queue's
        feeder thread keeps the last pickle it sent until the next one, so without the echo
        the 1 GiB pickle of a plain array would be freed inside the next side's sample."""
        t0 = time.perf_counter()
        self.inbox.put(x)
        got = self.outbox.get(timeout=600)
        self.inbox.put(FLUSH)
        echoed = self.outbox.get(timeout=600)
        elapsed = time.perf_counter() - t0
        assert echoed == FLUSH
        if got != want:
            raise AssertionError(f"worker checksum {got} != {want}")
        return elapsed

    def close(self) -> None:
        self.inbox.put(None)
        self.process.join(timeout=60)
        if self.process.is_alive():  # pragma: no cover - a stuck worker
            self.process.kill()
            self.process.join()


def fresh_shared_sample(
    make: Callable[[], Any], worker: Worker, want: int
) -> Callable[[], float]:
    """A sample of sending shared memory: ``make()`` a new copy of the data in shared memory
    (untimed; the previous copy is freed first, so that both sides get their pages the same
    way), then time one round trip of it."""
    current: list[Any] = [None]

    def sample() -> float:
        current[0] = None
        current[0] = make()
        return worker.round_trip(current[0], want)

    return sample


def send_groups(nbytes: int, mods: dict[str, Any], worker: Worker) -> list[Group]:
    """Two pairs, each timed on its own so that neither pays for the other's traffic:
    ``to_shared`` against a plain pickle, and ``to_shared`` against torch's shared memory."""
    np, torch, dlbridge = mods["numpy"], mods["torch"], mods["dlbridge"]
    source = np.arange(nbytes // 8, dtype=np.uint64)
    want = checksum(np, source)
    title = "send to a worker process through a multiprocessing queue, get the checksum back"
    note = ("the worker reads every byte (a uint64 sum) on every side and drops what it "
            "received before it replies. The shared memory (to_shared, share_memory_ of an "
            "empty tensor, then copy_) is made anew before every sample, untimed.")

    def ours() -> Side:
        if not hasattr(dlbridge, "to_shared"):
            return Side("dlbridge.to_shared(t)", skipped="this dlbridge has no to_shared")

        def make_ours() -> Any:
            return dlbridge.to_shared(source)

        return Side("dlbridge.to_shared(t)", fresh_shared_sample(make_ours, worker, want),
                    warmup=SHARED_WARMUP)

    plain = Side("numpy.ndarray (plain pickle)", lambda: worker.round_trip(source, want))
    if torch is None:
        theirs = Side("torch share_memory_()", skipped="torch not installed")
    else:
        import torch.multiprocessing  # registers torch's shared-memory reductions

        def make_torch() -> Any:
            shared = torch.empty(source.size, dtype=torch.uint64).share_memory_()
            return shared.copy_(torch.from_numpy(source))

        theirs = Side("torch share_memory_()", fresh_shared_sample(make_torch, worker, want),
                      warmup=SHARED_WARMUP)
    return [
        Group(title, fmt_size(nbytes), [ours(), plain], targets={plain.label: 0.05}, note=note),
        Group(title, fmt_size(nbytes), [ours(), theirs], targets={theirs.label: 1.0}, note=note),
    ]


# ---------------------------------------------------------------------------- Ray


def ray_group(nbytes: int, mods: dict[str, Any]) -> Group:
    np, ray, dlbridge = mods["numpy"], mods["ray"], mods["dlbridge"]
    title = "ray.get of an object in the local object store"
    if ray is None:
        return Group(title, fmt_size(nbytes), [Side("dlbridge.Tensor", skipped="ray not installed"),
                                               Side("numpy.ndarray", skipped="ray not installed")])
    np_array = np.arange(nbytes // 4, dtype=np.float32)
    ns = {"ray": ray, "np_ref": ray.put(np_array)}
    ours = Side("dlbridge.Tensor")
    try:
        ns["tensor_ref"] = ray.put(dlbridge.from_dlpack(np_array))
        ours.sample = loop_sample("ray.get(tensor_ref)", ns, FAST_CALLS)
    except Exception as exc:  # noqa: BLE001 - reported in the table
        ours.error = error_name(exc)
    return Group(
        title, fmt_size(nbytes),
        [ours, Side("numpy.ndarray", loop_sample("ray.get(np_ref)", ns, FAST_CALLS))],
        targets={"numpy.ndarray": 1.2},
        note="both come back as read-only zero-copy views of the store's shared memory.",
    )


# ---------------------------------------------------------------------------- report


def fmt_small_ratio(r: float | None) -> str:
    """Like ``fmt_ratio``, with two significant digits below 0.1 (``0.0041x``)."""
    return f"{r:.2g}x" if r is not None and r < 0.1 else fmt_ratio(r)


def ratio(ours: Side, peer: Side) -> float | None:
    if ours.med is None or peer.med is None:
        return None
    return ours.med / peer.med


def report(groups: list[Group], params: dict[str, Any], mods: dict[str, Any], command: str,
           quick: bool) -> str:
    lines = [
        "# Moving tensors between processes: pickling, shared memory, Ray",
        "",
        "Generated by `benches/bench_processes.py`. Quote the ratios (all sides of a group "
        "measured in this one run, samples interleaved); absolute times are for this machine "
        "only.",
        "",
        f"- date: {utc_now()}",
        f"- command: `{command}`",
        f"- mode: {'QUICK (smoke test; do not quote)' if quick else 'full'}; samples per "
        f"side: pickle {params['pickle_samples']} (x {FAST_CALLS} calls, torch x "
        f"{COPYING_CALLS}), send {params['send_samples']} (one round trip each, after "
        f"{SHARED_WARMUP} dropped for the shared-memory sides), ray.get "
        f"{params['ray_samples']} (x {FAST_CALLS} calls); gc disabled while timing",
        f"- Python {platform.python_version()}; {format_versions(mods)}",
        f"- dlbridge commit {git_rev()}; extension {native_build(mods['dlbridge'])}",
        f"- CPU: {cpu_model()} ({os.cpu_count()} logical CPUs); load average at start: "
        f"{params['load']}, at end: {loadavg()}",
        *([f"- note: {params['note']}"] if params["note"] else []),
        "",
        "Time per round trip, min / median; ratio = dlbridge median / peer median (below 1 is "
        "faster).",
        "",
        "| what | size | dlbridge | peer | dlbridge time | peer time | ratio | target |",
        "|---|---|---|---|---:|---:|---:|:---:|",
    ]
    for g in groups:
        ours, peers = g.sides[0], g.sides[1:]
        for peer in peers:
            target = g.targets.get(peer.label)
            r = ratio(ours, peer)
            verdict = "" if target is None else f"≤ {target:g}x" + (
                "" if r is None else (" met" if r <= target else " **missed**"))
            lines.append(f"| {g.title} | {g.size} | `{ours.label}` | `{peer.label}` | "
                         f"{ours.cell()} | {peer.cell()} | {fmt_small_ratio(r)} | {verdict} |")
    lines += ["", "Notes:", ""]
    seen = set()
    for g in groups:
        if g.note and g.title not in seen:
            seen.add(g.title)
            lines.append(f"- {g.title}: {g.note}")
    return "\n".join(lines) + "\n"


def libraries() -> dict[str, Any]:
    return {name: try_import(name) for name in ("dlbridge", "numpy", "torch", "ray")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="small sizes, few samples (writes processes-quick.md)")
    ap.add_argument("--only", choices=["pickle", "send", "ray"], help="run one group only")
    ap.add_argument("--note", help="a line for the header, e.g. what else ran on the machine")
    ap.add_argument("--out", type=Path, help="where to write the Markdown")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args(argv)
    params: dict[str, Any] = dict(QUICK if args.quick else FULL, load=loadavg(), note=args.note)
    mods = libraries()
    groups: list[Group] = []

    def run(group: Group, samples: int) -> None:
        measure(group, samples)
        groups.append(group)
        print(f"{group.title} [{group.size}]", flush=True)
        for side in group.sides:
            print(f"  {side.label:32s} {side.cell()}", flush=True)

    if args.only in (None, "pickle"):
        for nbytes in params["pickle_sizes"]:
            run(pickle_group(nbytes, mods), params["pickle_samples"])
    if args.only in (None, "send"):
        worker = Worker()  # before the big arrays exist, so the spawn is cheap
        try:
            for group in send_groups(params["send_size"], mods, worker):
                run(group, params["send_samples"])
        finally:
            worker.close()
    if args.only in (None, "ray") and mods["ray"] is not None:
        ray = mods["ray"]
        ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR,
                 log_to_driver=False)
        try:
            run(ray_group(params["ray_size"], mods), params["ray_samples"])
        finally:
            ray.shutdown()
    elif args.only in (None, "ray"):
        groups.append(ray_group(params["ray_size"], mods))
    command = command_line("benches/bench_processes.py", argv)
    text = report(groups, params, mods, command, args.quick)
    if not args.no_write:
        print(f"wrote {write_results(text, args.out, 'processes', args.quick)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
