"""Tensor.__dlpack__ / __dlpack_device__: capsule names, versions, flags, copy, stream, dl_device.

Capsules are read (without being consumed) through ``dlpack_ctypes.inspect_capsule``.
"""

from __future__ import annotations

import inspect
import weakref

import numpy as np
import pytest

import dlbridge
from dlb_testing import (
    LAYOUTS,
    NUMPY_DTYPES,
    SameCapsule,
    assert_strides_equivalent,
    assert_values_equal,
    make,
)
from dlpack_ctypes import (
    FLAG_IS_COPIED,
    FLAG_READ_ONLY,
    FakeManagedTensor,
    capsule_name,
    inspect_capsule,
)


def _ro(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False
    return a


# --------------------------------------------------------------------------------------------
# Version negotiation (spec §5.1)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "max_version, name",
    [
        (None, "dltensor"),
        ((0, 8), "dltensor"),
        ((0, 99), "dltensor"),
        ((1, 0), "dltensor_versioned"),
        ((1, 1), "dltensor_versioned"),
        ((1, 3), "dltensor_versioned"),
        ((1, 99), "dltensor_versioned"),
        ((2, 0), "dltensor_versioned"),
    ],
)
def test_capsule_name_by_max_version(max_version, name):
    t = dlbridge.from_dlpack(make("float32", (2, 3)))
    cap = t.__dlpack__() if max_version is None else t.__dlpack__(max_version=max_version)
    assert capsule_name(cap) == name
    info = inspect_capsule(cap)
    if info["versioned"]:
        assert info["version"] == (1, 3)  # the producer's own version
        assert info["flags"] & FLAG_READ_ONLY == 0
        assert info["flags"] & FLAG_IS_COPIED == 0
    assert info["has_deleter"]


@pytest.mark.parametrize("bad", [(1,), (1, 2, 3), "1.0", 1, (1.0, 0), ("a", "b")])
def test_malformed_max_version(bad):
    t = dlbridge.from_dlpack(make("float32", (2,)))
    with pytest.raises((ValueError, TypeError)):
        t.__dlpack__(max_version=bad)


def test_dlpack_keywords_only():
    t = dlbridge.from_dlpack(make("float32", (2,)))
    with pytest.raises(TypeError):
        t.__dlpack__(None)


# __dlpack__ is a raw fastcall method that matches keyword names by identity first and
# remembers constant tuples by identity: every way of passing the same arguments must agree.
def test_dlpack_signature_is_introspectable():
    sig = inspect.signature(dlbridge.Tensor.__dlpack__)
    assert list(sig.parameters) == ["self", "stream", "max_version", "dl_device", "copy"]
    assert all(p.default is None for n, p in sig.parameters.items() if n != "self")


def test_dlpack_keyword_names_not_interned():
    t = dlbridge.from_dlpack(make("float32", (2,)))
    # names built at run time are equal to, but not the same objects as, the interned ones
    kwargs = {"".join(["max_", "version"]): (1, 3), "".join(["co", "py"]): True}
    cap = t.__dlpack__(**kwargs)
    assert capsule_name(cap) == "dltensor_versioned"
    assert inspect_capsule(cap)["flags"] & FLAG_IS_COPIED


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"foo": 1}, TypeError),
        ({"max_version": (1, 3), "stream_": None}, TypeError),
        ({"copy": "yes"}, TypeError),
        ({"copy": 1}, TypeError),
        ({"dl_device": "cpu"}, ValueError),
    ],
)
def test_dlpack_bad_keywords(kwargs, error):
    t = dlbridge.from_dlpack(make("float32", (2,)))
    with pytest.raises(error):
        t.__dlpack__(**kwargs)
    # a refused call leaves nothing behind: the next good call works
    assert capsule_name(t.__dlpack__(max_version=(1, 3))) == "dltensor_versioned"


def test_dlpack_many_distinct_version_tuples():
    # more distinct constant tuples than the identity cache remembers: each still parses right
    t = dlbridge.from_dlpack(make("float32", (2,)))
    for minor in range(40):
        for _ in range(2):
            cap = t.__dlpack__(max_version=tuple([1, minor]))
            assert capsule_name(cap) == "dltensor_versioned"
        for _ in range(2):
            cap = t.__dlpack__(max_version=tuple([0, minor]))
            assert capsule_name(cap) == "dltensor"


