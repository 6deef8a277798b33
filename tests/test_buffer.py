"""Buffer protocol and __array_interface__ export of dlbridge.Tensor."""

from __future__ import annotations

import numpy as np
import pytest

import dlbridge
from dlb_testing import BUFFER_FORMATS, LAYOUTS, NUMPY_DTYPES, assert_values_equal, make
from dlpack_ctypes import FakeManagedTensor


def _strip(fmt: str) -> str:
    return fmt[1:] if fmt[:1] in ("@", "=", "<") else fmt


# --------------------------------------------------------------------------------------------
# memoryview
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_memoryview_format(dtype):  # C24
    a = make(dtype, (2, 3))
    t = dlbridge.from_dlpack(a)
    mv = memoryview(t)
    assert _strip(mv.format) in BUFFER_FORMATS[dtype], mv.format
    assert mv.itemsize == a.itemsize
    assert mv.shape == a.shape
    assert mv.strides == a.strides
    assert mv.ndim == 2
    assert mv.nbytes == a.nbytes
    assert not mv.readonly
    n = np.asarray(mv)
    assert n.dtype == a.dtype  # bool stays bool (C24), complex stays complex
    assert n.ctypes.data == a.ctypes.data  # zero-copy
    assert_values_equal(n, a)


@pytest.mark.parametrize(
    "dtype, fmt",
    [("bool", "?"), ("float16", "e"), ("complex64", "Zf"), ("complex128", "Zd")],
)
def test_memoryview_special_formats(dtype, fmt):  # C24
    t = dlbridge.from_dlpack(make(dtype, (3,)))
    assert _strip(memoryview(t).format) == fmt


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_memoryview_layouts(name):
    a = LAYOUTS[name]("int32")
    t = dlbridge.from_dlpack(a)
    mv = memoryview(t)
    assert mv.shape == a.shape
    if a.size:
        # strides in bytes; extent-1/0 dims may be normalised
        for n, got, want in zip(a.shape, mv.strides, a.strides):
            if n > 1:
                assert got == want
    assert mv.tolist() == a.tolist()
    n = np.asarray(mv)
    assert_values_equal(n, a)
    if a.size:
        assert n.ctypes.data == a.ctypes.data


def test_memoryview_writes_through():
    a = np.zeros(4, dtype=np.int32)
    t = dlbridge.from_dlpack(a)
    mv = memoryview(t)
    mv[1] = 42
    assert a[1] == 42


def test_memoryview_readonly():
    a = make("int32", (4,))
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    mv = memoryview(t)
    assert mv.readonly
    with pytest.raises(TypeError):
        mv[0] = 1
    n = np.asarray(mv)
    assert not n.flags.writeable


def test_writable_buffer_request_on_readonly_is_refused():
    a = make("uint8", (4,))
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    # np.frombuffer asks for a read-only buffer; a writable request must fail
    import ctypes

    with pytest.raises((BufferError, TypeError)):
        (ctypes.c_uint8 * 4).from_buffer(t)


def test_contiguity_requests():
    a = make("float32", (3, 4)).T
    t = dlbridge.from_dlpack(a)
    mv = memoryview(t)
    assert mv.f_contiguous and not mv.c_contiguous
    # a C-contiguous request on F data must be refused, not silently reinterpreted
    with pytest.raises((BufferError, TypeError, ValueError)):
        mv.cast("B")  # cast requires C-contiguity
    c = dlbridge.from_dlpack(make("float32", (3, 4)))
    assert memoryview(c).cast("B").nbytes == 48


def test_memoryview_keeps_tensor_memory_alive(collect):
    import weakref

    a = np.arange(10, dtype=np.float64)
    ref = weakref.ref(a)
    t = dlbridge.from_dlpack(a)
    mv = memoryview(t)
    del a, t
    collect()
    assert ref() is not None
    assert mv[9] == 9.0
    mv.release()
    del mv
    collect()
    assert ref() is None


def test_0d_memoryview():  # C8
    t = dlbridge.from_dlpack(np.array(3.5, dtype=np.float32))
    mv = memoryview(t)
    assert mv.ndim == 0 and mv.shape == () and mv.tolist() == 3.5


