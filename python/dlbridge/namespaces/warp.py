"""NVIDIA Warp: legacy capsules, any strides, at most 4 dimensions.

Measured peer facts:

- warp 1.19: ``wp.from_dlpack`` asks for legacy capsules only, keeps any strides; no complex,
  no 0-d arrays.
"""

from __future__ import annotations

from typing import Any

from .base import CPU, Device, Namespace


class Warp(Namespace):
    """NVIDIA Warp: ``wp.from_dlpack`` asks for a legacy capsule (``__dlpack__()``, no keywords)
    and takes any strides; warp arrays have no read-only flag; no complex, bfloat16 or float8."""

    name = "warp"
    module = "warp"
    pip = "warp-lang"
    aliases = ("warp", "wp")
    rank = 13
    alias_readonly = False
    readonly_why = (
        "wp.from_dlpack asks for legacy DLPack capsules only, which cannot carry the read-only "
        "flag (and warp arrays have none)"
    )
    result = "warp.array"
    #: dtypes warp arrays hold; the checker's Warp producer reads the same list
    DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64")

    def load(self):
        if self._mod is None:
            import warp

            # warp 1.19 reads config.quiet but does not declare it (typed as Any: mypy passes
            # with warp installed and without)
            config: Any = warp.config
            config.quiet = True
            warp.init()
            self._mod = warp
        return self._mod

    def owns(self, x):
        wp = self.loaded()
        return wp is not None and isinstance(x, wp.array)

    def device(self, x):
        if x.device.is_cpu:
            return Device("cpu")
        return Device(f"cuda:{x.device.ordinal}")

    def to_host(self, x):
        return x if x.device.is_cpu else x.to("cpu")

    def devices(self):
        wp = self.load()
        return [Device("cpu")] + [Device(f"cuda:{d.ordinal}") for d in wp.get_cuda_devices()]

    def can_hold(self, device):
        return device.type == CPU or any(d == device for d in self.devices())

    def dtype_route(self, dtype):
        if dtype in self.DTYPES:
            return "dlpack"
        return f"refuse: warp has no {dtype} dtype"

    def shape_refusal(self, shape):
        if len(shape) == 0:
            return "warp has no 0-d arrays; reshape to (1,) first"
        if len(shape) > 4:
            return "warp arrays have at most 4 dimensions"
        return None

    def from_tensor(self, t, route):
        return self.load().from_dlpack(t)


__all__ = ["Warp"]
