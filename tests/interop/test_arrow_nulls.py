"""``dlbridge.from_arrow``: Arrow nulls filled or reported as a validity mask (C52), and the
``fixed_shape_tensor`` ``dim_names`` kept as ``Tensor.dim_names``, with real pyarrow,
nanoarrow and arro3-core producers. The reference for filled values is NumPy's
``np.where(valid, arr.to_numpy(zero_copy_only=False), fill)``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

import dlbridge  # noqa: E402
from dlb_testing import assert_values_equal  # noqa: E402

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]


def reference(arr, fill, dtype) -> np.ndarray:
    """What filling must give, computed by NumPy from pyarrow's own conversion."""
    valid = ~arr.is_null().to_numpy(zero_copy_only=False)
    values = arr.to_numpy(zero_copy_only=False)
    return np.where(valid, values, fill).astype(dtype)


def fsl(values, size, mask=None, value_type=pa.int32()):  # noqa: B008 - an immutable type
    """A FixedSizeList array with null cells where ``mask`` is True."""
    child = pa.array(values, value_type)
    return pa.FixedSizeListArray.from_arrays(
        child, size, mask=None if mask is None else pa.array(mask)
    )


# ----------------------------------------------------------------------------- the default
def test_default_is_from_dlpack_and_the_error_names_from_arrow():
    arr = pa.array([1, None, 3], pa.int32())
    for imp in (dlbridge.from_dlpack, dlbridge.from_arrow):
        with pytest.raises(BufferError) as ei:
            imp(arr)
        assert "dlbridge.from_arrow(x, fill_null=0)" in str(ei.value)
        assert "pyarrow.compute.fill_null" in str(ei.value)
    clean = pa.array(np.arange(5, dtype=np.float32))
    t = dlbridge.from_arrow(clean)
    assert t.readonly and not t.is_copied and t.data_ptr == clean.buffers()[1].address


def test_not_arrow_is_a_type_error_naming_from_dlpack():
    with pytest.raises(TypeError, match="dlbridge.from_dlpack"):
        dlbridge.from_arrow(np.arange(3))
    with pytest.raises(TypeError, match="from_dlpack"):
        dlbridge.from_arrow([1, 2])


# ------------------------------------------------------------------------------- fill_null
@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_fill_matches_numpy_on_sliced_arrays(dtype):
    arr = pa.array([1, None, 3, 4, None, 6, 7, None], pa.from_numpy_dtype(np.dtype(dtype))).slice(
        1, 6
    )
    t = dlbridge.from_arrow(arr, fill_null=9)
    assert t.is_copied and not t.readonly and t.is_c_contiguous
    assert_values_equal(np.from_dlpack(t), reference(arr, 9, dtype))
    np.from_dlpack(t)[0] = 0  # ours to write


def test_no_nulls_stays_zero_copy_even_with_fill():
    arr = pa.array(np.arange(6, dtype=np.int64)).slice(2)
    t = dlbridge.from_arrow(arr, fill_null=0, copy=False)
    assert t.readonly and t.data_ptr == arr.buffers()[1].address + 2 * 8
    # nulls only outside the slice do not count
    holes = pa.array([None, 1, 2, None], pa.int16()).slice(1, 2)
    assert dlbridge.from_arrow(holes, fill_null=5, copy=False).tolist() == [1, 2]


def test_copy_false_with_nulls_to_fill_is_a_buffer_error():
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.from_arrow(pa.array([1.0, None]), fill_null=0.0, copy=False)


def test_copy_true_always_copies():
    arr = pa.array(np.arange(4, dtype=np.float64))
    t = dlbridge.from_arrow(arr, fill_null=0, copy=True)
    assert t.is_copied and not t.readonly and t.data_ptr != arr.buffers()[1].address


