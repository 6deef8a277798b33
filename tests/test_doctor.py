"""``python -m dlbridge doctor``: the version comparator, every known problem against a fake
installed distribution of an affected and of an unaffected version, the exit statuses, the
JSON report against its schema, the devices read from the kernel's files, and ``--probe``.

A fake distribution is a real ``*.dist-info/METADATA`` in a temporary directory put first on
``sys.path``: importlib.metadata finds it as it finds any installed one (it shadows a real
installation of the same name). The interpreter's build and dlbridge's wheel tags cannot be
changed in a running interpreter, so the entries that depend on them replace the doctor's
readers of the two (``environment.interpreter`` and ``environment.wheel``) with fixed facts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import dlbridge
from dlbridge.doctor import EXIT_PROBLEM, EXIT_USAGE, diagnose, main, report
from dlbridge.doctor import environment as env
from dlbridge.doctor import problems as kb
from dlbridge.doctor.versions import key, satisfies
from test_check import schema_errors

# ----------------------------------------------------------------------------- versions

ORDERED = [
    "1.0.dev1", "1.0a1.dev2", "1.0a1", "1.0a2", "1.0b1", "1.0rc1", "1.0", "1.0.post1.dev1",
    "1.0.post1", "1.0.1", "1.1", "1.10", "2!0.1",
]


def test_versions_sort_as_pep_440_orders_them():
    assert sorted(ORDERED, key=key) == ORDERED
    assert [key(a) < key(b) for a, b in zip(ORDERED, ORDERED[1:])] == [True] * (len(ORDERED) - 1)


@pytest.mark.parametrize(
    ("a", "b"),
    [("2.6", "2.6.0"), ("1.0RC1", "1.0rc1"), ("1.0c1", "1.0rc1"), ("2.15.0+cu132", "2.15.0"),
     ("1.0-1", "1.0.post1"), ("v1.0", "1.0"), ("1.0alpha2", "1.0a2")],
)
def test_equal_spellings_of_a_version(a, b):
    assert key(a) == key(b)


@pytest.mark.parametrize(
    ("version", "spec", "holds"),
    [
        ("0.1.10", "<0.1.11", True), ("0.1.11", "<0.1.11", False),
        ("0.1.11rc1", "<0.1.11", True), ("0.1.15.post2", "<0.1.11", False),
        ("4.6.0", "==4.6.*", True), ("4.6.2.post1", "==4.6.*", True), ("4.7.0", "==4.6.*", False),
        ("4.60", "==4.6.*", False), ("3.9", "!=3.9.*", False),
        ("26.0.1", ">=26,<27", True), ("27.0.0", ">=26,<27", False), ("25.0", ">=26,<27", False),
        ("2.10.0", ">=2.10", True), ("2.9.1", ">=2.10", False), ("2.5.2", "==2.5.2", True),
        ("2.5.2", "!=2.5.2", False), ("1.0", "", True), ("1.0", "<=1.0", True),
        ("1.0", ">1.0", False),
    ],
)
def test_version_ranges(version, spec, holds):
    assert satisfies(version, spec) is holds


@pytest.mark.parametrize(("version", "spec"), [("x.y", ""), ("1.0", "~=1.0"), ("1.0", ">=1.*")])
def test_what_the_comparator_cannot_read_is_a_value_error(version, spec):
    with pytest.raises(ValueError):
        satisfies(version, spec)


# ----------------------------------------------------------------------------- known problems

FREE_THREADED = env.Interpreter("CPython", "3.15.0", True, False, "Linux x86_64")
GIL_BUILD = env.Interpreter("CPython", "3.15.0", False, True, "Linux x86_64")
ABI3 = env.Wheel("0.1.0", ["cp311-abi3-manylinux_2_17_x86_64"])
FREE_THREADED_WHEEL = env.Wheel("0.1.0", ["cp315-cp315t-manylinux_2_17_x86_64"])


@dataclass
class Env:
    """Installed distributions (name: version) and, when given, the interpreter and dlbridge's
    wheel."""

    dists: dict[str, str] = field(default_factory=dict)
    interpreter: env.Interpreter | None = None
    wheel: env.Wheel | None = None


#: each known problem: environments it applies to, and environments it does not
CASES: dict[str, tuple[list[Env], list[Env]]] = {
    "tvm-ffi-one-shot-capsules": (
        [Env({"apache-tvm-ffi": "0.1.10"}), Env({"apache-tvm-ffi": "0.1.11rc1"})],
        [Env({"apache-tvm-ffi": "0.1.11"}), Env({"apache-tvm-ffi": "0.1.15.post2"})],
    ),
    "nanobind-copy-aliases": (
        [Env({"nanobind": "3.0.2"}), Env({"nanobind": "2.9.2"})],
        [Env({"nanobind": "3.1.0"})],
    ),
    "cutlass-dsl-needs-tvm-ffi-0.1.10": (
        [Env({"nvidia-cutlass-dsl": "4.6.0", "apache-tvm-ffi": "0.1.9"})],
        [Env({"nvidia-cutlass-dsl": "4.6.0", "apache-tvm-ffi": "0.1.10"}),
         Env({"nvidia-cutlass-dsl": "4.8.1", "apache-tvm-ffi": "0.1.9"})],
    ),
    "torch-c-dlpack-ext-redundant": (
        [Env({"torch-c-dlpack-ext": "0.1.5", "torch": "2.10.0"}),
         Env({"torch-c-dlpack-ext": "0.1.5", "torch": "2.15.0+cu132"})],
        [Env({"torch-c-dlpack-ext": "0.1.5", "torch": "2.9.1"})],
    ),
    "array-api-strict-cuda-devices": (
        [Env({"array-api-strict": "2.6.0"})],
        [Env({"array-api-strict": "2.6.1"}), Env({"array-api-strict": "2.5.0"})],
    ),
    "numpy-2.5.2-dtype-leak": (
        [Env({"numpy": "2.5.2"})],
        [Env({"numpy": "2.5.1"}), Env({"numpy": "2.5.5"})],
    ),
    "pyarrow-26-writable-dlpack": (
        [Env({"pyarrow": "26.0.0"}), Env({"pyarrow": "26.0.1"})],
        [Env({"pyarrow": "25.0.0"}), Env({"pyarrow": "27.0.0"})],
    ),
    "torch-2.15-stream-default": (
        [Env({"torch": "2.15.0"}), Env({"torch": "2.15.1+cpu"})],
        [Env({"torch": "2.14.2"}), Env({"torch": "2.16.0"})],
    ),
    "nanoarrow-gil-free-threaded": (
        [Env({"nanoarrow": "0.9.0"}, FREE_THREADED)],
        [Env({"nanoarrow": "0.9.0"}, GIL_BUILD)],
    ),
    "abi3-wheel-free-threaded": (
        [Env({}, FREE_THREADED, ABI3)],
        [Env({}, FREE_THREADED, FREE_THREADED_WHEEL), Env({}, GIL_BUILD, ABI3)],
    ),
}


def test_every_known_problem_has_its_cases():
    entries = kb.load()
    assert sorted(p.id for p in entries) == sorted(CASES)
    assert len({p.id for p in entries}) == len(entries)
    for p in entries:
        assert p.problem.endswith(".") and p.source and p.fix, p.id


@pytest.fixture
def install(tmp_path, monkeypatch):
    """Install an environment: its distributions as fake ``*.dist-info`` first on sys.path,
    its interpreter and wheel as the doctor's readings."""

    def _install(e: Env) -> None:
        site = tmp_path / f"site{len(list(tmp_path.iterdir()))}"
        site.mkdir()
        for name, version in e.dists.items():
            fake_distribution(site, name, version)
        monkeypatch.syspath_prepend(str(site))
        if e.interpreter is not None:
            monkeypatch.setattr(env, "interpreter", lambda: e.interpreter)
        if e.wheel is not None:
            monkeypatch.setattr(env, "wheel", lambda dist="dlbridge": e.wheel)

    return _install


