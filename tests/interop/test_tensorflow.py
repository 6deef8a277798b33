"""Interop with TensorFlow (CPU build), both directions.

Peer facts (tensorflow-cpu 2.21, checked on this machine):
- ``tf.experimental.dlpack.from_dlpack`` takes a raw capsule only (an array object is a
  TypeError), and only a *legacy* ``"dltensor"`` capsule: a versioned capsule raises
  InvalidArgumentError. So a read-only dlbridge Tensor cannot go to TensorFlow zero-copy
  (the legacy capsule cannot say read-only, C13); ``dlbridge.convert`` copies instead.
- TensorFlow imports row-major data only; other strides raise InvalidArgumentError
  ("Invalid strides array from DLPack"), not BufferError.
- ``EagerTensor.__dlpack__`` accepts ``max_version`` but always returns a legacy capsule, so
  dlbridge imports TensorFlow tensors read-only, which is right: they are immutable.
- float8 tensors cannot be exported at all (InvalidArgumentError from TensorFlow's own
  ``__dlpack__``).
"""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import dlbridge  # noqa: E402
from dlb_testing import LAYOUTS, assert_values_equal, make  # noqa: E402
from dlpack_ctypes import inspect_capsule  # noqa: E402

#: dtypes both NumPy and TensorFlow hold (bfloat16 through ml_dtypes)
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128", "bfloat16"]


def tf_of(a: np.ndarray):
    return tf.constant(a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensorflow_to_dlbridge_is_zero_copy_and_read_only(dtype):
    a = make(dtype, (3, 4))
    x = tf_of(a)
    t = dlbridge.from_dlpack(x)
    assert t.dtype == dtype and tuple(t.shape) == (3, 4)
    assert t.readonly and not t.is_copied  # a legacy capsule of immutable memory
    assert t.data_ptr == inspect_capsule(x.__dlpack__())["data_ptr"]  # zero-copy
    assert t.device == "cpu"
    y = dlbridge.convert(x, "numpy")
    assert_values_equal(y, a)
    assert not y.flags.writeable


@pytest.mark.parametrize("dtype", DTYPES)
def test_dlbridge_to_tensorflow(dtype):
    a = make(dtype, (3, 4))
    y, plan = dlbridge.convert(a, "tensorflow", report=True)
    assert plan.copies == 0, plan
    assert y.dtype.name == dtype
    assert_values_equal(y.numpy(), a)
    # the raw route: TensorFlow's own consumer of dlbridge's legacy capsule
    z = tf.experimental.dlpack.from_dlpack(dlbridge.convert(a, "dlbridge").__dlpack__())
    assert_values_equal(z.numpy(), a)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_layouts_into_tensorflow_are_copied_when_not_row_major(layout):  # C1 C2 C3 C5 C8 C9 C10
    a = LAYOUTS[layout]("float32")
    y, plan = dlbridge.convert(a, "tensorflow", report=True)
    assert_values_equal(y.numpy(), a)
    row_major = a.flags.c_contiguous or a.size == 0
    assert plan.copies == (0 if row_major else 1), plan
    if not row_major:
        assert "row-major" in plan.reason
        with pytest.raises(BufferError, match="copy=False"):
            dlbridge.convert(a, "tensorflow", copy=False)


def test_tensorflow_itself_refuses_strided_capsules_with_its_own_error():  # C2
    # the peer limitation dlbridge's copy avoids: not a BufferError
    with pytest.raises(Exception, match="strides") as ei:
        tf.experimental.dlpack.from_dlpack(np.arange(12.0).reshape(3, 4).T.__dlpack__())
    assert not isinstance(ei.value, BufferError)


def test_read_only_source_into_tensorflow_is_copied():  # C13 C15
    a = make("float64", (3, 4))
    a.flags.writeable = False
    y, plan = dlbridge.convert(a, "tensorflow", report=True)
    assert plan.copies == 1 and "read-only" in plan.reason
    assert_values_equal(y.numpy(), a)
    with pytest.raises(BufferError, match="read-only"):
        dlbridge.convert(a, "tensorflow", copy=False)
    # the legacy capsule TensorFlow takes cannot carry the flag: a copy, never an alias
    t = dlbridge.from_dlpack(a)
    assert inspect_capsule(t.__dlpack__())["data_ptr"] != a.ctypes.data
    with pytest.raises(BufferError, match="max_version"):
        t.__dlpack__(copy=False)


def test_tensorflow_into_torch_is_copied():  # C15: torch must not get a writable alias
    torch = pytest.importorskip("torch")
    x = tf_of(make("float32", (4,)))
    y, plan = dlbridge.convert(x, "torch", report=True)
    assert isinstance(y, torch.Tensor) and plan.copies == 1
    y[0] = 100.0
    assert float(x[0]) == -4.0  # the TensorFlow tensor was not touched


def test_tensorflow_versioned_request_still_gives_a_legacy_capsule():
    cap = tf_of(make("int32", (3,))).__dlpack__(max_version=(1, 3))
    assert "dltensor" in repr(cap) and "versioned" not in repr(cap)
    t = dlbridge.from_dlpack(cap)
    assert t.readonly and t.tolist() == make("int32", (3,)).tolist()


def test_explain_returns_an_impossible_plan_when_tensorflow_refuses_float8():
    # TensorFlow raises its own InvalidArgumentError; explain returns the plan, convert raises
    # a BufferError that names it
    x = tf_of(make("float8_e4m3fn", (3,)))
    plan = dlbridge.explain(x, "numpy")
    assert not plan.possible and "InvalidArgumentError" in plan.reason
    with pytest.raises(BufferError, match="InvalidArgumentError"):
        dlbridge.convert(x, "numpy")


def test_tensorflow_float8_export_is_refused_by_tensorflow():  # C26
    x = tf_of(make("float8_e4m3fn", (3,)))
    with pytest.raises(Exception, match="(?i)float8"):
        dlbridge.from_dlpack(x)


def test_tensorflow_under_a_gpu_scope_reports_where_its_bytes_are():  # C31
    with tf.device("/GPU:0"):  # soft placement: the CPU without a GPU
        x = tf.constant([1, 2, 3], dtype=tf.int32)
    d = dlbridge.describe(x)
    assert d["device"] == "cpu" and d["dtype"] == "int32"
    assert dlbridge.convert(x, "numpy").tolist() == [1, 2, 3]


def test_explain_names_tensorflow_limits():
    plan = dlbridge.explain(np.arange(12.0).reshape(3, 4).T, "tensorflow")
    assert plan.possible and plan.copies == 1 and "row-major" in plan.reason
    plan = dlbridge.explain(np.arange(3.0), "tf", copy=False)
    assert plan.possible and plan.copies == 0