@pytest.mark.parametrize(
    "value, dtype, exc",
    [
        (1.5, pa.int32(), ValueError),
        (300, pa.uint8(), ValueError),
        (-1, pa.uint32(), ValueError),
        (2**63, pa.int64(), ValueError),
        (1e300, pa.float32(), ValueError),
        (2, pa.bool_(), ValueError),
        (0.5, pa.bool_(), ValueError),
        ("0", pa.int32(), TypeError),
        ([0], pa.float64(), TypeError),
    ],
)
def test_unrepresentable_fill_values_are_refused(value, dtype, exc):
    with pytest.raises(exc):
        dlbridge.from_arrow(pa.array([None], dtype), fill_null=value)
    with pytest.raises(exc):  # refused even when there is nothing to fill
        dlbridge.from_arrow(pa.array([], dtype), fill_null=value)


def test_representable_edge_values():
    assert dlbridge.from_arrow(pa.array([None], pa.uint64()), fill_null=2**64 - 1).tolist() == [
        2**64 - 1
    ]
    assert dlbridge.from_arrow(pa.array([None], pa.int8()), fill_null=np.int8(-128)).tolist() == [
        -128
    ]
    assert (
        dlbridge.from_arrow(pa.array([None, 1.0], pa.float32()), fill_null=float("nan")).tolist()[1]
        == 1.0
    )
    assert dlbridge.from_arrow(pa.array([None], pa.float64()), fill_null=3).tolist() == [3.0]


def test_bit_packed_bools_fill_and_mask():
    arr = pa.array([True, None, False, None, True, True, None, False, True]).slice(1)
    t = dlbridge.from_arrow(arr, fill_null=True)
    assert t.dtype.name == "bool"
    assert_values_equal(np.from_dlpack(t), reference(arr, True, bool))
    values, valid = dlbridge.from_arrow(arr, with_validity=True)
    assert (
        np.from_dlpack(valid).tolist() == (~arr.is_null().to_numpy(zero_copy_only=False)).tolist()
    )


def test_null_cells_fill_the_whole_cell_and_child_nulls_count():
    arr = fsl([1, 2, 3, None, 5, 6, 7, 8], 2, mask=[False, True, False, False])
    t = dlbridge.from_arrow(arr, fill_null=-1)
    assert np.from_dlpack(t).tolist() == [[1, 2], [-1, -1], [5, 6], [7, 8]]
    values, valid = dlbridge.from_arrow(arr, with_validity=True)
    assert np.from_dlpack(valid).tolist() == [
        [True, True],
        [False, False],
        [True, True],
        [True, True],
    ]
    assert values.readonly and values.data_ptr == arr.values.buffers()[1].address
    # child nulls inside a valid cell
    child_nulls = fsl([1, None, 3, 4], 2)
    assert dlbridge.from_arrow(child_nulls, fill_null=0).tolist() == [[1, 0], [3, 4]]
    # both offsets: a slice of the list over a sliced child
    sliced = fsl([9, 9, 1, None, 3, 4, 5, 6], 2, mask=[False, False, True, False]).slice(1, 3)
    assert dlbridge.from_arrow(sliced, fill_null=0).tolist() == [[1, 0], [0, 0], [5, 6]]


def test_nested_fixed_size_lists_with_nulls_at_each_level():
    inner = pa.FixedSizeListArray.from_arrays(
        pa.array([1, 2, None, 4, 5, 6, 7, 8], pa.int64()),
        2,
        mask=pa.array([False, False, False, True]),
    )
    outer = pa.FixedSizeListArray.from_arrays(inner, 2, mask=pa.array([True, False]))
    t = dlbridge.from_arrow(outer, fill_null=0)
    assert t.tolist() == [[[0, 0], [0, 0]], [[5, 6], [0, 0]]]


@pytest.mark.parametrize("perm", [None, [1, 0], [0, 2, 1], [2, 0, 1]])
def test_fixed_shape_tensor_null_cells(perm):
    physical = [2, 3, 4][: 2 if perm is None or len(perm) == 2 else 3]
    n = int(np.prod(physical))
    ty = pa.fixed_shape_tensor(pa.float32(), physical, permutation=perm)
    storage = fsl(
        np.arange(3 * n, dtype=np.float32), n, mask=[False, True, False], value_type=pa.float32()
    )
    arr = pa.ExtensionArray.from_storage(ty, storage)
    with pytest.raises(BufferError, match="null cell"):
        dlbridge.from_dlpack(arr)
    values, valid = dlbridge.from_arrow(arr, with_validity=True)
    t = dlbridge.from_arrow(arr, fill_null=-1)
    full = np.arange(3 * n, dtype=np.float32).reshape(3, *physical)
    if perm is not None:
        full = full.transpose(0, *(p + 1 for p in perm))
    want = full.copy()
    want[1] = -1
    assert t.shape == values.shape == valid.shape == full.shape and t.is_c_contiguous
    assert_values_equal(np.from_dlpack(t), want)
    mask = np.from_dlpack(valid)
    assert mask[0].all() and not mask[1].any() and mask[2].all()
    assert_values_equal(np.from_dlpack(values)[[0, 2]], full[[0, 2]])


