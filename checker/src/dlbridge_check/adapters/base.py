"""The adapter protocol: :class:`Adapter`, the base of every checker adapter (dlbridge's own and
those of other packages), the :class:`Recipe` of a source array and its NumPy
:func:`reference`, what the checker :class:`Observed` of a result, and the helpers the adapters
share. ``docs/check-your-library.md`` documents the protocol for library authors."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dlbridge.libraries

from .. import refcapsule as rc


class Unsupported(Exception):
    """The library cannot express this case (dtype, layout, flag or argument)."""


# ----------------------------------------------------------------------------- recipes


@dataclass(frozen=True)
class Recipe:
    """How to build the source array: a C- or F-ordered base, then view operations.

    ``ops`` items: ``("T",)`` reverse the axes; ``("ix", (slice, ...))`` basic indexing;
    ``("broadcast", shape)`` a zero-stride view; ``("misalign",)`` data at an odd address;
    ``("shift8",)`` data 8 bytes past a 64-byte boundary (element-aligned, not 64-aligned).
    """

    dtype: str = "float64"
    shape: tuple[int, ...] = (3, 4)
    order: str = "C"
    ops: tuple = ()
    readonly: bool = False

    @property
    def plain(self) -> bool:
        """No view operations: what libraries without strides (JAX) can express."""
        return not self.ops and (self.order == "C" or len([n for n in self.shape if n > 1]) <= 1)


ALIGN = 64  # source buffers start on a 64-byte boundary: results do not depend on the allocator


def aligned_empty(
    shape: tuple[int, ...], dt: np.dtype, order: str = "C", shift: int = 0
) -> np.ndarray:
    """An uninitialised array whose first byte is ``shift`` bytes past a 64-byte boundary."""
    n = math.prod(shape) * dt.itemsize
    raw = np.empty(n + ALIGN + shift, dtype=np.uint8)
    start = (-raw.__array_interface__["data"][0]) % ALIGN + shift
    flat = raw[start : start + n].view(dt)
    if order == "F":
        return flat.reshape(tuple(reversed(shape))).T if shape else flat.reshape(shape)
    return flat.reshape(shape)


def det_values(dtype: str, shape: tuple[int, ...], order: str = "C", shift: int = 0) -> np.ndarray:
    """Deterministic, distinct-ish values that every dtype represents exactly, in a 64-byte
    aligned buffer (plus ``shift`` bytes)."""
    dt = rc.np_dtype(dtype)
    if dt.name != dtype:  # the raw-bytes stand-in of refcapsule.np_dtype: no ml_dtypes
        raise Unsupported(f"{dtype} needs ml_dtypes (pip install ml_dtypes)")
    n = math.prod(shape)
    v = np.arange(n, dtype=np.int64)
    if dtype == "bool":
        a = (v % 3) == 0
    elif dtype.startswith("complex"):
        a = ((v % 50) - 20).astype(np.float64) + 1j * ((v % 7) - 3).astype(np.float64)
    elif dtype.startswith("uint"):
        a = (v * 7 + 3) % 250
    elif dtype.startswith("int"):
        a = ((v * 7 + 3) % 120) - 60
    else:  # float16/32/64, bfloat16, float8: small halves are exact everywhere
        a = (((v * 5 + 3) % 16) - 8).astype(np.float64) * 0.5
    out = aligned_empty(shape, dt, order, shift)
    out[...] = np.asarray(a).astype(dt).reshape(shape, order="F" if order == "F" else "C")
    return out


def apply_ops(x: np.ndarray, ops: tuple) -> np.ndarray:
    for op in ops:
        if op[0] == "T":
            x = x.T
        elif op[0] == "ix":
            x = x[op[1]]
        elif op[0] == "broadcast":
            x = np.broadcast_to(x, op[1])
        elif op[0] in ("misalign", "shift8"):
            y = aligned_empty(x.shape, x.dtype, "C", 1 if op[0] == "misalign" else 8)
            y[...] = x
            x = y
        else:  # pragma: no cover
            raise ValueError(op)
    return x


def reference(recipe: Recipe) -> np.ndarray:
    """The NumPy array every producer must reproduce (values, dtype, shape and layout)."""
    base = det_values(recipe.dtype, recipe.shape, recipe.order)
    x = apply_ops(base, recipe.ops)
    if recipe.readonly and x.flags.writeable:
        x = x.view()
        x.flags.writeable = False
    return x


def require_layout(info: rc.CapsuleInfo, ref: np.ndarray, recipe: Recipe) -> None:
    """Unsupported unless the array ``info`` describes (its DLPack export) has the dtype, shape,
    strides and address of ``ref``, the case's reference: a case means nothing on another."""
    if info.dtype != ref.dtype.name:
        raise Unsupported(f"the array is {info.dtype}, not {ref.dtype.name}")
    if tuple(info.shape) != ref.shape:
        raise Unsupported(f"the array has shape {tuple(info.shape)}, not {ref.shape}")
    want = tuple(s // ref.itemsize for s in ref.strides) if ref.itemsize else ()
    got = info.element_strides
    if ref.size and any(n > 1 and g != w for n, g, w in zip(ref.shape, got, want)):
        raise Unsupported(f"layout not expressible: the array has strides {got}, not {want}")
    if any(op[0] in ("misalign", "shift8") for op in recipe.ops):  # the point is the address
        if info.data_ptr % ALIGN != ref.__array_interface__["data"][0] % ALIGN:
            raise Unsupported("the case is about the data's address, and this array has another")


# ----------------------------------------------------------------------------- observations


@dataclass
class Observed:
    """What the checker could see of a result array."""

    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    values: np.ndarray | None = None  # C-order copy (host) or None
    ptr: int | None = None  # address of the first element
    writable: bool | None = None  # None: the library cannot say
    device: tuple[int, int] | None = None
    strides: tuple[int, ...] | None = None  # in elements
    is_copied: bool | None = None
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # spec violations seen while reading
    kind: str = ""


def dlpack_device(x: Any) -> tuple[int, int] | None:
    try:
        d = x.__dlpack_device__()
        return (int(d[0]), int(d[1]))
    except Exception:  # noqa: BLE001
        return None


def from_capsule_info(obs: Observed, info: rc.CapsuleInfo) -> None:
    obs.values = info.values
    if obs.dtype is None:
        obs.dtype = info.dtype
    if obs.shape is None:
        obs.shape = info.shape
    if obs.strides is None:
        obs.strides = info.element_strides


def observe_numpy(y: np.ndarray) -> Observed:
    return Observed(
        kind="numpy.ndarray",
        dtype=y.dtype.name,
        shape=tuple(y.shape),
        values=np.array(y, copy=True, order="C"),
        ptr=y.__array_interface__["data"][0] if y.size else None,
        writable=bool(y.flags.writeable),
        device=(1, 0),
        strides=tuple(s // y.itemsize for s in y.strides) if y.itemsize else None,
    )


def buffer_writable(y: Any) -> bool | None:
    """Whether the buffer protocol exports ``y`` writable; None when ``y`` has no buffer."""
    try:
        with memoryview(y) as view:
            return not view.readonly
    except (TypeError, BufferError, ValueError):
        return None


def observe_dlpack(y: Any) -> Observed:
    """Read any array through its own DLPack export. Writability comes from a versioned
    capsule's READ_ONLY flag, else from the buffer protocol, else it stays unknown."""
    obs = Observed(kind=f"{type(y).__module__}.{type(y).__name__}")
    info = rc.read_object(y)
    from_capsule_info(obs, info)
    obs.ptr = info.data_ptr if info.size else None
    obs.device = info.device
    obs.writable = not info.readonly if info.versioned else buffer_writable(y)
    return obs


def observe_capsule_of(y: Any, kind: str, writable: bool | None) -> Observed:
    """Read a result through its own DLPack export (the reference consumer)."""
    obs = Observed(kind=kind)
    info = rc.read_object(y)
    from_capsule_info(obs, info)
    obs.ptr = info.data_ptr if info.size else None
    obs.device = info.device
    obs.writable = writable
    return obs


class RefResult:
    """What the reference consumer returns: the capsule's description and a copy."""

    def __init__(self, info: rc.CapsuleInfo, problems: list[str]) -> None:
        self.info = info
        self.problems = problems


# ----------------------------------------------------------------------------- adapters


class Adapter:
    """What the checker needs of an array library: the adapter protocol.

    A library's adapter subclasses this class, sets :attr:`name` and :attr:`module`, and
    overrides what its library does: :meth:`make` (the producer role: build the library's
    array for a :class:`Recipe`) and :meth:`from_dlpack` (the consumer role). Everything else
    has a default that reads arrays through their DLPack export. A method raises
    :class:`Unsupported` for what the library cannot express: that counts as unsupported,
    never as a failure.

    A package registers its adapter with an entry point in the group ``dlbridge.check``
    (``mylib = "mylib._check:MyLibAdapter"``), or a user names it on the command line as
    ``module:object``. The checker instantiates the class with no arguments in each of its
    worker processes, so an adapter must not import its library at module level: :meth:`load`
    imports it when a worker first needs it.

    The checker's own adapters use the same protocol. Those of libraries dlbridge converts to
    name the library in the class statement (``class TorchLib(Adapter, library="torch")``) and
    take the name, the module, the pip spec and the order from dlbridge's published data
    (:func:`dlbridge.libraries.library`), never dlbridge's conclusions (see
    :mod:`dlbridge_check.adapters`).
    """

    #: the library's name in the checker's reports and on its command line
    name: str = ""
    #: the module :meth:`load` imports (``import_module``)
    module: str = ""
    #: the distribution whose version the reports give (default: the module's name)
    dist: str = ""
    #: several distributions that install the module (the first installed one names the version)
    dists: tuple[str, ...] = ()
    #: how to install the library, for the reports' hints
    pip: str = ""
    #: does the library make arrays (:meth:`make`) and import them (:meth:`from_dlpack`)?
    producer: bool = True
    consumer: bool = True
    #: part of the checker itself (always available)
    builtin: bool = False
    #: True when results of ``consume`` can be read-only (so aliasing read-only data is safe)
    readonly_results: bool = False
    #: device types the consumer can hold without copying to the host
    devices: frozenset[int] = frozenset({1})
    #: can the consumer pass ``device=`` / ``copy=``?
    takes_kwargs: bool = True
    #: importing the library takes seconds: the checker runs its consumer units in one worker
    slow_import: bool = False
    #: one line for the reports' list of libraries (:meth:`described` adds what dlbridge does
    #: with the producer's legacy capsules)
    note: str = ""
    #: the producer exports legacy (unversioned) DLPack capsules, which cannot carry the
    #: read-only flag: dlbridge imports them writable only for the packages of its published
    #: table (:data:`dlbridge.libraries.LEGACY_CAPSULES_WRITABLE`)
    legacy_capsules: bool = False
    #: the place in the checker's order (reports, ``--libraries`` runs): dlbridge's ``rank`` of
    #: the library for an adapter of one (one order for ``convert``'s list and the checker's);
    #: the others set their own, and a new one keeps this default and comes after them, by
    #: name (the built-in ones always last)
    rank: int = 100
    #: top-level modules of the types of the arrays that :meth:`read_result` reads (a consumer
    #: may return another library's array: results are read by their type, not by who made them)
    result_modules: tuple[str, ...] = ()

    def __init_subclass__(cls, library: str | None = None, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if library is not None:  # dlbridge's published data of the library, strings only
            lib = dlbridge.libraries.library(library)
            cls.name, cls.module, cls.pip, cls.rank = lib.name, lib.module, lib.pip, lib.rank
            cls.dist = lib.distribution

    def __init__(self) -> None:
        self._mod: Any = None

    def described(self) -> str:
        """The note, with the legacy-capsule clause generated from dlbridge's published table
        (never written by hand, so it cannot go stale when the table changes)."""
        if not self.legacy_capsules:
            return self.note
        package = self.module.split(".")[0]
        if package in dlbridge.libraries.LEGACY_CAPSULES_WRITABLE:
            clause = "its legacy capsules import writable (dlbridge knows its arrays' memory)"
        else:
            clause = "its legacy capsules import read-only (dlbridge's rule for unknown packages)"
        return f"{self.note}; {clause}" if self.note else clause

    # discovery
    def installed(self) -> bool:
        if self.builtin:
            return True
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False

    def version(self) -> str:
        for dist in self.dists or (self.dist or self.module,):
            try:
                return importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
        return str(getattr(self.load(), "__version__", "?"))

    def load(self) -> Any:
        if self._mod is None:
            self._mod = importlib.import_module(self.module)
            self.setup()
        return self._mod

    def setup(self) -> None:
        """Called once after the first import."""

    #: the cases' modes this library's own state makes (a torch tensor's conjugate bit...),
    #: built by :meth:`in_mode`; the consumer receives the array as it is
    modes: frozenset[str] = frozenset()
    #: of :attr:`modes`, those whose array is made afresh for each unit (an exchange changes it)
    fresh_modes: frozenset[str] = frozenset()

    def in_mode(self, mode: str, x: Any, ref: np.ndarray) -> tuple[Any, np.ndarray]:
        """The array ``x`` (made by :meth:`make` from ``ref``) in the state ``mode`` of
        :attr:`modes` names, and the values a consumer must see."""
        raise Unsupported(f"{self.name} has no mode {mode}")

    # producer side
    def make(self, recipe: Recipe, ref: np.ndarray) -> Any:
        """The library's array with the values, dtype and layout of ``ref`` (the
        :func:`reference` of ``recipe``), or :class:`Unsupported`."""
        raise Unsupported(f"{self.name} is not a producer")

    def src_readonly(self, x: Any) -> bool:
        """Is the producer's array read-only in truth (must not be written through any alias)?
        The truth, not what the library's export says: the checker compares the two. The
        default, False, suits libraries whose arrays are always writable."""
        return False

    def src_ptr(self, x: Any) -> int | None:
        """The address of the array's first element (default: from its DLPack export)."""
        info = rc.probe(x)
        return info.data_ptr if info is not None else None

    def src_device(self, x: Any) -> tuple[int, int]:
        """The array's DLPack device (default: ``__dlpack_device__``, else the CPU)."""
        return dlpack_device(x) or (1, 0)

    # consumer side
    def device_arg(self, which: str) -> Any:
        """The library's spelling of a device: ``"cpu"`` or ``"native"`` (its default)."""
        if which == "cpu":
            return "cpu"
        raise Unsupported(f"{self.name} has no default device object")

    def from_dlpack(self, obj: Any, **kw: Any) -> Any:
        """The library's DLPack import of ``obj`` (``device=`` and ``copy=`` when given)."""
        raise Unsupported(f"{self.name} is not a consumer")

    def consume(self, obj: Any, *, device: str | None = None, copy: bool | None = None) -> Any:
        kw: dict[str, Any] = {}
        if device is not None:
            kw["device"] = self.device_arg(device)
        if copy is not None:
            kw["copy"] = copy
        if kw and not self.takes_kwargs:
            raise Unsupported(f"{self.name}'s from_dlpack has no device= / copy= arguments")
        return self.from_dlpack(obj, **kw)

    def reduce(self, y: Any) -> complex:
        """Sum with the library that owns the result (a consumer may return another library's
        array)."""
        if isinstance(y, np.ndarray):
            return complex(np.sum(y))
        return self.native_reduce(y)

    def native_reduce(self, y: Any) -> complex:
        """The library's own sum of one of its arrays (optional)."""
        raise Unsupported(f"no reduction for {self.name}")

    @staticmethod
    def read_result(y: Any) -> Observed:
        """What the checker sees of ``y``, an array of one of ``result_modules`` (default: what
        its DLPack export says, see :func:`observe_dlpack`)."""
        return observe_dlpack(y)

    def __repr__(self) -> str:
        return f"<{self.name}>"


def ops_view(x: Any, recipe: Recipe, *, transpose, index, broadcast=None) -> Any:
    """Apply the recipe's view operations with the library's own view functions."""
    for op in recipe.ops:
        if op[0] == "T":
            x = transpose(x)
        elif op[0] == "ix":
            x = index(x, op[1])
        elif op[0] == "broadcast" and broadcast is not None:
            x = broadcast(x, op[1])
        else:
            raise Unsupported(f"not expressible: {op[0]}")
    return x
