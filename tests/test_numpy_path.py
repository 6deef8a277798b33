"""NumPy arrays read and built through NumPy's C API (``numpy_api``): the same answers as the
general DLPack path, for every layout and dtype, with the same lifetimes.

``dlbridge.from_dlpack(arr)`` reads an exact ``numpy.ndarray`` in place; the reference is the
general path, ``dlbridge.from_dlpack(arr.__dlpack__(max_version=...))`` (NumPy's own capsule).
``dlbridge.to_numpy`` builds ndarrays natively; the reference is its general implementation,
``dlbridge.host._to_numpy_general`` (``convert(x, "numpy", device="cpu")``).
"""

from __future__ import annotations

import gc
import sys
import threading
import weakref

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dlbridge  # noqa: E402
from dlbridge.host import _to_numpy_general  # noqa: E402
from test_properties import sliced_arrays  # noqa: E402

MAX_VERSION = dlbridge.DLPACK_VERSION


def general(arr, **kw):
    """The general path: NumPy's own DLPack capsule, imported by dlbridge."""
    return dlbridge.from_dlpack(arr.__dlpack__(max_version=MAX_VERSION), **kw)


def outcome(f):
    try:
        return f(), None
    except Exception as exc:  # noqa: BLE001 - compared below
        return None, (type(exc), str(exc))


def props(t, with_ptr=True):
    out = (t.shape, t.strides, t.dtype.name, t.readonly, t.is_copied, str(t.device), t.tolist())
    return out + (t.data_ptr,) if with_ptr else out


def assert_same_import(arr, **kw):
    """from_dlpack(arr) and the general path give the same tensor or the same error."""
    fast, fast_err = outcome(lambda: dlbridge.from_dlpack(arr, **kw))
    ref, ref_err = outcome(lambda: general(arr, **kw))
    assert fast_err == ref_err
    if fast is not None:
        copied = kw.get("copy") is True or fast.data_ptr != arr.__array_interface__["data"][0]
        assert props(fast, with_ptr=not copied) == props(ref, with_ptr=not copied)
        if not copied and arr.size:
            assert fast.data_ptr == arr.ctypes.data


def variant(arr, draw):
    """The array, maybe read-only, maybe byte-swapped (NumPy's __dlpack__ refuses that)."""
    if draw(st.booleans()) and arr.dtype.itemsize > 1:
        arr = arr.byteswap().view(arr.dtype.newbyteorder())
    if draw(st.booleans()):
        arr = arr.view()
        arr.flags.writeable = False
    return arr


@st.composite
def arrays(draw):
    return variant(draw(sliced_arrays()), draw)


@settings(max_examples=300, deadline=None)
@given(arrays(), st.sampled_from([None, True, False]), st.sampled_from([None, "cpu"]))
def test_import_matches_the_general_path(arr, copy, device):
    assert_same_import(arr, copy=copy, device=device)


@st.composite
def unaligned(draw):
    """Views whose data or strides are not multiples of the item size."""
    dtype = np.dtype(draw(st.sampled_from(["int16", "int32", "float32", "float64", "complex128"])))
    n = draw(st.integers(0, 6))
    offset = draw(st.integers(1, dtype.itemsize - 1))
    raw = np.zeros(n * dtype.itemsize * 2 + offset + 8, dtype=np.uint8)
    raw[:] = np.arange(raw.size) % 251
    if draw(st.booleans()):  # misaligned start, item-sized strides
        return variant(raw[offset:offset + n * dtype.itemsize].view(dtype), draw)
    # a field of a packed record: strides of itemsize + 1 bytes
    rec = np.zeros(n, dtype=[("pad", "u1"), ("x", dtype)])
    rec["x"] = np.arange(n)
    return variant(rec["x"], draw)


@settings(max_examples=150, deadline=None)
@given(unaligned(), st.sampled_from([None, True, False]))
def test_unaligned_and_odd_strides_match_the_general_path(arr, copy):
    assert_same_import(arr, copy=copy)


OTHER_DTYPES = ["longdouble", "clongdouble", "datetime64[s]", "timedelta64[ms]", "O", "U3", "S2",
                "V4", [("a", "i4"), ("b", "f8")], "intc", "uintc", "long", "ulong", "longlong",
                "ulonglong", "half", "single", "double", "csingle", "cdouble", "bool", "byte"]


@pytest.mark.parametrize("dtype", OTHER_DTYPES, ids=str)
@pytest.mark.parametrize("copy", [None, True])
def test_every_numpy_dtype_matches_the_general_path(dtype, copy):
    arr = np.zeros((2, 3), dtype=dtype)
    assert_same_import(arr, copy=copy)
    assert_same_import(arr[:, ::2], copy=copy)


def test_ml_dtypes_arrays_match_their_bits_through_the_general_path():
    # NumPy's __dlpack__ refuses ml_dtypes types; the reference is their bits as unsigned ints
    # through NumPy's capsule, viewed as the dtype (the bits only: float8 has no tolist()).
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for name in ("bfloat16", "float8_e4m3fn"):
        base = np.arange(12).astype(getattr(ml_dtypes, name)).reshape(3, 4)
        for arr in (base, base[::-2, 1::2].T):
            fast = dlbridge.from_dlpack(arr)
            unsigned = f"uint{8 * arr.dtype.itemsize}"
            ref = general(arr.view(unsigned))
            assert props(fast.view(unsigned)) == props(ref)
            assert fast.dtype == name


