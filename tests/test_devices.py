"""Devices: from_dlpack(device=..., copy=...), Tensor.to_device / contiguous / copyto, our
producer honouring dl_device, device arguments of every spelling, and the CUDA paths that a
CPU-only machine can reach (refusals with the typed error; GPU tests are in the Rust crate,
ignored without a GPU)."""

import numpy as np
import pytest

import dlbridge
from dlb_testing import require_sycl

dpnp = pytest.importorskip("dpnp")


@pytest.fixture(scope="module")
def sycl():
    require_sycl()


def test_device_argument_spellings(sycl):
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    x = dpnp.arange(3.0)
    assert dlbridge.Device("cpu") == dlbridge.Device((1, 0)) == dlbridge.Device(torch.device("cpu"))
    assert dlbridge.Device(jax.devices("cpu")[0]) == "cpu"
    assert dlbridge.Device(x.device) == dlbridge.Device(x.sycl_device) == "oneapi:0"
    assert dlbridge.Device(torch.device("cuda", 1)) == "cuda:1"
    assert dlbridge.Device(x) == "oneapi:0"  # anything with __dlpack_device__
    for bad in ("gpu", "cuda:-1", (0, 0)):
        with pytest.raises(ValueError):
            dlbridge.Device(bad)
    with pytest.raises(TypeError):
        dlbridge.Device(object())


@pytest.mark.parametrize("device", ["cpu", (1, 0), "torch", "jax"])
def test_oneapi_to_host_is_a_producer_copy(sycl, device):  # C37 on a real non-CPU device
    if device == "torch":
        device = pytest.importorskip("torch").device("cpu")
    elif device == "jax":
        device = pytest.importorskip("jax").devices("cpu")[0]
    x = dpnp.reshape(dpnp.arange(12.0), (3, 4))
    h = dlbridge.from_dlpack(x, device=device)
    assert h.device == "cpu" and h.is_copied and not h.readonly
    np.testing.assert_array_equal(np.from_dlpack(h), np.arange(12.0).reshape(3, 4))
    # The copy is complete and independent: changing the source leaves it alone.
    x[0, 0] = 100.0
    assert h.tolist()[0][0] == 0.0


def test_oneapi_without_device_keeps_the_device_and_names_the_fix(sycl):  # C36
    t = dlbridge.from_dlpack(dpnp.arange(4.0))
    assert t.device == "oneapi:0"
    with pytest.raises(BufferError, match='device="cpu"'):
        memoryview(t)


def test_oneapi_to_host_with_copy_false_is_refused(sycl):  # C39-like: never a hidden copy
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.from_dlpack(dpnp.arange(4.0), device="cpu", copy=False)


def test_copy_true_on_oneapi_is_the_producers_copy(sycl):
    x = dpnp.reshape(dpnp.arange(12.0), (3, 4))
    view = dlbridge.from_dlpack(x)
    c = dlbridge.from_dlpack(x, copy=True)
    assert c.device == "oneapi:0" and c.is_copied and not c.readonly
    assert c.data_ptr != view.data_ptr
    back = dpnp.from_dlpack(c)
    assert dpnp.asnumpy(back).tolist() == dpnp.asnumpy(x).tolist()


def test_tensor_copy_of_oneapi_memory_is_the_owning_librarys_copy(sycl):
    x = dpnp.reshape(dpnp.arange(12.0), (3, 4))
    t = dlbridge.from_dlpack(x)
    for c in (t.copy(), dlbridge.from_dlpack(t, copy=True), dlbridge.from_dlpack(x.T).contiguous()):
        assert c.device == "oneapi:0" and c.data_ptr != t.data_ptr and c.is_c_contiguous
        # a copy the library made is a copy like dlbridge's own: flagged, writable
        assert c.is_copied and not c.readonly
    assert dpnp.asnumpy(dpnp.from_dlpack(t.copy())).tolist() == dpnp.asnumpy(x).tolist()
    # and its export says so: IS_COPIED on __dlpack__(copy=True) and on a move to the host
    from dlpack_ctypes import FLAG_IS_COPIED, inspect_capsule

    for kw in ({"copy": True}, {"dl_device": (1, 0)}):
        info = inspect_capsule(t.__dlpack__(max_version=(1, 3), **kw))
        assert info["flags"] & FLAG_IS_COPIED, kw
    assert t.to_device("cpu").is_copied
    # An F-order copy is not asked of the library: refused with the way to the host.
    with pytest.raises(BufferError, match='device="cpu"'):
        t.copy("F")
    h = t.to_device("cpu").copy("F")
    assert h.is_f_contiguous and h.tolist() == dpnp.asnumpy(x).tolist()


def test_copy_true_on_oneapi_waits_for_the_kernel_writing_the_source(sycl):
    # dpnp's own __dlpack__(copy=True) starts the copy without waiting for the kernel that is
    # still writing the source (about 1 in 20 fresh aranges came back stale when measured);
    # dlbridge waits for the producer's queue first, so every copy holds the final values.
    stale = 0
    for i in range(500):
        x = dpnp.arange(16.0 + (i % 4) * 8)
        c = dlbridge.from_dlpack(x, copy=True)
        stale += dpnp.asnumpy(dpnp.from_dlpack(c)).tolist() != dpnp.asnumpy(x).tolist()
    assert stale == 0


def test_negative_strides_on_oneapi_go_back_to_dpnp(sycl):
    x = dpnp.asarray(np.arange(12.0).reshape(3, 4))[:, ::-1]
    r = dpnp.from_dlpack(dlbridge.from_dlpack(x))
    np.testing.assert_array_equal(dpnp.asnumpy(r), np.arange(12.0).reshape(3, 4)[:, ::-1])


