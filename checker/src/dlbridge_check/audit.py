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
                 values: np.ndarray | None, given: tuple[int, int] | None = None) -> None:
        self.obj = obj
        self.ptr = ptr
        self.device = device
        self.values = values
        self.given = given

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


AUDITS: dict[str, Callable[[Audited], list[Finding]]] = {
    "two_capsules": two_capsules,
    "legacy_request": legacy_request,
    "copy_true": copy_true,
    "copy_false": copy_false,
    "dl_device": dl_device,
    "device_claim": device_claim,
}


def run(kind: str, a: Audited) -> list[Finding]:
    """The findings of audit ``kind`` (a key of :data:`AUDITS`) against ``a``'s producer.
    Raises :class:`Refused`, :class:`Unsupported`, or BufferError for a capsule the reference
    consumer refuses."""
    return AUDITS[kind](a)
