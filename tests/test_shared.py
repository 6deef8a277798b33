"""dlbridge.to_shared and Tensors across real processes: multiprocessing (fork, spawn,
forkserver), ProcessPoolExecutor, queues, torch's DataLoader workers; handles for shared memory,
data for everything else; nothing left behind, also when a worker is killed."""

from __future__ import annotations

import concurrent.futures
import gc
import multiprocessing
import os
import pickle
import signal
import sys
import time
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest

import dlbridge
from dlb_testing import make, require_sycl
from dlpack_ctypes import FakeManagedTensor

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="to_shared uses Linux memfds"),
    pytest.mark.timeout(60),
]

START_METHODS = ["fork", "spawn", "forkserver"]


def fds_naming(prefix: str) -> int:
    """How many descriptors of this process name a path that starts with ``prefix``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith(prefix)
        except OSError:
            pass
    return count


def memfds() -> int:
    """How many descriptors of this process are dlbridge memfds."""
    return fds_naming("/memfd:dlbridge")


def dev_shm() -> set[str]:
    """Files in /dev/shm that dlbridge could have made (the directory is shared with every
    process on the machine, so other programs' files come and go meanwhile)."""
    names = os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []
    return {name for name in names if "dlbridge" in name or name.startswith(("psm_", "mp-"))}


def open_shm_files() -> int:
    """Descriptors of this process naming a file under /dev/shm (POSIX shared memory)."""
    return fds_naming("/dev/shm/")


def eventually(predicate, seconds: float = 15.0) -> bool:
    """True once ``predicate()`` is (multiprocessing's resource sharer closes its duplicate of
    a descriptor on its own thread, just after the receiver took it)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def no_leaks():
    """Fails the test if it leaves a dlbridge memfd open here or a file in /dev/shm."""
    gc.collect()
    before_fds, before_shm, before_open = memfds(), dev_shm(), open_shm_files()
    yield
    gc.collect()
    assert eventually(lambda: memfds() == before_fds), f"{memfds() - before_fds} memfds left open"
    assert dev_shm() <= before_shm
    assert open_shm_files() <= before_open


def is_shared(t) -> bool:
    return dlbridge._native._shared_handle(t) is not None


# ----------------------------------------------------------------------------- workers
def fill_first_row(t, value=42.0):
    np.from_dlpack(t)[0] = value
    return os.getpid()


def describe_received(t):
    return (t.shape, str(t.dtype), t.strides, t.readonly, t.dim_names, is_shared(t), raw(t))


def raw(t):
    return bytes(memoryview(t.copy()).cast("B")) if t.size else b""


def make_shared_and_send(queue, done):
    s = dlbridge.to_shared(np.full((2, 3), 7, dtype=np.int16))
    queue.put(s)
    done.wait(20)  # the parent takes the descriptor from this process' resource sharer


def share_and_wait_to_be_killed(queue):
    s = dlbridge.to_shared(np.arange(1 << 16, dtype=np.uint8))
    queue.put(os.readlink(f"/proc/self/fd/{dlbridge._native._shared_handle(s)[1]}"))
    time.sleep(60)


def hold_until_killed(t, ready):
    np.from_dlpack(t)[-1] = 5
    ready.set()
    time.sleep(60)


# ----------------------------------------------------------------------------- to_shared
def test_to_shared_copies_into_a_memfd(no_leaks):
    a = make("float32", (3, 4))
    s = dlbridge.to_shared(a)
    assert isinstance(s, dlbridge.Tensor)
    assert (s.shape, s.dtype, s.strides, s.readonly) == ((3, 4), "float32", (4, 1), False)
    assert not s.is_copied  # other processes may alias it
    assert s.data_ptr != a.ctypes.data
    assert np.array_equal(np.from_dlpack(s), a)
    assert is_shared(s) and memfds() >= 1
    assert not is_shared(dlbridge.from_dlpack(a))
    del s


def test_to_shared_keeps_order_flags_and_names(no_leaks):
    f = dlbridge.to_shared(np.asfortranarray(make("int64", (4, 5))))
    assert f.strides == (1, 4)
    view = make("float64", (6, 8))[::-2, 1::3]
    c = dlbridge.to_shared(view)
    assert c.is_c_contiguous and np.array_equal(np.from_dlpack(c), view)
    ro = make("uint8", (5,))
    ro.flags.writeable = False
    assert dlbridge.to_shared(ro).readonly
    empty = dlbridge.to_shared(make("int32", (0, 3)))
    assert empty.shape == (0, 3) and empty.size == 0
    pa = pytest.importorskip("pyarrow")
    ty = pa.fixed_shape_tensor(pa.int32(), [2, 3], dim_names=["H", "W"])
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(12, dtype=np.int32)), 6)
    named = dlbridge.to_shared(pa.ExtensionArray.from_storage(ty, storage))
    assert named.dim_names == ("", "H", "W")
    del f, c, empty, named


def test_plain_pickle_of_a_shared_tensor_sends_the_data(no_leaks):
    s = dlbridge.to_shared(make("float64", (64,)))
    data = pickle.dumps(s)
    assert len(data) > s.nbytes
    u = pickle.loads(data)
    assert not is_shared(u) and raw(u) == raw(s)
    handle = ForkingPickler.dumps(s)
    assert len(handle) < s.nbytes  # a handle, not the data
    # (Loaded here, as multiprocessing's resource sharer holds a descriptor until someone does.)
    same = pickle.loads(handle)
    assert is_shared(same) and same.data_ptr != s.data_ptr
    np.from_dlpack(same)[3] = -1.0
    assert np.from_dlpack(s)[3] == -1.0
    del s, u, same


def test_forking_pickler_sends_other_tensors_by_value():
    t = dlbridge.from_dlpack(make("int32", (100,)))
    data = ForkingPickler.dumps(t)
    assert len(data) > t.nbytes
    assert raw(pickle.loads(data)) == raw(t)


# ----------------------------------------------------------------------------- processes
@pytest.mark.parametrize("method", START_METHODS)
def test_pool_worker_writes_memory_the_parent_sees(method, no_leaks):
    s = dlbridge.to_shared(np.zeros((3, 4), dtype=np.float32))
    context = multiprocessing.get_context(method)
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as pool:
        assert pool.submit(fill_first_row, s).result() != os.getpid()
    assert np.from_dlpack(s)[0].tolist() == [42.0] * 4
    assert np.from_dlpack(s)[1:].sum() == 0
    del s


@pytest.mark.parametrize("method", START_METHODS)
def test_process_receives_layout_flags_and_names(method, no_leaks):
    base = dlbridge.to_shared(np.asfortranarray(make("complex64", (3, 5))))
    context = multiprocessing.get_context(method)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        got = pool.submit(describe_received, base).result()
    assert got == ((3, 5), "complex64", (1, 3), False, None, True, raw(base))
    del base


@pytest.mark.parametrize("method", START_METHODS)
def test_read_only_shared_tensor_arrives_read_only(method, no_leaks):
    a = make("int32", (4,))
    a.flags.writeable = False
    s = dlbridge.to_shared(a)
    context = multiprocessing.get_context(method)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        got = pool.submit(describe_received, s).result()
        assert got[3] is True and got[5] is True
        with pytest.raises(ValueError, match="read-only"):
            pool.submit(fill_first_row, s).result()
    del s


@pytest.mark.parametrize("method", START_METHODS)
def test_child_sends_shared_memory_through_a_queue(method, no_leaks):
    context = multiprocessing.get_context(method)
    queue, done = context.Queue(), context.Event()
    child = context.Process(target=make_shared_and_send, args=(queue, done))
    child.start()
    try:
        got = queue.get(timeout=30)
    finally:
        done.set()
        child.join(30)
    assert child.exitcode == 0
    assert is_shared(got) and np.from_dlpack(got).tolist() == [[7, 7, 7], [7, 7, 7]]
    np.from_dlpack(got)[0, 0] = 1  # the memory outlives the process that made it
    assert np.from_dlpack(got)[0, 0] == 1
    del got


@pytest.mark.parametrize("method", START_METHODS)
def test_worker_killed_with_sigkill_leaks_nothing(method, no_leaks):
    s = dlbridge.to_shared(np.zeros(8, dtype=np.int8))
    context = multiprocessing.get_context(method)
    ready = context.Event()
    child = context.Process(target=hold_until_killed, args=(s, ready))
    child.start()
    assert ready.wait(30)
    os.kill(child.pid, signal.SIGKILL)
    child.join(30)
    assert child.exitcode == -signal.SIGKILL
    assert np.from_dlpack(s)[-1] == 5
    del s


@pytest.mark.parametrize("method", START_METHODS)
def test_killed_creator_leaves_no_file(method, no_leaks):
    context = multiprocessing.get_context(method)
    queue = context.Queue()
    child = context.Process(target=share_and_wait_to_be_killed, args=(queue,))
    child.start()
    target = queue.get(timeout=30)
    assert target.startswith("/memfd:dlbridge")  # anonymous: no path anyone must unlink
    os.kill(child.pid, signal.SIGKILL)
    child.join(30)
    assert child.exitcode == -signal.SIGKILL


def test_dataloader_workers_yield_tensors(no_leaks):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    loader = DataLoader(TensorDataset(), batch_size=None, num_workers=2)
    items = list(loader)
    assert len(items) == 6
    for i, item in enumerate(items):
        assert isinstance(item, dlbridge.Tensor)
        assert is_shared(item) is (i % 2 == 1)
        assert np.array_equal(np.from_dlpack(item), np.full((2, 3), i, dtype=np.float32))
    assert torch.equal(torch.from_dlpack(items[3]), torch.full((2, 3), 3.0))
    del items, loader


def test_dataloader_batches_of_tensors_with_a_collate_that_keeps_them(no_leaks):
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    loader = DataLoader(TensorDataset(), batch_size=4, num_workers=2, collate_fn=list)
    batches = list(loader)
    assert [len(b) for b in batches] == [4, 2]
    values = [np.from_dlpack(t)[0, 0] for batch in batches for t in batch]
    assert values == [0, 1, 2, 3, 4, 5]
    del batches, loader


class TensorDataset:
    """Six (2, 3) float32 tensors filled with their index; odd ones in shared memory."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        t = dlbridge.from_dlpack(np.full((2, 3), i, dtype=np.float32))
        return dlbridge.to_shared(t) if i % 2 else t


# ----------------------------------------------------------------------------- untrusted handles
def shared_metadata(s):
    kind, fd, length, metadata = dlbridge._native._shared_handle(s)
    assert kind == "memfd"
    return fd, length, list(metadata)


def test_handle_to_a_file_that_is_not_shared_memory_is_refused(tmp_path):
    s = dlbridge.to_shared(np.zeros(4, dtype=np.int32))
    _, length, metadata = shared_metadata(s)
    path = tmp_path / "plain"
    path.write_bytes(b"\0" * length)
    with open(path, "rb") as f, pytest.raises(BufferError, match="not a dlbridge shared memory"):
        dlbridge._native._map_shared(f.fileno(), length, tuple(metadata))


@pytest.mark.parametrize("length_delta", [-1, 1, 4096])
def test_handle_with_a_wrong_length_is_refused(length_delta):
    s = dlbridge.to_shared(np.zeros(4, dtype=np.int32))
    fd, length, metadata = shared_metadata(s)
    with pytest.raises(BufferError, match="bytes"):
        dlbridge._native._map_shared(fd, length + length_delta, tuple(metadata))


@pytest.mark.parametrize(
    "field, value",
    [(2, [5]), (3, [2]), (4, 4), (1, (2, 64, 1)), (8, (2, 0)), (0, 9)],
    ids=["shape", "strides", "offset", "dtype", "device", "format"],
)
def test_handle_with_tampered_metadata_is_refused(field, value):
    s = dlbridge.to_shared(np.zeros(4, dtype=np.int32))
    fd, length, metadata = shared_metadata(s)
    metadata[field] = value
    with pytest.raises((ValueError, BufferError)):
        dlbridge._native._map_shared(fd, length, tuple(metadata))


def test_handle_with_a_closed_descriptor_is_refused():
    s = dlbridge.to_shared(np.zeros(4, dtype=np.int32))
    _, length, metadata = shared_metadata(s)
    r, w = os.pipe()
    os.close(r), os.close(w)
    with pytest.raises(BufferError, match="duplicate"):
        dlbridge._native._map_shared(r, length, tuple(metadata))


def test_view_of_shared_memory_is_sent_with_its_offset(no_leaks):
    s = dlbridge.to_shared(np.arange(12, dtype=np.uint16).reshape(3, 4))
    fd, length, metadata = shared_metadata(s.view("float16"))
    assert (length, metadata[4]) == (24, 0)
    mapped = dlbridge._native._map_shared(fd, length, tuple(metadata))
    assert mapped.dtype == "float16" and raw(mapped) == raw(s)
    del s, mapped


# ----------------------------------------------------------------------------- devices
def test_to_shared_of_a_oneapi_tensor_is_refused():
    dpnp = require_sycl()
    with pytest.raises(BufferError, match="oneapi"):
        dlbridge.to_shared(dlbridge.from_dlpack(dpnp.arange(4.0)))


def test_to_shared_of_a_cuda_tensor_without_a_driver_is_refused(no_cuda_gpu):
    # A hand-built DLPack capsule tagged kDLCUDA whose pointer is host memory: a test double
    # for a GPU array; without a driver nothing is ever read through it.
    backing = np.zeros(4, dtype=np.float32)
    producer = FakeManagedTensor(data=backing, shape=(4,), strides=(1,), device=(2, 0))
    t = dlbridge.from_dlpack(producer.capsule())
    with pytest.raises(BufferError, match="CUDA"):
        dlbridge.to_shared(t)
    del t
    producer.finalize()


def cuda_ipc_metadata():
    """Metadata as a process with CUDA device 0 would send it for a (4,) float32 tensor."""
    host = dlbridge.to_shared(np.zeros(4, dtype=np.float32))
    _, _, _, metadata = dlbridge._native._shared_handle(host)
    return metadata[:-1] + ((2, 0),)


def test_cuda_ipc_handle_without_a_driver_is_refused_naming_the_device(no_cuda_gpu):
    with pytest.raises(BufferError, match="cuda:0"):
        dlbridge._native._open_cuda_ipc(b"\0" * 64, 16, cuda_ipc_metadata())


@pytest.mark.parametrize("handle", [b"", b"\0" * 63, b"\0" * 65])
def test_cuda_ipc_handle_of_the_wrong_size_is_refused(handle):
    with pytest.raises(ValueError, match="64 bytes"):
        dlbridge._native._open_cuda_ipc(handle, 16, cuda_ipc_metadata())


def test_cuda_ipc_handle_is_not_opened_by_its_own_process():
    from dlbridge._processes import _rebuild_cuda_ipc

    with pytest.raises(BufferError, match="process that shared it"):
        _rebuild_cuda_ipc(os.getpid(), b"\0" * 64, 16, cuda_ipc_metadata())
