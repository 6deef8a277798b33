"""The boundary between the Rust extension and the Python package runs one way.

Rust reaches the package's Python code only through the functions the package registers at
import (``_native._register_fallbacks``), and the device facts the package needs are the
``Device``'s own (``is_host_accessible``, ``dlbridge_copies_from``, ``dlbridge_copies_to``),
decided in Rust. The Rust test ``tests/layers.rs`` fails when Rust imports a module of the
package by name.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dlbridge

# (device, host-accessible, dlbridge copies from it, dlbridge copies to it)
DEVICE_FACTS = [
    ("cpu", True, True, True),
    ("cuda:0", False, True, True),
    ("cuda_host:0", True, True, True),
    ("cuda_managed:0", True, True, True),
    ("rocm_host:0", True, True, False),
    ("tpu_host:0", True, True, False),
    ("rocm:0", False, False, False),
    ("oneapi:0", False, False, False),
    ("metal:0", False, False, False),
    ((1, 1), True, True, False),  # the host is CPU 0: no copy is made on a "CPU 1"
]


@pytest.mark.parametrize(("device", "host", "copies_from", "copies_to"), DEVICE_FACTS)
def test_the_device_says_what_the_host_reads_and_dlbridge_copies(
    device, host, copies_from, copies_to
):
    d = dlbridge.Device(device)
    assert d.is_host_accessible is host
    assert d.dlbridge_copies_from is copies_from
    assert d.dlbridge_copies_to is copies_to


def test_the_namespaces_keep_no_copy_of_the_device_facts():
    from dlbridge import namespaces

    for name in ("HOST_TYPES", "DLBRIDGE_REACHES", "TPU_HOST", "host"):
        assert not hasattr(namespaces, name), name


def run_alone(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter, with the extension loaded as a module of its own, so
    that the dlbridge package's ``__init__`` (which registers the fallbacks) never runs."""
    native = dlbridge._native.__file__
    prelude = f"""
        import importlib.util, numpy as np
        spec = importlib.util.spec_from_file_location("_native", {native!r})
        native = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(native)
        assert "dlbridge" not in __import__("sys").modules
    """
    script = textwrap.dedent(prelude) + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )


def test_without_the_package_the_general_path_is_an_error_naming_the_fix():
    # a raw DLPack capsule is left to the general path (the native path does not consume it)
    done = run_alone("""
        try:
            native.to_numpy(np.arange(3.0).__dlpack__())
        except ImportError as e:
            print("ImportError:", e)
    """)
    assert done.returncode == 0, done.stderr
    assert "ImportError:" in done.stdout
    assert "dlbridge.to_numpy(x)" in done.stdout
    assert "install the dlbridge package" in done.stdout


def test_the_registered_general_path_is_what_to_numpy_calls():
    done = run_alone("""
        seen = []
        def general(x, *, copy=None):
            seen.append(copy)
            return "from the general path"
        native._register_fallbacks(general, lambda t, **kwargs: t)
        print(native.to_numpy(np.arange(3.0).__dlpack__(), copy=False), seen)
        # what the native path covers never reaches it
        print(type(native.to_numpy(np.arange(3.0))).__name__, seen)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["from the general path [False]", "ndarray [False]"]


def test_the_package_registered_its_own_general_path():
    capsule = np.arange(4.0).__dlpack__()
    out = dlbridge.to_numpy(capsule)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, np.arange(4.0))


def test_no_rust_module_shares_a_name_with_a_python_module_of_the_package():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    rust = {p.stem for p in (root / "crates" / "dlbridge" / "src" / "python").rglob("*.rs")}
    python = {p.stem for p in (root / "python" / "dlbridge").glob("*.py")}
    assert not rust & python, f"Rust modules named as the package's Python modules: {rust & python}"
