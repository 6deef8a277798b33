"""The plan behind :func:`dlbridge.convert`: which path, which copies, and why.

:func:`build` inspects the source (a zero-copy import; a raw capsule is only read, never
consumed, unless the plan is to be run), asks the target's namespace what it can take, and
returns a :class:`Plan` together with the steps that carry it out. :func:`dlbridge.explain`
returns the plan; :func:`dlbridge.convert` runs the steps, so the two never disagree.

The order of decisions, for a source ``x`` and a target library ``T``:

1. ``x`` is already a ``T`` array where it was asked to be and no copy is asked for: ``x``.
2. Framework state DLPack cannot carry (torch ``requires_grad``, conjugate and negative bits,
   JAX arrays still computing): resolved when the caller opted in (``detach=``, ``resolve=``)
   or automatically when harmless, else refused naming the fix.
3. The dtype: ``T`` must have it (C25, C27: a BufferError, never a silent reinterpretation).
4. The device: ``device=None`` keeps the data where it is, which ``T`` must be able to hold
   (C36: a CPU-only target of device data is a BufferError naming ``device="cpu"``); another
   device is a copy (C37, C38: the producer is asked for the host copy, the target library makes
   the host-to-device copy), staged through the host when no library copies directly.
5. The layout: a contiguous copy for consumers that cannot take it (torch: negative strides,
   C1; JAX: non-compact strides or data not 64-byte aligned, C40; Arrow: gaps).
6. Read-only: a read-only or immutable source into a target that cannot keep it read-only
   (torch, tvm_ffi, JAX's legacy capsules) is copied (C15, C16).
7. ``copy=True``: at least one copy. ``copy=False``: any copy above is a BufferError instead.
8. The target's import, zero-copy; when dlbridge expected it to alias, the result's address is
   checked, so a consumer's hidden copy is refused under ``copy=False`` and counted otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import namespaces as nsmod
from ._layout import c_strides
from ._native import Device, NoProtocolError, Tensor, _copy_decision, from_dlpack
from .describe import (
    Facts,
    facts_of_capsule,
    facts_of_own,
    facts_of_tensor,
    is_capsule,
    peek_capsule,
    protocols,
    type_name,
)


@dataclass
class Plan:
    """How :func:`dlbridge.convert` moves an array to a target library.

    ``possible``: whether it can (an impossible plan says why in ``reason`` and names the
    exception ``convert`` raises in ``error``). ``steps``: what happens, in order. ``copies``:
    how many times the data is copied (0: the result aliases the source). ``reason``: why this
    path (or why none). ``source`` / ``target``: what goes in and out; ``device``: where the
    result lives; ``notes``: things worth knowing that change nothing (e.g. an immutable result
    aliasing writable memory).

    ``str(plan)`` is a readable summary; :meth:`as_dict` a JSON-serialisable dict. A plan
    returned by ``convert(..., report=True)`` records what was actually done.
    """

    source: str
    target: str
    possible: bool
    steps: list[str]
    copies: int
    reason: str
    device: str | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def zero_copy(self) -> bool:
        """True when the result shares the source's memory (a possible plan with no copy)."""
        return self.possible and self.copies == 0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        where = f" on {self.device}" if self.device else ""
        lines = [f"{self.source} -> {self.target}{where}"]
        lines += [f"  {i}. {s}" for i, s in enumerate(self.steps, 1)]
        if self.possible:
            what = (
                "zero-copy"
                if self.copies == 0
                else f"{self.copies} cop{'y' if self.copies == 1 else 'ies'}"
            )
            lines.append(f"  => {what}: {self.reason}")
        else:
            lines.append(f"  => impossible ({self.error}): {self.reason}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _type_error_kind(e: TypeError) -> type[TypeError]:
    """The exception type to raise for an import's TypeError: NoProtocolError (also an
    AttributeError) stays what it is, any other TypeError is a TypeError."""
    return NoProtocolError if isinstance(e, NoProtocolError) else TypeError


class Impossible(Exception):
    """Raised inside the planner: the conversion cannot be made as asked."""

    def __init__(self, error: type[BaseException], message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass
class Ctx:
    """What the steps work on at run time."""

    obj: Any  # the source object (after state fixes); None once consumed
    tensor: Tensor | None = None  # the data as a dlbridge Tensor
    result: Any = None
    finished: bool = False


@dataclass
class Step:
    text: str
    copies: int
    #: runs the step; returns the number of copies actually made, or None for "as planned"
    run: Callable[[Ctx], int | None]


def _ok(_: Ctx) -> None:
    return None


@dataclass
class Route:
    """A plan and the steps that carry it out."""

    plan: Plan
    steps: list[Step]
    ctx: Ctx
    error: type[BaseException] | None = None

    def execute(self) -> tuple[Any, Plan]:
        """Run the steps; the result and the plan as executed."""
        if not self.plan.possible:
            raise (self.error or BufferError)(self.plan.reason)
        done, copies = [], 0
        for step in self.steps:
            made = step.run(self.ctx)
            n = step.copies if made is None else made
            copies += n
            text = step.text
            if made is not None and made != step.copies:
                made_text = f"{made} cop{'y' if made == 1 else 'ies'} made"
                text = f"{text} [{'skipped: not needed' if made == 0 else made_text}]"
            done.append(text)
            if self.ctx.finished:
                break
        executed = dataclasses.replace(
            self.plan, steps=done, copies=copies, notes=list(self.plan.notes)
        )
        if copies != self.plan.copies and copies > 0 and self.plan.copies == 0:
            executed.reason = (
                f"{self.plan.reason}; but {self.plan.target} copied the data on import"
            )
        return self.ctx.result, executed


# ------------------------------------------------------------------------------ helpers



#: pyarrow's integer and float array classes, which the import reads through their own
#: ``__dlpack__`` (protocols.rs decides the same per type).
_PYARROW_DLPACK = frozenset({
    "Int8Array", "Int16Array", "Int32Array", "Int64Array", "UInt8Array", "UInt16Array",
    "UInt32Array", "UInt64Array", "HalfFloatArray", "FloatArray", "DoubleArray",
})


def _via(x: Any) -> str:
    """Which protocol dlbridge's import takes for ``x`` (its documented order; by the type's
    attributes only: this names the path, it does not probe it)."""
    if isinstance(x, Tensor):
        return "already one"
    if is_capsule(x):
        return "its DLPack capsule"
    t = type(x)
    if t.__module__ == "pyarrow.lib" and t.__name__ in _PYARROW_DLPACK:
        return "pyarrow's own __dlpack__ (the Arrow C interface if it refuses, e.g. nulls)"
    for p in (
        "__arrow_c_device_array__",
        "__arrow_c_array__",
        "__arrow_c_device_stream__",
        "__arrow_c_stream__",
    ):
        if hasattr(t, p):
            return f"the Arrow C interface ({p})"
    if hasattr(t, "__dlpack__"):
        return "DLPack (__dlpack__)"
    if "buffer" in protocols(x):
        return "the buffer protocol"
    return "__array_interface__"


def result_ptr(y: Any) -> int | None:
    """The address of the first element of a converted array (None when unknown)."""
    if isinstance(y, Tensor):
        return int(y.data_ptr)
    try:
        ns = nsmod.owner(y)  # read it the way dlbridge imports it (a pandas Series: to_numpy())
        return int(from_dlpack(ns.source(y) if ns is not None else y, copy=False).data_ptr)
    except Exception:  # noqa: BLE001 - a result dlbridge cannot re-import: no check
        return None


def _as_tensor(obj: Any) -> Tensor:
    return obj if isinstance(obj, Tensor) else from_dlpack(obj)


def _to_host(ctx: Ctx, src: Device) -> tuple[Tensor, int]:
    """Device-to-host copy: the producer is asked first (it knows its memory), dlbridge copies
    CUDA itself when the producer cannot, and a library that can read the device (dpnp for
    oneAPI) is asked when the source is a bare Tensor or capsule. Returns the host tensor and
    the copies made: a producer's copy of read-only data can come back flagged read-only (dpnp
    0.20 keeps READ_ONLY on its IS_COPIED export, and dlbridge keeps the flag), and a copy must
    be writable, so such a copy is copied once more on the host."""
    source = ctx.obj if ctx.obj is not None else ctx.tensor
    try:
        t = from_dlpack(source, device="cpu", copy=True)
    except BufferError:
        helper = nsmod.device_helper(src)
        if helper is None:
            raise
        tensor = ctx.tensor if ctx.tensor is not None else _as_tensor(source)
        t = from_dlpack(helper.from_tensor(tensor, "dlpack"), device="cpu", copy=True)
    if t.readonly:
        return t.copy(), 2
    return t, 1


def _copy_on_device(ctx: Ctx, dev: Device) -> Tensor:
    """A copy on the data's own non-host device: asked of the producer, then of a library that
    can copy on that device."""
    if ctx.obj is not None and not isinstance(ctx.obj, Tensor):
        try:
            t = from_dlpack(ctx.obj, copy=True)
            if t.device == dev:
                return t
        except BufferError:
            pass
    if dev.dlbridge_copies_from:
        return from_dlpack(ctx.tensor, copy=True)
    helper = nsmod.device_helper(dev)
    if helper is None:
        raise BufferError(f"no installed library can copy data on {dev}")
    assert ctx.tensor is not None  # imported before any copy is planned
    out = helper.copy_on_device(ctx.tensor)
    assert out is not None
    return out


# ------------------------------------------------------------------------------ the planner


class _Builder:
    def __init__(self, source: str, target: nsmod.Namespace) -> None:
        self.source = source
        self.target = target
        self.steps: list[Step] = []
        self.reasons: list[str] = []
        self.notes: list[str] = []
        self.device: Device | None = None
        self.summary: str | None = None  # the source, once inspected

    @property
    def copies(self) -> int:
        return sum(s.copies for s in self.steps)

    def add(
        self,
        text: str,
        run: Callable[[Ctx], int | None] = _ok,
        copies: int = 0,
        why: str | None = None,
    ) -> None:
        self.steps.append(Step(text, copies, run))
        if why:
            self.reasons.append(why)

    def plan(self) -> Plan:
        if self.copies == 0:
            reason = self.reasons[0] if self.reasons else (
                f"{self.target.name} takes this dtype, layout, device and flags as they are"
            )
        else:
            reason = "; ".join(dict.fromkeys(self.reasons)) or "a copy is needed"
        return Plan(
            source=self.source,
            target=self.target.name,
            possible=True,
            steps=[s.text for s in self.steps],
            copies=self.copies,
            reason=reason,
            device=str(self.device) if self.device is not None else None,
            notes=self.notes,
        )

    def impossible(self, e: Impossible) -> Plan:
        return Plan(
            source=self.source,
            target=self.target.name,
            possible=False,
            steps=[s.text for s in self.steps],
            copies=0,
            reason=e.message,
            device=None,
            error=e.error.__name__,
            notes=self.notes,
        )


@dataclass(frozen=True)
class Request:
    """One call of :func:`dlbridge.convert` or :func:`dlbridge.explain`: its arguments, as the
    caller passed them (their meaning is ``convert``'s docstring), and ``run``: the route will
    be executed, so a raw capsule is consumed at once instead of only read. The planner's
    steps read it; none changes it."""

    x: Any
    to: Any
    device: Any = None
    copy: bool | None = None
    detach: bool = False
    resolve: bool = False
    run: bool = False

    def __post_init__(self) -> None:
        if not (self.copy is None or isinstance(self.copy, bool)):
            raise ValueError(f"copy must be True, False or None, not {self.copy!r}")


def build(request: Request) -> Route:
    """Plan the conversion ``request`` asks for."""
    x = request.x
    target = nsmod.get(request.to)
    want = None if request.device is None else Device(request.device)
    src_ns = nsmod.owner(x)
    kind = "DLPack capsule" if is_capsule(x) else type_name(x)
    b = _Builder(kind, target)
    ctx = Ctx(obj=x)
    p = _Planning(b, ctx, request, kind, src_ns, target, want)
    try:
        _plan(p)
    except Impossible as e:
        b.source = b.summary or kind
        return Route(b.impossible(e), [], ctx, e.error)
    b.source = b.summary or kind
    return Route(b.plan(), b.steps, ctx)


_ImportStep = tuple[str, Callable[[Ctx], int | None], int]


@dataclass
class _Planning:
    """What the planner's steps share: the :class:`Request`, what :func:`build` resolved from
    it, and what the earlier steps found out (filled in as they go)."""

    b: _Builder
    ctx: Ctx
    request: Request
    kind: str
    src_ns: nsmod.Namespace | None
    target: nsmod.Namespace
    #: the request's device, parsed
    want: Device | None
    #: the data is a private copy already
    fresh: bool = False
    #: the source, as inspected (set by _inspect)
    facts: Facts = field(init=False)
    #: the step that imports the source as a Tensor, if one is needed
    import_step: _ImportStep | None = None

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def x(self) -> Any:
        return self.request.x

    @property
    def copy(self) -> bool | None:
        return self.request.copy

    @property
    def own_facts(self) -> bool:
        """The source's library has its arrays read from their own attributes (torch)."""
        return self.src_ns is not None and self.src_ns.reads_own_facts


def _plan(p: _Planning) -> None:
    """The numbered decisions of the module docstring, one function each, in order."""
    if not p.target.installed():
        raise Impossible(
            ModuleNotFoundError, f"{p.name} is not installed (pip install {p.target.pip})"
        )
    if _already_there(p):  # 1
        return
    _resolve_state(p)  # 2
    _inspect(p)
    route = _check_dtype(p)  # 3
    src, dest = _choose_device(p)  # 4
    problem, ro_problem = _layout_and_flags(p, route, src, dest)  # 5, 6
    path = _Path(route, src, dest, problem, ro_problem)
    if path.moving:
        _move(p, path)  # 4: the transfer, with the layout fix around it; 8
    else:
        _copy_in_place(p, path)  # 5, 6, 7 on the data's own device; 8


@dataclass(frozen=True)
class _Path:
    """What decisions 3 to 6 found: the values the copy steps take."""

    #: how the target imports the dtype
    route: str
    #: where the data is, and where the result lives
    src: Device
    dest: Device
    #: why the target cannot alias the layout / the read-only data as they are
    problem: str | None
    ro_problem: str | None

    @property
    def moving(self) -> bool:
        return self.dest != self.src


def _already_there(p: _Planning) -> bool:
    """1. ``x`` is already a target array where it was asked to be: returned as is."""
    x, target, b = p.x, p.target, p.b
    if not (p.src_ns is target and p.copy is not True and target.is_result(x)):
        return False
    here = target.device(x)
    if not (p.want is None or (here is not None and _satisfies(here, p.want, target))):
        return False
    b.device = here
    b.summary = p.kind

    def same(c: Ctx) -> None:
        c.result, c.finished = x, True

    b.add(f"already a {p.name} array{f' on {here}' if here else ''}: returned as is", same,
          why="nothing to convert")
    return True


def _resolve_state(p: _Planning) -> None:
    """2. Framework state DLPack cannot carry: resolved when opted in or harmless, else
    refused naming the fix."""
    src_ns, b = p.src_ns, p.b
    if p.own_facts:
        assert src_ns is not None
        try:
            b.summary = facts_of_own(src_ns, p.x).summary()
        except RuntimeError:  # sparse tensors have no strides: refused just below
            pass
    states = src_ns.state(p.x) if src_ns is not None else []
    for st in states:
        owner = f"{src_ns.name} {src_ns.noun}" if src_ns is not None else "source"
        if st.refuse:
            raise Impossible(BufferError, f"the {owner} {st.what}; call {st.fix} first")
        enabled = (st.option is None or (st.option == "detach" and p.request.detach)
                   or (st.option == "resolve" and p.request.resolve))
        if not enabled:
            raise Impossible(
                BufferError,
                f"the {owner} {st.what}, which DLPack cannot carry; call {st.fix} first, "
                f"or pass {st.option}=True to convert",
            )
        if st.copies and _copy_forbidden(p.copy):
            raise Impossible(
                BufferError,
                f"the {owner} {st.what}; resolving it with {st.fix.split(' (')[0]} is a copy, "
                "which copy=False forbids",
            )

        def apply(c: Ctx, f: Callable[[Any], Any] | None = st.apply) -> None:
            c.obj = f(c.obj) if f is not None else c.obj

        why = f"{st.fix.split(' (')[0]} resolves state DLPack cannot carry" if st.copies else None
        b.add(f"{st.fix}: the {owner} {st.what}", apply, st.copies, why=why)
        p.fresh = p.fresh or st.copies > 0


def _inspect(p: _Planning) -> None:
    """Read the source's facts (a zero-copy import; a raw capsule is only read unless the
    plan is to be run) and choose the step that imports it."""
    x, ctx = p.x, p.ctx
    source = p.src_ns.source(x) if p.src_ns is not None else x
    consumed = False
    if p.own_facts:
        assert p.src_ns is not None
        facts = facts_of_own(p.src_ns, x)
        if p.fresh:  # resolve_conj / resolve_neg made a dense, private copy
            facts.strides, facts.data_ptr = c_strides(facts.shape), 0

        def imp(c: Ctx) -> None:
            if c.tensor is None:
                c.tensor = from_dlpack(c.obj)

        p.import_step = (
            f"import the {p.src_ns.name} {p.src_ns.noun} as a dlbridge.Tensor through DLPack "
            "(zero-copy)", imp, 0,
        )
    elif is_capsule(x) and not p.request.run:
        info = peek_capsule(x)
        try:
            facts = facts_of_capsule(info, "DLPack capsule")
        except BufferError as e:
            raise Impossible(BufferError, str(e)) from None
        p.import_step = (_CAPSULE_STEP, _ok, 0)
    else:
        facts, p.import_step = _import(ctx, source, p.kind, p.src_ns, p.copy)
        consumed = is_capsule(x)
        if facts.import_copy is not None:
            p.fresh = True
    p.facts = facts
    p.b.summary = facts.summary()
    if consumed:
        ctx.obj = None


def _check_dtype(p: _Planning) -> str:
    """3. The target must have the dtype (and arrays of the shape): how it imports it."""
    route = p.target.dtype_route(p.facts.dtype)
    if route.startswith("refuse:"):
        raise Impossible(BufferError, route.removeprefix("refuse:").strip())
    refusal = p.target.shape_refusal(p.facts.shape)
    if refusal:
        raise Impossible(BufferError, refusal)
    return route


def _choose_device(p: _Planning) -> tuple[Device, Device]:
    """4. Where the data is, and where the result lives: where the data is (which the target
    must be able to hold), or ``device=``."""
    target, want = p.target, p.want
    src_dev = p.facts.device
    dest = src_dev if want is None else want
    if want is not None and _satisfies(src_dev, want, target):
        dest = src_dev
    if not target.can_hold(dest):
        hint = target.device_hint()
        if want is None:
            extra = " (or use dlbridge.to_numpy / dlbridge.to_host)" if hint == "cpu" else ""
            raise Impossible(
                BufferError,
                f"{p.name} arrays cannot live on {src_dev}, where the data is; pass "
                f"device={hint!r} to copy it there{extra}",
            )
        devs = ", ".join(str(d) for d in target.devices()) or "none found"
        raise Impossible(BufferError, f"{p.name} has no arrays on {want} (its devices: {devs})")
    p.b.device = dest
    if _copy_decision(src_dev, dest, p.copy, False, False) == "refuse transfer":
        raise Impossible(
            BufferError,
            f"the data is on {src_dev} and device={dest} needs a copy, which copy=False "
            "forbids; pass copy=None to allow it",
        )
    return src_dev, dest


def _layout_and_flags(
    p: _Planning, route: str, src: Device, dest: Device
) -> tuple[str | None, str | None]:
    """5, 6. Why the target cannot alias the layout, and the read-only data, as they are;
    then the import step (left out when a torch tensor goes straight to the host)."""
    target, facts = p.target, p.facts
    problem = target.layout_problem(facts.layout()) if route != "host_copy" else None
    ro = facts.readonly and not p.fresh
    ro_problem = target.readonly_why if ro and not target.alias_readonly else None
    step = p.import_step
    if step is not None and not (dest != src and dest.is_host_accessible and step[2] == 0
                                 and p.own_facts):
        text, fn, n = step
        if text:
            p.b.add(text, fn, n, why=facts.import_copy)
    return problem, ro_problem


def _copy_reasons(layout_problem: str | None, readonly_problem: str | None) -> list[str]:
    """The reasons for one copy on the host (or on the data's device)."""
    out = []
    if layout_problem:
        out.append(layout_problem)
    if readonly_problem:
        out.append(
            f"the data is read-only and {readonly_problem}: a copy keeps the source "
            "unwritable (never a writable alias)"
        )
    return out


def _move(p: _Planning, path: _Path) -> None:
    """4. Another device: device to host, host to device, or device to device (staged through
    the host when no library copies directly), with a C-order copy on the host for a layout
    the target cannot take."""
    b, ctx, x, target, route = p.b, p.ctx, p.x, p.target, path.route
    src_dev, dest, problem = path.src, path.dest, path.problem
    lay = p.facts.layout()
    if dest.is_host_accessible:
        _plan_to_host(b, ctx, x, src_dev, dest, p.src_ns, p.kind, readonly=p.facts.readonly)
        p.fresh = True
        if problem:
            b.add(
                "C-order copy on the host if the transferred data still has this layout: "
                f"{problem}",
                _host_fix(target, lay), 1, why=problem,
            )
        _final(b, target, route, expect_alias=True, copy=p.copy)
        return
    if src_dev.is_host_accessible:
        reasons = _copy_reasons(problem, None)
        if reasons:  # fix the layout on the host first, where dlbridge can copy
            b.add(f"C-order copy on the host: {'; '.join(reasons)}", _copy_host, 1,
                  why=reasons[0])
        _plan_from_host(b, target, route, src_dev, dest)
        return
    # device to another device
    if src_dev.type == nsmod.CUDA and dest.type == nsmod.CUDA:
        def d2d(c: Ctx) -> None:
            c.tensor = from_dlpack(c.tensor if c.obj is None else c.obj, device=str(dest))

        b.add(f"device-to-device copy {src_dev} -> {dest} (asked of the producer, else dlbridge)",
              d2d, 1, why=f"the data is on {src_dev} and device={dest}")
        _final(b, target, route, expect_alias=True, copy=p.copy)
        return
    _plan_to_host(b, ctx, x, src_dev, Device("cpu"), p.src_ns, p.kind, staged=True,
                  readonly=p.facts.readonly)
    if problem:
        b.add(f"C-order copy on the host: {problem}", _host_fix(target, lay), 1, why=problem)
    _plan_from_host(b, target, route, Device("cpu"), dest)


def _copy_in_place(p: _Planning, path: _Path) -> None:
    """5, 6, 7 on the data's own device: the copy the layout, the read-only flag or
    ``copy=True`` needs (a BufferError under ``copy=False``); then 8, the target's import."""
    b, target, route, name = p.b, p.target, path.route, p.name
    src_dev, facts, copy = path.src, p.facts, p.copy
    reasons = _copy_reasons(path.problem, path.ro_problem)
    decision = _copy_decision(src_dev, None, copy, bool(reasons), p.fresh)
    if decision == "copy" and not reasons:
        reasons = ["copy=True asks for a copy"]
    if route == "host_copy":
        if _copy_forbidden(copy):
            raise Impossible(
                BufferError,
                f"{name} cannot import {facts.dtype} through DLPack (its from_dlpack asks for "
                "legacy capsules, which cannot carry DLPack 1.1 dtypes); only a copy can, which "
                "copy=False forbids",
            )
        _final(b, target, route, expect_alias=False, copy=copy)
        return
    if reasons:
        if decision == "refuse copy":
            raise Impossible(
                BufferError,
                f"{'; '.join(reasons)}; that needs a copy, which copy=False forbids (pass "
                "copy=None to let dlbridge copy)",
            )
        if src_dev.is_host_accessible:
            b.add(f"C-order copy on the host: {'; '.join(reasons)}", _copy_host, 1,
                  why=reasons[0])
        else:
            _copy_on_its_device(p, src_dev, reasons)
    if not reasons and not facts.readonly and target.immutable and not p.fresh:
        b.notes.append(
            f"the {name} result shares memory with the writable source: {name} treats it as "
            "immutable, but writes through the source show in it (pass copy=True for an "
            "independent array)"
        )
    _final(b, target, route, expect_alias=not reasons and not p.fresh, copy=copy)


def _copy_on_its_device(p: _Planning, src_dev: Device, reasons: list[str]) -> None:
    """The copy on ``src_dev``, where the data is, not the host: by dlbridge (CUDA), the
    producer, or a library that can copy there."""
    ctx = p.ctx
    bare = ctx.obj is None or isinstance(ctx.obj, Tensor)
    helper = nsmod.device_helper(src_dev)
    if src_dev.dlbridge_copies_from:
        who = "dlbridge" if bare else "the producer, else dlbridge"
    elif bare:
        if helper is None:
            raise Impossible(
                BufferError,
                f"{'; '.join(reasons)}; dlbridge cannot copy memory on {src_dev} and no "
                "installed library can",
            )
        who = helper.name
    else:
        who = "the producer" + (f", else {helper.name}" if helper is not None else "")

    def dev_copy(c: Ctx, dev: Device = src_dev) -> None:
        c.tensor = _copy_on_device(c, dev)

    p.b.add(f"copy on {src_dev}, made by {who}: {'; '.join(reasons)}", dev_copy, 1,
            why=reasons[0])


def _copy_forbidden(copy: bool | None) -> bool:
    """Whether a copy the target needs is refused: dlbridge's one copy rule, decided in Rust
    for its own imports and for this planner alike."""
    return _copy_decision(None, None, copy, True, False) == "refuse copy"


def _satisfies(here: Device, want: Device, target: nsmod.Namespace) -> bool:
    """Is data on ``here`` already where ``want`` asks? A request for the CPU is met by any
    host-accessible memory (CUDA pinned or managed) that the target can hold as it is."""
    if here == want:
        return True
    return want.type == nsmod.CPU and here.is_host_accessible and target.can_hold(here)


def _import(
    ctx: Ctx, source: Any, kind: str, src_ns: nsmod.Namespace | None, copy: bool | None
) -> tuple[Facts, tuple[str, Callable[[Ctx], int | None], int]]:
    """Import the source zero-copy (or with the copy the import itself needs)."""
    library = src_ns.name if src_ns is not None else None
    via = _via(source)
    if _read_once(source):
        return _import_once(ctx, source, kind, library, via, copy)
    try:
        t = from_dlpack(source, copy=False)
    except BufferError as e:
        why = str(e)
        try:
            t = from_dlpack(source)
        except TypeError as e2:
            raise Impossible(_type_error_kind(e2), str(e2)) from None
        except ValueError as e2:
            raise Impossible(ValueError, str(e2)) from None
        except BufferError as e2:
            raise Impossible(BufferError, str(e2)) from None
        except Exception as e2:  # noqa: BLE001 - the producer's own exception type
            raise Impossible(BufferError, _producer_refused(e2)) from None
        if _copy_forbidden(copy):
            raise Impossible(
                BufferError, f"importing {kind} needs a copy ({why}), which copy=False forbids"
            ) from None
        ctx.tensor = t
        facts = facts_of_tensor(t, kind, library, import_copy=f"the import needs a copy: {why}")
        return facts, (f"import {kind} as a dlbridge.Tensor through {via} (a copy: {why})", _ok, 1)
    except TypeError as e:
        raise Impossible(_type_error_kind(e), str(e)) from None
    except ValueError as e:
        raise Impossible(ValueError, str(e)) from None
    except Exception as e:  # noqa: BLE001 - the producer's own exception type (e.g. TensorFlow's)
        raise Impossible(BufferError, _producer_refused(e)) from None
    ctx.tensor = t
    facts = facts_of_tensor(t, kind, library)
    if isinstance(source, Tensor):
        return facts, ("", _ok, 0)  # nothing to say
    if is_capsule(source):
        return facts, (_CAPSULE_STEP, _ok, 0)
    return facts, (f"import {kind} as a dlbridge.Tensor through {via} (zero-copy)", _ok, 0)


_CAPSULE_STEP = (
    "import the DLPack capsule as a dlbridge.Tensor (zero-copy; the capsule is consumed)"
)

_ARRAY_PROTOCOLS = (
    "__arrow_c_device_array__",
    "__arrow_c_array__",
    "__dlpack__",
    "__cuda_array_interface__",
    "__array_interface__",
)


def _read_once(x: Any) -> bool:
    """Does ``x`` offer its data only as an Arrow stream, which a producer may let be read
    only once (a RecordBatchReader, a generator)? Then it is imported once, not probed."""
    t = type(x)
    streams = hasattr(t, "__arrow_c_stream__") or hasattr(t, "__arrow_c_device_stream__")
    if not streams or any(hasattr(t, p) for p in _ARRAY_PROTOCOLS):
        return False
    return "buffer" not in protocols(x)


def _producer_refused(e: Exception) -> str:
    """The reason of an impossible plan whose source raised an exception of its own type."""
    return f"the producer refused the export with {type(e).__name__}: {e}"


def _import_once(
    ctx: Ctx, source: Any, kind: str, library: str | None, via: str, copy: bool | None
) -> tuple[Facts, tuple[str, Callable[[Ctx], int | None], int]]:
    """:func:`_import` for a stream: one read, with the copy the import needs, if any."""
    try:
        t = from_dlpack(source, copy=False if copy is False else None)
    except (TypeError, ValueError, BufferError) as e:
        raise Impossible(type(e), str(e)) from None
    except Exception as e:  # noqa: BLE001 - the producer's own exception type
        raise Impossible(BufferError, _producer_refused(e)) from None
    ctx.tensor = t
    if not t.is_copied:
        facts = facts_of_tensor(t, kind, library)
        return facts, (f"import {kind} as a dlbridge.Tensor through {via} (zero-copy)", _ok, 0)
    why = "the stream's chunks are joined (or its bit-packed booleans unpacked) into one tensor"
    facts = facts_of_tensor(t, kind, library, import_copy=f"the import needs a copy: {why}")
    return facts, (f"import {kind} as a dlbridge.Tensor through {via} (a copy: {why})", _ok, 1)


def _copy_host(c: Ctx) -> None:
    assert c.tensor is not None
    c.tensor = c.tensor.copy()


def _host_fix(target: nsmod.Namespace, lay: nsmod.LayoutView) -> Callable[[Ctx], int | None]:
    """After a device-to-host copy: a C-order copy only if the transferred tensor still has a
    layout the target cannot take (producers' copies may keep the source's strides)."""

    def fix(c: Ctx) -> int:
        t = c.tensor
        assert t is not None
        view = nsmod.LayoutView(
            tuple(t.shape), tuple(t.strides), t.itemsize, int(t.data_ptr), t.size
        )
        if target.layout_problem(view) is None:
            return 0
        c.tensor = t.copy()
        return 1

    return fix


def _plan_to_host(
    b: _Builder, ctx: Ctx, x: Any, src: Device, dest: Device, src_ns: nsmod.Namespace | None,
    kind: str, staged: bool = False, readonly: bool = False,
) -> None:
    bare = ctx.obj is None or isinstance(ctx.obj, Tensor)
    if src.dlbridge_copies_from:
        who = "dlbridge" if bare else f"the producer ({kind}), else dlbridge"
    else:
        helper = nsmod.device_helper(src)
        if bare:
            if helper is None:
                raise Impossible(
                    BufferError,
                    f"dlbridge cannot read memory on {src} and no installed library can copy it "
                    "(for oneAPI devices: pip install dpnp)",
                )
            who = f"{helper.name} (dlbridge cannot read {src} memory itself)"
        else:
            who = f"the producer ({kind})"

    def d2h(c: Ctx, s: Device = src) -> int:
        c.tensor, made = _to_host(c, s)
        return made

    stage = (
        " (staged through the host: no library copies between these devices directly)"
        if staged
        else ""
    )
    copies, extra = 1, ""
    if readonly:
        copies, extra = 2, (
            "; the producer's copy of read-only data may come back read-only, and then it is "
            "copied once more on the host (a copy is writable)"
        )
    b.add(f"device-to-host copy {src} -> {dest}, made by {who}{stage}{extra}", d2h, copies,
          why=f"the data is on {src} and the result goes to {b.device}")


def _plan_from_host(
    b: _Builder, target: nsmod.Namespace, route: str, src: Device, dest: Device
) -> None:
    """Host-to-device: the target library's own transfer, else dlbridge (CUDA), else a library
    that can reach the device."""
    name = target.name
    why = f"the data is on {src} and device={dest}"
    if type(target).from_host is not nsmod.Namespace.from_host:
        def h2d(c: Ctx) -> None:
            assert c.tensor is not None
            c.result = target.from_host(c.tensor, dest, route)
            c.finished = True

        b.add(
            f"host-to-device copy {src} -> {dest}, made by {name} (the "
            f"producer is not asked for {dest})",
            h2d,
            1,
            why=why,
        )
        return
    if dest.dlbridge_copies_to:
        def h2d_dlb(c: Ctx) -> None:
            assert c.tensor is not None
            c.tensor = c.tensor.to_device(str(dest))

        b.add(
            f"host-to-device copy {src} -> {dest}, made by dlbridge (Tensor.to_device)",
            h2d_dlb,
            1,
            why=why,
        )
    else:
        helper = nsmod.device_helper(dest)
        if helper is None:
            raise Impossible(
                BufferError,
                f"neither {name} nor dlbridge can copy data to {dest}, and no installed library "
                "can (for oneAPI devices: pip install dpnp)",
            )

        def h2d_helper(c: Ctx, h: nsmod.Namespace = helper) -> None:
            assert c.tensor is not None
            c.tensor = from_dlpack(h.from_host(c.tensor, dest, "dlpack"))

        b.add(f"host-to-device copy {src} -> {dest}, made by {helper.name}", h2d_helper, 1, why=why)
    _final(b, target, route, expect_alias=True, copy=None)


def _final(
    b: _Builder, target: nsmod.Namespace, route: str, *, expect_alias: bool, copy: bool | None
) -> None:
    name = target.name
    imp = target.routes.get(route)
    if name == "dlbridge":
        text = "the dlbridge.Tensor is the result"
    elif imp is not None:
        text = f"{name}: {imp.text}"
    else:
        text = f"{name}: {target.importer or name + '.from_dlpack'} (zero-copy)"
    copies = 1 if imp is not None and imp.copies else 0
    if imp is not None and copies and _copy_forbidden(copy):
        raise Impossible(
            BufferError, f"{name}: {imp.text}, which copy=False forbids; pass copy=None"
        )

    def final(c: Ctx) -> int | None:
        t = c.tensor
        assert t is not None
        c.result = target.from_tensor(t, route)
        c.finished = True
        if copies or not expect_alias or not t.size:
            return None
        got = result_ptr(c.result)
        if got is None or got == int(t.data_ptr):
            return None
        if _copy_forbidden(copy):
            raise BufferError(
                f"{name} copied the data on import (dlbridge expected it to alias it); refused "
                "under copy=False"
            )
        return 1

    why = imp.why if imp is not None else None
    b.add(text, final, copies, why=why)


__all__ = ["Plan", "Request", "Route", "build", "result_ptr"]
