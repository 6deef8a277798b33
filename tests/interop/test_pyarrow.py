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
- ``pa.Array.from_dlpack(x)`` only takes 1-d tensors of unit stride (not even one element of
  another stride), honours READ_ONLY (immutable buffers) and refuses bool.
- ``pa.array(obj, type=None)`` asks ``obj.__arrow_array__(type=type)`` before the PyCapsule
  interface, refuses ``mask``/``size`` with it, and casts a result whose type differs; its own
  cast after ``__arrow_c_device_array__`` is broken in pyarrow 26 (AttributeError).
- ``pa.Array.__dlpack__()`` (keyword-only arguments) without ``max_version`` hands out a legacy
  capsule of the immutable memory: torch imports it writable, NumPy read-only.
- ``pa.Array.__dlpack__`` of an empty array has a NULL data pointer (NumPy then ignores
  READ_ONLY), so dlbridge imports empty pyarrow arrays through the Arrow interface.
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
@pytest.mark.parametrize(
    "sl", [None, (2, 5), (0, 0), (9, 1)], ids=["whole", "slice", "empty", "last"]
)
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
    assert t.readonly
    # C13: read-only never through legacy zero-copy: a legacy request gets a writable copy
    assert inspect_capsule(t.__dlpack__())["data_ptr"] != t.data_ptr
    with pytest.raises(BufferError, match="max_version"):
        t.__dlpack__(copy=False)


def test_pyarrow_legacy_capsule_imports_read_only():  # C13
    # pyarrow hands out a legacy capsule of its immutable memory (which cannot say read-only),
    # and a consumer that trusts legacy capsules to be writable writes into it: torch does.
    torch = pytest.importorskip("torch")
    victim = pa.array([1.0, 2.0, 3.0])
    direct = torch.from_dlpack(victim.__dlpack__())
    direct[0] = 99.0
    assert victim[0].as_py() == 99.0
    # dlbridge keeps pyarrow's legacy capsules read-only: pyarrow is not one of the producers
    # whose legacy capsules may be written (mutable arrays exporting their own memory).
    assert "pyarrow" not in dlbridge._native._LEGACY_CAPSULES_WRITABLE
    arr = pa.array([1.0, 2.0, 3.0])
    cap = arr.__dlpack__()
    assert inspect_capsule(cap)["versioned"] is False
    t = dlbridge.from_dlpack(cap)
    assert t.readonly and t.data_ptr == arr.buffers()[1].address
    assert not dlbridge.to_numpy(t).flags.writeable


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


# --------------------------------------------------------------------------------------------
# pyarrow.array(tensor): Tensor.__arrow_array__
# --------------------------------------------------------------------------------------------
# 1-d unit-stride integer/float tensors go through pa.Array.from_dlpack; everything else through
# our __arrow_c_device_array__ capsules, as pa.array did before __arrow_array__ existed.
ONE_D = {
    "vector": lambda dt: make(dt, (10,)),
    "offset": lambda dt: make(dt, (12,))[3:9],  # an interior pointer
    "empty": lambda dt: make(dt, (0,)),
    "strided": lambda dt: make(dt, (12,))[::3],  # exported as a copy
    "one_strided": lambda dt: make(dt, (8,))[::8],  # one element, stride 8: zero-copy
    "reversed": lambda dt: make(dt, (6,))[::-1],  # exported as a copy
}


@pytest.mark.parametrize("dtype", ARROW_PRIMITIVES)
@pytest.mark.parametrize("name", sorted(ONE_D))
def test_pa_array_of_1d_tensors_matches_pa_array_of_numpy(dtype, name):
    a = ONE_D[name](dtype)
    t = dlbridge.from_dlpack(a)
    r = pa.array(t)
    assert type(r) is type(pa.array(a)) and r.type == pa.array(a).type
    assert r.null_count == 0 and len(r) == len(a)
    assert_values_equal(r.to_numpy(zero_copy_only=False), a)
    if len(a) and name not in ("strided", "reversed"):
        assert _values_address(r) == a.ctypes.data  # zero-copy
    assert r.equals(t.__arrow_array__())


@pytest.mark.parametrize("readonly", [True, False])
@pytest.mark.parametrize("make_a", [lambda: np.arange(8, dtype=np.float32),
                                    lambda: np.arange(8, dtype=np.float32)[::2],
                                    lambda: np.arange(8, dtype=np.int16).reshape(2, 4)],
                         ids=["dlpack_route", "strided", "2d"])
