"""ctypes mirror of the DLPack 1.3 ABI, for building (hostile) capsules and inspecting exported
ones.

Nothing here imports dlbridge: the helpers stand on their own so that the tests can check what
dlbridge produces and feed it whatever a misbehaving producer might send.

Memory discipline: every fake managed tensor (struct, shape, strides, deleter callback and the
data it points to) is kept alive in the module-level ``_KEEP_ALIVE`` list for the life of the
process. A consumer that calls the deleter late (or from another thread) therefore never touches
freed memory; the "deleter" only counts calls.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from ctypes import (
    POINTER,
    Structure,
    c_char_p,
    c_int32,
    c_int64,
    c_uint8,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any

# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------
kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3
kDLOneAPI = 14

kDLInt = 0
kDLUInt = 1
kDLFloat = 2
kDLOpaqueHandle = 3
kDLBfloat = 4
kDLComplex = 5
kDLBool = 6
kDLFloat8_e4m3fn = 10

FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
FLAG_IS_SUBBYTE_TYPE_PADDED = 1 << 2

#: numpy dtype name -> (code, bits, lanes)
DTYPE_CODES = {
    "bool": (kDLBool, 8, 1),
    "int8": (kDLInt, 8, 1),
    "int16": (kDLInt, 16, 1),
    "int32": (kDLInt, 32, 1),
    "int64": (kDLInt, 64, 1),
    "uint8": (kDLUInt, 8, 1),
    "uint16": (kDLUInt, 16, 1),
    "uint32": (kDLUInt, 32, 1),
    "uint64": (kDLUInt, 64, 1),
    "float16": (kDLFloat, 16, 1),
    "float32": (kDLFloat, 32, 1),
    "float64": (kDLFloat, 64, 1),
    "bfloat16": (kDLBfloat, 16, 1),
    "complex64": (kDLComplex, 64, 1),
    "complex128": (kDLComplex, 128, 1),
    "float8_e3m4": (7, 8, 1),
    "float8_e4m3": (8, 8, 1),
    "float8_e4m3b11fnuz": (9, 8, 1),
    "float8_e4m3fn": (10, 8, 1),
    "float8_e4m3fnuz": (11, 8, 1),
    "float8_e5m2": (12, 8, 1),
    "float8_e5m2fnuz": (13, 8, 1),
    "float8_e8m0fnu": (14, 8, 1),
}


# --------------------------------------------------------------------------------------------
# Structs (offsets checked below against spec/dlpack.md §2.4)
# --------------------------------------------------------------------------------------------
class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    pass


DeleterLegacy = ctypes.CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", c_void_p),
    ("deleter", DeleterLegacy),
]


class DLManagedTensorVersioned(Structure):
    pass


DeleterVersioned = ctypes.CFUNCTYPE(None, POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion),
    ("manager_ctx", c_void_p),
    ("deleter", DeleterVersioned),
    ("flags", c_uint64),
    ("dl_tensor", DLTensor),
]

assert ctypes.sizeof(DLPackVersion) == 8
assert ctypes.sizeof(DLDevice) == 8
assert ctypes.sizeof(DLDataType) == 4
assert ctypes.sizeof(DLTensor) == 48
assert DLTensor.shape.offset == 24 and DLTensor.byte_offset.offset == 40
assert ctypes.sizeof(DLManagedTensor) == 64
assert DLManagedTensor.deleter.offset == 56
assert ctypes.sizeof(DLManagedTensorVersioned) == 80
assert DLManagedTensorVersioned.flags.offset == 24
assert DLManagedTensorVersioned.dl_tensor.offset == 32

# --------------------------------------------------------------------------------------------
# PyCapsule C API through ctypes
# --------------------------------------------------------------------------------------------
# Capsule names must be static C strings: keep them in module-level buffers forever.
_NAMES = {
    name: ctypes.create_string_buffer(name)
    for name in (
        b"dltensor",
        b"dltensor_versioned",
        b"used_dltensor",
        b"used_dltensor_versioned",
        b"not_a_dltensor",
        b"dlpack_exchange_api",
    )
}


def _name_ptr(name: bytes) -> int:
    return ctypes.addressof(_NAMES[name])


CapsuleDestructor = ctypes.CFUNCTYPE(None, c_void_p)

_PyCapsule_New = ctypes.PYFUNCTYPE(ctypes.py_object, c_void_p, c_void_p, CapsuleDestructor)(
    ("PyCapsule_New", ctypes.pythonapi)
)
_PyCapsule_GetPointer = ctypes.PYFUNCTYPE(c_void_p, ctypes.py_object, c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)
_PyCapsule_GetName = ctypes.PYFUNCTYPE(c_char_p, ctypes.py_object)(
    ("PyCapsule_GetName", ctypes.pythonapi)
)
_PyCapsule_SetName = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, c_void_p)(
    ("PyCapsule_SetName", ctypes.pythonapi)
)
_PyCapsule_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi)
)

_KEEP_ALIVE: list[Any] = []


def capsule_name(capsule: Any) -> str:
    """The capsule's current name ("dltensor", "used_dltensor_versioned", ...)."""
    name = _PyCapsule_GetName(capsule)
    return name.decode() if name is not None else ""


