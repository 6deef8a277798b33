"""The DLPack C exchange API (DLPack 1.3): dlbridge.Tensor as a producer, and dlbridge as a
consumer of other types' tables (torch), including torch state the table drops (C28, C29)."""

import ctypes
import gc
import subprocess
import sys

import numpy as np
import pytest

import dlbridge
from dlpack_ctypes import FLAG_READ_ONLY, DLManagedTensorVersioned, DLTensor

PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
PyCapsule_GetPointer.restype = ctypes.c_void_p
PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

SetErrorFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
AllocatorFn = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.POINTER(DLTensor),
    ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned)),
    ctypes.c_void_p,
    SetErrorFn,
)
# Entry points that take or return Python objects are called with the GIL held (PYFUNCTYPE);
# the allocator and the stream query touch no Python object and may be called without it.
FromPyFn = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned))
)
ToPyFn = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(DLManagedTensorVersioned), ctypes.POINTER(ctypes.py_object)
)
DLTensorFromPyFn = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
StreamFn = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)
)


class Header(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("prev_api", ctypes.c_void_p),
    ]


class ExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("header", Header),
        ("managed_tensor_allocator", AllocatorFn),
        ("managed_tensor_from_py_object_no_sync", FromPyFn),
        ("managed_tensor_to_py_object_no_sync", ToPyFn),
        ("dltensor_from_py_object_no_sync", DLTensorFromPyFn),
        ("current_work_stream", StreamFn),
    ]


def table() -> ExchangeAPI:
    capsule = dlbridge.Tensor.__dlpack_c_exchange_api__
    address = PyCapsule_GetPointer(capsule, b"dlpack_exchange_api")
    return ExchangeAPI.from_address(address)


def delete(managed) -> None:
    managed.contents.deleter(managed)


def test_table_is_a_class_attribute_of_version_1_3():
    api = table()
    assert (api.header.major, api.header.minor) == (1, 3)
    assert api.header.prev_api is None
    # Looked up on the type; the same table every time (process lifetime).
    assert PyCapsule_GetPointer(
        dlbridge.Tensor.__dlpack_c_exchange_api__, b"dlpack_exchange_api"
    ) == ctypes.addressof(api)


def test_managed_tensor_from_py_object_shares_memory_and_keeps_read_only():
    a = np.arange(12.0).reshape(3, 4)
    a.flags.writeable = False
    t = dlbridge.from_dlpack(a)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    assert table().managed_tensor_from_py_object_no_sync(t, ctypes.byref(out)) == 0
    m = out.contents
    assert (m.version.major, m.version.minor) == (1, 3)
    assert m.flags & FLAG_READ_ONLY
    assert m.dl_tensor.data == a.ctypes.data
    assert [m.dl_tensor.shape[i] for i in range(2)] == [3, 4]
    assert [m.dl_tensor.strides[i] for i in range(2)] == [4, 1]
    del t, a
    gc.collect()
    delete(out)  # the export keeps the memory alive on its own


def test_managed_tensor_from_py_object_of_another_type_is_an_error():
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    with pytest.raises(TypeError):
        table().managed_tensor_from_py_object_no_sync(np.arange(3.0), ctypes.byref(out))


def test_to_py_object_steals_the_tensor():
    t = dlbridge.from_dlpack(np.arange(6, dtype="int32"))
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    assert table().managed_tensor_from_py_object_no_sync(t, ctypes.byref(out)) == 0
    result = ctypes.py_object()
    assert table().managed_tensor_to_py_object_no_sync(out, ctypes.byref(result)) == 0
    back = result.value
    assert isinstance(back, dlbridge.Tensor)
    assert back.data_ptr == t.data_ptr and back.tolist() == list(range(6))


def test_dltensor_from_py_object_describes_without_owning():
    a = np.arange(24, dtype="float32").reshape(2, 3, 4).transpose(2, 0, 1)
    t = dlbridge.from_dlpack(a)
    d = DLTensor()
    assert table().dltensor_from_py_object_no_sync(t, ctypes.byref(d)) == 0
    assert d.data == t.data_ptr and d.ndim == 3 and d.byte_offset == 0
    assert [d.shape[i] for i in range(3)] == list(t.shape)
    assert [d.strides[i] for i in range(3)] == list(t.strides)


