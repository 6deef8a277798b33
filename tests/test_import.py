"""dlbridge.from_dlpack: every accepted source, version negotiation, and hostile capsules.

Hostile capsules are built with ctypes (``dlpack_ctypes.py``); each checks that the producer's
deleter runs exactly once, whether the import succeeds or fails.
"""

from __future__ import annotations

import array
import ctypes
import sys
import threading

import numpy as np
import pytest

import dlbridge
from dlb_testing import assert_tensor_like, assert_values_equal, make
from dlpack_ctypes import (
    FLAG_IS_COPIED,
    FLAG_READ_ONLY,
    FakeManagedTensor,
    FakeProducer,
    c_strides,
    capsule_name,
    rename_capsule,
)


def _fake(arr: np.ndarray, **kw) -> FakeManagedTensor:
    """A FakeManagedTensor describing numpy array ``arr`` (its strides, dtype, data pointer)."""
    kw.setdefault("shape", arr.shape)
    kw.setdefault("strides", tuple(s // arr.itemsize for s in arr.strides))
    kw.setdefault("dtype", arr.dtype.name)
    return FakeManagedTensor(data=arr, **kw)


# --------------------------------------------------------------------------------------------
# C46: every kind of source
# --------------------------------------------------------------------------------------------
class ArrayInterfaceOnly:
    """Only ``__array_interface__`` (a property, keeps the backing array alive)."""

    def __init__(self, arr):
        self._arr = arr

    @property
    def __array_interface__(self):
        return self._arr.__array_interface__


class ArrayInterfaceInstanceAttr:
    """``__array_interface__`` as a plain instance attribute, which NumPy accepts too."""

    def __init__(self, arr):
        self._arr = arr
        self.__array_interface__ = arr.__array_interface__


def test_c46_array_object():  # C46
    a = make("float32", (2, 3))
    assert_tensor_like(dlbridge.from_dlpack(a), a)


def test_c46_legacy_capsule(collect):  # C46
    a = make("float32", (2, 3))
    fake = _fake(a, versioned=False)
    cap = fake.capsule()
    t = dlbridge.from_dlpack(cap)
    assert capsule_name(cap) == "used_dltensor"
    assert_tensor_like(t, a)
    assert t.readonly  # a bare legacy capsule imports read-only
    assert fake.deleter_calls == 0
    del cap
    collect()
    assert fake.deleter_calls == 0  # the tensor still owns it
    del t
    collect()
    assert fake.finalize() == 1


def test_c46_versioned_capsule(collect):  # C46
    a = make("int16", (4,))
    fake = _fake(a)
    cap = fake.capsule()
    t = dlbridge.from_dlpack(cap)
    assert capsule_name(cap) == "used_dltensor_versioned"
    assert_tensor_like(t, a)
    assert not t.readonly
    del cap, t
    collect()
    assert fake.finalize() == 1


def test_c46_memoryview():  # C46
    a = make("float64", (3, 4))
    t = dlbridge.from_dlpack(memoryview(a))
    assert_tensor_like(t, a)
    assert not t.readonly


def test_c46_list_is_type_error():  # C46
    with pytest.raises(TypeError) as ei:
        dlbridge.from_dlpack([1.0, 2.0, 3.0])
    msg = str(ei.value)
    assert "list" in msg
    # the message names the protocols tried
    assert "__dlpack__" in msg
    assert "buffer" in msg.lower()
    assert "__array_interface__" in msg


@pytest.mark.parametrize("obj", [1, 2.5, None, object(), "abc", {"a": 1}, (1, 2)])
def test_not_exchangeable_is_type_error(obj):
    with pytest.raises(TypeError) as ei:
        dlbridge.from_dlpack(obj)
    assert "__dlpack__" in str(ei.value)
    with pytest.raises(TypeError):
        dlbridge.Tensor(obj)


def test_str_is_not_a_buffer():
    # str has no buffer protocol; bytes does
    with pytest.raises(TypeError):
        dlbridge.from_dlpack("hello")


@pytest.mark.parametrize(
    "obj, dtype, values",
    [
        (b"\x01\x02\x03", "uint8", [1, 2, 3]),
        (bytearray(b"\x04\x05"), "uint8", [4, 5]),
        (array.array("i", [1, -2, 3]), "int32", [1, -2, 3]),
        (array.array("d", [1.5, 2.5]), "float64", [1.5, 2.5]),
        (array.array("h", [7]), "int16", [7]),
        (array.array("Q", [2**64 - 1]), "uint64", [2**64 - 1]),
        (array.array("f", []), "float32", []),
    ],
)
def test_buffer_protocol_sources(obj, dtype, values):
    t = dlbridge.from_dlpack(obj)
    assert t.dtype == dtype
    assert t.shape == (len(values),)
    assert t.tolist() == values
    mv = memoryview(obj)
    if len(values):
        assert t.data_ptr == np.frombuffer(mv, dtype=dtype).ctypes.data  # zero-copy
    assert t.readonly is mv.readonly


def test_bytes_is_readonly_bytearray_is_not():
    assert dlbridge.from_dlpack(b"abc").readonly
    ba = bytearray(b"abc")
    t = dlbridge.from_dlpack(ba)
    assert not t.readonly
    n = np.from_dlpack(t)
    n[0] = ord("z")
    assert ba == bytearray(b"zbc")  # zero-copy and writable


def test_bytearray_export_lock():
    # a bytearray with an active export cannot be resized: the tensor must hold the buffer
    ba = bytearray(b"abcd")
    t = dlbridge.from_dlpack(ba)
    with pytest.raises(BufferError):
        ba.extend(b"ef")
    del t
    import gc

    gc.collect()
    ba.extend(b"ef")  # released when the tensor goes away


def test_memoryview_nd_strided():
    a = make("int32", (4, 6))[::2, ::-3]
    t = dlbridge.from_dlpack(memoryview(a))
    assert_tensor_like(t, a)
    assert_values_equal(np.from_dlpack(t), a)


def test_memoryview_readonly():
    a = make("int32", (4,))
    mv = memoryview(a).toreadonly()
    t = dlbridge.from_dlpack(mv)
    assert t.readonly


@pytest.mark.parametrize(
    "name", ["contiguous", "transposed", "neg_cols", "step2d", "scalar0d", "zero_size", "offset"]
)
def test_array_interface_source(name):
    from dlb_testing import LAYOUTS

    a = LAYOUTS[name]("float32")
    t = dlbridge.from_dlpack(ArrayInterfaceOnly(a))
    assert_tensor_like(t, a, shared=True if a.size else None)
    assert_values_equal(np.from_dlpack(t), a)


def test_array_interface_instance_attribute():
    # NumPy looks __array_interface__ up on the instance: np.asarray(obj) works for this
    a = make("float32", (2, 3))
    obj = ArrayInterfaceInstanceAttr(a)
    assert np.asarray(obj).ctypes.data == a.ctypes.data
    t = dlbridge.from_dlpack(obj)
    assert t.data_ptr == a.ctypes.data and t.tolist() == a.tolist()


def test_array_interface_readonly():
    a = make("int64", (3,))
    a.flags.writeable = False
    t = dlbridge.from_dlpack(ArrayInterfaceOnly(a))
    assert t.readonly


def test_array_interface_keeps_owner_alive(collect):
    import weakref

    a = np.arange(100, dtype=np.float64)
    src = ArrayInterfaceOnly(a)
    ref = weakref.ref(a)
    t = dlbridge.from_dlpack(src)
    del a, src
    collect()
    assert ref() is not None
    assert t.tolist()[-1] == 99.0
    del t
    collect()
    assert ref() is None


def test_array_interface_non_native_byte_order():
    a = np.arange(4, dtype=">i4")
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(ArrayInterfaceOnly(a))


def test_non_native_byte_order_numpy():
    a = np.arange(4, dtype=">f8")
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(a)


def test_object_dtype_refused():
    a = np.array([object(), object()])
    with pytest.raises((BufferError, TypeError)):
        dlbridge.from_dlpack(a)


def test_array_interface_version_2_or_garbage():
    class Garbage:
        __array_interface__ = {"version": 3, "shape": "nope", "typestr": "<f4", "data": (0, False)}

    with pytest.raises((BufferError, TypeError, ValueError)):
        dlbridge.from_dlpack(Garbage())


# --------------------------------------------------------------------------------------------
# Capsule names, consumed capsules (C18)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_consumed_capsule_loses_its_destructor(max_version):
    # The rename marks the capsule consumed; its destructor is cleared too, so that a producer's
    # destructor that probes the fresh name (raising and clearing an error) no longer runs.
    get_destructor = ctypes.pythonapi.PyCapsule_GetDestructor
    get_destructor.restype, get_destructor.argtypes = ctypes.c_void_p, [ctypes.py_object]
    a = np.arange(3.0)
    cap = a.__dlpack__(max_version=max_version)
    assert get_destructor(cap) is not None
    t = dlbridge.from_dlpack(cap)
    assert capsule_name(cap).startswith("used_")
    assert get_destructor(cap) is None
    del cap
    assert_values_equal(np.from_dlpack(t), a)


def test_capsule_with_other_name_is_type_error(collect):
    a = make("float32", (2,))
    fake = _fake(a)
    cap = fake.capsule(b"not_a_dltensor")
    with pytest.raises(TypeError):
        dlbridge.from_dlpack(cap)
    assert capsule_name(cap) == "not_a_dltensor"


@pytest.mark.parametrize("versioned", [True, False])
def test_consumed_capsule_is_buffer_error(versioned, collect):  # C18
    a = make("float32", (2, 3))
    fake = _fake(a, versioned=versioned)
    cap = fake.capsule()
    t = dlbridge.from_dlpack(cap)
    with pytest.raises(BufferError) as ei:
        dlbridge.from_dlpack(cap)
    assert "used" in str(ei.value) or "consumed" in str(ei.value)
    del cap
    collect()
    assert fake.deleter_calls == 0
    assert t.tolist() == a.tolist()
    del t
    collect()
    assert fake.finalize() == 1  # C18: no double free


@pytest.mark.parametrize("name", [b"used_dltensor", b"used_dltensor_versioned"])
def test_capsule_renamed_used_is_buffer_error(name, collect):  # C18
    a = make("float32", (2,))
    fake = _fake(a, versioned=name.endswith(b"versioned"))
    cap = fake.capsule()
    rename_capsule(cap, name)
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(cap)
    del cap
    collect()
    assert fake.deleter_calls == 0  # a "used" capsule belongs to someone else


def test_producer_returns_same_capsule_twice(collect):  # C18
    a = make("float32", (3,))
    fake = _fake(a)
    cap = fake.capsule()

    class Bad:
        def __dlpack__(self, **kw):
            return cap

        def __dlpack_device__(self):
            return (1, 0)

    t = dlbridge.from_dlpack(Bad())
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(Bad())
    del t
    collect()
    assert fake.finalize() == 1


# --------------------------------------------------------------------------------------------
# Version negotiation with a __dlpack__ producer
# --------------------------------------------------------------------------------------------
def test_asks_max_version_1_3_first(collect):
    a = make("float32", (2, 2))
    p = FakeProducer(lambda **kw: _fake(a))
    t = dlbridge.from_dlpack(p)
    assert len(p.calls) == 1
    call = p.calls[0]
    assert call.get("max_version") == (1, 3)
    assert call.get("stream", None) in (None, -1)
    assert call.get("copy", None) is None
    assert call.get("dl_device", None) in (None, (1, 0))
    assert_tensor_like(t, a)
    del t
    collect()
    assert p.finalize() == 1


def test_keyword_names_are_interned():
    # A Python-level __dlpack__ matches keywords to its parameters by identity before it
    # compares strings: interned names keep imports from producers written in Python (JAX,
    # array-api-strict) off CPython's slower path.
    a = make("float32", (3,))
    seen = []

    class Producer:
        def __dlpack__(self, **kw):
            seen.extend(kw)
            return a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return (1, 0)

    dlbridge.from_dlpack(Producer())
    dlbridge.from_dlpack(Producer(), device="cpu")
    assert seen.count("max_version") == 2
    assert all(sys.intern(name) is name for name in seen)


def test_reassigned_dlpack_method_is_called(collect):
    # Protocols are cached per type; the method itself is cached only for immutable types
    # whose instances have no __dict__. A Python class can swap its __dlpack__ at any time.
    a, b = make("float32", (3,)), make("int16", (2, 2))

    class Producer:
        def __dlpack__(self, **kw):
            return a.__dlpack__(**kw)

    p = Producer()
    assert_tensor_like(dlbridge.from_dlpack(p), a)
    Producer.__dlpack__ = lambda self, **kw: b.__dlpack__(**kw)
    assert_tensor_like(dlbridge.from_dlpack(p), b)
    p.__dlpack__ = lambda **kw: a.__dlpack__(
        **kw
    )  # an instance attribute wins, as in p.__dlpack__()
    assert_tensor_like(dlbridge.from_dlpack(p), a)


def test_copy_and_device_forwarded_to_producer(collect):
    a = make("float32", (2, 2))

    def factory(**kw):
        if kw.get("copy"):
            c = a.copy()
            return _fake(c, flags=FLAG_IS_COPIED)
        return _fake(a)

    p = FakeProducer(factory)
    t = dlbridge.from_dlpack(p, copy=True)
    assert p.calls[-1].get("copy") in (True, None)  # forwarded (spec §6) or done locally
    assert t.is_copied
    assert t.data_ptr != a.ctypes.data
    t2 = dlbridge.from_dlpack(p, device="cpu")
    assert p.calls[-1].get("dl_device") in (None, (1, 0))
    assert t2.data_ptr == a.ctypes.data
    del t, t2
    collect()
    assert p.finalize() == 2


def test_copy_true_copies_even_if_producer_ignores_it(collect):
    a = make("float32", (2, 2))
    p = FakeProducer(lambda **kw: _fake(a))  # ignores copy=True, no IS_COPIED
    t = dlbridge.from_dlpack(p, copy=True)
    assert t.is_copied
    assert t.data_ptr != a.ctypes.data
    assert not t.readonly
    assert t.is_c_contiguous
    assert_values_equal(np.from_dlpack(t), a)
    del t
    collect()
    assert p.finalize() == 1  # the producer's tensor is released after the copy


def test_legacy_fallback_on_keyword_type_error(collect):
    a = make("int32", (3,))
    p = FakeProducer(lambda **kw: _fake(a, versioned=False), accept_keywords=False)
    t = dlbridge.from_dlpack(p)
    assert p.calls and set(p.calls[-1]) <= {"stream"}
    assert_tensor_like(t, a)
    assert t.readonly
    del t
    collect()
    assert p.finalize() == 1


def test_producer_type_error_not_about_keywords_propagates():
    class Broken:
        def __dlpack__(self, **kw):
            raise TypeError("cannot export this dtype, sorry")

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(TypeError, match="sorry"):
        dlbridge.from_dlpack(Broken())


def test_producer_buffer_error_propagates():
    class Refuses:
        def __dlpack__(self, **kw):
            raise BufferError("no can do")

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(BufferError, match="no can do"):
        dlbridge.from_dlpack(Refuses())


def test_versioned_capsule_when_legacy_asked_is_fine(collect):
    # a producer may return any version: the consumer checks the capsule name
    a = make("float32", (3,))
    p = FakeProducer(lambda **kw: _fake(a, versioned=False))
    t = dlbridge.from_dlpack(p)  # legacy capsule despite max_version=(1, 3)
    assert_tensor_like(t, a)
    assert t.readonly  # legacy import is read-only
    del t
    collect()
    assert p.finalize() == 1


@pytest.mark.parametrize("minor", [0, 1, 2, 3, 9])
def test_versioned_minor_versions_accepted(minor, collect):
    a = make("float32", (2, 3))
    fake = _fake(a, version=(1, minor))
    t = dlbridge.from_dlpack(fake.capsule())
    assert_tensor_like(t, a)
    del t
    collect()
    assert fake.finalize() == 1


def test_versioned_unknown_flag_bits_ignored(collect):
    a = make("float32", (2,))
    fake = _fake(a, flags=1 << 40)
    t = dlbridge.from_dlpack(fake.capsule())
    assert not t.readonly
    del t
    collect()
    assert fake.finalize() == 1


# --------------------------------------------------------------------------------------------
# C17: unknown major version
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("major", [0, 2, 99])
def test_unknown_major_version(major, collect):  # C17
    # garbage in every field after the ABI-stable prefix: must not be read
    fake = FakeManagedTensor(
        data_ptr=0xDEAD0000, shape=(2, 3), strides=(3, 1), ndim=-7, dtype=(250, 3, 0),
        device=(9999, -5), version=(major, 0),
    )
    cap = fake.capsule()
    with pytest.raises(BufferError) as ei:
        dlbridge.from_dlpack(cap)
    assert str(major) in str(ei.value)
    # either left fresh for the producer's destructor (spec §4.3) or deleted-and-renamed by
    # us (spec O4): finalize() counts exactly one deleter call in both cases
    assert fake.finalize() == 1  # C17: deleter called exactly once


def test_unknown_major_version_from_producer(collect):  # C17
    p = FakeProducer(lambda **kw: FakeManagedTensor(shape=(1,), strides=(1,), version=(2, 0)))
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(p)
    collect()
    assert p.finalize() == 1


# --------------------------------------------------------------------------------------------
# C6 / C7: NULL strides
# --------------------------------------------------------------------------------------------
def test_legacy_null_strides_is_c_contiguous(collect):  # C6
    a = make("float64", (3, 4))
    fake = _fake(a, strides=None, versioned=False)
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.shape == (3, 4)
    assert t.strides == (4, 1)
    assert t.is_c_contiguous
    assert_values_equal(np.from_dlpack(t.copy()), a)
    del t
    collect()
    assert fake.finalize() == 1


@pytest.mark.parametrize("minor", [0, 1])
def test_versioned_pre_1_2_null_strides_is_c_contiguous(minor, collect):  # C6
    a = make("int32", (2, 5))
    fake = _fake(a, strides=None, version=(1, minor))
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.strides == (5, 1)
    assert t.tolist() == a.tolist()
    del t
    collect()
    assert fake.finalize() == 1


@pytest.mark.parametrize("minor", [2, 3])
def test_versioned_1_2_null_strides_is_buffer_error(minor, collect):  # C7
    a = make("float32", (2, 3))
    fake = _fake(a, strides=None, version=(1, minor))
    cap = fake.capsule()
    with pytest.raises(BufferError) as ei:
        dlbridge.from_dlpack(cap)
    assert "strides" in str(ei.value)
    assert fake.finalize() == 1  # C7: deleter still called


def test_0d_null_shape_and_strides_accepted(collect):  # C8
    a = np.array(7.25, dtype=np.float32)
    fake = FakeManagedTensor(data=a, shape=(), strides=None, null_shape=True, dtype="float32")
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.shape == () and t.ndim == 0
    assert t.tolist() == 7.25
    del t
    collect()
    assert fake.finalize() == 1


# --------------------------------------------------------------------------------------------
# C9: zero-size with data == NULL
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("versioned", [True, False])
@pytest.mark.parametrize("shape", [(0, 3), (0,), (3, 0, 2)])
def test_zero_size_null_data(shape, versioned, collect):  # C9
    fake = FakeManagedTensor(data_ptr=0, shape=shape, strides=c_strides(shape),
                             dtype="float32", versioned=versioned)
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.shape == shape
    assert t.size == 0
    assert t.nbytes == 0
    assert np.from_dlpack(t.copy()).shape == shape
    assert memoryview(t).nbytes == 0
    assert np.asarray(t).shape == shape
    del t
    collect()
    assert fake.finalize() == 1  # C9: exactly once


def test_nonzero_size_null_data_is_buffer_error(collect):
    fake = FakeManagedTensor(data_ptr=0, shape=(2, 3), strides=(3, 1), dtype="float32")
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(fake.capsule())
    collect()
    assert fake.finalize() == 1


# --------------------------------------------------------------------------------------------
# Absurd layouts and dtypes: always an exception, deleter once
# --------------------------------------------------------------------------------------------
_BASE = np.zeros(64, dtype=np.float32)


@pytest.mark.parametrize(
    "kw",
    [
        pytest.param(dict(shape=(-1, 3), strides=(3, 1)), id="negative-extent"),
        pytest.param(dict(shape=(2**62, 2**62), strides=(1, 1)), id="size-overflow"),
        pytest.param(dict(shape=(2, 2**61), strides=(2**62, 1)), id="span-overflow"),
        pytest.param(dict(shape=(4,), strides=(2**63 - 1,)), id="stride-overflow"),
        pytest.param(dict(shape=(2,), strides=(1,), ndim=-1), id="negative-ndim"),
        pytest.param(dict(shape=(1,) * 1_000_000, strides=(1,) * 1_000_000), id="huge-ndim"),
        pytest.param(dict(shape=(2,), strides=(1,), dtype=(3, 64, 1)), id="opaque-handle"),
        pytest.param(dict(shape=(2,), strides=(1,), dtype=(200, 32, 1)), id="unknown-code"),
        pytest.param(dict(shape=(2,), strides=(1,), dtype=(2, 0, 1)), id="zero-bits"),
        pytest.param(dict(shape=(2,), strides=(1,), dtype=(2, 32, 0)), id="zero-lanes"),
        pytest.param(dict(shape=(2,), strides=(1,), dtype=(2, 13, 1)), id="float13"),
        pytest.param(dict(shape=(2,), strides=(1,), dtype=(15, 8, 1)), id="fp6-bits-not-6"),
        pytest.param(dict(shape=(2,), strides=(1,), dtype=(17, 8, 1)), id="fp4-bits-not-4"),
        pytest.param(dict(shape=(2,), strides=(1,), dtype=(6, 1, 1)), id="bool-1bit"),
    ],
)
@pytest.mark.parametrize("versioned", [True, False])
def test_invalid_capsules_raise_and_delete_once(kw, versioned, collect):
    fake = FakeManagedTensor(data=_BASE, versioned=versioned, **kw)
    cap = fake.capsule()
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(cap)
    assert fake.finalize() == 1


@pytest.mark.parametrize("versioned", [True, False])
def test_null_deleter_is_allowed(versioned, collect):
    a = make("float32", (3,))
    fake = _fake(a, versioned=versioned, null_deleter=True)
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.tolist() == a.tolist()
    del t
    collect()
    assert fake.deleter_calls == 0


def test_null_shape_with_ndim_is_buffer_error(collect):
    fake = FakeManagedTensor(data=_BASE, shape=(2,), strides=(1,), null_shape=True)
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(fake.capsule())
    collect()
    assert fake.finalize() == 1


def test_byte_offset_is_honoured(collect):
    base = np.arange(10, dtype=np.int32)
    fake = FakeManagedTensor(data=base, shape=(3,), strides=(2,), dtype="int32", byte_offset=8)
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.data_ptr == base.ctypes.data + 8
    assert t.tolist() == [2, 4, 6]
    assert_values_equal(np.from_dlpack(t), base[2:8:2])
    del t
    collect()
    assert fake.finalize() == 1


def test_misaligned_data_is_realigned_by_copy_or_refused(collect):
    # realigned by a copy under copy=None, BufferError under copy=False
    raw = np.zeros(40, dtype=np.uint8)
    assert raw.ctypes.data % 8 == 0
    vals = np.arange(4, dtype=np.float64)
    raw[1:33] = vals.view(np.uint8)
    fake = FakeManagedTensor(data=raw, shape=(4,), strides=(1,), dtype="float64", byte_offset=1)
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.data_ptr % 8 == 0
    assert t.is_copied
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    fake2 = FakeManagedTensor(data=raw, shape=(4,), strides=(1,), dtype="float64", byte_offset=1)
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(fake2.capsule(), copy=False)
    del t
    collect()
    assert fake.finalize() == 1 and fake2.finalize() == 1


# --------------------------------------------------------------------------------------------
# Read-only via flags
# --------------------------------------------------------------------------------------------
def test_read_only_flag_gives_readonly_tensor(collect):  # C14
    a = make("float32", (2, 3))
    fake = _fake(a, flags=FLAG_READ_ONLY)
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.readonly
    n = np.from_dlpack(t)
    assert not n.flags.writeable
    with pytest.raises(ValueError):
        n[0, 0] = 1
    del t, n
    collect()
    assert fake.finalize() == 1


def test_is_copied_flag_reported(collect):
    a = make("float32", (2,))
    fake = _fake(a, flags=FLAG_IS_COPIED)
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.is_copied
    assert not t.readonly
    del t
    collect()
    assert fake.finalize() == 1


# --------------------------------------------------------------------------------------------
# copy=False / copy=None
# --------------------------------------------------------------------------------------------
def test_copy_false_never_copies():
    a = make("float32", (3, 4))[:, ::-1]
    t = dlbridge.from_dlpack(a, copy=False)
    assert t.data_ptr == a.ctypes.data


def test_copy_true_from_numpy():
    a = make("float32", (3, 4))[:, ::-1]
    t = dlbridge.from_dlpack(a, copy=True)
    assert t.is_copied and not t.readonly and t.is_c_contiguous
    assert t.data_ptr != a.ctypes.data
    assert_values_equal(np.from_dlpack(t), a)


@pytest.mark.parametrize("src", [b"xyz", bytearray(b"xyz")])
def test_copy_true_from_buffer(src):
    t = dlbridge.from_dlpack(src, copy=True)
    assert t.is_copied and not t.readonly
    assert t.tolist() == list(b"xyz")


def test_device_argument():
    a = make("float32", (3,))
    assert dlbridge.from_dlpack(a, device="cpu").data_ptr == a.ctypes.data
    assert dlbridge.from_dlpack(a, device=(1, 0)).data_ptr == a.ctypes.data
    assert dlbridge.from_dlpack(a, device=dlbridge.Device("cpu")).data_ptr == a.ctypes.data
    with pytest.raises(ValueError):
        dlbridge.from_dlpack(a, device="nonsense:device")


# --------------------------------------------------------------------------------------------
# Deleter from another thread
# --------------------------------------------------------------------------------------------
def test_tensor_dropped_in_other_thread(collect):
    a = make("float32", (8,))
    fake = _fake(a)
    holder = [dlbridge.from_dlpack(fake.capsule())]

    def drop():
        holder.clear()
        collect()

    th = threading.Thread(target=drop)
    th.start()
    th.join()
    collect()
    assert fake.finalize() == 1


def test_many_imports_no_leak_of_deleter_calls(collect):  # C19
    a = make("float32", (16,))
    fakes = [_fake(a) for _ in range(200)]
    tensors = [dlbridge.from_dlpack(f.capsule()) for f in fakes]
    assert all(f.deleter_calls == 0 for f in fakes)
    del tensors
    collect()
    assert all(f.finalize() == 1 for f in fakes)


# --------------------------------------------------------------------------------------------
# Devices (unreachable memory is a valid Tensor that refuses host access)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device, name", [((14, 0), "oneapi:0"), ((99, 3), None)])
def test_unreachable_device_is_valid_tensor(device, name, collect):
    a = make("float32", (2, 3))
    fake = _fake(a, device=device)
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.device == device
    if name:
        assert t.device == name
    assert t.__dlpack_device__() == device
    assert t.shape == (2, 3) and t.dtype == "float32" and t.strides == (3, 1)
    # t is deleted further down, after its last use here (ruff's F821 does not see the order)
    for access in (lambda: memoryview(t), lambda: t.tolist(),  # noqa: F821
                   lambda: t.__array_interface__):  # noqa: F821
        with pytest.raises(BufferError) as ei:
            access()
        assert 'device="cpu"' in str(ei.value) or "device='cpu'" in str(ei.value)
        # the refusal names the device, an unknown code included ("device99:3")
        assert str(dlbridge.Device(device)) in str(ei.value)
    # passes through zero-copy with its device kept
    from dlpack_ctypes import inspect_capsule

    info = inspect_capsule(t.__dlpack__(max_version=(1, 3)))
    assert info["device"] == device
    assert info["data_ptr"] == a.ctypes.data
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=False)
    del t, info
    collect()
    assert fake.finalize() == 1


def test_cuda_host_is_host_accessible(collect):
    a = make("int32", (2, 3))
    fake = _fake(a, device=(3, 0))
    t = dlbridge.from_dlpack(fake.capsule())
    assert t.device.type == 3
    assert t.__dlpack_device__() == (3, 0)
    assert memoryview(t).tolist() == a.tolist()
    assert t.tolist() == a.tolist()
    n = np.asarray(t)
    assert n.ctypes.data == a.ctypes.data
    assert_values_equal(n, a)
    del t, n
    collect()
    assert fake.finalize() == 1


# --------------------------------------------------------------------------------------------
# Layouts dlbridge must refuse or repair on the buffer / array-interface routes
# --------------------------------------------------------------------------------------------
def _unaligned_stride_view():
    rec = np.zeros(6, dtype=[("a", "<i4"), ("b", "<i2")])
    rec["a"] = np.arange(6)
    return rec["a"]  # itemsize 4, byte stride 6


@pytest.mark.parametrize("route", ["memoryview", "array_interface"])
def test_byte_strides_not_multiple_of_itemsize(route):
    v = _unaligned_stride_view()
    assert v.strides == (6,)
    src = memoryview(v) if route == "memoryview" else ArrayInterfaceOnly(v)
    try:
        t = dlbridge.from_dlpack(src)
    except BufferError as exc:
        assert "stride" in str(exc)
        return
    # a repaired import must be a correct copy, never a wrong reinterpretation
    assert t.is_copied
    assert t.tolist() == v.tolist()


def test_byte_strides_not_multiple_of_itemsize_copy_false():
    v = _unaligned_stride_view()
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(memoryview(v), copy=False)


def test_misaligned_buffer_copy_none_and_false():
    raw = np.zeros(5 * 8 + 1, dtype=np.uint8)
    base = raw.ctypes.data
    start = 1 if (base + 1) % 8 else 2  # an address not 8-aligned
    v = np.frombuffer(raw.data, dtype=np.float64, count=4, offset=start)
    assert v.ctypes.data % 8 != 0
    v[...] = [1.0, 2.0, 3.0, 4.0]  # NumPy handles the misaligned writes itself
    t = dlbridge.from_dlpack(memoryview(v))
    assert t.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert t.data_ptr % 8 == 0
    assert t.is_copied
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(memoryview(v), copy=False)


def test_memoryview_non_native_byte_order():
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(memoryview(np.arange(3, dtype=">i4")))


def test_memoryview_long_double_refused():
    ld = np.zeros(3, dtype=np.longdouble)
    if ld.itemsize <= 8:
        pytest.skip("long double is double on this platform")
    with pytest.raises((BufferError, TypeError)):
        dlbridge.from_dlpack(memoryview(ld))


def test_dlpack_preferred_over_other_protocols(collect):
    a = make("float32", (3,))
    other = make("float32", (3,)) + 100

    class Both:
        def __init__(self):
            self.p = FakeProducer(lambda **kw: _fake(a))

        @property
        def __array_interface__(self):
            return other.__array_interface__

        def __dlpack__(self, **kw):
            return self.p.__dlpack__(**kw)

        def __dlpack_device__(self):
            return (1, 0)

    b = Both()
    t = dlbridge.from_dlpack(b)
    assert t.data_ptr == a.ctypes.data
    del t
    collect()
    assert b.p.finalize() == 1


def test_array_interface_as_property():
    a = make("float64", (2, 2))

    class Prop:
        @property
        def __array_interface__(self):
            return a.__array_interface__

    t = dlbridge.from_dlpack(Prop())
    assert t.data_ptr == a.ctypes.data and t.tolist() == a.tolist()


@pytest.mark.parametrize("device", ["cuda", "cuda:0", (2, 0)])
def test_device_not_reachable_for_cpu_data(device, no_cuda_gpu):
    a = make("float32", (3,))
    with pytest.raises(BufferError):
        dlbridge.from_dlpack(a, device=device)


@pytest.mark.parametrize("device", [(1, 0), (2, 0)])
@pytest.mark.parametrize("request_kw", [{}, {"copy": True}, {"device": "cpu"}])
def test_producers_are_given_stream_none_explicitly(device, request_kw, collect):
    # None is DLPack's legacy default stream for CUDA data, where dlbridge reads and copies it;
    # torch applies it only when given (left out, it means -1: no synchronisation). The CUDA
    # case's data pointer is host memory tagged cuda:0 (a test double): nothing reads it here.
    if device == (2, 0) and request_kw:
        pytest.skip("a copy or transfer of CUDA data needs the driver")
    a = make("float32", (3,))
    p = FakeProducer(lambda **kw: _fake(a, device=device), device=device)
    t = dlbridge.from_dlpack(p, **request_kw)
    assert t.device == ("cuda:0" if device == (2, 0) else "cpu")
    assert all("stream" in call and call["stream"] is None for call in p.calls), p.calls
    assert p.calls[0]["max_version"] == dlbridge.DLPACK_VERSION
    del t
    collect()


def test_copy_true_of_a_dlbridge_tensor_always_copies():
    # A fresh copy (is_copied) is still the caller's: copy=True gives new memory, every way.
    t = dlbridge.from_dlpack(np.arange(4.0), copy=True)
    assert t.is_copied
    for copied in (dlbridge.from_dlpack(t, copy=True), dlbridge.Tensor(t, copy=True),
                   dlbridge.from_dlpack(t, device="cpu", copy=True)):
        assert copied.data_ptr != t.data_ptr and copied.is_copied and not copied.readonly
        np.from_dlpack(copied)[0] = 100.0
        assert t.tolist()[0] == 0.0
    assert dlbridge.from_dlpack(t) is t and dlbridge.from_dlpack(t, copy=False) is t


def test_threads_import_export_drop(collect):  # C22 (GIL build smoke test)
    a = make("float32", (64,))
    fakes = [[_fake(a) for _ in range(100)] for _ in range(4)]
    errors = []

    def work(batch):
        try:
            for fake in batch:
                t = dlbridge.from_dlpack(fake.capsule())
                n = np.from_dlpack(t)
                u = dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 3)))
                assert n[63] == a[63] and u.size == 64
                del t, n, u
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(b,)) for b in fakes]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    collect()
    assert not errors
    assert all(f.finalize() == 1 for batch in fakes for f in batch)


