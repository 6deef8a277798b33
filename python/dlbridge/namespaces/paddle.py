"""PaddlePaddle: writable aliases of read-only data, negative strides read wrongly.

Measured peer facts:

- paddle 3.3: ``paddle.from_dlpack`` asks for ``max_version=(1, 2)``, ignores READ_ONLY and
  reads negative strides wrongly (wrong values, no error); ``__dlpack_device__`` answers
  ``(kDLCPU, None)``.
"""

from __future__ import annotations

import importlib

from .._layout import negative_strides
from .base import BASIC_DTYPES, CPU, Device, Namespace, State, device_of


class Paddle(Namespace):
    """PaddlePaddle: ``paddle.from_dlpack`` asks for ``max_version=(1, 2)``, ignores READ_ONLY
    (a writable alias) and reads negative strides wrongly (garbage values, no error)."""

    name = "paddle"
    module = "paddle"
    pip = "paddlepaddle"
    noun = "tensor"
    aliases = ("paddle", "paddlepaddle")
    rank = 11
    alias_readonly = False
    readonly_why = (
        "paddle tensors cannot be read-only (paddle.from_dlpack ignores the READ_ONLY flag and "
        "hands out a writable alias)"
    )
    result = "paddle.Tensor"

    def load(self):
        if self._mod is None:
            import warnings

            with warnings.catch_warnings():  # "No ccache found" on import
                warnings.simplefilter("ignore")
                self._mod = importlib.import_module("paddle")
        return self._mod

    def owns(self, x):
        paddle = self.loaded()
        return paddle is not None and isinstance(x, paddle.Tensor)

    def device(self, x):
        place = x.place
        if place.is_cpu_place():
            return Device("cpu")
        if place.is_gpu_place():
            return Device(f"cuda:{place.gpu_device_id()}")
        return device_of(x)  # paddle answers (kDLCPU, None) for CPU: only other places get here

    def source(self, x):
        # dlbridge refuses tensors that require gradients (Paddle's own rule); the plan reads
        # the source's facts before its detach step runs, from the same memory detached.
        return x if x.stop_gradient else x.detach()

    def state(self, x):
        if not x.stop_gradient:
            return [State(
                "requires grad (stop_gradient=False)",
                ".detach() (no copy; the result is not tracked by autograd)",
                "detach", 0, lambda v: v.detach(),
            )]
        return []

    def to_host(self, x):
        return x if x.place.is_cpu_place() else x.cpu()

    def devices(self):
        paddle = self.load()
        out = [Device("cpu")]
        try:
            if paddle.device.is_compiled_with_cuda():
                out += [Device(f"cuda:{i}") for i in range(paddle.device.cuda.device_count())]
        except Exception:  # noqa: BLE001
            pass
        return out

    def can_hold(self, device):
        return device.type == CPU or any(d == device for d in self.devices())

    def dtype_route(self, dtype):
        if dtype in BASIC_DTYPES or dtype in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            return "dlpack"
        return f"refuse: paddle has no {dtype} dtype"

    def layout_problem(self, t):
        if negative_strides(t.shape, t.strides):
            return ("paddle.from_dlpack reads negative strides wrongly (paddle 3.3: wrong values, "
                    "no error)")
        return None

    def from_tensor(self, t, route):
        return self.load().from_dlpack(t)


__all__ = ["Paddle"]
