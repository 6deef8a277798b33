"""The checker's producer audit (``dlbridge_check.audit``, cases ``producer/*``): correct producers
pass, and each way a producer gets ``__dlpack__`` wrong is a finding against it.

The faulty producers here are small wrappers over NumPy arrays, each wrong in one way a real
library was (catalog C60-C62); the end-to-end test runs the audit cases through the checker.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlbridge
from dlbridge_check import audit
from dlbridge_check.refcapsule import RefArray
from dlpack_ctypes import FakeManagedTensor, FakeProducer

#: the audits that need no CUDA driver (device_claim does: test_check_device_claim.py)
KINDS = sorted(k for k in audit.AUDITS if k != "device_claim")


def _source() -> np.ndarray:
    return np.arange(12.0).reshape(3, 4)


def _audit(kind: str, obj, arr: np.ndarray, device=(1, 0)) -> list[tuple[str, str]]:
    return audit.run(kind, audit.Audited(obj, arr.ctypes.data, device, arr))


class Wrapper:
    """A producer over a NumPy array that passes the request on (subclasses get it wrong)."""

    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kw):
        return self.arr.__dlpack__(**kw)


class CachedCapsule(Wrapper):
    """Hands out one capsule, made on the first call (tvm-ffi before 0.1.11)."""

    cap = None

    def __dlpack__(self, **kw):
        if self.cap is None:
            self.cap = self.arr.__dlpack__(**kw)
        return self.cap


class AlwaysVersioned(Wrapper):
    """Ignores max_version: a versioned capsule whatever the caller asked (DALI)."""

    def __dlpack__(self, **kw):
        kw["max_version"] = (1, 0)
        return self.arr.__dlpack__(**kw)


class IgnoresCopy(Wrapper):
    """Accepts copy= and ignores it (extensions built with nanobind before 3.1)."""

    def __dlpack__(self, **kw):
        kw.pop("copy", None)
        return self.arr.__dlpack__(**kw)


class CopiesAlways(Wrapper):
    """Copies on every request, copy=False included."""

    def __dlpack__(self, **kw):
        kw["copy"] = True
        return self.arr.__dlpack__(**kw)


class ValueErrorForDevices(Wrapper):
    """Refuses every dl_device with ValueError instead of BufferError."""

    def __dlpack__(self, **kw):
        if kw.get("dl_device") is not None:
            raise ValueError(f"cannot export to {kw['dl_device']}")
        return self.arr.__dlpack__(**kw)


def _clean(kind: str, obj, arr: np.ndarray) -> bool:
    """No finding: the request met, or refused with BufferError where the spec allows it (the
    only right answer to ``copy_false_elsewhere``)."""
    try:
        return _audit(kind, obj, arr) == []
    except audit.Refused:
        return True


@pytest.mark.parametrize("kind", KINDS)
def test_audits_pass_for_correct_producers(kind):
    a = _source()
    assert _clean(kind, a, a)  # NumPy
    assert _clean(kind, RefArray(a), a)  # the reference producer
    t = dlbridge.from_dlpack(a)  # dlbridge's Tensor as a producer
    assert _clean(kind, t, a)


def test_two_capsules_finds_a_cached_capsule():
    a = _source()
    found = _audit("two_capsules", CachedCapsule(a), a)
    assert [c for c, _ in found] == ["capsule_reuse"]
    # a producer whose cached capsule a consumer has already taken
    cached = CachedCapsule(a)
    np.from_dlpack(cached)
    assert [c for c, _ in _audit("two_capsules", cached, a)] == ["capsule_reuse"]


def test_legacy_request_finds_an_ignored_max_version():
    a = _source()
    found = _audit("legacy_request", AlwaysVersioned(a), a)
    assert [c for c, _ in found] == ["max_version", "max_version"]  # no max_version; (0, 8)
    assert "max_version is ignored" in found[0][1]


def test_legacy_request_accepts_producers_that_dropped_legacy_capsules():
    a = _source()
    a.flags.writeable = False  # NumPy refuses a legacy capsule of read-only memory
    assert _audit("legacy_request", a, a) == []


def test_copy_audits_find_an_ignored_copy():
    a = _source()
    found = _audit("copy_true", IgnoresCopy(a), a)
    assert [c for c, _ in found] == ["copy"]
    found = _audit("copy_false", CopiesAlways(a), a)
    assert [c for c, _ in found] == ["copy", "copied_flag"]


def test_copy_true_finds_a_copy_without_the_copied_flag():
    a = _source()
    copy = a.copy()

    def unflagged(**kw):
        # a real copy, exported as if it were the producer's own memory
        return FakeManagedTensor(data=copy, shape=(3, 4), strides=(4, 1), dtype="float64")

    found = _audit("copy_true", FakeProducer(unflagged), a)
    assert [c for c, _ in found] == ["copied_flag"]


def test_copy_refused_with_buffer_error_is_a_right_answer():
    a = _source()

    class NoCopies(Wrapper):
        def __dlpack__(self, **kw):
            if kw.get("copy"):
                raise BufferError("this producer cannot copy")
            return self.arr.__dlpack__(**kw)

    with pytest.raises(audit.Refused, match="cannot copy"):
        _audit("copy_true", NoCopies(a), a)


def test_dl_device_finds_the_wrong_exception_and_device():
    a = _source()
    found = _audit("dl_device", ValueErrorForDevices(a), a)
    assert [c for c, _ in found] == ["exception"]
    assert "ValueError" in found[0][1] and "BufferError" in found[0][1]

    def pinned(**kw):
        # host memory that always claims to be CUDA pinned memory, whatever was asked
        return FakeManagedTensor(data=a, shape=(3, 4), strides=(4, 1), dtype="float64",
                                 device=(3, 0))

    found = _audit("dl_device", FakeProducer(pinned), a)
    assert [c for c, _ in found] == ["dl_device"]
    assert "(1, 0)" in found[0][1] and "(3, 0)" in found[0][1]


def test_old_producers_are_unsupported_not_judged():
    a = _source()
    old = FakeProducer(
        lambda **kw: FakeManagedTensor(data=a, shape=(3, 4), strides=(4, 1), dtype="float64",
                                       versioned=False),
        accept_keywords=False,
    )
    for kind in ("copy_true", "copy_false", "dl_device"):
        with pytest.raises(audit.Unsupported, match="does not take"):
            _audit(kind, old, a)
    assert _audit("two_capsules", old, a) == []  # asked again without keywords, as consumers do


def test_every_capsule_the_audit_takes_is_released():
    a = _source()
    ref = RefArray(a)
    for kind in KINDS:
        _clean(kind, ref, a)
    ref.finish()
    assert ref.exports > 0 and ref.deleter_calls == ref.exports


@pytest.mark.slow
def test_the_checker_runs_the_audit_for_every_producer():
    from dlbridge_check import run_check

    cases = [f"producer/{k}" for k in KINDS] + ["producer/legacy_retry_readonly"]
    doc, producers, _ = run_check(["numpy"], cases, jobs=1)
    results = doc["results"]
    assert {r["consumer"] for r in results} == {"dlpack-ref"}  # the reference consumer only
    assert {r["producer"] for r in results} >= {"numpy", "dlpack-ref"}
    # every audit, and the legacy consumer's sequence on a read-only array too
    assert {r["case"] for r in results} == {f"producer/{k}" for k in KINDS} | {
        "producer/legacy_retry_readonly"}
    judged = [r for r in results if r["producer"] != "python"]  # lists have no __dlpack__
    assert judged and all(r["status"] == "pass" for r in judged), judged
    assert {r["route"] for r in judged} == {"direct", "dlbridge"}


# ----------------------------------------------------------------- the consumer audit additions
def test_consumer_audits_of_dlbridge(collect):
    """The reference producer's new hostile capsules, into dlbridge: an undefined dtype code
    is refused with BufferError and the deleter runs once (C63); undefined flag bits change
    nothing (C64); byte_offset is added to the data pointer (C65)."""
    a = np.arange(12.0).reshape(3, 4)
    ref = RefArray(a, mode="unknown_dtype")
    with pytest.raises(BufferError, match="99"):
        dlbridge.from_dlpack(ref)
    ref.finish()  # the capsule's destructor: the deleter's one call
    assert ref.exports == 1 and ref.deleter_calls == 1

    ref = RefArray(a, mode="unknown_flags")
    t = dlbridge.from_dlpack(ref)
    assert not t.readonly and not t.is_copied and t.tolist() == a.tolist()
    assert t.data_ptr == a.ctypes.data

    base = np.arange(10.0)
    view = base[3:]
    ref = RefArray(view, mode="byte_offset")
    info = dlbridge.describe(ref)["capsule"]
    assert info is not None
    t = dlbridge.from_dlpack(ref)
    assert t.data_ptr == view.ctypes.data and t.tolist() == view.tolist()
    del t
    collect()


@pytest.mark.slow
def test_the_checker_feeds_every_consumer_the_hostile_capsules():
    from dlbridge_check import run_check

    cases = ["hostile/unknown_dtype", "hostile/unknown_flags", "hostile/byte_offset"]
    doc, _, consumers = run_check(["numpy"], cases, jobs=1)
    results = doc["results"]
    assert {r["producer"] for r in results} == {"dlpack-ref"}
    assert {r["consumer"] for r in results} == set(consumers) >= {"numpy", "dlpack-ref"}
    assert {r["case"] for r in results} == set(cases)
    assert all(r["status"] == "pass" for r in results), results
