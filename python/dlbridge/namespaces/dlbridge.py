"""dlbridge itself as a source and a target: a :class:`dlbridge.Tensor`."""

from __future__ import annotations

import sys

from .._native import Tensor
from .base import Namespace


class Dlbridge(Namespace):
    name = module = pip = "dlbridge"
    noun = "tensor"
    aliases = ("dlbridge",)
    rank = 10
    result = "dlbridge.Tensor"

    def installed(self):
        return True

    def load(self):
        return sys.modules["dlbridge"]

    def owns(self, x):
        return isinstance(x, Tensor)

    def device(self, x):
        return x.device

    def to_host(self, x):
        return x if x.device.is_host_accessible else None  # moved by the caller

    def can_hold(self, device):
        return True

    def dtype_route(self, dtype):
        return "dlpack"

    def from_tensor(self, t, route):
        return t


__all__ = ["Dlbridge"]
