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
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCHES = Path(__file__).resolve().parent


def quick_benchmarks() -> list[Path]:
    """The benchmark scripts that offer ``--quick``, by name."""
    return [p for p in sorted(BENCHES.glob("bench_*.py")) if "--quick" in p.read_text()]


def command(script: Path) -> list[str]:
    """The command line that runs ``script`` quickly without writing results."""
    args = [sys.executable, str(script), "--quick"]
    if "--no-write" in script.read_text():
        args.append("--no-write")
    return args


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds one benchmark may run (default 120)")
    args = ap.parse_args(argv)
    failed: list[str] = []
    for script in quick_benchmarks():
        cmd = command(script)
        shown = " ".join(["python", f"benches/{script.name}", *cmd[2:]])
        print(f"\n=== {shown}", flush=True)
        start = time.monotonic()
        try:
            rc = subprocess.run(cmd, cwd=BENCHES.parent, timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
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
