"""Hypothesis property tests for the two pyarrow fast paths: ``pa.array(tensor)``
(``Tensor.__arrow_array__``) and ``dlbridge.from_dlpack(pa_array)`` (pyarrow's own
``__dlpack__`` for integer and float arrays). Both must agree with pyarrow's own NumPy
conversions, stay zero-copy where Arrow can express the layout, and keep read-only data
read-only."""

from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dlbridge  # noqa: E402
from dlb_testing import assert_values_equal, make  # noqa: E402

PRIMITIVES = [
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
]


@st.composite
def sliced_1d(draw):
    dtype = draw(st.sampled_from(PRIMITIVES))
    n = draw(st.integers(0, 40))
    base = make(dtype, (n,))
    start = draw(st.integers(0, n))
    stop = draw(st.integers(start, n))
    step = draw(st.sampled_from([1, 1, 1, 2, 3, -1]))
    a = base[start:stop:step] if step > 0 else base[stop:start:-1] if start < stop else base[:0]
    a.flags.writeable = draw(st.booleans())
    return a


@given(sliced_1d())
def test_pa_array_of_a_tensor_equals_pa_array_of_numpy(a):
    t = dlbridge.from_dlpack(a)
    r = pa.array(t)
    assert r.type == pa.array(a).type and len(r) == len(a)
    n = r.to_numpy(zero_copy_only=False)
    assert not n.flags.writeable
    assert_values_equal(n, a)
    if len(a) and (a.strides[0] == a.itemsize or len(a) == 1):
        assert r.buffers()[1].address + r.offset * a.itemsize == a.ctypes.data
    if not a.flags.writeable:
        assert not r.buffers()[1].is_mutable


@given(st.sampled_from(PRIMITIVES), st.integers(0, 40), st.data())
def test_from_dlpack_of_a_pyarrow_array_equals_to_numpy(dtype, n, data):
    arr = pa.array(make(dtype, (n,)))
    offset = data.draw(st.integers(0, n))
    length = data.draw(st.integers(0, n - offset))
    arr = arr.slice(offset, length)
    t = dlbridge.from_dlpack(arr)
    ref = arr.to_numpy(zero_copy_only=True)
    assert t.dtype == dtype and t.shape == (length,) and t.readonly and not t.is_copied
    if length:
        assert t.data_ptr == ref.ctypes.data
    n_out = np.from_dlpack(t)
    assert not n_out.flags.writeable
    assert_values_equal(n_out, ref)
