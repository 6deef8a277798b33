"""virtarray's adapter for dlbridge's checker: its arrays are made on the virtual "device1", so
that the producer audit sees the device claim of a virtual device."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbridge_check import Adapter, Recipe


class VirtArrayAdapter(Adapter):
    name = "virtarray"
    module = "virtarray"
    pip = "virtarray"
    result_modules = ("virtarray",)

    def make(self, recipe: Recipe, ref: np.ndarray) -> Any:
        return self.load().asarray(ref, device="device1")

    def from_dlpack(self, obj: Any, **kw: Any) -> Any:
        return self.load().from_dlpack(obj, **kw)
