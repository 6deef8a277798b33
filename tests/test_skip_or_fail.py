"""The steps of scripts/test.sh that cannot run everywhere (the nightly ones, the CPython 3.15
smoke) skip loudly where they cannot, and fail under CI=true, where a check that silently does
not run would pass for nothing."""

from __future__ import annotations

import os
import shutil
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


def run_py315_smoke_without_a_mirror(tmp_path: Path, ci: bool) -> subprocess.CompletedProcess:
    """scripts/py315_smoke.sh where its Debian root cannot be made: no root, or (as root) a
    mirror that refuses connections."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(DLBRIDGE_PY315_HOME=str(tmp_path / "py315"),
               DLBRIDGE_DEBIAN_MIRROR="http://127.0.0.1:9/debian")
    if ci:
        env["CI"] = "true"
    return subprocess.run(["bash", str(ROOT / "scripts" / "py315_smoke.sh")], capture_output=True,
                          text=True, env=env, timeout=120, cwd=ROOT)


needs_debootstrap_as_root = pytest.mark.skipif(
    sys.platform != "linux" or (os.geteuid() == 0 and not shutil.which("debootstrap")),
    reason="as root without debootstrap, the script would install it",
)


@needs_debootstrap_as_root
def test_py315_smoke_skips_locally_without_its_root(tmp_path):
    out = run_py315_smoke_without_a_mirror(tmp_path, ci=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "py315_smoke: SKIPPED: " in out.stderr and "root" in out.stderr, out.stderr
    assert not (tmp_path / "py315" / "unstable").exists()  # nothing half-made is kept


@needs_debootstrap_as_root
def test_py315_smoke_fails_in_ci_without_its_root(tmp_path):
    out = run_py315_smoke_without_a_mirror(tmp_path, ci=True)
    assert out.returncode == 1 and "py315_smoke: FAILED: " in out.stderr, out.stdout + out.stderr
