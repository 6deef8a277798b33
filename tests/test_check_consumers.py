"""The checker's consumer-audit additions (catalog C66-C70): an impossible ``copy=False``, NumPy
scalars, the legacy-request-then-retry sequence, the forms of a zero-size array's strides and
the streams a consumer passes for oneAPI memory.

Each check is run on right and wrong stand-ins (small consumers and producers over NumPy, each
wrong in one way a real library was) and, where one is installed, on the real library that
still has the fault. Units run in this process through the worker's own entry point.
"""

from __future__ import annotations

import ctypes
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dlbridge
from dlbridge_check import Adapter, audit, consumers, worker
from dlbridge_check import refcapsule as rc
from dlbridge_check.cases import BY_ID
from dlpack_ctypes import FakeManagedTensor, FakeProducer
from test_check_audit import Wrapper

THIRD_PARTY = Path(__file__).resolve().parent / "third_party"


@pytest.fixture(autouse=True)
def quiet_worker(monkeypatch):
    """The worker streams its stages as JSON lines: into a buffer here."""
    monkeypatch.setattr(worker, "_OUT", io.StringIO())


class StandIn(Adapter):
    """A consumer whose import is ``fn(obj, **kw)``."""

    module = "numpy"
    readonly_results = True

    def __init__(self, name: str, fn) -> None:
        super().__init__()
        self.name = name
        self.fn = fn

    def from_dlpack(self, obj: Any, **kw: Any) -> Any:
        return self.fn(obj, **kw)


def _unit(case_id: str, producer: str, consumer: Adapter | str, route: str = "direct") -> dict:
    ctx = worker.Ctx()
    if isinstance(consumer, Adapter):
        ctx.libs[consumer.name] = consumer
        consumer = consumer.name
    return worker.run_unit(ctx, producer, consumer, BY_ID[case_id], route)


def _installed(module: str) -> Any:
    return pytest.importorskip(module)


# ------------------------------------------------------------------ C66: impossible copy=False
class ValueErrorForCopies(Wrapper):
    """Refuses a device it needs a copy for with ValueError (torch, MLX)."""

    def __dlpack__(self, **kw):
        if kw.get("dl_device") not in (None, (1, 0)) and kw.get("copy") is False:
            raise ValueError("cannot move without copying")
        return self.arr.__dlpack__(**kw)


def test_copy_false_elsewhere_finds_the_wrong_exception():
    a = np.arange(12.0).reshape(3, 4)

    def run(obj, device=(1, 0)):
        return audit.run("copy_false_elsewhere", audit.Audited(obj, a.ctypes.data, device, a))

    for right in (a, rc.RefArray(a), dlbridge.from_dlpack(a)):
        with pytest.raises(audit.Refused, match=r"dl_device=\(2, 0\)"):
            run(right)
    found = run(ValueErrorForCopies(a))
    assert [c for c, _ in found] == ["copy_false"] and "ValueError" in found[0][1]
    # a producer that hands out a capsule anyway (here: one claiming CUDA for host memory)
    liar = FakeProducer(lambda **kw: FakeManagedTensor(data=a, shape=(3, 4), strides=(4, 1),
                                                       dtype="float64", device=(2, 0)))
    assert [c for c, _ in run(liar)] == ["copy"]
    # device memory asked to the CPU: the reference producer's Ascend memory refuses
    with pytest.raises(audit.Refused, match=r"dl_device=\(1, 0\)"):
        run(rc.RefArray(a, mode="ascend"), device=(21, 0))


def test_copy_false_elsewhere_on_torch():
    """torch (2.15) raises ValueError for a CUDA target with copy=False: a finding against it
    for as long as it does."""
    torch = _installed("torch")
    t = torch.arange(12.0)
    try:
        t.__dlpack__(max_version=(1, 3), dl_device=(2, 0), copy=False)
    except BufferError:
        raised = BufferError
    except Exception as e:  # noqa: BLE001
        raised = type(e)
    a = audit.Audited(t, t.data_ptr(), (1, 0), np.arange(12.0))
    if raised is BufferError:
        with pytest.raises(audit.Refused):
            audit.run("copy_false_elsewhere", a)
    else:
        found = audit.run("copy_false_elsewhere", a)
        assert [c for c, _ in found] == ["copy_false"] and raised.__name__ in found[0][1]


