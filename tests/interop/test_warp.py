"""NVIDIA Warp <-> dlbridge on Warp's CPU device; the CUDA paths where a GPU exists.

Peer facts (warp-lang 1.19.0, checked on this machine without a GPU):
- ``array.__dlpack__(stream=None)`` takes no ``max_version`` / ``dl_device`` / ``copy`` (a
  TypeError; the array API asks producers to accept them) and returns a **legacy** capsule of
  Warp's own, writable memory, so dlbridge imports warp arrays writable (Warp is among the
  libraries whose legacy capsules say so by what they are) and a consumer that asks for
  ``copy=True`` or ``device=`` directly gets warp's TypeError.
- ``wp.from_dlpack(x)`` calls ``x.__dlpack__()`` (legacy) and keeps any strides (negative and
  zero too), but has no ``copy=`` / ``device=``; complex data is a RuntimeError, not a
  BufferError. A read-only dlbridge Tensor reaches it as a writable copy (C13).
- Every warp export sets ``ctypes.pythonapi.PyCapsule_New.argtypes`` process-wide (to a
  CFUNCTYPE destructor), which breaks other ctypes users of that shared function object.
- warp has no 0-d arrays (``wp.array`` of a 0-d array has shape (1,)).
- ``__cuda_array_interface__`` exists on CUDA arrays only (an AttributeError on the CPU).
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

wp = pytest.importorskip("warp")

import dlbridge  # noqa: E402
from dlb_testing import assert_values_equal, make  # noqa: E402
from dlpack_ctypes import inspect_capsule  # noqa: E402

wp.config.quiet = True
wp.init()

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]


def warp_of(a: np.ndarray, device: str = "cpu"):
    return wp.array(a, dtype=wp.dtype_from_numpy(a.dtype), device=device)


def has_cuda() -> bool:
    return bool(wp.get_cuda_devices())


@pytest.mark.parametrize("dtype", DTYPES)
def test_warp_to_dlbridge_is_zero_copy_and_writable(dtype):
    a = make(dtype, (3, 4))
    x = warp_of(a)
    t = dlbridge.from_dlpack(x)
    # a legacy capsule of Warp's own, mutable memory: writable, as wp.from_dlpack takes it
    assert (t.dtype.name, tuple(t.shape), t.readonly, t.is_copied) == (dtype, (3, 4), False, False)
    assert t.data_ptr == x.ptr
    assert_values_equal(np.from_dlpack(t), a)


def test_warp_exports_legacy_capsules_only():
    x = warp_of(np.arange(4.0))
    assert inspect_capsule(x.__dlpack__())["versioned"] is False
    with pytest.raises(TypeError):
        x.__dlpack__(max_version=(1, 0))
    # dlbridge falls back to the legacy capsule, and copies when asked to
    t = dlbridge.from_dlpack(x, copy=True)
    assert t.is_copied and not t.readonly and t.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dlbridge_to_warp_is_zero_copy(dtype):
    a = make(dtype, (3, 4))
    y, plan = dlbridge.convert(a, "warp", report=True)
    assert plan.copies == 0, plan
    assert isinstance(y, wp.array) and y.ptr == a.ctypes.data
    assert_values_equal(y.numpy(), a)


def test_warp_keeps_strides_from_dlbridge():
    a = np.arange(24.0).reshape(4, 6)
    for v in (a.T, a[::2, ::3], a[:, ::-1]):
        y = wp.from_dlpack(dlbridge.from_dlpack(v))
        assert tuple(y.strides) == v.strides and y.numpy().tolist() == v.tolist()


def test_read_only_data_reaches_warp_as_a_copy():
    a = np.arange(6.0)
    a.flags.writeable = False
    # wp.from_dlpack asks for a legacy capsule, which cannot say read-only: a writable copy
    y = wp.from_dlpack(dlbridge.from_dlpack(a))
    assert y.ptr != a.ctypes.data and y.numpy().tolist() == a.tolist()
    y, plan = dlbridge.convert(a, "warp", report=True)
    assert plan.copies == 1 and y.ptr != a.ctypes.data and y.numpy().tolist() == a.tolist()
    with pytest.raises(BufferError):
        dlbridge.convert(a, "warp", copy=False)


def test_warp_has_no_complex_and_no_0d():
    with pytest.raises(BufferError, match="complex"):
        dlbridge.convert(np.arange(3, dtype=np.complex64), "warp")
    with pytest.raises(BufferError, match="0-d"):
        dlbridge.convert(np.float64(1.0).reshape(()), "warp")


def test_warp_export_clobbers_the_shared_pycapsule_new():
    """Peer fact: warp sets argtypes on ctypes.pythonapi.PyCapsule_New (process-wide)."""
    warp_of(np.arange(3.0)).__dlpack__()
    assert ctypes.pythonapi.PyCapsule_New.argtypes[2] is not ctypes.c_void_p
    # the checker's reference producer uses private prototypes and keeps working
    from dlbridge_check import refcapsule as rc

    cap = rc.RefArray(np.arange(3.0)).__dlpack__()
    assert rc.capsule_name(cap) == "dltensor"


def test_warp_round_trip_through_convert():
    x = warp_of(np.arange(6.0).reshape(2, 3))
    y = dlbridge.convert(x, "numpy")
    assert y.ctypes.data == x.ptr and y.flags.writeable  # Warp's legacy capsules: writable
    assert dlbridge.convert(x, "warp") is x


def test_warp_to_warp_and_mlx_to_warp_through_dlbridge():
    """Both work directly (wp.from_dlpack of the array): through dlbridge, too, zero-copy."""
    x = warp_of(np.arange(6.0, dtype=np.float32))
    y = wp.from_dlpack(dlbridge.from_dlpack(x))
    assert y.ptr == x.ptr and y.numpy().tolist() == list(range(6))
    mx = pytest.importorskip("mlx.core")
    m = mx.array(np.arange(6.0, dtype=np.float32))
    z = wp.from_dlpack(dlbridge.from_dlpack(m))
    assert z.numpy().tolist() == list(range(6))
    assert z.ptr == dlbridge.from_dlpack(m).data_ptr  # MLX's own memory, not a copy


@pytest.mark.skipif(
    "not has_cuda()", reason="needs a CUDA device (warp found none: no GPU or no driver here)"
)
def test_warp_cuda_array_interface_and_dlpack():
    x = warp_of(np.arange(6.0), device="cuda:0")
    cai = x.__cuda_array_interface__
    assert cai["shape"] == (6,) and cai["data"][0] == x.ptr
    t = dlbridge.from_dlpack(x)
    assert t.device == "cuda:0" and t.data_ptr == x.ptr
    assert dlbridge.to_numpy(t).tolist() == list(range(6))


def test_cpu_arrays_have_no_cuda_array_interface():
    with pytest.raises(AttributeError):
        warp_of(np.arange(3.0)).__cuda_array_interface__  # noqa: B018
