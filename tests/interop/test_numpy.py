"""Interop with NumPy, both directions, across dtypes and layouts.

Peer facts (numpy 2.4): ``np.from_dlpack`` calls ``__dlpack__(max_version=(1, 0), dl_device=None,
copy=None)``; ``ndarray.__dlpack__`` returns a versioned 1.0 capsule when asked (READ_ONLY set
for non-writeable arrays), refuses read-only arrays through legacy capsules (BufferError), and
refuses bfloat16/float8 (ml_dtypes) with BufferError.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlbridge
from dlb_testing import (
    LAYOUTS,
    assert_strides_equivalent,
    assert_tensor_like,
    assert_values_equal,
    make,
)


# --------------------------------------------------------------------------------------------
# numpy -> dlbridge
# --------------------------------------------------------------------------------------------
def test_numpy_to_dlbridge(np_dtype, layout):  # C1 C3 C4 C5 C8 C9 C10 C24
    a = LAYOUTS[layout](np_dtype)
    t = dlbridge.from_dlpack(a)
    assert_tensor_like(t, a, shared=True)
    assert t.readonly is False
    assert t.is_copied is False
    assert t.tolist() == a.tolist()
    assert_values_equal(np.from_dlpack(t), a)


def test_numpy_to_dlbridge_bool_is_bool():  # C24
    a = np.array([True, False, True])
    t = dlbridge.from_dlpack(a)
    assert t.dtype == "bool"
    assert (t.dtype.code, t.dtype.bits) == (6, 8)
    back = np.from_dlpack(t)
    assert back.dtype == np.bool_
    assert t.tolist() == [True, False, True]
    assert all(type(v) is bool for v in t.tolist())


def test_numpy_fortran_4x250():  # C3
    a = np.asfortranarray(np.arange(1000, dtype=np.float32).reshape(4, 250))
    t = dlbridge.from_dlpack(a)
    assert t.strides == (1, 4)
    assert t.is_f_contiguous and not t.is_c_contiguous
    back = np.from_dlpack(t)
    assert back.flags.f_contiguous
    assert back.strides == a.strides
    assert_values_equal(back, a)


def test_numpy_negative_strides_example():  # C1
    a = np.arange(12.0).reshape(3, 4)[:, ::-1]
    assert a.strides == (32, -8)
    t = dlbridge.from_dlpack(a)
    assert t.strides == (4, -1)
    assert t.data_ptr == a.ctypes.data
    back = np.from_dlpack(t)
    assert back.strides == (32, -8)
    assert_values_equal(back, a)
    c = dlbridge.from_dlpack(a, copy=True)  # C1: the copy route is correct and C-ordered
    assert c.strides == (4, 1)
    assert_values_equal(np.from_dlpack(c), a)
    # consumers without negative strides: see interop/test_torch.py, test_jax.py, test_pyarrow.py


def test_numpy_nchw_size1():  # C4
    a = np.zeros((1, 3, 224, 224), dtype=np.float32)
    assert a.strides == (602112, 200704, 896, 4)
    t = dlbridge.from_dlpack(a)
    assert t.strides[1:] == (50176, 224, 1)
    assert t.is_c_contiguous


def test_numpy_size1_reduce():  # C5
    a = make("float32", (3, 1, 6, 2))
    t = dlbridge.from_dlpack(a)
    back = np.from_dlpack(t)
    np.testing.assert_array_equal(back.sum(axis=(1, 3)), a.sum(axis=(1, 3)))
    assert back.sum() == a.sum()


def test_numpy_0d():  # C8
    a = np.array(42, dtype=np.int64)
    t = dlbridge.from_dlpack(a)
    assert t.shape == () and t.tolist() == 42
    back = np.from_dlpack(t)
    assert back.shape == () and back[()] == 42


def test_numpy_scalar_object():
    # a NumPy scalar (not 0-d array) is read-only and offers the buffer protocol / __dlpack__
    s = np.float32(1.5)
    t = dlbridge.from_dlpack(s)
    assert t.shape == () and t.tolist() == 1.5
    assert t.readonly


def test_numpy_zero_size_wide():  # C10
    from dlpack_ctypes import inspect_capsule

    a = np.zeros((0, 2048), dtype=np.float32)
    t = dlbridge.from_dlpack(a)
    assert t.shape == (0, 2048)
    assert inspect_capsule(t.__dlpack__(max_version=(1, 3)))["strides"] == (2048, 1)
    back = np.from_dlpack(t)
    assert back.shape == (0, 2048) and back.dtype == np.float32


def test_numpy_broadcast_zero_strides():
    a = np.broadcast_to(np.arange(3.0), (4, 3))
    t = dlbridge.from_dlpack(a)
    assert t.strides == (0, 1)
    assert t.readonly
    assert_values_equal(np.from_dlpack(t), a)


def test_numpy_readonly_to_dlbridge():  # C12 C14
    a = make("float32", (3,))
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert t.readonly
    back = np.from_dlpack(t)
    assert not back.flags.writeable


def test_numpy_bfloat16_no_silent_wrong_answer():  # C25
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([1.0, 2.0, 3.0], dtype=ml_dtypes.bfloat16)
    try:
        t = dlbridge.from_dlpack(a)
    except (BufferError, TypeError) as exc:
        assert "bfloat16" in str(exc) or "V2" in str(exc) or "dtype" in str(exc).lower()
        return
    assert t.dtype == "bfloat16"
    assert t.data_ptr == a.ctypes.data


# --------------------------------------------------------------------------------------------
# dlbridge -> numpy
# --------------------------------------------------------------------------------------------
def _tensor_from_buffer(a: np.ndarray):
    """A dlbridge Tensor whose producer is not NumPy's __dlpack__ (buffer protocol)."""
    return dlbridge.from_dlpack(memoryview(a))


