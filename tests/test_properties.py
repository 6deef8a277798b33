"""Hypothesis property tests: random shapes, slicings and dtypes round-trip through dlbridge.

numpy -> dlbridge (through __dlpack__, the buffer protocol and __array_interface__) -> numpy
(through np.from_dlpack, memoryview and np.asarray) must give back equal values, strides that
agree with NumPy's, and contiguity flags that agree with NumPy's flags.
"""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dlbridge  # noqa: E402
from dlb_testing import NUMPY_DTYPES, assert_strides_equivalent, make  # noqa: E402
from dlpack_ctypes import c_strides  # noqa: E402


@st.composite
def sliced_arrays(draw):
    dtype = draw(st.sampled_from(NUMPY_DTYPES))
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    order = draw(st.sampled_from("CF"))
    base = make(dtype, shape, order=order)
    index = []
    for n in shape:
        step = draw(st.sampled_from([1, 1, 2, 3, -1, -2]))
        start = draw(st.one_of(st.none(), st.integers(-n, n)))
        stop = draw(st.one_of(st.none(), st.integers(-n, n)))
        index.append(slice(start, stop, step))
    arr = base[tuple(index)] if index else base  # base[()] of a 0-d array is a scalar
    if draw(st.booleans()) and arr.ndim >= 2:
        perm = draw(st.permutations(range(arr.ndim)))
        arr = arr.transpose(perm)
    return arr


class _AI:
    def __init__(self, arr):
        self._arr = arr

    @property
    def __array_interface__(self):
        return self._arr.__array_interface__


def _check(t, arr, shared=True):
    assert t.shape == arr.shape
    assert t.dtype == arr.dtype.name
    assert t.size == arr.size
    assert t.nbytes == arr.nbytes
    if shared:
        assert_strides_equivalent(t.strides, arr)
        if arr.size:
            assert t.data_ptr == arr.ctypes.data
    if arr.size:
        assert t.is_c_contiguous == arr.flags.c_contiguous
        assert t.is_f_contiguous == arr.flags.f_contiguous
    assert t.tolist() == arr.tolist()


@given(sliced_arrays())
def test_roundtrip_dlpack(arr):
    t = dlbridge.from_dlpack(arr)
    _check(t, arr)
    back = np.from_dlpack(t)
    np.testing.assert_array_equal(back, arr, strict=True)
    if arr.size:
        assert back.ctypes.data == arr.ctypes.data
    legacy = dlbridge.from_dlpack(t.__dlpack__())  # legacy capsule route
    _check(legacy, arr)
    assert legacy.readonly


@given(sliced_arrays())
def test_roundtrip_buffer_protocol(arr):
    t = dlbridge.from_dlpack(memoryview(arr))
    _check(t, arr)
    back = np.asarray(memoryview(t))
    np.testing.assert_array_equal(back, arr, strict=True)


@given(sliced_arrays())
def test_roundtrip_array_interface(arr):
    t = dlbridge.from_dlpack(_AI(arr))
    _check(t, arr)
    back = np.asarray(t)
    np.testing.assert_array_equal(back, arr, strict=True)
    if arr.size:
        assert back.ctypes.data == arr.ctypes.data


@given(sliced_arrays(), st.sampled_from(["C", "F"]))
def test_copy_matches(arr, order):
    t = dlbridge.from_dlpack(arr)
    c = t.copy(order=order)
    assert c.is_copied and not c.readonly
    assert c.is_c_contiguous if order == "C" else c.is_f_contiguous
    back = np.from_dlpack(c)
    np.testing.assert_array_equal(back, arr, strict=True)
    assert (back.flags.c_contiguous if order == "C" else back.flags.f_contiguous)
    c2 = dlbridge.from_dlpack(arr, copy=True)
    assert c2.is_c_contiguous
    np.testing.assert_array_equal(np.from_dlpack(c2), arr, strict=True)


@given(sliced_arrays())
def test_exported_capsule_describes_same_memory(arr):
    from dlpack_ctypes import inspect_capsule

    t = dlbridge.from_dlpack(arr)
    info = inspect_capsule(t.__dlpack__(max_version=(1, 3)))
    assert info["shape"] == arr.shape
    if arr.ndim:
        assert info["strides"] is not None
    if arr.size:
        assert info["data_ptr"] == arr.ctypes.data
    if arr.ndim:
        assert_strides_equivalent(info["strides"], arr)


def _ref_contiguous(shape, strides, order):
    """Reference: dense in the given order, ignoring dims of extent <= 1."""
    dims = [(n, s) for n, s in zip(shape, strides) if n > 1]
    if order == "C":
        dims = dims[::-1]
    expected = 1
    for n, s in dims:
        if s != expected:
            return False
        expected *= n
    return True


@st.composite
def raw_layouts(draw):
    ndim = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim)))
    kind = draw(st.sampled_from(["C", "F", "random"]))
    if kind == "C":
        strides = list(c_strides(shape))
    elif kind == "F":
        strides = list(c_strides(shape[::-1]))[::-1]
    else:
        strides = draw(st.lists(st.integers(-7, 7), min_size=ndim, max_size=ndim))
    # strides of extent-1 dims are meaningless: make them junk sometimes (C4)
    for i, n in enumerate(shape):
        if n == 1 and draw(st.booleans()):
            strides[i] = draw(st.integers(-1000, 1000))
    return shape, tuple(strides)


@given(raw_layouts(), st.sampled_from(["int16", "float32", "complex128", "bool"]))
def test_raw_capsule_layouts(layout, dtype):  # C4 C5 C6
    from dlpack_ctypes import FakeManagedTensor

    shape, strides = layout
    lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    span = hi - lo + 1
    buf = make(dtype, (span,))
    itemsize = buf.itemsize
    view = np.lib.stride_tricks.as_strided(
        buf[-lo:], shape=shape, strides=tuple(s * itemsize for s in strides)
    )
    fake = FakeManagedTensor(data=buf, shape=shape, strides=strides, dtype=dtype,
                             byte_offset=-lo * itemsize)
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.shape == shape
    assert t.data_ptr == buf.ctypes.data - lo * itemsize
    for n, got, want in zip(shape, t.strides, strides):
        if n > 1:
            assert got == want
    assert t.is_c_contiguous == _ref_contiguous(shape, strides, "C")
    assert t.is_f_contiguous == _ref_contiguous(shape, strides, "F")
    assert t.tolist() == view.tolist()
    np.testing.assert_array_equal(np.from_dlpack(t), view, strict=True)
    np.testing.assert_array_equal(np.from_dlpack(t.copy()), view, strict=True)
    del t
    assert fake.finalize() == 1