def rename_capsule(capsule: Any, new_name: bytes) -> None:
    """Rename a capsule (e.g. to ``b"used_dltensor"``) as a consumer would."""
    if _PyCapsule_SetName(capsule, _name_ptr(new_name)) != 0:
        raise RuntimeError("PyCapsule_SetName failed")


# --------------------------------------------------------------------------------------------
# Fake producer
# --------------------------------------------------------------------------------------------
class FakeManagedTensor:
    """One managed tensor (legacy or versioned) built by hand, with a counting deleter.

    ``capsule()`` wraps it in a fresh capsule; ``finalize()`` then does what a correct
    producer's capsule destructor does (call the deleter if the capsule was not consumed).
    A consumer must either rename the capsule and call the deleter once when done, or leave it
    fresh (on failure) and never call the deleter: either way ``finalize()`` ends at exactly
    one call, and a double free shows as two.

    Attributes after use: ``deleter_calls`` (int), ``deleter_threads`` (thread idents).
    """

    def __init__(
        self,
        *,
        data: Any = None,
        data_ptr: int | None = None,
        shape: Sequence[int] | None = (),
        strides: Sequence[int] | None = None,
        ndim: int | None = None,
        dtype: tuple[int, int, int] | str = "float32",
        device: tuple[int, int] = (kDLCPU, 0),
        byte_offset: int = 0,
        versioned: bool = True,
        version: tuple[int, int] = (1, 3),
        flags: int = 0,
        null_deleter: bool = False,
        null_shape: bool = False,
    ) -> None:
        self.versioned = versioned
        self.deleter_calls = 0
        self.deleter_threads: list[int] = []
        self.data = data  # keep the backing object alive
        self._lock = threading.Lock()

        if data_ptr is None:
            if data is None:
                data_ptr = 0
            elif hasattr(data, "ctypes"):
                data_ptr = data.ctypes.data
            else:
                raise TypeError("give data_ptr or a numpy array as data")
        if isinstance(dtype, str):
            dtype = DTYPE_CODES[dtype]

        shape_list = list(shape) if shape is not None else []
        if ndim is None:
            ndim = len(shape_list)
        self.shape_arr = (c_int64 * max(len(shape_list), 1))(*shape_list)
        self.strides_arr = None
        if strides is not None:
            self.strides_arr = (c_int64 * max(len(strides), 1))(*strides)

        if versioned:
            self.struct = DLManagedTensorVersioned()
            self.struct.version.major, self.struct.version.minor = version
            self.struct.flags = flags
            deleter_type = DeleterVersioned
        else:
            self.struct = DLManagedTensor()
            deleter_type = DeleterLegacy

        dl = self.struct.dl_tensor
        dl.data = data_ptr or None
        dl.device.device_type, dl.device.device_id = device
        dl.ndim = ndim
        dl.dtype.code, dl.dtype.bits, dl.dtype.lanes = dtype
        dl.shape = (
            ctypes.cast(None, POINTER(c_int64))
            if null_shape
            else ctypes.cast(self.shape_arr, POINTER(c_int64))
        )
        dl.strides = (
            ctypes.cast(self.strides_arr, POINTER(c_int64))
            if self.strides_arr is not None
            else ctypes.cast(None, POINTER(c_int64))
        )
        dl.byte_offset = byte_offset

        def _deleter(_self_ptr: Any) -> None:
            with self._lock:
                self.deleter_calls += 1
                self.deleter_threads.append(threading.get_ident())

        self._deleter_cb = deleter_type(_deleter)
        self.struct.deleter = deleter_type() if null_deleter else self._deleter_cb
        self.address = ctypes.addressof(self.struct)
        self.fresh_name = b"dltensor_versioned" if versioned else b"dltensor"
        self.null_deleter = null_deleter

        self.capsules: list[Any] = []
        _KEEP_ALIVE.append(self)

    def capsule(self, name: bytes | None = None) -> Any:
        """Wrap the managed tensor in a new capsule (fresh DLPack name unless told otherwise).

        The capsule has no destructor (a Python callback run during deallocation would see,
        and clobber, the exception a failing consumer is raising). Call ``finalize()`` to do
        what a producer's capsule destructor does. Make one capsule per FakeManagedTensor.
        """
        cap = _PyCapsule_New(self.address, _name_ptr(name or self.fresh_name), CapsuleDestructor())
        self.capsules.append(cap)
        return cap

    def finalize(self) -> int:
        """Play the producer's capsule destructor for every capsule made here.

        A capsule still carrying the fresh name was not consumed: call the deleter (as a
        correct producer's destructor would) and mark it used. Returns ``deleter_calls``.
        """
        for cap in self.capsules:
            if capsule_name(cap) == self.fresh_name.decode():
                if not self.null_deleter:
                    self.struct.deleter(ctypes.pointer(self.struct))
                rename_capsule(cap, b"used_" + self.fresh_name)
        self.capsules.clear()
        return self.deleter_calls


