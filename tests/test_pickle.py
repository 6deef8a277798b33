"""Pickling a Tensor: protocol 5 out of band (zero-copy both ways), in band otherwise, every
dtype and flag exact, non-contiguous layouts as compact copies, devices, and a reconstructor
that treats its input as untrusted."""

from __future__ import annotations

import copy
import ctypes
import pickle

import numpy as np
import pytest

import dlbridge
from dlb_testing import NUMPY_DTYPES, make, require_sycl
from dlpack_ctypes import FLAG_IS_SUBBYTE_TYPE_PADDED, FakeManagedTensor, inspect_capsule

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def raw_bytes(t) -> bytes:
    """The bytes of a host tensor's elements in C order, read through a DLPack export."""
    c = t.copy()
    if not c.nbytes:
        return b""
    return ctypes.string_at(inspect_capsule(c.__dlpack__(max_version=(1, 3)))["data_ptr"], c.nbytes)


def assert_same_tensor(u, t) -> None:
    assert type(u) is dlbridge.Tensor
    assert (u.shape, u.dtype, u.readonly, u.dim_names) == (
        t.shape,
        t.dtype,
        t.readonly,
        t.dim_names,
    )
    assert u.nbytes == t.nbytes
    assert raw_bytes(u) == raw_bytes(t)


def out_of_band(t, protocol=5):
    """Pickle with a buffer callback where the protocol has one (5), in band otherwise."""
    buffers = []
    callback = buffers.append if protocol >= 5 else None
    data = pickle.dumps(t, protocol=protocol, buffer_callback=callback)
    return data, buffers


# ----------------------------------------------------------------------------- out of band
def test_protocol5_sends_data_out_of_band_and_loads_zero_copy():
    a = np.arange(1 << 24, dtype=np.float32)  # 64 MiB
    t = dlbridge.from_dlpack(a)
    data, buffers = out_of_band(t)
    assert len(data) < 1024
    assert len(buffers) == 1 and isinstance(buffers[0], pickle.PickleBuffer)
    assert buffers[0].raw().nbytes == a.nbytes
    u = pickle.loads(data, buffers=buffers)
    assert u.data_ptr == t.data_ptr == a.ctypes.data
    assert not u.readonly
    assert_same_tensor(u, t)


@pytest.mark.parametrize(
    "wrap, readonly",
    [
        (lambda b: b, False),
        (lambda b: bytearray(b.raw()), False),
        (lambda b: bytes(b.raw()), True),
        (lambda b: b.raw().toreadonly(), True),
    ],
    ids=["PickleBuffer", "bytearray", "bytes", "readonly-memoryview"],
)
def test_load_views_whatever_buffer_it_is_given(wrap, readonly):
    t = dlbridge.from_dlpack(make("int32", (3, 4)))
    data, buffers = out_of_band(t)
    given_buffer = wrap(buffers[0])
    u = pickle.loads(data, buffers=[given_buffer])
    assert u.readonly is readonly
    assert u.data_ptr == np.frombuffer(given_buffer, dtype=np.uint8).ctypes.data
    assert raw_bytes(u) == raw_bytes(t)
    del given_buffer, buffers
    assert raw_bytes(u) == raw_bytes(t)  # the tensor keeps the buffer alive


def test_loaded_tensor_writes_into_the_buffer_it_views():
    t = dlbridge.from_dlpack(np.zeros(4, dtype=np.int64))
    data, buffers = out_of_band(t)
    target = bytearray(buffers[0].raw())
    u = pickle.loads(data, buffers=[target])
    np.from_dlpack(u)[2] = 7
    assert np.frombuffer(target, dtype=np.int64).tolist() == [0, 0, 7, 0]


def test_read_only_source_loads_read_only_even_from_a_writable_buffer():
    a = make("float64", (5,))
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    assert t.readonly
    data, buffers = out_of_band(t)
    u = pickle.loads(data, buffers=[bytearray(buffers[0].raw())])
    assert u.readonly
    assert memoryview(u).readonly
    assert not np.from_dlpack(u).flags.writeable


def test_buffer_callback_returning_true_keeps_data_in_band():
    t = dlbridge.from_dlpack(make("int16", (100,)))
    data = pickle.dumps(t, protocol=5, buffer_callback=lambda b: True)
    assert len(data) > t.nbytes
    assert_same_tensor(pickle.loads(data), t)


