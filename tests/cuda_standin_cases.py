"""dlbridge's CUDA paths against the CUDA stand-in (``crates/cuda-standin``): each ``case_*``
runs in its own process with ``DLBRIDGE_CUDA_DRIVER`` naming the stand-in (the driver is
loaded once per process); ``test_cuda_standin.py`` runs them.

The stand-in maps device memory ``PROT_NONE`` (a host read of it kills the process), runs
queued copies only at synchronisation points (a missing wait reads stale bytes, the zeros of
fresh memory) and has two devices. ``StandIn`` reaches it through ctypes (the same library
instance dlbridge loaded) for streams of a "consumer" and for the probes.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle

import numpy as np

import dlbridge

LEGACY = 1  # CU_STREAM_LEGACY


class StandIn:
    """The stand-in driver through ctypes, for what a CUDA consumer does on its own streams."""

    def __init__(self):
        lib = ctypes.CDLL(os.environ["DLBRIDGE_CUDA_DRIVER"])
        lib.dlbridge_standin_pending.restype = ctypes.c_size_t
        lib.dlbridge_standin_allocations.restype = ctypes.c_size_t
        self.lib = lib
        self.check(lib.cuInit(0))  # idempotent: dlbridge may not have loaded the driver yet

    def check(self, status):
        assert status == 0, f"CUresult {status}"

    def context(self, ordinal=0):
        ctx = ctypes.c_void_p()
        self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), ordinal))
        return ctx

    def current(self, ordinal=0):
        """A context manager making device ``ordinal``'s primary context current."""
        standin = self

        class Current:
            def __enter__(self):
                standin.check(standin.lib.cuCtxPushCurrent_v2(standin.context(ordinal)))

            def __exit__(self, *exc):
                standin.check(standin.lib.cuCtxPopCurrent_v2(None))

        return Current()

    def stream(self, ordinal=0):
        """A new non-blocking stream of device ``ordinal``, as the integer DLPack takes."""
        s = ctypes.c_void_p()
        with self.current(ordinal):
            self.check(self.lib.cuStreamCreate(ctypes.byref(s), 1))
        return s.value

    def read(self, t, stream, ordinal=0):
        """The bytes of CUDA tensor ``t`` as work on ``stream`` sees them."""
        out = ctypes.create_string_buffer(t.nbytes)
        with self.current(ordinal):
            self.check(
                self.lib.cuMemcpyDtoHAsync_v2(
                    out, ctypes.c_uint64(t.data_ptr), ctypes.c_size_t(t.nbytes),
                    ctypes.c_void_p(stream),
                )
            )
            self.check(self.lib.cuStreamSynchronize(ctypes.c_void_p(stream)))
        return out.raw

    def write(self, address, data, ordinal=0):
        """Write ``data`` (bytes) to device memory at ``address``, complete on return."""
        with self.current(ordinal):
            self.check(
                self.lib.cuMemcpyHtoDAsync_v2(
                    ctypes.c_uint64(address), data, ctypes.c_size_t(len(data)),
                    ctypes.c_void_p(LEGACY),
                )
            )
            self.check(self.lib.cuStreamSynchronize(ctypes.c_void_p(LEGACY)))

    def copy(self, dst, src, stream, ordinal=0):
        """Enqueue (without waiting) a device copy of tensor ``src`` into ``dst``."""
        with self.current(ordinal):
            self.check(
                self.lib.cuMemcpyDtoDAsync_v2(
                    ctypes.c_uint64(dst.data_ptr), ctypes.c_uint64(src.data_ptr),
                    ctypes.c_size_t(dst.nbytes), ctypes.c_void_p(stream),
                )
            )

    def event(self, ordinal=0):
        e = ctypes.c_void_p()
        with self.current(ordinal):
            self.check(self.lib.cuEventCreate(ctypes.byref(e), 2))
        return e.value

    def record(self, event, stream, ordinal=0):
        with self.current(ordinal):
            self.check(self.lib.cuEventRecord(ctypes.c_void_p(event), ctypes.c_void_p(stream)))

    def allocations(self):
        return self.lib.dlbridge_standin_allocations()


