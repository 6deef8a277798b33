#!/usr/bin/env python3
"""The Rust API's argument cost: ``total(x)`` taking a ``dlbridge::Tensor`` against rust-numpy.

    python benches/bench_rust_api.py            # full run, writes benches/results/rust-api.md
    python benches/bench_rust_api.py --quick    # smoke test: benches/results/rust-api-quick.md

Both functions live in the example extension ``examples/pyo3-extension`` (module
``dlbridge_example``), built here in release mode with maturin (or built beforehand with
``--prepare DIR`` and taken with ``--prepared DIR``): ``total(x: Tensor)`` sums a float32
array from any library,
``total_numpy(x: PyReadonlyArray1<f32>)`` is the same sum written with rust-numpy, NumPy arrays
only. Every row times one call of ``total`` on a 16-element float32 array from one library
against ``total_numpy`` on the NumPy array, in the same process, samples interleaved: min and
median ns per call, and the ratio of the medians. The sum of 16 elements is a few ns; what is
measured is the cost of taking the argument.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (
    REPO,
    Timing,
    command_line,
    cpu_model,
    fmt_ratio,
    format_versions,
    git_rev,
    loadavg,
    measure_pair,
    median_ratio,
    try_import,
    utc_now,
    write_results,
)

N_ELEMS = 16
TARGET = 1.2
BASELINE = "ex.total_numpy(np_array)"
EXTENSION = REPO / "examples" / "pyo3-extension" / "Cargo.toml"

FULL = {"number": 2000, "samples": 41, "warmup": 1000}
QUICK = {"number": 200, "samples": 5, "warmup": 100}


@dataclass
class Row:
    call: str  # the statement timed: a call of `total`
    baseline: str  # the rust-numpy statement it is compared with
    needs: str  # the namespace name of its argument
    target: bool
    note: str
    a: Timing = field(default_factory=Timing)
    b: Timing = field(default_factory=Timing)

    @property
    def ratio(self) -> float | None:
        return median_ratio(self.a, self.b)


ROWS = [
    Row("ex.total(np_array)", BASELINE, "np_array", True,
        "the same NumPy array as the baseline: dlbridge's import against rust-numpy's"),
    Row("ex.total(torch_t)", BASELINE, "torch_t", True,
        "a torch tensor, against rust-numpy on a NumPy array"),
    Row("ex.total(pa_array)", BASELINE, "pa_array", True,
        "a pyarrow array, against rust-numpy on a NumPy array"),
    Row("ex.total(torch_t)", "ex.total_numpy(np.from_dlpack(torch_t))", "torch_t", False,
        "a torch tensor, against the route a rust-numpy function needs for it (NumPy's "
        "DLPack import first)"),
    Row("ex.total(pa_array)", "ex.total_numpy(pa_array.to_numpy(zero_copy_only=True))",
        "pa_array", False,
        "a pyarrow array, against the route a rust-numpy function needs for it"),
    Row("ex.total(jax_array)", "ex.total_numpy(np.from_dlpack(jax_array))", "jax_array", False,
        "a JAX array (its `__dlpack__` is the slow part on both sides)"),
    Row("ex.total(pl_series)", "ex.total_numpy(pl_series.to_numpy())", "pl_series", False,
        "a polars Series (dlbridge reads it through the Arrow PyCapsule interface)"),
    Row("ex.total(tensor)", BASELINE, "tensor", False,
        "the extension's own Tensor (`ex.passthrough(np_array)`): taken as it is, no import; "
        "the floor of the argument conversion"),
]


def build_extension(site: Path) -> None:
    """Build the example extension in release mode with maturin and unpack its wheel into
    ``site``, an importable directory."""
    with tempfile.TemporaryDirectory(prefix="bench-rust-api-wheel-") as wheels:
        subprocess.run(
            [sys.executable, "-m", "maturin", "build", "--release", "--locked",
             "--manifest-path", str(EXTENSION), "--interpreter", sys.executable,
             "--out", wheels],
            check=True,
        )
        (wheel,) = Path(wheels).glob("dlbridge_example-*.whl")
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(site)


def namespace(ex: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The arguments of the rows (a missing library skips its rows, with the reason)."""
    import numpy as np

    ns: dict[str, Any] = {"ex": ex, "np": np}
    missing: dict[str, str] = {}
    np_array = np.arange(N_ELEMS, dtype=np.float32)
    ns["np_array"] = np_array
    ns["tensor"] = ex.passthrough(np_array)
    makers = {
        "torch_t": ("torch", lambda m: m.arange(N_ELEMS, dtype=m.float32)),
        "jax_array": ("jax.numpy", lambda m: m.arange(N_ELEMS, dtype=m.float32)),
        "pa_array": ("pyarrow", lambda m: m.array(np_array)),
        "pl_series": ("polars", lambda m: m.Series("x", np_array)),
    }
    for key, (module, make) in makers.items():
        mod = try_import(module)
        if mod is None:
            missing[key] = f"{module} not installed"
        else:
            ns[key] = make(mod)
    return ns, missing


