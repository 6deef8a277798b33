"""pandas <-> dlbridge: Series (through pandas' NumPy view, or the Arrow PyCapsule stream for
other dtypes), DataFrames, and the read-only views pandas 3 hands out under copy-on-write.

Peer facts (pandas 3.1.1 with pyarrow 26, checked on this machine):
- ``Series`` and ``DataFrame`` offer ``__arrow_c_stream__`` only (no ``__dlpack__``, no
  ``__arrow_c_array__``); the stream needs pyarrow. A numeric Series' stream is zero-copy (its
  one buffer), booleans are bit-packed (a copy), and **NaN in a float Series becomes an Arrow
  null** (``from_pandas`` semantics), which DLPack cannot carry. A DataFrame's stream is a struct
  (one child per column), which is not a tensor.
- Copy-on-write is always on: ``.values`` and ``.to_numpy()`` of numeric data are read-only
  views of pandas' block (a single-dtype frame's ``to_numpy()`` is an F-order view).
- So dlbridge reads a Series of a NumPy number or bool dtype through ``to_numpy()`` (NaN kept,
  zero-copy, read-only) and any other Series through the stream; it refuses a DataFrame (a
  table), naming ``convert(df, "numpy")``, ``df.to_numpy()`` and one column.
- ``Series.from_arrow`` / ``DataFrame.from_arrow`` read Arrow PyCapsule objects (always a copy);
  ``Series.from_arrow`` turns the ``arrow.bool8`` extension dlbridge exports for bool into int8.
- ``pd.Series(a, copy=False)`` shares ``a``; writes through the Series go to ``a``, and a
  read-only ``a`` makes them raise ValueError.
"""

from __future__ import annotations

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")  # pandas' Arrow export needs it

import dlbridge  # noqa: E402
from dlb_testing import NUMPY_DTYPES  # noqa: E402

# bool and complex are tested apart.
NUMERIC = [d for d in NUMPY_DTYPES if d[0] in "iuf"]


def block_address(s) -> int:
    return s.to_numpy().ctypes.data


@pytest.mark.parametrize("dtype", NUMERIC)
def test_numeric_series_is_read_zero_copy_and_read_only(dtype):
    s = pd.Series(np.arange(7).astype(dtype))
    assert not hasattr(s, "__dlpack__") and hasattr(s, "__arrow_c_stream__")
    t = dlbridge.from_dlpack(s)
    assert (t.dtype.name, tuple(t.shape), t.readonly, t.is_copied) == (dtype, (7,), True, False)
    assert t.data_ptr == block_address(s)
    with pytest.raises(ValueError):
        np.from_dlpack(t)[0] = 1


def test_bool_series_is_read_in_place():  # the stream would bit-pack it (a copy)
    s = pd.Series([True, False, True])
    t = dlbridge.from_dlpack(s)
    assert (t.dtype.name, t.tolist(), t.is_copied) == ("bool", [True, False, True], False)
    assert t.data_ptr == block_address(s)


def test_nan_is_kept_though_the_stream_would_make_it_a_null():
    s = pd.Series([1.0, np.nan, 3.0])
    with pytest.raises(BufferError, match="null"):
        dlbridge.from_dlpack(pa.array(s))  # pandas' Arrow export makes NaN a null
    for y in (dlbridge.to_numpy(s), np.from_dlpack(dlbridge.from_dlpack(s, copy=False)),
              dlbridge.convert(s, "numpy")):
        assert np.isnan(y[1]) and y[[0, 2]].tolist() == [1.0, 3.0]
        assert y.ctypes.data == block_address(s) and not y.flags.writeable


def test_series_of_other_dtypes_take_the_arrow_stream():
    s = pd.Series([1, None, 3], dtype="Int64")  # nullable: the stream, nulls refused
    with pytest.raises(BufferError, match="fill_null"):
        dlbridge.from_dlpack(s)
    assert dlbridge.from_arrow(s, fill_null=0).tolist() == [1, 0, 3]
    a = pd.Series([1.5, 2.5], dtype="float64[pyarrow]")
    t = dlbridge.from_dlpack(a)
    assert t.tolist() == [1.5, 2.5] and t.readonly


