"""Interop with array-api-strict (the reference array API namespace), both directions.

Peer facts (array-api-strict 2.6, API 2025.12): ``xp.from_dlpack`` forwards to NumPy, so it
calls ``__dlpack__(max_version=(1, 0), dl_device=None, copy=None)``, keeps read-only data
read-only, forwards ``copy``; it refuses float16 (not an array API dtype) with TypeError.
Arrays wrap a NumPy array (``x._array``), which gives us the data pointer.
"""

from __future__ import annotations

import numpy as np
import pytest

xp = pytest.importorskip("array_api_strict")

import dlbridge  # noqa: E402
from dlb_testing import (  # noqa: E402
    LAYOUTS,
    assert_strides_equivalent,
    assert_values_equal,
    import_or_peer_limitation,
    make,
)

XP_DTYPES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128",
]


@pytest.fixture(params=XP_DTYPES)
def xp_dtype(request):
    return request.param


def _np(x) -> np.ndarray:
    return x._array if hasattr(x, "_array") else np.from_dlpack(x)


# --------------------------------------------------------------------------------------------
# array_api_strict -> dlbridge
# --------------------------------------------------------------------------------------------
def test_xp_to_dlbridge(xp_dtype, layout):  # C1 C3 C4 C5 C8 C9 C10 C24
    a = LAYOUTS[layout](xp_dtype)
    x = xp.from_dlpack(a)  # an array_api_strict array aliasing a, layout kept
    t = dlbridge.from_dlpack(x)
    assert t.shape == a.shape
    assert t.dtype == xp_dtype
    assert_strides_equivalent(t.strides, a)
    if a.size:
        assert t.data_ptr == a.ctypes.data
    assert t.readonly is False
    assert_values_equal(np.from_dlpack(t), a)


def test_xp_created_arrays_to_dlbridge():
    x = xp.reshape(xp.arange(12, dtype=xp.float32), (3, 4))
    y = xp.permute_dims(x, (1, 0))
    for arr in (x, y, x[1:, ::2], xp.asarray(True), xp.zeros((0, 5))):
        t = dlbridge.from_dlpack(arr)
        assert_values_equal(np.from_dlpack(t), np.asarray(_np(arr)))


# --------------------------------------------------------------------------------------------
# dlbridge -> array_api_strict
# --------------------------------------------------------------------------------------------
def test_dlbridge_to_xp(xp_dtype, layout):  # C1 C3 C4 C5 C8 C9 C10 C24
    a = LAYOUTS[layout](xp_dtype)
    t = dlbridge.from_dlpack(memoryview(a))
    r = import_or_peer_limitation("array_api_strict", xp.from_dlpack, t, a)
    assert tuple(r.shape) == a.shape
    n = _np(r)
    assert_values_equal(n, a)
    if a.size:
        assert n.ctypes.data == a.ctypes.data
    assert xp.all(r == xp.from_dlpack(a))


def test_dlbridge_float16_to_xp_refused_by_peer():
    t = dlbridge.from_dlpack(make("float16", (3,)))
    with pytest.raises(TypeError):  # float16 is not an array API dtype: the peer's choice
        xp.from_dlpack(t)


def test_dlbridge_readonly_to_xp():  # C14
    a = make("int32", (4,))
    a.flags.writeable = False
    r = xp.from_dlpack(dlbridge.from_dlpack(a))
    assert not _np(r).flags.writeable


def test_dlbridge_to_xp_copy_keyword():
    a = make("float64", (2, 3))
    t = dlbridge.from_dlpack(a)
    c = xp.from_dlpack(t, copy=True)
    assert _np(c).ctypes.data != a.ctypes.data
    assert_values_equal(_np(c), a)
    v = xp.from_dlpack(t, copy=False)
    assert _np(v).ctypes.data == a.ctypes.data


def test_xp_roundtrip():
    x = xp.asarray([[1, 2, 3], [4, 5, 6]], dtype=xp.int16)
    back = xp.from_dlpack(dlbridge.from_dlpack(x))
    assert xp.all(back == x)
    assert _np(back).ctypes.data == _np(x).ctypes.data