class Cai:
    """Offers only ``__cuda_array_interface__``."""

    def __init__(self, interface, owner=None):
        self.__cuda_array_interface__ = interface
        self.owner = owner


class DeviceArray:
    """Offers only ``__arrow_c_device_array__``."""

    def __init__(self, source):
        self.source = source

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        return self.source.__arrow_c_device_array__(requested_schema, **kwargs)


class Stream:
    """Offers a given ``__arrow_c_device_stream__`` capsule once."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __arrow_c_device_stream__(self, requested_schema=None, **kwargs):
        return self.capsule


class Capsules:
    """Offers given ``__arrow_c_device_array__`` capsules once."""

    def __init__(self, schema, array):
        self.capsules = (schema, array)

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        return self.capsules


def set_sync_event(capsule, event_pointer):
    """Set the ``sync_event`` of the ArrowDeviceArray in ``capsule`` (after the 80-byte
    ArrowArray: device_id at 80, device_type at 88, sync_event at 96)."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    struct = get(capsule, b"arrow_device_array")
    ctypes.c_void_p.from_address(struct + 96).value = event_pointer


def on_gpu(a, device="cuda:0"):
    return dlbridge.from_dlpack(a).to_device(device)


def host(t):
    return np.array(dlbridge.to_numpy(t), copy=True)


def view(t, shape, strides, offset=0, readonly=False, stream=None):
    """A zero-copy view of CUDA tensor ``t`` through ``__cuda_array_interface__``."""
    cai = dict(t.__cuda_array_interface__)
    cai.update(shape=shape, strides=strides, data=(t.data_ptr + offset, readonly), stream=stream)
    return dlbridge.from_dlpack(Cai(cai, t))


A = np.arange(60, dtype=np.float32).reshape(6, 10)


# ------------------------------------------------------------------------------ copies
def case_every_dtype_goes_to_both_gpus_and_back():
    for name in ["bool", "int8", "uint16", "int32", "int64", "float16", "float32", "float64",
                 "complex64", "complex128"]:
        a = (np.arange(-30, 30).reshape(6, 10) / 4).astype(name)
        for device in ["cuda:0", "cuda:1"]:
            d = on_gpu(a, device)
            assert d.device == device and d.is_copied and str(d.dtype) == name
            back = d.to_device("cpu")
            assert back.device == "cpu" and not back.readonly
            assert dlbridge.to_numpy(back).tobytes() == a.tobytes()
            np.testing.assert_array_equal(host(d), a)
    assert dlbridge.from_dlpack(A, device="cuda:1").device == "cuda:1"
    np.testing.assert_array_equal(host(dlbridge.Tensor(A, device="cuda:0")), A)
    np.testing.assert_array_equal(dlbridge.convert(on_gpu(A), "numpy", device="cpu"), A)


def case_host_access_of_device_memory_is_refused_not_attempted():
    d = on_gpu(A)
    for attempt in [lambda: memoryview(d), lambda: bytes(d), lambda: np.asarray(d),
                    lambda: d.tolist(), lambda: d.__array_interface__,
                    lambda: d.__arrow_c_array__(), lambda: dlbridge.copyto(d, A),
                    lambda: dlbridge.from_dlpack(d, device="cpu", copy=False)]:
        try:
            attempt()
        except (BufferError, ValueError, TypeError):
            pass
        else:
            raise AssertionError("a host view of device memory")
    np.testing.assert_array_equal(np.from_dlpack(d, device="cpu", copy=True), A)
    np.testing.assert_array_equal(host(dlbridge.from_dlpack(d, device="cpu")), A)


