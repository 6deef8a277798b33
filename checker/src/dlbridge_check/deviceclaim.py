"""The producer audit ``device_claim``: the device a producer names is where its memory is.

A producer names its array's device twice, in ``__dlpack_device__()`` and in the capsule's
``dl_device``, and consumers believe it: host memory claimed as CUDA memory reaches CUDA kernels
as a host address, and device memory claimed as CPU memory is read by the host. Where a CUDA
driver is loaded (:mod:`dlbridge_check.cudamemory`) the audit asks it what the memory at the
capsule's data pointer is, and judges both claims:

=====================  ==========================================================
memory                 claims accepted
=====================  ==========================================================
host (CUDA-unknown)    kDLCPU, with any device id (virtual host devices number theirs)
pinned host            kDLCPU or kDLCUDAHost
device memory          kDLCUDA with the device's ordinal
managed                kDLCUDA, kDLCUDAManaged or kDLCPU (both sides reach it)
=====================  ==========================================================

A claim of another device type (ROCm, oneAPI...) is judged only for CUDA device memory. Without
a driver, or for a zero-size array, the audit is unsupported and says why. An object that
re-exports another producer's memory (a dlbridge Tensor, on the checker's dlbridge route) is
judged only where its claim differs from the one it was given: passing a wrong claim on is the
first producer's finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import cudamemory as cm
from . import refcapsule as rc
from .adapters.base import Unsupported

if TYPE_CHECKING:
    from .audit import Audited, Finding

CPU, CUDA, CUDA_HOST, CUDA_MANAGED = 1, 2, 3, 13

#: device type -> the kinds of memory it may name
ACCEPTED = {
    CPU: {cm.HOST, cm.PINNED, cm.MANAGED},
    CUDA: {cm.DEVICE, cm.MANAGED},
    CUDA_HOST: {cm.PINNED},
    CUDA_MANAGED: {cm.MANAGED},
}

#: memory kind -> how the finding calls it, and the claims that fit it
WORDS = {
    cm.HOST: ("host memory CUDA does not know", "kDLCPU"),
    cm.PINNED: ("pinned host memory", "kDLCPU or kDLCUDAHost"),
    cm.DEVICE: ("CUDA device memory", "kDLCUDA with its device's ordinal"),
    cm.MANAGED: ("CUDA managed memory", "kDLCUDA, kDLCUDAManaged or kDLCPU"),
}


def device_claim(a: Audited) -> list[Finding]:
    """Findings against ``a``'s producer: claims that do not match the memory the driver
    reports at its capsule's data pointer, or that disagree with each other."""
    from .audit import Refused

    try:
        cm.driver()
    except cm.NoDriver as e:
        raise Unsupported(f"no CUDA driver to ask where the memory is ({e})") from e
    try:
        declared = _declared(a.obj)
    except Exception as e:  # noqa: BLE001 - the spec requires the method: any failure is a finding
        return [("device_claim", f"__dlpack_device__() failed: {type(e).__name__}: {e}")]
    try:
        cap = a.export_any()
    except Refused as e:
        raise Unsupported(f"it exports no capsule of this array: {e}") from e
    info = rc.read_capsule(cap, read_values=False)
    if info.size == 0:
        raise Unsupported("a zero-size array has no memory to ask the driver about")
    try:
        kind, ordinal = cm.memory_at(info.data_ptr)
    except cm.DriverError as e:
        raise Unsupported(str(e)) from e
    claims = list(dict.fromkeys(c for c in (declared, info.device) if c is not None))
    findings: list[Finding] = []
    if len(claims) > 1:
        findings.append(("device_claim", f"__dlpack_device__() says {declared}, its capsule "
                                         f"says {info.device}"))
    judged = [c for c in claims if c[0] in ACCEPTED or kind == cm.DEVICE]
    if not judged:
        raise Unsupported(f"the CUDA driver cannot judge a {rc.device_name(claims[0][0])} claim "
                          "for memory it does not hold")
    wrong = [(c, text) for c in judged if (text := _wrong(c, kind, ordinal))]
    if wrong and a.given is not None and all(c == a.given for c, _ in wrong):
        raise Unsupported(f"it keeps the device its source claimed, {a.given}: a wrong claim is "
                          "the source producer's finding")
    return findings + [("device_claim", text) for _, text in wrong]


def _declared(obj: Any) -> tuple[int, int] | None:
    """``obj.__dlpack_device__()`` as a pair of ints; None when it has none."""
    method = getattr(obj, "__dlpack_device__", None)
    if method is None:
        return None
    kind, index = method()
    return int(kind), int(index)


def _wrong(claim: tuple[int, int], kind: str, ordinal: int | None) -> str:
    """Why ``claim`` misnames memory of ``kind`` (on device ``ordinal``); "" when it fits."""
    device_type, device_id = claim
    what, right = WORDS[kind]
    named = f"{rc.device_name(device_type)} {claim}"
    if kind not in ACCEPTED.get(device_type, ()):
        return f"it claims {named} for {what} (the CUDA driver's answer; {right} fits it)"
    if device_type == CUDA and kind == cm.DEVICE and ordinal is not None and device_id != ordinal:
        return f"it claims {named} for device memory of CUDA device {ordinal}"
    return ""
