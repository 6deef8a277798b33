"""Interop with PyArrow through DLPack, both directions.

Peer facts (pyarrow 26, checked on this machine):
- ``pa.Array.__dlpack__`` exports primitive numeric arrays without nulls; legacy by default,
  versioned 1.3 with ``max_version``; sets READ_ONLY (Arrow memory is immutable); a sliced
  array's capsule points at the slice. Booleans (bit-packed) and arrays with nulls are refused
  with ``ArrowTypeError`` (a TypeError subclass).
- ``pa.Tensor.__dlpack__`` exists too (flags 0).
- ``pa.Tensor.from_dlpack(x)`` calls ``__dlpack__(max_version=(1, 3), dl_device=None,
  copy=None)``, takes any non-negative strides, honours READ_ONLY (``is_mutable`` False), and
  refuses negative strides, bool and complex (``ArrowInvalid``).
- ``pa.Array.from_dlpack(x)`` only takes 1-d contiguous tensors.
"""

from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

import dlbridge  # noqa: E402
from dlb_testing import (  # noqa: E402
    LAYOUTS,
    assert_strides_equivalent,
    assert_values_equal,
    import_or_peer_limitation,
    make,
)
from dlpack_ctypes import FLAG_READ_ONLY, inspect_capsule  # noqa: E402

ARROW_PRIMITIVES = [
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
]


def _values_address(arr) -> int:
    return arr.buffers()[1].address + arr.offset * np.dtype(arr.type.to_pandas_dtype()).itemsize


# --------------------------------------------------------------------------------------------
# pyarrow -> dlbridge
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ARROW_PRIMITIVES)
@pytest.mark.parametrize("sl", [None, (2, 5), (0, 0), (9, 1)], ids=["whole", "slice", "empty", "last"])
def test_pyarrow_array_to_dlbridge(dtype, sl):
    ref = make(dtype, (10,))
    arr = pa.array(ref)
    if sl is not None:
        arr = arr.slice(*sl)
        ref = ref[sl[0]: sl[0] + sl[1]]
    t = dlbridge.from_dlpack(arr)
    assert t.shape == ref.shape
    assert t.dtype == dtype
    assert t.readonly is True  # Arrow sets READ_ONLY
    if len(ref):
        assert t.data_ptr == _values_address(arr)  # zero-copy, slice offset applied
    n = np.from_dlpack(t)
    if len(ref):  # (NumPy ignores READ_ONLY when data is NULL, as Arrow sends for empty arrays)
        assert not n.flags.writeable  # C14
    assert_values_equal(n, ref)


def test_pyarrow_array_capsule_read_only_flag():  # C12
    info = inspect_capsule(pa.array([1, 2, 3]).__dlpack__(max_version=(1, 0)))
    assert info["flags"] & FLAG_READ_ONLY
    t = dlbridge.from_dlpack(pa.array([1, 2, 3]))
    with pytest.raises(BufferError):
        t.__dlpack__()  # C13: read-only never through legacy


def test_pyarrow_bool_bitpacked_is_copied_or_refused():  # C24
    arr = pa.array([True, False, True, True, False, False, False, False, True, False])
    try:
        t = dlbridge.from_dlpack(arr)
    except (BufferError, TypeError):
        return  # DLPack cannot describe bit-packed booleans: refusing is fine
    # ... or an unpacking copy, which must be exact and say it is a copy
    assert t.dtype == "bool"
    assert t.is_copied
    assert t.tolist() == arr.to_pylist()
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(arr, copy=False)


def test_pyarrow_nulls_refused():  # C52 (default: refuse)
    with pytest.raises((BufferError, TypeError)) as ei:
        dlbridge.from_dlpack(pa.array([1.0, None, 3.0]))
    assert "null" in str(ei.value).lower()


def test_pyarrow_strings_refused():
    with pytest.raises((BufferError, TypeError)):
        dlbridge.from_dlpack(pa.array(["a", "b"]))


