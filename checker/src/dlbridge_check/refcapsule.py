"""A reference DLPack implementation in ctypes, used by the checker in three ways.

- :func:`read_capsule` takes a capsule apart field by field (version, flags, device, dtype,
  shape, strides, byte offset), validates it against the DLPack spec, copies the elements out
  and then consumes it the way the spec says (rename to ``used_*``, call the deleter once).
  It is the checker's *reference consumer* and the way it reads values out of any host array.
- :class:`RefArray` is the *reference producer*: it exports a NumPy array exactly as the
  spec describes (versioned or legacy, READ_ONLY and IS_COPIED flags, ``dl_device``, ``copy``),
  or deliberately broken (NULL strides, major version 2, NULL data) for the hostile cases, and
  counts how often its deleter runs.
- :func:`probe` asks an object for a capsule and reports what it offered without keeping it.

Only the standard library and NumPy are needed (ml_dtypes, when installed, gives bfloat16 and
float8 elements a NumPy dtype; without it their bytes are still compared exactly), and one
fact shared with dlbridge's namespaces, the device types whose memory the host reads.
"""

from __future__ import annotations

import ctypes
import math
import threading
from typing import Any

import numpy as np

from dlbridge import Device

from .layout import c_strides

c_void_p = ctypes.c_void_p
c_int64 = ctypes.c_int64

READ_ONLY = 1
IS_COPIED = 2


def host_readable(device: tuple[int, int]) -> bool:
    """Whether the host CPU reads memory of a DLPack ``(device_type, device_id)`` pair
    directly, as dlbridge's :class:`Device` says; False for a pair that names no device."""
    try:
        return Device(device).is_host_accessible
    except (TypeError, ValueError):
        return False


#: Highest DLPack version the reference consumer asks for and the reference producer speaks.
REF_VERSION = (1, 3)

def device_name(device_type: int) -> str:
    """The name of a DLPack device type (``"cuda"``, ``"tpu_host"``...), as dlbridge's
    :class:`Device` spells it; the number itself for a type that names no device."""
    try:
        return Device((device_type, 0)).name
    except (TypeError, ValueError):
        return str(device_type)

#: (code, bits) -> dtype name (lanes must be 1).
DTYPE_NAMES = {
    (0, 8): "int8",
    (0, 16): "int16",
    (0, 32): "int32",
    (0, 64): "int64",
    (1, 8): "uint8",
    (1, 16): "uint16",
    (1, 32): "uint32",
    (1, 64): "uint64",
    (2, 16): "float16",
    (2, 32): "float32",
    (2, 64): "float64",
    (4, 16): "bfloat16",
    (5, 64): "complex64",
    (5, 128): "complex128",
    (6, 8): "bool",
    (7, 8): "float8_e3m4",
    (8, 8): "float8_e4m3",
    (9, 8): "float8_e4m3b11fnuz",
    (10, 8): "float8_e4m3fn",
    (11, 8): "float8_e4m3fnuz",
    (12, 8): "float8_e5m2",
    (13, 8): "float8_e5m2fnuz",
    (14, 8): "float8_e8m0fnu",
    (18, 32): "bcomplex32",
}
DTYPE_CODES = {name: cb for cb, name in DTYPE_NAMES.items()}
#: dtype codes added in DLPack 1.1 (a producer must not send them to a 1.0 consumer).
CODES_SINCE_1_1 = set(range(7, 18))
#: dtype codes the header added after DLPack 1.3 (kDLBcomplex) with the minor version still 3.
CODES_SINCE_1_3 = {18}
#: The modes of :class:`RefArray` whose capsules name another device type for host memory: the
#: device types the header added after DLPack 1.3 (a TPU's memory, a TPU's pinned host memory,
#: an Ascend NPU's memory).
DEVICE_MODES = {"tpu": 19, "tpu_host": 20, "ascend": 21}
#: The modes of :class:`RefArray` that export a zero-size array with each form of strides
#: producers use for it (an array without elements has no layout, so every form is right and a
#: consumer must take each): the C strides, all zeros, NULL in a versioned 1.1 capsule (allowed
#: before 1.2), all ones.
ZERO_SIZE_STRIDES = ("zero_size_c_strides", "zero_size_zero_strides", "zero_size_null_strides",
                     "zero_size_unit_strides")
