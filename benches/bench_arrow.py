#!/usr/bin/env python3
"""Arrow <-> dlbridge <-> NumPy: ns per conversion, against pyarrow's own paths.

    python benches/bench_arrow.py            # full run, writes benches/results/arrow.md
    python benches/bench_arrow.py --quick    # smoke test, writes benches/results/arrow-quick.md

Every row times one conversion through dlbridge and its baseline (pyarrow's own conversion to
the same kind of result) in the same process, samples interleaved, for a small and a large
float32 array: min and median ns per call, and the ratio of the medians (dlbridge / baseline).
All conversions are zero-copy, so the times measure per-call overhead, not bandwidth; the large
size shows that nothing scales with the data. A conversion that raises is reported as
``error: <ExceptionType>``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import os
import platform
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

FULL = {"number": 2000, "samples": 31, "warmup": 500}
QUICK = {"number": 200, "samples": 5, "warmup": 50}

#: (label, number of float32 elements); N-d rows use cells of 4 x 4.
SIZES = [("16 elements", 16), ("1M elements", 1 << 20)]


def make_loop(stmt: str, ns: dict[str, Any]) -> Callable[[int], int]:
    """``for _ in range(n): <stmt>`` compiled in place (no extra call frame), elapsed ns."""
    src = (
        "def _loop(_n, _clock=_clock):\n"
        "    _it = range(_n)\n"
        "    _t0 = _clock()\n"
        "    for _ in _it:\n"
        f"        {stmt}\n"
        "    return _clock() - _t0\n"
    )
    g = dict(ns)
    g["_clock"] = time.perf_counter_ns
    exec(compile(src, f"<bench {stmt}>", "exec"), g)  # noqa: S102 - our own fixed strings
    return g["_loop"]


@dataclass
class Timing:
    min_ns: float | None = None
    med_ns: float | None = None
    error: str | None = None

    def cell(self) -> str:
        if self.error:
            return self.error
        return f"{self.min_ns:,.0f} / {self.med_ns:,.0f}"


@dataclass
class Row:
    conversion: str
    baseline: str
    size: str
    note: str = ""
    a: Timing = field(default_factory=Timing)
    b: Timing = field(default_factory=Timing)

    @property
    def ratio(self) -> float | None:
        if self.a.med_ns is None or self.b.med_ns is None:
            return None
        return self.a.med_ns / self.b.med_ns


def measure(row: Row, ns: dict[str, Any], number: int, samples: int, warmup: int) -> None:
    loops: list[Callable[[int], int] | None] = []
    timings = (row.a, row.b)
    for stmt, timing in zip((row.conversion, row.baseline), timings):
        try:
            loop = make_loop(stmt, ns)
            loop(warmup)
            loops.append(loop)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            timing.error = f"error: {type(exc).__name__}"
            loops.append(None)
    per_call: list[list[float]] = [[], []]
    gc.collect()
    gc.disable()
    try:
        for s in range(samples):
            for i in ((0, 1) if s % 2 == 0 else (1, 0)):
                loop = loops[i]
                if loop is not None:
                    per_call[i].append(loop(number) / number)
    finally:
        gc.enable()
    for i, timing in enumerate(timings):
        if per_call[i]:
            timing.min_ns = min(per_call[i])
            timing.med_ns = statistics.median(per_call[i])


def namespace(n: int) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa

    import dlbridge

    np_array = np.arange(n, dtype=np.float32)
    np_3d = np.arange(n, dtype=np.float32).reshape(n // 16, 4, 4)
    pa_array = pa.array(np_array)
    return {
        "np": np,
        "pa": pa,
        "dlbridge": dlbridge,
        "np_array": np_array,
        "pa_array": pa_array,
        "tensor": dlbridge.from_dlpack(np_array),
        "np_3d": np_3d,
        "tensor_3d": dlbridge.from_dlpack(np_3d),
        "fst_array": pa.FixedShapeTensorArray.from_numpy_ndarray(np_3d),
        "chunked": pa.chunked_array([pa_array]),
    }


def rows(size: str) -> list[Row]:
    return [
        Row("np.from_dlpack(dlbridge.from_dlpack(pa_array))",
            "pa_array.to_numpy(zero_copy_only=True)", size,
            "Arrow -> NumPy: two hops (Arrow C interface in, DLPack out) against one"),
        Row("dlbridge.from_dlpack(pa_array)", "pa_array.to_numpy(zero_copy_only=True)", size,
            "the first hop alone (result: a read-only dlbridge.Tensor)"),
        Row("pa.array(tensor)", "pa.array(np_array)", size,
            "NumPy-backed memory -> Arrow; pyarrow takes our __arrow_c_device_array__"),
        Row("pa.array(tensor_3d)", "pa.FixedShapeTensorArray.from_numpy_ndarray(np_3d)", size,
            "N-d -> arrow.fixed_shape_tensor (cells of 4 x 4)"),
        Row("np.from_dlpack(dlbridge.from_dlpack(fst_array))", "fst_array.to_numpy_ndarray()",
            size, "arrow.fixed_shape_tensor -> NumPy"),
        Row("np.from_dlpack(dlbridge.from_dlpack(chunked))",
            "chunked.to_numpy()", size, "a one-chunk ChunkedArray (through __arrow_c_stream__)"),
    ]


def versions() -> str:
    import numpy
    import pyarrow

    import dlbridge

    return ", ".join(
        f"{m.__name__} {getattr(m, '__version__', '?')}" for m in (dlbridge, numpy, pyarrow)
    )


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def report(results: list[Row], params: dict[str, int], command: str, quick: bool) -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    try:
        load = " / ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        load = "unknown"
    lines = [
        "# Arrow <-> dlbridge <-> NumPy: ns per conversion",
        "",
        "Generated by `benches/bench_arrow.py`. Quote the ratios (both sides measured in this "
        "one run, samples interleaved); absolute times are for this machine only.",
        "",
        f"- date: {now}",
        f"- command: `{command}`",
        f"- mode: {'QUICK (smoke test; do not quote)' if quick else 'full'}; "
        f"{params['samples']} samples x {params['number']} calls per side, "
        f"{params['warmup']} warm-up calls, gc disabled while timing",
        f"- Python {platform.python_version()}; {versions()}",
        f"- CPU: {cpu_model()} ({os.cpu_count()} logical CPUs); load average at start: {load}",
        "",
        "ns per call, min / median; ratio = dlbridge median / baseline median (below 1 is "
        "faster). Every conversion here is zero-copy.",
        "",
        "| conversion | baseline | size | dlbridge ns | baseline ns | ratio |",
        "|---|---|---|---:|---:|---:|",
    ]
    for r in results:
        ratio = "—" if r.ratio is None else f"{r.ratio:.2f}x"
        lines.append(
            f"| `{r.conversion}` | `{r.baseline}` | {r.size} | {r.a.cell()} | {r.b.cell()} "
            f"| {ratio} |"
        )
    lines += ["", "Notes:", ""]
    seen = set()
    for r in results:
        if r.conversion not in seen:
            seen.add(r.conversion)
            lines.append(f"- `{r.conversion}`: {r.note}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few samples (writes arrow-quick.md)")
    ap.add_argument("--out", type=Path, help="where to write the Markdown")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args(argv)
    params = QUICK if args.quick else FULL
    results: list[Row] = []
    for label, n in SIZES:
        ns = namespace(n)
        for row in rows(label):
            measure(row, ns, **params)
            results.append(row)
            print(f"{row.conversion:55s} {label:12s} {row.a.cell():>22s} {row.b.cell():>22s}"
                  f" {'' if row.ratio is None else f'{row.ratio:.2f}x'}", flush=True)
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__)] + sys.argv[1:])
    text = report(results, params, command, args.quick)
    if not args.no_write:
        out = args.out or RESULTS / ("arrow-quick.md" if args.quick else "arrow.md")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
