"""Interop with PyTorch (CPU), both directions.

Peer facts (torch 2.15, checked on this machine):
- ``torch.from_dlpack(x)`` calls ``x.__dlpack__(max_version=(1, 0))`` only (no copy/dl_device),
  and also accepts raw capsules of both names.
- It ignores the READ_ONLY flag: a read-only NumPy array comes back as a writable alias without
  any warning.
- It cannot import negative strides ("Storage size calculation overflowed").
- ``Tensor.__dlpack__`` returns a versioned 1.3 capsule for any ``max_version >= (1, 0)``, a
  legacy one otherwise; it exports float8 even when asked for 1.0 (a torch bug w.r.t. C26),
  ``NULL`` data for zero-size tensors (C9), normalised strides for size-1 dims, and refuses
  ``requires_grad`` tensors with BufferError naming ``detach()``.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import dlbridge  # noqa: E402
from dlb_testing import (  # noqa: E402
    LAYOUTS,
    NEGATIVE_LAYOUTS,
    assert_strides_equivalent,
    assert_values_equal,
    import_or_peer_limitation,
    make,
)
from dlpack_ctypes import FLAG_READ_ONLY, FakeManagedTensor, inspect_capsule  # noqa: E402


class Spy:
    """Wraps a producer, records what the consumer asked and what capsule it got."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = []
        self.infos = []

    def __dlpack__(self, **kw):
        self.calls.append(dict(kw))
        cap = self.inner.__dlpack__(**kw)
        self.infos.append(inspect_capsule(cap))
        return cap

    def __dlpack_device__(self):
        return self.inner.__dlpack_device__()


def _torch_elem_strides_match(r, a):
    assert_strides_equivalent(tuple(r.stride()), a)


# --------------------------------------------------------------------------------------------
# torch -> dlbridge
# --------------------------------------------------------------------------------------------
def test_torch_to_dlbridge(np_dtype, layout):  # C3 C4 C5 C8 C9 C10 C24 C27
    if layout in NEGATIVE_LAYOUTS:
        pytest.skip("peer limitation: torch tensors cannot have negative strides")
    a = LAYOUTS[layout](np_dtype)
    tt = torch.from_numpy(a)  # shares a's memory with its layout
    t = dlbridge.from_dlpack(tt)
    assert t.shape == tuple(tt.shape)
    assert t.dtype == np_dtype
    assert_strides_equivalent(t.strides, a)
    if a.size:
        assert t.data_ptr == tt.data_ptr() == a.ctypes.data
    assert t.readonly is False  # torch tensors are writable, versioned capsule without flag
    assert_values_equal(np.from_dlpack(t), a)


def test_torch_to_dlbridge_asks_versioned():
    spy = Spy(torch.arange(4.0))
    dlbridge.from_dlpack(spy)
    assert spy.calls[0]["max_version"] == (1, 3)
    assert spy.infos[0]["name"] == "dltensor_versioned"


def test_torch_nchw_is_c_contiguous():  # C4
    tt = torch.zeros(1, 3, 224, 224)
    t = dlbridge.from_dlpack(tt)
    assert t.shape == (1, 3, 224, 224)
    assert t.strides[1:] == (50176, 224, 1)
    assert t.is_c_contiguous
    assert not t.is_f_contiguous


def test_torch_size1_dims_reduce():  # C5
    tt = torch.arange(36, dtype=torch.float32).reshape(3, 1, 6, 2)
    t = dlbridge.from_dlpack(tt)
    assert t.is_c_contiguous
    n = np.from_dlpack(t)
    assert n.sum() == float(tt.sum())
    np.testing.assert_array_equal(n.sum(axis=2), tt.sum(dim=2).numpy())
    back = torch.from_dlpack(t)
    assert torch.equal(back.sum(dim=(1, 3)), tt.sum(dim=(1, 3)))