def test_current_work_stream_is_the_default_stream():
    stream = ctypes.c_void_p(123)
    assert table().current_work_stream(1, 0, ctypes.byref(stream)) == 0
    assert stream.value is None


def prototype(shape, device_type=1, code=2, bits=32):
    shape_arr = (ctypes.c_int64 * len(shape))(*shape)
    d = DLTensor()
    d.ndim = len(shape)
    d.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    d.device.device_type = device_type
    d.dtype.code, d.dtype.bits, d.dtype.lanes = code, bits, 1
    return d, shape_arr


def test_allocator_makes_zeroed_host_tensors():
    proto, keep = prototype([2, 3])
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    errors = []
    set_error = SetErrorFn(lambda ctx, kind, msg: errors.append((kind, msg)))
    assert (
        table().managed_tensor_allocator(ctypes.byref(proto), ctypes.byref(out), None, set_error)
        == 0
    )
    assert not errors
    m = out.contents
    values = (ctypes.c_float * 6).from_address(m.dl_tensor.data)
    assert list(values) == [0.0] * 6
    assert m.flags & FLAG_READ_ONLY == 0
    delete(out)


def test_allocator_refuses_devices_through_set_error():
    proto, keep = prototype([4], device_type=2)
    out = ctypes.POINTER(DLManagedTensorVersioned)()
    errors = []
    set_error = SetErrorFn(lambda ctx, kind, msg: errors.append((kind, msg)))
    assert (
        table().managed_tensor_allocator(ctypes.byref(proto), ctypes.byref(out), None, set_error)
        != 0
    )
    assert errors and errors[0][0] == b"BufferError" and b"cuda" in errors[0][1]


def test_tvm_ffi_consumes_through_the_table():
    tvm_ffi = pytest.importorskip("tvm_ffi")
    a = np.arange(8, dtype="int32")
    t = dlbridge.from_dlpack(a)
    v = tvm_ffi.from_dlpack(t)
    assert np.from_dlpack(v).ctypes.data == a.ctypes.data


torch = pytest.importorskip("torch")


def test_torch_exports_through_its_table_zero_copy():
    x = torch.arange(6.0).reshape(2, 3)
    assert type(x).__dlpack_c_exchange_api__ is not None
    t = dlbridge.from_dlpack(x)
    assert t.data_ptr == x.data_ptr() and t.tolist() == x.tolist()


@pytest.mark.parametrize(
    "make, fix",
    [
        (lambda: torch.ones(3, requires_grad=True), "detach"),  # C29
        (lambda: torch.nn.Parameter(torch.ones(2)), "detach"),
        (lambda: torch.tensor([1 + 2j, 3 - 1j]).conj(), "resolve_conj"),  # C28
        (lambda: torch.tensor([1 + 2j]).conj().imag, "resolve_neg"),
    ],
)
def test_torch_state_the_table_would_drop_is_refused(make, fix):
    x = make()
    with pytest.raises(BufferError, match=fix):
        dlbridge.from_dlpack(x)


def _neg_bit_set_in_place(dtype):
    # A plain tensor (not a view) whose negative bit is set in place.
    x = torch.ones(3, dtype=dtype)
    torch._C._set_neg(x, True)
    return x


class _TensorHidingItsState(torch.Tensor):
    # A subclass whose Python attributes deny the state: dlbridge reads the tensor's own bits.
    def is_conj(self):
        return False

    def is_neg(self):
        return False

    @property
    def requires_grad(self):
        return False


