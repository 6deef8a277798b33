"""The dtype and device exchange protocol: ``__dlpack_data_type__`` and ``__dlpack_device__``.

``dlbridge.DType`` speaks ``__dlpack_data_type__`` (a DLPack ``(code, bits, lanes)`` tuple) and
``dlbridge.Device`` speaks ``__dlpack_device__`` (a ``(device_type, device_id)`` tuple). Every
dtype or device argument takes any object that speaks them, besides names, tuples and the dtype
and device objects of the installed peers (NumPy, ml_dtypes, torch, JAX, tvm-ffi, dpnp, Paddle).
Wrong types are TypeError; a protocol value that is malformed or names nothing is ValueError.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlbridge
from dlb_testing import NUMPY_DTYPES, require_sycl

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

#: Every scalar dtype dlbridge knows (DLPack 1.3), by its NumPy / ml_dtypes name.
DTYPE_NAMES = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn", "bcomplex32",
]  # fmt: skip
ML_DTYPES_NAMES = [
    n for n in DTYPE_NAMES if n in ("bfloat16", "bcomplex32") or n.startswith("float") and "_" in n
]


class DataType:
    """A plain dtype object that speaks only the protocol."""

    def __init__(self, value):
        self.value = value

    def __dlpack_data_type__(self):
        return self.value


class Dev:
    """A plain device object that speaks only the protocol."""

    def __init__(self, value):
        self.value = value

    def __dlpack_device__(self):
        return self.value


class Refuses:
    """Protocol methods that raise: the error reaches the caller as it is."""

    def __dlpack_data_type__(self):
        raise RuntimeError("no dtype here")

    def __dlpack_device__(self):
        raise RuntimeError("no device here")


# ------------------------------------------------------------------------------ dtypes


@given(name=st.sampled_from(DTYPE_NAMES), lanes=st.integers(1, 64))
def test_dtype_protocol_round_trips(name, lanes):
    d = dlbridge.DType(name if lanes == 1 else f"{name}x{lanes}")
    triple = d.__dlpack_data_type__()
    assert type(triple) is tuple and all(type(v) is int for v in triple)
    assert triple == (d.code, d.bits, d.lanes) and triple[2] == lanes
    assert dlbridge.DType(DataType(triple)) == d
    assert dlbridge.DType(d) == d
    assert d == DataType(triple)


def test_dtype_protocol_codes():
    assert dlbridge.DType("float32").__dlpack_data_type__() == (2, 32, 1)
    assert dlbridge.DType("bfloat16").__dlpack_data_type__() == (4, 16, 1)
    assert dlbridge.DType("bool").__dlpack_data_type__() == (6, 8, 1)
    assert dlbridge.DType("float4_e2m1fn").__dlpack_data_type__() == (17, 4, 1)
    assert dlbridge.DType("bcomplex32").__dlpack_data_type__() == (18, 32, 1)  # after 1.3
    assert dlbridge.DType(DataType((1, 8, 1))) == "uint8"


@pytest.mark.parametrize(
    "value",
    [
        [2, 32, 1],  # a list, not a tuple
        (2, 32),
        (2, 32, 1, 1),
        ("2", 32, 1),
        (2.0, 32, 1),
        (2, 256, 1),  # bits overflow uint8
        (2, 32, 1 << 16),  # lanes overflow uint16
        (-1, 8, 1),
        (2, 32, 0),  # no lanes
        (99, 8, 1),  # unknown code
        (2, 24, 1),  # no float24
        (3, 64, 1),  # kDLOpaqueHandle has no element layout
        None,
        "float32",
    ],
)
def test_malformed_dtype_protocol_values_are_value_errors(value):
    with pytest.raises(ValueError, match="DataType.__dlpack_data_type__"):
        dlbridge.DType(DataType(value))
    assert dlbridge.DType("float32") != DataType(value)


def test_dtype_wrong_types_and_names():
    for wrong in (None, 3, 3.5, float, object(), (2, 32, 1), b"float32", DataType):
        with pytest.raises(TypeError, match="as a dtype"):
            dlbridge.DType(wrong)
    with pytest.raises(ValueError, match="unknown dtype name"):
        dlbridge.DType("float33")
    with pytest.raises(RuntimeError, match="no dtype here"):
        dlbridge.DType(Refuses())


def test_numpy_dtypes():
    for name in NUMPY_DTYPES:
        dt = np.dtype(name)
        assert dlbridge.DType(dt) == dlbridge.DType(dt.type) == dt.name
    assert dlbridge.DType(np.float32) == dlbridge.DType(np.dtype("=f4")) == "float32"
    assert dlbridge.DType(np.intc) == "int32"
    assert dlbridge.DType("float64") == np.dtype("float64")
    other = ">" if np.little_endian else "<"
    with pytest.raises(ValueError, match="byte order"):
        dlbridge.DType(np.dtype(f"{other}f4"))
    for unsupported in ("O", "U3", "S2", "datetime64[s]", [("a", "i4")], np.longdouble):
        with pytest.raises(ValueError):
            dlbridge.DType(np.dtype(unsupported))


def test_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for name in ML_DTYPES_NAMES:
        scalar = getattr(ml_dtypes, name, None)
        if scalar is None:
            continue  # an older ml_dtypes
        assert dlbridge.DType(scalar) == dlbridge.DType(np.dtype(scalar)) == name
    for packed in ("int4", "uint4", "int2"):
        if hasattr(ml_dtypes, packed):
            with pytest.raises(ValueError, match=packed):
                dlbridge.DType(getattr(ml_dtypes, packed))


def test_torch_dtypes():
    torch = pytest.importorskip("torch")
    names = [n for n in DTYPE_NAMES if isinstance(getattr(torch, n, None), torch.dtype)]
    assert {"bool", "int64", "uint16", "bfloat16", "float8_e4m3fn", "complex128"} <= set(names)
    for name in names:
        assert dlbridge.DType(getattr(torch, name)) == name
    assert dlbridge.DType(torch.half) == "float16"
    for unsupported in ("complex32", "qint8", "float4_e2m1fn_x2", "uint1"):
        if hasattr(torch, unsupported):
            with pytest.raises(ValueError, match=unsupported):
                dlbridge.DType(getattr(torch, unsupported))


def test_jax_dtypes():
    jnp = pytest.importorskip("jax.numpy")
    assert dlbridge.DType(jnp.float32) == "float32"
    assert dlbridge.DType(jnp.bfloat16) == "bfloat16"
    assert dlbridge.DType(jnp.float8_e4m3fn) == "float8_e4m3fn"
    assert dlbridge.DType(jnp.zeros(2, dtype=jnp.int8).dtype) == "int8"


def test_tvm_ffi_dtypes():
    tvm_ffi = pytest.importorskip("tvm_ffi")
    for name in DTYPE_NAMES:
        d = dlbridge.DType(name)
        try:
            theirs = tvm_ffi.dtype.from_dlpack_data_type(d.__dlpack_data_type__())
        except Exception:  # noqa: BLE001 - a dtype this tvm-ffi cannot name
            continue
        assert dlbridge.DType(theirs) == d
    vector = tvm_ffi.dtype("float32").with_lanes(4)
    assert dlbridge.DType(vector) == "float32x4"
    with pytest.raises(ValueError, match="code=3"):
        dlbridge.DType(tvm_ffi.dtype("handle"))
    # tvm-ffi consumes the protocol: a DType passed to an FFI function arrives as its dtype.
    echo = tvm_ffi.get_global_func("testing.echo")
    assert echo(dlbridge.DType("bfloat16")) == "bfloat16"
    assert echo(dlbridge.DType("float32x4")) == "float32x4"


def test_paddle_dtypes():
    # Paddle (3.3 and newer) speaks the protocol on its dtypes.
    paddle = pytest.importorskip("paddle")
    if not hasattr(paddle.float32, "__dlpack_data_type__"):
        pytest.skip(f"Paddle {paddle.__version__} predates the dtype exchange protocol")
    checked = set()
    for name in DTYPE_NAMES:
        theirs = getattr(paddle, name, None)
        if isinstance(theirs, paddle.dtype):
            d = dlbridge.DType(theirs)
            assert d == name and d.__dlpack_data_type__() == theirs.__dlpack_data_type__()
            checked.add(name)
    assert {"bool", "int8", "uint64", "bfloat16", "float8_e4m3fn", "complex128"} <= checked
    assert dlbridge.DType(paddle.float) == "float32"
    with pytest.raises(ValueError, match="lanes"):
        dlbridge.DType(paddle.pstring)  # (0, 0, 0): no DLPack dtype


def test_view_takes_every_dtype_spelling():
    t = dlbridge.from_dlpack(np.arange(4, dtype=np.uint16))
    spellings = [
        "bfloat16",
        dlbridge.DType("bfloat16"),
        DataType((4, 16, 1)),
        np.dtype("float16"),
        np.int16,
    ]
    for spelling in spellings:
        v = t.view(spelling)
        assert v.dtype == dlbridge.DType(spelling) and v.shape == (4,)
    with pytest.raises(TypeError, match="as a dtype"):
        t.view(2)
    with pytest.raises(ValueError):
        t.view(DataType((2, 16)))
    with pytest.raises(ValueError, match="cannot view"):
        t.view(DataType((2, 32, 1)))


# ------------------------------------------------------------------------------ devices


def test_device_protocol_round_trips():
    for spelling in ("cpu", "cuda:1", "cuda_host:0", "oneapi:2", (99, 3)):
        d = dlbridge.Device(spelling)
        pair = d.__dlpack_device__()
        assert type(pair) is tuple and pair == (d.type, d.id)
        assert dlbridge.Device(Dev(pair)) == d
        assert d == Dev(pair)


def test_tpu_device_types():
    # kDLTPU = 19 and kDLTPUHost = 20, added to the header after DLPack 1.3.
    from dlbridge_check.refcapsule import RefArray

    assert dlbridge.Device("tpu:1").__dlpack_device__() == (19, 1)
    assert dlbridge.Device((20, 0)).name == "tpu_host"
    assert str(dlbridge.Device((20, 0))) == "tpu_host:0"
    assert dlbridge.Device("tpu_host") == (20, 0) and dlbridge.Device((19, 2)).name == "tpu"
    a = np.arange(6.0).reshape(2, 3)
    # TPU pinned host memory is host memory, as CUDA's is: the host reads it in place.
    t = dlbridge.from_dlpack(RefArray(a, mode="tpu_host"))
    assert t.device == "tpu_host:0" and t.data_ptr == a.ctypes.data
    view = np.asarray(memoryview(t))  # the buffer protocol: host memory only
    assert np.shares_memory(view, a) and t.tolist() == a.tolist()
    # TPU memory is not: the host gets it only from the producer, as a copy.
    t = dlbridge.from_dlpack(RefArray(a, mode="tpu"))
    assert t.device == "tpu:0"
    with pytest.raises(BufferError):
        memoryview(t)
    copied = dlbridge.from_dlpack(RefArray(a, mode="tpu"), device="cpu")
    assert copied.device == "cpu" and copied.data_ptr != a.ctypes.data
    assert dlbridge.to_numpy(copied).tolist() == a.tolist()


def test_ascend_device_type():
    # kDLAscend = 21, added to the header after DLPack 1.3 without a version bump: named, parsed
    # and round-tripped like the TPU codes; its memory is device memory.
    from dlbridge_check.refcapsule import RefArray

    assert dlbridge.Device("ascend:1").__dlpack_device__() == (21, 1)
    assert dlbridge.Device((21, 0)).name == "ascend" and str(dlbridge.Device((21, 2))) == "ascend:2"
    a = np.arange(6.0).reshape(2, 3)
    t = dlbridge.from_dlpack(RefArray(a, mode="ascend"))
    assert t.device == "ascend:0" and t.__dlpack_device__() == (21, 0)
    assert t.data_ptr == a.ctypes.data  # passed through zero-copy, device kept
    with pytest.raises(BufferError, match="ascend:0"):
        memoryview(t)
    with pytest.raises(BufferError, match='device="cpu"'):
        t.tolist()
    # the way out the refusal names: the producer copies it to the host
    copied = dlbridge.from_dlpack(RefArray(a, mode="ascend"), device="cpu")
    assert copied.device == "cpu" and copied.data_ptr != a.ctypes.data
    assert copied.tolist() == a.tolist()
    # and out again with its device: a consumer sees kDLAscend
    from dlpack_ctypes import inspect_capsule

    assert inspect_capsule(t.__dlpack__(max_version=(1, 3)))["device"] == (21, 0)


@pytest.mark.parametrize("readonly", [False, True])
def test_unknown_flag_bits_are_ignored_on_import_and_shown_by_describe(readonly, collect):
    # Flag bits a later header may define (alignment bits are proposed) must not change how
    # the data imports: only READ_ONLY and IS_COPIED mean something to a consumer today.
    from dlpack_ctypes import FLAG_READ_ONLY, FakeManagedTensor, FakeProducer

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    extra = 1 << 5 | 1 << 63
    flags = extra | (FLAG_READ_ONLY if readonly else 0)

    def factory(**_kwargs):
        return FakeManagedTensor(data=a, shape=(2, 3), strides=(3, 1), dtype="float32",
                                 flags=flags)

    producer = FakeProducer(factory)
    described = dlbridge.describe(producer)
    assert described["capsule"]["flags"] == ["READ_ONLY"] * readonly + ["bit 5", "bit 63"]
    assert described["readonly"] is readonly
    t = dlbridge.from_dlpack(producer)
    assert t.readonly is readonly and not t.is_copied
    assert t.data_ptr == a.ctypes.data and t.tolist() == a.tolist()
    del t
    collect()
    assert producer.finalize() == len(producer.made)  # one deleter call per capsule


@pytest.mark.parametrize(
    "value",
    [[1, 0], (1,), (1, 0, 0), ("cpu", 0), (1.0, 0), (0, 0), (-2, 0), (2, -1), (1 << 40, 0), None],
)
def test_malformed_device_protocol_values_are_value_errors(value):
    with pytest.raises(ValueError, match="Dev.__dlpack_device__"):
        dlbridge.Device(Dev(value))
    assert dlbridge.Device("cpu") != Dev(value)


def test_device_wrong_types_and_values():
    for wrong in (None, 3, 3.5, object(), b"cpu", Dev):
        with pytest.raises(TypeError, match="as a device"):
            dlbridge.Device(wrong)
    for bad in ("gpu", "cuda:-1", (0, 0), (1, 2, 3), ("cpu", 0)):
        with pytest.raises(ValueError):
            dlbridge.Device(bad)
    with pytest.raises(RuntimeError, match="no device here"):
        dlbridge.Device(Refuses())


def test_torch_and_jax_devices():
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    assert dlbridge.Device(torch.device("cpu")) == "cpu"
    assert dlbridge.Device(torch.device("cuda", 1)) == "cuda:1"
    assert dlbridge.Device(jax.devices("cpu")[0]) == "cpu"


def test_tvm_ffi_devices():
    tvm_ffi = pytest.importorskip("tvm_ffi")
    assert dlbridge.Device(tvm_ffi.device("cpu")) == "cpu"
    assert dlbridge.Device(tvm_ffi.device("cuda", 1)) == "cuda:1"
    assert dlbridge.Device(tvm_ffi.device("rocm", 2)) == (10, 2)
    # tvm-ffi consumes the protocol: a Device passed to an FFI function arrives as its device.
    echo = tvm_ffi.get_global_func("testing.echo")
    back = echo(dlbridge.Device("cuda:3"))
    assert (back.dlpack_device_type(), back.index) == (2, 3)


def test_dpnp_devices():
    dpnp = require_sycl()
    x = dpnp.arange(3.0)
    assert dlbridge.Device(x.device) == dlbridge.Device(x.sycl_device) == "oneapi:0"


def test_paddle_devices():
    # Paddle (3.3 and newer) speaks the protocol on its places.
    paddle = pytest.importorskip("paddle")
    if not hasattr(paddle.CPUPlace(), "__dlpack_device__"):
        pytest.skip(f"Paddle {paddle.__version__} predates the device exchange protocol")
    assert dlbridge.Device(paddle.CPUPlace()) == "cpu"
    assert dlbridge.Device(paddle.zeros([2]).place) == "cpu"


def test_every_device_argument_takes_the_protocol():
    cpu = Dev((1, 0))
    x = np.arange(6.0)
    assert dlbridge.from_dlpack(x, device=cpu).device == "cpu"
    assert dlbridge.Tensor(x, device=cpu).device == "cpu"
    t = dlbridge.from_dlpack(x)
    assert t.to_device(cpu) is t
    assert dlbridge.convert(x, "numpy", device=cpu).tolist() == x.tolist()
    assert dlbridge.explain(x, "numpy", device=cpu).possible
    for call in (
        lambda d: dlbridge.from_dlpack(x, device=d),
        lambda d: dlbridge.Tensor(x, device=d),
        lambda d: t.to_device(d),
        lambda d: dlbridge.convert(x, "numpy", device=d),
    ):
        with pytest.raises(TypeError, match="as a device"):
            call(object())
        with pytest.raises(ValueError, match="__dlpack_device__"):
            call(Dev((0, 0)))
