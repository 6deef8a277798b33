"""The checker's worker: runs units (producer, consumer, case, route) and streams JSON lines.

Started by :mod:`dlbridge_check.runner` as ``python -m dlbridge_check.worker``; reads one JSON
job from stdin::

    {"units": [[producer, consumer, case_id, route], ...], "direct": {key: outcome}}

and writes one JSON object per line to stdout: ``{"event": "ready"}`` once the libraries are
imported, ``{"event": "start", "unit": i}`` and ``{"event": "stage", "unit": i, "stage": s}``
before each risky step (so that the runner can tell where a process died), and
``{"event": "result", "unit": i, "result": {...}}`` after each unit.

Routes: ``direct`` is ``consumer.from_dlpack(x)``; ``dlbridge`` is
``consumer.from_dlpack(dlbridge.from_dlpack(x))`` with ``copy=`` / ``device=`` given to both.
Each result names who is at fault when something is wrong: ``dlbridge``, ``producer``,
``consumer``, ``peers`` (the two peer libraries, not separable) or ``checker``.
"""

from __future__ import annotations

import gc
import json
import os
import struct
import sys
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import audit
from . import refcapsule as rc
from .adapters.base import require_layout
from .adapters.builtin import ref_consume
from .cases import BY_ID, Case
from .layout import c_contiguous, f_contiguous
from .libraries import (
    ALL_LIBRARIES,
    BUILTIN_NAMES,
    Adapter,
    Observed,
    Recipe,
    Unsupported,
    by_name,
    library_of_module,
    observe,
    reference,
    use_names,
)

#: the cases' modes a library's own state makes (its adapter builds them: ``Adapter.in_mode``)
LIBRARY_MODES = frozenset(mode for cls in ALL_LIBRARIES for mode in cls.modes)

PASS, FAIL, ERROR, CRASH, TIMEOUT, UNSUPPORTED = (
    "pass",
    "fail",
    "error",
    "crash",
    "timeout",
    "unsupported",
)

_OUT = sys.stdout
_CURRENT_UNIT = -1


def emit(obj: dict) -> None:
    _OUT.write(json.dumps(obj, default=str) + "\n")
    _OUT.flush()


def stage(name: str) -> None:
    emit({"event": "stage", "unit": _CURRENT_UNIT, "stage": name})


def short(e: BaseException, n: int = 240) -> str:
    msg = str(e).strip().replace("\n", " ")
    if len(msg) > n:
        msg = msg[: n - 3] + "..."
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


# ----------------------------------------------------------------------------- sources


@dataclass
class Source:
    x: Any
    ref: np.ndarray  # expected values / layout
    dtype: str
    readonly: bool  # truth: must not be written through any alias
    declared_readonly: bool | None  # what the producer says (READ_ONLY flag, legacy, buffer flag)
    ptr: int | None
    device: tuple[int, int]
    elem_strides: tuple[int, ...] | None  # what the producer exports (elements)
    has_dlpack: bool
    export_error: BaseException | None = None  # the producer's own __dlpack__ failed
    export_kind: str | None = None  # "legacy" | "versioned" | None (no __dlpack__)
    export_flags: int = 0
    ref_checks: set[str] = field(default_factory=set)  # checks the producer's own export fails
    ref_desc: str = ""

    @property
    def size(self) -> int:
        return int(self.ref.size)

    @property
    def host(self) -> bool:
        return rc.host_readable(self.device)