def test_torch_0d():  # C8
    tt = torch.tensor(3.25, dtype=torch.float64)
    t = dlbridge.from_dlpack(tt)
    assert t.shape == () and t.tolist() == 3.25
    back = torch.from_dlpack(t)  # dlbridge exports NULL shape/strides for 0-d
    assert back.shape == () and back.item() == 3.25
    assert back.data_ptr() == tt.data_ptr()


@pytest.mark.parametrize("shape", [(0, 3), (0, 2048), (4, 0)])
def test_torch_zero_size_null_data(shape, collect):  # C9 C10
    tt = torch.zeros(shape)
    assert inspect_capsule(tt.__dlpack__(max_version=(1, 3)))["data"] == 0  # torch sends NULL
    t = dlbridge.from_dlpack(tt)
    assert t.shape == shape and t.size == 0
    info = inspect_capsule(t.__dlpack__(max_version=(1, 3)))
    from dlpack_ctypes import c_strides

    assert info["strides"] == c_strides(shape)  # C10
    back = torch.from_dlpack(t)
    assert tuple(back.shape) == shape
    del t, back
    collect()


def test_torch_bfloat16_both_ways():  # C25
    tt = torch.tensor([1.0, -2.5, 3.0, 0.5], dtype=torch.bfloat16)
    t = dlbridge.from_dlpack(tt)
    assert t.dtype == "bfloat16"
    assert (t.dtype.code, t.dtype.bits) == (4, 16)
    assert t.data_ptr == tt.data_ptr()
    back = torch.from_dlpack(t)
    assert back.dtype == torch.bfloat16
    assert back.data_ptr() == tt.data_ptr()
    assert torch.equal(back, tt)
    with pytest.raises((BufferError, RuntimeError)):
        # C25: NumPy has no bfloat16 -> a clean exception, not a crash or a silent uint16
        # (numpy 2.4 itself raises RuntimeError "Unsupported dtype in DLTensor")
        np.from_dlpack(t)
    with pytest.raises(BufferError):
        memoryview(t)  # C30


def test_torch_bfloat16_values_via_ml_dtypes():  # C25
    ml_dtypes = pytest.importorskip("ml_dtypes")
    tt = torch.tensor([[1.0, -2.5], [3.0, 0.5]], dtype=torch.bfloat16).T
    t = dlbridge.from_dlpack(tt)
    assert t.strides == (1, 2)
    c = t.copy()
    raw = torch.from_dlpack(c).view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(raw.astype(np.float32), tt.float().numpy())


@pytest.mark.parametrize(
    "tdtype, name, code",
    [(torch.float8_e4m3fn, "float8_e4m3fn", 10), (torch.float8_e5m2, "float8_e5m2", 12)],
)
def test_torch_float8_negotiation(tdtype, name, code):  # C26
    tt = torch.tensor([1.0, 2.0, -0.5], dtype=torch.float32).to(tdtype)
    t = dlbridge.from_dlpack(tt)
    assert t.dtype == name
    assert (t.dtype.code, t.dtype.bits) == (code, 8)
    # torch.from_dlpack only offers max_version=(1, 0) to __dlpack__: float8 needs 1.1 ->
    # BufferError. (Through a C exchange API on dlbridge's type, if any, versions are 1.x
    # both sides and the import may succeed; then it must be exact.)
    try:
        via_torch = torch.from_dlpack(t)
    except BufferError:
        pass
    else:
        assert hasattr(type(t), "__dlpack_c_exchange_api__"), (
            "float8 exported for max_version=(1, 0)"
        )
        assert via_torch.dtype == tdtype and torch.equal(via_torch.float(), tt.float())
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(1, 0))
    # with 1.1 negotiated the capsule carries code/bits and torch reads it fine
    cap = t.__dlpack__(max_version=(1, 1))
    assert inspect_capsule(cap)["dtype"] == (code, 8, 1)
    back = torch.from_dlpack(cap)
    assert back.dtype == tdtype
    assert torch.equal(back.float(), tt.float())
    assert back.data_ptr() == tt.data_ptr()


