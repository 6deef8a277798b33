"""goodarray's adapter for dlbridge's checker (``python -m dlbridge check``), registered in
pyproject.toml under the entry point group ``dlbridge.check``."""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbridge_check import Adapter, Observed, Recipe


class GoodArrayAdapter(Adapter):
    name = "goodarray"
    module = "goodarray"
    pip = "goodarray"
    #: goodarray keeps a read-only import read-only
    readonly_results = True
    result_modules = ("goodarray",)

    def make(self, recipe: Recipe, ref: np.ndarray) -> Any:
        # asarray shares the reference's memory: every dtype, layout and flag NumPy has
        return self.load().asarray(ref)

    def src_readonly(self, x: Any) -> bool:
        return bool(x.readonly)

    def from_dlpack(self, obj: Any, **kw: Any) -> Any:
        return self.load().from_dlpack(obj, **kw)

    @staticmethod
    def read_result(y: Any) -> Observed:
        # goodarray imports dtypes NumPy's DLPack export refuses (bfloat16, float8): the
        # default, which reads a result through its own export, could not read those
        a = y._data
        return Observed(
            kind="goodarray.Array",
            dtype=a.dtype.name,
            shape=a.shape,
            values=np.array(a, copy=True, order="C"),
            ptr=a.__array_interface__["data"][0] if a.size else None,
            writable=bool(a.flags.writeable),
            device=(1, 0),
            strides=tuple(s // a.itemsize for s in a.strides),
        )

    def native_reduce(self, y: Any) -> complex:
        return complex(self.load().sum(y))