# ----------------------------------------------------------------------------- in band
@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
@pytest.mark.parametrize("readonly", [False, True])
def test_in_band_protocols_carry_the_bytes(protocol, readonly):
    a = make("complex64", (4, 3))
    a.flags.writeable = not readonly
    t = dlbridge.from_dlpack(a)
    data = pickle.dumps(t, protocol=protocol)
    assert len(data) > a.nbytes
    u = pickle.loads(data)
    assert_same_tensor(u, t)
    assert u.data_ptr != t.data_ptr
    if not readonly:
        np.from_dlpack(u)[0, 0] = 99  # writable, and not the source's memory
        assert a[0, 0] == make("complex64", (4, 3))[0, 0]


def test_copy_and_deepcopy_make_independent_tensors():
    a = make("int32", (2, 2))
    t = dlbridge.from_dlpack(a)
    for u in (copy.copy(t), copy.deepcopy(t)):
        assert_same_tensor(u, t)
        assert u.data_ptr != t.data_ptr


# ----------------------------------------------------------------------------- layouts
def test_fortran_order_travels_as_is():
    a = np.asfortranarray(make("float32", (4, 250)))
    t = dlbridge.from_dlpack(a)
    data, buffers = out_of_band(t)
    u = pickle.loads(data, buffers=buffers)
    assert u.strides == t.strides == (1, 4)
    assert u.data_ptr == t.data_ptr
    assert np.array_equal(np.from_dlpack(u), a)


@pytest.mark.parametrize(
    "index",
    [np.s_[:, ::-1], np.s_[::2, 1:], np.s_[::-3, ::7]],
    ids=["negative", "step", "sparse"],
)
def test_non_contiguous_travels_as_a_compact_c_order_copy(index):
    base = make("float64", (60, 50))
    view = base[index]
    t = dlbridge.from_dlpack(view)
    data, buffers = out_of_band(t)
    assert buffers[0].raw().nbytes == view.nbytes  # the elements, not the span they cover
    u = pickle.loads(data, buffers=buffers)
    assert u.is_c_contiguous and u.shape == view.shape
    assert np.array_equal(np.from_dlpack(u), view)


@pytest.mark.parametrize("shape", [(), (0,), (0, 5), (3, 0, 2)])
@pytest.mark.parametrize("protocol", [4, 5])
def test_zero_d_and_zero_size(shape, protocol):
    t = dlbridge.from_dlpack(make("int64", shape))
    data, buffers = out_of_band(t, protocol)
    u = pickle.loads(data, buffers=buffers)
    assert_same_tensor(u, t)
    assert np.array_equal(np.from_dlpack(u), make("int64", shape))


# ----------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_every_numpy_dtype_round_trips(dtype):
    a = make(dtype, (3, 5))
    t = dlbridge.from_dlpack(a)
    for protocol in (4, 5):
        data, buffers = out_of_band(t, protocol)
        u = pickle.loads(data, buffers=buffers)
        assert_same_tensor(u, t)
        assert np.array_equal(np.from_dlpack(u), a)


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_torch_low_precision_dtypes_round_trip(name):
    torch = pytest.importorskip("torch")
    x = torch.arange(-8, 8, dtype=torch.float32).reshape(4, 4).to(getattr(torch, name))
    t = dlbridge.from_dlpack(x)
    data, buffers = out_of_band(t)
    u = pickle.loads(data, buffers=buffers)
    assert_same_tensor(u, t)
    # (torch imports float8 only through DLPack 1.0 capsules, which cannot carry it: compare
    # the bytes.)
    assert raw_bytes(u) == x.view(torch.uint8).numpy().tobytes()


@pytest.mark.parametrize(
    "name",
    [
        "float8_e3m4",
        "float8_e4m3",
        "float8_e4m3b11fnuz",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "float8_e8m0fnu",
    ],
)
def test_other_float8_dtypes_round_trip(name):
    t = dlbridge.from_dlpack(np.arange(24, dtype=np.uint8).reshape(2, 12)).view(name)
    for protocol in (2, 5):
        data, buffers = out_of_band(t, protocol)
        assert_same_tensor(pickle.loads(data, buffers=buffers), t)