def test_zero_size_memoryview():  # C9
    t = dlbridge.from_dlpack(np.zeros((0, 3), dtype=np.float32))
    mv = memoryview(t)
    assert mv.shape == (0, 3) and mv.nbytes == 0


def _bf16_tensor(keep):
    raw = np.array([0x3F80, 0x4000, 0x4040], dtype=np.uint16)  # 1, 2, 3 in bfloat16
    fake = FakeManagedTensor(data=raw, shape=(3,), strides=(1,), dtype=(4, 16, 1))
    keep.append(fake)
    return dlbridge.from_dlpack(fake.capsule()), raw


def test_bfloat16_memoryview_is_buffer_error_pointing_to_dlpack():  # C30 C25
    keep = []
    t, _ = _bf16_tensor(keep)
    with pytest.raises(BufferError) as ei:
        memoryview(t)
    assert "DLPack" in str(ei.value) or "__dlpack__" in str(ei.value)


def test_float8_memoryview_is_buffer_error():  # C30
    raw = np.array([0x38, 0x40], dtype=np.uint8)
    fake = FakeManagedTensor(data=raw, shape=(2,), strides=(1,), dtype=(10, 8, 1), version=(1, 1))
    t = dlbridge.from_dlpack(fake.capsule())
    with pytest.raises(BufferError) as ei:
        memoryview(t)
    assert "DLPack" in str(ei.value) or "__dlpack__" in str(ei.value)


def test_bfloat16_numpy_asarray_no_silent_wrong_answer():  # C30
    keep = []
    t, raw = _bf16_tensor(keep)
    try:
        n = np.asarray(t)
    except (BufferError, TypeError, ValueError):
        return  # a clean refusal is fine
    # if NumPy got something, it must be consistent: 3 elements of 2 bytes, same bits
    assert n.shape == (3,)
    assert n.dtype.itemsize == 2
    assert n.dtype != np.dtype(object)
    assert n.view(np.uint16).tolist() == raw.tolist()


# --------------------------------------------------------------------------------------------
# __array_interface__
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_array_interface_typestr(dtype):
    a = make(dtype, (2, 3))
    t = dlbridge.from_dlpack(a)
    ai = t.__array_interface__
    assert ai["version"] == 3
    assert np.dtype(ai["typestr"]) == a.dtype
    assert ai["shape"] == (2, 3)
    assert ai["data"] == (a.ctypes.data, False)
    assert ai.get("strides") in (None, a.strides)  # None allowed for C-contiguous


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_array_interface_layouts(name):
    a = LAYOUTS[name]("float64")
    t = dlbridge.from_dlpack(a)
    ai = t.__array_interface__
    assert ai["shape"] == a.shape
    if ai.get("strides") is not None:
        assert len(ai["strides"]) == a.ndim
        if a.size:
            for n, got, want in zip(a.shape, ai["strides"], a.strides):
                if n > 1:
                    assert got == want  # bytes, not elements
    else:
        assert t.is_c_contiguous
    n = np.asarray(t)
    assert_values_equal(n, a)
    if a.size:
        assert n.ctypes.data == a.ctypes.data
        assert ai["data"][0] == a.ctypes.data
    assert n.flags.writeable


def test_array_interface_readonly():  # C14
    a = make("float32", (3,))
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert t.__array_interface__["data"] == (a.ctypes.data, True)
    n = np.asarray(t)
    assert not n.flags.writeable
    with pytest.raises(ValueError):
        n[0] = 1


def test_np_asarray_keeps_tensor_alive(collect):
    import weakref

    a = np.arange(10, dtype=np.float64)
    ref = weakref.ref(a)
    n = np.asarray(dlbridge.from_dlpack(a))
    del a
    collect()
    assert ref() is not None
    assert n[9] == 9.0
    del n
    collect()
    assert ref() is None


def test_bfloat16_array_interface():  # C30
    keep = []
    t, raw = _bf16_tensor(keep)
    try:
        ai = t.__array_interface__
    except BufferError:
        return
    # if offered, the typestr must be 2 bytes wide (e.g. '<V2' or ml_dtypes' bfloat16)
    assert np.dtype(ai["typestr"]).itemsize == 2