#: The modes of :class:`RefArray` that break a rule on purpose, or stretch one: the consumer is
#: judged on what it makes of them.
HOSTILE_MODES = ("legacy_null_strides", "v12_null_strides", "major2", "null_data",
                 "unknown_dtype", "unknown_flags", "byte_offset", "scalar_readonly",
                 *ZERO_SIZE_STRIDES)
#: Flag bits DLPack 1.3 does not define, set by the ``"unknown_flags"`` mode (a later header
#: may define them: alignment bits are proposed): a consumer must ignore them.
UNDEFINED_FLAGS = 1 << 5 | 1 << 63
#: A dtype code DLPack does not define, exported by the ``"unknown_dtype"`` mode.
UNDEFINED_DTYPE_CODE = 99
#: Of those, the modes that stand for device memory, which the host is not meant to read.
DEVICE_MEMORY_MODES = frozenset({"tpu", "ascend"})


def np_dtype(name: str) -> np.dtype:
    """NumPy dtype for a dtype name; ml_dtypes types when installed, else raw bytes (V)."""
    try:
        return np.dtype(name)
    except TypeError:
        pass
    try:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    except (ImportError, AttributeError):
        code, bits = DTYPE_CODES[name]
        return np.dtype(f"V{max(1, bits // 8)}")


def dtype_name(dt: Any) -> str:
    """Name of a NumPy (or ml_dtypes) dtype, in DLPack / dlbridge spelling."""
    return np.dtype(dt).name


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(c_int64)),
        ("strides", ctypes.POINTER(c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# Capsule names must outlive every capsule that points at them: module-level constants.
NAME_LEGACY = b"dltensor"
NAME_VERSIONED = b"dltensor_versioned"
NAME_USED_LEGACY = b"used_dltensor"
NAME_USED_VERSIONED = b"used_dltensor_versioned"

_api = ctypes.pythonapi
# Private prototypes, not the shared ``ctypes.pythonapi.PyCapsule_*`` objects: other libraries set
# ``argtypes`` on those process-wide (warp 1.19 sets PyCapsule_New's destructor argument to a
# CFUNCTYPE on every export), which would break these calls.
_GetName = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))
_GetPointer = ctypes.PYFUNCTYPE(c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api)
)
_SetName = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _api)
)
_CheckExact = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api)
)
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, c_void_p)
# destructor: NULL (see RefArray.finish)
_New = ctypes.PYFUNCTYPE(ctypes.py_object, c_void_p, ctypes.c_char_p, c_void_p)(
    ("PyCapsule_New", _api)
)
# raw-pointer variants for use inside a capsule destructor (the object is being destroyed)
_RawIsValid = ctypes.PYFUNCTYPE(ctypes.c_int, c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api)
)
_RawGetPointer = ctypes.PYFUNCTYPE(c_void_p, c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api)
)


def is_capsule(obj: Any) -> bool:
    return type(obj).__name__ == "PyCapsule"


def capsule_name(cap: Any) -> str | None:
    if not is_capsule(cap):
        return None
    name = _GetName(cap)
    return None if name is None else name.decode("ascii", "replace")


