"""scripts/gpu_check.sh and benches/bench_gpu.py where there is no GPU: they run on a GPU
machine only when a session is lent one, so what a CPU can check of them is checked here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.sh"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a bash script")


def run_script(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **env}, cwd=ROOT)


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


def test_without_a_verb_it_says_how_to_call_it():
    out = run_script()
    assert out.returncode == 2 and "usage: bash scripts/gpu_check.sh prepare|run" in out.stderr


def test_run_without_a_prepared_wheel_names_prepare(tmp_path):
    out = run_script("run", OUT=str(tmp_path / "out"), GPU_CHECK_DIR=str(tmp_path / "empty"),
                     GPU_CHECK_PYTHON=sys.executable, GPU_CHECK_STEPS="")
    summary = (tmp_path / "out" / "summary.txt").read_text()
    assert out.returncode == 2
    assert "run 'bash scripts/gpu_check.sh prepare' where Rust is" in summary
    assert summary.startswith("# gpu_check ")  # the machine's description comes first


def test_the_benchmark_measures_nothing_without_a_gpu(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: scripts/gpu_check.sh runs the benchmark")
    out = subprocess.run([sys.executable, str(ROOT / "benches" / "bench_gpu.py"), "--quick",
                          "--out", str(tmp_path / "gpu.md")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0 and "nothing measured" in out.stdout
    assert not (tmp_path / "gpu.md").exists()
