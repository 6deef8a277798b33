from typing import Any, Literal, overload

from ._native import DLPACK_VERSION as DLPACK_VERSION
from ._native import Device as Device
from ._native import DType as DType
from ._native import NoProtocolError as NoProtocolError
from ._native import Tensor as Tensor
from ._native import __version__ as __version__
from ._native import copyto as copyto
from ._native import from_arrow as from_arrow
from ._native import from_dlpack as from_dlpack
from ._native import to_shared as to_shared
from .plan import Plan as Plan

__all__ = [
    "DLPACK_VERSION",
    "DType",
    "Device",
    "NoProtocolError",
    "Plan",
    "Tensor",
    "__version__",
    "convert",
    "copyto",
    "describe",
    "explain",
    "from_arrow",
    "from_dlpack",
    "to_host",
    "to_memoryview",
    "to_numpy",
    "to_shared",
]

@overload
def convert(
    x: Any,
    to: Any,
    /,
    *,
    device: Any = None,
    copy: bool | None = None,
    detach: bool = False,
    resolve: bool = False,
    report: Literal[False] = False,
) -> Any:
    """An array of library ``to`` (a module or a name: ``numpy``, ``"np"``, ``torch``...; any
    of ``dlbridge.namespaces.NAMES``, which ``help(dlbridge.convert)`` lists) with the values
    of ``x``, on ``device`` (anything :class:`Device` takes; None: where ``x`` is), copied only
    when needed (``copy=None``), always (``True``) or never (``False``: BufferError instead).
    Read-only or immutable sources never become writable aliases; ``detach=True`` /
    ``resolve=True`` opt in to resolving torch's autograd / conj / neg state.
    """

@overload
def convert(
    x: Any,
    to: Any,
    /,
    *,
    device: Any = None,
    copy: bool | None = None,
    detach: bool = False,
    resolve: bool = False,
    report: Literal[True],
) -> tuple[Any, Plan]:
    """``report=True``: ``(result, plan)``, the :class:`Plan` as executed (``plan.copies`` is
    how many times the data was copied; 0: the result shares ``x``'s memory)."""

def explain(
    x: Any,
    to: Any,
    /,
    *,
    device: Any = None,
    copy: bool | None = None,
    detach: bool = False,
    resolve: bool = False,
) -> Plan:
    """The :class:`Plan` ``convert`` would follow, without running it; an impossible plan is
    returned (``possible=False``, ``error``, ``reason``), not raised."""

def describe(x: Any) -> dict[str, Any]:
    """What dlbridge sees in ``x`` as a JSON-serialisable dict: ``protocols`` offered,
    ``capsule`` / ``capsule_version`` (the DLPack version the producer speaks), ``device``,
    ``dtype``, ``shape``, ``strides`` (elements), ``readonly``, contiguity, ``state``
    (framework state DLPack cannot carry) and ``errors``. Never consumes a capsule."""

def to_numpy(x: Any, *, copy: bool | None = None) -> Any:
    """A host NumPy array with ``x``'s values, from any library on any device
    (``convert(x, numpy, device="cpu", copy=copy)``)."""

def to_memoryview(x: Any, *, copy: bool | None = None) -> memoryview:
    """A memoryview of ``x``'s values in host memory (read-only when ``x`` is); no NumPy
    needed."""

def to_host(x: Any) -> Any:
    """``x`` on the host: an array of its own library where it has host arrays, NumPy
    otherwise; ``x`` itself when it is already there."""