def case_device_copies_stay_on_their_device():
    d = on_gpu(A)
    assert d.contiguous() is d
    for c in [d.copy(), dlbridge.from_dlpack(d, copy=True),
              dlbridge.from_dlpack(d.__dlpack__(copy=True))]:
        assert c.device == "cuda:0" and c.data_ptr != d.data_ptr
        np.testing.assert_array_equal(host(c), A)
    assert dlbridge.from_dlpack(d).data_ptr == d.data_ptr
    f = d.copy("F")
    assert f.device == "cuda:0" and f.strides == (1, 6)
    np.testing.assert_array_equal(host(f), A)
    moved = dlbridge.from_dlpack(d.__dlpack__(dl_device=(2, 1), copy=True))
    assert moved.device == "cuda:1"
    np.testing.assert_array_equal(host(moved), A)
    other = d.to_device("cuda:1")
    assert other.device == "cuda:1"
    np.testing.assert_array_equal(host(other.to_device("cuda:0")), A)


def case_strided_device_views_are_gathered():
    d = on_gpu(A)
    t = view(d, (10, 6), (4, 40))  # the transpose, zero-copy
    assert t.device == "cuda:0" and t.data_ptr == d.data_ptr and t.strides == (1, 10)
    np.testing.assert_array_equal(host(t), A.T)
    for c in [t.copy(), t.contiguous(), t.to_device("cuda:1"), t.to_device("cuda_managed")]:
        assert c.is_c_contiguous
        np.testing.assert_array_equal(host(c), A.T)
    reversed_rows = view(d, (3, 10), (-80, 4), offset=200)  # rows 5, 3, 1
    np.testing.assert_array_equal(host(reversed_rows), A[5::-2])


def case_pinned_and_managed_memory_is_read_on_the_host():
    d = on_gpu(A)
    for name in ["cuda_host", "cuda_managed"]:
        for source in [A, d]:
            m = dlbridge.from_dlpack(source).to_device(name)
            assert m.device == f"{name}:0"
            np.testing.assert_array_equal(np.asarray(memoryview(m)), A)
            np.testing.assert_array_equal(dlbridge.to_numpy(m), A)
            np.testing.assert_array_equal(host(m.to_device("cuda:0")), A)
            dlbridge.copyto(m, A[::-1])  # the host writes it in place
            np.testing.assert_array_equal(host(m.to_device("cuda:1")), A[::-1])
            cai = m.__cuda_array_interface__
            assert dlbridge.from_dlpack(Cai(cai, m)).device == f"{name}:0"


# ------------------------------------------------------------------------------ streams
def case_to_device_on_every_kind_of_stream():
    standin = StandIn()
    d0, d1 = on_gpu(A), on_gpu(A, "cuda:1")
    mine = standin.stream()  # a stream of cuda:0
    for stream in [None, 1, 2, -1, mine]:
        for source, device in [(d0, "cuda:1"), (d0, "cuda_managed"), (d0, "cuda_host"),
                               (d0, "cpu"), (d1, "cuda:0"), (d1, "cuda_managed")]:
            if stream == mine and device == "cuda:1" or source is d1 and device == "cpu":
                continue  # the stream must be one of the CUDA side of the transfer
            c = source.to_device(device, stream=stream)
            assert str(c.device).startswith(device)
            np.testing.assert_array_equal(host(c), A)
    for device in ["cuda:0", "cuda:1"]:  # refused whether or not a copy is needed
        try:
            d0.to_device(device, stream=0)
        except ValueError:
            pass
        else:
            raise AssertionError("stream=0 is ambiguous for CUDA")


def case_dlpack_stream_orders_the_consumers_stream():
    standin = StandIn()
    expected = A.tobytes()
    producer = standin.stream()
    pending = on_gpu(A, "cuda:1").to_device("cuda:0", stream=producer)  # copy still queued
    consumer = standin.stream()
    pending.__dlpack__(stream=-1)  # no synchronisation asked for: the consumer sees stale bytes
    assert standin.read(pending, consumer) == bytes(len(expected))
    pending.__dlpack__(stream=consumer)
    assert standin.read(pending, consumer) == expected
    # Legacy-ready data whose last write is still queued on the legacy stream.
    x, source = on_gpu(np.zeros_like(A)), on_gpu(A)  # (a free would run the queued copy)
    standin.copy(x, source, LEGACY)
    later = standin.stream()
    assert standin.read(x, later) == bytes(len(expected))
    x.__dlpack__(stream=later)
    assert standin.read(x, later) == expected
    for stream in [None, 1, 2]:
        dlbridge.from_dlpack(x.__dlpack__(stream=stream))
    try:
        x.__dlpack__(stream=0)
    except ValueError:
        pass
    else:
        raise AssertionError("stream=0 is ambiguous for CUDA")


