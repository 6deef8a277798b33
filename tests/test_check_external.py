"""The checker with libraries dlbridge has no adapter for: adapters registered by an entry point
(a real ``*.dist-info`` on the path, found by importlib.metadata), named as ``module:object``, and
the automatic array API adapter, with the usage errors of names that resolve to no adapter."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap

import pytest

from dlb_testing import run_checker

# An adapter of a library that holds only C-contiguous arrays: NumPy's, copied.
FLAT_CHECK = '''
import numpy as np
from dlbridge_check import Adapter, Unsupported

class FlatAdapter(Adapter):
    name = "flatlib"
    module = "numpy"
    readonly_results = True

    def make(self, recipe, ref):
        if not ref.flags.c_contiguous:
            raise Unsupported("flatlib holds C-contiguous arrays only")
        return np.array(ref, copy=True)  # aligned: the checker finds the misaligned case unmet

    def from_dlpack(self, obj, **kw):
        return np.from_dlpack(obj, **kw)

class NotAnAdapter:
    pass

class Nameless(FlatAdapter):
    name = ""  # the way out its error names: set it, as FlatAdapter does
'''


def _site(tmp_path, entry_points: str | None = None):
    """A folder on the path with the adapter module and, when given, a distribution that
    registers ``entry_points`` (the text of its entry_points.txt)."""
    (tmp_path / "flatlib_check.py").write_text(FLAT_CHECK)
    if entry_points is not None:
        info = tmp_path / "flatlib_check-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: flatlib-check\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    return env


def _results(run, lib: str) -> list[dict]:
    return [r for r in run.doc["results"] if lib in (r["producer"], r["consumer"])]


CASES = "--cases=layout/transposed,layout/misaligned,layout/fortran,dtype/float64"


def test_module_object_names_an_adapter(tmp_path):
    env = _site(tmp_path)
    run = run_checker(tmp_path, "--libraries", "numpy,flatlib_check:FlatAdapter", CASES, env=env)
    mine = _results(run, "flatlib")
    assert mine and "flatlib" in run.doc["libraries"]
    passed = [r for r in mine if r["status"] == "pass"]
    assert len(passed) > len(mine) // 3
    # a layout it cannot hold is unsupported as a producer, not a failure
    transposed = [r for r in mine
                  if r["producer"] == "flatlib" and r["case"] == "layout/transposed"]
    assert transposed and all(r["status"] == "unsupported" for r in transposed)
    # a copy loses the misaligned case's address: the checker, not the adapter, notices
    odd = [r for r in mine if r["producer"] == "flatlib" and r["case"] == "layout/misaligned"]
    assert odd and all(r["status"] == "unsupported" for r in odd)
    assert "flatlib's adapter made another array than the case's" in odd[0]["detail"]
    # NumPy's copies are right: nothing is found against flatlib as a producer
    assert not [r for r in mine if r["producer"] == "flatlib" and r.get("fault") == "producer"]


def test_entry_point_registers_an_adapter(tmp_path):
    env = _site(tmp_path, "[dlbridge.check]\nflatlib = flatlib_check:FlatAdapter\n")
    run = run_checker(tmp_path, "--libraries", "numpy,flatlib", CASES, env=env)
    assert {r["producer"] for r in run.doc["results"]} >= {"flatlib", "numpy"}
    # a run of every library includes what installed distributions register (no run needed:
    # the discovery of libraries is what a run starts from)
    listed = subprocess.run(
        [sys.executable, "-c", "from dlbridge_check.libraries import use_names, discover; "
         "use_names(None); print({d.name: d.installed for d in discover()})"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout
    assert "'flatlib': True" in listed


def test_broken_entry_point_is_reported_not_fatal(tmp_path):
    env = _site(tmp_path, "[dlbridge.check]\nbroken = no_such_module_here:Adapter\n"
                "notone = flatlib_check:NotAnAdapter\n")
    listed = ast.literal_eval(subprocess.run(
        [sys.executable, "-c", "from dlbridge_check.libraries import use_names, discover; "
         "use_names(None); print({d.name: (d.installed, d.reason) for d in discover()})"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout)
    assert listed["numpy"] == (True, "")
    assert listed["broken"] == (
        False, "its adapter does not load: ModuleNotFoundError: No module named "
        "'no_such_module_here'")
    assert listed["notone"][0] is False
    assert "not a subclass of dlbridge_check.Adapter" in listed["notone"][1]
    run = run_checker(tmp_path, "--libraries", "numpy,broken", env=env, expect=2)
    assert "No module named 'no_such_module_here'" in run.output


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("no_such_library_here", "unknown library no_such_library_here: neither one of"),
        ("json", "json has no asarray"),
        ("flatlib_check:NotAnAdapter", "not a subclass of dlbridge_check.Adapter"),
        ("flatlib_check:Missing", "has no attribute 'Missing'"),
        ("flatlib_check:Nameless", "has no name: set the class attribute name"),
    ],
)
def test_names_that_resolve_to_no_adapter_are_usage_errors(tmp_path, name, says):
    run = run_checker(tmp_path, "--libraries", f"numpy,{name}", env=_site(tmp_path), expect=2)
    assert says in run.output
    assert "dlbridge's libraries: array_api_strict" in run.output


@pytest.mark.parametrize("name", ["flatlib_check:FlatAdapter", "flatlib"])
def test_fail_on_takes_the_spec_or_the_adapters_name(tmp_path, name):
    env = _site(tmp_path)
    run_checker(tmp_path, "--libraries", "numpy,flatlib_check:FlatAdapter", CASES,
                "--fail-on", name, env=env, expect=0)


def test_automatic_adapter_checks_a_real_array_api_library(tmp_path):
    """jax.numpy is not one of dlbridge's library names (``jax`` is): the automatic adapter
    checks it through its array API namespace alone."""
    pytest.importorskip("jax")
    run = run_checker(tmp_path, "--libraries", "numpy,jax.numpy",
                      "--cases=dtype/float32,dtype/float64,dtype/int64,layout/transposed")
    mine = _results(run, "jax.numpy")
    made = {r["case"]: r["status"] for r in mine
            if r["producer"] == "jax.numpy" and r["consumer"] == "numpy" and r["route"] == "direct"}
    assert made["dtype/float32"] == "pass"
    # without jax_enable_x64, asarray gives float32: a dtype it cannot make is unsupported
    assert made["dtype/float64"] == "unsupported"
    # jax arrays have no strides: asarray copies the transposed view into C order
    assert made["layout/transposed"] == "unsupported"
    # as a consumer, its from_dlpack turns int64 into int32: a finding against it
    taken = [r for r in mine if r["producer"] == "numpy" and r["consumer"] == "jax.numpy"
             and r["case"] == "dtype/int64" and r["route"] == "direct"]
    assert taken[0]["status"] == "fail" and "int32" in taken[0]["detail"]