def test_impossible_copy_false_into_consumers():
    case = "copy/false_device_memory"
    assert _unit(case, "dlpack-ref", "numpy")["status"] == "pass"  # NumPy passes BufferError on

    def valueerror_first(obj, **kw):
        raise ValueError("cannot move without copying")  # before asking the producer

    r = _unit(case, "dlpack-ref", StandIn("first", valueerror_first))
    assert r["status"] == "pass" and "Raises section" in r["detail"]

    def converts(obj, **kw):
        try:
            return np.from_dlpack(obj, **kw)
        except BufferError as e:
            raise ValueError(str(e)) from e

    r = _unit(case, "dlpack-ref", StandIn("converts", converts))
    assert (r["status"], r["fault"], r["check"]) == ("error", "consumer", "copy_false")
    assert "must pass that on" in r["detail"]

    def runtime(obj, **kw):
        raise RuntimeError("unknown backend")

    r = _unit(case, "dlpack-ref", StandIn("runtime", runtime))
    assert (r["status"], r["fault"]) == ("error", "consumer")

    def ignores_copy(obj, **kw):
        return np.from_dlpack(obj, device="cpu")  # copy=False dropped: the producer copies

    r = _unit(case, "dlpack-ref", StandIn("ignores", ignores_copy))
    assert (r["status"], r["fault"], r["check"]) == ("fail", "consumer", "accepted")
    # through dlbridge: dlbridge refuses with BufferError
    assert _unit(case, "dlpack-ref", "numpy", "dlbridge")["status"] == "pass"


def test_impossible_copy_false_into_jax():
    """JAX (0.12) raises TypeError for memory on a device it lacks, whatever copy= says: a
    finding against it for as long as it does."""
    _installed("jax")
    ctx = worker.Ctx()
    try:
        ctx.libs["jax"].consume(rc.RefArray(np.arange(3.0), mode="ascend"), device="cpu",
                                copy=False)
    except BufferError:
        want = "pass"
    except Exception:  # noqa: BLE001
        want = "error"
    else:
        want = "fail"
    r = _unit("copy/false_device_memory", "dlpack-ref", "jax")
    assert r["status"] == want
    assert r["fault"] == (None if want == "pass" else "consumer")


# ------------------------------------------------------------------------ C67: NumPy scalars
def test_numpy_scalar_judge():
    case = "input/numpy_scalar"
    scalar_has_dlpack = hasattr(np.float64(1.0), "__dlpack__")
    r = _unit(case, "numpy", "numpy")
    if not scalar_has_dlpack:
        assert r["status"] == "unsupported" and "no __dlpack__" in r["detail"]
    r = _unit(case, "numpy", StandIn("asarray", lambda obj, **kw: np.asarray(obj)))
    assert r["status"] == "pass"
    r = _unit(case, "numpy", StandIn("f32", lambda obj, **kw: np.asarray(obj, np.float32)))
    assert (r["status"], r["check"]) == ("fail", "dtype")

    def raises(obj, **kw):
        raise RuntimeError("invalid capsule")

    r = _unit(case, "numpy", StandIn("raises", raises))
    assert (r["status"], r["fault"], r["check"]) == ("error", "consumer", "scalar")

    def writable_alias(obj, **kw):
        ptr = np.frombuffer(memoryview(obj), obj.dtype).ctypes.data
        return np.ctypeslib.as_array((ctypes.c_double * 1).from_address(ptr)).reshape(())

    r = _unit(case, "numpy", StandIn("alias", writable_alias))
    assert (r["status"], r["check"]) == ("fail", "readonly")
    # through dlbridge: a read-only 0-d Tensor that NumPy imports
    assert _unit(case, "numpy", "numpy", "dlbridge")["status"] == "pass"


