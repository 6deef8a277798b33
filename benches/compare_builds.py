"""Two builds of the extension, side by side in one process: the exchanges whose cost is
dlbridge's own, timed for ``--before PATH`` (e.g. an earlier commit's ``lib_native.so``) and
``--after PATH`` (default: the installed ``dlbridge._native``), interleaved as
``bench_exchange.py`` interleaves a row's two sides.

A build given by its path is loaded from that file under a module name of its own: its
functions and types are its own (a Tensor it makes is exported by its own code), and the peers
are the same objects for both sides. Give both paths (files other than the installed one) so
that neither side is the package's own module, whose calls may cost a few percent more or less
only for where it sits in memory. Only the extension is compared, not the Python package.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_exchange import FULL, N_ELEMS, QUICK
from harness import (
    command_line,
    cpu_model,
    fmt_ratio,
    git_rev,
    loadavg,
    measure_pair,
    median_ratio,
    native_build,
    utc_now,
)

#: the statements timed for each build: ``{dlb}`` is that build's module, ``{tensor}`` a
#: Tensor that build made from ``np_array``
ROWS = (
    "{dlb}.from_dlpack(np_array)",
    "{dlb}.from_dlpack(torch_t)",
    "{dlb}.from_dlpack(pa_array)",
    "{dlb}.from_dlpack({tensor})",
    "np.from_dlpack({tensor})",
    "torch.from_dlpack({tensor})",
    "{tensor}.__dlpack__()",
    "{tensor}.to_device('cpu')",
    "{tensor}.copy()",
)


def load_build(path: Path, name: str) -> ModuleType:
    """The extension at ``path``, loaded as a module of its own (its init function is found
    by the last part of the name, ``_native``)."""
    spec = importlib.util.spec_from_file_location(f"_dlbridge_{name}_build._native", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def side(dlb: ModuleType, np_array: Any, suffix: str) -> dict[str, Any]:
    """One build's names in the namespace both sides' statements run in."""
    return {f"dlb{suffix}": dlb, f"tensor{suffix}": dlb.from_dlpack(np_array)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="the earlier build's extension")
    ap.add_argument("--after", type=Path, help="the later build's (default: the installed one)")
    ap.add_argument("--quick", action="store_true", help="few samples, for smoke tests")
    ap.add_argument("--samples", type=int, help="samples per side (default 41, quick 5)")
    ap.add_argument("--number", type=int, help="calls per sample (default 2000, quick 200)")
    ap.add_argument("--rounds", type=int, help="runs of the pair both ways round, each in a "
                    "process of its own; the table is the order-cancelled ratios' medians")
    ap.add_argument("--medians", action="store_true", help=argparse.SUPPRESS)  # for --rounds
    args = ap.parse_args(argv)
    if args.rounds:
        return both_ways_round(args, argv or sys.argv[1:])
    params = dict(QUICK if args.quick else FULL)
    params.update({k: v for k, v in (("samples", args.samples), ("number", args.number)) if v})

    import numpy as np
    import pyarrow as pa
    import torch

    import dlbridge._native

    np_array = np.arange(N_ELEMS, dtype=np.float32)
    peers = {"np": np, "torch": torch, "np_array": np_array, "pa_array": pa.array(np_array),
             "torch_t": torch.arange(N_ELEMS, dtype=torch.float32)}
    before = load_build(args.before, "before")
    after = load_build(args.after, "after") if args.after else dlbridge._native
    ns = {**peers, **side(after, np_array, "_a"), **side(before, np_array, "_b")}
    if args.medians:
        print(json.dumps(medians(ns, params)))
        return 0
    print(f"- date: {utc_now()}; command: `{command_line('benches/compare_builds.py', argv)}`")
    print(f"- before: extension {native_build(SimpleNamespace(_native=before))}")
    print(f"- after: extension {native_build(SimpleNamespace(_native=after))}; the worktree "
          f"is at commit {git_rev()}")
    print(f"- {params['samples']} samples x {params['number']} calls per side, interleaved; "
          f"CPU: {cpu_model()}; load average at start: {loadavg()}")
    print("\n| exchange | before (ns, min / median) | after (ns, min / median) | after / before |")
    print("|---|---|---|---|")
    for row in ROWS:
        a, b = measure_pair(row.format(dlb="dlb_a", tensor="tensor_a"),
                            row.format(dlb="dlb_b", tensor="tensor_b"), ns,
                            number=params["number"], samples=params["samples"],
                            warmup=params["warmup"])
        shown = row.format(dlb="dlbridge", tensor="tensor")
        print(f"| `{shown}` | {b.cell()} | {a.cell()} | {fmt_ratio(median_ratio(a, b))} |")
    return 0


def medians(ns: dict[str, Any], params: dict[str, int]) -> dict[str, list[float | None]]:
    """Each row's median ns per call, ``[before, after]``."""
    out = {}
    for row in ROWS:
        a, b = measure_pair(row.format(dlb="dlb_a", tensor="tensor_a"),
                            row.format(dlb="dlb_b", tensor="tensor_b"), ns,
                            number=params["number"], samples=params["samples"],
                            warmup=params["warmup"])
        out[row.format(dlb="dlbridge", tensor="tensor")] = [b.med_ns, a.med_ns]
    return out


def both_ways_round(args: argparse.Namespace, argv: list[str]) -> int:
    """``--rounds N``: N rounds of two processes, the after build loaded second in one and
    first in the other. The build loaded second may run a few percent slower or faster for where
    its code lands alone; the order-cancelled ratio, the square root of (after / before with
    after second) / (before / after with before second), leaves that out."""
    assert args.after, "--rounds needs --after (a file, not the installed module)"
    sampling = ["--quick"] if args.quick else []
    sampling += [f"--{k}={v}" for k in ("samples", "number") if (v := getattr(args, k))]

    def run(before: Path, after: Path) -> dict[str, list[float]]:
        order = ["--before", str(before), "--after", str(after), *sampling, "--medians"]
        out = subprocess.run([sys.executable, __file__, *order], check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out.splitlines()[-1])

    ratios: dict[str, list[float]] = {}
    times: dict[str, tuple[list[float], list[float]]] = {}
    for _ in range(args.rounds):
        ab, ba = run(args.before, args.after), run(args.after, args.before)
        for row, (b1, a1) in ab.items():
            a2, b2 = ba[row]  # swapped: the "before" slot holds the after build
            ratios.setdefault(row, []).append(math.sqrt((a1 / b1) / (b2 / a2)))
            before, after = times.setdefault(row, ([], []))
            before += [b1, b2]
            after += [a1, a2]
    print(f"- date: {utc_now()}; command: `{command_line('benches/compare_builds.py', argv)}`")
    print(f"- before: {args.before}; after: {args.after}; {args.rounds} rounds, each both ways "
          f"round; CPU: {cpu_model()}; load average at end: {loadavg()}")
    print("\n| exchange | before, ns (median) | after, ns (median) | after / before, order "
          "cancelled (median of rounds) | range |")
    print("|---|---|---|---|---|")
    for row, rs in ratios.items():
        before, after = times[row]
        print(f"| `{row}` | {statistics.median(before):.0f} | {statistics.median(after):.0f} | "
              f"{statistics.median(rs):.2f}x | {min(rs):.2f}-{max(rs):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
