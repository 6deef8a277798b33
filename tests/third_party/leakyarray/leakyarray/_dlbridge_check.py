"""leakyarray's adapter for dlbridge's checker (``python -m dlbridge check``), registered in
pyproject.toml under the entry point group ``dlbridge.check``."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbridge_check import Adapter, Recipe


class LeakyArrayAdapter(Adapter):
    name = "leakyarray"
    module = "leakyarray"
    pip = "leakyarray"
    readonly_results = True
    result_modules = ("leakyarray",)

    def make(self, recipe: Recipe, ref: np.ndarray) -> Any:
        return self.load().asarray(ref)

    def src_readonly(self, x: Any) -> bool:
        # the truth, whatever the export says: the checker compares the two
        return bool(x.readonly)

    def from_dlpack(self, obj: Any, **kw: Any) -> Any:
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y: Any) -> complex:
        return complex(self.load().sum(y))