class LegacyOnlyConsumer:
    """Asks for legacy capsules only (a consumer built before DLPack 1.0)."""

    def __init__(self, on_refusal=None) -> None:
        self.on_refusal = on_refusal

    def __call__(self, obj, **kw):
        try:
            cap = obj.__dlpack__()
        except BufferError:
            if self.on_refusal is None:
                raise
            return self.on_refusal
        return np.from_dlpack(_Given(cap))


class _Given:
    def __init__(self, cap) -> None:
        self.cap = cap

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, **kw):
        return self.cap


def test_versioned_only_scalar_into_consumers():
    ref = rc.RefArray(np.array(2.5), mode="scalar_readonly")
    with pytest.raises(BufferError):
        ref.__dlpack__()  # no legacy capsule
    with pytest.raises(BufferError):
        ref.__dlpack__(max_version=(1, 3), copy=True)  # no copy
    info = rc.read_capsule(ref.__dlpack__(max_version=(1, 3)))
    assert info.flags & rc.READ_ONLY and info.shape == () and info.values.tolist() == 2.5
    ref.finish()

    case = "input/scalar_readonly"
    r = _unit(case, "dlpack-ref", "numpy")
    assert r["status"] == "pass" and "read-only result" in r["detail"]
    # a legacy-only consumer passes the BufferError on: no finding
    assert _unit(case, "dlpack-ref", StandIn("legacy", LegacyOnlyConsumer()))["status"] == \
        "unsupported"
    # ... one that swallows it and makes something up is wrong
    made_up = StandIn("made_up", LegacyOnlyConsumer(on_refusal=np.zeros(())))
    assert _unit(case, "dlpack-ref", made_up)["status"] == "fail"

    def ignores_read_only(obj, **kw):
        info = rc.read_capsule(obj.__dlpack__(max_version=(1, 3)), read_values=False)
        buf = (ctypes.c_double * 1).from_address(info.data_ptr)
        return np.ctypeslib.as_array(buf).reshape(())

    r = _unit(case, "dlpack-ref", StandIn("writable", ignores_read_only))
    assert (r["status"], r["fault"], r["check"]) == ("fail", "consumer", "readonly")


def test_versioned_only_scalar_into_torch():
    """torch (2.15) has no read-only tensors and imports the read-only scalar as a writable
    alias: a finding against it for as long as it does."""
    torch = _installed("torch")
    ref = rc.RefArray(np.array(2.5), mode="scalar_readonly")
    y = torch.from_dlpack(ref)
    aliases = y.data_ptr() == ref.data_ptr
    del y
    ref.finish()
    r = _unit("input/scalar_readonly", "dlpack-ref", "torch")
    if aliases:
        assert (r["status"], r["fault"], r["check"]) == ("fail", "consumer", "readonly")
    else:
        assert r["status"] == "pass"


# ------------------------------------------------------- C68: legacy request, then max_version
class RuntimeErrorForLegacy(Wrapper):
    def __dlpack__(self, **kw):
        if kw.get("max_version") is None:
            raise RuntimeError("legacy capsules are gone")
        return self.arr.__dlpack__(**kw)


class RefusesLegacyTakesNoVersion(Wrapper):
    def __dlpack__(self, **kw):
        if "max_version" in kw:
            raise TypeError("unexpected keyword argument 'max_version'")
        raise BufferError("no legacy capsules")


class AlwaysVersioned(Wrapper):
    def __dlpack__(self, **kw):
        return self.arr.__dlpack__(max_version=(1, 0))


def _retry(obj, arr: np.ndarray, readonly: bool = False) -> list[tuple[str, str]]:
    a = audit.Audited(obj, arr.ctypes.data, (1, 0), arr, readonly)
    return audit.run("legacy_then_retry", a)


