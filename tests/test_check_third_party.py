"""The checker on array libraries dlbridge does not know (docs/check-your-library.md).

Two example packages (tests/third_party/goodarray and leakyarray), each registering its adapter
with an entry point in the group ``dlbridge.check``, are pip-installed into a fresh venv that
sees this one's packages, and checked there end to end: goodarray speaks DLPack correctly and
has no findings; leakyarray hands out writable aliases of read-only memory and ignores copy=,
and the checker says so. ONNX Runtime's OrtValue, a real library with DLPack and no array API,
is checked through an adapter named ``module:object`` (tests/third_party/ortvalue_adapter.py).
"""

from __future__ import annotations

import collections
import os
import shutil
import site
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("numpy")

import dlbridge
import dlbridge_check
from dlb_testing import CheckerRun, run_checker
from dlbridge_check.report import against

pytestmark = pytest.mark.slow  # a venv, two pip installs and checker runs: about a minute

THIRD_PARTY = Path(__file__).resolve().parent / "third_party"
READONLY_CASES = ("readonly/contiguous", "readonly/1d", "readonly/strided", "readonly/copy_false",
                  "readonly/copy_true", "capsule/versioned")


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A venv with goodarray and leakyarray pip-installed (no network, no build isolation): it
    sees this interpreter's packages (numpy, torch, pip, setuptools), dlbridge and the checker
    through a .pth file, so that only the two example packages are its own."""
    root = tmp_path_factory.mktemp("third_party")
    env_dir = root / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    # addsitedir also reads the .pth files there; dlbridge may come from PYTHONPATH instead
    lines = [f"import site; site.addsitedir({p!r})" for p in site.getsitepackages()]
    lines.append(str(Path(dlbridge.__file__).resolve().parents[1]))
    lines.append(str(Path(dlbridge_check.__file__).resolve().parents[1]))
    (Path(purelib) / "_parent_venv.pth").write_text("\n".join(lines) + "\n")
    for package in ("goodarray", "leakyarray"):
        shutil.copytree(THIRD_PARTY / package, root / package)  # setuptools writes build/ there
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", "--no-cache-dir", str(root / "goodarray"), str(root / "leakyarray")],
        check=True, cwd=root,
    )
    return python


def findings_against(run: CheckerRun, library: str) -> collections.Counter:
    """(role, case, check) of each result that is a finding against ``library``, counted."""
    assert run.doc is not None
    return collections.Counter(
        (role, r["case"], r["check"])
        for r in run.doc["results"]
        for name, role in against(r)
        if name == library
    )


def passes(run: CheckerRun, library: str) -> int:
    assert run.doc is not None
    return sum(r["status"] == "pass" and library in (r["producer"], r["consumer"])
               for r in run.doc["results"])


def test_goodarray_has_no_findings(venv, tmp_path):
    """Every case, numpy and torch as peers: goodarray is found through its entry point, works
    as producer and consumer, and nothing is against it."""
    start = time.monotonic()
    run = run_checker(tmp_path, "--libraries", "numpy,torch,goodarray", python=str(venv))
    seconds = time.monotonic() - start
    assert run.doc is not None
    assert run.doc["libraries"]["goodarray"] == "1.0"
    assert findings_against(run, "goodarray") == collections.Counter()
    assert run.doc["summary"]["by_library"]["goodarray"] == {"producer": 0, "consumer": 0}
    roles = {(r["producer"] == "goodarray", r["consumer"] == "goodarray")
             for r in run.doc["results"] if r["status"] == "pass"}
    assert {(True, False), (False, True)} <= roles  # it passes in both roles
    assert seconds < 120, f"the full run took {seconds:.0f} s"  # 20 s here with two cores


def test_leakyarray_findings(venv, tmp_path):
    """leakyarray's read-only arrays come out writable (its capsule lacks the READ_ONLY flag,
    C12) and copy=True still aliases; the findings are against it as producer, never against
    dlbridge (exit 0), and --fail-on leakyarray turns them into exit status 3."""
    cases = ",".join([*READONLY_CASES, "copy/true", "copy/false", "dtype/float32"])
    run = run_checker(tmp_path, "--libraries", "numpy,leakyarray", "--cases", cases,
                      python=str(venv))
    found = findings_against(run, "leakyarray")
    readonly = {case for role, case, check in found if (role, check) == ("producer", "readonly")}
    assert readonly >= {"readonly/contiguous", "readonly/1d", "readonly/strided",
                        "readonly/copy_false"}, found
    assert ("producer", "copy/true", "copy") in found, found
    # its results leak the same way: a read-only import comes out of its export writable
    assert ("consumer", "readonly/contiguous", "readonly") in found, found
    by_case = {r["case"]: r for r in run.doc["results"]
               if r["producer"] == "leakyarray" and r["consumer"] == "numpy"
               and r["route"] == "direct"}
    assert "C12" in by_case["readonly/contiguous"]["refs"]
    assert by_case["dtype/float32"]["status"] == "pass"  # writable data exports fine
    assert "leakyarray" in run.output and "C12" in run.output
    failing = run_checker(tmp_path, "--libraries", "numpy,leakyarray", "--cases",
                          "readonly/contiguous", "--fail-on", "leakyarray", python=str(venv),
                          expect=3)
    assert "--fail-on leakyarray" in failing.output


def pytest_in(venv: Path, cwd: Path, library: str) -> subprocess.CompletedProcess[str]:
    """``pytest --dlbridge-check=LIBRARY --dlbridge-peers=numpy`` in the venv, in an empty
    folder, on readonly and copy cases (the plugin named with -p: dlbridge is not installed
    there as a distribution, and autoloading is off so that it never loads twice)."""
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "COLUMNS": "200"}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [str(venv), "-m", "pytest", "-p", "_dlbridge_pytest", "-p", "no:cacheprovider",
         "-v", f"--dlbridge-check={library}", "--dlbridge-peers=numpy",
         "--dlbridge-cases=readonly/*,copy/*"],
        cwd=cwd, capture_output=True, text=True, env=env, timeout=600,
    )


def test_pytest_plugin_fails_leakyarray_and_passes_goodarray(venv, tmp_path):
    """The pytest plugin on the installed packages: leakyarray's items of read-only sources
    fail with the catalog case, goodarray's pass."""
    leaky = pytest_in(venv, tmp_path, "leakyarray")
    assert leaky.returncode == 1, leaky.stdout[-3000:] + leaky.stderr[-2000:]
    assert "leakyarray→numpy/readonly/contiguous FAILED" in leaky.stdout, leaky.stdout[-3000:]
    assert "C12" in leaky.stdout
    good = pytest_in(venv, tmp_path, "goodarray")
    assert good.returncode == 0, good.stdout[-3000:] + good.stderr[-2000:]
    assert "goodarray→numpy/readonly/contiguous PASSED" in good.stdout, good.stdout[-3000:]
    assert " FAILED" not in good.stdout