@pytest.mark.parametrize(
    "tdtype, value", [(torch.uint16, 65535), (torch.uint32, 2**32 - 1), (torch.uint64, 2**63 + 5)]
)
def test_torch_unsigned_no_wrap(tdtype, value):  # C27
    tt = torch.tensor([value, 1], dtype=tdtype)
    t = dlbridge.from_dlpack(tt)
    assert t.dtype.code == 1  # kDLUInt, never reinterpreted as signed
    assert t.tolist() == [value, 1]
    back = torch.from_dlpack(t)
    assert back.dtype == tdtype
    assert np.from_dlpack(t).tolist() == [value, 1]


def test_torch_requires_grad_refused():  # C29
    tt = torch.ones(3, requires_grad=True)
    with pytest.raises(BufferError) as ei:
        dlbridge.from_dlpack(tt)
    assert "detach" in str(ei.value)
    t = dlbridge.from_dlpack(tt.detach())
    assert t.data_ptr == tt.data_ptr()


def test_torch_conj_bit_refused():  # C28
    c = torch.tensor([1 + 2j, 3 - 1j]).conj()
    assert c.is_conj()
    try:
        t = dlbridge.from_dlpack(c)
    except BufferError as exc:
        assert "resolve_conj" in str(exc)
    else:  # only acceptable as a resolved copy with the conjugated values
        assert t.is_copied and t.tolist() == [1 - 2j, 3 + 1j]
    t = dlbridge.from_dlpack(c.resolve_conj())
    assert t.tolist() == [1 - 2j, 3 + 1j]


def test_torch_neg_bit_never_silently_wrong():
    # torch itself exports a lazily negated view's raw memory (wrong sign); dlbridge must not
    n = torch._neg_view(torch.tensor([1.0, 2.0]))
    assert n.is_neg()
    try:
        t = dlbridge.from_dlpack(n)
    except BufferError as exc:
        assert "resolve_neg" in str(exc)
    else:
        assert t.tolist() == [-1.0, -2.0]


def test_torch_bool():  # C24
    tt = torch.tensor([True, False, True])
    t = dlbridge.from_dlpack(tt)
    assert t.dtype == "bool" and (t.dtype.code, t.dtype.bits) == (6, 8)
    assert t.tolist() == [True, False, True]
    back = torch.from_dlpack(t)
    assert back.dtype == torch.bool
    assert np.from_dlpack(t).dtype == np.bool_


# --------------------------------------------------------------------------------------------
# dlbridge -> torch
# --------------------------------------------------------------------------------------------
def test_dlbridge_to_torch(np_dtype, layout):  # C1 C3 C4 C5 C8 C9 C10 C24 C27
    a = LAYOUTS[layout](np_dtype)
    t = dlbridge.from_dlpack(memoryview(a))  # producer side is not NumPy's __dlpack__
    r = import_or_peer_limitation("torch", torch.from_dlpack, t, a)
    assert tuple(r.shape) == a.shape
    assert r.dtype == torch.from_numpy(np.empty(0, dtype=a.dtype)).dtype
    _torch_elem_strides_match(r, a)
    if a.size:
        assert r.data_ptr() == a.ctypes.data  # zero-copy
    assert_values_equal(r.numpy(), a)


def test_dlbridge_to_torch_negative_strides_copy_route():  # C1
    a = np.arange(12.0).reshape(3, 4)[:, ::-1]
    t = dlbridge.from_dlpack(a)
    assert t.strides == (4, -1)
    try:
        r = torch.from_dlpack(t)
    except RuntimeError:
        r = None  # peer limitation: torch cannot take negative strides (no abort though)
    if r is not None:
        assert_values_equal(r.numpy(), a)
    # the way out: an explicit C-ordered copy, which torch takes
    for c in (dlbridge.from_dlpack(a, copy=True), t.copy()):
        rc = torch.from_dlpack(c)
        assert rc.is_contiguous()
        assert_values_equal(rc.numpy(), a)


