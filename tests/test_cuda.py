"""CUDA on a real GPU: dlbridge's own transfers, streams and events, pinned and managed memory,
``__cuda_array_interface__``, Arrow device arrays, pickling and CUDA IPC, exchanged with torch,
CuPy and JAX.

Every test here needs an NVIDIA GPU and skips without one (CI has none: the driver-absent
paths are tested in the other files). ``scripts/gpu_check.sh`` runs this file on a GPU
machine. Tests that need CuPy or JAX on the GPU skip when that library cannot use it.

Races are made visible by holding a stream busy with ``torch.cuda._sleep`` (a kernel that
spins for a number of clock cycles) before the work that must be waited for: without the
ordering under test, the reader would run while the writer is still asleep.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle

import numpy as np
import pytest

# JAX takes most of the GPU's memory on first use unless told not to; torch and CuPy share it.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import dlbridge
from dlb_testing import cupy_usable

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs an NVIDIA GPU (torch.cuda.is_available())"
)

SPIN = 200_000_000  # clock cycles of torch.cuda._sleep: about 0.1 s on a 2 GHz GPU
BIG = 1 << 24  # float32 elements: 64 MiB, a copy that takes a measurable time


def cupy_or_skip():
    usable, why = cupy_usable()
    if not usable:
        pytest.skip(f"CuPy cannot use the GPU: {why}")
    import cupy

    return cupy


def jax_gpu_or_skip():
    jax = pytest.importorskip("jax")
    try:
        return jax, jax.devices("gpu")[0]
    except Exception as e:  # noqa: BLE001 - no GPU backend in this jax install
        pytest.skip(f"JAX has no GPU backend here: {e}")


def busy(stream=None):
    """Keep ``stream`` (default: the current one) busy for about 0.1 s."""
    if stream is None:
        torch.cuda._sleep(SPIN)
    else:
        with torch.cuda.stream(stream):
            torch.cuda._sleep(SPIN)


def filled_on_a_busy_stream(value):
    """A 64 MiB float32 CUDA tensor whose fill with ``value`` is still pending on a new stream,
    behind a spin, and that stream."""
    s = torch.cuda.Stream()
    x = torch.zeros(BIG, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        busy()
        x.fill_(value)
    return x, s


def copy_pending_behind_a_spin(value):
    """dlbridge's import of a copy of a 64 MiB float32 CUDA tensor of ``value``, the copy still
    pending behind a spin on torch's default stream (the legacy default stream, where dlbridge
    copies and orders by default)."""
    x = torch.full((BIG,), value, device="cuda")
    torch.cuda.synchronize()
    busy()
    return dlbridge.from_dlpack(x, copy=True)


def host(t):
    """A NumPy copy of the values of a dlbridge tensor anywhere."""
    return np.array(dlbridge.to_numpy(t), copy=True)


# ------------------------------------------------------------------------------ torch
def test_torch_cuda_import_is_zero_copy_and_writable_both_ways():
    x = torch.arange(12.0, device="cuda").reshape(3, 4)
    t = dlbridge.from_dlpack(x)
    assert t.device == "cuda:0" and t.__dlpack_device__() == (2, 0)
    assert t.data_ptr == x.data_ptr() and not t.readonly and not t.is_copied
    assert t.shape == (3, 4) and t.strides == (4, 1)
    y = torch.from_dlpack(t)
    assert y.device == x.device and y.data_ptr() == x.data_ptr()
    y[0, 0] = 100.0
    assert x[0, 0].item() == 100.0


def test_strided_cuda_views_keep_their_strides():
    x = torch.arange(24.0, device="cuda").reshape(4, 6)[:, ::2].T
    t = dlbridge.from_dlpack(x)
    assert t.strides == x.stride() and t.data_ptr == x.data_ptr()
    np.testing.assert_array_equal(host(t), x.cpu().numpy())
    y = torch.from_dlpack(t)
    assert y.stride() == x.stride() and torch.equal(y, x)


@pytest.mark.parametrize(
    "dtype",
    ["float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64",
     "bool", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2"],
)
def test_dtypes_go_to_the_gpu_and_back(dtype):
    dt = getattr(torch, dtype)
    a = (torch.arange(-30, 30, dtype=torch.float32) / 4).reshape(6, 10)
    a = (a > 0) if dtype == "bool" else a.to(dt)
    d = dlbridge.from_dlpack(a).to_device("cuda:0")
    assert d.device == "cuda:0" and d.is_copied and str(d.dtype) == dtype
    back = d.to_device("cpu")
    assert back.device == "cpu" and back.is_copied and not back.readonly
    assert dlbridge.to_numpy(back).tobytes() == a.view(torch.uint8).numpy().tobytes()
    if not dtype.startswith("float8"):  # torch asks for DLPack 1.0, which has no float8
        on_gpu = torch.from_dlpack(d)
        assert on_gpu.is_cuda and on_gpu.dtype == dt
        assert torch.equal(on_gpu.cpu().view(torch.uint8), a.view(torch.uint8))


def test_device_cpu_and_to_numpy_copy_cuda_data_to_the_host():
    x = torch.arange(12.0, device="cuda").reshape(3, 4)
    h = dlbridge.from_dlpack(x, device="cpu")
    assert h.device == "cpu" and h.is_copied and not h.readonly
    n = dlbridge.to_numpy(x)
    assert n.flags.writeable
    x.fill_(-1.0)
    torch.cuda.synchronize()
    expected = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(np.from_dlpack(h), expected)  # independent of the source
    np.testing.assert_array_equal(n, expected)


def test_host_copy_of_a_strided_cuda_view():
    x = torch.arange(60.0, device="cuda").reshape(6, 10)[1::2, ::-3]
    np.testing.assert_array_equal(dlbridge.to_numpy(x), x.cpu().numpy())


def test_device_cpu_with_copy_false_is_refused_naming_the_transfer():
    x = torch.arange(4.0, device="cuda")
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.from_dlpack(x, device="cpu", copy=False)


def test_host_memoryview_of_cuda_data_is_refused_naming_the_way_out():
    t = dlbridge.from_dlpack(torch.arange(4.0, device="cuda"))
    with pytest.raises(BufferError, match='device="cpu"'):
        memoryview(t)
    np.testing.assert_array_equal(np.from_dlpack(t.to_device("cpu")), np.arange(4.0))


def test_copy_true_on_the_device_is_an_independent_device_copy():
    x = torch.arange(BIG, dtype=torch.float32, device="cuda")
    c = dlbridge.from_dlpack(x, copy=True)
    assert c.device == "cuda:0" and c.is_copied and not c.readonly
    assert c.data_ptr != x.data_ptr()
    x.fill_(-1.0)
    y = torch.from_dlpack(c)
    assert torch.equal(y, torch.arange(BIG, dtype=torch.float32, device="cuda"))


def test_copy_true_of_a_strided_cuda_view():
    x = torch.arange(24.0, device="cuda").reshape(4, 6).T
    c = dlbridge.from_dlpack(x, copy=True)  # torch's copy (asked first) may keep the strides
    assert c.device == "cuda:0" and c.is_copied and c.data_ptr != x.data_ptr()
    assert torch.equal(torch.from_dlpack(c), x)


def test_tensor_copy_and_contiguous_of_cuda_data_stay_on_the_device():
    x = torch.arange(12.0, device="cuda").reshape(3, 4).T
    t = dlbridge.from_dlpack(x)
    for order in ("C", "F"):
        c = t.copy(order)
        assert c.device == "cuda:0" and c.is_copied and c.data_ptr != x.data_ptr()
        assert c.is_c_contiguous if order == "C" else c.is_f_contiguous
        assert torch.equal(torch.from_dlpack(c), x)
    c = t.contiguous()
    assert c.device == "cuda:0" and c.is_c_contiguous and c.data_ptr != x.data_ptr()
    assert torch.equal(torch.from_dlpack(c), x)


def test_copyto_into_cuda_memory_is_refused_naming_the_device():
    dst = dlbridge.from_dlpack(torch.zeros(4, device="cuda"))
    with pytest.raises(BufferError, match="cuda:0"):
        dlbridge.copyto(dst, np.arange(4.0, dtype=np.float32))


def test_dlpack_copy_true_of_cuda_data_is_a_device_copy():
    x = torch.arange(BIG, dtype=torch.float32, device="cuda")
    t = dlbridge.from_dlpack(x)
    s = torch.cuda.Stream()
    y = torch.from_dlpack(t.__dlpack__(max_version=(1, 3), copy=True, stream=s.cuda_stream))
    assert y.is_cuda and y.data_ptr() != x.data_ptr()
    with torch.cuda.stream(s):
        equal = torch.equal(y, x)
    assert equal


def test_host_data_exported_to_the_gpu_on_request():
    t = dlbridge.from_dlpack(np.arange(4.0))
    y = torch.from_dlpack(t.__dlpack__(max_version=(1, 3), dl_device=(2, 0)))
    assert y.is_cuda and y.tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(BufferError, match="copy=False"):
        t.__dlpack__(max_version=(1, 3), dl_device=(2, 0), copy=False)
    d = dlbridge.from_dlpack(np.arange(3.0), device="cuda:0")
    assert d.device == "cuda:0" and d.is_copied and not d.readonly
    np.testing.assert_array_equal(host(d), np.arange(3.0))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_gpu_keeps_its_ordinal_and_transfers_between_gpus():
    x = torch.arange(8.0, device="cuda:1")
    t = dlbridge.from_dlpack(x)
    assert t.device == "cuda:1" and t.data_ptr == x.data_ptr()
    moved = t.to_device("cuda:0")
    assert moved.device == "cuda:0"
    assert torch.from_dlpack(moved).device.index == 0
    np.testing.assert_array_equal(host(moved), np.arange(8.0, dtype=np.float32))


# ------------------------------------------------------------------------------ streams
def test_import_waits_for_the_producers_current_stream():
    x, s = filled_on_a_busy_stream(3.0)
    with torch.cuda.stream(s):
        n = dlbridge.to_numpy(x)  # torch orders dlbridge's stream after s
        c = dlbridge.from_dlpack(x, copy=True)
    assert (n == 3.0).all()
    assert torch.from_dlpack(c).eq(3.0).all().item()


def test_export_orders_the_consumers_stream_after_dlbridges_copy():
    c = copy_pending_behind_a_spin(5.0)
    consumer = torch.cuda.Stream()
    with torch.cuda.stream(consumer):
        y = torch.from_dlpack(c)  # torch passes `consumer` as the stream
        total = y.sum()
    consumer.synchronize()
    assert total.item() == 5.0 * BIG


def test_to_device_on_the_callers_stream():
    a = np.arange(BIG, dtype=np.float32)
    s = torch.cuda.Stream()
    busy(s)
    d = dlbridge.from_dlpack(a).to_device("cuda:0", stream=s.cuda_stream)
    s.synchronize()
    np.testing.assert_array_equal(host(d), a)


@pytest.mark.parametrize("stream", [1, 2])
def test_to_device_on_the_default_streams(stream):
    a = np.arange(1000, dtype=np.int64)
    d = dlbridge.from_dlpack(a).to_device("cuda:0", stream=stream)
    np.testing.assert_array_equal(host(d), a)


def test_dlpack_export_honours_the_stream_argument():
    c = copy_pending_behind_a_spin(2.0)
    s = torch.cuda.Stream()
    cap = c.__dlpack__(stream=s.cuda_stream, max_version=(1, 3))
    with torch.cuda.stream(s):
        total = torch.from_dlpack(cap).sum()
    s.synchronize()
    assert total.item() == 2.0 * BIG
    for bad in (0, -2, 1.5):
        with pytest.raises((ValueError, TypeError)):
            c.__dlpack__(stream=bad)


def test_stream_minus_one_asks_for_no_synchronisation():
    t = dlbridge.from_dlpack(torch.ones(4, device="cuda"))
    assert torch.from_dlpack(t.__dlpack__(stream=-1, max_version=(1, 3))).sum().item() == 4.0


# ------------------------------------------------------------------------------ pinned, managed
def test_pinned_host_memory_is_cuda_host_and_readable_on_the_host():
    a = np.arange(20.0).reshape(4, 5)
    p = dlbridge.from_dlpack(a).to_device("cuda_host")
    assert p.device == "cuda_host" and p.__dlpack_device__() == (3, 0) and p.is_copied
    n = np.asarray(p)  # host-accessible: the array interface, zero-copy
    assert n.ctypes.data == p.data_ptr
    np.testing.assert_array_equal(n, a)
    assert memoryview(p).tolist() == a.tolist()
    assert p.__cuda_array_interface__["data"][0] == p.data_ptr
    d = p.to_device("cuda:0")
    np.testing.assert_array_equal(host(d), a)


def test_torch_pinned_tensor_is_read_in_place():
    x = torch.arange(16.0).pin_memory()
    t = dlbridge.from_dlpack(x)
    assert t.data_ptr == x.data_ptr() and t.device in ("cpu", "cuda_host")
    n = dlbridge.to_numpy(t)
    assert n.ctypes.data == x.data_ptr()
    moved = t.to_device("cuda:0")
    assert torch.equal(torch.from_dlpack(moved).cpu(), x)


def test_managed_memory_is_readable_everywhere():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    m = dlbridge.from_dlpack(a).to_device("cuda_managed")
    assert m.device == "cuda_managed" and m.__dlpack_device__() == (13, 0)
    np.testing.assert_array_equal(np.asarray(m), a)
    assert m.__cuda_array_interface__["data"][0] == m.data_ptr
    np.testing.assert_array_equal(host(m.to_device("cuda:0")), a)


def test_pinned_and_managed_memory_through_cupy():
    cp = cupy_or_skip()
    a = np.arange(10.0)
    for kind in ("cuda_host", "cuda_managed"):
        t = dlbridge.from_dlpack(a).to_device(kind)
        c = cp.asarray(t)
        np.testing.assert_array_equal(cp.asnumpy(c * 2), a * 2)


# ------------------------------------------------------------------------------ CAI
def test_cuda_array_interface_out_is_read_by_torch_and_cupy():
    x = torch.arange(12.0, device="cuda").reshape(3, 4).T
    t = dlbridge.from_dlpack(x)
    cai = t.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (4, 3) and cai["typestr"] == "<f4"
    assert cai["data"] == (x.data_ptr(), False)
    assert cai["strides"] == (4, 16)
    y = torch.as_tensor(t, device="cuda")
    assert y.data_ptr() == x.data_ptr() and torch.equal(y, x)
    cp = cupy_or_skip()
    c = cp.asarray(t)
    assert int(c.data.ptr) == x.data_ptr() and c.strides == (4, 16)


class CudaArrayInterface:
    """Offers only ``__cuda_array_interface__`` (as Numba, RAPIDS and older CuPy do)."""

    def __init__(self, cai, keep):
        self.__cuda_array_interface__ = cai
        self.keep = keep


def test_cuda_array_interface_in_is_zero_copy():
    x = torch.arange(24, dtype=torch.int16, device="cuda").reshape(4, 6)[:, 1::2]
    t = dlbridge.from_dlpack(CudaArrayInterface(x.__cuda_array_interface__, x))
    assert t.device == "cuda:0" and t.data_ptr == x.data_ptr() and not t.readonly
    assert t.strides == x.stride() and str(t.dtype) == "int16"
    np.testing.assert_array_equal(host(t), x.cpu().numpy())


def test_cuda_array_interface_read_only_flag_is_kept():
    x = torch.arange(4.0, device="cuda")
    cai = dict(x.__cuda_array_interface__, data=(x.data_ptr(), True))
    t = dlbridge.from_dlpack(CudaArrayInterface(cai, x))
    assert t.readonly
    with pytest.raises(BufferError):
        dlbridge.copyto(t, np.zeros(4, dtype=np.float32))


def test_cuda_array_interface_stream_is_waited_for():
    x, s = filled_on_a_busy_stream(4.0)
    cai = dict(x.__cuda_array_interface__, stream=s.cuda_stream, version=3)
    n = dlbridge.to_numpy(CudaArrayInterface(cai, x))
    assert (n == 4.0).all()


def test_cuda_array_interface_of_plain_host_memory_is_refused():
    a = np.arange(4.0)
    cai = {"shape": (4,), "typestr": "<f8", "data": (a.ctypes.data, False), "version": 3,
           "strides": None, "stream": None}
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(CudaArrayInterface(cai, a))


# ------------------------------------------------------------------------------ CuPy, JAX
def test_cupy_both_ways_zero_copy():
    cp = cupy_or_skip()
    x = cp.arange(12, dtype=cp.float32).reshape(3, 4)[:, ::2]
    t = dlbridge.from_dlpack(x)
    assert t.device == "cuda:0" and t.data_ptr == int(x.data.ptr) and t.strides == (4, 2)
    y = cp.from_dlpack(t)
    assert int(y.data.ptr) == int(x.data.ptr)
    y[0, 0] = 100
    assert float(x[0, 0]) == 100.0
    z = torch.from_dlpack(dlbridge.from_dlpack(x))
    assert z.data_ptr() == int(x.data.ptr)


def test_cupy_convert_and_host_copy():
    cp = cupy_or_skip()
    x = torch.arange(6.0, device="cuda")
    c = dlbridge.convert(x, "cupy")
    assert isinstance(c, cp.ndarray) and int(c.data.ptr) == x.data_ptr()
    back = dlbridge.convert(c, "numpy", device="cpu")
    np.testing.assert_array_equal(back, np.arange(6.0, dtype=np.float32))
    h = dlbridge.convert(np.arange(4.0), "cupy", device="cuda:0")
    assert isinstance(h, cp.ndarray) and cp.asnumpy(h).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_jax_gpu_both_ways():
    jax, gpu = jax_gpu_or_skip()
    import jax.numpy as jnp

    x = jax.device_put(jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4), gpu)
    t = dlbridge.from_dlpack(x)
    assert t.device == "cuda:0"
    np.testing.assert_array_equal(host(t), np.arange(12.0, dtype=np.float32).reshape(3, 4))
    y = jnp.from_dlpack(dlbridge.from_dlpack(torch.arange(6.0, device="cuda")))
    assert y.devices() == {gpu}
    np.testing.assert_array_equal(np.asarray(y), np.arange(6.0, dtype=np.float32))


def test_jax_convert_on_the_gpu():
    jax, gpu = jax_gpu_or_skip()
    y = dlbridge.convert(torch.arange(6.0, device="cuda"), "jax")
    assert y.devices() == {gpu}
    np.testing.assert_array_equal(np.asarray(y), np.arange(6.0, dtype=np.float32))
    z = dlbridge.convert(np.arange(3.0), "jax", device="cuda:0")
    assert z.devices() == {gpu} and np.asarray(z).tolist() == [0.0, 1.0, 2.0]


def test_convert_numpy_to_torch_on_the_gpu_and_back():
    y, plan = dlbridge.convert(np.arange(6.0)[::-1], "torch", device="cuda:0", report=True)
    assert y.is_cuda and y.tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    assert plan.copies >= 1
    with pytest.raises(BufferError, match="device='cpu'"):
        dlbridge.convert(y, "numpy")
    back = dlbridge.convert(y, "numpy", device="cpu")
    assert back.tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.convert(y, "numpy", device="cpu", copy=False)


# ------------------------------------------------------------------------------ Arrow
class DeviceArray:
    """Offers only ``__arrow_c_device_array__``."""

    def __init__(self, source):
        self.source = source

    def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
        return self.source.__arrow_c_device_array__(requested_schema, **kwargs)


def test_arrow_device_array_on_cuda_round_trip():
    x = torch.arange(12.0, device="cuda").reshape(4, 3)
    t = dlbridge.from_dlpack(x)
    back = dlbridge.from_dlpack(DeviceArray(t))
    assert back.device == "cuda:0" and back.data_ptr == x.data_ptr()
    assert back.shape == (4, 3) and back.readonly  # Arrow imports are read-only
    np.testing.assert_array_equal(host(back), x.cpu().numpy())


def test_arrow_host_interface_of_cuda_data_is_refused():
    t = dlbridge.from_dlpack(torch.arange(3.0, device="cuda"))
    with pytest.raises(BufferError):
        t.__arrow_c_array__()


# ------------------------------------------------------------------------------ pickle, IPC
@pytest.mark.parametrize("protocol", [4, 5])
def test_pickled_cuda_tensor_comes_back_on_the_gpu(protocol):
    x = torch.arange(12.0, device="cuda").reshape(3, 4).T
    t = dlbridge.from_dlpack(x)
    u = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert u.device == "cuda:0" and u.shape == (4, 3) and u.data_ptr != t.data_ptr
    assert torch.equal(torch.from_dlpack(u), x)


def read_and_write_in_a_child(t):
    """Runs in a spawned process: sums a CUDA IPC tensor and writes -1 into its first element."""
    import torch as child_torch

    x = child_torch.from_dlpack(t)
    total = x.sum().item()
    x[0] = -1.0
    child_torch.cuda.synchronize()
    return os.getpid(), str(t.device), total


def test_cuda_ipc_between_two_processes():
    src = torch.arange(1024.0, device="cuda")
    s = dlbridge.to_shared(src)
    assert s.device == "cuda:0" and s.data_ptr == src.data_ptr()  # shared in place
    torch.cuda.synchronize()
    context = multiprocessing.get_context("spawn")  # CUDA cannot be used after fork
    with context.Pool(1) as pool:
        pid, device, total = pool.apply(read_and_write_in_a_child, (s,))
    assert pid != os.getpid() and device == "cuda:0"
    assert total == sum(range(1024))
    assert src[0].item() == -1.0  # the child wrote the parent's memory


def test_cuda_ipc_of_a_view_keeps_its_offset():
    src = torch.arange(4096.0, device="cuda")
    view = src[1000:1010]
    s = dlbridge.to_shared(view)
    torch.cuda.synchronize()
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        _, _, total = pool.apply(read_and_write_in_a_child, (s,))
    assert total == sum(range(1000, 1010))
    assert src[1000].item() == -1.0 and src[999].item() == 999.0


# ------------------------------------------------------------------------------ lifetimes
def test_dropping_imports_and_copies_returns_the_gpu_memory():
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    for _ in range(20):
        x = torch.ones(1 << 20, device="cuda")
        t = dlbridge.from_dlpack(x)
        y = torch.from_dlpack(t)
        del x, t, y
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before
    t = dlbridge.from_dlpack(torch.ones(BIG, device="cuda"))
    torch.cuda.synchronize()
    free_before = torch.cuda.mem_get_info()[0]
    for _ in range(20):  # dlbridge's own allocations (64 MiB each) go back to the driver
        c = t.copy()
        del c
    torch.cuda.synchronize()
    assert torch.cuda.mem_get_info()[0] >= free_before - (64 << 20)