def test_nullable_integers_name_the_fix():
    s = pd.Series([1, None, 3], dtype="Int64")
    with pytest.raises(BufferError, match="fill_null"):
        dlbridge.convert(s, "numpy")
    assert dlbridge.from_arrow(s, fill_null=0).tolist() == [1, 0, 3]


class _Legacy:
    """Asks ``t`` for a legacy capsule, as a pre-DLPack-1.0 consumer does."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, **kwargs):
        return self.t.__dlpack__()

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


@pytest.mark.parametrize("get", ["values", "to_numpy"])
def test_copy_on_write_views_stay_read_only(get):
    s = pd.Series(np.arange(6.0))
    v = s.values if get == "values" else s.to_numpy()
    assert not v.flags.writeable
    t = dlbridge.from_dlpack(v)
    assert t.readonly and t.data_ptr == v.ctypes.data
    assert not np.from_dlpack(t).flags.writeable
    # a legacy capsule could not say read-only (C13): a legacy request gets a writable copy
    assert np.from_dlpack(_Legacy(t)).ctypes.data != v.ctypes.data
    torch = pytest.importorskip("torch")
    y, plan = dlbridge.convert(v, "torch", report=True)
    assert plan.copies == 1 and y.data_ptr() != v.ctypes.data  # torch cannot hold read-only
    y[0] = 100.0
    assert s.iloc[0] == 0.0
    with pytest.raises(BufferError):
        dlbridge.convert(v, "torch", copy=False)
    del torch


def test_dataframe_is_refused_naming_the_ways_to_an_array():
    df = pd.DataFrame({"a": np.arange(4.0), "b": np.arange(4.0) * 2})
    with pytest.raises(BufferError, match=r'convert\(df, "numpy"\).*df.to_numpy\(\).*df\["name"\]'):
        dlbridge.from_dlpack(df)
    column = dlbridge.from_dlpack(df["b"])
    assert column.tolist() == [0.0, 2.0, 4.0, 6.0] and column.data_ptr == block_address(df["b"])
    np.testing.assert_array_equal(dlbridge.to_numpy(df), df.to_numpy())
    y = dlbridge.convert(df, "numpy")
    assert y.shape == (4, 2) and y.tolist() == df.to_numpy().tolist()
    assert not y.flags.writeable and y.ctypes.data == df.to_numpy().ctypes.data  # zero-copy view
    t = dlbridge.from_dlpack(df.to_numpy())
    assert t.readonly and t.is_f_contiguous


@pytest.mark.parametrize("dtype", NUMERIC + ["bool", "complex128"])
def test_dlbridge_to_pandas_series_shares_memory(dtype):
    a = np.arange(5).astype(dtype)
    y, plan = dlbridge.convert(a, "pandas", report=True)
    assert isinstance(y, pd.Series) and y.dtype == np.dtype(dtype) and plan.copies == 0
    assert block_address(y) == a.ctypes.data
    assert y.tolist() == a.tolist()


def test_dlbridge_to_pandas_dataframe_and_read_only_stays_read_only():
    a = np.arange(12.0).reshape(3, 4)
    df = dlbridge.convert(a, "pandas")
    assert (
        isinstance(df, pd.DataFrame) and df.shape == (3, 4) and df.to_numpy().tolist() == a.tolist()
    )
    ro = np.arange(4.0)
    ro.flags.writeable = False
    s = dlbridge.convert(ro, "pandas")
    with pytest.raises(ValueError, match="read-only"):
        s.iloc[0] = 9.0
    assert ro[0] == 0.0
    with pytest.raises(BufferError, match="0-d|1-D"):
        dlbridge.convert(np.float64(1.0).reshape(()), "pandas")


def test_series_from_arrow_consumer_of_a_tensor():
    t = dlbridge.from_dlpack(np.arange(5.0))
    s = pd.Series.from_arrow(t)
    assert s.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    b = pd.Series.from_arrow(dlbridge.from_dlpack(np.array([True, False])))
    assert b.dtype == np.int8  # peer fact: arrow.bool8 comes back as int8


def test_dlbridge_round_trip_of_a_series():
    s = pd.Series(np.arange(4.0))
    assert dlbridge.convert(s, "pandas") is s
    y = dlbridge.convert(s, "numpy")
    assert y.ctypes.data == block_address(s) and not y.flags.writeable