# --------------------------------------------------------------------------------------------
# A protocol that raises NotImplementedError is passed over for the next one the type offers
# --------------------------------------------------------------------------------------------
def _refuse(name):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"{name} is not supported here")

    return method


def _producer(refusing=(), failing=None, **delegates):
    """A producer class whose methods in ``refusing`` raise NotImplementedError, whose method
    ``failing`` (if any) raises BufferError, and whose other protocol methods delegate to
    ``source`` (a dlbridge Tensor of int32 0..5, as an Arrow and DLPack producer)."""
    source = dlbridge.from_dlpack(np.arange(6, dtype=np.int32))
    names = ("__arrow_c_device_array__", "__arrow_c_array__", "__arrow_c_device_stream__",
             "__arrow_c_stream__", "__dlpack__")
    body = {"__dlpack_device__": lambda self: source.__dlpack_device__()}
    for name in names:
        if name in refusing:
            body[name] = _refuse(name)
        elif name == failing:
            def fail(self, *args, **kwargs):
                raise BufferError("the producer's data is on a device that went away")
            body[name] = fail
        elif delegates.get(name, True) and hasattr(source, name):
            body[name] = (lambda n: lambda self, *a, **kw: getattr(source, n)(*a, **kw))(name)
    return type("Producer", (), body)()