class CapsuleInfo:
    """Everything a capsule said, plus a C-order copy of its elements (host memory only)."""

    def __init__(self) -> None:
        self.name = ""
        self.versioned = False
        self.version: tuple[int, int] | None = None
        self.flags = 0
        self.device: tuple[int, int] = (1, 0)
        self.code_bits_lanes: tuple[int, int, int] = (0, 0, 0)
        self.dtype: str = "?"
        self.shape: tuple[int, ...] = ()
        self.strides: tuple[int, ...] | None = None  # None = NULL
        self.shape_null = False
        self.byte_offset = 0
        self.data = 0
        self.values: np.ndarray | None = None
        self.problems: list[str] = []  # spec violations found while reading

    @property
    def readonly(self) -> bool:
        """What a careful consumer must assume: flagged read-only, or legacy (cannot say)."""
        return bool(self.flags & READ_ONLY) or not self.versioned

    @property
    def is_copied(self) -> bool:
        return bool(self.flags & IS_COPIED)

    @property
    def data_ptr(self) -> int:
        return (self.data or 0) + self.byte_offset

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def element_strides(self) -> tuple[int, ...]:
        if self.strides is not None:
            return self.strides
        return c_strides(self.shape)

    def describe(self) -> str:
        v = f"versioned {self.version[0]}.{self.version[1]}" if self.version else "legacy"
        fl = []
        if self.flags & READ_ONLY:
            fl.append("READ_ONLY")
        if self.flags & IS_COPIED:
            fl.append("IS_COPIED")
        strides = "NULL" if self.strides is None else self.strides
        return (
            f"{v} capsule{' [' + ','.join(fl) + ']' if fl else ''}, {self.dtype}, "
            f"shape {self.shape}, strides {strides}, device "
            f"{device_name(self.device[0])}"
        )


def host_copy(
    data_ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], dt: np.dtype
) -> np.ndarray:
    """C-order copy of the elements at ``data_ptr`` (first element) with element strides."""
    size = math.prod(shape)
    if size == 0:
        return np.empty(shape, dtype=dt)
    itemsize = dt.itemsize
    lo = hi = 0
    for n, s in zip(shape, strides):
        if n <= 0:
            continue
        if s < 0:
            lo += (n - 1) * s * itemsize
        else:
            hi += (n - 1) * s * itemsize
    span = hi - lo + itemsize
    if span > (1 << 32):
        raise BufferError(f"layout spans {span} bytes; refusing to read it")
    if not data_ptr:
        raise BufferError("data pointer is NULL for a non-empty tensor")
    buf = (ctypes.c_char * span).from_address(data_ptr + lo)
    raw = np.frombuffer(buf, dtype=np.uint8)
    view = np.ndarray(
        shape, dtype=dt, buffer=raw, offset=-lo, strides=tuple(s * itemsize for s in strides)
    )
    return np.array(view, copy=True, order="C")


def _read_tensor(info: CapsuleInfo, t: DLTensor, read_values: bool) -> None:
    info.device = (int(t.device.device_type), int(t.device.device_id))
    info.code_bits_lanes = (int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes))
    code, bits, lanes = info.code_bits_lanes
    if lanes != 1:
        raise BufferError(f"lanes={lanes} is not supported by the reference consumer")
    name = DTYPE_NAMES.get((code, bits))
    if name is None:
        raise BufferError(f"unknown DLPack dtype code={code} bits={bits}")
    info.dtype = name
    ndim = int(t.ndim)
    if ndim < 0 or ndim > 64:
        raise BufferError(f"invalid ndim {ndim}")
    if ndim and not t.shape:
        raise BufferError("shape is NULL for ndim > 0")
    info.shape_null = not bool(t.shape)
    info.shape = tuple(int(t.shape[i]) for i in range(ndim))
    if any(n < 0 for n in info.shape):
        raise BufferError(f"negative extent in shape {info.shape}")
    if t.strides:
        info.strides = tuple(int(t.strides[i]) for i in range(ndim))
    else:
        info.strides = None
        if ndim and info.versioned and info.version is not None and info.version >= (1, 2):
            raise BufferError(
                f"strides is NULL with ndim={ndim} in a DLPack {info.version[0]}.{info.version[1]} "
                "capsule (forbidden since 1.2)"
            )
    info.byte_offset = int(t.byte_offset)
    info.data = int(t.data or 0)
    if read_values:
        if not host_readable(info.device):
            raise BufferError(
                f"memory on device {device_name(info.device[0])} is not "
                "readable from the host"
            )
        info.values = host_copy(info.data_ptr, info.shape, info.element_strides, np_dtype(name))