@pytest.mark.parametrize(
    "make, fix",
    [
        # the negative bit, on every kind of dtype (torch allows it on any)
        (lambda: torch._neg_view(torch.ones(3, dtype=torch.float32)), "resolve_neg"),
        (lambda: torch._neg_view(torch.ones(3, dtype=torch.int32)), "resolve_neg"),
        (lambda: torch._neg_view(torch.ones(3, dtype=torch.uint8)), "resolve_neg"),
        (lambda: torch._neg_view(torch.ones(3, dtype=torch.bool)), "resolve_neg"),
        (lambda: torch._neg_view(torch.ones(3, dtype=torch.complex64)), "resolve_neg"),
        (lambda: _neg_bit_set_in_place(torch.float64), "resolve_neg"),
        (lambda: _neg_bit_set_in_place(torch.int64), "resolve_neg"),
        # the conjugate bit (complex only)
        (lambda: torch.ones(3, dtype=torch.complex64).conj(), "resolve_conj"),
        (lambda: torch.ones(3, dtype=torch.complex128).conj(), "resolve_conj"),
        # requires_grad, on every floating-point and complex dtype
        (lambda: torch.ones(3, dtype=torch.float16, requires_grad=True), "detach"),
        (lambda: torch.ones(3, dtype=torch.bfloat16, requires_grad=True), "detach"),
        (lambda: torch.ones(3, dtype=torch.float64, requires_grad=True), "detach"),
        (lambda: torch.ones(3, dtype=torch.complex64, requires_grad=True), "detach"),
        (lambda: torch.ones(3, requires_grad=True) * 2, "detach"),  # a non-leaf
        # a subclass cannot hide the state behind Python overrides
        (lambda: torch._neg_view(torch.ones(3)).as_subclass(_TensorHidingItsState), "resolve_neg"),
        (lambda: torch.ones(2, dtype=torch.complex64).conj().as_subclass(_TensorHidingItsState),
         "resolve_conj"),
        (lambda: torch.ones(2, requires_grad=True).as_subclass(_TensorHidingItsState), "detach"),
    ],
)
def test_torch_state_is_refused_through_the_table(make, fix):
    # The route under test: the type offers torch's table, and the import takes it (checked
    # below on a resolved tensor of the same type: zero-copy, same address).
    x = make()
    assert type(x).__dlpack_c_exchange_api__ is not None
    with pytest.raises(BufferError, match=fix):
        dlbridge.from_dlpack(x)
    with pytest.raises(BufferError, match=fix):
        dlbridge.copyto(dlbridge.from_dlpack(np.zeros(x.shape, np.float64)), x)
    # With a device asked for, the import takes torch's __dlpack__, checked before the call.
    with pytest.raises(BufferError, match=fix):
        dlbridge.from_dlpack(x, device="cpu")
    if x.dtype == torch.bool:
        return  # torch cannot resolve a negated bool
    resolved = x.detach().resolve_conj().resolve_neg()
    assert not (resolved.is_neg() or resolved.is_conj() or resolved.requires_grad)
    t = dlbridge.from_dlpack(resolved)
    assert t.data_ptr == resolved.data_ptr() and t.tolist() == resolved.tolist()


_REFUSALS_WITHOUT_NATIVE_READERS = """
import torch, dlbridge

# dlbridge reads the three states with torch's C++ functions only after checking them on
# tensors of torch._C.TensorBase; hidden while the first torch tensor is imported, the checks
# fail and the process keeps torch's Python methods (is_neg, is_conj, requires_grad).
real_base = torch._C.TensorBase
torch._C.TensorBase = int
try:
    dlbridge.from_dlpack(torch.ones(2))
finally:
    torch._C.TensorBase = real_base
cases = [
    (torch._neg_view(torch.ones(3, dtype=torch.int32)), "resolve_neg"),
    (torch.ones(3, dtype=torch.complex64).conj(), "resolve_conj"),
    (torch.ones(3, requires_grad=True), "detach"),
]
for x, fix in cases:
    try:
        dlbridge.from_dlpack(x)
    except BufferError as e:
        assert fix in str(e), e
    else:
        raise AssertionError(f"imported {x!r}")
x = torch.arange(3.0)
assert dlbridge.from_dlpack(x).tolist() == [0.0, 1.0, 2.0]
print("refused")
"""


def test_torch_state_is_refused_without_the_native_readers():
    # The fallback the tests above cannot reach on a build where torch's C++ readers check out.
    out = subprocess.run([sys.executable, "-c", _REFUSALS_WITHOUT_NATIVE_READERS],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "refused"


@pytest.mark.parametrize("dtype", [torch.int8, torch.int64, torch.uint8, torch.bool, torch.float32,
                                   torch.complex128])
def test_torch_plain_tensors_of_every_kind_pass_the_checks(dtype):
    x = torch.ones(3, dtype=dtype)
    t = dlbridge.from_dlpack(x)
    assert t.data_ptr == x.data_ptr() and t.tolist() == x.tolist()


def test_torch_resolved_conjugate_has_the_right_values():  # C28: the opt-in is resolve_conj()
    x = torch.tensor([1 + 2j, 3 - 1j]).conj()
    t = dlbridge.from_dlpack(x.resolve_conj())
    assert t.tolist() == [1 - 2j, 3 + 1j]