def test_chunked_arrays_fill_and_join_masks():
    chunked = pa.chunked_array(
        [
            pa.array([1, None], pa.int32()),
            pa.array([3, 4], pa.int32()),
            pa.array([None], pa.int32()),
        ]
    )
    t = dlbridge.from_arrow(chunked, fill_null=0)
    assert t.tolist() == [1, 0, 3, 4, 0]
    values, valid = dlbridge.from_arrow(chunked, with_validity=True)
    assert values.is_copied and np.from_dlpack(valid).tolist() == [True, False, True, True, False]
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.from_arrow(chunked, fill_null=0, copy=False)
    one = pa.chunked_array([pa.array([1.0, None])])
    values, valid = dlbridge.from_arrow(one, with_validity=True, copy=False)
    assert values.readonly and valid.tolist() == [True, False]


# --------------------------------------------------------------------------- with_validity
def test_with_validity_is_zero_copy_and_all_true_without_nulls():
    arr = pa.array([1.0, None, 3.0]).slice(1)
    values, valid = dlbridge.from_arrow(arr, with_validity=True, copy=False)
    assert values.readonly and values.data_ptr == arr.buffers()[1].address + 8
    assert valid.dtype.name == "bool" and valid.shape == values.shape
    assert valid.tolist() == [False, True] and values.tolist()[1] == 3.0
    clean = pa.array(np.arange(4, dtype=np.int8))
    values, valid = dlbridge.from_arrow(clean, with_validity=True)
    assert valid.tolist() == [True] * 4 and values.data_ptr == clean.buffers()[1].address


def test_with_validity_and_fill_together():
    values, valid = dlbridge.from_arrow(
        pa.array([None, 2], pa.int64()), fill_null=7, with_validity=True
    )
    assert values.tolist() == [7, 2] and valid.tolist() == [False, True]


# ------------------------------------------------------------------------- other producers
def test_nanoarrow_and_arro3_producers():
    na = pytest.importorskip("nanoarrow")
    ac = pytest.importorskip("arro3.core")
    src = na.c_array([1, None, 3], na.int32())
    assert dlbridge.from_arrow(src, fill_null=-1).tolist() == [1, -1, 3]
    _, valid = dlbridge.from_arrow(na.Array(src), with_validity=True)
    assert valid.tolist() == [True, False, True]
    with pytest.raises(BufferError, match="fill_null"):
        dlbridge.from_dlpack(src)
    x = ac.Array.from_arrow(pa.array([None, 2.5, None]))
    assert dlbridge.from_arrow(x, fill_null=0.0).tolist() == [0.0, 2.5, 0.0]
    chunked = ac.ChunkedArray.from_arrow(pa.chunked_array([[1, None], [None, 4]]))
    assert dlbridge.from_arrow(chunked, fill_null=0).tolist() == [1, 0, 0, 4]


# ------------------------------------------------------------------------ property: fill
DTYPES = st.sampled_from(INTS + FLOATS + ["bool"])


@st.composite
def arrays_with_nulls(draw):
    dtype = draw(DTYPES)
    n = draw(st.integers(0, 40))
    if dtype == "bool":
        element = st.booleans()
    elif dtype.startswith("float"):
        element = st.floats(-1000, 1000, width=16)
    else:
        info = np.iinfo(dtype)
        element = st.integers(max(int(info.min), -(2**31)), min(int(info.max), 2**31))
    values = draw(st.lists(st.one_of(st.none(), element), min_size=n, max_size=n))
    arr = pa.array(values, pa.bool_() if dtype == "bool" else pa.from_numpy_dtype(np.dtype(dtype)))
    start = draw(st.integers(0, n))
    arr = arr.slice(start, draw(st.integers(0, n - start)))
    fill = draw(st.booleans()) if dtype == "bool" else draw(element)
    return arr, dtype, fill