def test_dlpack_version_tuple_subclass_and_numpy_bool_copy():
    class Version(tuple):
        pass

    t = dlbridge.from_dlpack(make("float32", (2,)))
    cap = t.__dlpack__(max_version=Version((1, 3)), copy=np.True_)
    assert capsule_name(cap) == "dltensor_versioned"
    assert inspect_capsule(cap)["flags"] & FLAG_IS_COPIED


@pytest.mark.parametrize(
    "order",
    [
        ("max_version", "copy", "dl_device", "stream"),
        ("stream", "dl_device", "copy", "max_version"),
    ],
)
def test_dlpack_keyword_order_does_not_matter(order):
    t = dlbridge.from_dlpack(make("float32", (2,)))
    values = {"max_version": (1, 3), "copy": False, "dl_device": (1, 0), "stream": None}
    cap = t.__dlpack__(**{k: values[k] for k in order})
    assert capsule_name(cap) == "dltensor_versioned"
    assert not inspect_capsule(cap)["flags"] & FLAG_IS_COPIED


@pytest.mark.parametrize("name", sorted(LAYOUTS))
@pytest.mark.parametrize("versioned", [False, True])
def test_capsule_contents(name, versioned):
    a = LAYOUTS[name]("float64")
    t = dlbridge.from_dlpack(a)
    cap = t.__dlpack__(max_version=(1, 3) if versioned else None)
    info = inspect_capsule(cap)
    assert info["device"] == (1, 0)
    assert info["dtype"] == (2, 64, 1)
    assert info["ndim"] == a.ndim
    assert info["shape"] == a.shape
    if a.ndim:
        assert not info["strides_is_null"]  # never NULL strides when ndim > 0 (1.2+)
        assert_strides_equivalent(info["strides"], a)
    if a.size:
        assert info["data_ptr"] == a.ctypes.data  # zero-copy
        assert info["byte_offset"] == 0  # de-facto convention: data = first element


@pytest.mark.parametrize("versioned", [False, True])
def test_0d_export_null_shape_and_strides(versioned):  # C8
    t = dlbridge.from_dlpack(np.array(4.5))
    info = inspect_capsule(t.__dlpack__(max_version=(1, 3) if versioned else None))
    assert info["ndim"] == 0
    assert info["shape_is_null"]
    assert info["strides_is_null"]
    back = np.from_dlpack(t)
    assert back.shape == () and back[()] == 4.5


@pytest.mark.parametrize("shape", [(0, 2048), (0, 3), (2, 0, 5)])
def test_zero_size_export_strides(shape):  # C10
    from dlpack_ctypes import c_strides

    # whatever strides the source had (NumPy 2.4 gives (0, 0) for np.zeros((0, 2048)))
    for src in (np.zeros(shape, dtype=np.float32), make("float32", shape)):
        t = dlbridge.from_dlpack(src)
        info = inspect_capsule(t.__dlpack__(max_version=(1, 3)))
        assert info["strides"] == c_strides(shape), "zero-size export must use C strides"


def test_size1_dims_export_keeps_values():  # C4 C5
    a = make("float32", (1, 3, 224, 224))
    t = dlbridge.from_dlpack(a)
    assert t.is_c_contiguous  # C4
    info = inspect_capsule(t.__dlpack__(max_version=(1, 3)))
    assert info["strides"][1:] == (50176, 224, 1)
    b = make("float32", (3, 1, 6, 2))
    tb = dlbridge.from_dlpack(b)
    assert np.from_dlpack(tb).sum() == b.sum()  # C5


# --------------------------------------------------------------------------------------------
# Read-only (C12 C13)
# --------------------------------------------------------------------------------------------
def test_readonly_versioned_has_flag():  # C12
    t = dlbridge.from_dlpack(_ro(make("float32", (3,))))
    assert t.readonly
    for mv in [(1, 0), (1, 3)]:
        info = inspect_capsule(t.__dlpack__(max_version=mv))
        assert info["versioned"]
        assert info["flags"] & FLAG_READ_ONLY




