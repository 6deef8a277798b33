"""Arrow-shaped libraries: pyarrow (immutable, dense, first dimension outermost) and pandas.

Measured peer facts:

- pyarrow 26: arrays are immutable; ``pa.array(tensor)`` asks ``Tensor.__arrow_array__``
  (1-D: a primitive array, N-D: ``arrow.fixed_shape_tensor``); no complex, bfloat16, float8,
  0-d.
- pandas 3.1: copy-on-write; a Series' Arrow stream turns NaN into nulls, so NumPy-backed
  Series and frames are read through ``to_numpy()`` (a read-only view).
"""

from __future__ import annotations

from typing import Any

from .._layout import arrow_zero_copy
from .base import BASIC_DTYPES, Device, Namespace


class PyArrow(Namespace):
    """pyarrow as a target: ``pa.array(t)``, through the Arrow C data interface
    (``Tensor.__arrow_array__``), not ``pa.Array.from_dlpack`` / ``pa.Tensor.from_dlpack``
    (pyarrow 26). The Arrow route does everything the DLPack one does, zero-copy, and more:
    booleans become ``arrow.bool8`` without a copy (``Array.from_dlpack`` refuses kDLBool),
    N-d tensors a ``fixed_shape_tensor`` array (``Array.from_dlpack`` takes only 1-d, unit
    stride data; ``Tensor.from_dlpack`` gives a ``pa.Tensor``, not an array)."""

    name = module = pip = "pyarrow"
    aliases = ("pyarrow", "pa")
    rank = 5
    importer = "pyarrow.array (Tensor.__arrow_array__)"
    immutable = True
    result = "pyarrow.Array"

    def owns(self, x):
        pa = self.loaded()
        return pa is not None and isinstance(x, (pa.Array, pa.ChunkedArray))

    def is_result(self, x):
        pa = self.loaded()
        return pa is not None and isinstance(x, pa.Array)

    def device(self, x):
        return Device("cpu")

    def to_host(self, x):
        return x

    def dtype_route(self, dtype):
        if dtype.startswith("complex") or dtype not in BASIC_DTYPES:
            return f"refuse: Arrow has no {dtype} type"
        return "dlpack"

    def layout_problem(self, t):
        if not arrow_zero_copy(t.shape, t.strides):
            return (
                "Arrow cannot express this layout (it needs a dense array whose first "
                "dimension is the outermost)"
            )
        return None

    def shape_refusal(self, shape):
        if len(shape) == 0:
            return "Arrow has no 0-d arrays; reshape to (1,) first"
        return None

    def from_tensor(self, t, route):
        return self.load().array(t)


class Pandas(Namespace):
    """pandas 3 (copy-on-write): a Series offers only ``__arrow_c_stream__`` (NaN in a float
    column becomes an Arrow null there), ``.values`` / ``.to_numpy()`` are read-only views. As a
    source, a Series or DataFrame of NumPy dtypes goes through ``to_numpy()`` (zero-copy where
    pandas can, NaN kept, read-only); other columns through the Arrow stream. As a target, a
    1-D tensor becomes a Series and a 2-D one a DataFrame over the same memory: read-only memory
    stays read-only (writes raise ValueError)."""

    name = module = pip = "pandas"
    aliases = ("pandas", "pd")
    rank = 14
    importer = "pandas.Series / pandas.DataFrame over numpy.from_dlpack"
    result = "pandas.Series (1-D) or pandas.DataFrame (2-D)"
    noun = "object"

    def owns(self, x):
        pd = self.loaded()
        return pd is not None and isinstance(x, (pd.Series, pd.DataFrame))

    def device(self, x):
        return Device("cpu")

    @staticmethod
    def _numpy_backed(x: Any) -> bool:
        import numpy as np

        dtypes = [x.dtype] if hasattr(x, "dtype") else list(x.dtypes)
        return bool(dtypes) and all(isinstance(d, np.dtype) and d.kind in "biufc" for d in dtypes)

    def source(self, x):
        if self._numpy_backed(x):
            return x.to_numpy()  # a read-only view of the column (or the frame's one block)
        return x  # Arrow-backed or nullable: the Arrow stream (nulls refused with the fix)

    def to_host(self, x):
        return x

    def shape_refusal(self, shape):
        if len(shape) not in (1, 2):
            return f"pandas holds 1-D Series and 2-D DataFrames, not {len(shape)}-d data"
        return None

    def from_tensor(self, t, route):
        import numpy as np

        pd = self.load()
        view = np.from_dlpack(t)
        if view.ndim == 1:
            return pd.Series(view, copy=False)
        return pd.DataFrame(view, copy=False)


__all__ = ["Pandas", "PyArrow"]
