"""The nightly steps of scripts/test.sh skip loudly where nightly is missing, and fail under
CI=true, where a check that silently does not run would pass for nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="bash scripts")

#: each nightly script and the variable that names its toolchain
SCRIPTS = {
    "asan_test.sh": "DLBRIDGE_ASAN_TOOLCHAIN",
    "miri_test.sh": "DLBRIDGE_MIRI_TOOLCHAIN",
    "tsan_test.sh": "DLBRIDGE_TSAN_TOOLCHAIN",
    "fuzz_smoke.sh": "DLBRIDGE_FUZZ_TOOLCHAIN",
}


def run_without_nightly(script: str, ci: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env[SCRIPTS[script]] = "no-such-toolchain"
    if ci:
        env["CI"] = "true"
    return subprocess.run(["bash", str(ROOT / "scripts" / script)], capture_output=True,
                          text=True, env=env, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_missing_toolchain_skips_locally(script):
    out = run_without_nightly(script, ci=False)
    assert out.returncode == 0 and "SKIPPED: no no-such-toolchain toolchain" in out.stderr


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_missing_toolchain_fails_in_ci(script):
    out = run_without_nightly(script, ci=True)
    assert out.returncode == 1 and "FAILED: no no-such-toolchain toolchain" in out.stderr