def test_views_of_dlpack_imports_take_the_general_path_and_agree():
    # np.from_dlpack arrays' base is a capsule holding their device: NumPy's __dlpack__ says.
    arr = np.from_dlpack(dlbridge.from_dlpack(np.arange(12.0).reshape(3, 4)))
    assert type(arr.base).__name__ == "PyCapsule"
    assert_same_import(arr)
    assert_same_import(arr[1:, ::-2].T)


@pytest.mark.parametrize("make", [
    lambda tmp: np.memmap(tmp / "m.bin", dtype="float32", mode="w+", shape=(3, 4)),
    lambda tmp: np.ma.MaskedArray(np.arange(12.0).reshape(3, 4), mask=False),
    lambda tmp: np.matrix(np.arange(12).reshape(3, 4)),
], ids=["memmap", "masked", "matrix"])
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_subclasses_take_the_general_path(tmp_path, make):
    arr = make(tmp_path)
    t = dlbridge.from_dlpack(arr)
    assert props(t) == props(general(arr))
    assert t.data_ptr == arr.ctypes.data


def test_the_tensor_keeps_the_array_alive():
    arr = np.arange(16, dtype=np.float32)
    ref = weakref.ref(arr)
    before = sys.getrefcount(arr)
    t = dlbridge.from_dlpack(arr)
    assert sys.getrefcount(arr) == before + 1
    del arr
    gc.collect()
    assert ref() is not None
    assert t.tolist() == list(range(16))
    del t
    assert ref() is None  # released at once, not deferred


def test_the_array_is_released_when_the_tensor_dies_in_another_thread():
    arr = np.arange(8.0)
    ref = weakref.ref(arr)
    box = [dlbridge.from_dlpack(arr)]
    del arr
    worker = threading.Thread(target=box.clear)
    worker.start()
    worker.join()
    assert ref() is None


def test_the_array_is_released_by_a_foreign_deleter():
    torch = pytest.importorskip("torch")
    arr = np.arange(8.0)
    ref = weakref.ref(arr)
    tt = torch.from_dlpack(dlbridge.from_dlpack(arr))  # torch owns the export now
    del arr
    gc.collect()
    assert ref() is not None
    box = [tt]
    del tt
    worker = threading.Thread(target=box.clear)  # torch runs dlbridge's deleter there
    worker.start()
    worker.join()
    gc.collect()
    assert ref() is None


# ------------------------------------------------------------------------------ to_numpy


def same_result(x, copy):
    """to_numpy and its general path: identical outcomes (value, flags, memory) or errors of
    the same type (the native path reports its import's own error: it never reads a producer
    twice, so it cannot ask the general path to word it)."""
    fast, fast_err = outcome(lambda: dlbridge.to_numpy(x, copy=copy))
    ref, ref_err = outcome(lambda: _to_numpy_general(x, copy=copy))
    assert (fast_err is None) == (ref_err is None)
    if fast_err is not None:
        assert fast_err[0] is ref_err[0] and fast_err[1]
    if fast is None:
        return None
    assert (fast is x) == (ref is x)
    assert type(fast) is type(ref)
    assert fast.dtype == ref.dtype and fast.shape == ref.shape and fast.strides == ref.strides
    assert fast.flags.writeable == ref.flags.writeable
    assert fast.flags.c_contiguous == ref.flags.c_contiguous
    assert fast.flags.aligned == ref.flags.aligned
    np.testing.assert_array_equal(fast, ref)
    if fast.size:
        src = source_ptr(x)  # both alias the source, or both are copies
        assert (fast.ctypes.data == src) == (ref.ctypes.data == src)
    return fast


def source_ptr(x):
    try:
        return dlbridge.from_dlpack(x, copy=False).data_ptr
    except Exception:  # noqa: BLE001 - a source that cannot be aliased
        return None


@settings(max_examples=200, deadline=None)
@given(arrays(), st.sampled_from([None, True, False]))
def test_to_numpy_of_numpy_arrays_matches(arr, copy):
    same_result(arr, copy)


@settings(max_examples=200, deadline=None)
@given(arrays(), st.sampled_from([None, True, False]))
def test_to_numpy_of_tensors_matches(arr, copy):
    t, err = outcome(lambda: dlbridge.from_dlpack(arr))
    if t is not None:
        same_result(t, copy)


@settings(max_examples=100, deadline=None)
@given(unaligned(), st.sampled_from([None, True, False]))
def test_to_numpy_of_misaligned_buffers_matches(arr, copy):
    same_result(memoryview(arr.tobytes()) if arr.flags.c_contiguous else arr, copy)
    if arr.flags.c_contiguous and arr.ndim:
        same_result(memoryview(np.ascontiguousarray(arr).view(np.uint8)).cast("B"), copy)


