"""dlbridge Tensors through a real Dask distributed cluster (two worker processes): ``scatter``,
``submit``, ``gather``, and the frames Dask's serialization makes of a Tensor.

Peer facts this file relies on (distributed 2026.8): ``distributed.protocol.serialize`` tries its
``dask`` family (types registered with ``dask_serialize``), then ``pickle``, which pickles with
protocol 5 and a buffer callback: each out-of-band buffer becomes its own frame (a memoryview of
the object's memory) and the header records whether it was writable; on load a writable frame
for a read-only buffer is only flagged read-only, a read-only frame for a writable buffer is
copied. The TCP comm reads the first buffer of a message into the same allocation as the
message's header, so that frame's address is usually not a multiple of 8. dlbridge registers
no Dask serializer: its pickling already gives Dask one frame over the Tensor's memory (a
serializer could not move the frame's address either). Task functions are defined inside the
tests (cloudpickle sends them by value: the workers cannot import this module).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import dask  # noqa: E402
from distributed.protocol import deserialize, dumps, loads, serialize, to_serialize  # noqa: E402

import dlbridge  # noqa: E402
from dlb_testing import make, make_tensor, raw_values  # noqa: E402


@pytest.fixture(scope="module")
def client():
    """A LocalCluster of two single-threaded worker processes for the module, closed after."""
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as c:
        yield c


def address(buffer) -> int:
    """Address of the first byte of a buffer-protocol object (a Dask frame)."""
    return np.frombuffer(buffer, dtype=np.uint8).ctypes.data


def named_tensor() -> dlbridge.Tensor:
    """A read-only (8, 16, 16) float32 Tensor with dim_names, imported from pyarrow."""
    pa = pytest.importorskip("pyarrow")
    ty = pa.fixed_shape_tensor(pa.float32(), [16, 16], dim_names=["H", "W"])
    values = pa.array(make("float32", (8 * 16 * 16,)))
    storage = pa.FixedSizeListArray.from_arrays(values, 256)
    t = dlbridge.from_dlpack(pa.ExtensionArray.from_storage(ty, storage))
    assert t.readonly and t.dim_names == ("", "H", "W")
    return t


# --------------------------------------------------------------------------------------------
# Dask's serialization, in this process: one frame over the Tensor's memory, no copy
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("readonly", [False, True])
def test_serialize_puts_the_tensor_memory_in_one_frame_and_loads_views_it(readonly):
    ref = make("float64", (512, 256))
    ref.flags.writeable = not readonly
    t = dlbridge.from_dlpack(ref)
    header, frames = serialize(t)
    assert header["serializer"] == "pickle" and header["writeable"] == (not readonly,)
    assert len(frames) == 2 and len(frames[0]) < 1024  # the pickle holds metadata only
    assert address(frames[1]) == t.data_ptr and frames[1].nbytes == t.nbytes  # no copy out
    back = deserialize(header, frames)
    assert isinstance(back, dlbridge.Tensor) and back.readonly == readonly
    assert back.data_ptr == t.data_ptr  # no copy in: the loaded Tensor views the frame
    np.testing.assert_array_equal(np.from_dlpack(back), ref)


def test_a_frame_unaligned_for_the_item_size_is_realigned_by_one_copy():
    """Dask's TCP comm reads the first buffer of a message together with the message header
    into one allocation, so a frame usually arrives at an address that is not a multiple of
    the item size; the loaded Tensor is then an aligned copy (as every unaligned import is)."""
    ref = make("float64", (64, 32))
    header, frames = serialize(dlbridge.from_dlpack(ref))
    arrived = memoryview(bytearray(frames[1].nbytes + 3))[3:]  # the frame at an odd address
    arrived[:] = frames[1].cast("B")
    back = deserialize(header, [frames[0], arrived])
    assert back.is_copied and back.data_ptr % 8 == 0 and back.data_ptr != address(arrived)
    np.testing.assert_array_equal(np.from_dlpack(back), ref)


def test_message_frames_carry_the_tensor_memory():
    """What a comm sends: ``dumps`` of a message with a Tensor gives frames, one of them the
    Tensor's own memory; ``loads`` of frames that arrived builds a Tensor over them."""
    t = dlbridge.from_dlpack(make("int32", (1024, 256)))
    with dask.config.set({"distributed.comm.compression": None}):  # frames as they are
        frames = dumps({"op": "update", "data": to_serialize(t)})
    assert [address(f) for f in frames if memoryview(f).nbytes == t.nbytes] == [t.data_ptr]
    received = [bytearray(f) for f in frames]  # a socket's read: fresh writable bytes
    back = loads(received)["data"]
    assert isinstance(back, dlbridge.Tensor) and not back.readonly
    assert back.data_ptr in {address(f) for f in received}
    np.testing.assert_array_equal(np.from_dlpack(back), np.from_dlpack(t))


# --------------------------------------------------------------------------------------------
# A real cluster: worker processes
# --------------------------------------------------------------------------------------------
def test_scatter_submit_gather(client):
    def total(t):
        assert t.data_ptr % t.itemsize == 0  # aligned, whatever address Dask's frame had
        return int(np.from_dlpack(t).sum(dtype=np.int64)), os.getpid()

    def doubled(t):
        return dlbridge.from_dlpack(np.from_dlpack(t) * 2)

    ref = make("int32", (1000, 1000))
    [future] = client.scatter([dlbridge.from_dlpack(ref)])
    value, pid = client.submit(total, future).result()
    assert value == int(ref.sum(dtype=np.int64)) and pid != os.getpid()
    back = client.gather(client.submit(doubled, future))
    assert isinstance(back, dlbridge.Tensor) and back.shape == ref.shape
    np.testing.assert_array_equal(np.from_dlpack(back), ref * 2)
    gathered = client.gather(future)  # the scattered Tensor comes back as it was
    np.testing.assert_array_equal(np.from_dlpack(gathered), ref)


def test_tensor_as_a_direct_submit_argument(client):
    def total(t):
        return float(np.from_dlpack(t).sum())

    t = dlbridge.from_dlpack(make("float64", (256, 128)))
    assert client.submit(total, t).result() == float(make("float64", (256, 128)).sum())


@pytest.mark.parametrize(
    "dtype",
    ["bool", "uint8", "int64", "float16", "float32", "complex64", "bfloat16", "float8_e5m2"],
)
def test_every_dtype_round_trips_exactly(client, dtype):
    def identity(t):
        return t

    source = make_tensor(dtype, (64, 32))
    [future] = client.scatter([source])
    back = client.submit(identity, future).result()
    assert (back.shape, back.strides, back.dtype.name) == (source.shape, source.strides, dtype)
    np.testing.assert_array_equal(raw_values(back, dtype), raw_values(source, dtype))


def test_dim_names_and_read_only_reach_the_worker_and_come_back(client):
    def describe(t):
        return t.dim_names, t.readonly, t.shape

    source = named_tensor()
    [future] = client.scatter([source])
    assert client.submit(describe, future).result() == (("", "H", "W"), True, (8, 16, 16))
    back = client.gather(future)
    assert (back.dim_names, back.readonly) == (("", "H", "W"), True)
    np.testing.assert_array_equal(np.from_dlpack(back), np.from_dlpack(source))


def test_non_contiguous_tensor_keeps_its_values(client):
    def checksum(t):
        return float(np.from_dlpack(t).sum())

    ref = make("float32", (200, 300))[::2, ::-3]
    t = dlbridge.from_dlpack(ref)
    assert client.submit(checksum, t).result() == float(ref.sum())
    np.testing.assert_array_equal(np.from_dlpack(client.gather(client.scatter(t))), ref)