def fake_distribution(site: Path, name: str, version: str, entry_points: str = "") -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    if entry_points:
        (info / "entry_points.txt").write_text(entry_points)


@pytest.mark.parametrize(
    ("problem", "case"),
    [(p, i) for p, (affected, _) in CASES.items() for i in range(len(affected))],
)
def test_an_affected_environment_reports_the_problem_and_strict_fails(
    problem, case, install, capsys
):
    install(CASES[problem][0][case])
    assert main(["--strict"]) == EXIT_PROBLEM
    out = capsys.readouterr().out
    assert f"  {problem}" in out
    entry = next(p for p in kb.load() if p.id == problem)
    words = " ".join(out.split())  # the report wraps long lines
    assert entry.problem in words and f"fix: {entry.fix}" in words
    assert main([]) == 0  # without --strict a problem is only reported


@pytest.mark.parametrize(
    ("problem", "case"),
    [(p, i) for p, (_, unaffected) in CASES.items() for i in range(len(unaffected))],
)
def test_an_unaffected_environment_does_not_report_the_problem(problem, case, install):
    install(CASES[problem][1][case])
    assert problem not in [p["id"] for p in diagnose()["problems"]]


def test_a_malformed_entry_is_refused():
    good = {"id": "x", "problem": "p.", "source": "s", "fix": "f"}
    malformed = ({}, {"python": "3.14"}, {"build": "nogil"},
                 {"distribution": "a", "versions": "~=1"}, {"versions": "<1"})
    for when in malformed:
        with pytest.raises(ValueError):
            kb._entry({**good, "when": when})