@pytest.mark.parametrize("copy", [None, True])
@pytest.mark.parametrize("max_version", [None, (0, 8)])
def test_readonly_legacy_request_gets_a_writable_copy(max_version, copy):  # C13
    a = _ro(make("float32", (2, 3)))
    t = dlbridge.from_dlpack(a)
    kwargs = {} if max_version is None else {"max_version": max_version}
    cap = t.__dlpack__(copy=copy, **kwargs)
    info = inspect_capsule(cap)
    assert info["name"] == "dltensor"  # what a legacy consumer asked for
    assert info["data_ptr"] != a.ctypes.data  # a copy: the source stays unwritable
    assert np.array_equal(np.from_dlpack(SameCapsule(cap)), a)
    assert not a.flags.writeable  # the source stays as it was


def test_readonly_versioned_request_stays_zero_copy():  # C13
    a = _ro(make("float32", (3,)))
    info = inspect_capsule(dlbridge.from_dlpack(a).__dlpack__(max_version=(1, 0)))
    assert info["data_ptr"] == a.ctypes.data and info["flags"] & FLAG_READ_ONLY


@pytest.mark.parametrize("max_version", [None, (0, 8)])
def test_readonly_legacy_copy_false_is_buffer_error_naming_max_version(max_version):  # C13
    t = dlbridge.from_dlpack(_ro(make("float32", (3,))))
    kwargs = {} if max_version is None else {"max_version": max_version}
    with pytest.raises(BufferError, match=r"read-only.*max_version=\(1, 0\)") as ei:
        t.__dlpack__(copy=False, **kwargs)
    # the way out it names: a versioned request, zero-copy and flagged
    info = inspect_capsule(t.__dlpack__(copy=False, max_version=(1, 0)))
    assert info["versioned"] and info["flags"] & FLAG_READ_ONLY
    assert "copy=True" in str(ei.value)


# --------------------------------------------------------------------------------------------
# copy=
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_copy_true_really_copies(name):
    a = LAYOUTS[name]("int32")
    t = dlbridge.from_dlpack(a)
    cap = t.__dlpack__(max_version=(1, 3), copy=True)
    info = inspect_capsule(cap)
    assert info["flags"] & FLAG_IS_COPIED
    assert not info["flags"] & FLAG_READ_ONLY
    if a.size:
        assert info["data_ptr"] != a.ctypes.data

    class Wrap:  # hand the very same capsule to NumPy
        def __dlpack__(self, **kw):
            return cap

        def __dlpack_device__(self):
            return (1, 0)

    n = np.from_dlpack(Wrap())
    assert_values_equal(n, a)
    assert n.flags.writeable
    a_before = a.copy()
    n[...] = 7
    assert_values_equal(a, a_before)  # really different memory


def test_copy_true_of_readonly_is_writable_copy():
    a = _ro(make("float32", (4,)))
    t = dlbridge.from_dlpack(a)
    info = inspect_capsule(t.__dlpack__(max_version=(1, 3), copy=True))
    assert info["flags"] & FLAG_IS_COPIED
    assert not info["flags"] & FLAG_READ_ONLY


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_copy_false_never_copies(name):
    a = LAYOUTS[name]("int32")
    t = dlbridge.from_dlpack(a)
    for mv in (None, (1, 3)):
        kw = {"copy": False}
        if mv:
            kw["max_version"] = mv
        info = inspect_capsule(t.__dlpack__(**kw))
        if a.size:
            assert info["data_ptr"] == a.ctypes.data
        if info["versioned"]:
            assert not info["flags"] & FLAG_IS_COPIED


def test_copy_none_shares():
    a = make("int32", (3,))
    t = dlbridge.from_dlpack(a)
    info = inspect_capsule(t.__dlpack__(max_version=(1, 3), copy=None))
    assert info["data_ptr"] == a.ctypes.data
    assert not info["flags"] & FLAG_IS_COPIED


def test_copied_tensor_exports_is_copied_flag():
    t = dlbridge.from_dlpack(make("int32", (3,)), copy=True)
    assert t.is_copied
    info = inspect_capsule(t.__dlpack__(max_version=(1, 3)))
    # the memory is still owned only by this tensor's copy; the flag may or may not be set
    # on a later zero-copy export, but it must never be READ_ONLY
    assert not info["flags"] & FLAG_READ_ONLY


