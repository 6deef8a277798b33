"""The base of every namespace: :class:`Namespace`, :class:`State`, :class:`LayoutView`, the
DLPack device types and the device and dtype helpers the library modules share."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._native import Device, Tensor

# DLPack device types (dlpack.h)
CPU, CUDA, CUDA_HOST, OPENCL, VULKAN, METAL, VPI, ROCM, ROCM_HOST, EXT_DEV, CUDA_MANAGED, ONEAPI = (
    1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14,
)
# Which memory the host reads, and which dlbridge copies itself, is the Device's to say
# (Device.is_host_accessible, dlbridge_copies_from, dlbridge_copies_to): decided in Rust.

SUBBYTE = ("float4_", "float6_")
FLOAT8 = "float8"
BASIC_DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
)
SIXTY_FOUR_BIT = ("int64", "uint64", "float64", "complex128")


def device_of(x: Any) -> Device | None:
    """``x.__dlpack_device__()`` as a Device (None when ``x`` offers none)."""
    if isinstance(x, Tensor):
        return x.device
    method = getattr(x, "__dlpack_device__", None)
    if method is None:
        return None
    try:
        kind, ident = method()
        return Device((int(kind), int(ident)))
    except Exception:  # noqa: BLE001 - a producer that cannot say where its data is
        return None


def has_ml_dtypes() -> bool:
    return "ml_dtypes" in sys.modules or importlib.util.find_spec("ml_dtypes") is not None


# ---------------------------------------------------------------------------------- state


@dataclass(frozen=True)
class ImportRoute:
    """A way into a library other than its ``from_dlpack`` (see ``Namespace.routes``)."""

    #: what the plan says the import does
    text: str
    #: the import copies (counted; refused under ``copy=False``), and why, for the plan
    copies: bool = False
    why: str | None = None


@dataclass
class State:
    """Framework state of a source array that DLPack cannot carry, and how to resolve it.

    ``option`` names the :func:`dlbridge.convert` keyword that opts in to the fix (None: applied
    automatically, or ``refuse`` set: no fix dlbridge can apply); ``copies`` is what the fix
    costs.
    """

    what: str
    fix: str
    option: str | None
    copies: int
    apply: Callable[[Any], Any] | None
    refuse: bool = False


# ---------------------------------------------------------------------------------- base


class Namespace:
    """What dlbridge knows about one array library. Subclasses fill in the facts; the registry
    finds every subclass with a ``name`` in the package's modules."""

    name = ""
    module = ""
    #: other module names (``module.__name__``) that stand for this library as a target
    modules: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    pip = ""
    #: the place in the registry's order (``NAMES``, error messages, the order in which
    #: :func:`owner` asks): the libraries of the first release hold 1 to 14; a new one keeps
    #: this default and comes after them, by name
    rank = 100
    #: a read-only source can reach this library zero-copy and stay read-only (its arrays carry
    #: the flag or are immutable, and its from_dlpack accepts read-only data). False: a
    #: read-only source needs a copy under ``copy=None`` and is refused under ``copy=False``
    #: (C15, C16): never a writable alias.
    alias_readonly = True
    #: why not, for messages (when ``alias_readonly`` is False)
    readonly_why = ""
    #: arrays are immutable (JAX, Arrow): aliasing writable memory is worth a note
    immutable = False
    #: the library has arrays in host memory (``to_host`` returns its own arrays)
    has_host = True
    #: the type ``convert(..., to=this)`` returns (documentation)
    result = ""
    #: what the library calls its arrays, for messages
    noun = "array"
    #: the routes besides ``"dlpack"`` that :meth:`dtype_route` may name, each with the plan's
    #: wording of the import and whether it copies
    routes: dict[str, ImportRoute] = {}
    #: the planner reads this library's arrays from their own attributes (:meth:`facts`), not
    #: through a zero-copy import: their DLPack export refuses state the planner resolves first
    reads_own_facts = False
    #: the import a zero-copy plan names (empty: ``<name>.from_dlpack``)
    importer = ""

    def __init__(self) -> None:
        self._mod: Any = None
        self._installed: bool | None = None

    # discovery ------------------------------------------------------------------------
    def installed(self) -> bool:
        if self.module in sys.modules:
            return True
        if self._installed is None:
            try:
                self._installed = importlib.util.find_spec(self.module) is not None
            except (ImportError, ValueError):
                self._installed = False
        return self._installed

    def load(self) -> Any:
        if self._mod is None:
            self._mod = importlib.import_module(self.module)
        return self._mod

    def loaded(self) -> Any:
        """The module if it has been imported (by anyone), else None: an object cannot be one
        of this library's arrays unless the library is imported."""
        return sys.modules.get(self.module)

    # source role ----------------------------------------------------------------------
    def owns(self, x: Any) -> bool:
        """Is ``x`` an array of this library?"""
        return False

    def is_result(self, x: Any) -> bool:
        """Is ``x`` already what ``convert(..., to=this)`` returns (so it can be returned as
        is)?"""
        return self.owns(x)

    def device(self, x: Any) -> Device | None:
        return device_of(x)

    def state(self, x: Any) -> list[State]:
        """Framework state of ``x`` that must be resolved before a DLPack export."""
        return []

    def source(self, x: Any) -> Any:
        """The object to hand to ``dlbridge.from_dlpack`` for ``x``."""
        return x

    def facts(self, x: Any) -> dict[str, Any]:
        """``x``'s facts read from the library's own attributes (when ``reads_own_facts``):
        ``kind``, ``device``, ``dtype``, ``shape``, ``strides`` (in elements), ``itemsize``,
        ``readonly`` and ``data_ptr``. RuntimeError for an array without strided memory."""
        raise NotImplementedError

    def to_host(self, x: Any) -> Any:
        """An array of this library on the CPU with ``x``'s values (``x`` itself when it is
        there already). Only called when ``has_host``."""
        raise NotImplementedError

    # target role ----------------------------------------------------------------------
    def devices(self) -> list[Device]:
        """Devices this library has arrays on (for messages and the default)."""
        return [Device("cpu")]

    def can_hold(self, device: Device) -> bool:
        return device.is_host_accessible

    def dtype_route(self, dtype: str) -> str:
        """How a tensor of ``dtype`` reaches this library: ``"dlpack"`` (its from_dlpack),
        another route name the namespace implements, or ``"refuse: <why and the fix>"``."""
        if dtype in BASIC_DTYPES:
            return "dlpack"
        return f"refuse: {self.name} has no {dtype} dtype"

    def layout_problem(self, t: LayoutView) -> str | None:
        """Why this library cannot alias this layout (None: it can); a copy fixes it."""
        return None

    def shape_refusal(self, shape: tuple[int, ...]) -> str | None:
        """Why this library has no array of this shape at all (None: it has)."""
        return None

    def from_tensor(self, t: Tensor, route: str) -> Any:
        """Import ``t`` (already on a device this library holds, with a layout, dtype and flags
        it takes) zero-copy."""
        raise NotImplementedError

    def from_host(self, t: Tensor, device: Device, route: str) -> Any:
        """An array of this library on ``device`` copied from the host tensor ``t`` by the
        library's own transfer. Only namespaces that override it have one; for the others
        dlbridge (CUDA) or a library that reaches the device makes the copy."""
        raise NotImplementedError

    def copy_on_device(self, t: Tensor) -> Tensor | None:
        """A C-contiguous copy of ``t`` on its own (non-host) device made by this library, or
        None."""
        return None

    def device_hint(self) -> str:
        """A ``device=`` value that works for this library, for error messages."""
        devs = self.devices()
        return str(devs[0]) if devs else "cpu"

    def __repr__(self) -> str:
        return f"<dlbridge namespace {self.name}>"


@dataclass
class LayoutView:
    """The layout facts a namespace needs to decide whether it can alias data."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    itemsize: int
    data_ptr: int
    size: int


__all__ = [
    "BASIC_DTYPES", "CPU", "CUDA", "CUDA_HOST", "CUDA_MANAGED", "EXT_DEV",
    "FLOAT8", "ImportRoute", "LayoutView", "METAL", "Namespace", "ONEAPI", "OPENCL", "ROCM",
    "ROCM_HOST", "SIXTY_FOUR_BIT", "SUBBYTE", "State", "VPI", "VULKAN", "device_of",
    "has_ml_dtypes",
]