class FakeProducer:
    """An object with ``__dlpack__`` / ``__dlpack_device__`` that hands out FakeManagedTensors.

    ``factory(**kwargs_of___dlpack__)`` returns a FakeManagedTensor for each call; every call's
    keyword arguments are recorded in ``calls``. ``accept_keywords=False`` mimics a pre-2023
    producer whose ``__dlpack__`` only takes ``stream``.
    """

    def __init__(self, factory, *, device=(kDLCPU, 0), accept_keywords: bool = True):
        self.factory = factory
        self.device = device
        self.accept_keywords = accept_keywords
        self.calls: list[dict] = []
        self.made: list[FakeManagedTensor] = []

    def __dlpack__(self, **kwargs):
        if not self.accept_keywords:
            unexpected = set(kwargs) - {"stream"}
            if unexpected:
                raise TypeError(
                    f"__dlpack__() got an unexpected keyword argument '{sorted(unexpected)[0]}'"
                )
        self.calls.append(dict(kwargs))
        fake = self.factory(**kwargs)
        self.made.append(fake)
        return fake.capsule()

    def __dlpack_device__(self):
        return self.device

    @property
    def deleter_calls(self) -> int:
        return sum(m.deleter_calls for m in self.made)

    def finalize(self) -> int:
        """``finalize()`` every managed tensor handed out; returns the total deleter calls."""
        for m in self.made:
            m.finalize()
        return self.deleter_calls


# --------------------------------------------------------------------------------------------
# Inspection of capsules produced by others (does not consume them)
# --------------------------------------------------------------------------------------------
def inspect_capsule(capsule: Any) -> dict:
    """Read a fresh DLPack capsule without consuming it.

    Returns a dict with ``name``, ``versioned``, ``version`` (None for legacy), ``flags``
    (None for legacy), ``device``, ``ndim``, ``dtype`` (code, bits, lanes), ``shape``,
    ``strides`` (None when NULL), ``shape_is_null``, ``data``, ``byte_offset``,
    ``data_ptr`` (= data + byte_offset) and ``has_deleter``.
    """
    name = capsule_name(capsule)
    if name not in ("dltensor", "dltensor_versioned"):
        raise ValueError(f"not a fresh DLPack capsule: {name!r}")
    ptr = _PyCapsule_GetPointer(capsule, name.encode())
    if name == "dltensor_versioned":
        mt = ctypes.cast(ptr, POINTER(DLManagedTensorVersioned)).contents
        version = (mt.version.major, mt.version.minor)
        flags = mt.flags
    else:
        mt = ctypes.cast(ptr, POINTER(DLManagedTensor)).contents
        version = None
        flags = None
    dl = mt.dl_tensor
    ndim = dl.ndim
    shape = tuple(dl.shape[i] for i in range(ndim)) if dl.shape else None
    strides = tuple(dl.strides[i] for i in range(ndim)) if dl.strides else None
    data = dl.data or 0
    return {
        "name": name,
        "versioned": name == "dltensor_versioned",
        "version": version,
        "flags": flags,
        "device": (dl.device.device_type, dl.device.device_id),
        "ndim": ndim,
        "dtype": (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes),
        "shape": shape if shape is not None else (() if ndim == 0 else None),
        "shape_is_null": not bool(dl.shape),
        "strides": strides,
        "strides_is_null": not bool(dl.strides),
        "data": data,
        "byte_offset": dl.byte_offset,
        "data_ptr": data + dl.byte_offset,
        "has_deleter": bool(ctypes.cast(mt.deleter, c_void_p).value),
    }


def c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides in elements."""
    out = []
    acc = 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))