@pytest.mark.parametrize("copy", [None, True, False])
def test_to_numpy_of_torch_tensors_matches(copy):
    torch = pytest.importorskip("torch")
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for t in (base, base[:, ::2], base.T, torch.zeros(0, 3), torch.tensor(3.5),
              base.to(torch.bfloat16), base.to(torch.int64), base.bool(),
              base.clone().requires_grad_(), torch.randn(3, dtype=torch.complex64).conj(),
              base.to(torch.complex64)):
        same_result(t, copy)


@pytest.mark.parametrize("copy", [None, True, False])
def test_to_numpy_of_pyarrow_arrays_matches(copy):
    pa = pytest.importorskip("pyarrow")
    for a in (
        pa.array([1.5, 2.5, 3.5]),
        pa.array([1, 2, 3], type=pa.int16()),
        pa.array([True, False, True]),
        pa.array([1, None, 3]),
        pa.array([], type=pa.float64()),
        pa.chunked_array([[1, 2], [3]]),
        pa.array(np.arange(10.0))[3:7],
        pa.array([1, 2], type=pa.uint8()),
    ):
        same_result(a, copy)


@pytest.mark.parametrize("copy", [None, True, False])
def test_to_numpy_of_other_sources_matches(copy):
    for x in (b"abcd", bytearray(b"abcd"), memoryview(b"abcdefgh").cast("i"), [1, 2, 3], 3.0,
              np.float32(2.5), np.arange(5)[::2].view(np.ma.MaskedArray)):
        same_result(x, copy)


def test_to_numpy_of_a_capsule_is_left_to_the_general_path():
    arr = np.arange(6.0)
    y = dlbridge.to_numpy(arr.__dlpack__(max_version=MAX_VERSION))
    assert y.ctypes.data == arr.ctypes.data and y.tolist() == arr.tolist()


def test_to_numpy_never_gives_a_writable_view_of_read_only_memory():
    arr = np.arange(6.0)
    arr.flags.writeable = False
    y = dlbridge.to_numpy(dlbridge.from_dlpack(arr))
    assert not y.flags.writeable and y.ctypes.data == arr.ctypes.data
    with pytest.raises(ValueError):
        y.flags.writeable = True
    z = dlbridge.to_numpy(bytes(range(8)))
    with pytest.raises(ValueError):
        z.flags.writeable = True


def test_to_numpy_results_keep_their_source_alive():
    arr = np.arange(16, dtype=np.float32)
    ref = weakref.ref(arr)
    y = dlbridge.to_numpy(dlbridge.from_dlpack(arr))
    assert isinstance(y.base, dlbridge.Tensor)
    del arr
    gc.collect()
    assert ref() is not None and y.tolist() == list(range(16))
    del y
    gc.collect()
    assert ref() is None


def test_to_numpy_validates_copy_like_the_general_path():
    arr = np.arange(3)
    for bad in (1, 0, "yes", np.bool_(True)):
        with pytest.raises(ValueError, match="copy must be"):
            dlbridge.to_numpy(arr, copy=bad)
    assert dlbridge.to_numpy(x=arr) is arr


class _OneShotStream:
    """A producer whose Arrow stream can be read once (like a RecordBatchReader)."""

    def __init__(self, chunked):
        self.chunked, self.reads = chunked, 0

    def __arrow_c_stream__(self, requested_schema=None):
        self.reads += 1
        if self.reads > 1:
            raise RuntimeError("this stream was already read")
        return self.chunked.__arrow_c_stream__(requested_schema)


def test_to_numpy_reads_a_producer_once():
    pa = pytest.importorskip("pyarrow")
    chunked = pa.chunked_array([np.arange(3.0), np.arange(3.0, 5.0)])
    source = _OneShotStream(chunked)
    with pytest.raises(BufferError):  # two chunks need a copy: the import's own error
        dlbridge.to_numpy(source, copy=False)
    assert source.reads == 1
    source = _OneShotStream(chunked)
    np.testing.assert_array_equal(dlbridge.to_numpy(source), np.arange(5.0))
    assert source.reads == 1


def test_to_numpy_of_bfloat16_reads_the_producer_once():
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    calls = []

    class Counting:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, **kwargs):
            calls.append(kwargs)
            return self.t.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    t = torch.arange(4, dtype=torch.bfloat16)
    out = dlbridge.to_numpy(Counting(t))
    assert str(out.dtype) == "bfloat16" and len(calls) == 1
    np.testing.assert_array_equal(out.astype(np.float32), np.arange(4, dtype=np.float32))


def test_to_numpy_of_an_import_hangs_the_memory_on_a_capsule():
    pa = pytest.importorskip("pyarrow")
    src = pa.array(np.arange(8, dtype=np.float32))
    ref = weakref.ref(src)
    y = dlbridge.to_numpy(src)
    assert type(y.base).__name__ == "PyCapsule"  # the owner of the memory, not a Tensor
    assert not y.flags.writeable
    with pytest.raises(ValueError):
        y.flags.writeable = True
    del src
    gc.collect()
    assert y.tolist() == list(range(8))
    del y
    gc.collect()
    assert ref() is None