def case_cuda_array_interface_out_and_back():
    standin = StandIn()
    d = on_gpu(A)
    cai = d.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (6, 10) and cai["typestr"] == "<f4"
    assert cai["data"] == (d.data_ptr, False) and cai["stream"] == 1
    t = dlbridge.from_dlpack(Cai(cai, d))
    assert t.device == "cuda:0" and t.data_ptr == d.data_ptr and not t.readonly
    assert view(d, (6, 10), None, readonly=True).readonly
    # A producer's stream is waited for: its pending write is seen by dlbridge's reads.
    producer = standin.stream()
    y = on_gpu(np.zeros_like(A))
    standin.copy(y, d, producer)
    adopted = view(y, (6, 10), None, stream=producer)
    np.testing.assert_array_equal(host(adopted), A)
    # Exported data with pending work is made ready on the legacy default stream first.
    pending = d.to_device("cuda:1", stream=2)
    back = dlbridge.from_dlpack(Cai(pending.__cuda_array_interface__, pending))
    assert back.device == "cuda:1"
    assert standin.read(back, LEGACY, ordinal=1) == A.tobytes()


def case_arrow_device_arrays_on_cuda():
    standin = StandIn()
    d = on_gpu(A.ravel())
    back = dlbridge.from_dlpack(DeviceArray(d))
    assert back.device == "cuda:0" and back.data_ptr == d.data_ptr and back.readonly
    np.testing.assert_array_equal(host(back), A.ravel())
    # Exported without a sync event, data with a pending copy is complete for any stream.
    pending = on_gpu(A.ravel(), "cuda:1").to_device("cuda:0", stream=standin.stream())
    imported = dlbridge.from_dlpack(DeviceArray(pending))
    assert standin.read(imported, standin.stream()) == A.tobytes()
    # A producer's sync event is waited for before the data is used.
    x, source = on_gpu(np.zeros_like(A.ravel())), on_gpu(A.ravel())
    schema, array = x.__arrow_c_device_array__()
    producer, event = standin.stream(), standin.event()
    standin.copy(x, source, producer)
    standin.record(event, producer)
    handle = ctypes.c_void_p(event)
    set_sync_event(array, ctypes.addressof(handle))
    imported = dlbridge.from_dlpack(Capsules(schema, array))
    assert standin.read(imported, standin.stream()) == A.tobytes()
    stream = d.__arrow_c_device_stream__()  # a device stream of one chunk
    chunks = dlbridge.from_dlpack(Stream(stream))
    assert chunks.device == "cuda:0"
    np.testing.assert_array_equal(host(chunks), A.ravel())
    try:
        d.__arrow_c_array__()
    except BufferError:
        pass
    else:
        raise AssertionError("the host Arrow interface of CUDA data")


def case_pickled_cuda_tensors_come_back_on_their_device():
    d = on_gpu(A)
    for t in [d, view(d, (10, 6), (4, 40)), d.to_device("cuda:1", stream=2)]:
        for protocol in [2, 4, 5]:
            u = pickle.loads(pickle.dumps(t, protocol=protocol))
            assert u.device == t.device and u.shape == t.shape and u.data_ptr != t.data_ptr
            np.testing.assert_array_equal(host(u), host(t))
    for name in ["cuda_host", "cuda_managed"]:
        m = d.to_device(name)
        u = pickle.loads(pickle.dumps(m, protocol=5))
        np.testing.assert_array_equal(host(u), A)