@given(arrays_with_nulls())
def test_fill_equals_numpy_reference(case):
    arr, dtype, fill = case
    t = dlbridge.from_arrow(arr, fill_null=fill)
    assert_values_equal(np.from_dlpack(t), reference(arr, fill, dtype))
    _, valid = dlbridge.from_arrow(arr, with_validity=True)
    assert (
        np.from_dlpack(valid).tolist() == (~arr.is_null().to_numpy(zero_copy_only=False)).tolist()
    )


# =============================================================================== dim_names
def fst(dim_names, permutation=None, physical=(2, 3, 4), rows=2):
    n = int(np.prod(physical))
    ty = pa.fixed_shape_tensor(
        pa.float32(), list(physical), dim_names=dim_names, permutation=permutation
    )
    storage = fsl(np.arange(rows * n, dtype=np.float32), n, value_type=pa.float32())
    return pa.ExtensionArray.from_storage(ty, storage)


def test_dim_names_are_logical_and_round_trip():
    arr = fst(["C", "H", "W"])
    t = dlbridge.from_dlpack(arr)
    assert t.dim_names == ("", "C", "H", "W")
    back = pa.array(t)
    assert (
        back.type.dim_names == ["C", "H", "W"]
        and back.storage.values.buffers()[1].address == t.data_ptr
    )
    assert dlbridge.Tensor(arr).dim_names == t.dim_names
    assert dlbridge.from_arrow(arr).dim_names == t.dim_names


@pytest.mark.parametrize("perm", [[2, 1, 0], [0, 2, 1], [2, 0, 1]])
def test_permuted_dim_names_follow_the_permutation(perm):
    """Spec: names_logical[i] = dim_names[permutation[i]]; export writes them back physical."""
    arr = fst(["a", "b", "c"], perm)
    t = dlbridge.from_dlpack(arr)
    assert t.dim_names == ("", *(["a", "b", "c"][p] for p in perm))
    back = pa.array(t)
    assert back.type.dim_names == ["a", "b", "c"]
    assert back.type.permutation == perm
    assert back.storage.values.buffers()[1].address == t.data_ptr


def test_dim_names_survive_copies_and_go_with_shape_changes():
    t = dlbridge.from_dlpack(fst(["C", "H", "W"], [2, 1, 0]))
    names = t.dim_names
    for kept in (
        t.copy(),
        t.copy("F"),
        t.contiguous(),
        t.to_device("cpu"),
        t.view("int32"),
        dlbridge.from_dlpack(t, copy=True),
    ):
        assert kept.dim_names == names
    # a C-order copy exports the same logical names, now without a permutation
    back = pa.array(t.contiguous())
    assert back.type.permutation is None and back.type.dim_names == ["W", "H", "C"]
    assert dlbridge.from_dlpack(pa.array(t.copy("F"))).dim_names == names
    # anything that changes the shape (here NumPy's slicing) starts without names
    assert dlbridge.from_dlpack(np.from_dlpack(t)[:, 0]).dim_names is None


def test_no_dim_names_elsewhere():
    assert dlbridge.from_dlpack(np.ones((2, 3))).dim_names is None
    assert dlbridge.from_dlpack(fst(None)).dim_names is None
    assert dlbridge.from_dlpack(pa.array([1.0])).dim_names is None
    assert pa.array(dlbridge.from_dlpack(np.ones((2, 3)))).type.dim_names is None


def test_chunked_fixed_shape_tensor_keeps_names_and_validity_has_them():
    arr = fst(["x", "y", "z"])
    chunked = pa.chunked_array([arr, arr])
    values, valid = dlbridge.from_arrow(chunked, with_validity=True)
    assert values.shape == (4, 2, 3, 4) and values.dim_names == valid.dim_names == (
        "",
        "x",
        "y",
        "z",
    )
