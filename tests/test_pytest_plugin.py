"""The pytest plugin (``pytest --dlbridge-check=LIB``, dlbridge_check.pytest_plugin): pytest runs in
a subprocess, in an empty directory, with the real peers and a few cases. Without the option
the plugin adds nothing; with it, each direct exchange of LIB's is an item
``producer→consumer/case`` that passes, skips, fails (a finding against LIB, with the catalog
case and the way out) or xfails (a finding against the peer only)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest.importorskip("numpy")

from dlbridge_check.libraries import discover

REPO = Path(__file__).resolve().parent.parent
PLUGIN = "_dlbridge_pytest"
#: an item's line in pytest -v: its id and outcome
ITEM = re.compile(r"^dlbridge-check::(\S+) (PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)", re.M)
#: a peer the checker knows that is not installed here (None when every one is)
ABSENT = next((d.name for d in discover() if not d.installed and not d.builtin), None)


#: the adapter of a library that holds C-contiguous arrays only (NumPy's, copied)
FLAT_ADAPTER = """
import numpy as np
from dlbridge_check import Adapter, Unsupported

class FlatAdapter(Adapter):
    name = "flatlib"
    module = "numpy"

    def make(self, recipe, ref):
        if not ref.flags.c_contiguous:
            raise Unsupported("flatlib holds C-contiguous arrays only")
        return np.array(ref, copy=True)

    def from_dlpack(self, obj, **kw):
        return np.from_dlpack(obj, **kw)
"""


def installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def pytest_run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest ARGS in ``cwd`` (also on the path of it and of the checker's workers), with the
    plugin (named with -p unless dlbridge is installed with its entry point, which loads it
    anyway: pytest refuses one plugin under two names)."""
    loaded = any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
    plugin = [] if loaded else ["-p", PLUGIN]
    path = os.pathsep.join(filter(None, [str(cwd), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "COLUMNS": "200", "PYTHONIOENCODING": "utf-8", "PYTHONPATH": path}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugin, *args],
        cwd=cwd, capture_output=True, text=True, encoding="utf-8", env=env, timeout=600,
    )


def outcomes(run: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Item id -> outcome, from pytest -v's output."""
    return dict(ITEM.findall(run.stdout))


def test_the_entry_point_registers_the_plugin():
    # the checker's distribution declares it; dlbridge's own does not (it ships no checker)
    checker = tomllib.loads((REPO / "checker" / "pyproject.toml").read_text())["project"]
    assert checker["entry-points"]["pytest11"] == {"dlbridge": PLUGIN}
    runtime = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "pytest11" not in runtime.get("entry-points", {})


def test_importing_the_plugin_imports_nothing_heavy():
    """pytest imports the entry point's module in every run: not dlbridge, nor NumPy."""
    code = (f"import sys, {PLUGIN}\n"
            "print([m for m in ('numpy', 'dlbridge') if m in sys.modules])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_without_the_option_nothing_is_added(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    run = pytest_run(tmp_path, "-v")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout and "dlbridge-check::" not in run.stdout, run.stdout
    # the plugin was loaded: its options are there
    assert "--dlbridge-check=LIB" in pytest_run(tmp_path, "--help").stdout


def test_an_unknown_library_is_a_usage_error(tmp_path):
    run = pytest_run(tmp_path, "--dlbridge-check=nosuchlib")
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert "unknown library nosuchlib" in run.stderr


def test_a_library_with_an_adapter_from_outside_dlbridge(tmp_path):
    # module:object names the adapter, whose name ("flatlib") the items carry
    (tmp_path / "flatlib_check.py").write_text(FLAT_ADAPTER)
    run = pytest_run(tmp_path, "-v", "--dlbridge-check=flatlib_check:FlatAdapter",
                     "--dlbridge-peers=numpy", "--dlbridge-cases=dtype/float64,layout/transposed")
    assert run.returncode == 0, run.stdout + run.stderr
    found = outcomes(run)
    assert found["flatlib→numpy/dtype/float64"] == "PASSED", run.stdout
    assert found["numpy→flatlib/layout/transposed"] == "PASSED", run.stdout
    assert found["flatlib→numpy/layout/transposed"] == "SKIPPED", run.stdout  # it has no views
    assert "flatlib holds C-contiguous arrays only" in run.stdout


@pytest.mark.skipif(not installed("torch"), reason="needs torch")
def test_items_of_numpy_and_torch_pass(tmp_path):
    peers = "torch" + (f",{ABSENT}" if ABSENT else "")
    run = pytest_run(tmp_path, "-v", "-rs", "--dlbridge-check=numpy", f"--dlbridge-peers={peers}",
                     "--dlbridge-cases=layout/transposed,dtype/float32")
    assert run.returncode == 0, run.stdout + run.stderr
    # numpy as producer and as consumer, with torch and the checker's reference library
    # (python, a memoryview, only produces, and numpy.from_dlpack does not take one)
    pairs = ["numpy→numpy", "numpy→torch", "numpy→dlpack-ref", "torch→numpy", "python→numpy",
             "dlpack-ref→numpy"]
    expected = {f"{pair}/{case}": "SKIPPED" if pair == "python→numpy" else "PASSED"
                for pair in pairs for case in ("layout/transposed", "dtype/float32")}
    if ABSENT:
        expected[f"numpy↔{ABSENT}"] = "SKIPPED"
        assert f"{ABSENT} is not installed here" in run.stdout
    assert outcomes(run) == expected, run.stdout


@pytest.mark.skipif(not installed("pyarrow"), reason="needs pyarrow")
def test_a_finding_against_the_library_fails_with_the_catalog_case_and_the_way_out(tmp_path):
    run = pytest_run(tmp_path, "-v", "--dlbridge-check=pyarrow", "--dlbridge-peers=numpy",
                     "--dlbridge-cases=capsule/legacy_readonly_1d")
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout + run.stderr
    assert outcomes(run)["pyarrow→numpy/capsule/legacy_readonly_1d"] == "FAILED", run.stdout
    assert outcomes(run)["numpy→pyarrow/capsule/legacy_readonly_1d"] == "PASSED", run.stdout
    section = run.stdout.split("_ pyarrow→numpy/capsule/legacy_readonly_1d _")[1]
    assert "[fail] a finding against pyarrow" in section
    assert "catalog: C13: read-only NumPy array" in section
    assert "detail: pyarrow exported read-only memory in a legacy capsule" in section
    assert "way out: going through dlbridge works" in section


@pytest.mark.skipif(not installed("pyarrow"), reason="needs pyarrow")
def test_a_finding_against_the_peer_only_is_an_xfail(tmp_path):
    run = pytest_run(tmp_path, "-v", "-rx", "--dlbridge-check=numpy", "--dlbridge-peers=pyarrow",
                     "--dlbridge-cases=capsule/legacy_readonly_1d")
    assert run.returncode == 0, run.stdout + run.stderr
    assert outcomes(run)["pyarrow→numpy/capsule/legacy_readonly_1d"] == "XFAIL", run.stdout
    assert "a finding against pyarrow as producer, not numpy" in run.stdout
