"""``dlbridge.convert`` and ``dlbridge.explain``: an array of library A to library B."""

from __future__ import annotations

import inspect
import textwrap
from typing import Any, Literal, overload

from . import namespaces as nsmod
from .plan import Plan, Request, build


@overload
def convert(
    x: Any, to: Any, /, *, device: Any = ..., copy: bool | None = ..., detach: bool = ...,
    resolve: bool = ..., report: Literal[False] = ...,
) -> Any: ...
@overload
def convert(
    x: Any, to: Any, /, *, device: Any = ..., copy: bool | None = ..., detach: bool = ...,
    resolve: bool = ..., report: Literal[True],
) -> tuple[Any, Plan]: ...


def convert(
    x: Any,
    to: Any,
    /,
    *,
    device: Any = None,
    copy: bool | None = None,
    detach: bool = False,
    resolve: bool = False,
    report: bool = False,
) -> Any:
    """An array of library ``to`` with the values of ``x``, on ``device``, copied or not as
    asked, never silently wrong.

    ``x``: any array dlbridge can import (a DLPack producer or capsule, the Arrow PyCapsule
    interface, the buffer protocol, ``__array_interface__``). ``to``: the target library, as a
    module (``numpy``, ``jax.numpy``...) or its name (``"numpy"``, ``"np"``, ``"torch"``...):
    one of ``dlbridge.namespaces.NAMES``, which ``help(dlbridge.convert)`` lists at its end with
    the modules that stand for each.

    The path is the best one for the pair (see :func:`explain` for it, without running it):
    ``x`` itself when it already is such an array where it was asked; else a zero-copy DLPack
    hand-over when the target can take the dtype, layout, device and flags; else first the copy
    the target needs: a C-order copy for consumers that cannot take the strides (torch:
    negative; JAX: non-compact or not 64-byte aligned; Arrow: gaps), a copy of read-only or
    immutable data (read-only NumPy, mmap, JAX, Arrow) for targets that could write to it
    (torch, tvm_ffi, TensorFlow, and JAX's legacy capsules, which cannot carry the flag), a
    transfer to another device.

    ``device``: where the result lives: ``None`` keeps the data where it is, which the target
    must be able to hold (else BufferError naming the ``device=`` to pass: e.g. ``"cpu"`` for
    NumPy and data on a GPU or SYCL device, a ``"oneapi"`` device for dpnp and host data). A
    device is anything ``dlbridge.Device`` parses (``"cpu"``, ``"cuda:1"``, ``(14, 0)``, a
    torch / JAX / dpnp / tvm-ffi device, an object with ``__dlpack_device__``). A device-to-host
    copy is asked of the producer first; a
    host-to-device copy is made by the target library (the producer is never asked for the
    target's device); device to device is staged through the host when no library copies
    directly.

    ``copy``: ``None`` copies only when needed; ``True`` always returns an independent,
    writable array; ``False`` never copies: BufferError when any copy would be needed (never a
    hidden copy: when the target was expected to alias the data, the result's address is
    checked).

    ``detach``: a torch tensor that requires grad is refused (BufferError naming
    ``.detach()``) unless ``detach=True``, which exports ``x.detach()`` (no copy; the result
    is not tracked by autograd). ``resolve``: a torch tensor with its conjugate or negative
    bit set is refused (naming ``.resolve_conj()`` / ``.resolve_neg()``) unless
    ``resolve=True``, which resolves it (a copy). JAX arrays still being computed are waited
    for.

    ``report=True`` returns ``(result, plan)``: the :class:`Plan` as executed, whose
    ``copies`` says how many times the data was copied (0: the result shares ``x``'s memory).

    Raises BufferError when the data cannot be exchanged as asked (the message names the fix),
    TypeError when ``x`` offers no exchange protocol or ``device`` is no device object,
    ValueError for a bad ``to``, ``device`` or ``copy``, ImportError when the target library is
    not installed.
    """
    route = build(Request(x, to, device, copy, detach, resolve, run=True))
    result, plan = route.execute()
    return (result, plan) if report else result


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
    """The plan :func:`convert` would follow for the same arguments, without running it.

    Returns a :class:`Plan`: ``possible``, ``steps``, ``copies``, ``reason`` (and ``error``,
    the exception ``convert`` would raise, for an impossible plan, which is returned, not
    raised); ``print(plan)`` shows it. Inspecting ``x`` imports it zero-copy (a raw DLPack
    capsule is only read, never consumed); the data is never copied, except when importing it
    at all needs a copy (several Arrow chunks, bit-packed booleans, misaligned data without
    ``__dlpack__``). ValueError for a bad ``to``, ``device`` or ``copy``.
    """
    return build(Request(x, to, device, copy, detach, resolve)).plan


def _targets() -> str:
    """The paragraph that ends ``convert``'s docstring: every library of the registry and the
    modules that stand for it (a library's module in ``dlbridge.namespaces`` adds it)."""
    spellings = []
    for name in nsmod.NAMES:
        ns = nsmod.get(name)
        modules = dict.fromkeys((name, ns.module, *ns.modules))  # in order, once each
        spellings.append(" / ".join(f"``{m}``" for m in modules))
    return textwrap.fill(f"Targets: {', '.join(spellings)}.", width=96, break_on_hyphens=False)


if convert.__doc__ is not None:  # None under python -OO
    convert.__doc__ = f"{inspect.cleandoc(convert.__doc__)}\n\n{_targets()}\n"


__all__ = ["Plan", "convert", "explain"]


def _copied_by_library(t: Any, *, device: Any = None, copy: bool | None = None) -> Any:
    """What ``Tensor.to_device`` and ``Tensor.copy`` (in ``_native``) hand over for memory
    dlbridge cannot copy itself (oneAPI...): ``convert(t, "dlbridge", ...)``, so that the
    library that owns the memory makes the copy. The package registers it with ``_native`` at
    import."""
    return convert(t, "dlbridge", device=device, copy=copy)