def test_device_array_refused_falls_back_to_arrow_array():
    x = _producer(refusing=("__arrow_c_device_array__",))
    t = dlbridge.from_dlpack(x)
    assert t.tolist() == list(range(6)) and t.readonly  # an Arrow import: read-only


@pytest.mark.parametrize(
    "refusing",
    [
        ("__arrow_c_device_array__", "__arrow_c_array__"),
        ("__arrow_c_device_array__", "__arrow_c_array__", "__arrow_c_device_stream__",
         "__arrow_c_stream__"),
    ],
)
def test_arrow_refused_falls_back_to_the_next_protocol(refusing):
    x = _producer(refusing=refusing)
    t = dlbridge.from_dlpack(x)
    assert t.tolist() == list(range(6))


def test_arrow_refused_falls_back_to_dlpack():
    x = _producer(
        refusing=("__arrow_c_device_array__", "__arrow_c_array__"),
        __arrow_c_device_stream__=False, __arrow_c_stream__=False,
    )
    assert not hasattr(x, "__arrow_c_stream__")
    t = dlbridge.from_dlpack(x)
    assert t.tolist() == list(range(6)) and not t.readonly  # DLPack: the source is writable


def test_every_protocol_refused_is_a_buffer_error_naming_each():
    # The object speaks protocols (so not a TypeError): its producer declined this data.
    refusing = ("__arrow_c_device_array__", "__arrow_c_array__", "__arrow_c_device_stream__",
                "__arrow_c_stream__", "__dlpack__")
    with pytest.raises(BufferError, match="every protocol it offers refused") as ei:
        dlbridge.from_dlpack(_producer(refusing=refusing))
    message = str(ei.value)
    positions = [message.index(f"{name} raised NotImplementedError: {name} is not supported")
                 for name in refusing]
    assert positions == sorted(positions)  # in the order they were tried
    assert isinstance(ei.value.__cause__, NotImplementedError)


