"""CuPy <-> dlbridge where a CUDA device exists; elsewhere every test is skipped with the reason.

Peer facts (cupy-cuda13x 14.2.0): ``import cupy`` works without a GPU; the first use raises
``CUDARuntimeError`` (cudaErrorInsufficientDriver / cudaErrorNoDevice). The checker runs a probe
in a subprocess and reports CuPy as not installed, with that reason, when it fails.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlbridge
from dlb_testing import cupy_usable
from dlbridge_check.libraries import discover

USABLE, WHY = cupy_usable()
needs_gpu = pytest.mark.skipif(not USABLE, reason=f"CuPy cannot run here: {WHY}")


def test_checker_reports_an_unusable_cupy_as_not_installed_with_the_reason():
    if USABLE:
        pytest.skip("CuPy works here")
    if WHY.startswith("cupy is not installed"):
        pytest.skip(WHY)
    (d,) = [d for d in discover(["cupy"]) if d.name == "cupy"]
    assert not d.installed and d.reason and "not usable" in d.reason


@needs_gpu
def test_cupy_to_dlbridge_is_zero_copy_on_cuda():
    import cupy as cp

    x = cp.arange(12.0).reshape(3, 4)
    t = dlbridge.from_dlpack(x)
    assert t.device == "cuda:0" and t.data_ptr == x.data.ptr and not t.readonly
    assert dlbridge.to_numpy(t).tolist() == cp.asnumpy(x).tolist()


@needs_gpu
def test_dlbridge_to_cupy():
    import cupy as cp

    a = np.arange(6.0)
    y = dlbridge.convert(a, "cupy", device="cuda:0")
    assert isinstance(y, cp.ndarray) and cp.asnumpy(y).tolist() == a.tolist()
    back = dlbridge.convert(y, "numpy")
    assert back.tolist() == a.tolist()


@needs_gpu
def test_cupy_cuda_array_interface_import():
    import cupy as cp

    x = cp.arange(5, dtype=cp.int32)
    t = dlbridge.from_dlpack(x)
    assert t.dtype == "int32" and t.data_ptr == x.__cuda_array_interface__["data"][0]
