"""The checker's adapters of pyarrow and pandas, and of
the libraries that speak the Arrow C interfaces only, which are producers for dlbridge's Arrow
import and no target of :func:`dlbridge.convert` (no namespace)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..layout import negative_strides
from .base import Adapter, Observed, Unsupported, det_values, observe_numpy, reference


def _observe_pa_tensor(y: Any) -> Observed:
    a = y.to_numpy()
    obs = observe_numpy(a)
    obs.kind = "pyarrow.Tensor"
    obs.writable = bool(y.is_mutable)
    return obs


def _observe_pa_array(y: Any) -> Observed:
    a = y.to_numpy(zero_copy_only=False)
    obs = observe_numpy(a)
    obs.kind = "pyarrow.Array"
    obs.writable = False
    return obs


class PyArrowLib(Adapter, library="pyarrow"):
    result_modules = ("pyarrow",)
    readonly_results = True
    note = ("producer: pyarrow.Array for 1-D data, pyarrow.Tensor otherwise; consumer: "
            "pyarrow.Tensor.from_dlpack")

    @staticmethod
    def read_result(y: Any) -> Observed:
        return _observe_pa_tensor(y) if type(y).__name__ == "Tensor" else _observe_pa_array(y)

    def make(self, recipe, ref):
        pa = self.load()
        if recipe.dtype in ("bfloat16",) or recipe.dtype.startswith(("float8", "complex")):
            raise Unsupported(f"pyarrow has no {recipe.dtype} type")
        if negative_strides(ref.shape, ref.strides) or any(
            op[0] in ("misalign", "broadcast", "shift8") for op in recipe.ops
        ):
            raise Unsupported("pyarrow arrays cannot have negative, zero or unaligned strides")
        if ref.ndim == 1:
            # 1-D: an Arrow array; offsets are slices, steps are not expressible
            base = det_values(recipe.dtype, recipe.shape)
            arr = pa.array(base)
            for op in recipe.ops:
                sl = (
                    op[1][0]
                    if op[0] == "ix" and isinstance(op[1], tuple)
                    else (op[1] if op[0] == "ix" else None)
                )
                if not isinstance(sl, slice):
                    raise Unsupported(f"not expressible as an Arrow array: {op}")
                start, stop, step = sl.indices(len(base))
                if step != 1:
                    raise Unsupported("Arrow arrays are contiguous (no step slices)")
                arr = arr.slice(start, max(0, stop - start))
            return arr
        return pa.Tensor.from_numpy(reference(recipe))

    def src_readonly(self, x):
        return not bool(getattr(x, "is_mutable", False))

    def device_arg(self, which):
        if which in ("cpu", "native"):
            return (1, 0)
        return super().device_arg(which)

    def from_dlpack(self, obj, **kw):
        return self.load().Tensor.from_dlpack(obj, **kw)


_PANDAS_LACKS = ("bfloat16", "float8", "complex", "bcomplex")  # Arrow has no such type


class PandasLib(Adapter, library="pandas"):
    result_modules = ("pandas",)
    takes_kwargs = False
    note = ("producer: 1-D cases a pandas.Series (it offers __arrow_c_stream__ only), 2-D cases "
            "DataFrame.to_numpy() (a read-only view under copy-on-write); consumer: "
            "pandas.Series.from_arrow (Arrow PyCapsule objects only, 1-D, always a copy)")

    @staticmethod
    def read_result(y: Any) -> Observed:
        """A pandas Series: its values, and the NumPy block behind it when it has one."""
        obs = Observed(kind="pandas.Series")
        values = y.to_numpy()
        obs.dtype = values.dtype.name if isinstance(y.dtype, np.dtype) else str(y.dtype)
        obs.shape = tuple(y.shape)
        obs.values = np.array(values, copy=True, order="C")
        obs.device = (1, 0)
        block = getattr(y.array, "_ndarray", None)  # NumpyExtensionArray: the Series' own memory
        if isinstance(block, np.ndarray):
            obs.ptr = block.__array_interface__["data"][0] if block.size else None
            obs.writable = bool(block.flags.writeable)  # s.iloc[i] = v writes into it in place
        else:
            obs.writable = False  # Arrow-backed: immutable
        return obs

    def make(self, recipe, ref):
        pd = self.load()
        if recipe.dtype.startswith(_PANDAS_LACKS) or recipe.dtype == "float16":
            raise Unsupported(f"no pandas column of {recipe.dtype} that Arrow can carry")
        if recipe.ops:
            raise Unsupported("pandas columns are contiguous (views of other layouts are copies)")
        if ref.ndim == 1:
            return pd.Series(np.array(ref, copy=True))
        if ref.ndim == 2 and ref.size:
            # DataFrame.to_numpy(): a read-only (copy-on-write) F-order view of the frame's block
            return pd.DataFrame(np.array(ref, copy=True)).to_numpy()
        raise Unsupported("pandas holds 1-D Series and 2-D frames")

    def src_readonly(self, x):
        if isinstance(x, np.ndarray):
            return not x.flags.writeable
        return True  # the Arrow stream's buffers are immutable for their consumers

    def src_ptr(self, x):
        if isinstance(x, np.ndarray):
            return x.__array_interface__["data"][0]
        block = getattr(x.array, "_ndarray", None)
        if isinstance(block, np.ndarray) and x.dtype != bool:  # booleans are bit-packed: copied
            return block.__array_interface__["data"][0]
        return None

    def consume(self, obj, *, device=None, copy=None):
        if device is not None or copy is not None:
            raise Unsupported("pandas.Series.from_arrow has no device= / copy=")
        if not any(hasattr(obj, m) for m in ("__arrow_c_array__", "__arrow_c_stream__")):
            raise Unsupported(
                f"pandas takes Arrow PyCapsule objects only, not a {type(obj).__name__}"
            )
        shape = getattr(obj, "shape", None)
        if shape is not None and len(shape) != 1:
            raise Unsupported(
                "pandas.Series.from_arrow makes 1-D Series (an N-d "
                "tensor would be a Series of lists)"
            )
        return self.load().Series.from_arrow(obj)

    def native_reduce(self, y):
        return complex(y.sum())


class ArrowProducerLib(Adapter):
    """A library that speaks the Arrow C interfaces only (no DLPack): a producer for dlbridge's
    Arrow import, of 1-D contiguous arrays. Subclasses name what they cannot hold and build the
    array from a fresh C-contiguous copy of the reference."""

    consumer = False
    note = "Arrow C data only (no DLPack): producer for dlbridge's Arrow import"
    #: dtypes (names or prefixes) the library has no array of
    lacks: tuple[str, ...] = ("bfloat16", "float8", "complex", "bcomplex")

    def build(self, mod: Any, values: np.ndarray) -> Any:
        raise NotImplementedError

    def make(self, recipe, ref):
        mod = self.load()
        if ref.ndim != 1 or recipe.ops:
            raise Unsupported(f"{self.name} arrays are 1-D and contiguous")
        if recipe.dtype.startswith(self.lacks):
            raise Unsupported(f"{self.name} has no {recipe.dtype} array built from a buffer")
        return self.build(mod, np.array(ref, copy=True, order="C"))

    def src_readonly(self, x):
        return True

    def src_ptr(self, x):
        return None


class NanoarrowLib(ArrowProducerLib):
    name = module = dist = pip = "nanoarrow"
    rank = 15
    lacks = ("bool", "bfloat16", "float16", "float8", "complex", "bcomplex")

    def build(self, na, values):
        return na.c_array(values)


class Arro3Lib(ArrowProducerLib):
    name = "arro3"
    module = "arro3.core"
    dist = pip = "arro3-core"
    rank = 16

    def build(self, a3, values):
        return a3.Array.from_numpy(values)


class PolarsLib(ArrowProducerLib):
    name = module = dist = pip = "polars"
    rank = 17
    note = "Arrow C stream only (no DLPack): producer for dlbridge's Arrow import"
    lacks = ("bfloat16", "float16", "float8", "complex", "bcomplex")

    def build(self, pl, values):
        return pl.Series(values)

    def src_ptr(self, x):
        # Polars hands out its own buffer for numeric data without nulls (bit-packed booleans
        # need a copy, so there is no pointer to compare).
        try:
            return x.to_numpy(allow_copy=False).ctypes.data
        except Exception:  # noqa: BLE001 - any refusal means "no zero-copy view to compare"
            return None
