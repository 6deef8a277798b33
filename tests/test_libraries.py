"""dlbridge.libraries: the public data of the libraries dlbridge knows, which the conformance
checker reads instead of dlbridge's internals. It must say what dlbridge's own rules use."""

from __future__ import annotations

import sys

import pytest

import dlbridge
from dlbridge import namespaces
from dlbridge.libraries import LEGACY_CAPSULES_WRITABLE, Library, known_libraries, library


def test_every_library_of_convert_in_its_order():
    libs = known_libraries()
    assert [lib.name for lib in libs] == list(namespaces.NAMES)
    assert [lib.rank for lib in libs] == sorted(lib.rank for lib in libs)
    for lib in libs:
        ns = namespaces.get(lib.name)
        assert (lib.module, lib.pip) == (ns.module, ns.pip)
        assert namespaces.get(lib.module.split(".")[0]) is ns or lib.module == ns.module


def test_reading_the_data_imports_no_library():
    known_libraries()
    # the test run may have imported some peers already: none of those dlbridge knows is new
    before = set(sys.modules)
    for lib in known_libraries():
        assert lib.distribution
    assert set(sys.modules) == before


@pytest.mark.parametrize(
    ("name", "module", "distribution"),
    [("numpy", "numpy", "numpy"), ("np", "numpy", "numpy"), ("jnp", "jax", "jax"),
     ("tensorflow", "tensorflow", "tensorflow-cpu"), ("mlx", "mlx.core", "mlx")],
)
def test_a_library_by_name_or_alias(name, module, distribution):
    lib = library(name)
    assert isinstance(lib, Library)
    assert (lib.module, lib.distribution) == (module, distribution)


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(LookupError, match="dlbridge knows no array library 'nolib'") as e:
        library("nolib")
    for lib in known_libraries():  # the way out: one of these names
        assert repr(lib.name) not in str(e.value) and lib.name in str(e.value)


def test_dtypes_only_for_libraries_that_hold_fewer():
    held = {lib.name: lib.dtypes for lib in known_libraries() if lib.dtypes is not None}
    assert set(held) == {"mlx", "warp"}
    assert "float32" in held["mlx"] and "complex128" not in held["mlx"]


def test_the_legacy_table_is_the_one_dlbridge_imports_by():
    """A legacy capsule of a listed package imports writable, of any other read-only."""
    np = pytest.importorskip("numpy")

    class Legacy:
        """Hands out NumPy's legacy capsule, as a type of the module it is given."""

        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    assert {"numpy", "torch", "cupy", "dpnp"} <= LEGACY_CAPSULES_WRITABLE
    assert isinstance(LEGACY_CAPSULES_WRITABLE, frozenset)
    for package, writable in (("numpy.fake", True), ("unknownlib", False)):
        cls = type("Legacy", (Legacy,), {"__module__": package})
        t = dlbridge.from_dlpack(cls(np.arange(3.0)))
        assert t.readonly is not writable, package
    assert "numpy" in LEGACY_CAPSULES_WRITABLE and "pyarrow" not in LEGACY_CAPSULES_WRITABLE