def test_pa_array_of_read_only_tensors_is_immutable(make_a, readonly):  # C12 C14
    a = make_a()
    a.flags.writeable = not readonly
    r = pa.array(dlbridge.from_dlpack(a))
    values = r.buffers()[-1]
    if readonly:
        assert not values.is_mutable
        assert not np.asarray(values).flags.writeable
    if a.ndim == 1:
        assert not r.to_numpy(zero_copy_only=False).flags.writeable
    else:
        assert not r.to_numpy_ndarray().flags.writeable


def test_pa_array_of_a_writable_tensor_is_like_pa_array_of_numpy():
    a = np.arange(4, dtype=np.float64)
    assert (
        pa.array(dlbridge.from_dlpack(a)).buffers()[1].is_mutable
        == pa.array(a).buffers()[1].is_mutable
    )


@pytest.mark.parametrize("make_a", [lambda: np.arange(1000, dtype=np.int64),
                                    lambda: np.arange(2000, dtype=np.int64)[::2],
                                    lambda: np.arange(1000, dtype=np.int64).reshape(250, 4)],
                         ids=["dlpack_route", "strided", "2d"])
def test_pa_array_keeps_the_tensor_memory_alive(collect, make_a):
    a = make_a()
    want = a.ravel().copy()
    t = dlbridge.from_dlpack(a)
    r = pa.array(t)
    del a, t
    collect()
    flat = (
        r.to_numpy(zero_copy_only=False) if r.type == pa.int64() else r.storage.flatten().to_numpy()
    )
    np.testing.assert_array_equal(flat, want)


@pytest.mark.parametrize("source, type_, expected", [
    (np.arange(3, dtype=np.float32), pa.float64(), [0.0, 1.0, 2.0]),
    (np.arange(3, dtype=np.float32), pa.int32(), [0, 1, 2]),
    (np.arange(3, dtype=np.int64), pa.float16(), [0.0, 1.0, 2.0]),
    (np.arange(3, dtype=np.int64)[::-1], pa.int8(), [2, 1, 0]),  # through the capsules
    (np.array([True, False, True]), pa.bool_(), [True, False, True]),  # requested of the export
])
def test_pa_array_type_is_honoured(source, type_, expected):
    t = dlbridge.from_dlpack(source)
    for r in (pa.array(t, type=type_), t.__arrow_array__(type=type_)):
        assert r.type == type_ and r.to_pylist() == expected


def test_pa_array_type_equal_to_the_export_stays_zero_copy():
    a = np.arange(5, dtype=np.uint16)
    t = dlbridge.from_dlpack(a)
    assert _values_address(t.__arrow_array__(type=pa.uint16())) == a.ctypes.data
    b = np.array([True, False])
    assert pa.array(dlbridge.from_dlpack(b), type=pa.int8()).buffers()[1].address == b.ctypes.data


def test_pa_array_lossy_type_raises_like_numpy():
    a = np.array([1.5, 2.0], dtype=np.float32)
    with pytest.raises(pa.ArrowInvalid) as want:
        pa.array(a, type=pa.int32())
    with pytest.raises(pa.ArrowInvalid) as got:
        pa.array(dlbridge.from_dlpack(a), type=pa.int32())
    assert str(got.value) == str(want.value)


def test_arrow_array_type_must_be_a_pyarrow_type():
    t = dlbridge.from_dlpack(np.arange(3.0))
    with pytest.raises(TypeError, match="pyarrow.DataType"):
        t.__arrow_array__(type="float64")
    assert t.__arrow_array__(type=None).type == pa.float64()


def test_pa_array_mask_and_size_are_refused_not_ignored():
    t = dlbridge.from_dlpack(np.arange(3.0))
    with pytest.raises(ValueError, match="mask"):
        pa.array(t, mask=np.array([False, True, False]))


def test_pa_array_nd_and_bool_keep_their_extension_types():
    nd = pa.array(dlbridge.from_dlpack(np.ones((2, 3, 4), np.float32)))
    assert isinstance(nd, pa.FixedShapeTensorArray) and nd.type.shape == [3, 4]
    b = pa.array(dlbridge.from_dlpack(np.array([True, False])))
    assert b.type == pa.bool8()


_OLD_PYARROW = """
import sys, types
import numpy as np
import pyarrow as real

# pyarrow 14/15 as __arrow_array__ sees it: no Array.from_dlpack, no device-capsule import
fake = types.ModuleType("pyarrow")
fake.Array = type("Array", (), {"_import_from_c_capsule": real.Array._import_from_c_capsule})
fake.DataType = real.DataType
sys.modules["pyarrow"] = fake
import dlbridge

a = np.arange(6, dtype=np.float32)
r = dlbridge.from_dlpack(a).__arrow_array__()  # looks pyarrow up, once
sys.modules["pyarrow"] = real  # (real pyarrow imports its submodules lazily)
assert r.type == real.float32() and r.buffers()[1].address == a.ctypes.data
nd = dlbridge.from_dlpack(a.reshape(2, 3)).__arrow_array__(type=None)
assert nd.type.shape == [3]
assert dlbridge.from_dlpack(a).__arrow_array__(type=real.float64()).type == real.float64()
print("ok")
"""


