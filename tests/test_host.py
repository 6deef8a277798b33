"""``dlbridge.to_numpy``, ``dlbridge.to_memoryview`` and ``dlbridge.to_host`` (C36 C37)."""

from __future__ import annotations

import numpy as np
import pytest

import dlbridge
from dlb_testing import require_sycl
from dlbridge import namespaces as nsmod


def ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _sources():
    """(name, factory) for one 2x3 float32 array of each installed library."""
    out = [("numpy", lambda: np.arange(6, dtype=np.float32).reshape(2, 3))]
    if nsmod.get("torch").installed():
        out.append(
            (
                "torch",
                lambda: (
                    __import__("torch").arange(6, dtype=__import__("torch").float32).reshape(2, 3)
                ),
            )
        )
    if nsmod.get("jax").installed():
        out.append(
            ("jax", lambda: __import__("jax.numpy").numpy.arange(6, dtype="float32").reshape(2, 3))
        )
    if nsmod.get("array_api_strict").installed():
        out.append(
            (
                "array_api_strict",
                lambda: __import__("array_api_strict").reshape(
                    __import__("array_api_strict").arange(
                        6, dtype=__import__("array_api_strict").float32
                    ),
                    (2, 3),
                ),
            )
        )
    if nsmod.get("tvm_ffi").installed():
        out.append(
            (
                "tvm_ffi",
                lambda: __import__("tvm_ffi").from_dlpack(
                    np.arange(6, dtype=np.float32).reshape(2, 3)
                ),
            )
        )
    out.append(("dlbridge", lambda: dlbridge.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))))
    out.append(("memoryview", lambda: memoryview(np.arange(6, dtype=np.float32).reshape(2, 3))))
    return out


SOURCES = _sources()


@pytest.mark.parametrize("name,factory", SOURCES, ids=[n for n, _ in SOURCES])
def test_to_numpy_from_any_library(name, factory):
    x = factory()
    y = dlbridge.to_numpy(x)
    assert isinstance(y, np.ndarray)
    np.testing.assert_array_equal(y, np.arange(6, dtype=np.float32).reshape(2, 3))


def test_to_numpy_keeps_readonly_and_copies_on_request():
    a = np.arange(4.0)
    a.flags.writeable = False
    assert dlbridge.to_numpy(a) is a
    c = dlbridge.to_numpy(a, copy=True)
    assert c.flags.writeable and ptr(c) != ptr(a)


def test_to_numpy_of_pyarrow():
    pa = pytest.importorskip("pyarrow")
    y = dlbridge.to_numpy(pa.array([1, 2, 3], type=pa.int16()), copy=False)
    assert y.dtype == np.int16 and y.tolist() == [1, 2, 3] and not y.flags.writeable
    b = dlbridge.to_numpy(pa.array([True, False, True]))  # bit-packed: unpacked by a copy
    assert b.dtype == np.bool_ and b.tolist() == [True, False, True]
    with pytest.raises(BufferError):
        dlbridge.to_numpy(pa.array([True, False]), copy=False)


def test_to_numpy_of_device_data():  # C37
    dpnp = require_sycl()
    x = dpnp.reshape(dpnp.arange(6, dtype=dpnp.int64), (2, 3)).T
    y = dlbridge.to_numpy(x)
    np.testing.assert_array_equal(y, np.arange(6).reshape(2, 3).T)
    assert y.flags.writeable
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.to_numpy(x, copy=False)


def test_to_numpy_bfloat16():
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    t = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    y = dlbridge.to_numpy(t)
    assert y.dtype.name == "bfloat16" and y.astype(np.float32).tolist() == [1.5, -2.0]


def test_to_numpy_refuses_torch_state():
    torch = pytest.importorskip("torch")
    with pytest.raises(BufferError, match="detach"):
        dlbridge.to_numpy(torch.ones(2, requires_grad=True))


# ---------------------------------------------------------------------------------- memoryview


def test_to_memoryview_values_layout_and_flags():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::-1]
    m = dlbridge.to_memoryview(a)
    assert isinstance(m, memoryview)
    assert m.format == "i" and m.shape == (3, 4) and m.strides == (16, -4)
    assert m.tolist() == a.tolist() and not m.readonly
    a.flags.writeable = False
    assert dlbridge.to_memoryview(a).readonly
    c = dlbridge.to_memoryview(a, copy=True)
    assert c.c_contiguous and not c.readonly and c.tolist() == a.tolist()


def test_to_memoryview_from_torch_aliases():
    torch = pytest.importorskip("torch")
    t = torch.arange(4, dtype=torch.float64)
    m = dlbridge.to_memoryview(t)
    m[0] = 9.0
    assert float(t[0]) == 9.0


def test_to_memoryview_of_device_data():
    dpnp = require_sycl()
    m = dlbridge.to_memoryview(dpnp.arange(4, dtype=dpnp.float32))
    assert m.format == "f" and m.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_to_memoryview_without_a_format():
    torch = pytest.importorskip("torch")
    with pytest.raises(BufferError, match="bfloat16"):
        dlbridge.to_memoryview(torch.ones(2, dtype=torch.bfloat16))


# ---------------------------------------------------------------------------------- to_host


def test_to_host_returns_host_arrays_as_they_are(x64):
    a = np.arange(3.0)
    assert dlbridge.to_host(a) is a
    t = dlbridge.Tensor(a)
    assert dlbridge.to_host(t) is t
    if nsmod.get("torch").installed():
        import torch

        tt = torch.arange(3.0)
        assert dlbridge.to_host(tt) is tt
    import jax.numpy as jnp

    j = jnp.arange(3.0)
    assert dlbridge.to_host(j) is j
    if nsmod.get("pyarrow").installed():
        import pyarrow as pa

        p = pa.array([1, 2])
        assert dlbridge.to_host(p) is p
    if nsmod.get("array_api_strict").installed():
        import array_api_strict as xps

        x = xps.arange(3)
        assert dlbridge.to_host(x) is x


def test_to_host_of_buffers_is_numpy():
    y = dlbridge.to_host(memoryview(b"\x01\x02"))
    assert isinstance(y, np.ndarray) and y.tolist() == [1, 2]
    with pytest.raises(TypeError):
        dlbridge.to_host([1, 2])


def test_to_host_of_device_libraries():
    dpnp = require_sycl()
    x = dpnp.arange(4, dtype=dpnp.float32)
    y = dlbridge.to_host(x)  # dpnp has no host arrays: NumPy
    assert isinstance(y, np.ndarray) and y.tolist() == [0.0, 1.0, 2.0, 3.0]
    t = dlbridge.to_host(dlbridge.Tensor(x))  # a dlbridge Tensor stays one
    assert (
        isinstance(t, dlbridge.Tensor) and t.device == "cpu" and t.tolist() == [0.0, 1.0, 2.0, 3.0]
    )
    if nsmod.get("tvm_ffi").installed():
        import tvm_ffi

        v = dlbridge.to_host(tvm_ffi.from_dlpack(x))
        assert isinstance(v, tvm_ffi.Tensor) and str(v.device) == "cpu:0"
        assert np.from_dlpack(v).tolist() == [0.0, 1.0, 2.0, 3.0]