def test_our_cpu_tensor_into_dpnp(sycl):
    t = dlbridge.from_dlpack(np.arange(5.0))
    y = dpnp.from_dlpack(t)
    np.testing.assert_array_equal(np.asarray(y), np.arange(5.0))


def test_oneapi_moves_are_made_by_the_library_that_owns_the_device(sycl):
    t = dlbridge.from_dlpack(np.arange(3.0))
    # dlbridge cannot allocate oneAPI memory itself: __dlpack__(dl_device=...), to_device and
    # from_dlpack(device=...) ask dpnp, which can, both ways
    exported = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 3), dl_device=(14, 0)))
    for there in (t.to_device(dpnp.arange(1.0).device), dlbridge.from_dlpack(t, device="oneapi:0"),
                  exported):
        assert there.device == "oneapi:0"
        back = there.to_device("cpu")
        assert back.device == "cpu" and back.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(BufferError, match="copy=False"):
        dlbridge.from_dlpack(t, device="oneapi:0", copy=False)
    with pytest.raises(BufferError, match="copy=False"):
        t.__dlpack__(max_version=(1, 3), dl_device=(14, 0), copy=False)
    # and the other way: oneAPI memory asked for on the host through __dlpack__
    x = dlbridge.from_dlpack(dpnp.arange(3.0))
    home = dlbridge.from_dlpack(x.__dlpack__(max_version=(1, 3), dl_device=(1, 0)))
    assert home.device == "cpu" and home.tolist() == [0.0, 1.0, 2.0]


def test_readonly_source_copied_on_oneapi_is_writable(sycl):
    x = dpnp.arange(4.0)
    c = dlbridge.from_dlpack(x, device="cpu", copy=True)
    assert c.is_copied and not c.readonly


# --- host-only paths (no dpnp needed beyond the module import) ---------------------------


def test_to_device_same_device_is_identity():
    t = dlbridge.from_dlpack(np.arange(3.0))
    assert t.to_device("cpu") is t


def test_cuda_without_a_driver_is_a_typed_buffer_error():
    t = dlbridge.from_dlpack(np.arange(3.0))
    try:
        t.to_device("cuda:0")
    except BufferError as exc:
        assert "CUDA" in str(exc)
    else:  # a machine with a GPU: the copy must be real
        pytest.skip("a CUDA driver is present; GPU behaviour is covered by the Rust GPU tests")


def test_dl_device_cpu_other_than_zero_does_not_exist():
    t = dlbridge.from_dlpack(np.arange(3.0))
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(1, 3), dl_device=(1, 1))


def test_streams_on_cpu():  # C42/C43 rules for a device without streams
    t = dlbridge.from_dlpack(np.arange(3.0))
    t.__dlpack__(max_version=(1, 3), stream=None)
    t.__dlpack__(max_version=(1, 3), stream=-1)
    for bad in (0, 1, 2, 7):
        with pytest.raises(ValueError):
            t.__dlpack__(max_version=(1, 3), stream=bad)


def test_contiguous_and_copyto():
    a = np.arange(12, dtype="int32").reshape(3, 4)
    t = dlbridge.from_dlpack(a.T)
    c = t.contiguous()
    assert c.is_c_contiguous and c.is_copied and c.tolist() == a.T.tolist()
    assert c.contiguous() is c
    dst = dlbridge.from_dlpack(np.zeros((4, 3), dtype="int32"))
    dlbridge.copyto(dst, t)
    assert dst.tolist() == a.T.tolist()
    with pytest.raises(ValueError):
        dlbridge.copyto(dst, np.zeros(5, dtype="int32"))
    ro = np.zeros(3)
    ro.flags.writeable = False
    with pytest.raises(BufferError):
        dlbridge.copyto(dlbridge.from_dlpack(ro), np.ones(3))


def test_cuda_array_interface_only_on_cuda_memory():
    t = dlbridge.from_dlpack(np.arange(3.0))
    assert not hasattr(t, "__cuda_array_interface__")


class FakeCudaArray:
    """A __cuda_array_interface__ producer with a made-up device pointer: on a machine without
    a CUDA driver dlbridge must refuse it with the typed error (it cannot ask the driver which
    device the pointer is on), never crash or read the address."""

    def __init__(self, stream=None):
        self.__cuda_array_interface__ = {
            "shape": (2, 3),
            "typestr": "<f4",
            "data": (0xDEAD0000, False),
            "strides": None,
            "version": 3,
            "stream": stream,
        }


def test_cuda_array_interface_import_without_a_driver():
    try:
        t = dlbridge.from_dlpack(FakeCudaArray())
    except BufferError as exc:
        assert "CUDA" in str(exc)
    else:
        pytest.skip(f"a CUDA driver answered for a fake pointer: {t}")


def test_cuda_array_interface_stream_zero_is_malformed():  # C42
    with pytest.raises((BufferError, ValueError)):
        dlbridge.from_dlpack(FakeCudaArray(stream=0))


class OldProducer:
    """A pre-2023 producer: `__dlpack__(stream=None)` only, and no `__dlpack_device__`."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()


@pytest.mark.parametrize(
    "kwargs", [{"copy": True}, {"device": "cpu"}, {"device": "cpu", "copy": True}]
)
def test_old_producer_without_dlpack_device(kwargs):
    a = np.arange(6.0)
    t = dlbridge.from_dlpack(OldProducer(a), **kwargs)
    assert t.device == "cpu" and t.tolist() == a.tolist()
    if kwargs.get("copy"):
        assert t.is_copied and not t.readonly and t.data_ptr != a.ctypes.data