@pytest.mark.parametrize("route", ["np.from_dlpack", "np.asarray", "memoryview"])
def test_dlbridge_to_numpy(np_dtype, layout, route):  # C1 C3 C4 C5 C8 C9 C10 C24
    a = LAYOUTS[layout](np_dtype)
    t = _tensor_from_buffer(a)
    if route == "np.from_dlpack":
        n = np.from_dlpack(t)
    elif route == "np.asarray":
        n = np.asarray(t)
    else:
        n = np.asarray(memoryview(t))
    assert n.shape == a.shape
    assert n.dtype == a.dtype
    assert_strides_equivalent(tuple(s // a.itemsize for s in n.strides), a)
    assert_values_equal(n, a)
    if a.size:
        assert n.ctypes.data == a.ctypes.data  # zero-copy
    assert n.flags.writeable


def test_numpy_from_dlpack_copy_kwarg():
    a = make("float64", (3, 4))
    t = dlbridge.from_dlpack(a)
    c = np.from_dlpack(t, copy=True)
    assert c.ctypes.data != a.ctypes.data
    assert_values_equal(c, a)
    c[...] = 0
    assert a.sum() != 0
    v = np.from_dlpack(t, copy=False)
    assert v.ctypes.data == a.ctypes.data
    d = np.from_dlpack(t, device="cpu")
    assert d.ctypes.data == a.ctypes.data


def test_numpy_readonly_tensor_stays_readonly():  # C14
    a = make("int32", (4,))
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    for n in (np.from_dlpack(t), np.asarray(t), np.asarray(memoryview(t))):
        assert not n.flags.writeable
        with pytest.raises(ValueError):
            n[0] = 5
    w = np.from_dlpack(t, copy=True)
    assert w.flags.writeable


def test_numpy_keeps_tensor_alive(collect):
    import weakref

    a = np.arange(64, dtype=np.float32)
    ref = weakref.ref(a)
    n = np.from_dlpack(dlbridge.from_dlpack(a))
    del a
    collect()
    assert ref() is not None
    assert n[63] == 63
    del n
    collect()
    assert ref() is None


def test_numpy_roundtrip_writes_are_shared():
    a = np.zeros((2, 3), dtype=np.float64)
    n = np.from_dlpack(dlbridge.from_dlpack(a))
    n[1, 2] = 7.0
    assert a[1, 2] == 7.0
