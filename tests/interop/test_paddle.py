"""PaddlePaddle <-> dlbridge (CPU wheel), both directions.

Peer facts (paddlepaddle 3.3.1, checked on this machine):
- ``Tensor.__dlpack__`` takes ``stream``, ``max_version``, ``dl_device`` and ``copy``; asked with
  ``max_version`` it answers with a DLPack **1.3** capsule even when the consumer asked for
  (1, 0), float8 included (C26 wants a BufferError there); without it, a legacy capsule.
- ``Tensor.__dlpack_device__()`` answers ``(kDLCPU, None)`` for CPU tensors: the id is not an int.
- The type offers ``__dlpack_c_exchange_api__`` (and the older ``__c_dlpack_exchange_api__``),
  which ``dlbridge.from_dlpack`` uses first.
- ``paddle.from_dlpack(x, device=, copy=)`` asks ``max_version=(1, 2)``; it ignores READ_ONLY
  (a writable alias of read-only memory) and reads **negative strides wrongly** (garbage values,
  no error); ``dlbridge.convert`` copies in both cases.
- ``paddle.uint16`` is a real uint16 dtype that prints as ``paddle.bfloat16``, and
  ``paddle.to_tensor`` turns a NumPy uint16 array into a *bfloat16* tensor (same bits) and
  refuses uint32/uint64; ``paddle.from_dlpack`` keeps them.
- A tensor with ``stop_gradient=False`` refuses ``__dlpack__`` with a BufferError naming detach,
  but its C exchange API exports it; dlbridge, which uses that API first, applies Paddle's own
  rule after the export (a BufferError naming ``.detach()``), and ``dlbridge.convert`` asks for
  ``detach=True``.
- Importing paddle warns "No ccache found" (UserWarning) and takes about 3 s.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    paddle = pytest.importorskip("paddle")

import dlbridge
from dlb_testing import assert_values_equal, make
from dlpack_ctypes import inspect_capsule

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def paddle_of(a: np.ndarray):
    # not paddle.to_tensor: it turns uint16 data into bfloat16 and refuses uint32/uint64
    return paddle.from_dlpack(np.array(a, copy=True))


def test_paddle_to_tensor_reads_uint16_as_bfloat16():  # peer fact
    x = paddle.to_tensor(np.array([1, 16256], dtype=np.uint16))
    assert dlbridge.from_dlpack(x).dtype == "bfloat16"
    assert x.astype(paddle.float32).numpy()[1] == 1.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_paddle_to_dlbridge_zero_copy_writable(dtype):
    a = make(dtype, (3, 4))
    x = paddle_of(a)
    t = dlbridge.from_dlpack(x)
    assert (t.dtype.name, tuple(t.shape), t.readonly, t.is_copied) == (dtype, (3, 4), False, False)
    assert t.data_ptr == x.data_ptr()
    assert_values_equal(np.from_dlpack(t), a)


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_paddle_extended_dtypes(dtype):
    pytest.importorskip("ml_dtypes")
    x = paddle.to_tensor(np.arange(6, dtype=np.float32)).astype(getattr(paddle, dtype))
    t = dlbridge.from_dlpack(x)
    assert t.dtype.name == dtype and t.data_ptr == x.data_ptr()
    got = dlbridge.to_numpy(t).astype(np.float32)
    assert got.tolist() == x.astype(paddle.float32).numpy().tolist()


def test_paddle_strided_views_keep_strides():
    x = paddle.to_tensor(np.arange(24.0).reshape(4, 6))
    for v in (x.T, x[::2, ::3], x[1:, 2:]):
        t = dlbridge.from_dlpack(v)
        assert t.data_ptr == v.data_ptr()
        assert tuple(t.strides) == tuple(v.strides)
        assert t.tolist() == v.numpy().tolist()


def test_paddle_capsules_are_versioned_1_3_whatever_was_asked():
    x = paddle.to_tensor(np.arange(4.0))
    assert inspect_capsule(x.__dlpack__(max_version=(1, 0)))["version"] == (1, 3)  # peer fact
    assert inspect_capsule(x.__dlpack__())["versioned"] is False


def test_paddle_device_id_is_none_and_dlbridge_copes():
    x = paddle.to_tensor(np.arange(6.0))
    kind, ident = x.__dlpack_device__()
    assert int(kind) == 1 and ident is None  # peer fact: not an int
    for kw in ({"device": "cpu"}, {"copy": True}, {"device": "cpu", "copy": True}):
        t = dlbridge.from_dlpack(x, **kw)
        assert t.device == "cpu" and t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_paddle_exchange_api_is_offered():
    assert hasattr(type(paddle.to_tensor([1.0])), "__dlpack_c_exchange_api__")
    d = dlbridge.describe(paddle.to_tensor(np.arange(3.0)))
    assert "__dlpack_c_exchange_api__" in d["protocols"] and d["capsule_version"] == "1.3"


def test_paddle_requires_grad_is_refused_with_detach():
    x = paddle.to_tensor(np.arange(3.0))
    x.stop_gradient = False
    with pytest.raises(BufferError, match="detach"):
        x.__dlpack__()  # paddle's own export refuses (its C exchange API does not)
    for through_dlbridge in (dlbridge.from_dlpack, dlbridge.Tensor, dlbridge.to_numpy):
        with pytest.raises(BufferError, match=r"stop_gradient=False.*\.detach\(\)"):
            through_dlbridge(x)  # paddle's C exchange API would export it
    t = dlbridge.from_dlpack(x.detach())  # the way out: no copy
    assert t.data_ptr == x.data_ptr() and t.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(BufferError, match="detach"):
        dlbridge.convert(x, "numpy")
    y = dlbridge.convert(x, "numpy", detach=True)
    assert y.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dlbridge_to_paddle(dtype):
    a = make(dtype, (3, 4))
    y, plan = dlbridge.convert(a, "paddle", report=True)
    assert plan.copies == 0, plan
    assert isinstance(y, paddle.Tensor) and y.data_ptr() == a.ctypes.data
    assert_values_equal(y.numpy(), a)


def test_paddle_consumer_of_a_tensor_is_zero_copy():
    a = np.arange(12.0).reshape(3, 4)
    t = dlbridge.from_dlpack(a)
    p = paddle.from_dlpack(t)
    assert p.data_ptr() == t.data_ptr
    assert p.numpy().tolist() == a.tolist()


def test_negative_strides_are_copied_for_paddle():
    a = np.arange(12.0).reshape(3, 4)[:, ::-1]
    y, plan = dlbridge.convert(a, "paddle", report=True)
    assert plan.copies == 1 and "negative strides" in str(plan)
    assert y.numpy().tolist() == a.tolist()
    with pytest.raises(BufferError, match="copy"):
        dlbridge.convert(a, "paddle", copy=False)


def test_read_only_data_reaches_paddle_only_as_a_copy():
    a = np.arange(6.0)
    a.flags.writeable = False
    y, plan = dlbridge.convert(a, "paddle", report=True)
    assert plan.copies == 1 and y.data_ptr() != a.ctypes.data
    with pytest.raises(BufferError):
        dlbridge.convert(a, "paddle", copy=False)
    # paddle's own consumer ignores the READ_ONLY flag of the versioned capsule (peer fact)
    p = paddle.from_dlpack(dlbridge.from_dlpack(a))
    assert p.data_ptr() == a.ctypes.data


def test_paddle_to_other_libraries_through_convert():
    x = paddle.to_tensor(np.arange(6.0).reshape(2, 3))
    y = dlbridge.convert(x, "numpy")
    assert y.ctypes.data == x.data_ptr() and y.flags.writeable
    assert dlbridge.convert(x, "paddle") is x
