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


@dataclass(frozen=True)
class Step:
    """One step of a route: what it does, the copies it makes, how it runs, and why (the
    plan's reason, when it is one)."""

    text: str
    copies: int
    #: runs the step; returns the number of copies actually made, or None for "as planned"
    run: Callable[[Ctx], int | None]
    why: str | None = None


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


@dataclass(frozen=True)
class _Source:
    """What :func:`build` reads off the source before planning: its kind, its library's
    namespace (None for a foreign object) and whether that library's arrays are read from
    their own attributes (torch)."""

    x: Any
    kind: str
    ns: nsmod.Namespace | None

    @property
    def owner(self) -> str:
        return f"{self.ns.name} {self.ns.noun}" if self.ns is not None else "source"

    @property
    def own_facts(self) -> bool:
        return self.ns is not None and self.ns.reads_own_facts


def build(request: Request) -> Route:
    """Plan the conversion ``request`` asks for: the numbered decisions of the module
    docstring, one function each, in order. Each returns what it found and the steps it adds;
    a refusal (:class:`Impossible`) returns the plan so far as impossible."""
    x, copy = request.x, request.copy
    target = nsmod.get(request.to)
    want = None if request.device is None else Device(request.device)
    src = _Source(x, "DLPack capsule" if is_capsule(x) else type_name(x), nsmod.owner(x))
    ctx = Ctx(obj=x)
    summary, steps, notes = src.kind, list[Step](), list[str]()
    try:
        if not target.installed():
            raise Impossible(
                ModuleNotFoundError, f"{target.name} is not installed (pip install {target.pip})"
            )
        there = _already_there(src, target, want, copy)  # 1
        if there is not None:
            here, step = there
            return _route(src.kind, target, [step], notes, here, ctx)
        summary = _own_summary(src) or summary
        fresh = False
        for state in src.ns.state(x) if src.ns is not None else []:  # 2
            steps.append(_resolve(src, state, request))
            fresh = fresh or state.copies > 0
        seen = _inspect(src, fresh, request.run, copy)
        facts, bare = seen.facts, seen.consumed or isinstance(x, Tensor)
        ctx.tensor, ctx.obj = seen.tensor, None if seen.consumed else x
        summary, fresh = facts.summary(), fresh or facts.import_copy is not None
        route = _check_dtype(target, facts)  # 3
        here, dest = _choose_device(target, facts.device, want, copy)  # 4
        path = _layout_and_flags(target, facts, fresh, route, here, dest)  # 5, 6
        steps += _kept_import_step(seen.step, src, path)
        if path.moving:  # 4: the transfer, with the layout fix around it; 8
            steps += _move(target, facts, path, copy, src.kind, bare)
        else:  # 5, 6, 7 on the data's own device; 8
            added, notes = _copy_in_place(target, facts, fresh, path, copy, bare)
            steps += added
    except Impossible as e:
        return Route(_impossible_plan(summary, target, steps, notes, e), [], ctx, e.error)
    return _route(summary, target, steps, notes, dest, ctx)


def _route(
    summary: str, target: nsmod.Namespace, steps: list[Step], notes: list[str],
    device: Device | None, ctx: Ctx,
) -> Route:
    """The possible plan of ``steps``, with its reason: the first step's why when nothing is
    copied, else the whys of the copies."""
    copies = sum(s.copies for s in steps)
    whys = [s.why for s in steps if s.why]
    if copies == 0:
        reason = whys[0] if whys else (
            f"{target.name} takes this dtype, layout, device and flags as they are"
        )
    else:
        reason = "; ".join(dict.fromkeys(whys)) or "a copy is needed"
    plan = Plan(
        source=summary,
        target=target.name,
        possible=True,
        steps=[s.text for s in steps],
        copies=copies,
        reason=reason,
        device=str(device) if device is not None else None,
        notes=notes,
    )
    return Route(plan, steps, ctx)


def _impossible_plan(
    summary: str, target: nsmod.Namespace, steps: list[Step], notes: list[str], e: Impossible
) -> Plan:
    return Plan(
        source=summary,
        target=target.name,
        possible=False,
        steps=[s.text for s in steps],
        copies=0,
        reason=e.message,
        device=None,
        error=e.error.__name__,
        notes=notes,
    )


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