@pytest.mark.parametrize("name, code, bits", [("float4_e2m1fn", 17, 4), ("float6_e2m3fn", 15, 6)])
@pytest.mark.parametrize("padded", [False, True])
def test_sub_byte_dtypes_round_trip_packed_and_padded(name, code, bits, padded):
    count = 7
    nbytes = count if padded else (count * bits + 7) // 8
    raw = (np.arange(nbytes, dtype=np.uint8) * 37) & (0x0F if padded and bits == 4 else 0xFF)
    # A hand-built DLPack producer: NumPy cannot hold sub-byte elements itself.
    producer = FakeManagedTensor(
        data=raw,
        shape=(count,),
        strides=(1,),
        dtype=(code, bits, 1),
        flags=FLAG_IS_SUBBYTE_TYPE_PADDED if padded else 0,
    )
    t = dlbridge.from_dlpack(producer.capsule())
    assert t.nbytes == nbytes
    for protocol in (3, 5):
        data, buffers = out_of_band(t, protocol)
        u = pickle.loads(data, buffers=buffers)
        assert_same_tensor(u, t)
        flags = inspect_capsule(u.__dlpack__(max_version=(1, 3)))["flags"]
        assert bool(flags & FLAG_IS_SUBBYTE_TYPE_PADDED) is padded
        assert raw_bytes(u) == raw.tobytes()
    del t, u
    producer.finalize()


def test_dim_names_round_trip():
    pa = pytest.importorskip("pyarrow")
    ty = pa.fixed_shape_tensor(pa.int32(), [2, 3], dim_names=["H", "W"])
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(24, dtype=np.int32)), 6)
    t = dlbridge.from_dlpack(pa.ExtensionArray.from_storage(ty, storage))
    assert t.dim_names == ("", "H", "W")
    for protocol in (2, 5):
        data, buffers = out_of_band(t, protocol)
        u = pickle.loads(data, buffers=buffers)
        assert_same_tensor(u, t)
        assert u.dim_names == ("", "H", "W")


# ----------------------------------------------------------------------------- devices
def test_oneapi_tensor_is_refused_at_dump_time():
    dpnp = require_sycl()
    t = dlbridge.from_dlpack(dpnp.arange(6.0))
    assert str(t.device) == "oneapi:0"
    with pytest.raises(BufferError, match=r'to_device\("cpu"\)'):
        pickle.dumps(t, protocol=5)


def cuda_tagged_tensor():
    """A tensor tagged kDLCUDA without a GPU: a hand-built DLPack capsule whose data pointer
    is host memory (a test double; nothing ever reads through it as device memory)."""
    backing = np.zeros(4, dtype=np.float32)
    producer = FakeManagedTensor(data=backing, shape=(4,), strides=(1,), device=(2, 0))
    return dlbridge.from_dlpack(producer.capsule()), producer


def test_cuda_tensor_without_a_driver_cannot_be_staged(no_cuda_gpu):
    t, producer = cuda_tagged_tensor()
    assert str(t.device) == "cuda:0"
    with pytest.raises(BufferError, match="CUDA"):
        pickle.dumps(t, protocol=5)
    del t
    producer.finalize()


def test_cuda_pickle_without_the_device_names_it_at_load(no_cuda_gpu):
    t = dlbridge.from_dlpack(np.arange(4, dtype=np.float32))
    reconstructor, (payload, metadata) = t.__reduce_ex__(5)
    metadata = metadata[:-1] + ((2, 0),)  # as written by a process with CUDA device 0
    with pytest.raises(BufferError, match="cuda:0"):
        reconstructor(payload, metadata)


# ----------------------------------------------------------------------------- untrusted input
def reduced(t):
    reconstructor, (payload, metadata) = t.__reduce_ex__(5)
    return reconstructor, payload, list(metadata)


def test_reduce_names_no_address():
    t = dlbridge.from_dlpack(make("float32", (3, 4)))
    _, _, metadata = reduced(t)
    flat = repr(metadata)
    assert str(t.data_ptr) not in flat and hex(t.data_ptr) not in flat


@pytest.mark.parametrize(
    "field, value",
    [
        (0, 2),  # format version
        (1, (2, 7, 1)),  # float of 7 bits
        (1, (99, 32, 1)),  # unknown type code
        (1, (2, 32, 0)),  # zero lanes
        (1, (2, 64, 1)),  # twice the item size: the bytes are too few
        (2, [3, 5]),  # more elements than bytes
        (2, [3, 3]),  # fewer elements than bytes
        (2, [-3, 4]),  # negative extent
        (2, [1 << 62, 1 << 62]),  # overflow
        (3, [8, 1]),  # strides reaching past the end
        (3, [-4, 1]),  # strides reaching before the start
        (3, [1, 1]),  # overlapping
        (4, 4),  # byte offset
        (4, 1 << 63),
        (5, "yes"),
        (7, ["a"]),  # one name for two dimensions
        (8, (14, 0)),  # a device pickles never restore to
        (8, "cuda"),
    ],
)
def test_tampered_metadata_is_refused(field, value):
    reconstructor, payload, metadata = reduced(dlbridge.from_dlpack(make("float32", (3, 4))))
    metadata[field] = value
    with pytest.raises((ValueError, BufferError)):
        reconstructor(payload, tuple(metadata))


