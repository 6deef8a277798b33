"""A legacy capsule cannot say whether its memory may be written: whether dlbridge's import of
one is writable is a fact about the library that made it, one row per library here.

Mutable arrays that export their own memory (NumPy, torch, Paddle, MLX, Warp, tvm-ffi, dpnp;
CuPy needs a GPU) import writable, as their own consumers import them; JAX's and PyArrow's
immutable memory, a bare capsule and an unknown producer's capsule import read-only. Each row
hands dlbridge a real legacy capsule of that library from an object whose type is named as
the library's own types are (MLX and Warp answer every request with a legacy capsule, so their
real arrays are imported as well)."""

from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

import dlbridge

#: (module to import, its types' module, make a float32 array of 0..3, writable)
LIBRARIES = [
    ("numpy", "numpy", lambda m: m.arange(4, dtype=m.float32), True),
    ("torch", "torch", lambda m: m.arange(4, dtype=m.float32), True),
    ("paddle", "paddle", lambda m: m.arange(4, dtype="float32"), True),
    ("mlx.core", "mlx.core", lambda m: m.arange(4, dtype=m.float32), True),
    ("warp", "warp._src.types",
     lambda m: m.array(np.arange(4, dtype=np.float32), device="cpu"), True),
    ("tvm_ffi", "tvm_ffi.core", lambda m: m.from_dlpack(np.arange(4, dtype=np.float32)), True),
    ("dpnp", "dpnp.dpnp_array", lambda m: m.arange(4, dtype=m.float32), True),
    ("jax.numpy", "jaxlib._jax", lambda m: m.arange(4, dtype=m.float32), False),
    ("pyarrow", "pyarrow.lib", lambda m: m.array(np.arange(4, dtype=np.float32)), False),
]


def legacy_producer(module_name: str, capsule):
    """An object of a type defined in ``module_name`` whose ``__dlpack__`` returns ``capsule``."""

    def __dlpack__(self, **kwargs):
        return capsule

    def __dlpack_device__(self):
        return (1, 0)

    cls = type("Producer", (), {"__dlpack__": __dlpack__, "__dlpack_device__": __dlpack_device__,
                                "__module__": module_name})
    return cls()


def array_of(module: str, make):
    if module == "paddle" and "tensorflow" in sys.modules and "paddle" not in sys.modules:
        # paddle 3.3 segfaults when imported after tensorflow 2.21 in one process
        pytest.skip("paddle cannot be imported after tensorflow in one process")
    lib = pytest.importorskip(module)
    if module == "warp":
        lib.config.quiet = True
    try:
        return make(lib)
    except Exception as e:  # noqa: BLE001 - a library without its device (dpnp's SYCL runtime)
        pytest.skip(f"{module} cannot make an array here: {type(e).__name__}: {e}")


@pytest.mark.parametrize(("module", "types_module", "make", "writable"), LIBRARIES,
                         ids=[row[0] for row in LIBRARIES])
def test_a_legacy_capsule_of_each_library(module, types_module, make, writable):
    x = array_of(module, make)
    t = dlbridge.from_dlpack(legacy_producer(types_module, x.__dlpack__()))
    assert t.readonly is not writable
    assert np.from_dlpack(t.to_device("cpu")).tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("module", ["mlx.core", "warp"])
def test_legacy_only_producers_import_writable(module):
    row = next(r for r in LIBRARIES if r[0] == module)
    x = array_of(module, row[2])
    t = dlbridge.from_dlpack(x)
    assert not t.readonly
    view = np.from_dlpack(t)
    view[0] = 7.0  # the library's own memory, as its own consumers write it
    assert np.from_dlpack(dlbridge.from_dlpack(x))[0] == 7.0


def test_types_are_named_as_the_table_expects():
    """The rows above name each library's array type's module; a library that moves its types
    elsewhere must move its row too."""
    for module, types_module, make, _ in LIBRARIES:
        if module == "paddle" and "tensorflow" in sys.modules and "paddle" not in sys.modules:
            continue  # see array_of
        try:
            lib = importlib.import_module(module)
        except ImportError:
            continue
        if module == "warp":
            lib.config.quiet = True
        try:
            x = make(lib)
        except Exception:  # noqa: BLE001 - no device for it here (dpnp)
            continue
        assert type(x).__module__ == types_module, module


def test_unknown_producers_and_bare_capsules_stay_read_only():
    a = np.arange(4, dtype=np.float32)
    assert dlbridge.from_dlpack(a.__dlpack__()).readonly  # a bare capsule
    assert dlbridge.from_dlpack(legacy_producer("mylib", a.__dlpack__())).readonly
    assert dlbridge.from_dlpack(legacy_producer("numpyx.core", a.__dlpack__())).readonly