def test_a_preferred_protocols_buffer_error_is_raised_not_passed_over():
    # BufferError is about the data (nulls, an unreachable device...): another protocol would
    # only hide it, so it is raised as it is even though __arrow_c_array__ would work.
    x = _producer(failing="__arrow_c_device_array__")
    with pytest.raises(BufferError, match="went away"):
        dlbridge.from_dlpack(x)


def test_refused_then_real_error_raises_the_real_error():
    x = _producer(refusing=("__arrow_c_device_array__",), failing="__arrow_c_array__")
    with pytest.raises(BufferError, match="went away"):
        dlbridge.from_dlpack(x)


@pytest.mark.parametrize(
    "refusing",
    [
        ("__arrow_c_device_array__",),
        ("__arrow_c_device_array__", "__arrow_c_array__"),
        ("__arrow_c_device_array__", "__arrow_c_array__", "__arrow_c_device_stream__"),
    ],
)
def test_from_arrow_passes_over_refusing_arrow_protocols(refusing):
    t = dlbridge.from_arrow(_producer(refusing=refusing))
    assert t.tolist() == list(range(6)) and t.readonly


def test_from_arrow_every_arrow_protocol_refused_is_a_buffer_error_naming_each():
    refusing = ("__arrow_c_device_array__", "__arrow_c_array__", "__arrow_c_device_stream__",
                "__arrow_c_stream__")
    with pytest.raises(BufferError, match="every Arrow protocol it offers refused") as ei:
        dlbridge.from_arrow(_producer(refusing=refusing))
    message = str(ei.value)
    positions = [message.index(f"{name} raised NotImplementedError: {name} is not supported")
                 for name in refusing]
    assert positions == sorted(positions)
    assert isinstance(ei.value.__cause__, NotImplementedError)
    # from_dlpack still has DLPack to go to.
    assert dlbridge.from_dlpack(_producer(refusing=refusing)).tolist() == list(range(6))


