"""An adapter for dlbridge's checker of ONNX Runtime's ``OrtValue``, a library with DLPack and
no array API namespace (so the automatic adapter cannot check it), named on the command line
as ``module:object``::

    PYTHONPATH=tests/third_party python -m dlbridge check \\
        --libraries numpy,torch,ortvalue_adapter:OrtValueAdapter

docs/check-your-library.md shows its results; tests/test_check_third_party.py checks them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlbridge_check import Adapter, Recipe, Unsupported


class OrtValueAdapter(Adapter):
    name = "onnxruntime"
    module = "onnxruntime"
    pip = "onnxruntime"
    result_modules = ("onnxruntime",)
    #: OrtValue.from_dlpack(data) has no device= or copy=
    takes_kwargs = False
    note = "OrtValue (ortvalue_from_numpy, OrtValue.from_dlpack)"

    def make(self, recipe: Recipe, ref: np.ndarray) -> Any:
        # an OrtValue is dense and C-ordered, and always writable: it cannot express the rest
        if recipe.readonly:
            raise Unsupported("an OrtValue cannot be read-only")
        if not ref.flags.c_contiguous:
            raise Unsupported("an OrtValue is dense and C-ordered (no strides)")
        if ref.dtype.kind == "c":
            raise Unsupported("ONNX Runtime has no complex tensors")
        try:
            return self.load().OrtValue.ortvalue_from_numpy(ref)
        except (RuntimeError, TypeError, ValueError) as e:
            raise Unsupported(f"ortvalue_from_numpy refused {ref.dtype}: {e}") from e

    def from_dlpack(self, obj: Any, **kw: Any) -> Any:
        return self.load().OrtValue.from_dlpack(obj)

    def native_reduce(self, y: Any) -> complex:
        return complex(y.numpy().sum())
