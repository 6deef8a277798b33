"""tvm_ffi: any device and layout, no read-only flag.

Measured peer facts:

- tvm_ffi 0.1: any device and layout, no read-only flag.
"""

from __future__ import annotations

from .base import Device, Namespace, device_of


class TvmFfi(Namespace):
    name = module = "tvm_ffi"
    noun = "tensor"
    pip = "apache-tvm-ffi"
    aliases = ("tvm_ffi", "tvm")
    rank = 9
    alias_readonly = False
    readonly_why = "tvm_ffi tensors have no read-only flag (kernels may write them)"
    result = "tvm_ffi.Tensor"

    def owns(self, x):
        tvm = self.loaded()
        return tvm is not None and isinstance(x, tvm.Tensor)

    def to_host(self, x):
        dev = device_of(x)
        if dev is None or dev.is_host_accessible:
            return x
        return None  # the caller moves it through dlbridge

    def devices(self):
        return [Device("cpu")]

    def can_hold(self, device):
        return True

    def dtype_route(self, dtype):
        return "dlpack"

    def from_tensor(self, t, route):
        return self.load().from_dlpack(t)


__all__ = ["TvmFfi"]