def test_legacy_then_retry_against_dlbridge_and_faulty_producers():
    a = np.arange(12.0).reshape(3, 4)
    ro = a.copy()
    ro.flags.writeable = False
    assert _retry(a, a) == [] and _retry(rc.RefArray(a), a) == []
    assert _retry(ro, ro, True) == []  # NumPy refuses the legacy request, the retry works
    assert _retry(dlbridge.from_dlpack(a), a) == []
    assert _retry(dlbridge.from_dlpack(ro), ro, True) == []  # a legacy copy, never an alias

    found = _retry(RuntimeErrorForLegacy(a), a)
    assert [c for c, _ in found] == ["exception"] and "RuntimeError" in found[0][1]
    assert [c for c, _ in _retry(RefusesLegacyTakesNoVersion(a), a)] == ["retry"]
    assert [c for c, _ in _retry(AlwaysVersioned(a), a)] == ["max_version"]
    legacy_alias = FakeProducer(lambda **kw: FakeManagedTensor(
        data=ro, shape=(3, 4), strides=(4, 1), dtype="float64", versioned=False))
    found = _retry(legacy_alias, ro, True)
    assert [c for c, _ in found] == ["readonly"]


def test_legacy_then_retry_on_jax():
    """JAX (0.12) exports its immutable arrays in legacy capsules that alias them: a finding
    against it for as long as it does."""
    jnp = _installed("jax.numpy")
    x = jnp.arange(12.0)
    ptr = rc.probe(x).data_ptr
    legacy = rc.read_capsule(x.__dlpack__(), read_values=False)
    aliases = not legacy.versioned and legacy.data_ptr == ptr
    found = audit.run("legacy_then_retry",
                      audit.Audited(x, ptr, (1, 0), np.asarray(x), readonly=True))
    assert [c for c, _ in found] == (["readonly"] if aliases else [])


# ----------------------------------------------------------- C69: zero-size arrays' strides
def _export(mode: str) -> rc.CapsuleInfo:
    ref = rc.RefArray(np.empty((0, 3), np.float32), mode=mode)
    info = rc.read_capsule(ref.__dlpack__(max_version=(1, 3)))
    ref.finish()
    return info


def test_zero_size_stride_forms():
    assert _export("zero_size_c_strides").strides == (3, 1)
    assert _export("zero_size_zero_strides").strides == (0, 0)
    null = _export("zero_size_null_strides")
    assert null.strides is None and null.version == (1, 1)
    assert _export("zero_size_unit_strides").strides == (1, 1)

    def strict(obj, **kw):
        # the mistake of ONNX Runtime's and Triton's imports: C strides demanded of every array
        info = rc.probe(obj)
        if info is None or info.element_strides != rc.c_strides(info.shape):
            raise BufferError("only C-contiguous tensors are supported")
        return np.from_dlpack(obj)

    for mode in rc.ZERO_SIZE_STRIDES:
        case = f"layout/{mode}"
        for route in ("direct", "dlbridge"):
            assert _unit(case, "dlpack-ref", "numpy", route)["status"] == "pass", (mode, route)
        r = _unit(case, "dlpack-ref", StandIn("strict", strict))
        if mode in ("zero_size_zero_strides", "zero_size_unit_strides"):
            assert (r["status"], r["fault"], r["check"]) == ("fail", "consumer", "must_accept")
        else:
            assert r["status"] == "pass", r


def test_the_checker_never_judges_a_peers_zero_size_strides():
    """C10 holds dlbridge's own export to the C strides; a producer's (0, 0) is no finding."""
    case = BY_ID["layout/zero_size_wide"]
    src = worker.Source(x=None, ref=np.empty((0, 2048), np.float32), dtype="float32",
                        readonly=False, declared_readonly=False, ptr=None, device=(1, 0),
                        elem_strides=(0, 0), has_dlpack=True)
    obs = worker.Observed(kind="capsule", dtype="float32", shape=(0, 2048), strides=(0, 0),
                          device=(1, 0))
    assert worker.judge(obs, src, case, expect_device=None, copy=None) == []
    found = worker.judge(obs, src, case, expect_device=None, copy=None, dlbridge_export=True)
    assert [c for c, _ in found] == ["strides"]