# --------------------------------------------------------------------------------------------
# stream=, dl_device=
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "versioned"), [
    ({"stream": None}, False), ({"stream": -1}, False),
    ({"stream": -1, "max_version": (1, 3)}, True), ({"stream": None, "max_version": (1, 3)}, True),
])
def test_stream_none_and_minus_one_export_zero_copy(kwargs, versioned):
    a = make("float32", (2,))
    t = dlbridge.from_dlpack(a)
    info = inspect_capsule(t.__dlpack__(**kwargs))
    assert info["versioned"] is versioned
    assert info["data_ptr"] == a.ctypes.data and info["device"] == (1, 0)


@pytest.mark.parametrize("stream", [0, 1, 2, 12345])
def test_stream_other_values_on_cpu_are_value_error(stream):
    t = dlbridge.from_dlpack(make("float32", (2,)))
    with pytest.raises(ValueError) as ei:
        t.__dlpack__(stream=stream, max_version=(1, 3))
    assert "stream" in str(ei.value)


@pytest.mark.parametrize("dl_device", [(1, 0), None])
def test_dl_device_own_device_is_noop(dl_device):
    a = make("float32", (2,))
    t = dlbridge.from_dlpack(a)
    info = inspect_capsule(t.__dlpack__(max_version=(1, 3), dl_device=dl_device))
    assert info["device"] == (1, 0)
    assert info["data_ptr"] == a.ctypes.data


@pytest.mark.parametrize("dl_device", [(2, 0), (1, 1)])  # oneAPI: tests/test_devices.py
def test_dl_device_foreign_is_buffer_error(dl_device, request):
    if dl_device == (2, 0):  # with a GPU dlbridge makes the transfer (tested in test_cuda.py)
        request.getfixturevalue("no_cuda_gpu")
    t = dlbridge.from_dlpack(make("float32", (2,)))
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(1, 3), dl_device=dl_device)


def test_dlpack_device():
    t = dlbridge.from_dlpack(make("float32", (2,)))
    assert t.__dlpack_device__() == (1, 0)
    dev = t.__dlpack_device__()
    assert isinstance(dev, tuple) and len(dev) == 2
    assert int(dev[0]) == 1 and int(dev[1]) == 0


# --------------------------------------------------------------------------------------------
# dtypes and negotiated versions (C24 C26)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_dtype_codes_exported(dtype):  # C24
    from dlb_testing import DLPACK_CODE

    t = dlbridge.from_dlpack(make(dtype, (3,)))
    for mv in (None, (1, 0)):
        info = inspect_capsule(t.__dlpack__(max_version=mv) if mv else t.__dlpack__())
        assert info["dtype"] == DLPACK_CODE[dtype] + (1,)


@pytest.mark.parametrize(
    "dtype, value", [("uint16", 2**16 - 1), ("uint32", 2**32 - 1), ("uint64", 2**64 - 1)]
)
def test_unsigned_never_wraps_to_signed(dtype, value):  # C27
    a = np.array([value, 1, value - 1], dtype=dtype)
    t = dlbridge.from_dlpack(a)
    assert t.dtype == dtype and t.dtype.code == 1
    assert t.tolist() == [value, 1, value - 1]
    for mv in (None, (1, 0), (1, 3)):
        info = inspect_capsule(t.__dlpack__(max_version=mv) if mv else t.__dlpack__())
        assert info["dtype"][0] == 1  # kDLUInt
    back = np.from_dlpack(t)
    assert back.dtype == np.dtype(dtype)
    assert back.tolist() == [value, 1, value - 1]
    assert memoryview(t).tolist() == [value, 1, value - 1]
    assert np.asarray(t).dtype == np.dtype(dtype)


def _float8_tensor(collect_list):
    """A float8_e4m3fn tensor built from a hand-made versioned 1.1 capsule."""
    raw = np.array([0x38, 0x40, 0x44], dtype=np.uint8)  # 1.0, 2.0, 3.0 in e4m3fn
    fake = FakeManagedTensor(data=raw, shape=(3,), strides=(1,), dtype=(10, 8, 1), version=(1, 1))
    collect_list.append(fake)
    return dlbridge.from_dlpack(fake.capsule()), raw