def test_dlbridge_to_torch_shares_writes():
    a = np.zeros((2, 3), dtype=np.float32)
    r = torch.from_dlpack(dlbridge.from_dlpack(a))
    r[1, 2] = 5.0
    assert a[1, 2] == 5.0


def test_dlbridge_to_torch_keeps_memory_alive(collect):
    import weakref

    a = np.arange(100, dtype=np.float32)
    ref = weakref.ref(a)
    r = torch.from_dlpack(dlbridge.from_dlpack(a))
    del a
    collect()
    assert ref() is not None
    assert float(r[99]) == 99.0
    del r
    collect()
    assert ref() is None


def test_torch_roundtrip_through_dlbridge(collect):
    tt = torch.arange(24, dtype=torch.int32).reshape(4, 6)[1:, ::2]
    t = dlbridge.from_dlpack(tt)
    back = torch.from_dlpack(t)
    assert back.data_ptr() == tt.data_ptr()
    assert back.stride() == tt.stride()
    assert torch.equal(back, tt)


def test_dlbridge_readonly_to_torch_is_flagged():  # C14 C16
    a = make("float32", (4,))
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    spy = Spy(t)
    try:
        r = torch.from_dlpack(spy)
    except BufferError:
        return  # refusing is a correct answer
    # what dlbridge hands over must say read-only (torch asks for max_version=(1, 0))
    assert spy.calls[0].get("max_version") == (1, 0)
    assert spy.infos[0]["versioned"] and spy.infos[0]["flags"] & FLAG_READ_ONLY
    if r.data_ptr() == a.ctypes.data:
        pytest.xfail(
            "peer limitation: torch.from_dlpack ignores DLPACK_FLAG_BITMASK_READ_ONLY and "
            "returns a writable alias of read-only memory (dlbridge set the flag)"
        )


def test_dlbridge_readonly_to_torch_with_copy():  # C16
    a = make("float32", (4,))
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    r = torch.from_dlpack(t.copy())
    assert r.data_ptr() != a.ctypes.data
    r[0] = 100
    assert a[0] != 100


def test_raw_capsules_to_torch():
    a = make("int64", (3, 2))
    t = dlbridge.from_dlpack(a)
    for mv in (None, (1, 3)):
        cap = t.__dlpack__(max_version=mv) if mv else t.__dlpack__()
        r = torch.from_dlpack(cap)
        assert r.data_ptr() == a.ctypes.data
        assert_values_equal(r.numpy(), a)


def test_fake_versioned_capsule_through_dlbridge_to_torch(collect):  # C19
    a = make("float32", (2, 3))
    fake = FakeManagedTensor(data=a, shape=(2, 3), strides=(3, 1), dtype="float32")
    t = dlbridge.from_dlpack(fake.capsule())
    r = torch.from_dlpack(t)
    del t
    collect()
    assert fake.deleter_calls == 0
    assert float(r.sum()) == float(a.sum())
    del r
    collect()
    assert fake.finalize() == 1


def test_read_only_tensor_wrapper_stays_read_only():
    """torch 2.15's ReadOnlyTensorWrapper allows nothing but its DLPack export, flagged
    READ_ONLY: dlbridge takes it as any DLPack producer, zero-copy and read-only."""
    import torch.utils.dlpack

    wrapper_type = getattr(torch.utils.dlpack, "ReadOnlyTensorWrapper", None)
    if wrapper_type is None:
        pytest.skip(f"torch {torch.__version__} has no ReadOnlyTensorWrapper")
    x = torch.arange(4.0)
    w = wrapper_type(x)
    t = dlbridge.from_dlpack(w)
    assert t.readonly and t.data_ptr == x.data_ptr()
    y, plan = dlbridge.convert(w, "numpy", report=True)
    assert plan.copies == 0 and not y.flags.writeable and y.ctypes.data == x.data_ptr()
    z, plan = dlbridge.convert(w, "torch", report=True)  # torch tensors cannot be read-only
    assert plan.copies == 1 and z.data_ptr() != x.data_ptr() and z.tolist() == x.tolist()
    assert dlbridge.describe(w)["readonly"] is True