# ----------------------------------------------------------------------------- the report


def test_the_plain_report_names_the_interpreter_the_gil_and_numpy(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    interp = env.interpreter()
    assert f"{interp.implementation} {interp.version} ({interp.tag}" in out
    gil = next(line for line in out.splitlines() if line.startswith("  GIL "))
    if interp.free_threaded:
        assert gil.split()[1] == ("on" if interp.gil_enabled else "off")
    else:
        assert gil.split()[1:] == ["on", "(a", "GIL", "build)"]
    import importlib.metadata

    assert f"numpy {importlib.metadata.version('numpy')}" in out
    assert "CUDA" in out and "oneAPI" in out


def test_the_plain_run_imports_no_array_library():
    code = (
        "import sys\nfrom dlbridge.doctor import main\nmain([])\n"
        "heavy = {'numpy', 'torch', 'jax', 'pyarrow', 'tensorflow', 'cupy', 'dpnp'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_json_report_matches_its_schema(tmp_path, capsys):
    path = tmp_path / "doctor.json"
    assert main(["--json", str(path)]) == 0
    doc = json.loads(path.read_text())
    schema = report.json_schema()
    assert schema_errors(doc, schema, schema) == []
    assert doc["schema_version"] == report.SCHEMA_VERSION
    assert doc["interpreter"]["tag"] == env.interpreter().tag
    assert "python -m dlbridge doctor" in capsys.readouterr().out  # the text report as well


def test_json_to_standard_output_is_the_report_alone(capsys, install):
    install(CASES["numpy-2.5.2-dtype-leak"][0][0])
    assert main(["--json", "-", "--strict"]) == EXIT_PROBLEM
    doc = json.loads(capsys.readouterr().out)
    schema = report.json_schema()
    assert schema_errors(doc, schema, schema) == []
    found = next(p for p in doc["problems"] if p["id"] == "numpy-2.5.2-dtype-leak")
    assert found["installed"] == {"numpy": "2.5.2"}


@pytest.mark.parametrize("argv", [["--bogus"], ["--json"], ["--strict", "extra"]])
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == EXIT_USAGE
    assert "usage: python -m dlbridge doctor" in capsys.readouterr().err


def test_an_unwritable_json_path_is_a_usage_error(tmp_path, capsys):
    assert main(["--json", str(tmp_path / "missing" / "doctor.json")]) == EXIT_USAGE
    assert "cannot write the JSON report" in capsys.readouterr().err


def test_the_command_line_runs_it():
    done = subprocess.run(
        [sys.executable, "-m", "dlbridge", "doctor", "--bogus"], capture_output=True, text=True
    )
    assert done.returncode == EXIT_USAGE, done.stderr
    usage = subprocess.run([sys.executable, "-m", "dlbridge"], capture_output=True, text=True)
    assert "python -m dlbridge doctor" in usage.stdout


def test_a_registered_adapter_is_listed(install, tmp_path, monkeypatch):
    site = tmp_path / "adapters"
    site.mkdir()
    fake_distribution(site, "flatlib-check", "1.2", "[dlbridge.check]\nflatlib = flatlib_check:A\n")
    monkeypatch.syspath_prepend(str(site))
    found = {d["name"]: d for d in diagnose()["libraries"]}
    assert found["flatlib-check"]["version"] == "1.2"
    assert found["flatlib-check"]["why"] == "adapter flatlib"


def test_a_library_installed_under_another_distribution_is_found(tmp_path, monkeypatch):
    """As cupy comes as cupy-cuda12x or cupy-cuda13x: the distribution that installs the
    module (found without importing it)."""
    site = tmp_path / "site"
    (site / "flatlib").mkdir(parents=True)
    (site / "flatlib" / "__init__.py").write_text("raise ImportError('never imported')\n")
    fake_distribution(site, "flatlib-cuda12x", "14.0.0")
    (site / "flatlib_cuda12x-14.0.0.dist-info" / "top_level.txt").write_text("flatlib\n")
    monkeypatch.syspath_prepend(str(site))
    found = env.library("flatlib", "flatlib", "flatlib-cuda13x")
    assert (found.name, found.distribution, found.version) == (
        "flatlib", "flatlib-cuda12x", "14.0.0"
    )
    assert env.library("nothing", "no_such_module", "no-such-dist").version is None


# ----------------------------------------------------------------------------- wheels


@pytest.mark.parametrize(
    ("tags", "interp", "fits"),
    [
        (["cp311-abi3-manylinux_2_17_x86_64"], GIL_BUILD, True),
        (["cp311-abi3-manylinux_2_17_x86_64"], FREE_THREADED, False),
        (["cp316-abi3-manylinux_2_17_x86_64"], GIL_BUILD, False),
        (["cp315-cp315t-manylinux_2_17_x86_64"], FREE_THREADED, True),
        (["cp315-cp315t-manylinux_2_17_x86_64"], GIL_BUILD, False),
        (["cp315-abi3t-manylinux_2_17_x86_64"], FREE_THREADED, True),
        ([], FREE_THREADED, True),
    ],
)
def test_wheel_tags_against_the_interpreter(tags, interp, fits):
    assert (env.wheel_problem(tags, interp) is None) is fits


def test_an_abi3_wheel_on_a_free_threaded_interpreter_names_the_wheel_to_install():
    why = env.wheel_problem(ABI3.tags, FREE_THREADED)
    assert why is not None and "cp315t wheel" in why and "never loads" in why


def test_the_installed_wheel_fits_this_interpreter():
    found = env.wheel()
    if found.version is None:
        pytest.skip("dlbridge is not installed as a distribution here (a PYTHONPATH checkout)")
    assert env.wheel_problem(found.tags, env.interpreter()) is None


def test_the_checker_of_another_dlbridge_version_is_named_with_the_install():
    why = env.checker_problem("0.1.0", "0.2.0")
    assert why == ("dlbridge-check 0.1.0 is made for dlbridge 0.1.0, not this dlbridge 0.2.0: "
                   "pip install dlbridge-check==0.2.0")
    assert env.checker_problem("0.2.0", "0.2.0") is None
    assert env.checker_problem(None, "0.2.0") is None  # not installed: no problem, a hint


def test_the_report_names_the_checker_or_how_to_install_it():
    doc = diagnose()
    installed = env.version_of("dlbridge-check")
    assert doc["checker"] == {"version": installed, "problem": None}
    line = next(x for x in report.text(doc).splitlines() if x.startswith("  checker"))
    assert line == f"  checker      dlbridge-check {installed}"
    doc["checker"] = {"version": None, "problem": None}
    line = next(x for x in report.text(doc).splitlines() if x.startswith("  checker"))
    assert line.endswith(f"pip install dlbridge-check=={doc['dlbridge_version']})")
    doc["checker"] = {"version": "0.0.9", "problem": env.checker_problem("0.0.9", "0.1.0")}
    assert "pip install dlbridge-check==0.1.0" in " ".join(report.text(doc).split())


# ----------------------------------------------------------------------------- devices
# The kernel's files are laid out in a temporary directory: a test double for a machine with an
# NVIDIA driver and GPUs, or an Intel GPU, which this machine has not.


def test_cuda_from_the_kernel_drivers_files(tmp_path):
    nvidia = tmp_path / "proc/driver/nvidia"
    (nvidia / "gpus/0000:01:00.0").mkdir(parents=True)
    (nvidia / "version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n"
        "GCC version:  gcc version 12.2.0\n"
    )
    (nvidia / "gpus/0000:01:00.0/information").write_text("Model: \t\t NVIDIA H200\nIRQ: 42\n")
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/maps").write_text(
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05\n"
    )
    found = env.cuda(tmp_path)
    assert found.kernel_driver == "580.95.05"
    assert found.devices == ["0000:01:00.0: NVIDIA H200"]
    assert found.loaded == "/usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05"
    assert env.cuda(tmp_path / "nothing") == env.Cuda(found.library, "", "", [])


def test_oneapi_devices_from_the_drm_files(tmp_path):
    for card, vendor in (("card0", "0x8086"), ("card1", "0x10de"), ("card0-DP-1", "0x8086")):
        (tmp_path / f"sys/class/drm/{card}/device").mkdir(parents=True)
        (tmp_path / f"sys/class/drm/{card}/device/vendor").write_text(vendor + "\n")
        (tmp_path / f"sys/class/drm/{card}/device/device").write_text("0x0bd5\n")
    assert env.oneapi_devices(tmp_path) == ["card0: Intel GPU 0x0bd5"]


def test_the_cuda_driver_dlbridge_loaded_is_reported_loaded():
    """Against the CUDA stand-in (a test double of libcuda): once dlbridge has loaded the
    driver, the doctor sees it mapped into the process."""
    standin = os.environ.get("DLBRIDGE_CUDA_STANDIN")
    if not standin:
        pytest.skip("needs the CUDA stand-in (DLBRIDGE_CUDA_STANDIN, built by scripts/test.sh)")
    code = (
        "import dlbridge\nfrom dlbridge.doctor import environment as env\n"
        "before = env.cuda().loaded\n"
        "dlbridge.Tensor(bytearray(8)).to_device('cuda')\n"
        "print(repr(before), env.cuda().loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        env={**os.environ, env.CUDA_OVERRIDE: standin},
    )
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.split()
    assert before == "''" and Path(after).name == Path(standin).name


# ----------------------------------------------------------------------------- --probe


def test_probe_imports_each_library_in_a_process_of_its_own(tmp_path, monkeypatch):
    """CPython's warning for an extension that turns the GIL back on is what the probe reads (a
    module that gives the same warning stands for such an extension on a GIL build); an import
    that crashes or fails is reported, and the others go on."""
    from dlbridge.doctor.probe import imports

    (tmp_path / "gil_ext.py").write_text(
        "import warnings\nwarnings.warn(\"The global interpreter lock (GIL) has been enabled to "
        "load module 'gil_ext._core', which has not declared that it can run safely without "
        "the GIL.\", RuntimeWarning)\n"
    )
    (tmp_path / "crash_ext.py").write_text("import os\nos.abort()\n")
    path = [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    done = imports({"gil": "gil_ext", "crash": "crash_ext", "broken": "no_such_module_here"})
    assert done["gil"].failed == "" and done["gil"].gil_enabled_by == ["gil_ext._core"]
    assert done["crash"].failed == "the import crashed the interpreter (signal 6)"
    assert done["broken"].failed.startswith("ModuleNotFoundError")


def test_probe_leaves_libraries_that_are_slow_to_import_out_of_the_live_cases(monkeypatch):
    """The checker imports every library again: one whose import took longer than the budget
    is named with its time instead, with the command that runs its cases."""
    from dlbridge.doctor import probe as probe_module
    from dlbridge.doctor.environment import Distribution

    numpy = Distribution(name="numpy", distribution="numpy", version=env.version_of("numpy"),
                         module="numpy", why="library")
    monkeypatch.setattr(probe_module, "LIVE_IMPORT_SECONDS", 0.0)
    done = probe_module.probe([numpy], free_threaded=False)
    assert done["imported"] == {"numpy": ""}
    check = done["check"]
    assert not check["ran"] and check["why"] == "every library is slow to import"
    assert list(check["left_out"]) == ["numpy"] and check["left_out"]["numpy"] >= 0
    text = " ".join(" ".join(report.probe_text(done)).split())  # unwrapped
    assert "left out, slow to import: numpy (" in text
    assert "python -m dlbridge check --libraries numpy runs their cases" in text


@pytest.mark.slow
def test_probe_runs_the_checker_among_the_installed_libraries():
    """The whole probe, as a user runs it (its own process: it imports every library)."""
    done = subprocess.run(
        [sys.executable, "-m", "dlbridge", "doctor", "--probe", "--json", "-"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    schema = report.json_schema()
    assert schema_errors(doc, schema, schema) == []
    probe = doc["probe"]
    assert probe["imported"]["numpy"] == ""
    check = probe["check"]
    assert check["ran"], check["why"]
    assert "numpy" in check["libraries"] and check["results"] > 0
    assert check["counts"].get("pass", 0) > 0
    assert "--probe" in report.text(doc)


def test_an_extension_that_does_not_load_says_what_to_do(tmp_path):
    """dlbridge's package without its compiled extension (as on an interpreter its wheel does
    not fit): the ImportError says so and names the way out, since the doctor cannot run."""
    import shutil

    import dlbridge

    copy = tmp_path / "dlbridge"
    shutil.copytree(Path(dlbridge.__file__).parent, copy,
                    ignore=shutil.ignore_patterns("_native*.so", "_native*.pyd", "__pycache__"))
    done = subprocess.run(
        [sys.executable, "-c", "import dlbridge"], capture_output=True, text=True,
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: dlbridge's compiled extension does not load")
    assert "pip install --force-reinstall dlbridge" in last


def test_a_producer_that_reuses_its_capsule_is_named_with_the_doctor():
    """The one-shot capsules of some tvm-ffi releases: the error names the producer and the
    doctor."""
    import numpy as np

    import dlbridge

    class OneCapsule:
        def __init__(self) -> None:
            self.capsule = np.arange(3.0).__dlpack__()

        def __dlpack__(self, **kwargs):
            return self.capsule

    x = OneCapsule()
    dlbridge.from_dlpack(x)
    with pytest.raises(BufferError) as info:
        dlbridge.from_dlpack(x)
    message = str(info.value)
    assert message.startswith("OneCapsule.__dlpack__() returned a DLPack capsule that was already")
    assert "python -m dlbridge doctor" in message


def test_probe_says_when_the_checker_is_not_importable(monkeypatch):
    """As where the checker's distribution (or NumPy, which it needs) is not installed."""
    from dlbridge.doctor.probe import check

    monkeypatch.setitem(sys.modules, "dlbridge_check", None)  # makes its import fail
    result = check(["numpy"])
    assert not result["ran"] and result["results"] == 0
    assert result["why"].startswith("the conformance checker does not import here")
    assert result["why"].endswith(f"pip install dlbridge-check=={dlbridge.__version__}")
    doc = {"probe": {"free_threaded": False, "imported": {}, "gil_enabled_by": {},
                     "cuda_loaded_by": {}, "check": result, "seconds": 0.1}}
    assert "  check        not run: the conformance checker does not import here" in (
        "\n".join(report.probe_text(doc["probe"]))
    )


def test_a_library_installed_under_its_module_name_is_found(tmp_path, monkeypatch):
    """As tensorflow where the pip spec says tensorflow-cpu."""
    site = tmp_path / "site"
    site.mkdir()
    fake_distribution(site, "flatlib", "2.0")
    monkeypatch.syspath_prepend(str(site))
    found = env.library("flatlib", "flatlib.core", "flatlib-cpu")
    assert (found.distribution, found.version) == ("flatlib", "2.0")
