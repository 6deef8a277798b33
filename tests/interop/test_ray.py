"""dlbridge Tensors through a real local Ray: ``ray.put`` / ``ray.get``, Tensors as task
arguments and return values, zero-copy reads out of the shared-memory object store.

Peer facts this file relies on (Ray 2.60): values are pickled with protocol 5 and a buffer
callback, and the out-of-band buffers of an object land in the object store (plasma), a
shared mapping of a file under ``/dev/shm`` that every process of the node maps; ``ray.get``
hands buffers back as read-only views of that mapping (NumPy arrays come back read-only and
zero-copy, two gets of one ref share memory); ``ray.put`` always writes to the store, task
returns below 100 KiB are inlined (copied) in the reply. Remote functions are defined inside
the tests: cloudpickle then sends them by value, as the workers cannot import this module.
"""

from __future__ import annotations

import gc
import logging
import os

import numpy as np
import pytest

ray = pytest.importorskip("ray")

import dlbridge  # noqa: E402
from dlb_testing import make, make_tensor, raw_values  # noqa: E402

#: Big enough that Ray's store holds it (not inlined): 4 MiB.
BIG = (1024, 1024)


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """One local Ray for the module (two CPUs, no dashboard, quiet), shut down at the end."""
    if ray.is_initialized():  # pragma: no cover - another test left one running
        ray.shutdown()
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        logging_level=logging.ERROR,
        log_to_driver=False,
    )
    yield
    ray.shutdown()


def mapping_of(address: int) -> str:
    """The line of /proc/self/maps whose range holds ``address``."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= address < hi:
                return line.strip()
    raise AssertionError(f"address {address:#x} is not mapped")


def named_tensor() -> dlbridge.Tensor:
    """A read-only (64, 128, 128) float32 Tensor with dim_names, imported from pyarrow."""
    pa = pytest.importorskip("pyarrow")
    ty = pa.fixed_shape_tensor(pa.float32(), [128, 128], dim_names=["H", "W"])
    values = pa.array(make("float32", (64 * 128 * 128,)))
    storage = pa.FixedSizeListArray.from_arrays(values, 128 * 128)
    t = dlbridge.from_dlpack(pa.ExtensionArray.from_storage(ty, storage))
    assert t.readonly and t.dim_names == ("", "H", "W")
    return t


def test_get_is_a_zero_copy_read_only_view_of_the_store_like_numpy():
    source = dlbridge.from_dlpack(make("float32", BIG))
    ref = ray.put(source)
    got, again = ray.get(ref), ray.get(ref)
    assert isinstance(got, dlbridge.Tensor)
    assert (got.shape, got.dtype.name, got.readonly, got.is_copied) == (BIG, "float32", True, False)
    np.testing.assert_array_equal(np.from_dlpack(got), np.from_dlpack(source))
    assert got.data_ptr == again.data_ptr != source.data_ptr  # both gets view one store buffer
    with pytest.raises(ValueError):
        np.from_dlpack(got)[0, 0] = 1.0  # the store's memory stays read-only downstream
    # NumPy's own arrays come back the same way: read-only, in the same shared mapping
    numpy_got = ray.get(ray.put(make("float32", BIG)))
    assert not numpy_got.flags.writeable
    assert mapping_of(got.data_ptr) == mapping_of(numpy_got.ctypes.data)
    assert "plasma" in mapping_of(got.data_ptr)


def test_got_tensor_keeps_the_object_alive_after_its_ref_is_dropped():
    ref = ray.put(dlbridge.from_dlpack(make("int64", BIG)))
    got = ray.get(ref)
    del ref
    gc.collect()
    ray.put(np.zeros(BIG))  # more traffic through the store
    np.testing.assert_array_equal(np.from_dlpack(got), make("int64", BIG))


@pytest.mark.parametrize("shape", [(3, 5), BIG], ids=["small", "big"])
@pytest.mark.parametrize(
    "dtype", ["bool", "int8", "uint16", "int64", "float16", "float32", "float64", "complex128",
              "float8_e4m3fn", "bfloat16"]
)
def test_every_dtype_round_trips_exactly(dtype, shape):
    source = make_tensor(dtype, shape)
    got = ray.get(ray.put(source))
    assert (got.shape, got.strides, got.dtype.name) == (source.shape, source.strides, dtype)
    np.testing.assert_array_equal(raw_values(got, dtype), raw_values(source, dtype))


@pytest.mark.parametrize("order", ["C", "F"])
def test_layouts_round_trip(order):
    ref = make("float64", (300, 200), order=order)
    got = ray.get(ray.put(dlbridge.from_dlpack(ref)))
    assert got.shape == ref.shape and (got.is_f_contiguous if order == "F" else got.is_c_contiguous)
    np.testing.assert_array_equal(np.from_dlpack(got), ref)
    strided = ray.get(ray.put(dlbridge.from_dlpack(ref[::3, 1::2])))
    np.testing.assert_array_equal(np.from_dlpack(strided), ref[::3, 1::2])


def test_dim_names_and_read_only_are_kept():
    source = named_tensor()
    got = ray.get(ray.put(source))
    assert (got.dim_names, got.readonly, got.shape) == (("", "H", "W"), True, source.shape)
    np.testing.assert_array_equal(np.from_dlpack(got), np.from_dlpack(source))


def test_tensors_as_task_arguments_and_return_values():
    @ray.remote
    def describe(t):
        # the argument is read from the store by the worker: a read-only zero-copy view
        return {
            "type": type(t).__name__, "shape": t.shape, "dtype": t.dtype.name,
            "readonly": t.readonly, "dim_names": t.dim_names, "pid": os.getpid(),
            "sum": float(np.from_dlpack(t).astype(np.float64).sum()),
        }

    @ray.remote
    def doubled(t):
        return dlbridge.from_dlpack(np.from_dlpack(t) * 2)

    source = named_tensor()
    info = ray.get(describe.remote(source))
    assert info["pid"] != os.getpid()
    assert info == {
        "type": "Tensor", "shape": source.shape, "dtype": "float32", "readonly": True,
        "dim_names": ("", "H", "W"), "pid": info["pid"],
        "sum": float(np.from_dlpack(source).astype(np.float64).sum()),
    }
    # a writable Tensor too reaches the worker as a read-only view of the store
    writable = dlbridge.from_dlpack(make("float32", BIG))
    assert ray.get(describe.remote(writable))["readonly"] is True
    for shape in [(3, 4), BIG]:  # an inlined reply and one through the store
        ref = make("int32", shape)
        back = ray.get(doubled.remote(dlbridge.from_dlpack(ref)))
        assert isinstance(back, dlbridge.Tensor) and back.shape == shape
        np.testing.assert_array_equal(np.from_dlpack(back), ref * 2)


def test_one_put_ref_is_read_by_many_tasks():
    @ray.remote
    def checksum(t):
        return int(np.from_dlpack(t).sum(dtype=np.int64))

    ref = ray.put(dlbridge.from_dlpack(make("int16", BIG)))
    want = int(make("int16", BIG).sum(dtype=np.int64))
    assert ray.get([checksum.remote(ref) for _ in range(4)]) == [want] * 4


def test_a_shared_tensor_travels_by_value():
    """Ray pickles with plain pickle: a ``to_shared`` Tensor sends its data, not its handle."""
    shared = dlbridge.to_shared(make("float64", BIG))
    got = ray.get(ray.put(shared))
    assert got.readonly and got.data_ptr != shared.data_ptr
    assert "plasma" in mapping_of(got.data_ptr)
    np.testing.assert_array_equal(np.from_dlpack(got), make("float64", BIG))
