"""The consumer audit's judges: cases whose right answer the ordinary routes cannot tell.

A case names its judge in ``Case.judge``; the worker hands it the unit instead of running the
direct route. Each judge returns a result (:func:`worker.result`) whose findings are against the
consumer.

- ``copy_false_device``: ``from_dlpack(x, device="cpu", copy=False)`` of memory only a copy
  brings to the CPU. The standard's ``__dlpack__`` refuses it with BufferError; its
  ``from_dlpack`` text names BufferError (the ``copy`` parameter) and ValueError (the ``device``
  parameter and the Raises section). So: BufferError is right; ValueError is right only when the
  consumer raised it itself, before asking the producer (the standard's recommended reading: a
  consumer passes the producer's BufferError on unchanged); anything else is wrong.
- ``numpy_scalar``: a NumPy scalar handed to ``from_dlpack``. It exchanges right (the value, a
  0-d array, never a writable alias of the scalar's read-only data), or the consumer refuses with
  BufferError. A NumPy without scalar ``__dlpack__`` leaves the case unsupported when the consumer
  refuses an object without the protocol (the standard's AttributeError or TypeError).
- ``oneapi_stream``: the ``stream=`` a consumer passes to ``__dlpack__`` for oneAPI memory.
  The standard leaves oneAPI streams to an agreed object (an in-order queue; dpctl takes its
  ``SyclQueue``), so an integer, the CUDA/ROCm stream handle, is wrong, and a CPU target
  (``dl_device=(1, 0)``) takes ``stream=None`` only. A consumer that passes no stream has nothing
  to judge: unsupported, saying so.

On the route through dlbridge the consumer is handed ``dlbridge.from_dlpack(x)`` instead of
``x`` and judged the same way (the first case takes the ordinary route through dlbridge).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import refcapsule as rc
from .cases import Case
from .libraries import Unsupported, observe
from .worker import (
    ERROR,
    FAIL,
    PASS,
    UNSUPPORTED,
    Ctx,
    _first_mismatch,
    result,
    run_dlbridge,
    short,
    stage,
)

ONEAPI = 14


class StreamRecorder:
    """Forwards ``__dlpack__`` and records every request's keywords, also those the producer
    refuses."""

    def __init__(self, x: Any) -> None:
        self.x = x
        self.requests: list[dict[str, Any]] = []

    def __dlpack_device__(self) -> Any:
        return self.x.__dlpack_device__()

    def __dlpack__(self, **kw: Any) -> Any:
        self.requests.append(dict(kw))
        return self.x.__dlpack__(**kw)


def stream_findings(requests: list[dict[str, Any]]) -> list[str]:
    """What is wrong with the ``stream=`` of each ``__dlpack__`` request for oneAPI memory."""
    out = []
    for kw in requests:
        stream, target = kw.get("stream"), kw.get("dl_device")
        if stream is None:
            continue
        if target is not None and int(tuple(target)[0]) == 1:
            out.append(f"stream={stream!r} with dl_device={tuple(target)}: a CPU target takes "
                       "stream=None only (the producer finishes its copy before it returns)")
        elif isinstance(stream, int):
            out.append(f"stream={stream!r} for oneAPI memory: an integer is a CUDA or ROCm stream "
                       "handle; for oneAPI the standard leaves the stream to an object the "
                       "libraries agree on (an in-order queue, dpctl's SyclQueue) or None")
    return out


def copy_false_device(ctx: Ctx, pname: str, cname: str, case: Case, route: str) -> dict:
    if route == "dlbridge":
        return run_dlbridge(ctx, pname, cname, case)
    src = ctx.source(pname, case)
    x = src.x
    asked_before = len(getattr(x, "requests", []))
    stage("consumer")
    try:
        ctx.libs[cname].consume(x, device=case.device, copy=case.copy)
    except Unsupported as e:
        return result(UNSUPPORTED, str(e))
    except BufferError as e:
        return result(PASS, f"refused with BufferError: {short(e)}")
    except Exception as e:  # noqa: BLE001 - the exception's family is what is judged
        # the requests the reference producer refuses: device memory to the CPU without a copy
        refused = [r for r in getattr(x, "requests", [])[asked_before:]
                   if r.get("copy") is False and tuple(r.get("dl_device") or ()) == (1, 0)]
        if isinstance(e, ValueError) and not refused:
            return result(PASS, f"refused with ValueError before asking the producer, as the "
                                f"standard's Raises section for from_dlpack allows: {short(e)}")
        why = ("the producer refused with BufferError and the consumer must pass that on"
               if refused else "a copy is needed and copy=False forbids it")
        return result(ERROR, f"{cname}.from_dlpack raised {short(e)}; expected BufferError "
                             f"({why})", fault="consumer", check="copy_false", stage_="consumer")
    return result(FAIL, f"{cname}.from_dlpack took {rc.device_name(src.device[0])} memory with "
                        'device="cpu", copy=False, which only a copy can meet; expected '
                        "BufferError", fault="consumer", check="accepted", stage_="consumer")


def _through_dlbridge(x: Any) -> Any:
    """``dlbridge.from_dlpack(x)`` for the route through dlbridge (Unsupported when it
    refuses: its imports are judged by the other cases)."""
    import dlbridge

    stage("dlbridge.from_dlpack")
    try:
        return dlbridge.from_dlpack(x)
    except Exception as e:
        raise Unsupported(f"dlbridge does not import it: {short(e)}") from e


def numpy_scalar(ctx: Ctx, pname: str, cname: str, case: Case, route: str) -> dict:
    src = ctx.source(pname, case)
    scalar = np.asarray(src.x)[()]
    ptr = np.frombuffer(memoryview(scalar), scalar.dtype).ctypes.data
    has_dlpack = hasattr(scalar, "__dlpack__")
    given = _through_dlbridge(scalar) if route == "dlbridge" else scalar
    stage("consumer")
    try:
        y = ctx.libs[cname].consume(given)
    except Unsupported as e:
        return result(UNSUPPORTED, str(e))
    except BufferError as e:
        return result(PASS, f"refused with BufferError: {short(e)}")
    except Exception as e:  # noqa: BLE001 - the exception's family is what is judged
        if given is scalar and not has_dlpack and isinstance(e, (TypeError, AttributeError)):
            return result(UNSUPPORTED, f"NumPy {np.__version__} scalars have no __dlpack__, and "
                                       f"{cname} refuses an object without it: {short(e)}")
        what = "a NumPy scalar" if given is scalar else "the dlbridge.Tensor of a NumPy scalar"
        return result(ERROR, f"{cname}.from_dlpack of {what} raised {short(e)}; "
                             "expected the scalar's value or BufferError", fault="consumer",
                      check="scalar", stage_="consumer")
    stage("inspect")
    obs = observe(y)
    findings = []
    if obs.shape is not None and tuple(obs.shape) != ():
        findings.append(("shape", f"shape {tuple(obs.shape)}, expected () (a 0-d array)"))
    if obs.dtype is not None and obs.dtype != src.dtype:
        findings.append(("dtype", f"dtype {obs.dtype}, expected {src.dtype}"))
    elif obs.values is not None and not findings:
        mm = _first_mismatch(obs.values.reshape(()), src.ref)
        if mm:
            findings.append(("values", f"wrong values: {mm}"))
    if obs.ptr == ptr and obs.writable:
        findings.append(("readonly", "a writable alias of the scalar's read-only data"))
    if findings:
        return result(FAIL, "; ".join(t for _, t in findings), fault="consumer",
                      check=findings[0][0], stage_="consumer")
    return result(PASS, "the scalar's value as a 0-d array")


def oneapi_stream(ctx: Ctx, pname: str, cname: str, case: Case, route: str) -> dict:
    src = ctx.source(pname, case)
    if src.device[0] != ONEAPI:
        return result(UNSUPPORTED, f"{pname}'s array is not oneAPI memory")
    rec = StreamRecorder(_through_dlbridge(src.x) if route == "dlbridge" else src.x)
    clib = ctx.libs[cname]
    for device in (None, "cpu"):  # its own device, then a CPU target
        stage("consumer")
        try:
            clib.consume(rec, device=device)
        except Exception:  # noqa: BLE001 - whether it imports is judged by other cases
            continue
    bad = stream_findings(rec.requests)
    if bad:
        return result(FAIL, "; ".join(bad), fault="consumer", check="stream", stage_="consumer")
    streams = [r["stream"] for r in rec.requests if r.get("stream") is not None]
    if not rec.requests:
        return result(UNSUPPORTED, f"{cname} never called __dlpack__ on oneAPI memory")
    if not streams:
        return result(UNSUPPORTED, f"{cname} passes no stream= for oneAPI memory (the producer "
                                   "then orders its work itself): no stream handling to judge")
    kinds = sorted({type(s).__name__ for s in streams})
    return result(PASS, f"stream= a {', '.join(kinds)} for its own device, None for the CPU")


JUDGES = {
    "copy_false_device": copy_false_device,
    "numpy_scalar": numpy_scalar,
    "oneapi_stream": oneapi_stream,
}


def run(ctx: Ctx, pname: str, cname: str, case: Case, route: str) -> dict:
    """The result of one unit of a case with a judge (``case.judge``)."""
    assert case.judge is not None
    return JUDGES[case.judge](ctx, pname, cname, case, route)
