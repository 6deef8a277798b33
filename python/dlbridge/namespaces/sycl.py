"""dpnp: arrays on SYCL (oneAPI) devices, which dlbridge cannot read itself.

Measured peer facts:

- dpnp 0.20: arrays live on a SYCL device (``kDLOneAPI``); ``dpnp.from_dlpack`` of host data
  returns a *NumPy* array unless ``device=`` names a SYCL device (then it copies); it honours
  READ_ONLY; no bfloat16/float8.
"""

from __future__ import annotations

from typing import Any

from .base import BASIC_DTYPES, ONEAPI, Device, Namespace


class Dpnp(Namespace):
    name = module = "dpnp"
    pip = "dpnp intel-opencl-rt"
    aliases = ("dpnp",)
    rank = 4
    has_host = False
    result = "dpnp.ndarray"

    def owns(self, x):
        dpnp = self.loaded()
        return dpnp is not None and isinstance(x, dpnp.ndarray)

    def devices(self):
        try:
            import dpctl

            return [Device((ONEAPI, d.get_device_id())) for d in dpctl.get_devices()]
        except Exception:  # noqa: BLE001 - no SYCL runtime
            return []

    def can_hold(self, device):
        return device.type == ONEAPI

    def device_hint(self):
        devs = self.devices()
        return str(devs[0]) if devs else "oneapi:0"

    def _sycl(self, device: Device) -> Any:
        import dpctl

        devices = dpctl.get_devices()
        if device.id >= len(devices):
            raise BufferError(f"no SYCL device {device} (dpctl sees {len(devices)})")
        return devices[device.id]

    def dtype_route(self, dtype):
        if dtype in BASIC_DTYPES:
            return "dlpack"
        return f"refuse: dpnp has no {dtype} dtype"

    def from_tensor(self, t, route):
        return self.load().from_dlpack(t)

    def from_host(self, t, device, route):
        # dpnp.from_dlpack(t, device=...) copies host data itself, but its fallback mishandles
        # strided, 0-d, empty and read-only tensors (dpnp 0.20); dpnp.asarray of a NumPy view
        # of the same memory handles them all, in one host-to-device copy.
        import numpy as np

        return self.load().asarray(np.from_dlpack(t), device=self._sycl(device))

    def copy_on_device(self, t):
        from .._native import from_dlpack

        dpnp = self.load()
        return from_dlpack(dpnp.copy(dpnp.from_dlpack(t), order="C"))


__all__ = ["Dpnp"]
