"""The producer audit: what a library's ``__dlpack__`` hands out, asked the way the spec allows.

A consumer can only be as right as the capsules it gets. Each audit asks the producer's object
for capsules and reads them with the reference consumer (:func:`refcapsule.read_capsule`), and
returns findings against the producer: ``(check, text)`` pairs, empty when it did right.

- ``two_capsules``: two ``__dlpack__`` calls give two distinct capsules, each consumable (a
  producer that caches one capsule hands the second consumer a consumed one).
- ``legacy_request``: a request without ``max_version``, or with a major version below 1, gets a
  legacy capsule or a BufferError, never a versioned capsule the caller cannot parse.
- ``copy_true``: ``copy=True`` never aliases the producer's memory, and the copy says so
  (``IS_COPIED``), or the producer refuses with BufferError.
- ``copy_false``: ``copy=False`` aliases the producer's memory or refuses with BufferError.
- ``dl_device``: ``dl_device`` naming the array's own device, or the CPU, is honoured or refused
  with BufferError; never another exception family, never a capsule on another device.
- ``device_claim``: the device ``__dlpack_device__`` and the capsule name is where the memory is,
  as a CUDA driver tells (:mod:`dlbridge_check.deviceclaim`; unsupported without a driver).
- ``copy_false_elsewhere``: ``copy=False`` with ``dl_device`` naming a device the data can only
  reach by a copy (CUDA for host memory, the CPU for device memory) is refused with BufferError,
  the one exception the standard names for it, never ValueError or RuntimeError.
- ``legacy_then_retry``: what a consumer built for legacy capsules does (nanobind, NumPy's own
  scalars): ``__dlpack__()`` without ``max_version`` and, on BufferError only, again with it.
  The sequence must end with a capsule holding the array's values; a legacy capsule that
  aliases read-only memory is a finding (a legacy capsule cannot say read-only).

A BufferError from ``__dlpack__`` is a right answer to every request audited here (the
producer may be unable to copy, to move or to export legacy capsules): :class:`Refused`, which
the worker reports as a pass. An old producer whose ``__dlpack__`` rejects a keyword with
TypeError cannot be audited for it: :class:`Unsupported`. A capsule the reference consumer
refuses (BufferError from :func:`refcapsule.read_capsule`) is a finding of the worker's. Only the
standard library, NumPy and the reference consumer are used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import refcapsule as rc
from .adapters.base import Unsupported
from .deviceclaim import device_claim

Finding = tuple[str, str]


class Refused(Exception):
    """The producer refused an audited request with BufferError (a right answer)."""

#: what the reference consumer asks for
ASK = rc.REF_VERSION


class Audited:
    """The object audited and what its capsules must show: the address of its first element
    (None when unknown), its device and its values (None for memory the host cannot read).
    ``given``: for an object that re-exports another producer's memory, the device that
    producer claimed (None otherwise)."""

    def __init__(self, obj: Any, ptr: int | None, device: tuple[int, int],
                 values: np.ndarray | None, readonly: bool = False,
                 given: tuple[int, int] | None = None) -> None:
        self.obj = obj
        self.ptr = ptr
        self.device = device
        self.values = values
        self.given = given
        #: nobody may write the array's memory (the truth, not what the producer says)
        self.readonly = readonly

    def export(self, **kw: Any) -> Any:
        """``__dlpack__(**kw)``: a BufferError is :class:`Refused`, a TypeError (an old producer
        rejecting a keyword) :class:`Unsupported`."""
        shown = ", ".join(f"{k}={v!r}" for k, v in kw.items()) or "no arguments"
        try:
            return self.obj.__dlpack__(**kw)
        except BufferError as e:
            raise Refused(f"__dlpack__({shown}) refused with BufferError: {_short(e)}") from e
        except TypeError as e:
            raise Unsupported(f"its __dlpack__ does not take {shown}: {_short(e)}") from e

    def export_any(self) -> Any:
        """A capsule as a current consumer asks for it: ``max_version`` first, without keywords
        when the producer is too old for them."""
        try:
            return self.export(max_version=ASK)
        except Unsupported:
            return self.export()

    def read(self, cap: Any) -> rc.CapsuleInfo:
        """Read and consume ``cap``, with its values when the host can read them."""
        device = rc.read_capsule(cap, read_values=False, consume=False).device
        host = rc.host_readable(device)
        return rc.read_capsule(cap, read_values=host and self.values is not None)

    def wrong_values(self, info: rc.CapsuleInfo) -> list[Finding]:
        if self.values is None or info.values is None:
            return []
        if info.shape != self.values.shape or not _same_bytes(info.values, self.values):
            return [("values", f"the capsule's {info.describe()} does not hold the array's "
                               f"values")]
        return []


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.itemsize != b.dtype.itemsize:
        return False
    return bool(
        (np.ascontiguousarray(a).view(np.uint8) == np.ascontiguousarray(b).view(np.uint8)).all()
    )


def _short(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return text[:160]


def two_capsules(a: Audited) -> list[Finding]:
    try:
        first, second = a.export_any(), a.export_any()
    except Refused as e:
        raise Unsupported(f"it exports no capsule of this array: {e}") from e
    if first is second or _consumed(first):
        return [("capsule_reuse", "two __dlpack__ calls returned the same capsule: the second "
                                  "consumer gets a consumed one")]
    a.read(first)
    if _consumed(second):
        return [("capsule_reuse", "the second capsule was consumed with the first: one cached "
                                  "capsule handed out twice")]
    return a.wrong_values(a.read(second))


def _consumed(cap: Any) -> bool:
    return (rc.capsule_name(cap) or "").startswith("used_")


def legacy_request(a: Audited) -> list[Finding]:
    findings: list[Finding] = []
    for kw, asked in (({}, "no max_version"), ({"max_version": (0, 8)}, "max_version=(0, 8)")):
        try:
            cap = a.export(**kw)
        except Refused:
            continue  # dropping legacy capsules is allowed
        except Unsupported:
            continue  # a producer older than max_version speaks legacy capsules only
        name = rc.capsule_name(cap)
        info = a.read(cap)
        if info.versioned:
            findings.append(("max_version", f"asked with {asked}, it returned a versioned "
                                            f"capsule ({name!r}) that a legacy consumer "
                                            f"cannot parse: max_version is ignored"))
    return findings


def copy_true(a: Audited) -> list[Finding]:
    cap = a.export(max_version=ASK, copy=True)
    info = a.read(cap)
    findings = a.wrong_values(info)
    if a.ptr is not None and info.data_ptr == a.ptr and info.size:
        findings.append(("copy", "copy=True returned the producer's own memory (an alias)"))
    elif info.versioned and not info.is_copied:
        findings.append(("copied_flag", "copy=True made a copy without the IS_COPIED flag"))
    return findings


def copy_false(a: Audited) -> list[Finding]:
    cap = a.export(max_version=ASK, copy=False)
    info = a.read(cap)
    findings = a.wrong_values(info)
    if a.ptr is not None and info.size and info.data_ptr != a.ptr:
        findings.append(("copy", "copy=False returned a copy instead of the producer's memory "
                                 "or a BufferError"))
    if info.is_copied:
        findings.append(("copied_flag", "copy=False returned a capsule flagged IS_COPIED"))
    return findings


def dl_device(a: Audited) -> list[Finding]:
    findings: list[Finding] = []
    for target in dict.fromkeys([a.device, (1, 0)]):
        try:
            cap = a.export(max_version=ASK, dl_device=target)
        except Refused:
            continue
        except Unsupported:
            raise
        except Exception as e:  # noqa: BLE001 - the exception's family is what is judged
            findings.append(("exception", f"__dlpack__(dl_device={target}) raised "
                                          f"{type(e).__name__} ({_short(e)}); a refusal must "
                                          f"be BufferError"))
            continue
        info = a.read(cap)
        device = info.device
        if device != target:
            findings.append(("dl_device", f"asked for dl_device={target}, it returned a "
                                          f"capsule on {device}"))
        else:
            findings += a.wrong_values(info)
    return findings


def copy_false_elsewhere(a: Audited) -> list[Finding]:
    if a.device[0] == 1:
        target = (2, 0)  # host memory reaches a CUDA device only as a copy
    elif not rc.host_readable(a.device):
        target = (1, 0)  # device memory reaches the host only as a copy
    else:
        raise Unsupported(f"no device is out of reach of {rc.device_name(a.device[0])} memory "
                          "without a copy")
    asked = f"__dlpack__(dl_device={target}, copy=False)"
    try:
        cap = a.export(max_version=ASK, dl_device=target, copy=False)
    except (Refused, Unsupported):
        raise
    except Exception as e:  # noqa: BLE001 - the exception's family is what is judged
        return [("copy_false", f"{asked} raised {type(e).__name__} ({_short(e)}); a request "
                              "that needs a copy under copy=False must be refused with "
                              "BufferError")]
    info = rc.read_capsule(cap, read_values=False)
    return [("copy", f"{asked} cannot be met without a copy, yet it returned a "
                     f"{info.describe()}; expected BufferError")]


def legacy_then_retry(a: Audited) -> list[Finding]:
    try:
        cap, asked = a.export(), "__dlpack__()"
    except Unsupported:
        raise
    except Refused:
        try:
            cap, asked = a.export(max_version=ASK), f"__dlpack__(max_version={ASK})"
        except Refused as e:
            raise Unsupported(f"it exports no capsule of this array: {e}") from e
        except Unsupported as e:
            return [("retry", f"__dlpack__() refused with BufferError, and the retry with "
                              f"max_version={ASK} raised TypeError: {e}")]
    except Exception as e:  # noqa: BLE001 - only a BufferError tells the caller to retry
        return [("exception", f"__dlpack__() raised {type(e).__name__} ({_short(e)}); a "
                              "producer that drops legacy capsules must say so with "
                              "BufferError, the signal to retry with max_version")]
    host = rc.host_readable(a.device)
    info = a.read(cap)
    findings = a.wrong_values(info)
    if asked == "__dlpack__()" and info.versioned:
        findings.append(("max_version", f"{asked} returned a versioned capsule that a legacy "
                                        "consumer cannot parse"))
    aliased = a.ptr is not None and info.size and info.data_ptr == a.ptr and host
    if a.readonly and not info.versioned and aliased:
        findings.append(("readonly", f"{asked} exported read-only memory in a legacy capsule, "
                                     "which cannot say read-only (refuse it with BufferError, "
                                     "or copy)"))
    return findings


AUDITS: dict[str, Callable[[Audited], list[Finding]]] = {
    "two_capsules": two_capsules,
    "legacy_request": legacy_request,
    "copy_true": copy_true,
    "copy_false": copy_false,
    "dl_device": dl_device,
    "device_claim": device_claim,
    "copy_false_elsewhere": copy_false_elsewhere,
    "legacy_then_retry": legacy_then_retry,
}


def run(kind: str, a: Audited) -> list[Finding]:
    """The findings of audit ``kind`` (a key of :data:`AUDITS`) against ``a``'s producer.
    Raises :class:`Refused`, :class:`Unsupported`, or BufferError for a capsule the reference
    consumer refuses."""
    return AUDITS[kind](a)
