"""Read-only is kept: every read-only source gives a read-only Tensor, every export of it is
read-only or refused (issue 2, scope item 5; CASES C12 C13 C14)."""

from __future__ import annotations

import numpy as np
import pytest

import dlbridge
from dlb_testing import make
from dlpack_ctypes import FLAG_READ_ONLY, FakeManagedTensor, inspect_capsule


def _ro_numpy():
    a = make("float64", (4, 6))
    a.flags.writeable = False
    return a, a


def _ro_mmap(tmp_npy):
    m = np.load(tmp_npy, mmap_mode="r")
    return m, np.asarray(m)


def _ro_bytes():
    b = bytes(range(24))
    return b, np.frombuffer(b, dtype=np.uint8)


def _ro_memoryview():
    a = make("int32", (5,))
    return memoryview(a).toreadonly(), a


def _ro_broadcast():
    a = np.broadcast_to(make("int16", (3,)), (4, 3))  # NumPy makes broadcasts read-only
    return a, a


class _FakeFactory:
    def __init__(self, **kw):
        self.kw = kw
        self.fakes = []

    def __call__(self):
        a = make("float32", (2, 3))
        fake = FakeManagedTensor(data=a, shape=(2, 3), strides=(3, 1), dtype="float32", **self.kw)
        self.fakes.append(fake)
        return fake.capsule(), a


SOURCES = {
    "numpy_writeable_false": lambda tmp: _ro_numpy(),
    "np_load_mmap_r": _ro_mmap,
    "bytes": lambda tmp: _ro_bytes(),
    "readonly_memoryview": lambda tmp: _ro_memoryview(),
    "numpy_broadcast": lambda tmp: _ro_broadcast(),
    "versioned_READ_ONLY_capsule": lambda tmp: _FakeFactory(flags=FLAG_READ_ONLY)(),  # C14
    "legacy_capsule": lambda tmp: _FakeFactory(versioned=False)(),  # a bare legacy capsule
}


@pytest.fixture(params=sorted(SOURCES))
def ro_source(request, tmp_npy):
    src, ref = SOURCES[request.param](tmp_npy)
    return request.param, src, ref


def test_source_gives_readonly_tensor(ro_source):
    name, src, ref = ro_source
    t = dlbridge.from_dlpack(src)
    assert t.readonly is True, name
    assert t.is_copied is False
    if ref.size:
        assert t.data_ptr == ref.ctypes.data  # read-only is not an excuse to copy
    assert t.tolist() == ref.tolist()


def test_numpy_from_dlpack_not_writeable(ro_source):  # C14
    name, src, ref = ro_source
    t = dlbridge.from_dlpack(src)
    n = np.from_dlpack(t)
    assert not n.flags.writeable, name
    with pytest.raises(ValueError):
        n.flat[0] = 0
    assert n.tolist() == ref.tolist()


def test_versioned_export_has_read_only_flag(ro_source):  # C12
    _, src, _ = ro_source
    t = dlbridge.from_dlpack(src)
    for mv in [(1, 0), (1, 3)]:
        info = inspect_capsule(t.__dlpack__(max_version=mv))
        assert info["flags"] & FLAG_READ_ONLY


def test_legacy_export_is_a_writable_copy(ro_source):  # C13
    _, src, _ = ro_source
    t = dlbridge.from_dlpack(src)
    for capsule in (t.__dlpack__(), t.__dlpack__(max_version=(0, 8))):
        info = inspect_capsule(capsule)
        assert info["name"] == "dltensor" and info["data_ptr"] != t.data_ptr
    with pytest.raises(BufferError, match=r"max_version=\(1, 0\)"):
        t.__dlpack__(max_version=(0, 8), copy=False)


def test_buffer_export_readonly(ro_source):
    _, src, _ = ro_source
    t = dlbridge.from_dlpack(src)
    assert memoryview(t).readonly
    assert t.__array_interface__["data"][1] is True
    assert not np.asarray(t).flags.writeable


def test_copy_is_writable(ro_source):
    name, src, ref = ro_source
    t = dlbridge.from_dlpack(src)
    copies = [t.copy(), dlbridge.from_dlpack(t, copy=True)]
    if "capsule" not in name:  # a capsule can be consumed only once
        copies.append(dlbridge.from_dlpack(src, copy=True))
    for c in copies:
        assert not c.readonly and c.is_copied
        n = np.from_dlpack(c)
        assert n.flags.writeable
        assert n.tolist() == ref.tolist()
        n.flat[0] = 1  # writes go to the copy only
    assert t.tolist() == ref.tolist()


def test_readonly_survives_reimport(ro_source):
    _, src, _ = ro_source
    t = dlbridge.from_dlpack(src)
    assert dlbridge.from_dlpack(t).readonly
    assert dlbridge.from_dlpack(t.__dlpack__(max_version=(1, 3))).readonly
    assert dlbridge.from_dlpack(memoryview(t)).readonly

    class AI:
        __array_interface__ = t.__array_interface__
        _keep = t

    assert dlbridge.from_dlpack(AI()).readonly


def test_writable_tensor_exports_writable():
    a = make("float32", (3,))
    t = dlbridge.from_dlpack(a)
    assert not t.readonly
    assert not inspect_capsule(t.__dlpack__(max_version=(1, 3)))["flags"] & FLAG_READ_ONLY
    assert not memoryview(t).readonly
    assert np.from_dlpack(t).flags.writeable
    assert np.asarray(t).flags.writeable


def test_mmap_readonly_write_never_reaches_file(tmp_npy):
    m = np.load(tmp_npy, mmap_mode="r")
    t = dlbridge.from_dlpack(m)
    n = np.from_dlpack(t)
    with pytest.raises(ValueError):
        n[0, 0] = 123.0
    assert np.load(tmp_npy)[0, 0] == 0.0


def test_mmap_copy_on_write_is_writable(tmp_npy):
    m = np.load(tmp_npy, mmap_mode="c")
    t = dlbridge.from_dlpack(m)
    assert not t.readonly