# ------------------------------------------------------------------- C70: oneAPI streams
def test_stream_findings():
    queue = object()
    assert consumers.stream_findings([{"stream": None}, {"stream": queue}]) == []
    assert consumers.stream_findings([{"stream": None, "dl_device": (1, 0)}]) == []
    found = consumers.stream_findings([{"stream": 1}, {"stream": queue, "dl_device": (1, 0)}])
    assert len(found) == 2
    assert "integer is a CUDA or ROCm stream" in found[0]
    assert "CPU target takes stream=None" in found[1]


def test_oneapi_stream_stand_in(monkeypatch):
    """No installed consumer passes streams for oneAPI memory: the stand-in queuearray does,
    right (its queue) and wrong (CUDA's stream 1, a queue for a CPU target)."""
    monkeypatch.syspath_prepend(str(THIRD_PARTY))
    import queuearray

    ctx = worker.Ctx()
    for adapter in (queuearray.QueueArrayAdapter(), queuearray.IntStreamAdapter()):
        ctx.libs[adapter.name] = adapter
    case = BY_ID["device/oneapi_stream"]
    for route in ("direct", "dlbridge"):
        r = worker.run_unit(ctx, "queuearray", "queuearray", case, route)
        assert r["status"] == "pass" and "Queue" in r["detail"], r
        r = worker.run_unit(ctx, "queuearray", "intstream", case, route)
        assert (r["status"], r["fault"], r["check"]) == ("fail", "consumer", "stream"), r
        assert "stream=1" in r["detail"] and "CPU target" in r["detail"]
        r = worker.run_unit(ctx, "queuearray", "numpy", case, route)
        assert r["status"] == "unsupported" and "passes no stream" in r["detail"]
    r = worker.run_unit(ctx, "numpy", "queuearray", case, "direct")
    assert r["status"] == "unsupported" and "not oneAPI memory" in r["detail"]


@pytest.mark.slow
def test_the_checker_runs_the_consumer_audit():
    """The new cases through the checker's processes, NumPy as the peer: no finding against
    NumPy or dlbridge, and the audits of every producer ran."""
    from dlbridge_check import run_check

    cases = ["copy/false_device_memory", "input/numpy_scalar", "input/scalar_readonly",
             "layout/zero_size_*_strides", "device/oneapi_stream",
             "producer/copy_false_elsewhere", "producer/legacy_then_retry",
             "producer/legacy_retry_readonly"]
    doc, _, _ = run_check(["numpy"], cases, jobs=1)
    results = doc["results"]
    assert {r["case"] for r in results} >= {"copy/false_device_memory", "input/numpy_scalar",
                                            "producer/legacy_then_retry"}
    bad = [r for r in results if r["status"] not in ("pass", "unsupported")]
    assert bad == [], bad
    assert doc["summary"]["exit_status"] == 0


@pytest.mark.slow
def test_the_stand_in_through_the_command_line(tmp_path):
    """``python -m dlbridge check`` with the stand-in named as ``module:object``: the findings
    against the consumer that passes CUDA's stream are against it, and the run exits 0."""
    import os

    from dlb_testing import run_checker

    tests = Path(__file__).resolve().parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tests), str(THIRD_PARTY),
                                                      env.get("PYTHONPATH")]))
    run = run_checker(tmp_path, "--libraries",
                      "numpy,queuearray:QueueArrayAdapter,queuearray:IntStreamAdapter",
                      "--cases", "device/oneapi_stream", env=env)
    assert run.doc is not None
    by = {(r["producer"], r["consumer"], r["route"]): r for r in run.doc["results"]}
    for route in ("direct", "dlbridge"):
        assert by["queuearray", "queuearray", route]["status"] == "pass"
        bad = by["queuearray", "intstream", route]
        assert (bad["status"], bad["fault"], bad["check"]) == ("fail", "consumer", "stream")
    assert run.doc["summary"]["by_library"]["intstream"]["consumer"] == 2
