"""MLX <-> dlbridge on the CPU (``mlx[cpu]`` on Linux), both directions.

Peer facts (mlx 0.32.4, checked on this machine):
- ``array.__dlpack__`` accepts ``max_version``, ``dl_device`` and ``copy`` but always returns a
  **legacy** capsule, for memory MLX lets you write (its buffer-protocol export is writable and
  ``np.asarray(x)`` writes into it). MLX is among the libraries whose legacy capsules hand out
  their own mutable memory, so MLX arrays come out of ``dlbridge.from_dlpack`` writable
  (zero-copy), and reach consumers that ask for legacy capsules only (TensorFlow, Warp) as
  they reach them directly.
- bfloat16 goes out as a legacy capsule (NumPy then raises ``RuntimeError: Unsupported dtype in
  DLTensor``); its buffer-protocol format is the non-standard ``"bfloat16"``.
- ``mx.array(0-d ndarray)`` has shape (1,); 0-d MLX arrays made otherwise export shape ().
- ``mx.from_dlpack(x, copy=)`` (no ``device=``) always copies CPU data (``copy=False`` is a
  ValueError, not BufferError), silently narrows float64 to float32 and complex128 to
  complex64, and refuses negative strides with ValueError. ``dlbridge.convert(x, "mlx")`` goes
  through ``mx.array(tensor, dtype=...)``, which keeps the dtype.
"""

from __future__ import annotations

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")

import dlbridge  # noqa: E402
from dlb_testing import assert_values_equal, make  # noqa: E402
from dlpack_ctypes import inspect_capsule  # noqa: E402

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64"]


def mlx_of(a: np.ndarray):
    x = mx.array(a, dtype=getattr(mx, "bool_" if a.dtype == bool else a.dtype.name))
    mx.eval(x)
    return x


def address(x) -> int:
    return np.asarray(x).ctypes.data  # MLX's own (writable) buffer-protocol view


@pytest.mark.parametrize("dtype", DTYPES)
def test_mlx_to_dlbridge_is_zero_copy_and_writable(dtype):
    a = make(dtype, (3, 4))
    x = mlx_of(a)
    t = dlbridge.from_dlpack(x)
    # a legacy capsule of MLX's own, mutable memory: writable, as MLX's consumers take it
    assert (t.dtype.name, tuple(t.shape), t.readonly, t.is_copied) == (dtype, (3, 4), False, False)
    assert t.data_ptr == address(x)
    assert_values_equal(np.from_dlpack(t), a)


def test_mlx_exports_legacy_capsules_only():
    x = mlx_of(np.arange(4.0, dtype=np.float32))
    for kw in ({}, {"max_version": (1, 0)}, {"max_version": (1, 3), "copy": False}):
        assert inspect_capsule(x.__dlpack__(**kw))["versioned"] is False
    assert memoryview(x).readonly is False  # but the memory is writable


def test_mlx_views_keep_their_strides():
    x = mlx_of(np.arange(24, dtype=np.float32).reshape(4, 6))
    for v in (x.T, x[::2, ::3], x[1:, 2:]):
        mx.eval(v)
        t = dlbridge.from_dlpack(v)
        assert t.tolist() == np.array(v).tolist()
        assert tuple(t.strides) == tuple(s // 4 for s in memoryview(v).strides)


def test_mlx_bfloat16_goes_through_dlpack():
    pytest.importorskip("ml_dtypes")
    x = mx.array([1.0, 2.0], dtype=mx.bfloat16)
    t = dlbridge.from_dlpack(x)
    assert t.dtype == "bfloat16" and not t.readonly
    assert dlbridge.to_numpy(t).astype(np.float32).tolist() == [1.0, 2.0]
    y = dlbridge.convert(x, "mlx")
    assert y is x


@pytest.mark.parametrize("dtype", DTYPES)
def test_dlbridge_to_mlx_keeps_the_dtype(dtype):
    a = make(dtype, (3, 4))
    y = dlbridge.convert(a, "mlx")
    assert isinstance(y, mx.array) and y.dtype == getattr(mx, "bool_" if dtype == "bool" else dtype)
    assert_values_equal(np.array(y), a)


def test_mlx_from_dlpack_narrows_float64():  # the peer fact convert works around
    y = mx.from_dlpack(dlbridge.from_dlpack(np.arange(3.0)))
    assert y.dtype == mx.float32


def test_dlbridge_to_mlx_copies_and_refuses_copy_false():
    a = np.arange(6.0)
    y, plan = dlbridge.convert(a, "mlx", report=True)
    assert address(y) != a.ctypes.data and plan.copies == 1
    assert np.array(y).tolist() == a.tolist()
    assert dlbridge.explain(a, "mlx").copies == 1
    assert not dlbridge.explain(a, "mlx", copy=False).possible
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.convert(a, "mlx", copy=False)


def test_read_only_and_negative_strides_reach_mlx():
    a = np.arange(12.0).reshape(3, 4)[:, ::-1]
    a.flags.writeable = False
    y = dlbridge.convert(a, "mlx")
    assert np.array(y).tolist() == a.tolist() and y.dtype == mx.float64


def test_mlx_to_jax_through_dlbridge():
    """MLX's legacy capsules make a writable Tensor, which JAX takes as its own from_dlpack
    takes the MLX array."""
    jnp = pytest.importorskip("jax.numpy")
    x = mlx_of(np.arange(4.0, dtype=np.float32))
    assert jnp.from_dlpack(dlbridge.from_dlpack(x)).tolist() == [0.0, 1.0, 2.0, 3.0]
    y = dlbridge.convert(x, "jax")
    assert np.asarray(y).tolist() == [0.0, 1.0, 2.0, 3.0]