@pytest.mark.parametrize(
    "payload",
    [b"\0" * 47, b"\0" * 49, bytearray(0), 12345, None, memoryview(bytes(96))[::2]],
    ids=["short", "long", "empty", "int-address", "none", "strided"],
)
def test_tampered_buffer_is_refused(payload):
    reconstructor, _, metadata = reduced(dlbridge.from_dlpack(make("float32", (3, 4))))
    with pytest.raises((ValueError, BufferError)):
        reconstructor(payload, tuple(metadata))


def test_metadata_that_is_not_a_tuple_is_refused():
    reconstructor, payload, _ = reduced(dlbridge.from_dlpack(make("float32", (2,))))
    for bad in (None, (), [1, 2], "metadata", {"shape": (2,)}):
        with pytest.raises(ValueError):
            reconstructor(payload, bad)


ints = st.one_of(
    st.integers(-3, 70),
    st.sampled_from([-(1 << 63), (1 << 62), (1 << 63) - 1, 1 << 31]),
)


@settings(max_examples=300, deadline=None)
@given(
    shape=st.lists(ints, max_size=4),
    strides=st.lists(ints, max_size=4),
    offset=st.one_of(st.integers(0, 80), st.just(1 << 40)),
    dtype=st.tuples(
        st.integers(0, 20), st.sampled_from([1, 4, 6, 8, 16, 32, 64, 128]), st.integers(0, 3)
    ),
    length=st.integers(0, 80),
    padded=st.booleans(),
)
def test_no_tampering_yields_a_view_outside_the_buffer(
    shape, strides, offset, dtype, length, padded
):
    _, _, metadata = reduced(dlbridge.from_dlpack(make("uint8", (4,))))
    metadata[1:6] = [dtype, shape, strides, offset, padded]
    payload = bytearray(range(length))
    try:
        u = dlbridge._native._rebuild(payload, tuple(metadata))
    except (ValueError, BufferError):
        return
    # Accepted: the elements must be exactly the bytes given, and readable.
    assert u.nbytes == length
    assert u.shape == tuple(shape)
    if u.size:
        start = np.frombuffer(payload, dtype=np.uint8).ctypes.data
        assert u.data_ptr == start
        assert len(raw_bytes(u)) == length


def test_misaligned_buffer_is_copied_once_aligned():
    t = dlbridge.from_dlpack(make("float64", (3, 4)))
    data, buffers = out_of_band(t)
    storage = bytearray(t.nbytes + 1)
    shifted = memoryview(storage)[1:]
    shifted[:] = buffers[0].raw()
    u = pickle.loads(data, buffers=[shifted])
    assert u.is_copied and u.data_ptr % 8 == 0
    assert np.array_equal(np.from_dlpack(u), make("float64", (3, 4)))


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_dtypes_pickle_by_name(protocol):
    names = [str(dlbridge.from_dlpack(make(n, (2,))).dtype) for n in NUMPY_DTYPES]
    for name in [*names, "bfloat16", "float8_e4m3fn", "float4_e2m1fn", "float32x4", "complex64x2"]:
        dtype = dlbridge.DType(name)
        loaded = pickle.loads(pickle.dumps(dtype, protocol=protocol))
        assert type(loaded) is dlbridge.DType
        assert loaded == dtype and loaded.name == name and hash(loaded) == hash(dtype)
        assert (loaded.code, loaded.bits, loaded.lanes) == (dtype.code, dtype.bits, dtype.lanes)
    assert dlbridge.DType("float32x4").lanes == 4
    for bad in ["float32x1", "float32x04", "float32x"]:
        with pytest.raises(ValueError):
            dlbridge.DType(bad)


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_devices_pickle_as_their_type_and_id(protocol):
    for device in ["cpu", "cuda:1", "cuda_host", "oneapi:2", (99, 3)]:
        d = dlbridge.Device(device)
        loaded = pickle.loads(pickle.dumps(d, protocol=protocol))
        assert type(loaded) is dlbridge.Device
        assert loaded == d and (loaded.type, loaded.id) == (d.type, d.id)
    t = dlbridge.from_dlpack(make("float32", (3,)))
    assert pickle.loads(pickle.dumps((t.dtype, t.device))) == (t.dtype, t.device)
