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
    arr = base[tuple(index)]
    if draw(st.booleans()) and arr.ndim >= 2:
        perm = draw(st.permutations(range(arr.ndim)))
        arr = arr.transpose(perm)
    return arr


class _AI:
    def __init__(self, arr):
        self._arr = arr
        self.__array_interface__ = arr.__array_interface__


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
        assert_strides_equivalent(info["strides"], arr)