def test_from_arrow_raises_a_real_error_after_a_refusal():
    x = _producer(refusing=("__arrow_c_device_array__",), failing="__arrow_c_array__")
    with pytest.raises(BufferError, match="went away"):
        dlbridge.from_arrow(x)


class _RefusingDLPackBytes(bytearray):
    __dlpack__ = _refuse("__dlpack__")


class _RefusingDLPackArrayInterface:
    __dlpack__ = _refuse("__dlpack__")

    def __init__(self):
        self._a = np.arange(3.0)

    @property
    def __array_interface__(self):
        return self._a.__array_interface__


def test_dlpack_refused_falls_back_to_buffer_protocol():
    t = dlbridge.from_dlpack(_RefusingDLPackBytes(b"\x01\x02\x03"))
    assert t.dtype == "uint8" and t.tolist() == [1, 2, 3]


def test_dlpack_refused_falls_back_to_array_interface():
    x = _RefusingDLPackArrayInterface()
    t = dlbridge.from_dlpack(x)
    assert t.tolist() == [0.0, 1.0, 2.0] and t.data_ptr == x._a.ctypes.data


def test_fallback_applies_to_every_import_entry():
    dst = dlbridge.from_dlpack(np.zeros(6, np.int32))
    dlbridge.copyto(dst, _producer(refusing=("__arrow_c_device_array__", "__arrow_c_array__")))
    assert dst.tolist() == list(range(6))
