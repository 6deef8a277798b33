"""goodarray's adapter for dlbridge's checker (``python -m dlbridge check``), registered in
pyproject.toml under the entry point group ``dlbridge.check``."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbridge.check import Adapter, Recipe


class GoodArrayAdapter(Adapter):
    name = "goodarray"
    module = "goodarray"
    pip = "goodarray"
    #: goodarray keeps a read-only import read-only (its results say so in their export)
    readonly_results = True
    result_modules = ("goodarray",)

    def make(self, recipe: Recipe, ref: np.ndarray) -> Any:
        # asarray shares the reference's memory: every dtype, layout and flag NumPy has
        return self.load().asarray(ref)

    def src_readonly(self, x: Any) -> bool:
        return bool(x.readonly)

    def from_dlpack(self, obj: Any, **kw: Any) -> Any:
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y: Any) -> complex:
        return complex(self.load().sum(y))