def build_source(plib: Adapter, case: Case) -> Source:
    """Build the producer's array for a case (raises Unsupported)."""
    recipe = case.recipe
    ref = reference(recipe)
    if case.mode == "list":
        return Source(
            x=ref.tolist(), ref=ref, dtype=ref.dtype.name, readonly=False, declared_readonly=None,
            ptr=None, device=(1, 0), elem_strides=None, has_dlpack=False,
        )
    if case.mode in (*rc.HOSTILE_MODES, *rc.DEVICE_MODES):
        x = rc.RefArray(ref, mode=case.mode)
    else:
        x = plib.make(recipe, ref)
        if plib.name not in BUILTIN_NAMES:
            _require_recipe(plib, x, ref, recipe)
        if case.mode in plib.modes:
            x, ref = plib.in_mode(case.mode, x, ref)
    readonly = bool(plib.src_readonly(x))
    has_dlpack = hasattr(x, "__dlpack__")
    src = Source(
        x=x, ref=ref, dtype=ref.dtype.name, readonly=readonly, declared_readonly=None,
        ptr=None, device=plib.src_device(x) if has_dlpack else (1, 0), elem_strides=None,
        has_dlpack=has_dlpack,
    )
    try:
        src.ptr = plib.src_ptr(x)
    except Exception:  # noqa: BLE001
        src.ptr = None
    if isinstance(x, memoryview):
        src.declared_readonly = x.readonly
        src.elem_strides = tuple(s // x.itemsize for s in x.strides) if x.itemsize else None
    if has_dlpack and case.mode not in ("major2", "v12_null_strides"):
        # the producer's own export, read by the reference consumer
        try:
            res = ref_consume(x)
            src.export_kind = "versioned" if res.info.versioned else "legacy"
            src.export_flags = res.info.flags
            obs = observe(res)
            info_readonly = obs.writable is False
            src.declared_readonly = info_readonly and not _legacy_says_writable(src, x)
            src.elem_strides = obs.strides
            src.ref_desc = obs.notes[0] if obs.notes else ""
            src.ref_checks = {c for c, _ in judge(obs, src, case, expect_device=None, copy=None)}
            if src.ptr is None and obs.ptr is not None:
                src.ptr = obs.ptr
        except BufferError as e:
            # device memory: metadata only
            info = rc.probe(x)
            if info is None:
                src.export_error = e
            else:
                src.export_kind = "versioned" if info.versioned else "legacy"
                src.export_flags = info.flags
                src.declared_readonly = info.readonly
                src.elem_strides = info.element_strides
                src.ref_desc = info.describe()
        except Exception as e:  # noqa: BLE001
            src.export_error = e
    if isinstance(x, rc.RefArray):
        src.declared_readonly = x.readonly
        # Release the capsules read above but not consumed (memory the host cannot read): the
        # deleter count of the exchange itself starts from here.
        x.finish()
    return src


def _require_recipe(plib: Adapter, x: Any, ref: np.ndarray, recipe: Recipe) -> None:
    """An adapter from outside dlbridge must make the recipe's array: one with another layout
    would make the case mean nothing (Unsupported, naming the adapter's mistake)."""
    info = rc.probe(x)
    if info is None:
        return  # no DLPack export to read the layout from: trusted
    try:
        require_layout(info, ref, recipe)
    except Unsupported as e:
        raise Unsupported(f"{plib.name}'s adapter made another array than the case's: {e}") from e


def _legacy_says_writable(src: Source, x: Any) -> bool:
    """A legacy capsule cannot carry a read-only flag: its producer's library says whether it
    may be written (mutable arrays that export their own memory). The list is data dlbridge
    publishes; the checker judges against it independently of dlbridge's import code."""
    from dlbridge.libraries import LEGACY_CAPSULES_WRITABLE

    package = (type(x).__module__ or "").split(".", 1)[0]
    return src.export_kind == "legacy" and package in LEGACY_CAPSULES_WRITABLE


# ----------------------------------------------------------------------------- wrappers


class LegacyOnly:
    """A producer that only ever sends legacy capsules (ignores max_version)."""

    def __init__(self, x: Any) -> None:
        self.x = x
        self.returned: str | None = None

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        kw = {}
        if stream is not None:
            kw["stream"] = stream
        cap = self.x.__dlpack__(**kw)
        self.returned = rc.capsule_name(cap)
        return cap


class Recorder:
    """Forwards everything, records what the consumer asked for and what it got."""

    def __init__(self, x: Any) -> None:
        self.x = x
        self.requests: list[dict] = []
        self.returned: list[str | None] = []

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __dlpack__(self, **kw):
        self.requests.append(dict(kw))
        cap = self.x.__dlpack__(**kw)
        self.returned.append(rc.capsule_name(cap))
        return cap


class Holder:
    """Hands out the same capsule on every call (C18)."""

    def __init__(self, x: Any) -> None:
        self.x = x
        self.cap: Any = None

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __dlpack__(self, **kw):
        if self.cap is None:
            self.cap = self.x.__dlpack__(**kw)
        return self.cap


WRAPPER_MODES = ("legacy", "versioned", "consumed", "raw_versioned", "raw_legacy")


def hand_over(src: Source, case: Case) -> Any:
    """The object the consumer receives."""
    x = src.x
    if case.mode in (
        "array",
        "list",
        *LIBRARY_MODES,
        *rc.HOSTILE_MODES,
        *rc.DEVICE_MODES,
    ):
        return x
    if not src.has_dlpack:
        raise Unsupported(f"{type(x).__name__} has no __dlpack__")
    if case.mode == "legacy":
        return LegacyOnly(x)
    if case.mode == "versioned":
        return Recorder(x)
    if case.mode == "consumed":
        return Holder(x)
    try:
        if case.mode == "raw_versioned":
            return x.__dlpack__(max_version=(1, 0))
        if case.mode == "raw_legacy":
            return x.__dlpack__()
    except (
        BufferError,
        TypeError,
    ) as e:  # read-only data refused to a legacy capsule; no max_version
        raise Unsupported(f"the producer gives no such capsule: {short(e)}") from e
    raise ValueError(case.mode)


# ----------------------------------------------------------------------------- judging


def _first_mismatch(got: np.ndarray, want: np.ndarray) -> str | None:
    if got.dtype.itemsize != want.dtype.itemsize:
        return "element sizes differ"
    g = (
        np.ascontiguousarray(got).reshape(-1).view(np.uint8).reshape(got.size, -1)
        if got.size
        else None
    )
    w = (
        np.ascontiguousarray(want).reshape(-1).view(np.uint8).reshape(want.size, -1)
        if want.size
        else None
    )
    if g is None or w is None:
        return None
    bad = np.nonzero((g != w).any(axis=1))[0]
    if bad.size == 0:
        return None
    i = int(bad[0])
    idx = np.unravel_index(i, want.shape) if want.ndim else ()
    gv = np.ascontiguousarray(got).reshape(-1)[i]
    wv = np.ascontiguousarray(want).reshape(-1)[i]
    return (
        f"{bad.size} of {want.size} elements differ; first at index {tuple(int(k) for k in idx)}: "
        f"got {gv!r}, expected {wv!r}"
    )


def judge(
    obs: Observed,
    src: Source,
    case: Case,
    *,
    expect_device: tuple[int, int] | None,
    copy: bool | None,
    export_ptr: int | None = -1,
    dlbridge_export: bool = False,
) -> list[tuple[str, str]]:
    """Findings (check, plain-words text) for a result compared with its source.

    ``export_ptr``: address of the object the result was exported from, for the IS_COPIED
    checks (default: the source's; differs when a dlbridge.Tensor stands in between).
    ``dlbridge_export``: the result is a capsule dlbridge exported, held to dlbridge's promise of
    C strides for zero-size arrays (C10); a peer's zero-size strides are never judged, since
    an array without elements has no layout.
    """
    out: list[tuple[str, str]] = []
    for p in obs.problems:
        out.append(("spec", p))
    want_dt = src.dtype
    if obs.dtype is not None and obs.dtype != want_dt:
        hint = ""
        if want_dt == "bool":
            hint = " (bool must stay bool: kDLBool, C24)"
        elif want_dt.startswith("uint") and obs.dtype.startswith("int"):
            hint = " (unsigned silently reinterpreted as signed, C27)"
        out.append(("dtype", f"dtype changed from {want_dt} to {obs.dtype}{hint}"))
    if obs.shape is not None and tuple(obs.shape) != tuple(src.ref.shape):
        out.append(("shape", f"shape changed from {tuple(src.ref.shape)} to {tuple(obs.shape)}"))
    if (
        obs.values is not None
        and not any(c in ("dtype", "shape") for c, _ in out)
        and obs.values.dtype.itemsize == src.ref.dtype.itemsize
    ):
        mm = _first_mismatch(obs.values, src.ref)
        if mm:
            out.append(("values", f"wrong values: {mm}"))
    if (
        expect_device is not None
        and obs.device is not None
        and tuple(obs.device) != tuple(expect_device)
    ):
        out.append(
            (
                "device",
                f"result is on "
                f"{rc.device_name(obs.device[0])}:{obs.device[1]}, "
                f"expected "
                f"{rc.device_name(expect_device[0])}:{expect_device[1]}",
            )
        )
    aliased = None
    if src.ptr is not None and obs.ptr is not None and src.size > 0:
        aliased = obs.ptr == src.ptr
    if aliased is True and copy is True:
        out.append(("copy", "copy=True but the result shares memory with the source"))
    if aliased is False and copy is False:
        out.append(
            (
                "copy",
                "copy=False but the result is a copy (it does not share memory with the source)",
            )
        )
    if aliased and src.readonly and obs.writable is True:
        out.append(
            (
                "readonly",
                f"a read-only source came out writable: writes through the {obs.kind} would change "
                "memory its owner promised not to change",
            )
        )
    if export_ptr == -1:
        export_ptr = src.ptr
    from_export = None
    if export_ptr is not None and obs.ptr is not None and src.size > 0:
        from_export = obs.ptr == export_ptr
    if obs.is_copied is True and from_export is True:
        out.append(
            (
                "spec",
                "IS_COPIED / is_copied is set but the result shares memory with what it came from",
            )
        )
    if (
        obs.is_copied is False
        and from_export is False
        and src.host
        and obs.kind in ("capsule", "dlbridge.Tensor")
    ):
        out.append(("spec", "a copy was made but IS_COPIED / is_copied is not set"))
    if (
        case.strict_strides
        and dlbridge_export
        and obs.kind == "capsule"
        and obs.strides is not None
        and obs.shape is not None
    ):
        want = rc.c_strides(tuple(obs.shape))
        bad = [i for i, n in enumerate(obs.shape) if n > 1 and obs.strides[i] != want[i]]
        if bad:
            out.append(
                (
                    "strides",
                    f"strides {tuple(obs.strides)} for shape "
                    f"{tuple(obs.shape)}; expected {want} (C10)",
                )
            )
    return out


def _reduce_findings(clib: Any, y: Any, src: Any) -> list[tuple[str, str]]:
    """C5: the consumer's own reduction over the imported array must equal the source's sum."""
    try:
        got = clib.reduce(y)
    except Unsupported:
        return []
    except Exception as e:  # noqa: BLE001
        return [("reduce", f"reducing the imported array raised {short(e)} (C5)")]
    want = complex(np.sum(src.ref.astype(np.float64)))
    if abs(got - want) > 1e-6 * max(1.0, abs(want)):
        return [("reduce", f"sum over the imported array is {got}, expected {want} (C5)")]
    return []


def judge_tensor(t: Any, obs: Observed, src: Source, case: Case) -> list[tuple[str, str]]:
    """dlbridge-only checks of the Tensor: the rules dlbridge documents for its own results."""
    out = []
    aliased = None
    if src.ptr is not None and obs.ptr is not None and src.size > 0:
        aliased = obs.ptr == src.ptr
    if aliased is True and src.declared_readonly and not t.readonly:
        out.append(("readonly", "the producer said read-only but the dlbridge.Tensor is writable"))
    if case.mode in ("legacy", "raw_legacy", "legacy_null_strides") and aliased and not t.readonly:
        out.append(
            (
                "readonly",
                "imported from a legacy capsule but not read-only (dlbridge imports legacy "
                "capsules read-only)",
            )
        )
    if aliased is False and t.readonly and t.is_copied:
        out.append(("readonly", "dlbridge's copies are writable, but the Tensor is read-only"))
    # On a device dlbridge cannot reach (oneAPI...) the copy is the producer's, made in the
    # producer's order; DLPack has no way to ask for another, so only reachable memory is held
    # to the C-contiguous rule.
    reachable = t.device.type in (1, 2, 3, 13)
    if case.copy is True and not t.is_c_contiguous and t.size > 1 and reachable:
        out.append(
            ("layout", "dlbridge's copy=True returns a C-contiguous Tensor, this one is not")
        )
    if t.size > 0:
        shape, strides = tuple(t.shape), tuple(t.strides)
        for order, got in (("C", t.is_c_contiguous), ("F", t.is_f_contiguous)):
            want = (c_contiguous if order == "C" else f_contiguous)(shape, strides)
            if bool(got) != want:
                out.append(
                    (
                        "layout",
                        f"is_{order.lower()}_contiguous is {got} "
                        f"for shape {shape}, strides {strides} (C4)",
                    )
                )
    if aliased and src.elem_strides is not None and src.size > 0:
        bad = [i for i, n in enumerate(t.shape) if n > 1 and t.strides[i] != src.elem_strides[i]]
        if bad:
            out.append(
                ("strides", f"strides {tuple(t.strides)}, the producer's are {src.elem_strides}")
            )
    if any(op[0] == "misalign" for op in case.recipe.ops) and t.size and t.data_ptr % t.itemsize:
        out.append(
            (
                "alignment",
                f"data at {t.data_ptr:#x} is not aligned to {t.itemsize} "
                f"bytes (dlbridge realigns by a copy)",
            )
        )
    if obs.device is not None and rc.host_readable(obs.device):
        try:
            mv = memoryview(t)
        except BufferError:
            pass
        except Exception as e:  # noqa: BLE001
            out.append(
                (
                    "buffer",
                    f"memoryview(tensor) raised {short(e)} (expected success or BufferError, C30)",
                )
            )
        else:
            try:
                if mv.itemsize != t.itemsize:
                    out.append(("buffer", f"buffer itemsize {mv.itemsize} != {t.itemsize} (C30)"))
                try:
                    sz = struct.calcsize(mv.format)
                except struct.error:
                    sz = None
                if sz is not None and sz != mv.itemsize:
                    out.append(
                        (
                            "buffer",
                            f"buffer format {mv.format!r} has size {sz}, "
                            f"itemsize is {mv.itemsize} (C30)",
                        )
                    )
                if tuple(mv.shape or ()) != tuple(t.shape):
                    out.append(("buffer", f"buffer shape {mv.shape} != {tuple(t.shape)}"))
                if t.readonly and not mv.readonly:
                    out.append(("readonly", "memoryview of a read-only Tensor is writable"))
            finally:
                mv.release()
    return out


# ----------------------------------------------------------------------------- routes


def result(
    status: str,
    detail: str,
    *,
    fault: str | None = None,
    check: str | None = None,
    stage_: str | None = None,
) -> dict:
    r = {"status": status, "detail": detail, "fault": fault, "check": check}
    if stage_:
        r["stage"] = stage_
    return r


def peer_fault(pname: str, cname: str) -> str:
    if cname == "dlpack-ref":
        return "producer"
    if pname == "dlpack-ref":
        return "consumer"
    return "peers"


def required_refusal(case: Case, src: Source, clib: Adapter) -> str | None:
    """Why the consumer must refuse (BufferError), or None."""
    if case.refuse:
        return case.refuse
    if not src.host:
        dev = rc.device_name(src.device[0])
        if case.device == "cpu" and case.copy is False:
            return f"the data is on {dev}; reaching the CPU needs a copy but copy=False (C39)"
        if case.device is None and src.device[0] not in clib.devices:
            return (f"the data is on {dev} and {clib.name} lives on the CPU; without "
                    'device="cpu" it must refuse (C36)')
    if case.copy is False and src.readonly and not clib.readonly_results:
        return (f"read-only data, copy=False, and {clib.name} has no read-only arrays: aliasing "
                "would make it writable")
    return None


def required_refusal_dlbridge(case: Case, src: Source) -> str | None:
    if case.refuse:
        return case.refuse
    if not src.host and case.device == "cpu" and case.copy is False:
        return "the data is on another device; reaching the CPU needs a copy but copy=False (C39)"
    if case.copy is False and any(op[0] == "misalign" for op in case.recipe.ops):
        return "misaligned data needs a realigning copy but copy=False (C40)"
    return None


def classify_exception(
    e: BaseException, required: str | None, case: Case, obj: Any, who: str
) -> tuple[str, str, str | None]:
    """(status, detail, check) for an exception raised by ``who``."""
    if case.expect_type_error:
        if isinstance(e, TypeError):
            return PASS, f"{who} raised TypeError as it should: {short(e)}", None
        return (
            ERROR,
            f"{who} raised {short(e)}; expected TypeError (the object has no exchange protocol)",
            "exception",
        )
    if not hasattr(obj, "__dlpack__") and not who.startswith("dlbridge"):
        what = "a raw capsule" if rc.is_capsule(obj) else f"a {type(obj).__name__} (no __dlpack__)"
        return UNSUPPORTED, f"{who} does not take {what}: {short(e)}", None
    if required:
        if isinstance(e, BufferError):
            return PASS, f"refused as it must ({required}): {short(e)}", None
        return (
            ERROR,
            f"{who} raised {short(e)}; expected BufferError because {required}",
            "exception",
        )
    if isinstance(e, BufferError):
        return UNSUPPORTED, f"{who} refused: {short(e)}", None
    if isinstance(e, (TypeError, AttributeError)) and not hasattr(obj, "__dlpack__"):
        return UNSUPPORTED, f"{who} takes only objects with __dlpack__: {short(e)}", None
    return ERROR, f"{who} raised {short(e)} instead of BufferError", "exception"


def _expect_device(case: Case, src: Source, stage_: str) -> tuple[int, int] | None:
    if case.device == "cpu":
        return (1, 0)
    if case.device is None:
        return src.device
    return None  # the consumer's own device: not checked


def _describe_pass(obs: Observed, src: Source, copy_: bool | None) -> str:
    bits = []
    if src.ptr is not None and obs.ptr is not None and src.size > 0:
        bits.append("zero-copy" if obs.ptr == src.ptr else "copied")
    if obs.writable is False:
        bits.append("read-only result")
    elif obs.writable is None:
        bits.append("writability unknown")
    if obs.notes:
        bits.append(obs.notes[0])
    return "; ".join(bits) or "ok"


class Ctx:
    def __init__(self) -> None:
        self.libs = by_name()
        self.sources: dict[tuple[str, str], Any] = {}
        self.direct: dict[str, dict] = {}
        self.broken: dict[str, str] = {}  # library -> why it cannot be used in this process

    def source(self, pname: str, case: Case) -> Source:
        key = (pname, case.id)
        if case.mode in (*rc.HOSTILE_MODES, *self.libs[pname].fresh_modes):
            return build_source(self.libs[pname], case)  # fresh: counts deleters per unit
        if key not in self.sources:
            try:
                self.sources[key] = build_source(self.libs[pname], case)
            except Unsupported as e:
                self.sources[key] = e
            except Exception as e:  # noqa: BLE001
                self.sources[key] = Unsupported(f"could not build it: {short(e)}")
        s = self.sources[key]
        if isinstance(s, Exception):
            raise s
        return s


def _consume(clib: Adapter, obj: Any, case: Case, warns: list) -> Any:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            return clib.consume(obj, device=case.device, copy=case.copy)
        finally:
            warns.extend(str(x.category.__name__) + ": " + str(x.message)[:160] for x in w)


def _warn_findings(case: Case, warns: list) -> list[tuple[str, str]]:
    loud = [x for x in warns if x.startswith(("UserWarning", "RuntimeWarning"))]
    if loud and "C16" in case.refs:
        return [("warning", f"emitted a warning on import (C16: no warning spam): {loud[0]}")]
    return []


def _lib_of(e: BaseException) -> str:
    return (type(e).__module__ or "").split(".")[0]


def _exception_fault(e: BaseException, pname: str, cname: str, src: Source, case: Case) -> str:
    """Who raised it: the library whose module defines the exception, else ask the producer."""
    if cname == "dlpack-ref":
        return "producer"
    if pname == "dlpack-ref":
        return "consumer"
    lib = library_of_module(_lib_of(e))
    if lib == pname and lib != cname:
        return "producer"
    if lib == cname and lib != pname:
        return "consumer"
    if isinstance(e, TypeError) and _bad_device_answer(src.x) is not None:
        return "producer"  # the consumer choked on the producer's malformed __dlpack_device__
    kw: dict[str, Any] = {"copy": case.copy}
    if case.device == "cpu":
        kw["device"] = "cpu"
    perr = _producer_export_error(src, case, kw)
    if perr is not None and type(perr) is type(e):
        return "producer"
    if perr is None and case.mode in (
        "array",
        "legacy",
        "versioned",
        *LIBRARY_MODES,
    ):
        return "consumer"
    return "peers"


def _readonly_fault(src: Source, pname: str, cname: str) -> str:
    """A writable alias of read-only data: the consumer's fault when the producer said so."""
    if src.export_kind == "versioned" and src.export_flags & rc.READ_ONLY:
        return "consumer"  # it ignored the READ_ONLY flag
    if src.export_kind == "legacy":
        return "producer"  # immutable memory in a legacy capsule (C13)
    if src.export_kind == "versioned":
        return "producer"  # read-only memory without the READ_ONLY flag (C12)
    return peer_fault(pname, cname)


def run_direct(ctx: Ctx, pname: str, cname: str, case: Case) -> dict:
    clib = ctx.libs[cname]
    src = ctx.source(pname, case)
    obj = hand_over(src, case)
    required = required_refusal(case, src, clib)
    producer_must_refuse = case.mode == "legacy" and case.refuse is not None
    fault = peer_fault(pname, cname)
    warns: list[str] = []
    stage("consumer")
    try:
        y = _consume(clib, obj, case, warns)
    except Unsupported as e:
        return result(UNSUPPORTED, str(e))
    except Exception as e:  # noqa: BLE001
        st, detail, check = classify_exception(e, required, case, obj, f"{cname}.from_dlpack")
        if st == PASS and case.mode == "legacy" and isinstance(obj, LegacyOnly):
            detail = f"the producer refused the legacy capsule: {short(e)}"
        if st in (FAIL, ERROR):
            fault = _exception_fault(e, pname, cname, src, case)
        if st == PASS:
            check = "right_refusal"  # the dlbridge route may refuse here too
        if st == UNSUPPORTED and case.peers_can and isinstance(e, BufferError):
            return _peers_could(detail, case)
        if st == UNSUPPORTED and case.must_accept and isinstance(e, BufferError):
            return result(FAIL, f"{detail}; it must take it: {case.must_accept}", fault=fault,
                          check="must_accept")
        return result(st, detail, fault=fault if st in (FAIL, ERROR) else None, check=check)
    stage("inspect")
    try:
        obs = observe(y)
    except BufferError as e:
        if not required:
            raise
        # it took what it must refuse, and made something the reference consumer cannot read
        return result(FAIL, f"accepted although it must refuse: {required}; its result is "
                            f"unreadable: {short(e)}", fault=fault, check="accepted")
    findings = judge(
        obs, src, case, expect_device=_expect_device(case, src, "direct"), copy=case.copy
    )
    findings += _warn_findings(case, warns)
    notes = []
    aliased = src.ptr is not None and obs.ptr == src.ptr
    if isinstance(obj, LegacyOnly) and src.readonly and obj.returned == "dltensor" and aliased:
        findings.insert(
            0,
            (
                "readonly",
                f"{pname} exported read-only memory in a legacy capsule, which cannot say "
                f"read-only (C13)",
            ),
        )
        fault = "producer"
        required = None  # the producer should have refused; the consumer could not know
    if isinstance(obj, Recorder):
        asked = [r.get("max_version") for r in obj.requests]
        notes.append(
            f"{cname} asked max_version={asked[0] if asked else None}, got "
            f"{obj.returned[0] if obj.returned else None}"
        )
        if asked and asked[0] is None:
            notes.append(f"{cname} only asks for legacy capsules (cannot receive read-only flags)")
    if case.reduce and not findings:
        findings += _reduce_findings(clib, y, src)
    if case.mode == "consumed" and not findings:
        stage("consumer (second import)")
        try:
            y2 = _consume(clib, obj, case, warns)
        except BufferError as e:
            notes.append(f"second import refused: {short(e)}")
        except Exception as e:  # noqa: BLE001
            del y
            return result(
                ERROR,
                f"importing an already consumed capsule raised "
                f"{short(e)}; expected BufferError (C18)",
                fault="consumer",
                check="exception",
            )
        else:
            del y2
            findings.append(
                (
                    "consumed",
                    "imported the same capsule twice (use after free / double free risk, C18)",
                )
            )
            fault = "consumer"
    del y
    if required and not findings and not producer_must_refuse:
        findings.append(("accepted", f"accepted although it must refuse: {required}"))
    if findings and findings[0][0] == "readonly" and fault == peer_fault(pname, cname):
        fault = _readonly_fault(src, pname, cname)
    if findings:
        r = result(FAIL, "; ".join(t for _, t in findings), fault=fault, check=findings[0][0])
        r["checks"] = [c for c, _ in findings]
        return r
    if required and not producer_must_refuse:
        return result(
            FAIL, f"accepted although it must refuse: {required}", fault=fault, check="accepted"
        )
    return result(PASS, "; ".join([_describe_pass(obs, src, case.copy)] + notes))


def _peers_could(detail: str, case: Case) -> dict:
    """A refusal the peers have the means to avoid (``case.peers_can``): a finding against them,
    not an unsupported pair."""
    return result(
        FAIL, f"{detail}; the peers could exchange it: {case.peers_can}", fault="peers",
        check="peers_can",
    )


def _verify_tensor_export(t: Any, src: Source, case: Case) -> set[str]:
    """Checks the reference consumer fails on the Tensor's own export ({'error'} if it raised)."""
    kw: dict[str, Any] = {}
    if case.device == "cpu":
        kw["dl_device"] = (1, 0)
    if case.copy is not None:
        kw["copy"] = case.copy
    try:
        obs = observe(ref_consume(t, **kw))
    except BufferError:
        return set()
    except Exception:  # noqa: BLE001
        return {"error"}
    return {c for c, _ in judge(obs, src, case, expect_device=None, copy=None,
                                dlbridge_export=True)}


def _bad_device_answer(obj: Any) -> BaseException | None:
    """The producer's ``__dlpack_device__()`` when it is not two ints (paddle 3.3 answers
    ``(kDLCPU, None)``), as the TypeError a consumer reading it gets; None when it is fine."""
    try:
        kind, ident = obj.__dlpack_device__()
        if not isinstance(kind, int) or not isinstance(ident, int):
            raise TypeError(
                f"{type(obj).__name__}.__dlpack_device__() returned ({kind!r}, {ident!r}); "
                "the DLPack protocol wants two ints"
            )
    except AttributeError:
        return None
    except Exception as e:  # noqa: BLE001
        return e
    return None


def _producer_export_error(src: Source, case: Case, kw: dict) -> BaseException | None:
    """Ask the producer for a capsule the way dlbridge does; the exception it raises, if any."""
    if case.mode in ("consumed", "raw_versioned", "raw_legacy", "list"):
        return None
    try:
        obj = hand_over(src, case)
    except Exception as e:  # noqa: BLE001
        return e
    if not hasattr(obj, "__dlpack__"):
        return None
    if (
        kw.get("device") is not None or kw.get("copy") is True
    ):  # dlbridge then asks where the data is
        bad = _bad_device_answer(obj)
        if bad is not None:
            return bad
    try:
        cap = rc.export_capsule(
            obj, dl_device=(1, 0) if kw.get("device") == "cpu" else None, copy=kw.get("copy")
        )
    except Exception as e:  # noqa: BLE001
        return e
    del cap
    return None


@dataclass
class _DlbridgeUnit:
    """One unit of the ``dlbridge`` route: what its stages share."""

    pname: str
    cname: str
    case: Case
    clib: Adapter
    src: Source
    obj: Any  # what the producer hands over
    direct: dict  # the outcome of the same unit's direct route ({} when unknown)
    kw: dict[str, Any]  # the copy= / device= given to dlbridge.from_dlpack
    req1: str | None  # the refusal dlbridge.from_dlpack must make, if any


def run_dlbridge(ctx: Ctx, pname: str, cname: str, case: Case) -> dict:
    """``consumer.from_dlpack(dlbridge.from_dlpack(x))``, in stages: dlbridge's import (and,
    for a consumed capsule, its second import), the checks of the Tensor, the consumer's
    import of the Tensor, the checks of its result; each failure is attributed to the one at
    fault."""
    import dlbridge

    src = ctx.source(pname, case)
    kw: dict[str, Any] = {}
    if case.copy is not None:
        kw["copy"] = case.copy
    if case.device == "cpu":
        kw["device"] = "cpu"
    u = _DlbridgeUnit(
        pname, cname, case, ctx.libs[cname], src, hand_over(src, case),
        ctx.direct.get(f"{pname}|{cname}|{case.id}", {}), kw, required_refusal_dlbridge(case, src),
    )
    stage("dlbridge.from_dlpack")
    try:
        t = dlbridge.from_dlpack(u.obj, **kw)
    except Exception as e:  # noqa: BLE001
        return _dlbridge_import_failed(u, e)
    notes: list[str] = []
    refused = _dlbridge_import_accepted(u, notes) or _dlbridge_second_import(u)
    if refused is not None:
        return refused
    stage("inspect dlbridge.Tensor")
    obs_t = observe(t)
    wrong = _judge_dlbridge_tensor(u, t, obs_t)
    if wrong is not None:
        return wrong
    return _consumer_of_tensor(u, t, obs_t, notes)


def _dlbridge_import_failed(u: _DlbridgeUnit, e: Exception) -> dict:
    """Stage 1 raised: a required refusal, the producer's fault (its own export fails the same
    way), or dlbridge's."""
    case, src, req1 = u.case, u.src, u.req1
    st, detail, check = classify_exception(e, req1, case, u.obj, "dlbridge.from_dlpack")
    if st == PASS:
        return result(PASS, detail)
    where = "dlbridge.from_dlpack"
    perr = _producer_export_error(src, case, u.kw)
    if perr is not None and type(perr) is type(e):
        if isinstance(e, BufferError):
            return result(UNSUPPORTED, f"the producer cannot export it: {short(perr)}")
        return result(ERROR, f"the producer's __dlpack__ raised {short(perr)}"
                      + (" instead of BufferError" if req1 else "") + "; dlbridge passed it on",
                      fault="producer", check="exception", stage_=where)
    if src.export_error is not None and type(src.export_error) is type(e):
        if isinstance(e, BufferError):
            return result(UNSUPPORTED,
                          f"the producer cannot export it: {short(src.export_error)}")
        return result(ERROR, f"the producer's __dlpack__ raised {short(src.export_error)}; "
                      "dlbridge passed it on", fault="producer", check="exception", stage_=where)
    if st == UNSUPPORTED or (isinstance(e, BufferError) and not req1):
        return result(ERROR, "dlbridge.from_dlpack refused data its producer can export: "
                      f"{short(e)}", fault="dlbridge", check="refused", stage_=where)
    return result(st, detail, fault="dlbridge", check=check or "exception", stage_=where)


def _dlbridge_import_accepted(u: _DlbridgeUnit, notes: list[str]) -> dict | None:
    """Stage 1 succeeded: a failure if dlbridge had to refuse (a legacy capsule of read-only
    memory is the producer's C13 bug, noted)."""
    if u.req1 and u.case.mode == "legacy":
        # the producer should have refused (C13); dlbridge must then keep the data read-only
        if isinstance(u.obj, LegacyOnly) and u.obj.returned == "dltensor":
            notes.append(f"{u.pname} sent read-only memory in a legacy capsule (its C13 bug); "
                         "dlbridge kept it read-only")
    elif u.req1:
        return result(FAIL, f"dlbridge.from_dlpack accepted although it must refuse: {u.req1}",
                      fault="dlbridge", check="accepted", stage_="dlbridge.from_dlpack")
    return None


def _dlbridge_second_import(u: _DlbridgeUnit) -> dict | None:
    """C18: importing an already consumed capsule again must raise BufferError."""
    if u.case.mode != "consumed":
        return None
    import dlbridge

    stage("dlbridge.from_dlpack (second import)")
    try:
        dlbridge.from_dlpack(u.obj, **u.kw)
    except BufferError:
        return None
    except Exception as e:  # noqa: BLE001
        return result(ERROR, "dlbridge.from_dlpack of an already consumed capsule raised "
                      f"{short(e)}; expected BufferError (C18)", fault="dlbridge",
                      check="exception", stage_="dlbridge.from_dlpack")
    return result(FAIL, "dlbridge.from_dlpack imported the same capsule twice (C18)",
                  fault="dlbridge", check="consumed", stage_="dlbridge.from_dlpack")


def _judge_dlbridge_tensor(u: _DlbridgeUnit, t: Any, obs_t: Observed) -> dict | None:
    """The checks of the Tensor dlbridge made (the producer's fault when only the checks its
    own export fails with the reference consumer fail)."""
    case, src = u.case, u.src
    f1 = judge(obs_t, src, case, expect_device=(1, 0) if case.device == "cpu" else src.device,
               copy=case.copy)
    f1 += judge_tensor(t, obs_t, src, case)
    if not f1:
        return None
    prod = [f for f in f1 if f[0] in src.ref_checks]
    fault = "producer" if prod and len(prod) == len(f1) else "dlbridge"
    return result(FAIL, "dlbridge.Tensor: " + "; ".join(x for _, x in f1), fault=fault,
                  check=f1[0][0], stage_="dlbridge.from_dlpack")


def _consumer_of_tensor(u: _DlbridgeUnit, t: Any, obs_t: Observed, notes: list[str]) -> dict:
    """Stage 2: the consumer takes the dlbridge Tensor; its result is judged."""
    case, src, clib, cname = u.case, u.src, u.clib, u.cname
    req2 = required_refusal(case, src, clib)
    if req2 == case.refuse:
        req2 = None  # stage 1 already dealt with it
    warns: list[str] = []
    stage("consumer(dlbridge.Tensor)")
    try:
        y = _consume(clib, t, case, warns)
    except Unsupported as e:
        return result(UNSUPPORTED, str(e))
    except Exception as e:  # noqa: BLE001
        return _consumer_refused(u, t, obs_t, e, req2)
    stage("inspect")
    obs = observe(y)
    f2 = judge(obs, src, case, expect_device=_expect_device(case, src, "dlbridge"),
               copy=case.copy, export_ptr=obs_t.ptr, dlbridge_export=True)
    f2 += _warn_findings(case, warns)
    if case.reduce and not f2:
        f2 += _reduce_findings(clib, y, src)
    if req2 and not f2:
        f2.append(("accepted",
                   f"{cname} accepted the dlbridge.Tensor although it must refuse: {req2}"))
    del y
    if not f2:
        return result(PASS, "; ".join(["dlbridge.Tensor ok", _describe_pass(obs, src, case.copy)]
                                      + notes))
    fault = _consumer_findings_fault(u, t, f2)
    return result(FAIL, "; ".join(x for _, x in f2), fault=fault, check=f2[0][0],
                  stage_="consumer")


def _consumer_refused(u: _DlbridgeUnit, t: Any, obs_t: Observed, e: Exception,
                      req2: str | None) -> dict:
    """Stage 2 raised: a required refusal, a limit the checker knows (a device dlbridge cannot
    read, a dtype the consumer's DLPack version lacks, read-only data for a legacy consumer),
    or a failure attributed by what the direct route and the reference consumer do."""
    case, cname, pname = u.case, u.cname, u.pname
    who = f"{cname}.from_dlpack(dlbridge.Tensor)"
    st, detail, check = classify_exception(e, req2, case, t, who)
    if st == PASS:
        return result(PASS, detail)
    if (isinstance(e, BufferError) and u.direct.get("status") == PASS
            and "right_refusal" in u.direct.get("checks", [])):
        return result(PASS, f"refused, as the direct exchange rightly is: {short(e)}")
    msg = str(e).lower()
    on_device = obs_t.device is not None and not rc.host_readable(obs_t.device)
    if isinstance(e, BufferError) and on_device:
        assert obs_t.device is not None
        where = rc.device_name(obs_t.device[0])
        return result(UNSUPPORTED, f"dlbridge cannot move {where} memory itself: pass "
                      "device=\"cpu\" to dlbridge.from_dlpack so that the producer copies "
                      f"({short(e)})")
    code = rc.DTYPE_CODES.get(obs_t.dtype or "", (0, 0))[0]
    if isinstance(e, BufferError) and code in rc.CODES_SINCE_1_1 and "1.1" in msg:
        return result(UNSUPPORTED, f"{cname} asks for a DLPack < 1.1 capsule and {obs_t.dtype} "
                      "needs 1.1; dlbridge refuses as C26 requires (a direct exchange only "
                      f"works if the producer breaks that rule): {short(e)}")
    if cname == "dlpack-ref":
        return result(ERROR, f"the reference consumer cannot read dlbridge's export: {short(e)}",
                      fault="dlbridge", check="export", stage_="consumer")
    legacy_words = "read-only" in msg or "readonly" in msg or "legacy" in msg
    if isinstance(e, BufferError) and t.readonly and legacy_words:
        return result(UNSUPPORTED, f"{cname} asks for a legacy capsule and dlbridge will not "
                      f"send read-only data that way (C13): {short(e)}")
    if u.direct.get("status") == PASS:
        return result(ERROR, f"{cname}.from_dlpack takes the {pname} array directly but not the "
                      f"dlbridge.Tensor made from it: {short(e)}", fault="dlbridge",
                      check=check or "refused", stage_="consumer")
    bad = _verify_tensor_export(t, u.src, case)
    fault = "dlbridge" if bad else "consumer"
    if st == UNSUPPORTED:
        return result(UNSUPPORTED, detail)
    return result(st, detail, fault=fault, check=check, stage_="consumer")


def _consumer_findings_fault(u: _DlbridgeUnit, t: Any, f2: list[tuple[str, str]]) -> str:
    """Who is at fault for the findings on the consumer's result: the reference consumer is
    trusted; otherwise, did the consumer do the same directly, and does the Tensor's own
    export pass? (A finding about a legacy export of read-only memory is appended to f2.)"""
    if u.cname == "dlpack-ref":
        return "dlbridge"
    direct_checks = set(u.direct.get("checks", []))
    fault = "consumer"
    extra: list[tuple[str, str]] = []
    for check, _ in f2:
        if check in direct_checks:
            continue
        if check == "readonly":
            if t.readonly and _legacy_export_aliases(t):
                fault = "dlbridge"
                extra.append(("readonly", "Tensor.__dlpack__() (legacy) exported read-only "
                                          "memory without a copy"))
            continue
        bad = _verify_tensor_export(t, u.src, u.case)
        if check in bad or "error" in bad:
            fault = "dlbridge"
    f2.extend(extra)
    return fault


def _legacy_export_aliases(t: Any) -> bool:
    """Whether the Tensor's legacy capsule hands out its own memory (a refusal or a copy, as
    read-only memory needs, is not an alias)."""
    try:
        info = rc.read_capsule(t.__dlpack__(), read_values=False)
    except Exception:  # noqa: BLE001 - a refusal of any kind is no alias
        return False
    return bool(info.size) and info.data_ptr == t.data_ptr


def run_audit(src: Source, case: Case, route: str) -> dict:
    """The producer audit ``case.mode`` ("audit:KIND") of the producer's array (route
    ``direct``) or of ``dlbridge.from_dlpack`` of it, a dlbridge Tensor as the producer (route
    ``dlbridge``); findings are against that producer."""
    kind = case.mode.split(":", 1)[1]
    if not src.has_dlpack:
        raise Unsupported(f"{type(src.x).__name__} has no __dlpack__")
    obj, ptr, device, fault = src.x, src.ptr, src.device, "producer"
    if route == "dlbridge":
        import dlbridge

        stage("dlbridge.from_dlpack")
        try:
            obj = dlbridge.from_dlpack(src.x)
        except Exception as e:  # its imports are judged by the other cases
            raise Unsupported(f"dlbridge does not import it: {short(e)}") from e
        kind_, id_ = obj.__dlpack_device__()
        ptr, device, fault = obj.data_ptr, (int(kind_), int(id_)), "dlbridge"
    values = src.ref if rc.host_readable(device) else None
    stage("inspect dlbridge.Tensor" if route == "dlbridge" else "consumer")
    try:
        given = src.device if route == "dlbridge" else None
        findings = audit.run(kind, audit.Audited(obj, ptr, device, values, src.readonly, given))
    except audit.Refused as e:
        return result(PASS, f"refused as the spec allows: {e}")
    except BufferError as e:
        findings = [("capsule", f"the reference consumer refused its capsule: {short(e)}")]
    if findings:
        r = result(FAIL, "; ".join(t for _, t in findings), fault=fault, check=findings[0][0])
        r["checks"] = [c for c, _ in findings]
        return r
    return result(PASS, f"{case.title}: yes")


def run_unit(ctx: Ctx, pname: str, cname: str, case: Case, route: str) -> dict:
    for name in (pname, cname):
        if name in ctx.broken:
            return result(
                UNSUPPORTED, f"could not load {name} here: {ctx.broken[name]}", check="import"
            )
    stage("make")
    try:
        src = ctx.source(pname, case)
        if case.mode in WRAPPER_MODES and not src.has_dlpack:
            raise Unsupported(f"{type(src.x).__name__} has no __dlpack__")
    except Unsupported as e:
        return result(UNSUPPORTED, f"{pname} cannot express this case: {e}")
    ref_arrays = []
    if isinstance(src.x, rc.RefArray):
        ref_arrays.append((src.x, src.x.exports, src.x.deleter_calls))
    try:
        if case.mode.startswith("audit:"):
            r = run_audit(src, case, route)
        elif case.judge is not None:
            from . import consumers

            r = consumers.run(ctx, pname, cname, case, route)
        elif route == "direct":
            r = run_direct(ctx, pname, cname, case)
        else:
            r = run_dlbridge(ctx, pname, cname, case)
    except Unsupported as e:
        r = result(UNSUPPORTED, str(e))
    if ref_arrays:
        for ra, _, _ in ref_arrays:
            ra.finish()
        # a full collection is slow with the big libraries loaded: only when a deleter is missing
        if any(ra.deleter_calls - d0 < ra.exports - e0 for ra, e0, d0 in ref_arrays):
            gc.collect()
    if ref_arrays and r["status"] in (PASS, FAIL, ERROR, UNSUPPORTED) and case.mode != "consumed":
        for ra, e0, d0 in ref_arrays:
            exports = ra.exports - e0
            calls = ra.deleter_calls - d0
            if calls != exports:
                what = (
                    "never called (leak)"
                    if calls < exports
                    else f"called {calls} times for {exports} capsule(s) (double free)"
                )
                fault = "dlbridge" if route == "dlbridge" else "consumer"
                extra = f"deleter {what} (C9/C17/C19)"
                # a double free corrupts this process's memory: the runner blames a later crash
                # in it on the library that did it
                checks = ["deleter", "double_free"] if calls > exports else ["deleter"]
                if r["status"] in (FAIL, ERROR):
                    r["detail"] += "; " + extra
                    r["checks"] = [*(r.get("checks") or [r["check"]]), *checks]
                else:
                    r = result(
                        FAIL,
                        extra + (f"; before that: {r['detail']}" if r["detail"] else ""),
                        fault=fault,
                        check="deleter",
                    )
                    r["checks"] = checks
    if ref_arrays:
        rc.release_all()
    return r


def main() -> int:
    global _CURRENT_UNIT
    job = json.loads(sys.stdin.read())
    units = job["units"]
    use_names(job.get("adapters", []))  # the same adapters from outside dlbridge as the runner
    ctx = Ctx()
    ctx.direct.update(job.get("direct", {}))
    # import every library of the job up front (a crash here is reported per unit)
    names = sorted({u[0] for u in units} | {u[1] for u in units})
    import dlbridge  # noqa: F401

    for n in names:
        lib = ctx.libs.get(n)
        if lib is not None and not lib.builtin:
            emit({"event": "stage", "unit": -1, "stage": f"import {n}"})
            try:
                lib.load()
            except Exception as e:  # noqa: BLE001
                ctx.broken[n] = short(e)
                emit({"event": "import_error", "library": n, "error": short(e)})
    emit({"event": "ready"})
    for i, (pname, cname, case_id, route) in enumerate(units):
        _CURRENT_UNIT = i
        emit({"event": "start", "unit": i})
        case = BY_ID[case_id]
        try:
            r = run_unit(ctx, pname, cname, case, route)
        except Exception as e:  # noqa: BLE001
            tb = traceback.format_exc(limit=4).strip().splitlines()
            r = result(
                ERROR,
                f"checker error: {short(e)} [{' | '.join(tb[-3:])}]",
                fault="checker",
                check="checker",
            )
        checks = r.pop("checks", None) or ([r["check"]] if r.get("check") else [])
        if route == "direct":
            ctx.direct[f"{pname}|{cname}|{case_id}"] = {"status": r["status"], "checks": checks}
        emit({"event": "result", "unit": i, "result": r, "checks": checks})
    return 0


if __name__ == "__main__":
    # keep the JSON stream clean: libraries that print go to stderr
    _OUT = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.exit(main())