def test_pyarrow_keeps_array_alive(collect):
    arr = pa.array(np.arange(1000, dtype=np.int64))
    t = dlbridge.from_dlpack(arr)
    del arr
    collect()
    assert t.tolist()[-1] == 999


@pytest.mark.parametrize("name", sorted(set(LAYOUTS) - {"neg_cols", "neg_rows"}))
def test_pyarrow_tensor_to_dlbridge(name):
    a = LAYOUTS[name]("float64")
    pt = pa.Tensor.from_numpy(a)
    t = dlbridge.from_dlpack(pt)
    assert t.shape == a.shape
    assert_strides_equivalent(t.strides, a)
    if a.size:
        assert t.data_ptr == a.ctypes.data
    assert_values_equal(np.from_dlpack(t), a)


# --------------------------------------------------------------------------------------------
# dlbridge -> pyarrow
# --------------------------------------------------------------------------------------------
def test_dlbridge_to_pyarrow_tensor(np_dtype, layout):  # C1 C3 C4 C5 C8 C9 C10
    a = LAYOUTS[layout](np_dtype)
    t = dlbridge.from_dlpack(memoryview(a))
    r = import_or_peer_limitation("pyarrow.Tensor", pa.Tensor.from_dlpack, t, a)
    assert tuple(r.shape) == a.shape
    n = r.to_numpy()
    assert_values_equal(n, a)
    if a.size:
        assert n.ctypes.data == a.ctypes.data  # zero-copy
        for dim, got, want in zip(a.shape, r.strides, a.strides):
            if dim > 1:
                assert got == want


@pytest.mark.parametrize("dtype", ARROW_PRIMITIVES)
@pytest.mark.parametrize("name", ["vector", "offset_1d", "empty"])
def test_dlbridge_to_pyarrow_array(dtype, name):
    a = {"vector": lambda: make(dtype, (10,)), "empty": lambda: make(dtype, (0,))}.get(
        name, lambda: LAYOUTS[name](dtype)
    )()
    t = dlbridge.from_dlpack(a)
    r = import_or_peer_limitation("pyarrow.Array", pa.Array.from_dlpack, t, a)
    assert len(r) == len(a)
    n = r.to_numpy(zero_copy_only=True)
    assert_values_equal(n, a)
    if len(a):
        assert n.ctypes.data == a.ctypes.data


def test_dlbridge_readonly_to_pyarrow_stays_immutable():  # C12 C14
    a = make("float32", (2, 3))
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    r = pa.Tensor.from_dlpack(t)
    assert r.is_mutable is False
    assert r.to_numpy().ctypes.data == a.ctypes.data
    w = pa.Tensor.from_dlpack(dlbridge.from_dlpack(make("float32", (2, 3))))
    assert w.is_mutable is True


def test_dlbridge_negative_strides_to_pyarrow():  # C1
    a = np.arange(12.0).reshape(3, 4)[:, ::-1]
    t = dlbridge.from_dlpack(a)
    with pytest.raises(Exception) as ei:  # pyarrow's limitation, reported cleanly
        pa.Tensor.from_dlpack(t)
    assert "negative" in str(ei.value).lower()
    r = pa.Tensor.from_dlpack(t.copy())  # C1: the copy route is correct
    assert_values_equal(r.to_numpy(), a)


def test_pyarrow_roundtrip_through_dlbridge():
    arr = pa.array(np.arange(20, dtype=np.float32)).slice(5, 10)
    t = dlbridge.from_dlpack(arr)
    back = pa.Tensor.from_dlpack(t)  # read-only tensor, versioned capsule: accepted
    assert back.is_mutable is False
    np.testing.assert_array_equal(back.to_numpy(), np.arange(5, 15, dtype=np.float32))
    assert back.to_numpy().ctypes.data == _values_address(arr)
    back_arr = pa.Array.from_dlpack(t)
    assert back_arr.equals(arr)
