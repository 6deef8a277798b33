"""Interop with dpnp: a real non-CPU device (SYCL, ``kDLOneAPI`` = 14) on a CPU-only machine.

Memory on a device dlbridge cannot reach is still a valid Tensor: it keeps device,
dtype and layout, passes through zero-copy to consumers that can take it, and refuses host
access (buffer protocol, ``__array_interface__``, ``tolist``) with a BufferError naming
``device="cpu"``.

Needs ``. scripts/env.sh`` before Python starts (OpenCL CPU runtime); skipped otherwise.
Peer facts (dpnp 0.20): arrays report ``__dlpack_device__() == (14, 0)``; ``dpnp.from_dlpack``
calls ``__dlpack__(max_version=(1, 0), dl_device=None, copy=None)``; ``x.__dlpack__(
dl_device=(1, 0), copy=True, max_version=(1, 0))`` returns a host copy flagged IS_COPIED.
"""

from __future__ import annotations

import numpy as np
import pytest

dpnp = pytest.importorskip("dpnp")

import dlbridge  # noqa: E402
from dlb_testing import require_sycl  # noqa: E402
from dlpack_ctypes import inspect_capsule  # noqa: E402


@pytest.fixture(scope="module")
def sycl_ok():
    require_sycl()


def _ptr(x) -> int:
    return inspect_capsule(x.__dlpack__(max_version=(1, 3)))["data_ptr"]


def test_dpnp_to_dlbridge_keeps_device(sycl_ok):
    x = dpnp.reshape(dpnp.arange(12, dtype=dpnp.float32), (3, 4))
    t = dlbridge.from_dlpack(x)
    assert t.device == "oneapi:0"
    assert t.device.type == 14
    assert t.__dlpack_device__() == (14, 0)
    assert t.shape == (3, 4) and t.strides == (4, 1) and t.dtype == "float32"
    assert t.data_ptr == _ptr(x)
    assert not t.readonly


def test_dpnp_tensor_refuses_host_access(sycl_ok):
    t = dlbridge.from_dlpack(dpnp.arange(6, dtype=dpnp.int32))
    for access in (lambda: memoryview(t), lambda: t.tolist(), lambda: t.__array_interface__):
        with pytest.raises(BufferError) as ei:
            access()
        assert "device=" in str(ei.value) and "cpu" in str(ei.value)
    with pytest.raises((BufferError, RuntimeError)):
        np.from_dlpack(t)  # NumPy cannot reach oneAPI memory: a clean refusal
    repr(t)  # printing never touches the data


def test_dpnp_passthrough_zero_copy(sycl_ok):
    x = dpnp.arange(10, dtype=dpnp.float64)[::2]
    t = dlbridge.from_dlpack(x)
    assert t.strides == (2,)
    r = dpnp.from_dlpack(t)
    assert r.__dlpack_device__()[0] == 14
    assert _ptr(r) == _ptr(x)
    np.testing.assert_array_equal(dpnp.asnumpy(r), np.arange(0, 10, 2, dtype=np.float64))


def test_dpnp_foreign_dl_device_export(sycl_ok):
    t = dlbridge.from_dlpack(dpnp.arange(4, dtype=dpnp.float32))
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=False)


def test_dpnp_import_to_cpu_is_correct_or_refused(sycl_ok):  # C36 C37 (full support later)
    x = dpnp.arange(8, dtype=dpnp.float32)
    try:
        t = dlbridge.from_dlpack(x, device="cpu")
    except BufferError as exc:
        assert "cpu" in str(exc)
        return
    assert t.device == "cpu"
    assert t.is_copied
    assert t.tolist() == list(range(8))
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(x, device="cpu", copy=False)
