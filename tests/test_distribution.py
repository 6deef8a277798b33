"""The release artefacts, as a user gets them.

Builds the Linux x86-64 wheel and the sdist with ``scripts/build_dist.sh linux-x86_64``
(the other platforms' code is compiled by ``scripts/cross_check.sh``, and their wheels are
built by ``scripts/build_dist.sh``; ``scripts/aarch64_smoke.sh`` runs the aarch64 one under
emulation), checks the wheel's tags
(abi3 for CPython 3.11+, manylinux2014 / manylinux_2_17), installs it into a fresh virtual
environment that has nothing else (no NumPy) and uses it there: the buffer-protocol round
trip, then, with NumPy alone added, ``python -m dlbridge check`` on what is installed. The
same wheel goes into a venv of the oldest CPython dlbridge supports (3.11, the floor), with
the newest NumPy, torch and PyArrow that serve it, where a smoke subset of the suite runs.
The conformance checker is a distribution of its own, dlbridge-check: a pure-Python wheel of
the same version, built beside dlbridge's and installed after it, which the runtime wheel does
not contain.
The wheel for CPython 3.15 and newer (``build_dist.sh linux-x86_64-abi3t``) has its tags, its
extension's file name and the C API it calls checked here; ``scripts/py315_smoke.sh`` runs it.

Slow (a release build, two pip installs, NumPy from the package index) and so run only when
``DLBRIDGE_TEST_DIST=1`` is set, as CI does.
"""

from __future__ import annotations

import configparser
import json
import os
import subprocess
import sys
import time
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from dlb_testing import run_checker

REPO = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("DLBRIDGE_TEST_DIST") != "1",
        reason="builds the release wheel and installs it in a fresh venv (slow): set "
               "DLBRIDGE_TEST_DIST=1 (CI does)",
    ),
    # a cold release build (the first test's setup) takes minutes on two cores
    pytest.mark.timeout(1200),
    pytest.mark.slow,
]


#: the environment of the fresh venv's commands: nothing that would point its Python at this
#: checkout or at the project's venv (PYTHONPATH, PYTHONHOME, VIRTUAL_ENV...)
CLEAN_ENV = {
    k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k != "VIRTUAL_ENV"
}


