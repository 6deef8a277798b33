"""Shared fixtures for the dlbridge test suite.

Helper functions (deterministic data, the layout catalogue, comparisons) live in
``dlb_testing.py``; the ctypes mirror of the DLPack ABI used to build hostile capsules lives in
``dlpack_ctypes.py``. Both sit next to this file, which puts this directory on ``sys.path`` so
that the tests under ``interop/`` can import them too.
"""

from __future__ import annotations

import gc
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import dlb_testing  # noqa: E402

try:  # hypothesis is a test dependency; keep the property tests fast and deterministic
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "dlbridge",
        max_examples=150,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.load_profile(os.environ.get("DLBRIDGE_HYPOTHESIS_PROFILE", "dlbridge"))
except ImportError:  # pragma: no cover
    pass


@pytest.fixture
def collect():
    """Run a full garbage collection (for reference cycles through capsules / owners)."""

    def _collect() -> None:
        gc.collect()

    return _collect


@pytest.fixture(params=dlb_testing.NUMPY_DTYPES)
def np_dtype(request):
    """Every dtype NumPy can exchange through DLPack (no bfloat16/float8: NumPy refuses them)."""
    return request.param


@pytest.fixture(params=sorted(dlb_testing.LAYOUTS))
def layout(request):
    """Name of a layout from ``dlb_testing.LAYOUTS``."""
    return request.param


@pytest.fixture
def tmp_npy(tmp_path):
    """Path of a saved .npy file holding ``arange(24).reshape(4, 6)`` as float64."""
    import numpy as np

    path = tmp_path / "data.npy"
    np.save(path, np.arange(24, dtype=np.float64).reshape(4, 6))
    return path


@pytest.fixture
def x64():
    """jax with 64-bit types enabled for the test (restored after); skips without jax."""
    jax = pytest.importorskip("jax")
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", old)


@pytest.fixture
def no_cuda_gpu():
    """Skip a test of the driver-absent CUDA paths where dlbridge reaches a real GPU: its fake
    CUDA pointers would reach the driver (``test_cuda.py`` tests the GPU itself)."""
    if dlb_testing.cuda_gpu_present():
        pytest.skip("a CUDA GPU is present: this tests the driver-absent path")