def _already_there(
    src: _Source, target: nsmod.Namespace, want: Device | None, copy: bool | None
) -> tuple[Device | None, Step] | None:
    """1. ``x`` is already a target array where it was asked to be: returned as is (where it
    is, and the step that returns it)."""
    x = src.x
    keep = _decided(None, None, copy, needs=False, fresh=False) == "keep"
    if not (src.ns is target and keep and target.is_result(x)):
        return None
    here = target.device(x)
    if not (want is None or (here is not None and _satisfies(here, want, target))):
        return None

    def same(c: Ctx) -> None:
        c.result, c.finished = x, True

    where = f" on {here}" if here else ""
    text = f"already a {target.name} array{where}: returned as is"
    return here, Step(text, 0, same, why="nothing to convert")


def _own_summary(src: _Source) -> str | None:
    """The source as its own library describes it (torch), for a plan refused before the
    source is inspected."""
    if not src.own_facts:
        return None
    assert src.ns is not None
    try:
        return facts_of_own(src.ns, src.x).summary()
    except RuntimeError:  # sparse tensors have no strides: refused by their state
        return None


def _resolve(src: _Source, st: nsmod.State, request: Request) -> Step:
    """2. One piece of framework state DLPack cannot carry: the step that resolves it when
    opted in or harmless, else refused naming the fix."""
    owner = src.owner
    if st.refuse:
        raise Impossible(BufferError, f"the {owner} {st.what}; call {st.fix} first")
    enabled = (st.option is None or (st.option == "detach" and request.detach)
               or (st.option == "resolve" and request.resolve))
    if not enabled:
        raise Impossible(
            BufferError,
            f"the {owner} {st.what}, which DLPack cannot carry; call {st.fix} first, "
            f"or pass {st.option}=True to convert",
        )
    fix = st.fix.split(" (")[0]
    if st.copies:
        needed = f"the {owner} {st.what}; resolving it with {fix} is a copy"
        _decided(None, None, request.copy, needs=True, fresh=False, why=needed)

    def apply(c: Ctx, f: Callable[[Any], Any] | None = st.apply) -> None:
        c.obj = f(c.obj) if f is not None else c.obj

    why = f"{fix} resolves state DLPack cannot carry" if st.copies else None
    return Step(f"{st.fix}: the {owner} {st.what}", st.copies, apply, why=why)


@dataclass(frozen=True)
class _Inspected:
    """What :func:`_inspect` found: the source's facts, the step that imports it, the
    tensor it imported (None when it only read the facts), and whether that consumed the
    source (a capsule)."""

    facts: Facts
    step: Step
    tensor: Tensor | None = None
    consumed: bool = False


def _inspect(src: _Source, fresh: bool, run: bool, copy: bool | None) -> _Inspected:
    """Read the source's facts (a zero-copy import; a raw capsule is only read unless the
    plan is to be ``run``) and choose the step that imports it."""
    x, ns = src.x, src.ns
    if src.own_facts:
        assert ns is not None
        facts = facts_of_own(ns, x)
        if fresh:  # resolve_conj / resolve_neg made a dense, private copy
            facts.strides, facts.data_ptr = c_strides(facts.shape), 0

        def imp(c: Ctx) -> None:
            if c.tensor is None:
                c.tensor = from_dlpack(c.obj)

        text = f"import the {ns.name} {ns.noun} as a dlbridge.Tensor through DLPack (zero-copy)"
        return _Inspected(facts, Step(text, 0, imp))
    if is_capsule(x) and not run:
        try:
            facts = facts_of_capsule(peek_capsule(x), "DLPack capsule")
        except BufferError as e:
            raise Impossible(BufferError, str(e)) from None
        return _Inspected(facts, Step(_CAPSULE_STEP, 0, _ok))
    source = ns.source(x) if ns is not None else x
    tensor, facts, step = _import(source, src.kind, ns, copy)
    return _Inspected(facts, step, tensor, consumed=is_capsule(x))


def _check_dtype(target: nsmod.Namespace, facts: Facts) -> str:
    """3. The target must have the dtype (and arrays of the shape): how it imports it."""
    route = target.dtype_route(facts.dtype)
    if route.startswith("refuse:"):
        raise Impossible(BufferError, route.removeprefix("refuse:").strip())
    refusal = target.shape_refusal(facts.shape)
    if refusal:
        raise Impossible(BufferError, refusal)
    return route


