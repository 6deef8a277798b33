"""benches/run_quick.py: a benchmark's time limit covers what it measures, not the build it
needs first (a cold compiler cache once made the Rust API benchmark miss its limit)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_run_quick():
    spec = importlib.util.spec_from_file_location("run_quick", ROOT / "benches" / "run_quick.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A benchmark whose --prepare takes 2 s and writes a file that its quick run requires.
SLOW_BUILD = textwrap.dedent("""
    import argparse, sys, time
    from pathlib import Path
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--prepare", type=Path)
    ap.add_argument("--prepared", type=Path)
    args = ap.parse_args()
    if args.prepare is not None:
        time.sleep(2)
        (args.prepare / "built").write_text("ok")
        sys.exit(0)
    sys.exit(0 if (args.prepared / "built").read_text() == "ok" else 3)
""")


def test_a_slow_build_does_not_count_against_the_benchmark(tmp_path):
    rq = load_run_quick()
    script = tmp_path / "bench_slow_build.py"
    script.write_text(SLOW_BUILD)
    assert rq.needs_build(script)
    assert rq.run_one(script, timeout=1.0, build_timeout=60.0) == 0


def test_a_build_past_its_own_limit_fails(tmp_path):
    rq = load_run_quick()
    script = tmp_path / "bench_slow_build.py"
    script.write_text(SLOW_BUILD)
    assert rq.run_one(script, timeout=60.0, build_timeout=0.5) == "timeout"


def test_the_rust_api_benchmark_builds_before_it_measures():
    rq = load_run_quick()
    script = ROOT / "benches" / "bench_rust_api.py"
    assert rq.needs_build(script)
    cmd = rq.command(script, Path("/built"))
    assert cmd[:2] == [sys.executable, str(script)]
    assert cmd[2:] == ["--quick", "--no-write", "--prepared", "/built"]
