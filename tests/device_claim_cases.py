"""The producer audit ``device_claim`` against the CUDA stand-in (``crates/cuda-standin``): each
``case_*`` runs in its own process with ``DLBRIDGE_CUDA_DRIVER`` naming the stand-in, which the
checker's driver access (``dlbridge_check.cudamemory``) and dlbridge both load;
``test_check_device_claim.py`` runs them.

The memory comes from dlbridge's CUDA tensors (device memory on two devices, pinned and managed
memory) and from NumPy; the producers that misname it are FakeProducers over those addresses.
The stand-in maps device memory ``PROT_NONE``: an audit that read it would kill the process.
"""

from __future__ import annotations

import numpy as np

import dlbridge
from dlbridge_check import audit
from dlbridge_check.adapters.base import Unsupported
from dlpack_ctypes import FakeManagedTensor, FakeProducer

CPU, CUDA, CUDA_HOST, CUDA_MANAGED = 1, 2, 3, 13


def _tensors() -> dict[str, dlbridge.Tensor]:
    """dlbridge tensors of every kind of CUDA memory (the stand-in's)."""
    host = dlbridge.from_dlpack(np.arange(12.0).reshape(3, 4))
    return {
        "cuda:0": host.to_device("cuda:0"),
        "cuda:1": host.to_device("cuda:1"),
        "cuda_host": host.to_device("cuda_host"),
        "cuda_managed": host.to_device("cuda_managed"),
    }


def _claiming(ptr: int, capsule_device, declared=None) -> FakeProducer:
    """A producer of a (3, 4) float64 array at ``ptr`` whose capsule names ``capsule_device``
    and whose ``__dlpack_device__`` names ``declared`` (the same when not given)."""
    def make(**_kw):
        return FakeManagedTensor(data_ptr=ptr, shape=(3, 4), strides=(4, 1), dtype="float64",
                                 device=capsule_device)

    return FakeProducer(make, device=declared or capsule_device)


def _audit(obj, given=None) -> list[tuple[str, str]]:
    device = tuple(obj.__dlpack_device__())
    return audit.run("device_claim", audit.Audited(obj, None, device, None, given=given))


def _texts(obj, given=None) -> list[str]:
    found = _audit(obj, given)
    assert {check for check, _ in found} <= {"device_claim"}, found
    return [text for _, text in found]


def case_right_claims_pass():
    t = _tensors()
    for name, tensor in t.items():
        assert _audit(tensor) == [], name  # dlbridge's own claims for each kind of memory
    a = np.arange(12.0).reshape(3, 4)
    assert _audit(a) == []  # NumPy: host memory, kDLCPU
    # pinned host memory claimed as CPU memory (as torch and CuPy do)
    assert _audit(_claiming(t["cuda_host"].data_ptr, (CPU, 0))) == []
    # managed memory claimed as CUDA memory, and as CPU memory: both sides reach it
    assert _audit(_claiming(t["cuda_managed"].data_ptr, (CUDA, 0))) == []
    assert _audit(_claiming(t["cuda_managed"].data_ptr, (CPU, 0))) == []
    # host memory of a virtual host device: (kDLCPU, id != 0) is accepted
    assert _audit(_claiming(a.ctypes.data, (CPU, 3))) == []


def case_host_memory_claimed_as_cuda_is_a_finding():
    a = np.arange(12.0).reshape(3, 4)
    (text,) = _texts(_claiming(a.ctypes.data, (CUDA, 1)))
    assert "claims cuda (2, 1) for host memory CUDA does not know" in text, text
    assert "kDLCPU fits it" in text


def case_device_memory_claimed_as_cpu_is_a_finding():
    t = _tensors()
    # the audit never reads the memory (the stand-in maps it PROT_NONE: a read kills us)
    (text,) = _texts(_claiming(t["cuda:0"].data_ptr, (CPU, 0)))
    assert "claims cpu (1, 0) for CUDA device memory" in text, text
    (text,) = _texts(_claiming(t["cuda:1"].data_ptr, (CUDA, 0)))
    assert "for device memory of CUDA device 1" in text, text
    (text,) = _texts(_claiming(t["cuda:0"].data_ptr, (CUDA_HOST, 0)))
    assert "for CUDA device memory" in text, text


def case_pinned_and_managed_memory_misnamed_are_findings():
    t = _tensors()
    (text,) = _texts(_claiming(t["cuda_host"].data_ptr, (CUDA, 0)))
    assert "for pinned host memory" in text and "kDLCPU or kDLCUDAHost" in text, text
    (text,) = _texts(_claiming(t["cuda_managed"].data_ptr, (CUDA_HOST, 0)))
    assert "for CUDA managed memory" in text, text


def case_claims_that_disagree_are_a_finding():
    a = np.arange(12.0).reshape(3, 4)
    texts = _texts(_claiming(a.ctypes.data, (CUDA, 0), declared=(CPU, 0)))
    assert texts[0] == "__dlpack_device__() says (1, 0), its capsule says (2, 0)", texts
    assert "claims cuda (2, 0) for host memory" in texts[1] and len(texts) == 2, texts


def case_a_failing_dlpack_device_is_a_finding():
    a = np.arange(12.0).reshape(3, 4)

    class NoDevice(FakeProducer):
        def __dlpack_device__(self):
            raise RuntimeError("no device")

    liar = NoDevice(lambda **_kw: FakeManagedTensor(data=a, shape=(3, 4), strides=(4, 1),
                                                    dtype="float64"))
    found = audit.run("device_claim", audit.Audited(liar, None, (CPU, 0), None))
    assert found == [("device_claim", "__dlpack_device__() failed: RuntimeError: no device")]


def case_a_claim_passed_on_is_the_first_producers():
    """dlbridge imports what a producer claims: the Tensor it made re-exports host memory as
    CUDA memory. Judged as a re-export, that is not a finding against it; a claim it changed
    would be."""
    a = np.arange(12.0).reshape(3, 4)
    liar = _claiming(a.ctypes.data, (CUDA, 0))
    t = dlbridge.from_dlpack(liar)
    assert t.__dlpack_device__() == (CUDA, 0)
    try:
        _audit(t, given=(CUDA, 0))
    except Unsupported as e:
        assert "keeps the device its source claimed" in str(e), e
    else:
        raise AssertionError("a claim passed on was judged against the re-exporter")
    assert _texts(t, given=(CPU, 0)), "a claim the re-exporter changed must be judged"


def case_without_a_driver_the_audit_is_unsupported():
    """Run with the stand-in's cuInit failing: no driver to ask, and the reason is given."""
    try:
        _audit(np.arange(3.0))
    except Unsupported as e:
        assert "no CUDA driver" in str(e) and "CUDA_ERROR_NO_DEVICE" in str(e), e
    else:
        raise AssertionError("the audit ran without a driver")


def case_the_way_out_asks_for_the_memory_where_it_is():
    """The report's way out for host memory called GPU memory: ask for it on the CPU
    (``from_dlpack(x, device="cpu")``). virtarray then hands out a capsule that names it right."""
    import virtarray

    x = virtarray.asarray(np.arange(12.0).reshape(3, 4), device="device1")
    assert _texts(x), "virtarray's own claim must be a finding"
    assert np.from_dlpack(x, device="cpu").tolist() == np.arange(12.0).reshape(3, 4).tolist()

    class OnTheCpu:
        def __dlpack_device__(self):
            return (CPU, 0)

        def __dlpack__(self, **kw):
            return x.__dlpack__(dl_device=(CPU, 0), **kw)

    assert _audit(OnTheCpu()) == []