def test_float8_needs_version_1_1():  # C26
    keep = []
    t, raw = _float8_tensor(keep)
    assert t.dtype == "float8_e4m3fn"
    assert (t.dtype.code, t.dtype.bits) == (10, 8)
    with pytest.raises(BufferError) as ei:
        t.__dlpack__(max_version=(1, 0))
    assert "1.1" in str(ei.value) or "(1, 1)" in str(ei.value)
    with pytest.raises(BufferError):
        t.__dlpack__()  # legacy (0.x) has no float8 either
    for mv in [(1, 1), (1, 3)]:
        info = inspect_capsule(t.__dlpack__(max_version=mv))
        assert info["dtype"] == (10, 8, 1)
        assert info["data_ptr"] == raw.ctypes.data


def test_bfloat16_export_code():  # C25
    raw = np.array([0x3F80, 0x4000], dtype=np.uint16)  # 1.0, 2.0 in bfloat16
    fake = FakeManagedTensor(data=raw, shape=(2,), strides=(1,), dtype=(4, 16, 1))
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.dtype == "bfloat16" and t.itemsize == 2
    for mv in (None, (1, 0), (1, 3)):  # bfloat16 exists since DLPack 0.3
        info = inspect_capsule(t.__dlpack__(max_version=mv) if mv else t.__dlpack__())
        assert info["dtype"] == (4, 16, 1)
    # NumPy has no bfloat16: a clean exception, not a crash or a silent uint16
    # (numpy 2.4 itself raises RuntimeError "Unsupported dtype in DLTensor")
    with pytest.raises((BufferError, RuntimeError)):
        np.from_dlpack(t)


# --------------------------------------------------------------------------------------------
# Ownership of exported capsules (C19)
# --------------------------------------------------------------------------------------------
def test_unconsumed_capsule_releases_owner(collect):  # C19
    a = np.arange(50, dtype=np.float64)
    ref = weakref.ref(a)
    t = dlbridge.from_dlpack(a)
    del a
    for mv in (None, (1, 3)):
        cap = t.__dlpack__(max_version=mv) if mv else t.__dlpack__()
        del cap
    collect()
    assert ref() is not None
    cap = t.__dlpack__(max_version=(1, 3))
    del t
    collect()
    assert ref() is not None  # the capsule alone keeps the memory alive
    assert inspect_capsule(cap)["shape"] == (50,)
    del cap
    collect()
    assert ref() is None  # and releases it when dropped unconsumed


def test_consumed_capsule_owner_released_by_consumer(collect):  # C19
    a = np.arange(50, dtype=np.float64)
    ref = weakref.ref(a)
    t = dlbridge.from_dlpack(a)
    del a
    n = np.from_dlpack(t)
    del t
    collect()
    assert ref() is not None
    assert n[49] == 49.0
    del n
    collect()
    assert ref() is None


def test_chain_deleter_called_once(collect):  # C19
    a = make("float32", (4, 4))
    fake = FakeManagedTensor(data=a, shape=(4, 4), strides=(4, 1), dtype="float32")
    t = dlbridge.from_dlpack(fake.capsule())
    n1 = np.from_dlpack(t)  # via versioned capsule
    t2 = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 3)))
    cap_dropped = t.__dlpack__()
    del cap_dropped
    n2 = np.from_dlpack(t2)
    del t, t2
    collect()
    assert fake.deleter_calls == 0
    assert n1.sum() == a.sum() and n2.sum() == a.sum()
    del n1
    collect()
    assert fake.deleter_calls == 0
    del n2
    collect()
    assert fake.finalize() == 1