def read_capsule(cap: Any, *, read_values: bool = True, consume: bool = True) -> CapsuleInfo:
    """Read a DLPack capsule the way a careful consumer does, then (``consume``) take it:
    rename it to ``used_*`` and call its deleter exactly once.

    Raises BufferError for what a consumer must refuse (consumed capsule, major version != 1,
    NULL strides on >= 1.2, unknown dtype, device memory), TypeError for a non-DLPack object.
    On refusal the capsule is left unrenamed, so its own destructor frees the tensor.
    """
    if not is_capsule(cap):
        raise TypeError(f"{type(cap).__name__} is not a PyCapsule")
    name = _GetName(cap)
    info = CapsuleInfo()
    info.name = (name or b"").decode("ascii", "replace")
    if name in (NAME_USED_LEGACY, NAME_USED_VERSIONED):
        raise BufferError(f"capsule {info.name!r} was already consumed")
    if name == NAME_VERSIONED:
        ptr = _GetPointer(cap, NAME_VERSIONED)
        mt = DLManagedTensorVersioned.from_address(ptr)
        info.versioned = True
        info.version = (int(mt.version.major), int(mt.version.minor))
        if info.version[0] != 1:
            raise BufferError(
                f"DLPack major version {info.version[0]} is not supported (expected 1)"
            )
        info.flags = int(mt.flags)
        _read_tensor(info, mt.dl_tensor, read_values)
        if consume:
            _SetName(cap, NAME_USED_VERSIONED)
            if mt.deleter:
                mt.deleter(ptr)
    elif name == NAME_LEGACY:
        ptr = _GetPointer(cap, NAME_LEGACY)
        legacy = DLManagedTensor.from_address(ptr)
        _read_tensor(info, legacy.dl_tensor, read_values)
        if consume:
            _SetName(cap, NAME_USED_LEGACY)
            if legacy.deleter:
                legacy.deleter(ptr)
    else:
        raise TypeError(f"capsule name {info.name!r} is not a DLPack name")
    return info


def export_capsule(obj: Any, **kw: Any) -> Any:
    """``obj.__dlpack__`` with the spec's consumer fallback (no keywords on TypeError)."""
    max_version = kw.pop("max_version", REF_VERSION)
    kw = {k: v for k, v in kw.items() if v is not None}
    try:
        return obj.__dlpack__(max_version=max_version, **kw)
    except TypeError:
        if kw:
            raise
        return obj.__dlpack__()


def read_object(
    obj: Any, *, max_version: tuple[int, int] | None = REF_VERSION, **kw: Any
) -> CapsuleInfo:
    """The reference consumer: ask ``obj`` for a capsule, read and consume it."""
    if is_capsule(obj):
        return read_capsule(obj)
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"{type(obj).__name__} has no __dlpack__")
    if max_version is None:
        cap = obj.__dlpack__(**{k: v for k, v in kw.items() if v is not None})
    else:
        cap = export_capsule(obj, max_version=max_version, **kw)
    return read_capsule(cap)


def probe(obj: Any) -> CapsuleInfo | None:
    """What ``obj`` exports to a current consumer (metadata only); None if it cannot."""
    try:
        cap = export_capsule(obj)
        return read_capsule(cap, read_values=False)
    except Exception:  # noqa: BLE001 - a probe only reports
        return None


# --------------------------------------------------------------------------- producer


class _Export:
    """Keeps one exported managed tensor (and what it points at) alive."""

    def __init__(self, owner: RefArray, struct: ctypes.Structure, keep: list) -> None:
        self.owner = owner
        self.struct = struct
        self.keep = keep


#: address of a managed struct -> its _Export. Entries stay until RefArray.release_all()
#: so that a buggy consumer touching a struct after its deleter reads stale but valid memory.
_EXPORTS: dict[int, _Export] = {}


#: deleters may run on several threads at once (free-threaded Python): the count is a
#: read-modify-write, so it is taken under a lock
_COUNT_LOCK = threading.Lock()


