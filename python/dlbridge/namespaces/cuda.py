"""CuPy: arrays on CUDA devices only."""

from __future__ import annotations

from .base import CUDA, CUDA_MANAGED, ROCM, Device, Namespace


class CuPy(Namespace):
    """CuPy (needs CUDA: not available on the machine this was written on, so untested)."""

    name = module = "cupy"
    # The CUDA 13 build: the CUDA that torch's wheel brings (its nvidia-*-cu13 runtime
    # libraries); cupy-cuda12x would need a separate CUDA 12 toolkit.
    pip = "cupy-cuda13x"
    aliases = ("cupy", "cp")
    rank = 8
    alias_readonly = False
    readonly_why = "CuPy arrays have no read-only flag"
    has_host = False
    result = "cupy.ndarray"

    def owns(self, x):
        cp = self.loaded()
        return cp is not None and isinstance(x, cp.ndarray)

    def devices(self):
        cp = self.load()
        try:
            n = cp.cuda.runtime.getDeviceCount()
        except Exception:  # noqa: BLE001
            n = 0
        return [Device(f"cuda:{i}") for i in range(n)]

    def can_hold(self, device):
        return device.type in (CUDA, CUDA_MANAGED, ROCM)

    def device_hint(self):
        return "cuda:0"

    def from_tensor(self, t, route):
        return self.load().from_dlpack(t)

    def from_host(self, t, device, route):
        import numpy as np

        cp = self.load()
        with cp.cuda.Device(device.id):
            return cp.asarray(np.from_dlpack(t))

    def copy_on_device(self, t):
        from .._native import from_dlpack

        cp = self.load()
        return from_dlpack(cp.array(cp.from_dlpack(t), copy=True, order="C"))


__all__ = ["CuPy"]