def test_capsule_from_tensor_imports_back(collect):
    a = make("complex128", (3, 2))[::-1]
    t = dlbridge.from_dlpack(a)
    for mv in (None, (1, 3)):
        cap = t.__dlpack__(max_version=mv) if mv else t.__dlpack__()
        u = dlbridge.from_dlpack(cap)
        assert u.shape == t.shape and u.strides == t.strides and u.data_ptr == t.data_ptr
        assert u.readonly == (mv is None)  # a bare legacy capsule -> read-only
        assert_values_equal(np.from_dlpack(u), a)


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/statm"), reason="needs /proc")
def test_many_exports_do_not_leak(collect):  # C19 C21 (CPU analogue)
    t = dlbridge.from_dlpack(make("float32", (16,)))
    keep = []
    f8, _ = _float8_tensor(keep)

    def burst(n):
        for _ in range(n):
            t.__dlpack__(max_version=(1, 3))
            t.__dlpack__()
            try:
                t.__dlpack__(stream=7)
            except ValueError:
                pass
            try:  # C21: failing export (dtype too new for the negotiated version)
                f8.__dlpack__(max_version=(1, 0))
            except BufferError:
                pass

    burst(2000)  # warm up allocator arenas
    collect()
    before = _rss()
    burst(30000)
    collect()
    growth = _rss() - before
    assert growth < 3_000_000, f"RSS grew by {growth} bytes over 30000 export rounds"


def test_capsule_outlives_tensor_and_is_consumable(collect):
    a = make("float64", (3, 4))[:, ::2]
    t = dlbridge.from_dlpack(a)
    caps = [t.__dlpack__(max_version=(1, 3)), t.__dlpack__()]
    del t
    collect()
    for cap in caps:  # shape/strides storage must live with the capsule, not the Tensor

        class Wrap:
            def __dlpack__(self, _cap=cap, **kw):
                return _cap

            def __dlpack_device__(self):
                return (1, 0)

        n = np.from_dlpack(Wrap())
        assert n.strides == a.strides
        assert_values_equal(n, a)


# Bug classes reported in 2025-26 (catalog C57-C59), each checked against the peers installed.


@pytest.mark.parametrize("shape, strides", [((0, 3), (5, 7)), ((1, 8, 0, 128), (0, 0, 0, 0)),
                                            ((0,), (-4,)), ((2, 0), (0, 1))])
def test_zero_size_is_contiguous_whatever_its_strides(shape, strides):  # C57
    from dlpack_ctypes import c_strides

    fake = FakeManagedTensor(dtype="float32", shape=shape, strides=strides, data_ptr=0)
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.is_c_contiguous and t.is_f_contiguous  # vacuously: no element to place
    assert inspect_capsule(t.__dlpack__(max_version=(1, 3)))["strides"] == c_strides(shape)
    # consumers that insist on contiguous input take it, whatever the producer's strides were
    assert np.from_dlpack(t).shape == shape
    torch = pytest.importorskip("torch")
    assert tuple(torch.from_dlpack(t).shape) == shape


def test_an_unasked_export_is_a_legacy_capsule_for_old_consumers():  # C58
    t = dlbridge.from_dlpack(np.arange(3.0))
    # A consumer that asks nothing knows only the legacy ABI: a versioned struct would be
    # misread by it. Only max_version gets the versioned capsule.
    assert capsule_name(t.__dlpack__()) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=None)) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    # dlbridge itself takes either, from a real producer
    torch = pytest.importorskip("torch")
    x = torch.arange(3.0)
    for capsule in (x.__dlpack__(), x.__dlpack__(max_version=(1, 0))):
        assert dlbridge.from_dlpack(capsule).tolist() == [0.0, 1.0, 2.0]
    # a consumer that only knows legacy capsules gets one through dlbridge
    tvm_ffi = pytest.importorskip("tvm_ffi")
    assert np.from_dlpack(tvm_ffi.from_dlpack(t)).tolist() == [0.0, 1.0, 2.0]


def test_size1_dims_keep_their_strides_on_export():  # C59
    torch = pytest.importorskip("torch")
    column = torch.ones(1, 1024).T  # (1024, 1), column-major: strides (1, 1024)
    row = torch.ones(1, 128)  # (1, 128): strides (128, 1)
    for source, strides in ((column, (1, 1024)), (row, (128, 1))):
        t = dlbridge.from_dlpack(source)
        assert t.strides == strides
        # exported as they are: a consumer can still tell the layout apart (no (1, 1))
        assert inspect_capsule(t.__dlpack__(max_version=(1, 3)))["strides"] == strides
        assert tuple(torch.from_dlpack(t).stride()) == strides
    # both layouts are C- and F-contiguous at once: the size-1 dimension's stride is free
    t = dlbridge.from_dlpack(column)
    assert t.is_c_contiguous and t.is_f_contiguous