def _choose_device(
    target: nsmod.Namespace, here: Device, want: Device | None, copy: bool | None
) -> tuple[Device, Device]:
    """4. Where the data is, and where the result lives: where the data is (which the target
    must be able to hold), or ``device=``."""
    dest = here if want is None or _satisfies(here, want, target) else want
    if not target.can_hold(dest):
        hint = target.device_hint()
        if want is None:
            extra = " (or use dlbridge.to_numpy / dlbridge.to_host)" if hint == "cpu" else ""
            raise Impossible(
                BufferError,
                f"{target.name} arrays cannot live on {here}, where the data is; pass "
                f"device={hint!r} to copy it there{extra}",
            )
        devs = ", ".join(str(d) for d in target.devices()) or "none found"
        raise Impossible(
            BufferError, f"{target.name} has no arrays on {want} (its devices: {devs})"
        )
    _decided(here, dest, copy, needs=False, fresh=False)
    return here, dest


def _layout_and_flags(
    target: nsmod.Namespace, facts: Facts, fresh: bool, route: str, src: Device, dest: Device
) -> _Path:
    """5, 6. Why the target cannot alias the layout, and the read-only data, as they are."""
    problem = target.layout_problem(facts.layout()) if route != "host_copy" else None
    ro = facts.readonly and not fresh
    ro_problem = target.readonly_why if ro and not target.alias_readonly else None
    return _Path(route, src, dest, problem, ro_problem)


def _kept_import_step(step: Step, src: _Source, path: _Path) -> list[Step]:
    """The import step, unless it says nothing (a Tensor) or a torch tensor goes straight to
    the host (its own copy there is the import)."""
    straight_to_host = path.moving and path.dest.is_host_accessible and step.copies == 0
    if not step.text or (straight_to_host and src.own_facts):
        return []
    return [step]


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


def _move(
    target: nsmod.Namespace, facts: Facts, path: _Path, copy: bool | None, kind: str, bare: bool
) -> list[Step]:
    """4. Another device: device to host, host to device, or device to device (staged through
    the host when no library copies directly), with a C-order copy on the host for a layout
    the target cannot take."""
    route, here, dest, problem = path.route, path.src, path.dest, path.problem
    lay, readonly = facts.layout(), facts.readonly
    if dest.is_host_accessible:
        steps = [_to_host_step(kind, bare, here, dest, dest, readonly=readonly)]
        if problem:
            steps.append(Step(
                f"C-order copy on the host if the transferred data still has this layout: "
                f"{problem}", 1, _host_fix(target, lay), why=problem,
            ))
        return [*steps, _final(target, route, expect_alias=True, copy=copy)]
    if here.is_host_accessible:
        reasons = _copy_reasons(problem, None)
        steps = []
        if reasons:  # fix the layout on the host first, where dlbridge can copy
            steps.append(Step(f"C-order copy on the host: {'; '.join(reasons)}", 1, _copy_host,
                              why=reasons[0]))
        return steps + _from_host_steps(target, route, here, dest)
    if here.type == nsmod.CUDA and dest.type == nsmod.CUDA:
        def d2d(c: Ctx) -> None:
            c.tensor = from_dlpack(c.tensor if c.obj is None else c.obj, device=str(dest))

        text = f"device-to-device copy {here} -> {dest} (asked of the producer, else dlbridge)"
        return [Step(text, 1, d2d, why=f"the data is on {here} and device={dest}"),
                _final(target, route, expect_alias=True, copy=copy)]
    cpu = Device("cpu")
    steps = [_to_host_step(kind, bare, here, cpu, dest, staged=True, readonly=readonly)]
    if problem:
        steps.append(Step(f"C-order copy on the host: {problem}", 1, _host_fix(target, lay),
                          why=problem))
    return steps + _from_host_steps(target, route, cpu, dest)


def _copy_in_place(
    target: nsmod.Namespace, facts: Facts, fresh: bool, path: _Path, copy: bool | None,
    bare: bool,
) -> tuple[list[Step], list[str]]:
    """5, 6, 7 on the data's own device: the copy the layout, the read-only flag or
    ``copy=True`` needs (a BufferError under ``copy=False``); then 8, the target's import.
    Returns the steps and the notes."""
    route, name, here = path.route, target.name, path.src
    if route == "host_copy":
        why = (f"{name} cannot import {facts.dtype} through DLPack (its from_dlpack asks for "
               "legacy capsules, which cannot carry DLPack 1.1 dtypes); only a copy can")
        _decided(None, None, copy, needs=True, fresh=False, why=why)
        return [_final(target, route, expect_alias=False, copy=copy)], []
    reasons = _copy_reasons(path.problem, path.ro_problem)
    decision = _decided(here, None, copy, bool(reasons), fresh, why="; ".join(reasons))
    if decision == "copy" and not reasons:
        reasons = ["copy=True asks for a copy"]
    steps, notes = [], []
    if reasons:
        if here.is_host_accessible:
            steps.append(Step(f"C-order copy on the host: {'; '.join(reasons)}", 1, _copy_host,
                              why=reasons[0]))
        else:
            steps.append(_copy_on_its_device(here, reasons, bare))
    if not reasons and not facts.readonly and target.immutable and not fresh:
        notes.append(
            f"the {name} result shares memory with the writable source: {name} treats it as "
            "immutable, but writes through the source show in it (pass copy=True for an "
            "independent array)"
        )
    expect_alias = not reasons and not fresh
    return [*steps, _final(target, route, expect_alias=expect_alias, copy=copy)], notes


