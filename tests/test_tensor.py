"""dlbridge.Tensor attributes, DType, Device, tolist, repr and copy()."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import dlbridge
from dlb_testing import (
    DLPACK_CODE,
    LAYOUTS,
    NUMPY_DTYPES,
    assert_strides_equivalent,
    assert_values_equal,
    element_strides,
    make,
)


# --------------------------------------------------------------------------------------------
# Module surface
# --------------------------------------------------------------------------------------------
def test_public_names():
    for name in ("Tensor", "DType", "Device", "from_dlpack", "DLPACK_VERSION"):
        assert hasattr(dlbridge, name), name
    assert dlbridge.DLPACK_VERSION == (1, 3)
    assert isinstance(dlbridge.__version__, str)


def test_tensor_constructor_is_from_dlpack():
    a = make("float32", (2, 3))
    t1 = dlbridge.Tensor(a)
    t2 = dlbridge.from_dlpack(a)
    assert isinstance(t1, dlbridge.Tensor) and isinstance(t2, dlbridge.Tensor)
    assert t1.data_ptr == t2.data_ptr == a.ctypes.data
    t3 = dlbridge.Tensor(a, copy=True)
    assert t3.is_copied and t3.data_ptr != a.ctypes.data
    t4 = dlbridge.Tensor(a, device="cpu", copy=False)
    assert t4.data_ptr == a.ctypes.data


def test_from_dlpack_keywords_only():
    a = make("float32", (2,))
    with pytest.raises(TypeError):
        dlbridge.from_dlpack(a, None)  # device is keyword-only
    with pytest.raises(TypeError):
        dlbridge.from_dlpack(x=a)  # x is positional-only


# from_dlpack is a raw fastcall function matching keyword names by identity first, and
# remembering a call site's tuple of keyword names: every way of passing them must agree.
def test_from_dlpack_signature_is_introspectable():
    sig = inspect.signature(dlbridge.from_dlpack)
    assert str(sig) == "(x, /, *, device=None, copy=None)"


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"copy": "yes"}, TypeError),
        ({"copy": 1}, TypeError),
        ({"device": "nowhere"}, ValueError),
        ({"devices": "cpu"}, TypeError),
    ],
)
def test_from_dlpack_bad_keywords(kwargs, error):
    with pytest.raises(error):
        dlbridge.from_dlpack(make("float32", (2,)), **kwargs)


def test_from_dlpack_keyword_names_not_interned_and_in_any_order():
    a = make("float32", (3,))
    names = {"".join(["dev", "ice"]): "cpu", "".join(["co", "py"]): True}  # equal, not identical
    t = dlbridge.from_dlpack(a, **names)
    assert t.is_copied and t.data_ptr != a.ctypes.data
    t = dlbridge.from_dlpack(a, copy=False, device=None)
    assert t.data_ptr == a.ctypes.data
    t = dlbridge.from_dlpack(a, device=None, copy=None)
    assert t.data_ptr == a.ctypes.data
    assert dlbridge.from_dlpack(a, copy=np.True_).is_copied


# --------------------------------------------------------------------------------------------
# DType
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(DLPACK_CODE))
def test_dtype_table(name):
    code, bits = DLPACK_CODE[name]
    d = dlbridge.DType(name)
    assert d == name
    assert d.name == name
    assert str(d) == name or name in str(d)
    assert (d.code, d.bits, d.lanes) == (code, bits, 1)
    assert d.itemsize == bits // 8
    assert d == dlbridge.DType(name)
    assert hash(d) == hash(dlbridge.DType(name))


@pytest.mark.parametrize(
    "name, code, bits",
    [
        ("float8_e3m4", 7, 8),
        ("float8_e4m3", 8, 8),
        ("float8_e4m3b11fnuz", 9, 8),
        ("float8_e4m3fn", 10, 8),
        ("float8_e4m3fnuz", 11, 8),
        ("float8_e5m2", 12, 8),
        ("float8_e5m2fnuz", 13, 8),
        ("float8_e8m0fnu", 14, 8),
        ("float6_e2m3fn", 15, 6),
        ("float6_e3m2fn", 16, 6),
        ("float4_e2m1fn", 17, 4),
    ],
)
def test_dtype_table_low_precision(name, code, bits):  # C26
    d = dlbridge.DType(name)
    assert d == name
    assert (d.code, d.bits, d.lanes) == (code, bits, 1)
    assert d.itemsize == 1  # ceil(bits / 8)


def test_dtype_inequality_and_unknown():
    assert dlbridge.DType("float32") != "float64"
    assert dlbridge.DType("float32") != dlbridge.DType("int32")
    assert dlbridge.DType("int8") != 8
    with pytest.raises(ValueError):
        dlbridge.DType("float128")
    with pytest.raises(ValueError):
        dlbridge.DType("not-a-type")


# --------------------------------------------------------------------------------------------
# Device
# --------------------------------------------------------------------------------------------
def test_device_cpu():
    d = dlbridge.Device("cpu")
    assert d == "cpu"
    assert d == (1, 0)
    assert d == dlbridge.Device((1, 0))
    assert d == dlbridge.Device(d)
    assert (d.type, d.id) == (1, 0)
    assert d.name == "cpu"
    assert d.__dlpack_device__() == (1, 0)
    assert hash(d) == hash(dlbridge.Device("cpu"))


def test_device_parse():
    d = dlbridge.Device("cuda:1")
    assert (d.type, d.id) == (2, 1)
    assert d == "cuda:1" and d == (2, 1)
    assert d != "cuda:0" and d != "cpu"
    assert d.name == "cuda"
    assert dlbridge.Device("cuda") == dlbridge.Device("cuda:0")
    o = dlbridge.Device("oneapi:0")
    assert (o.type, o.id) == (14, 0) and o == "oneapi:0"
    assert dlbridge.Device((2, 3)) == "cuda:3"


@pytest.mark.parametrize("bad", ["gpu7", "cuda:x", "cuda:-1", "", "cpu:zero"])
def test_device_invalid(bad):
    with pytest.raises(ValueError):
        dlbridge.Device(bad)


# --------------------------------------------------------------------------------------------
# Attributes
# --------------------------------------------------------------------------------------------
def test_attributes_basic():
    # the example from the issue: a transposed (3, 4) float32, strides in elements
    a = np.arange(12, dtype=np.float32).reshape(3, 4).T
    t = dlbridge.from_dlpack(a)
    assert t.shape == (4, 3)
    assert t.strides == (1, 4)
    assert t.dtype == "float32"
    assert isinstance(t.dtype, dlbridge.DType)
    assert t.device == "cpu"
    assert isinstance(t.device, dlbridge.Device)
    assert t.readonly is False
    assert t.is_copied is False
    assert t.ndim == 2
    assert t.size == 12
    assert t.itemsize == 4
    assert t.nbytes == 48
    assert isinstance(t.data_ptr, int) and t.data_ptr == a.ctypes.data
    assert t.is_c_contiguous is False
    assert t.is_f_contiguous is True
    assert len(t) == 4
    assert t.__dlpack_device__() == (1, 0)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_attributes_per_dtype(dtype):
    a = make(dtype, (2, 3))
    t = dlbridge.from_dlpack(a)
    assert t.dtype == dtype
    assert t.itemsize == a.itemsize == t.dtype.itemsize
    assert t.nbytes == a.nbytes
    assert (t.dtype.code, t.dtype.bits) == DLPACK_CODE[dtype]


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_strides_in_elements_and_data_ptr(name):
    a = LAYOUTS[name]("float64")
    t = dlbridge.from_dlpack(a)
    assert t.shape == a.shape
    assert_strides_equivalent(t.strides, a)
    if a.size:
        assert t.data_ptr == a.ctypes.data  # address of the first element, not of the base


def test_data_ptr_is_first_element_for_negative_strides():  # C1
    base = np.arange(12.0).reshape(3, 4)
    a = base[:, ::-1]
    t = dlbridge.from_dlpack(a)
    assert t.strides == (4, -1)
    assert t.data_ptr == base.ctypes.data + 3 * 8


def test_0d():  # C8
    a = np.array(2.5)
    t = dlbridge.from_dlpack(a)
    assert t.shape == () and t.strides == () and t.ndim == 0 and t.size == 1
    assert t.nbytes == 8
    assert t.tolist() == 2.5
    assert t.is_c_contiguous and t.is_f_contiguous
    with pytest.raises(TypeError):
        len(t)


def test_zero_size():  # C9 C10
    a = np.zeros((0, 3), dtype=np.float32)
    t = dlbridge.from_dlpack(a)
    assert t.shape == (0, 3)
    assert t.size == 0 and t.nbytes == 0
    assert t.tolist() == []
    assert len(t) == 0
    assert t.is_c_contiguous


@pytest.mark.parametrize(
    "shape, strides, c, f",
    [
        ((1, 3, 224, 224), (150528, 50176, 224, 1), True, False),  # C4
        ((1, 3, 224, 224), (999, 50176, 224, 1), True, False),  # C4: extent-1 stride is junk
        ((3, 1, 6, 2), (12, 12, 2, 1), True, False),  # C5
        ((3, 1, 6, 2), (12, 1, 2, 1), True, False),  # C5: torch-normalised size-1 stride
        ((4, 1), (1, 4), True, True),  # a column vector is both
        ((1, 4), (4, 1), True, True),
        ((1, 1), (7, 9), True, True),
        ((2, 3), (3, 1), True, False),
        ((2, 3), (1, 2), False, True),
        ((2, 3), (6, 2), False, False),
        ((2, 3), (3, -1), False, False),
        ((5,), (1,), True, True),
        ((5,), (2,), False, False),
        ((), (), True, True),
    ],
)
def test_contiguity_flags(shape, strides, c, f):  # C4 C5
    from dlpack_ctypes import FakeManagedTensor

    n = 1
    for s, st in zip(shape, strides):
        if s > 1:
            n = max(n, (s - 1) * abs(st) + 1)
    span = 2 * n + 8
    base = np.arange(span, dtype=np.float32)
    offset = span // 2 if any(st < 0 for st in strides) else 0
    fake = FakeManagedTensor(data=base, shape=shape, strides=strides, dtype="float32",
                             byte_offset=offset * 4)
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.shape == shape
    assert t.is_c_contiguous is c
    assert t.is_f_contiguous is f
    del t


@pytest.mark.parametrize("name", sorted(n for n in LAYOUTS if not n.startswith("zero_size")))
def test_contiguity_matches_numpy(name):  # zero-size: see test_zero_size
    a = LAYOUTS[name]("int16")
    t = dlbridge.from_dlpack(a)
    assert t.is_c_contiguous == a.flags.c_contiguous
    assert t.is_f_contiguous == a.flags.f_contiguous


# --------------------------------------------------------------------------------------------
# tolist / repr
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize(
    "name", ["contiguous", "neg_cols", "step2d", "scalar0d", "zero_size", "size1_dims"]
)
def test_tolist(dtype, name):  # C24 (bool stays bool)
    a = LAYOUTS[name](dtype)
    t = dlbridge.from_dlpack(a)
    got = t.tolist()
    want = a.tolist()
    assert got == want
    # element types are Python scalars of the right kind
    flat = got
    while isinstance(flat, list) and flat:
        flat = flat[0]
    if not isinstance(flat, list):
        assert type(flat) is type(a.flat[0].item()) if a.size else True


def test_repr():
    t = dlbridge.from_dlpack(np.arange(6, dtype=np.float32).reshape(2, 3))
    r = repr(t)
    assert "Tensor" in r
    assert "float32" in r
    assert "(2, 3)" in r
    assert "cpu" in r
    # repr never fails, even for odd tensors
    repr(dlbridge.from_dlpack(np.zeros((0, 3))))
    repr(dlbridge.from_dlpack(np.array(1.0)))


# --------------------------------------------------------------------------------------------
# copy()
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(LAYOUTS))
@pytest.mark.parametrize("order", ["C", "F"])
def test_copy(name, order):
    a = LAYOUTS[name]("int32")
    ro = a.copy()
    ro.flags.writeable = False
    t = dlbridge.from_dlpack(ro)
    assert t.readonly
    c = t.copy(order=order) if order == "F" else t.copy()
    assert isinstance(c, dlbridge.Tensor)
    assert c.is_copied is True
    assert c.readonly is False
    assert c.shape == a.shape and c.dtype == "int32"
    if order == "C":
        assert c.is_c_contiguous
    else:
        assert c.is_f_contiguous
    if a.size:
        assert c.data_ptr != t.data_ptr
    back = np.from_dlpack(c)
    assert_values_equal(back, a)
    assert back.flags.writeable
    if order == "C":
        assert back.flags.c_contiguous
    else:
        assert back.flags.f_contiguous


def test_copy_c_strides_zero_size_wide():  # C10
    t = dlbridge.from_dlpack(np.zeros((0, 2048), dtype=np.float32)).copy()
    assert t.strides == (2048, 1)


def test_copy_is_independent():
    a = np.arange(6, dtype=np.int64)
    c = dlbridge.from_dlpack(a).copy()
    a[:] = -1
    assert c.tolist() == [0, 1, 2, 3, 4, 5]
    n = np.from_dlpack(c)
    n[0] = 99
    assert a[0] == -1
    assert c.tolist()[0] == 99


def test_copy_bad_order():
    t = dlbridge.from_dlpack(np.arange(4))
    with pytest.raises(ValueError):
        t.copy(order="K")
    with pytest.raises(ValueError):
        t.copy(order="x")


@pytest.mark.parametrize(
    ("dtype", "shape"),
    [
        # 1-byte elements past 16 MiB: the stores that bypass the caches; 4112-byte lines of
        # the result, aligned to 16 bytes but not all to 64.
        ("uint8", (4112, 4099)),
        ("uint16", (1030, 1027)),
        ("float32", (700, 517)),
        ("float64", (513, 700)),
        ("complex128", (300, 257)),
    ],
)
def test_copy_of_large_transposes(dtype, shape):
    # Big enough for the threads, with edge tiles (sides not a multiple of the tile).
    a = np.random.default_rng(0).integers(0, 255, size=shape).astype(dtype)
    want = np.ascontiguousarray(a.T)
    got = np.from_dlpack(dlbridge.from_dlpack(a.T).copy())
    assert got.flags.c_contiguous
    assert np.array_equal(got, want)
    into = np.zeros_like(want)  # NumPy's own allocation and alignment
    dlbridge.copyto(dlbridge.from_dlpack(into), dlbridge.from_dlpack(a.T))
    assert np.array_equal(into, want)


def test_tensor_keeps_source_alive(collect):
    import weakref

    a = np.arange(1000, dtype=np.float64)
    ref = weakref.ref(a)
    t = dlbridge.from_dlpack(a)
    ptr = t.data_ptr
    del a
    collect()
    assert ref() is not None  # the tensor owns (via the capsule) a reference to the array
    assert t.tolist()[999] == 999.0
    assert t.data_ptr == ptr
    del t
    collect()
    assert ref() is None  # and releases it


def test_from_dlpack_of_tensor_is_same_memory():
    a = make("float32", (3, 4))[:, ::2]
    t = dlbridge.from_dlpack(a)
    u = dlbridge.from_dlpack(t)
    assert u.data_ptr == t.data_ptr
    assert u.shape == t.shape and u.strides == t.strides
    c = dlbridge.from_dlpack(t, copy=True)
    assert c.is_copied and c.data_ptr != t.data_ptr and c.is_c_contiguous
    assert_values_equal(np.from_dlpack(c), a)


def test_element_strides_helper_consistency():
    a = make("float32", (3, 4)).T
    assert element_strides(a) == (1, 4)