def test_arrow_array_with_a_pyarrow_without_dlpack_or_device_import():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _OLD_PYARROW], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_pa_chunked_array_and_table_take_tensors():
    a = np.arange(4, dtype=np.int32)
    t = dlbridge.from_dlpack(a)
    assert pa.chunked_array([t, t]).to_pylist() == a.tolist() * 2
    table = pa.table({"x": t})
    assert table.column("x").chunk(0).buffers()[1].address == a.ctypes.data


# --------------------------------------------------------------------------------------------
# pyarrow's integer and float arrays import through their own __dlpack__ (import.rs)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ARROW_PRIMITIVES)
def test_pyarrow_primitive_import_copy_policies(dtype):
    arr = pa.array(make(dtype, (8,))).slice(2, 5)
    ref = arr.to_numpy(zero_copy_only=True)
    same = dlbridge.from_dlpack(arr, copy=False)
    assert same.readonly and not same.is_copied and same.data_ptr == _values_address(arr)
    copied = dlbridge.from_dlpack(arr, copy=True)
    assert copied.is_copied and not copied.readonly and copied.data_ptr != same.data_ptr
    assert_values_equal(np.from_dlpack(copied), ref)
    assert dlbridge.from_dlpack(arr, device="cpu").data_ptr == same.data_ptr


def test_pyarrow_float16_imports_bit_exact():
    bits = np.array([0x0000, 0x3C00, 0x7BFF, 0xFC00, 0x7E00, 0x0001], dtype=np.uint16)
    arr = pa.array(bits.view(np.float16))
    t = dlbridge.from_dlpack(arr)
    assert t.dtype == "float16" and t.data_ptr == _values_address(arr)
    np.testing.assert_array_equal(np.from_dlpack(t).view(np.uint16), bits)


@pytest.mark.parametrize("make_arr", [
    lambda: pa.array([1.0, None, 3.0]),
    lambda: pa.array([1, None], type=pa.int8()).slice(1),
    lambda: pa.chunked_array([pa.array([1.0, None])]),
], ids=["nulls", "null_slice", "chunked_nulls"])
def test_pyarrow_refusal_falls_back_to_our_null_error(make_arr):  # C52
    with pytest.raises(BufferError, match="fill_null"):
        dlbridge.from_dlpack(make_arr())


@pytest.mark.parametrize("make_arr, want", [
    (lambda: pa.array([True, False, True]), [True, False, True]),  # BooleanArray: Arrow path
    (lambda: pa.array(np.array([True, False], dtype=bool), type=pa.bool8()), [True, False]),
    (lambda: pa.array([[1, 2], [3, 4]], type=pa.list_(pa.int32(), 2)), [[1, 2], [3, 4]]),
    (lambda: pa.array([1, 2, 1]).dictionary_encode(), None),  # refused as before
    (lambda: pa.array([1, 2], type=pa.timestamp("s")), None),  # refused as before
])
def test_other_pyarrow_arrays_keep_the_arrow_path(make_arr, want):
    arr = make_arr()
    if want is None:
        with pytest.raises((BufferError, TypeError)):
            dlbridge.from_dlpack(arr)
    else:
        assert dlbridge.from_dlpack(arr).tolist() == want



@pytest.mark.parametrize("dtype", ["int8", "uint32", "float16", "float64"])
def test_both_fast_paths_agree_with_nanoarrow_and_arro3(dtype):
    """tensor -> pa.array (from_dlpack route) -> nanoarrow / arro3 -> dlbridge: one pointer
    all along, and the same read-only tensor as the direct pyarrow import."""
    na = pytest.importorskip("nanoarrow")
    ac = pytest.importorskip("arro3.core")
    a = make(dtype, (9,))[1:]
    r = pa.array(dlbridge.from_dlpack(a))
    direct = dlbridge.from_dlpack(r)
    assert direct.data_ptr == a.ctypes.data and direct.readonly
    c = na.c_array(r)
    assert c.length == 8 and c.buffers[1] == a.ctypes.data
    for peer in (c, na.Array(r), ac.Array.from_arrow(r)):
        t = dlbridge.from_dlpack(peer)
        assert (t.dtype, t.shape, t.data_ptr, t.readonly) == (dtype, (8,), a.ctypes.data, True)
        assert_values_equal(np.from_dlpack(t), a)
