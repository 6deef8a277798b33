#!/usr/bin/env python3
"""Run the quick mode of every benchmark and print its table (what CI does).

    python benches/run_quick.py

Every ``benches/bench_*.py`` whose source offers ``--quick`` is run as
``python benches/bench_X.py --quick`` (with ``--no-write`` when it offers that, so no
results file is touched), one after another, its output passed through. A new benchmark
joins by offering ``--quick``.

The timings are for reading, not for judging: CI machines are shared, so nothing is
asserted about them. The run fails only when a benchmark itself fails (exits non-zero or
runs past ``--timeout`` seconds), as broken benchmark code should.

A benchmark that needs something built first (the Rust API benchmark compiles an extension)
offers ``--prepare DIR``, which builds into DIR and measures nothing, and ``--prepared DIR``,
which measures with what DIR holds. The build runs first under its own, longer limit
(``--build-timeout``): how long a build takes depends on what the compiler's cache holds, a
cold one takes minutes, and it is not what the benchmark measures.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCHES = Path(__file__).resolve().parent


def quick_benchmarks() -> list[Path]:
    """The benchmark scripts that offer ``--quick``, by name."""
    return [p for p in sorted(BENCHES.glob("bench_*.py")) if "--quick" in p.read_text()]


def needs_build(script: Path) -> bool:
    """Whether ``script`` builds something before it measures (it offers ``--prepare``)."""
    return "--prepare" in script.read_text()


def command(script: Path, prepared: Path | None = None) -> list[str]:
    """The command line that runs ``script`` quickly without writing results, with what
    ``--prepare`` built into ``prepared`` when given."""
    args = [sys.executable, str(script), "--quick"]
    if "--no-write" in script.read_text():
        args.append("--no-write")
    if prepared is not None:
        args += ["--prepared", str(prepared)]
    return args


def run(cmd: list[str], timeout: float) -> int | str:
    """``cmd``'s exit status, or "timeout" when it ran past ``timeout`` seconds."""
    try:
        return subprocess.run(cmd, cwd=BENCHES.parent, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        return "timeout"


def run_one(script: Path, timeout: float, build_timeout: float) -> int | str:
    """Build what ``script`` needs (if anything), then run its quick mode."""
    if not needs_build(script):
        return run(command(script), timeout)
    with tempfile.TemporaryDirectory(prefix=f"{script.stem}-") as built:
        start = time.monotonic()
        rc = run([sys.executable, str(script), "--prepare", built], build_timeout)
        print(f"=== {script.name}: built in {time.monotonic() - start:.1f} s "
              f"({'ok' if rc == 0 else f'FAILED ({rc})'})", flush=True)
        if rc != 0:
            return rc
        return run(command(script, Path(built)), timeout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds one benchmark may run, its build aside (default 120)")
    ap.add_argument("--build-timeout", type=float, default=1800.0,
                    help="seconds a benchmark's --prepare build may take (default 1800)")
    args = ap.parse_args(argv)
    failed: list[str] = []
    for script in quick_benchmarks():
        shown = " ".join(["python", f"benches/{script.name}", *command(script)[2:]])
        print(f"\n=== {shown}", flush=True)
        start = time.monotonic()
        rc = run_one(script, args.timeout, args.build_timeout)
        took = time.monotonic() - start
        print(f"=== {script.name}: {'ok' if rc == 0 else f'FAILED ({rc})'} in {took:.1f} s",
              flush=True)
        if rc != 0:
            failed.append(script.name)
    if failed:
        print(f"benchmarks that failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