ORT_CHECK = "numpy,torch,ortvalue_adapter:OrtValueAdapter"


def test_onnxruntime_through_module_object(tmp_path):
    """ONNX Runtime (requirements-test.txt), which dlbridge has no adapter for, checked with the
    adapter tests/third_party/ortvalue_adapter.py names: what it does right and the findings
    against it, as docs/check-your-library.md shows them."""
    pytest.importorskip("onnxruntime")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(THIRD_PARTY), env.get("PYTHONPATH")]))
    run = run_checker(tmp_path, "--libraries", ORT_CHECK, env=env)
    found = findings_against(run, "onnxruntime")
    checks = collections.Counter()
    for (role, _case, check), n in found.items():
        checks[role, check] += n
    assert dict(checks) == ORT_FINDINGS, found
    assert passes(run, "onnxruntime") == ORT_PASSES


#: (role, check) -> how many results, of a run with onnxruntime 1.32 (docs/check-your-library.md):
#: as consumer, OrtValue.from_dlpack raises RuntimeError where the standard asks for BufferError
#: (dtypes it lacks or DLPack does not define, memory on other devices) and takes a DLPack 1.2
#: capsule with NULL strides; as producer, OrtValue.__dlpack__ takes no keyword arguments
#: (TypeError for dl_device= and copy=). Its (0, 2048) array's strides (0, 0) are no finding: an
#: array without elements has no layout
ORT_FINDINGS = {
    ("consumer", "exception"): 77,
    ("consumer", "accepted"): 2,
    ("consumer", "peers_can"): 1,
    ("producer", "exception"): 19,
}
ORT_PASSES = 490