def run(*cmd, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("env", CLEAN_ENV)
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def dist() -> dict[str, Path]:
    """The Linux x86-64 wheel and the sdist, freshly built into dist/."""
    env = {**os.environ, "DLBRIDGE_VENV": str(Path(sys.prefix))}
    built = run("bash", REPO / "scripts" / "build_dist.sh", "linux-x86_64", cwd=REPO, env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    wheels = sorted((REPO / "dist").glob("dlbridge-*.whl"))
    sdists = sorted((REPO / "dist").glob("dlbridge-*.tar.gz"))
    checkers = sorted((REPO / "dist").glob("dlbridge_check-*.whl"))
    assert len(wheels) == len(sdists) == len(checkers) == 1, sorted((REPO / "dist").iterdir())
    for path in (*wheels, *checkers):
        print(f"{path.name}: {path.stat().st_size / 1e6:.2f} MB")
    return {"wheel": wheels[0], "sdist": sdists[0], "checker": checkers[0]}


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory, dist) -> Path:
    """A new venv with the wheel installed and nothing else; its python."""
    root = tmp_path_factory.mktemp("fresh") / "venv"
    made = run(sys.executable, "-m", "venv", root)
    assert made.returncode == 0, made.stderr
    py = root / "bin" / "python"
    # --no-index: the wheel needs nothing from the package index
    installed = run(
        py, "-m", "pip", "install", "--no-index", "--disable-pip-version-check", dist["wheel"]
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return py


def test_wheel_is_one_abi3_manylinux2014_wheel(dist):
    name = dist["wheel"].name
    assert "-cp311-abi3-" in name, name
    assert "manylinux_2_17_x86_64" in name and "manylinux2014_x86_64" in name, name
    with zipfile.ZipFile(dist["wheel"]) as whl:
        names = whl.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = whl.read(info).decode()
        # entry points: none since the checker (and its pytest plugin) left the runtime
        points = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        plugins = configparser.ConfigParser()
        plugins.read_string(whl.read(points[0]).decode() if points else "")
    assert "dlbridge/_native.abi3.so" in names
    assert "dlbridge/py.typed" in names and "dlbridge/_native.pyi" in names
    # the pure-Python modules and subpackages (python-source = "python" takes the whole tree)
    for module in ("_layout.py", "plan.py", "libraries.py", "namespaces/__init__.py",
                   "namespaces/torch.py", "doctor/__init__.py", "doctor/known_problems.json",
                   "doctor/report.schema.json"):
        assert f"dlbridge/{module}" in names, module
    # and no checker: it is the distribution dlbridge-check
    checker = [n for n in names if n.startswith(("dlbridge/check/", "_dlbridge_pytest/"))
               or "pytest_plugin" in n or "dlbridge_check" in n]
    assert checker == []
    assert any(n.endswith("licenses/LICENSE-MIT") for n in names)
    assert any(n.endswith("licenses/LICENSE-APACHE") for n in names)
    assert "Requires-Python: >=3.11" in meta
    assert "License-Expression: MIT OR Apache-2.0" in meta
    assert "Requires-Dist" not in meta  # no required Python dependencies
    assert "pytest11" not in plugins  # the checker's pytest plugin ships with the checker


def test_checker_wheel_is_pure_python_and_pinned_to_dlbridge(dist):
    name = dist["checker"].name
    version = dist["wheel"].name.split("-")[1]
    assert name == f"dlbridge_check-{version}-py3-none-any.whl", name
    with zipfile.ZipFile(dist["checker"]) as whl:
        names = whl.namelist()
        meta = whl.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        points = configparser.ConfigParser()
        points.read_string(
            whl.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
        )
    assert not [n for n in names if n.endswith((".so", ".pyd", ".dylib"))]
    for module in ("__init__.py", "__main__.py", "worker.py", "pytest_plugin.py", "catalog.py",
                   "catalog.json", "report.schema.json", "py.typed", "adapters/base.py",
                   "adapters/torch.py"):
        assert f"dlbridge_check/{module}" in names, module
    assert "_dlbridge_pytest/__init__.py" in names
    assert not [n for n in names if n.startswith("dlbridge/")]  # nothing of the runtime
    assert f"Requires-Dist: dlbridge=={version}" in meta
    assert "Requires-Dist: numpy" in meta
    assert "License-Expression: MIT OR Apache-2.0" in meta
    assert any(n.endswith("licenses/LICENSE-MIT") for n in names)
    # pytest --dlbridge-check: pytest finds the plugin by its entry point; and a command
    assert points["pytest11"]["dlbridge"] == "_dlbridge_pytest"
    assert points["console_scripts"]["dlbridge-check"] == "dlbridge_check:main"


@pytest.fixture(scope="module")
def abi3t_wheel(tmp_path_factory) -> Path:
    """The Linux x86-64 wheel for CPython 3.15 and newer (abi3t), built into a folder of its own."""
    out = tmp_path_factory.mktemp("dist-abi3t")
    env = {**os.environ, "DLBRIDGE_VENV": str(Path(sys.prefix)), "DLBRIDGE_DIST_DIR": str(out)}
    built = run("bash", REPO / "scripts" / "build_dist.sh", "linux-x86_64-abi3t", cwd=REPO, env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    wheels = sorted(out.glob("dlbridge-*.whl"))
    assert len(wheels) == 1, sorted(out.iterdir())
    return wheels[0]


def test_abi3t_wheel_serves_cpython_315_and_newer_gil_or_not(abi3t_wheel, tmp_path):
    name = abi3t_wheel.name
    # PEP 803: the compressed tag set abi3.abi3t, for GIL and free-threaded builds alike
    assert "-cp315-abi3.abi3t-" in name, name
    assert "manylinux_2_17_x86_64" in name and "manylinux2014_x86_64" in name, name
    with zipfile.ZipFile(abi3t_wheel) as whl:
        names = whl.namelist()
        info = whl.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
        whl.extract("dlbridge/_native.abi3t-x86_64-linux-gnu.so", tmp_path)
    tags = {line[5:] for line in info.splitlines() if line.startswith("Tag: ")}
    assert {"cp315-abi3-manylinux_2_17_x86_64", "cp315-abi3t-manylinux_2_17_x86_64"} <= tags, tags
    # the filename tag abi3t (PEP 803) with 3.15's platform part: a free-threaded 3.15 loads
    # no .abi3.so file (scripts/py315_smoke.sh checks 3.15's EXTENSION_SUFFIXES)
    extensions = [n for n in names if n.endswith(".so")]
    assert extensions == ["dlbridge/_native.abi3t-x86_64-linux-gnu.so"], extensions
    # only the stable ABI: none of the unstable or private C API that the cp314t build calls
    symbols = run("nm", "-D", "--undefined-only",
                  tmp_path / "dlbridge" / "_native.abi3t-x86_64-linux-gnu.so")
    assert symbols.returncode == 0, symbols.stderr
    python_api = [line.split()[-1] for line in symbols.stdout.splitlines()
                  if line.split()[-1].startswith(("Py", "_Py"))]
    assert "Py_IsInitialized" in python_api, python_api
    stable_private = ("_Py_IncRef", "_Py_DecRef")  # the stable ABI's own reference counting
    outside = [s for s in python_api
               if "Unstable" in s or (s.startswith("_Py") and s not in stable_private)]
    assert outside == [], outside


def test_sdist_has_the_sources_and_the_licenses(dist):
    import tarfile

    with tarfile.open(dist["sdist"]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    for path in ("pyproject.toml", "Cargo.toml", "Cargo.lock", "LICENSE-MIT", "LICENSE-APACHE",
                 "crates/dlbridge/src/lib.rs", "crates/dlbridge-py/src/lib.rs",
                 "python/dlbridge/__init__.py", "python/dlbridge/_native.pyi"):
        assert path in names, path


def test_versions_agree(dist):
    version = dist["wheel"].name.split("-")[1]
    assert dist["sdist"].name == f"dlbridge-{version}.tar.gz"
    cargo = (REPO / "Cargo.toml").read_text()
    assert f'version = "{version}"' in cargo


def test_wheel_works_alone_in_a_fresh_venv(fresh_venv):
    listed = run(fresh_venv, "-m", "pip", "list", "--format=json", "--disable-pip-version-check")
    packages = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert packages - {"pip", "setuptools"} == {"dlbridge"}, packages
    code = (
        "import dlbridge, importlib.util\n"
        "assert importlib.util.find_spec('numpy') is None\n"
        "data = bytearray(b'dlbridge')\n"
        "t = dlbridge.from_dlpack(data)\n"
        "assert (t.shape, str(t.dtype), t.readonly) == ((8,), 'uint8', False)\n"
        "view = memoryview(t)\n"
        "assert bytes(view) == b'dlbridge'\n"
        "view[0] = ord('D')\n"
        "assert data == bytearray(b'Dlbridge')  # the same memory, no copy\n"
        "print(dlbridge.__version__, dlbridge.__file__)\n"
    )
    used = run(fresh_venv, "-c", code, cwd=fresh_venv.parent.parent)
    assert used.returncode == 0, used.stdout + used.stderr
    version, where = used.stdout.split()
    assert version == metadata.version("dlbridge")
    assert str(fresh_venv.parent.parent) in where  # the installed wheel, not this checkout


#: the floor venv's peers (their newest releases for the floor's Python) and test tools
FLOOR_PACKAGES = ["numpy", "torch", "pyarrow", "nanoarrow", "ml_dtypes", "hypothesis", "pytest",
                  "pytest-timeout"]
#: the smoke subset: the core, NumPy, torch, PyArrow and pickling
FLOOR_TESTS = ["tests/test_tensor.py", "tests/test_import.py", "tests/test_export.py",
               "tests/test_buffer.py", "tests/test_readonly.py", "tests/test_pickle.py",
               "tests/test_numpy_path.py", "tests/interop/test_numpy.py",
               "tests/interop/test_torch.py", "tests/interop/test_pyarrow.py"]


@pytest.fixture(scope="module")
def floor_venv() -> Path:
    """The floor venv's python: $DLBRIDGE_FLOOR_VENV (default <repo>/.venv-floor), made with
    the floor CPython when missing or of another version, its peers upgraded on every run."""
    floor_python = os.environ.get("DLBRIDGE_FLOOR_PYTHON") or run(
        "bash", REPO / "scripts" / "pick_python.sh", "floor").stdout.strip()
    assert floor_python, "no CPython 3.11 here: set DLBRIDGE_FLOOR_PYTHON"
    root = Path(os.environ.get("DLBRIDGE_FLOOR_VENV", REPO / ".venv-floor"))
    py = root / "bin" / "python"
    version = "import sys; print(sys.version_info[:2])"
    if not py.exists() or run(py, "-c", version).stdout != run(floor_python, "-c", version).stdout:
        made = run(floor_python, "-m", "venv", "--clear", root)
        assert made.returncode == 0, made.stderr
    installed = run(py, "-m", "pip", "install", "--upgrade", "--disable-pip-version-check",
                    *FLOOR_PACKAGES, timeout=900)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr
    return py


def test_floor_python_runs_the_smoke_subset(floor_venv, dist):
    floor = run(floor_venv, "-c", "import sys; assert sys.version_info[:2] == (3, 11)")
    assert floor.returncode == 0, floor.stderr
    installed = run(floor_venv, "-m", "pip", "install", "--force-reinstall", "--no-deps",
                    "--no-index", "--disable-pip-version-check", dist["wheel"])
    assert installed.returncode == 0, installed.stdout + installed.stderr
    smoke = run(floor_venv, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--timeout=300",
                *FLOOR_TESTS, cwd=REPO, timeout=900)
    tail = smoke.stdout[-4000:] + smoke.stderr[-2000:]
    assert smoke.returncode == 0, tail
    # the installed wheel was tested, with the peers it should have met, and nothing was skipped
    # for want of one of them
    where = run(floor_venv, "-c", "import dlbridge; print(dlbridge.__file__)", cwd=REPO).stdout
    assert str(floor_venv.parent.parent) in where, where
    summary = smoke.stdout.strip().splitlines()[-1]
    print(f"floor ({run(floor_venv, '-V').stdout.strip()}): {summary}")
    assert " passed" in summary, tail
    for peer in ("numpy", "torch", "pyarrow", "nanoarrow", "ml_dtypes", "hypothesis"):
        assert f"could not import '{peer}'" not in smoke.stdout, tail


def test_checker_with_numpy_alone(fresh_venv, dist, tmp_path):
    """Without the checker, ``python -m dlbridge check`` names the command that installs it;
    after that command (the checker's wheel here, and NumPy, its one other dependency, from
    the package index), the main job runs."""
    missing = run(fresh_venv, "-m", "dlbridge", "check", cwd=tmp_path)
    version = dist["wheel"].name.split("-")[1]
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert f"which is not installed: pip install dlbridge-check=={version}" in missing.stderr
    numpy_version = metadata.version("numpy")
    added = run(
        fresh_venv, "-m", "pip", "install", "--disable-pip-version-check", dist["checker"],
        f"numpy=={numpy_version}",
    )
    assert added.returncode == 0, added.stdout + added.stderr
    checked = run_checker(tmp_path, python=fresh_venv, env=CLEAN_ENV, cwd=tmp_path)
    assert "numpy" in checked.proc.stdout and "Traceback" not in checked.output
    doc = checked.doc
    peers = set(doc["libraries"]) - {"python", "dlpack-ref"}
    assert peers == {"numpy"}, doc["libraries"]
    statuses = {r["status"] for r in doc["results"]}
    assert "pass" in statuses and not statuses & {"crash", "timeout"}


def test_doctor_with_numpy_alone(fresh_venv):
    """The plain run in a fresh venv with dlbridge and NumPy: the interpreter, the GIL and NumPy,
    in under two seconds (the whole command, interpreter start included)."""
    numpy_version = metadata.version("numpy")
    added = run(
        fresh_venv, "-m", "pip", "install", "--disable-pip-version-check", f"numpy=={numpy_version}"
    )
    assert added.returncode == 0, added.stdout + added.stderr
    run(fresh_venv, "-m", "dlbridge", "doctor", cwd=fresh_venv.parent)  # warm the .pyc files
    started = time.monotonic()
    doctor = run(fresh_venv, "-m", "dlbridge", "doctor", "--json", "-", cwd=fresh_venv.parent)
    seconds = time.monotonic() - started
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    doc = json.loads(doctor.stdout)
    print(f"doctor in a fresh venv with NumPy alone: {seconds:.2f} s")
    assert seconds < 2.0
    assert doc["interpreter"]["version"] == run(fresh_venv, "-c", "import platform; "
                                                "print(platform.python_version())").stdout.strip()
    assert isinstance(doc["interpreter"]["gil_enabled"], bool)
    libraries = {d["name"]: d["version"] for d in doc["libraries"] if d["version"]}
    assert libraries == {"numpy": numpy_version}, libraries
    assert doc["wheel"]["tags"] and doc["wheel"]["problem"] is None