def _copy_on_its_device(here: Device, reasons: list[str], bare: bool) -> Step:
    """The copy on ``here``, where the data is, not the host: by dlbridge (CUDA), the
    producer (unless the source is ``bare``: a Tensor or consumed capsule), or a library that
    can copy there."""
    helper = nsmod.device_helper(here)
    if here.dlbridge_copies_from:
        who = "dlbridge" if bare else "the producer, else dlbridge"
    elif bare:
        if helper is None:
            raise Impossible(
                BufferError,
                f"{'; '.join(reasons)}; dlbridge cannot copy memory on {here} and no "
                "installed library can",
            )
        who = helper.name
    else:
        who = "the producer" + (f", else {helper.name}" if helper is not None else "")

    def dev_copy(c: Ctx, dev: Device = here) -> None:
        c.tensor = _copy_on_device(c, dev)

    return Step(f"copy on {here}, made by {who}: {'; '.join(reasons)}", 1, dev_copy,
                why=reasons[0])


def _decided(
    here: Device | None, device: Device | None, copy: bool | None, needs: bool, fresh: bool,
    why: str = "", worded: str | None = None,
) -> str:
    """dlbridge's one copy and device rule, decided in Rust for ``from_dlpack``, ``Tensor.copy``,
    ``Tensor.to_device`` and this planner alike (``_native._copy_decision``): ``"keep"``,
    ``"copy"`` or ``"move"``. A refusal (``copy=False`` against a transfer, or against a copy
    needed because of ``why``) is :class:`Impossible`, with the rule's own message (or
    ``worded``: that message as ``from_dlpack`` raised it already)."""
    decision, refusal = _copy_decision(here, device, copy, needs, fresh, why)
    if refusal is not None:
        raise Impossible(BufferError, worded or refusal)
    return decision


def _satisfies(here: Device, want: Device, target: nsmod.Namespace) -> bool:
    """Is data on ``here`` already where ``want`` asks? A request for the CPU is met by any
    host-accessible memory (CUDA pinned or managed) that the target can hold as it is."""
    if here == want:
        return True
    return want.type == nsmod.CPU and here.is_host_accessible and target.can_hold(here)


def _import(
    source: Any, kind: str, src_ns: nsmod.Namespace | None, copy: bool | None
) -> tuple[Tensor, Facts, Step]:
    """Import the source zero-copy (or with the copy the import itself needs): the tensor,
    its facts and the step that says so."""
    library = src_ns.name if src_ns is not None else None
    via = _via(source)
    if _read_once(source):
        return _import_once(source, kind, library, via, copy)
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
        # from_dlpack's refusal under copy=False is the rule's message already
        _decided(None, None, copy, needs=True, fresh=False, worded=why)
        facts = facts_of_tensor(t, kind, library, import_copy=f"the import needs a copy: {why}")
        text = f"import {kind} as a dlbridge.Tensor through {via} (a copy: {why})"
        return t, facts, Step(text, 1, _ok, why=facts.import_copy)
    except TypeError as e:
        raise Impossible(_type_error_kind(e), str(e)) from None
    except ValueError as e:
        raise Impossible(ValueError, str(e)) from None
    except Exception as e:  # noqa: BLE001 - the producer's own exception type (e.g. TensorFlow's)
        raise Impossible(BufferError, _producer_refused(e)) from None
    facts = facts_of_tensor(t, kind, library)
    if isinstance(source, Tensor):
        return t, facts, Step("", 0, _ok)  # nothing to say
    if is_capsule(source):
        return t, facts, Step(_CAPSULE_STEP, 0, _ok)
    return t, facts, Step(f"import {kind} as a dlbridge.Tensor through {via} (zero-copy)", 0, _ok)


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
    source: Any, kind: str, library: str | None, via: str, copy: bool | None
) -> tuple[Tensor, Facts, Step]:
    """:func:`_import` for a stream: one read, with the copy the import needs, if any."""
    try:
        # copy=False goes on to from_dlpack, whose rule refuses a join; copy=True is left to
        # the steps after (this import's copy, if any, counts as the one asked for).
        t = from_dlpack(source, copy=None if copy else copy)
    except (TypeError, ValueError, BufferError) as e:
        raise Impossible(type(e), str(e)) from None
    except Exception as e:  # noqa: BLE001 - the producer's own exception type
        raise Impossible(BufferError, _producer_refused(e)) from None
    if not t.is_copied:
        facts = facts_of_tensor(t, kind, library)
        text = f"import {kind} as a dlbridge.Tensor through {via} (zero-copy)"
        return t, facts, Step(text, 0, _ok)
    why = "the stream's chunks are joined (or its bit-packed booleans unpacked) into one tensor"
    facts = facts_of_tensor(t, kind, library, import_copy=f"the import needs a copy: {why}")
    text = f"import {kind} as a dlbridge.Tensor through {via} (a copy: {why})"
    return t, facts, Step(text, 1, _ok, why=facts.import_copy)


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


