"""The checker's device-claim audit (``producer/device_claim``, ``dlbridge_check.deviceclaim``):
where a CUDA driver is loaded, the memory at a producer's data pointer must be what its
``__dlpack_device__`` and its capsule claim.

No GPU is needed: the CUDA stand-in (``crates/cuda-standin``, a strict test double of the
driver, found as ``test_cuda_standin.py`` finds it) plays the driver, in processes of their own
(``device_claim_cases.py``), and in a checker run against virtarray (``tests/third_party``), a
library whose virtual host devices claim to be CUDA devices.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import device_claim_cases
from dlb_testing import run_checker
from dlbridge_check import audit, cudamemory
from dlbridge_check.adapters.base import Unsupported
from test_cuda_standin import standin  # noqa: F401 - the fixture

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

TESTS = Path(__file__).resolve().parent
VIRTARRAY = TESTS / "third_party" / "virtarray"
CASES = sorted(name for name in vars(device_claim_cases) if name.startswith("case_"))
#: the case that runs with the stand-in's cuInit failing
NO_DEVICE = "case_without_a_driver_the_audit_is_unsupported"


def _env(driver: str, *paths: Path) -> dict[str, str]:
    """This environment, with ``driver`` as the CUDA driver and ``paths`` on PYTHONPATH."""
    env = dict(os.environ, DLBRIDGE_CUDA_DRIVER=driver)
    env.pop("DLBRIDGE_STANDIN_FAIL", None)
    env["PYTHONPATH"] = os.pathsep.join(map(str, [*paths, TESTS, env.get("PYTHONPATH", "")]))
    return env


@pytest.mark.parametrize("case", CASES)
def test_device_claims_against_the_standin(standin, case):  # noqa: F811 - the fixture
    env = _env(standin, VIRTARRAY)
    if case == NO_DEVICE:
        env["DLBRIDGE_STANDIN_FAIL"] = "cuInit=100"
    proc = subprocess.run(
        [sys.executable, "-c", f"import device_claim_cases as c; c.{case}()"], env=env,
        capture_output=True, text=True, timeout=120, check=False,
    )
    # A negative return code is a signal: -11 is a host read of the stand-in's device memory.
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


def test_without_a_driver_library_the_audit_says_why(monkeypatch, tmp_path):
    missing = tmp_path / "libcuda-missing.so"
    monkeypatch.setenv(cudamemory.DRIVER_ENV, str(missing))
    a = np.arange(3.0)
    with pytest.raises(Unsupported, match="no CUDA driver.*libcuda-missing.so cannot be loaded"):
        audit.run("device_claim", audit.Audited(a, a.ctypes.data, (1, 0), a))


def test_the_checker_finds_virtarrays_claim(standin, tmp_path):  # noqa: F811 - the fixture
    """virtarray claims CUDA device 1 for the host memory of its virtual device: a finding
    against it (never against dlbridge, which passes the claim on); NumPy and the reference
    producer pass; the run exits 0."""
    adapter = "virtarray._dlbridge_check:VirtArrayAdapter"
    run = run_checker(tmp_path, "--libraries", f"numpy,{adapter}", "--cases",
                      "producer/device_claim", env=_env(standin, VIRTARRAY), timeout=300)
    assert run.doc is not None
    by = {(r["producer"], r["route"]): r for r in run.doc["results"]}
    found = by["virtarray", "direct"]
    assert (found["status"], found["fault"], found["check"]) == ("fail", "producer",
                                                                 "device_claim"), found
    assert "claims cuda (2, 1) for host memory" in found["detail"]
    assert "C71" in found["refs"]
    assert by["virtarray", "dlbridge"]["status"] == "unsupported"  # the claim passed on
    for producer in ("numpy", "dlpack-ref"):
        for route in ("direct", "dlbridge"):
            assert by[producer, route]["status"] == "pass", by[producer, route]
    assert not [r for r in run.doc["results"] if r.get("fault") == "dlbridge"]
    # the report's way out for the user
    assert "workaround: its memory is not where it says" in run.output, run.output[-3000:]


def test_the_checker_without_a_driver_leaves_the_case_unsupported(tmp_path):
    env = dict(os.environ, DLBRIDGE_CUDA_DRIVER=str(tmp_path / "no-driver.so"))
    run = run_checker(tmp_path, "--libraries", "numpy", "--cases", "producer/device_claim",
                      env=env, timeout=300)
    assert run.doc is not None
    statuses = {(r["producer"], r["status"]) for r in run.doc["results"]}
    assert ("numpy", "unsupported") in statuses, statuses
    numpy_direct = next(r for r in run.doc["results"]
                        if r["producer"] == "numpy" and r["route"] == "direct")
    assert "no CUDA driver" in numpy_direct["detail"]
