"""polars <-> dlbridge, through the Arrow PyCapsule interface (issue 4, item 3).

Peer facts this file relies on (polars 2.1): a ``Series`` offers ``__arrow_c_stream__`` only (no
``__dlpack__``, no ``__arrow_c_array__``); its numeric data without nulls is one buffer that
``to_numpy(allow_copy=False)`` also hands out; booleans are bit-packed; ``pl.Series(obj)`` and
``pl.DataFrame({...: obj})`` read objects that offer ``__arrow_c_stream__``; ``Array(dtype, n)``
is Arrow's FixedSizeList; polars keeps ``arrow.fixed_shape_tensor`` as an extension type.
"""

from __future__ import annotations

import numpy as np
import pytest

pl = pytest.importorskip("polars")

import dlbridge  # noqa: E402

NUMERIC = {
    "int8": pl.Int8, "int16": pl.Int16, "int32": pl.Int32, "int64": pl.Int64,
    "uint8": pl.UInt8, "uint16": pl.UInt16, "uint32": pl.UInt32, "uint64": pl.UInt64,
    "float32": pl.Float32, "float64": pl.Float64,
}


def polars_address(s) -> int:
    """Where polars keeps a null-free numeric Series' values (its own zero-copy view)."""
    return s.to_numpy(allow_copy=False).ctypes.data


def tensor_address(t) -> int:
    return np.from_dlpack(t).ctypes.data


# --------------------------------------------------------------------------------------------
# polars -> dlbridge
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", sorted(NUMERIC))
def test_numeric_series_import_zero_copy_read_only(dtype):
    values = np.arange(7).astype(dtype)
    s = pl.Series("x", values, dtype=NUMERIC[dtype])
    t = dlbridge.from_dlpack(s)
    assert (t.shape, t.dtype.name, t.readonly, t.is_copied) == ((7,), dtype, True, False)
    assert tensor_address(t) == polars_address(s)
    np.testing.assert_array_equal(np.from_dlpack(t), values)
    with pytest.raises(ValueError):
        np.from_dlpack(t)[0] = 1  # read-only memory stays read-only downstream


def test_import_keeps_the_series_memory_alive(collect):
    s = pl.Series(np.arange(100_000, dtype=np.int64))
    t = dlbridge.from_dlpack(s)
    del s
    collect()
    assert np.from_dlpack(t)[-1] == 99_999


def test_sliced_series_applies_the_offset():
    s = pl.Series(np.arange(10, dtype=np.int64))[3:7]
    t = dlbridge.from_dlpack(s, copy=False)
    assert t.tolist() == [3, 4, 5, 6]
    assert tensor_address(t) == polars_address(s)


def test_nulls_raise_buffer_error_naming_the_fix():  # C52
    s = pl.Series("n", [1.0, None, 3.0], dtype=pl.Float32)
    with pytest.raises(BufferError, match="1 null value") as err:
        dlbridge.from_dlpack(s)
    assert "fill_null" in str(err.value) and "unsupported" not in str(err.value)
    filled = dlbridge.from_arrow(s, fill_null=0)
    assert filled.tolist() == [1.0, 0.0, 3.0] and not filled.readonly
    values, valid = dlbridge.from_arrow(s, with_validity=True)
    assert np.from_dlpack(valid).tolist() == [True, False, True]
    assert np.from_dlpack(values)[[0, 2]].tolist() == [1.0, 3.0]


def test_booleans_are_unpacked_by_a_copy():
    s = pl.Series([True, False, True, True])
    t = dlbridge.from_dlpack(s)
    assert (t.dtype.name, t.tolist(), t.readonly) == ("bool", [True, False, True, True], False)
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.from_dlpack(s, copy=False)


def test_several_chunks_are_joined_into_a_copy():
    s = pl.concat(
        [pl.Series([1, 2], dtype=pl.Int64), pl.Series([3], dtype=pl.Int64)], rechunk=False
    )
    assert s.n_chunks() == 2
    t = dlbridge.from_dlpack(s)
    assert (t.tolist(), t.is_copied, t.readonly) == ([1, 2, 3], True, False)
    with pytest.raises(BufferError, match="2 chunks"):
        dlbridge.from_dlpack(s, copy=False)


def test_fixed_size_array_column_is_a_2d_tensor():
    s = pl.Series([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=pl.Array(pl.Float64, 3))
    t = dlbridge.from_dlpack(s, copy=False)
    assert (t.shape, t.readonly) == ((2, 3), True)
    np.testing.assert_array_equal(np.from_dlpack(t), [[1, 2, 3], [4, 5, 6]])


def test_dataframe_column_to_numpy_and_torch():
    torch = pytest.importorskip("torch")
    df = pl.DataFrame({"a": np.arange(4, dtype=np.float32), "b": np.arange(4, dtype=np.int16)})
    a = dlbridge.to_numpy(df["a"])
    assert a.ctypes.data == polars_address(df["a"]) and not a.flags.writeable
    b = dlbridge.convert(df["b"], torch)
    assert b.dtype == torch.int16 and b.tolist() == [0, 1, 2, 3]


def test_empty_series():
    t = dlbridge.from_dlpack(pl.Series([], dtype=pl.Float64))
    assert (t.shape, t.dtype.name, t.readonly) == ((0,), "float64", True)


# --------------------------------------------------------------------------------------------
# dlbridge -> polars
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", sorted(NUMERIC))
def test_1d_tensor_becomes_a_series_zero_copy(dtype):
    a = np.arange(5).astype(dtype)
    s = pl.Series("x", dlbridge.from_dlpack(a))
    assert s.dtype == NUMERIC[dtype] and s.to_list() == a.tolist()
    assert polars_address(s) == a.ctypes.data


def test_series_keeps_the_tensor_memory_alive(collect):
    a = np.arange(50_000, dtype=np.float64)
    s = pl.Series(dlbridge.from_dlpack(a))
    del a
    collect()
    assert s[-1] == 49_999.0


def test_nd_tensor_becomes_a_fixed_shape_tensor_series():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    s = pl.Series("t", dlbridge.from_dlpack(a))
    assert len(s) == 2 and "arrow.fixed_shape_tensor" in str(s.dtype)
    assert s.to_list()[1] == a[1].ravel().tolist()
    back = dlbridge.from_dlpack(s)  # and back, with the cell shape from the extension
    assert back.shape == (2, 3, 4)
    np.testing.assert_array_equal(np.from_dlpack(back), a)


def test_tensor_as_a_dataframe_column():
    df = pl.DataFrame({"a": dlbridge.from_dlpack(np.arange(3, dtype=np.int32))})
    assert df.schema["a"] == pl.Int32 and df["a"].to_list() == [0, 1, 2]


def test_round_trip_keeps_the_pointer():
    a = np.arange(8, dtype=np.float64)
    back = dlbridge.from_dlpack(pl.Series(dlbridge.from_dlpack(a)))
    assert tensor_address(back) == a.ctypes.data and back.tolist() == a.tolist()