def versions() -> str:
    return format_versions({
        name: try_import(name) for name in ("numpy", "torch", "jax", "pyarrow", "polars")
    })


def report(rows: list[Row], missing: dict[str, str], params: dict[str, int], command: str,
           module: str, quick: bool, load: str) -> str:
    lines = [
        "# The Rust API: `total(x: Tensor)` against rust-numpy's `PyReadonlyArray1`",
        "",
        "Generated by `benches/bench_rust_api.py`. Quote the ratios (both sides measured in "
        "this one run, samples interleaved); absolute times are for this machine only.",
        "",
        f"- date: {utc_now()}",
        f"- command: `{command}`",
        f"- mode: {'QUICK (smoke test; do not quote)' if quick else 'full'}; "
        f"{params['samples']} samples x {params['number']} calls per side, "
        f"{params['warmup']} warm-up calls, gc disabled while timing",
        f"- extension: `examples/pyo3-extension` at {git_rev()}, {module}",
        f"- Python {platform.python_version()}; {versions()}",
        f"- CPU: {cpu_model()} ({os.cpu_count()} logical CPUs); load average at start: {load}",
        "",
        f"Each row calls a function of the example extension on a {N_ELEMS}-element float32 "
        "array. `total(x: dlbridge::Tensor)` takes any library's array; the baselines call "
        "the same function written with rust-numpy (`total_numpy(x: PyReadonlyArray1<f32>)`), "
        f"which takes NumPy arrays only: `{BASELINE}` itself, or, for another library's "
        "array, the conversion to NumPy such a function needs first. Both sum the elements "
        "in place (no copy of the data) and return a float. ns per call, min / median; "
        "ratio = call median / baseline median (below 1 is faster).",
        "",
        f"Rows marked with a target must stay at or below {TARGET:.1f}x.",
        "",
        "| call | baseline | call ns | baseline ns | ratio | target |",
        "|---|---|---:|---:|---:|:---:|",
    ]
    for r in rows:
        mark = f"≤ {TARGET:.1f}x" if r.target else ""
        if r.target and r.ratio is not None and r.ratio > TARGET:
            mark += " (missed)"
        lines.append(f"| `{r.call}` | `{r.baseline}` | {r.a.cell()} | {r.b.cell()} "
                     f"| {fmt_ratio(r.ratio)} | {mark} |")
    lines += ["", "Notes:", ""]
    lines += [f"- `{r.call}` against `{r.baseline}`: {r.note}" for r in rows]
    for key, why in missing.items():
        lines.append(f"- skipped (`{key}`): {why}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few samples (writes rust-api-quick.md)")
    ap.add_argument("--prepare", type=Path, metavar="DIR",
                    help="only build dlbridge_example into DIR (a cold build takes minutes)")
    ap.add_argument("--prepared", type=Path, metavar="DIR",
                    help="a directory holding a built dlbridge_example (default: build it)")
    ap.add_argument("--out", type=Path, help="where to write the Markdown")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args(argv)
    if args.prepare is not None:
        build_extension(args.prepare)
        print(f"built dlbridge_example into {args.prepare}")
        return 0
    params = QUICK if args.quick else FULL
    load = loadavg()

    with tempfile.TemporaryDirectory(prefix="bench-rust-api-") as tmp:
        if args.prepared is not None:
            site = args.prepared.resolve()
            module = f"taken from `{args.prepared}`"
        else:
            site = Path(tmp)
            build_extension(site)
            module = "built by this run (maturin, release profile)"
        sys.path.insert(0, str(site))
        import dlbridge_example as ex

        ns, missing = namespace(ex)
        rows = [r for r in ROWS if r.needs in ns]
        for row in rows:
            row.a, row.b = measure_pair(row.call, row.baseline, ns, **params)
            print(f"{row.call:22s} {row.baseline:58s} {row.a.cell():>14s} {row.b.cell():>14s}"
                  f" {fmt_ratio(row.ratio, none='')}", flush=True)

    command = command_line("benches/bench_rust_api.py", argv)
    text = report(rows, missing, params, command, module, args.quick, load)
    if not args.no_write:
        out = write_results(text, args.out, "rust-api", args.quick)
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