def _deleter_impl(ptr: int) -> None:
    exp = _EXPORTS.get(ptr)
    if exp is not None:
        with _COUNT_LOCK:
            exp.owner.deleter_calls += 1


_DELETER = DELETER(_deleter_impl)


# No capsule destructor: a destructor written in Python (a ctypes callback) would run while the
# consumer's exception is in flight and clobber it. RefArray keeps its capsules instead and, in
# finish(), does what the destructor would have done: call the deleter of every capsule that no
# consumer took (name still "dltensor" / "dltensor_versioned").


class RefArray:
    """A reference DLPack producer over a NumPy array (CPU, zero-copy unless asked to copy).

    ``mode`` selects a deliberately unusual export for the hostile cases:
    ``"normal"``, ``"legacy_null_strides"`` (C6), ``"v12_null_strides"`` (C7),
    ``"major2"`` (C17), ``"null_data"`` (C9, zero-size with data == NULL), ``"unknown_dtype"``
    (C63, a dtype code DLPack does not define), ``"unknown_flags"`` (C64, flag bits DLPack 1.3
    does not define), ``"byte_offset"`` (C65, a view exported as its base's data pointer plus
    ``byte_offset``), ``"scalar_readonly"`` (C67, read-only data exported through versioned
    capsules only, as NumPy 2.6's scalars), the :data:`ZERO_SIZE_STRIDES` modes (C69), and the
    modes of
    :data:`DEVICE_MODES` (host memory exported under a device type added after DLPack 1.3;
    ``dl_device=(1, 0)`` gets it as CPU memory, copied for the :data:`DEVICE_MEMORY_MODES`,
    whose memory the host is not meant to read).
    """

    def __init__(self, arr: np.ndarray, *, readonly: bool = False, mode: str = "normal") -> None:
        self.arr = arr
        # "scalar_readonly" stands for a NumPy >= 2.6 scalar: read-only data exported through
        # versioned capsules only, never copied
        self.readonly = readonly or not arr.flags.writeable or mode == "scalar_readonly"
        self.mode = mode
        self.deleter_calls = 0
        self.capsule_destructor_deletes = 0
        self.exports = 0
        self.requests: list[dict[str, Any]] = []
        self.capsules: list[Any] = []

    @property
    def shape(self) -> tuple[int, ...]:
        return self.arr.shape

    @property
    def data_ptr(self) -> int:
        return self.arr.__array_interface__["data"][0]

    def __dlpack_device__(self) -> tuple[int, int]:
        return (DEVICE_MODES.get(self.mode, 1), 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.requests.append(
            {"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy}
        )
        if stream is not None:
            raise ValueError(f"stream={stream!r} is not valid for CPU memory (only None)")
        here = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) not in ((1, 0), here):
            raise BufferError(f"the reference producer only exports to the CPU, not {dl_device}")
        to_cpu = dl_device is not None and tuple(dl_device) == (1, 0) and here != (1, 0)
        if to_cpu and self.mode in DEVICE_MEMORY_MODES:
            if copy is False:
                raise BufferError(
                    f"{self.mode} memory reaches the CPU only as a copy, and copy=False"
                )
            copy = True  # "device" memory reaches the host as a copy
        if max_version is not None and (
            not isinstance(max_version, tuple) or len(max_version) != 2
        ):
            raise TypeError(f"max_version must be a (major, minor) tuple, got {max_version!r}")
        versioned = max_version is not None and max_version[0] >= 1
        if copy and self.mode == "scalar_readonly":
            raise BufferError("a scalar exports its own read-only data only: copy=True refused")
        arr = self.arr
        flags = 0
        if copy:
            arr = np.array(arr, copy=True, order="C")
            flags |= IS_COPIED
        elif self.readonly:
            flags |= READ_ONLY
        mode = self.mode
        if mode == "legacy_null_strides":
            versioned = False
        if flags & READ_ONLY and not versioned:
            raise BufferError(
                "cannot export read-only memory through a legacy capsule (it cannot say "
                "read-only); ask for max_version >= (1, 0) or copy=True"
            )
        code, bits = DTYPE_CODES[dtype_name(arr.dtype)]
        asked = (0, 0) if not versioned or max_version is None else tuple(max_version)
        if code in CODES_SINCE_1_1 and asked < (1, 1):
            raise BufferError(f"dtype {dtype_name(arr.dtype)} needs DLPack >= 1.1 (C26)")
        if code in CODES_SINCE_1_3 and asked < (1, 3):
            raise BufferError(f"dtype {dtype_name(arr.dtype)} needs DLPack >= 1.3")
        ndim = arr.ndim
        shape = (c_int64 * max(ndim, 1))(*arr.shape)
        strides = (c_int64 * max(ndim, 1))(*_element_strides(mode, arr))
        mt: DLManagedTensorVersioned | DLManagedTensor
        if versioned:
            mt = DLManagedTensorVersioned()
            version = (
                (2, 0)
                if mode == "major2"
                else ((1, 2) if mode == "v12_null_strides"
                      else ((1, 1) if mode == "zero_size_null_strides" else REF_VERSION))
            )
            mt.version.major, mt.version.minor = version
            mt.flags = flags | (UNDEFINED_FLAGS if mode == "unknown_flags" else 0)
            t = mt.dl_tensor
        else:
            mt = DLManagedTensor()
            t = mt.dl_tensor
        data = arr.__array_interface__["data"][0]
        offset = _offset_in_base(arr) if mode == "byte_offset" and arr is self.arr else 0
        t.data = None if (mode == "null_data" or arr.size == 0) else data - offset
        if mode == "unknown_dtype":
            code = UNDEFINED_DTYPE_CODE
        t.device.device_type, t.device.device_id = (1, 0) if to_cpu else here
        t.ndim = ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, 1
        t.shape = ctypes.cast(shape, ctypes.POINTER(c_int64)) if ndim else None
        null_strides = mode in ("legacy_null_strides", "v12_null_strides",
                                "zero_size_null_strides")
        t.strides = (
            None if (null_strides or not ndim) else ctypes.cast(strides, ctypes.POINTER(c_int64))
        )
        t.byte_offset = offset
        mt.manager_ctx = None
        mt.deleter = _DELETER
        addr = ctypes.addressof(mt)
        _EXPORTS[addr] = _Export(self, mt, [shape, strides, arr])
        self.exports += 1
        cap = _New(addr, NAME_VERSIONED if versioned else NAME_LEGACY, None)
        self.capsules.append(cap)
        return cap

    def finish(self) -> None:
        """Play the capsule destructor for every capsule handed out so far (see above)."""
        caps, self.capsules = self.capsules, []
        for cap in caps:
            for name in (NAME_VERSIONED, NAME_LEGACY):
                if _CheckExact(cap, name):
                    ptr = _GetPointer(cap, name)
                    self.capsule_destructor_deletes += 1
                    _deleter_impl(ptr)
                    _SetName(
                        cap, NAME_USED_VERSIONED if name == NAME_VERSIONED else NAME_USED_LEGACY
                    )
                    break


def _element_strides(mode: str, arr: np.ndarray) -> tuple[int, ...]:
    """The strides exported, in elements: the array's own, or for a zero-size array the form
    its :data:`ZERO_SIZE_STRIDES` mode names."""
    if arr.size == 0 and mode == "zero_size_c_strides":
        return c_strides(arr.shape)
    if arr.size == 0 and mode == "zero_size_zero_strides":
        return (0,) * arr.ndim
    if arr.size == 0 and mode == "zero_size_unit_strides":
        return (1,) * arr.ndim
    return tuple(s // arr.itemsize for s in arr.strides)


def _offset_in_base(arr: np.ndarray) -> int:
    """How many bytes into the array it views ``arr`` starts (0 for an array of its own)."""
    base = arr.base
    if not isinstance(base, np.ndarray):
        return 0
    return int(arr.__array_interface__["data"][0] - base.__array_interface__["data"][0])


def release_all() -> None:
    """Forget every reference export (call between checker cases, after finish() and a gc)."""
    _EXPORTS.clear()
