"""dlbridge's own CUDA code against the CUDA stand-in, on any Linux machine: transfers,
streams and their ordering, ``__cuda_array_interface__``, Arrow device arrays, pickling, CUDA
IPC between processes, lifetimes and driver failures (the cases: ``cuda_standin_cases.py``).

The stand-in (``crates/cuda-standin``) is the library ``DLBRIDGE_CUDA_STANDIN`` names
(``scripts/test.sh`` builds it), or it is built here with cargo; without either the tests
skip. Each case runs in its own process, where ``DLBRIDGE_CUDA_DRIVER`` makes dlbridge load
the stand-in instead of ``libcuda.so.1``. What only a GPU shows (peers' own CUDA, real
concurrency, the driver's real limits) is ``test_cuda.py``'s.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cuda_standin_cases

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

REPO = Path(__file__).resolve().parent.parent

#: Injected driver failures (``call=code[*times]``) a case runs with.
FAILURES = {
    "case_a_driver_that_does_not_initialise_means_no_cuda": "cuInit=100",
    "case_out_of_device_memory_is_a_clear_error": "cuMemAlloc_v2=2*1",
    "case_a_failed_capture_query_waits_on_the_host": "cuStreamIsCapturing=999",
}

CASES = sorted(name for name in vars(cuda_standin_cases) if name.startswith("case_"))


def build_standin() -> str | None:
    """Build the stand-in with cargo; its path, or None where that is not possible."""
    cargo = shutil.which("cargo")
    if cargo is None:
        return None
    proc = subprocess.run(
        [cargo, "build", "-p", "dlbridge-cuda-standin", "--message-format=json-render-diagnostics"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        return None
    for line in proc.stdout.splitlines():
        message = json.loads(line)
        if message.get("target", {}).get("name") == "cuda_standin":
            return next(f for f in message["filenames"] if f.endswith(".so"))
    return None


@pytest.fixture(scope="module")
def standin() -> str:
    """Path of the stand-in library."""
    path = os.environ.get("DLBRIDGE_CUDA_STANDIN") or build_standin()
    if not path or not Path(path).is_file():
        pytest.skip("the CUDA stand-in is not built (DLBRIDGE_CUDA_STANDIN; cargo build failed)")
    return path


@pytest.mark.parametrize("case", CASES)
def test_cuda_paths_against_the_standin(standin, case):
    env = dict(os.environ, DLBRIDGE_CUDA_DRIVER=standin)
    env["DLBRIDGE_STANDIN_FAIL"] = FAILURES.get(case, "")
    tests_dir = str(Path(__file__).resolve().parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [tests_dir, env.get("PYTHONPATH")]))
    code = f"import cuda_standin_cases as c; c.{case}()"
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
        check=False,
    )
    # A negative return code is a signal: -11 is a host access of device memory.
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