# ------------------------------------------------------------------------------ IPC
def read_and_write_in_a_child(t):
    """Runs in a spawned process: the values of a CUDA IPC tensor, then -1 into its first
    element (through the driver: dlbridge runs no device code)."""
    values = host(t)
    ordinal = int(str(t.device).split(":")[1])
    StandIn().write(t.data_ptr, np.float32(-1).tobytes(), ordinal)
    return os.getpid(), str(t.device), values


def case_cuda_ipc_between_two_processes():
    d = on_gpu(np.arange(1024, dtype=np.float32))
    inner = view(d, (10,), None, offset=4000)  # elements 1000..1009
    shared = [dlbridge.to_shared(d), dlbridge.to_shared(inner)]
    assert shared[0].data_ptr == d.data_ptr  # in place
    context = multiprocessing.get_context("spawn")  # CUDA cannot be used after fork
    with context.Pool(1) as pool:
        pid, device, values = pool.apply(read_and_write_in_a_child, (shared[0],))
        assert pid != os.getpid() and device == "cuda:0"
        np.testing.assert_array_equal(values, np.arange(1024))
        _, _, values = pool.apply(read_and_write_in_a_child, (shared[1],))
        np.testing.assert_array_equal(values, np.arange(1000, 1010))
        # On the second device; and data a dlbridge copy is still filling (waited for first).
        # (Its own source: the copy runs only when waited for, after the child's writes.)
        on1 = on_gpu(np.arange(1024, dtype=np.float32), "cuda:1")
        source = on_gpu(np.arange(1024, dtype=np.float32), "cuda:1")
        filling = source.to_device("cuda:0", stream=StandIn().stream())
        for t, device in [(on1, "cuda:1"), (filling, "cuda:0")]:
            _, got, values = pool.apply(read_and_write_in_a_child, (dlbridge.to_shared(t),))
            assert got == device
            np.testing.assert_array_equal(values, np.arange(1024))
    after = host(d)
    assert after[0] == -1 and after[1000] == -1 and after[999] == 999 and after[1] == 1


# ------------------------------------------------------------------------------ lifetimes
def case_dropping_tensors_returns_every_allocation():
    standin = StandIn()
    base = on_gpu(A)
    before = standin.allocations()
    for _ in range(5):
        kept = [base.copy(), base.to_device("cuda:1", stream=2), base.to_device("cuda_host"),
                base.to_device("cuda_managed"), dlbridge.to_shared(base),
                pickle.loads(pickle.dumps(base)), dlbridge.from_dlpack(DeviceArray(base))]
        assert standin.allocations() >= before + 5
        del kept
    assert standin.allocations() == before


# ------------------------------------------------------------------------------ failures
# (run with DLBRIDGE_STANDIN_FAIL set: see test_cuda_standin.py)
def case_a_driver_that_does_not_initialise_means_no_cuda():
    try:
        on_gpu(A)
    except BufferError as e:
        assert "CUDA is not available" in str(e) and "CUDA_ERROR_NO_DEVICE" in str(e), e
    else:
        raise AssertionError("cuInit failed")
    np.testing.assert_array_equal(dlbridge.to_numpy(dlbridge.from_dlpack(A)), A)


def case_out_of_device_memory_is_a_clear_error():
    try:
        on_gpu(A)
    except (BufferError, MemoryError) as e:
        assert "CUDA_ERROR_OUT_OF_MEMORY" in str(e) and "cuMemAlloc" in str(e), e
    else:
        raise AssertionError("cuMemAlloc_v2 failed")
    np.testing.assert_array_equal(host(on_gpu(A)), A)  # it failed once


def case_a_failed_capture_query_waits_on_the_host():
    standin = StandIn()
    pending = on_gpu(A, "cuda:1").to_device("cuda:0", stream=standin.stream())
    consumer = standin.stream()
    pending.__dlpack__(stream=consumer)
    assert standin.read(pending, consumer) == A.tobytes()
