"""What dlbridge sees in any object: :func:`describe`, and the source facts the planner uses.

Reading a DLPack capsule here never consumes it: the capsule's struct is read through ctypes
and the capsule is dropped, so its producer's deleter runs as usual.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

from . import namespaces as nsmod
from ._layout import c_contiguous, c_strides, f_contiguous
from ._native import DLPACK_VERSION, Device, DType, Tensor, from_dlpack

# ------------------------------------------------------------------------------ capsules


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", _DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", _DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


# Private prototypes: setting restype/argtypes on ctypes.pythonapi's shared function objects
# would change them for every other user in the process.
_CapsuleGetName = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
    ("PyCapsule_GetName", ctypes.pythonapi)
)
_CapsuleGetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)
_CheckBuffer = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object)(
    ("PyObject_CheckBuffer", ctypes.pythonapi)
)

_FLAGS = {1: "READ_ONLY", 2: "IS_COPIED", 4: "IS_SUBBYTE_TYPE_PADDED"}
_CODES = {
    0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool",
    7: "float8_e3m4", 8: "float8_e4m3", 9: "float8_e4m3b11fnuz", 10: "float8_e4m3fn",
    11: "float8_e4m3fnuz", 12: "float8_e5m2", 13: "float8_e5m2fnuz", 14: "float8_e8m0fnu",
    15: "float6_e2m3fn", 16: "float6_e3m2fn", 17: "float4_e2m1fn",
}


def is_capsule(x: Any) -> bool:
    return type(x).__name__ == "PyCapsule" and type(x).__module__ == "builtins"


def _dtype_name(code: int, bits: int, lanes: int) -> str:
    base = _CODES.get(code)
    if base is None:
        return f"unknown(code={code}, bits={bits})"
    if base in ("int", "uint", "float", "complex"):
        name = f"{base}{bits}"
    elif base == "bfloat":
        name = f"bfloat{bits}"
    else:
        name = base
    return name if lanes == 1 else f"{name}x{lanes}"


@dataclass
class CapsuleInfo:
    """The fields of an unconsumed DLPack capsule."""

    name: str
    version: tuple[int, int] | None  # None: a legacy capsule
    flags: list[str] = field(default_factory=list)
    device: tuple[int, int] | None = None
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    strides: tuple[int, ...] | None = None  # elements; None when the capsule has NULL strides
    data_ptr: int | None = None  # data + byte_offset
    note: str | None = None

    @property
    def readonly(self) -> bool:
        # a legacy capsule cannot say; dlbridge imports it read-only
        return self.version is None or "READ_ONLY" in self.flags


def _flag_names(bits: int) -> list[str]:
    """The names of the flags set in ``bits``; a bit that DLPack 1.3 does not define (producers
    may set bits a later header adds, and dlbridge ignores them on import) as ``"bit N"``."""
    names = [name for bit, name in _FLAGS.items() if bits & bit]
    unknown = bits & ~sum(_FLAGS)
    return names + [f"bit {n}" for n in range(64) if unknown >> n & 1]


def peek_capsule(capsule: Any) -> CapsuleInfo:
    """Read a DLPack capsule without consuming it."""
    raw = _CapsuleGetName(capsule)
    name = raw.decode() if raw is not None else ""
    if name not in ("dltensor", "dltensor_versioned"):
        return CapsuleInfo(name=name, version=None, note=f"not a live DLPack capsule ({name!r})")
    ptr = _CapsuleGetPointer(capsule, raw)
    if name == "dltensor_versioned":
        managed = _DLManagedTensorVersioned.from_address(ptr)
        version = (int(managed.version.major), int(managed.version.minor))
        if version[0] != 1:
            return CapsuleInfo(
                name, version, note=f"unknown major version {version[0]}: fields not read"
            )
        flags = _flag_names(int(managed.flags))
        dl = managed.dl_tensor
    else:
        version, flags = None, []
        dl = _DLManagedTensor.from_address(ptr).dl_tensor
    ndim = int(dl.ndim)
    shape = tuple(int(dl.shape[i]) for i in range(ndim)) if ndim and dl.shape else ()
    strides = tuple(int(dl.strides[i]) for i in range(ndim)) if ndim and dl.strides else None
    if strides is None and ndim == 0:
        strides = ()
    return CapsuleInfo(
        name=name,
        version=version,
        flags=flags,
        device=(int(dl.device.device_type), int(dl.device.device_id)),
        dtype=_dtype_name(dl.dtype.code, dl.dtype.bits, dl.dtype.lanes),
        shape=shape,
        strides=strides,
        data_ptr=(dl.data or 0) + int(dl.byte_offset),
    )



# ------------------------------------------------------------------------------ protocols

_PROTOCOLS = (
    "__dlpack__",
    "__dlpack_device__",
    "__dlpack_c_exchange_api__",
    "__arrow_c_device_array__",
    "__arrow_c_array__",
    "__arrow_c_device_stream__",
    "__arrow_c_stream__",
    "__arrow_c_schema__",
    "__cuda_array_interface__",
    "__array_interface__",
    "__array__",
    "__array_namespace__",
)


def protocols(x: Any, errors: dict[str, str] | None = None) -> list[str]:
    """The exchange protocols ``x`` offers, plus ``"buffer"`` for the buffer protocol and
    ``"capsule"`` for a raw DLPack capsule. A protocol that is an attribute (e.g.
    ``__array_interface__``, ``__cuda_array_interface__``) counts only when reading it works on
    this object (a CPU torch tensor's ``__cuda_array_interface__`` raises); what it raised goes
    to ``errors``."""
    if is_capsule(x):
        return ["capsule"]
    out = []
    for p in _PROTOCOLS:
        attr = getattr(type(x), p, None)
        if attr is None and p not in getattr(x, "__dict__", {}):
            continue
        if attr is not None and callable(attr) and not isinstance(attr, property):
            out.append(p)
            continue
        try:
            getattr(x, p)
        except Exception as e:  # noqa: BLE001 - offered by the type, refused by this object
            if errors is not None:
                errors[p] = f"{type(e).__name__}: {e}"
            continue
        out.append(p)
    try:
        if _CheckBuffer(x):
            out.append("buffer")
    except Exception:  # noqa: BLE001
        pass
    return out


def producer_capsule(x: Any) -> tuple[CapsuleInfo | None, str | None]:
    """Ask ``x`` for a capsule the way dlbridge does (the newest version first, no arguments
    for old producers) and read it without consuming it. ``(info, None)`` or
    ``(None, error)``."""
    method = getattr(x, "__dlpack__", None)
    if method is None:
        return None, None
    try:
        try:
            cap = method(max_version=tuple(DLPACK_VERSION))
        except TypeError as e:
            if "keyword" not in str(e) and "argument" not in str(e):
                raise
            cap = method()
    except Exception as e:  # noqa: BLE001 - reported, not raised
        return None, f"{type(e).__name__}: {e}"
    if not is_capsule(cap):
        return None, f"__dlpack__ returned {type(cap).__name__}, not a capsule"
    return peek_capsule(cap), None


# ------------------------------------------------------------------------------ source facts


@dataclass
class Facts:
    """What the planner needs to know about a source."""

    kind: str
    library: str | None
    device: Device
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    itemsize: int
    readonly: bool
    data_ptr: int
    #: the import itself had to copy (realignment, Arrow chunks / bit-packed booleans): why
    import_copy: str | None = None

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def layout(self) -> nsmod.LayoutView:
        return nsmod.LayoutView(self.shape, self.strides, self.itemsize, self.data_ptr, self.size)

    def summary(self) -> str:
        flags = ", read-only" if self.readonly else ""
        return (
            f"{self.kind} {self.dtype} {self.shape} strides {self.strides} on {self.device}{flags}"
        )


def type_name(x: Any) -> str:
    t = type(x)
    mod = (t.__module__ or "").split(".")[0]
    return f"{mod}.{t.__name__}" if mod and mod != "builtins" else t.__name__


def facts_of_tensor(
    t: Tensor, kind: str, library: str | None, import_copy: str | None = None
) -> Facts:
    return Facts(
        kind=kind,
        library=library,
        device=t.device,
        dtype=t.dtype.name,
        shape=tuple(t.shape),
        strides=tuple(t.strides),
        itemsize=t.itemsize,
        readonly=bool(t.readonly),
        data_ptr=int(t.data_ptr),
        import_copy=import_copy,
    )


def facts_of_capsule(info: CapsuleInfo, kind: str) -> Facts:
    if info.dtype is None or info.device is None or info.shape is None:
        raise BufferError(f"cannot read the capsule: {info.note}")
    try:
        itemsize = DType(info.dtype).itemsize
    except ValueError as e:
        raise BufferError(f"unsupported DLPack dtype {info.dtype}") from e
    return Facts(
        kind=kind,
        library=None,
        device=Device(info.device),
        dtype=info.dtype,
        shape=info.shape,
        strides=info.strides if info.strides is not None else c_strides(info.shape),
        itemsize=itemsize,
        readonly=info.readonly,
        data_ptr=info.data_ptr or 0,
    )


def facts_of_own(ns: nsmod.Namespace, x: Any) -> Facts:
    """The facts of an array whose library reads them from its own attributes
    (``Namespace.reads_own_facts``: they hold even when its autograd or conj/neg state would
    make a DLPack export refuse). RuntimeError for an array without strided memory."""
    return Facts(library=ns.name, **ns.facts(x))


# ------------------------------------------------------------------------------ describe


def describe(x: Any) -> dict[str, Any]:
    """What dlbridge sees in ``x``, as a JSON-serialisable dict.

    Keys: ``type``; ``library`` (the namespace that owns ``x``, or None); ``protocols`` (the
    exchange protocols ``x`` offers: ``__dlpack__``, ``__arrow_c_array__``, ``buffer``,
    ``__array_interface__``, ``capsule``...); ``capsule`` (the DLPack capsule ``x`` returns when
    asked for DLPack ``DLPACK_VERSION``, read without consuming it: ``name``, ``version`` as
    ``[major, minor]`` or None for a legacy capsule, ``flags``: the names of the flags set, a
    bit DLPack 1.3 does not define as ``"bit N"``); ``capsule_version`` (the
    version the producer speaks: ``"1.3"``, ``"legacy"`` or None); ``device`` (``"cpu"``,
    ``"oneapi:0"``...), ``device_type``/``device_id`` (DLPack numbers); ``dtype``; ``shape``;
    ``strides`` (in elements); ``readonly``; ``c_contiguous``/``f_contiguous``; ``aligned`` (to
    the item size); ``data_ptr``; ``state`` (framework state DLPack cannot carry, each with its
    fix, e.g. torch's ``requires_grad``); ``errors`` (what refused, by step).

    Never consumes a capsule and never copies data (an import that would need a copy is
    reported in ``errors`` instead). Layout keys are None when nothing could be read.
    """
    out: dict[str, Any] = {
        "type": type_name(x),
        "library": None,
        "protocols": [],
        "capsule": None,
        "capsule_version": None,
        "device": None,
        "device_type": None,
        "device_id": None,
        "dtype": None,
        "shape": None,
        "strides": None,
        "readonly": None,
        "c_contiguous": None,
        "f_contiguous": None,
        "aligned": None,
        "data_ptr": None,
        "state": [],
        "errors": {},
    }
    out["protocols"] = protocols(x, out["errors"])
    ns = nsmod.owner(x)
    if ns is not None:
        out["library"] = ns.name
        try:
            out["state"] = [
                {"what": s.what, "fix": s.fix, "option": s.option, "copies": s.copies}
                for s in ns.state(x)
            ]
        except Exception as e:  # noqa: BLE001
            out["errors"]["state"] = f"{type(e).__name__}: {e}"

    facts: Facts | None = None
    cap: CapsuleInfo | None
    if is_capsule(x):
        info = peek_capsule(x)
        cap = info
    else:
        probe = x
        if ns is not None and ns.name == "torch" and getattr(x, "requires_grad", False):
            probe = x.detach()  # the capsule version torch speaks, not its autograd refusal
        cap, err = producer_capsule(probe)
        if err:
            out["errors"]["__dlpack__"] = err
    if cap is not None:
        out["capsule"] = {
            "name": cap.name,
            "version": list(cap.version) if cap.version else None,
            "flags": cap.flags,
        }
        if cap.note:
            out["capsule"]["note"] = cap.note
        out["capsule_version"] = "{}.{}".format(*cap.version) if cap.version else (
            "legacy" if cap.name == "dltensor" else None
        )

    if is_capsule(x):
        try:
            facts = facts_of_capsule(info, "capsule")
        except BufferError as e:
            out["errors"]["capsule"] = str(e)
    elif ns is not None and ns.reads_own_facts:
        try:
            facts = facts_of_own(ns, x)
        except RuntimeError as e:  # sparse or meta tensors: no strided memory to describe
            out["errors"]["layout"] = f"{type(e).__name__}: {e}"
    else:
        try:
            t = from_dlpack(ns.source(x) if ns is not None else x, copy=False)
            facts = facts_of_tensor(t, out["type"], out["library"])
            out["c_contiguous"] = bool(t.is_c_contiguous)
            out["f_contiguous"] = bool(t.is_f_contiguous)
        except Exception as e:  # noqa: BLE001 - reported, not raised
            out["errors"]["import"] = f"{type(e).__name__}: {e}"
            if cap is not None and cap.dtype is not None:
                try:
                    facts = facts_of_capsule(cap, out["type"])
                except BufferError:
                    facts = None
    if facts is not None:
        out.update(
            device=str(facts.device),
            device_type=facts.device.type,
            device_id=facts.device.id,
            dtype=facts.dtype,
            shape=list(facts.shape),
            strides=list(facts.strides),
            readonly=facts.readonly,
            aligned=facts.data_ptr % max(facts.itemsize, 1) == 0,
            data_ptr=facts.data_ptr,
        )
        if out["c_contiguous"] is None:
            out["c_contiguous"] = c_contiguous(facts.shape, facts.strides)
            out["f_contiguous"] = f_contiguous(facts.shape, facts.strides)
    return out


__all__ = ["CapsuleInfo", "Facts", "describe", "peek_capsule", "protocols"]