def _to_host_step(
    kind: str, bare: bool, here: Device, dest: Device, goes_to: Device, *, staged: bool = False,
    readonly: bool = False,
) -> Step:
    """The device-to-host copy from ``here`` to ``dest`` of data whose result goes to
    ``goes_to``: made by the producer (unless the source is ``bare``), dlbridge (CUDA), or a
    library that can read the device."""
    if here.dlbridge_copies_from:
        who = "dlbridge" if bare else f"the producer ({kind}), else dlbridge"
    else:
        helper = nsmod.device_helper(here)
        if bare:
            if helper is None:
                raise Impossible(
                    BufferError,
                    f"dlbridge cannot read memory on {here} and no installed library can copy "
                    "it (for oneAPI devices: pip install dpnp)",
                )
            who = f"{helper.name} (dlbridge cannot read {here} memory itself)"
        else:
            who = f"the producer ({kind})"

    def d2h(c: Ctx, s: Device = here) -> int:
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
    return Step(f"device-to-host copy {here} -> {dest}, made by {who}{stage}{extra}", copies,
                d2h, why=f"the data is on {here} and the result goes to {goes_to}")


def _from_host_steps(
    target: nsmod.Namespace, route: str, here: Device, dest: Device
) -> list[Step]:
    """Host-to-device: the target library's own transfer, else dlbridge (CUDA), else a library
    that can reach the device; then the target's import."""
    name = target.name
    why = f"the data is on {here} and device={dest}"
    if type(target).from_host is not nsmod.Namespace.from_host:
        def h2d(c: Ctx) -> None:
            assert c.tensor is not None
            c.result = target.from_host(c.tensor, dest, route)
            c.finished = True

        text = (f"host-to-device copy {here} -> {dest}, made by {name} (the producer is not "
                f"asked for {dest})")
        return [Step(text, 1, h2d, why=why)]
    if dest.dlbridge_copies_to:
        def h2d_dlb(c: Ctx) -> None:
            assert c.tensor is not None
            c.tensor = c.tensor.to_device(str(dest))

        text = f"host-to-device copy {here} -> {dest}, made by dlbridge (Tensor.to_device)"
        step = Step(text, 1, h2d_dlb, why=why)
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

        step = Step(f"host-to-device copy {here} -> {dest}, made by {helper.name}", 1, h2d_helper,
                    why=why)
    return [step, _final(target, route, expect_alias=True, copy=None)]


def _final(
    target: nsmod.Namespace, route: str, *, expect_alias: bool, copy: bool | None
) -> Step:
    """8. The target's import (zero-copy, or the copy its route makes); when dlbridge expects
    it to alias, the result's address is checked at run time."""
    name = target.name
    imp = target.routes.get(route)
    if name == "dlbridge":
        text = "the dlbridge.Tensor is the result"
    elif imp is not None:
        text = f"{name}: {imp.text}"
    else:
        text = f"{name}: {target.importer or name + '.from_dlpack'} (zero-copy)"
    copies = 1 if imp is not None and imp.copies else 0
    if imp is not None and copies:
        _decided(None, None, copy, needs=True, fresh=False, why=f"{name}: {imp.text}")

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
        try:
            why = f"{name} copied the data on import (dlbridge expected it to alias it)"
            _decided(None, None, copy, needs=True, fresh=False, why=why)
        except Impossible as e:
            raise BufferError(e.message) from None
        return 1

    return Step(text, copies, final, why=imp.why if imp is not None else None)


__all__ = ["Plan", "Request", "Route", "build", "result_ptr"]
