#!/usr/bin/env python3
"""Exchange overhead: ns per DLPack exchange of a 16-element float32 array.

    python benches/bench_exchange.py            # full run, writes benches/results/exchange.md
    python benches/bench_exchange.py --quick    # smoke test: benches/results/exchange-quick.md

Every row times one exchange (the dlbridge side) and its baseline (the peer's own exchange
that produces the same kind of result) in the same process, with samples of the two
interleaved, and reports min and median ns per call and the ratio of the medians
(dlbridge side / baseline). A missing library skips its rows; an exchange that raises is
reported as ``error: <ExceptionType>`` instead of a time. See benches/README.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (
    Timing,
    command_line,
    cpu_model,
    fmt_ratio,
    format_versions,
    git_rev,
    import_into,
    loadavg,
    make_loop,
    measure_pair,
    median_ratio,
    native_build,
    try_import,
    utc_now,
    write_results,
)

N_ELEMS = 16
_LOAD_AT_START = "unknown"

FULL = {"number": 2000, "samples": 41, "warmup": 1000}
QUICK = {"number": 200, "samples": 5, "warmup": 100}


# ---------------------------------------------------------------------------- rows


@dataclass
class Row:
    exchange: str  # shown in the table, and the statement timed (the dlbridge side)
    baseline: str  # likewise, the peer's own exchange
    needs: tuple[str, ...]  # namespace names both statements need
    target: float | None = None
    source: str = ""  # where the target comes from
    note: str = ""
    a: Timing = field(default_factory=Timing)
    b: Timing = field(default_factory=Timing)
    skipped: str | None = None

    @property
    def ratio(self) -> float | None:
        return median_ratio(self.a, self.b)


def build_namespace(np: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """Import the peers and make the 16-element float32 inputs. Returns the namespace the
    statements run in and, for each missing piece, why it is missing."""
    ns: dict[str, Any] = {"np": np}
    missing: dict[str, str] = {}

    dlbridge = import_into(ns, missing, "dlbridge", "dlbridge", "dlbridge not importable")
    np_array = np.arange(N_ELEMS, dtype=np.float32)
    ns["np_array"] = np_array
    if dlbridge is not None:
        ns["tensor"] = dlbridge.from_dlpack(np_array)

    torch = import_into(ns, missing, "torch", "torch", "torch not installed")
    if torch is not None:
        ns["torch_t"] = torch.arange(N_ELEMS, dtype=torch.float32)

    jnp = import_into(ns, missing, "jnp", "jax.numpy", "jax not installed")
    if jnp is not None:
        arr = jnp.arange(N_ELEMS, dtype=jnp.float32)
        arr.block_until_ready()
        ns["jax_array"] = arr

    pa = import_into(ns, missing, "pa", "pyarrow", "pyarrow not installed")
    if pa is not None:
        ns["pa_array"] = pa.array(np_array)

    tvm_ffi = import_into(ns, missing, "tvm_ffi", "tvm_ffi", "tvm-ffi not installed")
    if tvm_ffi is not None:
        try:
            ns["tvm_t"] = tvm_ffi.from_dlpack(np_array)
        except Exception as exc:  # noqa: BLE001
            missing["tvm_t"] = f"tvm_ffi.from_dlpack(np_array) failed: {type(exc).__name__}"

    xp = import_into(ns, missing, "xp", "array_api_strict", "array-api-strict not installed")
    if xp is not None:
        ns["xp_array"] = xp.asarray(np_array)
    return ns, missing


def rows() -> list[Row]:
    i2, i7, i16 = "issue 2 #9, issue 7 #4", "issue 7 #4", "issue 16 #4, #5"
    return [
        # --- issue 2 #9: numpy and torch, both directions
        Row("dlbridge.from_dlpack(np_array)", "np.from_dlpack(np_array)",
            ("dlbridge",), 1.0, i2),
        Row("np.from_dlpack(tensor)", "np.from_dlpack(np_array)",
            ("dlbridge",), 1.0, i2),
        Row("torch.from_dlpack(tensor)", "torch.from_dlpack(np_array)",
            ("dlbridge", "torch"), 1.0, i2),
        # --- issue 7 #4
        Row("dlbridge.from_dlpack(torch_t)", "np.from_dlpack(torch_t)",
            ("dlbridge", "torch"), 0.25, i7),
        # --- issue 16 #4: both sides use torch's C exchange table (dlbridge also reads the
        # tensor's requires_grad and negative bit, which the table drops)
        Row("dlbridge.from_dlpack(torch_t)", "tvm_ffi.from_dlpack(torch_t)",
            ("dlbridge", "torch", "tvm_ffi"), 1.0, i16,
            note="both use torch's C exchange table; dlbridge also checks requires_grad and "
            "the negative bit, which the table drops"),
        # --- issue 7 #3: the rest of the full table (no ratio targets set)
        Row("jnp.from_dlpack(tensor)", "jnp.from_dlpack(np_array)", ("dlbridge", "jnp")),
        Row("dlbridge.from_dlpack(jax_array)", "np.from_dlpack(jax_array)", ("dlbridge", "jnp"),
            1.0, i16),
        Row("dlbridge.from_dlpack(pa_array)", "pa_array.to_numpy(zero_copy_only=True)",
            ("dlbridge", "pa"),
            note="result is a dlbridge.Tensor, baseline's an ndarray; the next row is the "
            "like-with-like one"),
        Row("np.from_dlpack(dlbridge.from_dlpack(pa_array))",
            "pa_array.to_numpy(zero_copy_only=True)", ("dlbridge", "pa"), 1.2, i16,
            note="Arrow -> NumPy through dlbridge"),
        Row("pa.array(tensor)", "pa.array(np_array)", ("dlbridge", "pa"),
            note="Arrow import"),
        Row("tvm_ffi.from_dlpack(tensor)", "tvm_ffi.from_dlpack(torch_t)",
            ("dlbridge", "tvm_ffi", "torch"),
            note="baseline uses torch's C exchange API"),
        Row("dlbridge.from_dlpack(tvm_t)", "np.from_dlpack(tvm_t)",
            ("dlbridge", "tvm_ffi", "tvm_t"), 1.0, i16),
        Row("array_api_strict.from_dlpack(tensor)", "array_api_strict.from_dlpack(np_array)",
            ("dlbridge", "xp")),
        Row("dlbridge.from_dlpack(xp_array)", "np.from_dlpack(xp_array)", ("dlbridge", "xp"),
            1.0, i16),
    ]


def _stmt(text: str) -> str:
    # the table says array_api_strict, the namespace calls it xp
    return text.replace("array_api_strict.", "xp.")


# ---------------------------------------------------------------------------- report


def _fmt_target(r: Row) -> str:
    return "—" if r.target is None else f"<= {r.target:g}x"


def _fmt_met(r: Row) -> str:
    if r.target is None:
        return "—"
    if r.ratio is None:
        return "no (no result)"
    return "yes" if r.ratio <= r.target else "**no**"


def table(results: list[Row]) -> str:
    head = (
        "| exchange | baseline | dlbridge side ns (min / median) | baseline ns (min / median) "
        "| ratio of medians (ours/baseline) | target | met? |"
    )
    lines = [head, "|---|---|---:|---:|---:|---|---|"]
    for r in results:
        if r.skipped:
            continue
        lines.append(
            f"| `{r.exchange}` | `{r.baseline}` | {r.a.cell()} | {r.b.cell()} "
            f"| {fmt_ratio(r.ratio)} | {_fmt_target(r)} | {_fmt_met(r)} |"
        )
    return "\n".join(lines)


def header(mods: dict[str, Any], params: dict[str, int], command: str, pinned: str,
           loop_ns: float, quick: bool) -> str:
    now = utc_now()
    vers = format_versions(mods)
    lines = [
        "# Exchange overhead: ns per exchange of a 16-element float32 array",
        "",
        "Generated by `benches/bench_exchange.py`; see `benches/README.md`. Quote the ratios "
        "(both sides measured in this one run, samples interleaved); the absolute times are "
        "for this machine only.",
        "",
        f"- date: {now}",
        f"- command: `{command}`",
        f"- mode: {'QUICK (smoke test, few samples; do not quote)' if quick else 'full'}; "
        f"{params['samples']} samples x {params['number']} calls per side, "
        f"{params['warmup']} warm-up calls, gc disabled while timing",
        f"- Python: {platform.python_implementation()} {platform.python_version()} "
        f"({sys.executable})",
        f"- versions: {vers}",
        f"- dlbridge commit: {git_rev()}; extension {native_build(mods.get('dlbridge'))}",
        f"- CPU: {cpu_model()} ({os.cpu_count()} logical CPUs; {pinned})",
        f"- OS: {platform.platform()}",
        f"- load average at start (1/5/15 min): {_LOAD_AT_START} "
        f"(other processes share these CPUs; "
        "interleaved samples keep the ratios comparable, absolute times drift with load)",
        f"- empty-loop overhead: {loop_ns:.1f} ns per iteration (included in both sides, not "
        "subtracted)",
        "",
        "Columns: ns per call, min / median over the samples; ratio = dlbridge-side median / "
        "baseline median (below 1 is faster than the baseline); target = the ratio set as the "
        "row's goal.",
    ]
    return "\n".join(lines)


def notes(results: list[Row], missing: dict[str, str]) -> str:
    out = []
    for r in results:
        if r.skipped:
            out.append(f"- skipped `{r.exchange}`: {r.skipped}")
            continue
        if r.note:
            out.append(f"- `{r.exchange}`: {r.note}")
        for side, t in ((r.exchange, r.a), (r.baseline, r.b)):
            if t.error:
                out.append(f"- `{side}` raised {t.error[len('error: '):]}: {t.detail}")
    return ("\n\nNotes:\n\n" + "\n".join(out)) if out else ""


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="few samples, for smoke tests (writes exchange-quick.md, not exchange.md)")
    ap.add_argument("--number", type=int, help="calls per sample (default 2000, quick 200)")
    ap.add_argument("--samples", type=int, help="samples per side (default 41, quick 5)")
    ap.add_argument("--only", metavar="SUBSTR", help="run only rows whose exchange contains SUBSTR")
    ap.add_argument(
        "--out", type=Path, help="where to write the Markdown (default benches/results/)"
    )
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--pin", action="store_true",
                    help="pin the process to one CPU (steadier numpy/torch rows, but jax's "
                    "worker threads then share that CPU and its rows turn bimodal)")
    args = ap.parse_args(argv)

    params = dict(QUICK if args.quick else FULL)
    if args.number:
        params["number"] = args.number
    if args.samples:
        params["samples"] = args.samples

    pinned = "not pinned"
    if args.pin and hasattr(os, "sched_setaffinity"):
        try:
            cpu = max(os.sched_getaffinity(0))
            os.sched_setaffinity(0, {cpu})
            pinned = f"pinned to CPU {cpu}"
        except OSError:
            pass

    global _LOAD_AT_START
    _LOAD_AT_START = loadavg()
    import numpy as np

    ns, missing = build_namespace(np)
    mods = {
        "dlbridge": ns.get("dlbridge"),
        "numpy": np,
        "torch": ns.get("torch"),
        "jax": try_import("jax") if "jnp" in ns else None,
        "pyarrow": ns.get("pa"),
        "tvm-ffi": ns.get("tvm_ffi"),
        "array-api-strict": ns.get("xp"),
    }

    # the cost of the timing loop itself, for the header
    empty = make_loop("pass", {})
    empty(params["warmup"])
    loop_ns = min(empty(params["number"]) / params["number"] for _ in range(9))

    results = rows()
    if args.only:
        results = [r for r in results if args.only in r.exchange]
    for r in results:
        absent = [n for n in r.needs if n not in ns]
        if absent:
            reasons = [missing[n] for n in absent if n in missing]
            r.skipped = "; ".join(reasons or [f"{n} unavailable" for n in absent])
            print(f"skip  {r.exchange}: {r.skipped}", file=sys.stderr)
            continue
        print(f"time  {r.exchange}  vs  {r.baseline}", file=sys.stderr, flush=True)
        r.a, r.b = measure_pair(_stmt(r.exchange), _stmt(r.baseline), ns, **params)

    command = command_line("benches/bench_exchange.py", argv)
    doc = (
        header(mods, params, command, pinned, loop_ns, args.quick)
        + "\n\n" + table(results) + notes(results, missing) + "\n"
    )
    print(table(results))
    note_text = notes(results, missing)
    if note_text:
        print("\n" + note_text.lstrip("\n"))
    if not args.no_write:
        out = write_results(doc, args.out, "exchange", args.quick)
        print(f"\nwrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
