"""Discovery of the installed array libraries and one adapter per library.

An adapter knows, for its library, how to

- build an array from NumPy data with a given layout (``make``; the checker's *producer* role),
  or say that the library cannot express it (:class:`Unsupported`);
- import an array through the library's DLPack consumer (``consume``: ``from_dlpack`` with the
  library's own spelling of ``device=`` and ``copy=``);
- tell whether one of its arrays is read-only.

Results of any library are inspected by :func:`observe` (dtype, shape, values, data pointer,
writability, device), which dispatches on the result's type, so a consumer that returns another
library's array (dpnp returns NumPy arrays for host data) is still read correctly.

Adapters import their library lazily, so discovery costs a ``find_spec`` per library and a worker
subprocess imports only the libraries of the pairs it runs.

The checker judges dlbridge, so it must not reuse the conclusions of dlbridge's planner
(``Namespace.dtype_route``, ``layout_problem``, ``can_hold``...): a wrong rule there would then
agree with itself here. It shares only data about the libraries with :mod:`dlbridge.namespaces`
(the dtypes MLX and Warp hold, the device types whose memory the host reads), one list per fact.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._layout import negative_strides
from ..namespaces.base import HOST_TYPES
from ..namespaces.mlx import Mlx
from ..namespaces.warp import Warp
from . import refcapsule as rc


class Unsupported(Exception):
    """The library cannot express this case (dtype, layout, flag or argument)."""


# ----------------------------------------------------------------------------- recipes


@dataclass(frozen=True)
class Recipe:
    """How to build the source array: a C- or F-ordered base, then view operations.

    ``ops`` items: ``("T",)`` reverse the axes; ``("ix", (slice, ...))`` basic indexing;
    ``("broadcast", shape)`` a zero-stride view; ``("misalign",)`` data at an odd address;
    ``("shift8",)`` data 8 bytes past a 64-byte boundary (element-aligned, not 64-aligned).
    """

    dtype: str = "float64"
    shape: tuple[int, ...] = (3, 4)
    order: str = "C"
    ops: tuple = ()
    readonly: bool = False

    @property
    def plain(self) -> bool:
        """No view operations: what libraries without strides (JAX) can express."""
        return not self.ops and (self.order == "C" or len([n for n in self.shape if n > 1]) <= 1)


ALIGN = 64  # source buffers start on a 64-byte boundary: results do not depend on the allocator


def aligned_empty(
    shape: tuple[int, ...], dt: np.dtype, order: str = "C", shift: int = 0
) -> np.ndarray:
    """An uninitialised array whose first byte is ``shift`` bytes past a 64-byte boundary."""
    n = math.prod(shape) * dt.itemsize
    raw = np.empty(n + ALIGN + shift, dtype=np.uint8)
    start = (-raw.__array_interface__["data"][0]) % ALIGN + shift
    flat = raw[start : start + n].view(dt)
    if order == "F":
        return flat.reshape(tuple(reversed(shape))).T if shape else flat.reshape(shape)
    return flat.reshape(shape)


def det_values(dtype: str, shape: tuple[int, ...], order: str = "C", shift: int = 0) -> np.ndarray:
    """Deterministic, distinct-ish values that every dtype represents exactly, in a 64-byte
    aligned buffer (plus ``shift`` bytes)."""
    dt = rc.np_dtype(dtype)
    if dt.name != dtype:  # the raw-bytes stand-in of refcapsule.np_dtype: no ml_dtypes
        raise Unsupported(f"{dtype} needs ml_dtypes (pip install ml_dtypes)")
    n = math.prod(shape)
    v = np.arange(n, dtype=np.int64)
    if dtype == "bool":
        a = (v % 3) == 0
    elif dtype.startswith("complex"):
        a = ((v % 50) - 20).astype(np.float64) + 1j * ((v % 7) - 3).astype(np.float64)
    elif dtype.startswith("uint"):
        a = (v * 7 + 3) % 250
    elif dtype.startswith("int"):
        a = ((v * 7 + 3) % 120) - 60
    else:  # float16/32/64, bfloat16, float8: small halves are exact everywhere
        a = (((v * 5 + 3) % 16) - 8).astype(np.float64) * 0.5
    out = aligned_empty(shape, dt, order, shift)
    out[...] = np.asarray(a).astype(dt).reshape(shape, order="F" if order == "F" else "C")
    return out


def apply_ops(x: np.ndarray, ops: tuple) -> np.ndarray:
    for op in ops:
        if op[0] == "T":
            x = x.T
        elif op[0] == "ix":
            x = x[op[1]]
        elif op[0] == "broadcast":
            x = np.broadcast_to(x, op[1])
        elif op[0] in ("misalign", "shift8"):
            y = aligned_empty(x.shape, x.dtype, "C", 1 if op[0] == "misalign" else 8)
            y[...] = x
            x = y
        else:  # pragma: no cover
            raise ValueError(op)
    return x


def reference(recipe: Recipe) -> np.ndarray:
    """The NumPy array every producer must reproduce (values, dtype, shape and layout)."""
    base = det_values(recipe.dtype, recipe.shape, recipe.order)
    x = apply_ops(base, recipe.ops)
    if recipe.readonly and x.flags.writeable:
        x = x.view()
        x.flags.writeable = False
    return x


# ----------------------------------------------------------------------------- observations


@dataclass
class Observed:
    """What the checker could see of a result array."""

    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    values: np.ndarray | None = None  # C-order copy (host) or None
    ptr: int | None = None  # address of the first element
    writable: bool | None = None  # None: the library cannot say
    device: tuple[int, int] | None = None
    strides: tuple[int, ...] | None = None  # in elements
    is_copied: bool | None = None
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # spec violations seen while reading
    kind: str = ""


def _dev(x: Any) -> tuple[int, int] | None:
    try:
        d = x.__dlpack_device__()
        return (int(d[0]), int(d[1]))
    except Exception:  # noqa: BLE001
        return None


def _from_capsule_info(obs: Observed, info: rc.CapsuleInfo) -> None:
    obs.values = info.values
    if obs.dtype is None:
        obs.dtype = info.dtype
    if obs.shape is None:
        obs.shape = info.shape
    if obs.strides is None:
        obs.strides = info.element_strides


def _observe_numpy(y: np.ndarray) -> Observed:
    return Observed(
        kind="numpy.ndarray",
        dtype=y.dtype.name,
        shape=tuple(y.shape),
        values=np.array(y, copy=True, order="C"),
        ptr=y.__array_interface__["data"][0] if y.size else None,
        writable=bool(y.flags.writeable),
        device=(1, 0),
        strides=tuple(s // y.itemsize for s in y.strides) if y.itemsize else None,
    )


def _observe_torch(y: Any) -> Observed:
    obs = Observed(kind="torch.Tensor")
    obs.dtype = str(y.dtype).replace("torch.", "")
    obs.shape = tuple(y.shape)
    obs.ptr = int(y.data_ptr()) if y.numel() else None
    obs.writable = True  # torch has no read-only tensors
    obs.strides = tuple(y.stride())
    obs.device = (1, 0) if y.device.type == "cpu" else _dev(y)
    if obs.device == (1, 0):
        info = rc.read_object(y.detach().resolve_conj().resolve_neg())
        obs.values = info.values
    return obs


def _observe_jax(y: Any) -> Observed:
    obs = Observed(kind="jax.Array")
    obs.dtype = np.dtype(y.dtype).name
    obs.shape = tuple(y.shape)
    obs.writable = False  # jax arrays are immutable
    obs.device = _dev(y)
    try:
        obs.ptr = int(y.unsafe_buffer_pointer()) if y.size else None
    except Exception:  # noqa: BLE001
        pass
    obs.values = np.array(np.asarray(y), copy=True, order="C")
    return obs


def _observe_dpnp(y: Any) -> Observed:
    import dpnp

    u = y.get_array() if hasattr(y, "get_array") else y
    obs = Observed(kind=type(y).__module__.split(".")[0] + "." + type(y).__name__)
    obs.dtype = np.dtype(y.dtype).name
    obs.shape = tuple(y.shape)
    obs.writable = bool(u.flags.writable)
    obs.device = _dev(y)
    obs.ptr = int(u._pointer) if y.size else None
    obs.strides = tuple(u.strides)
    obs.values = np.array(dpnp.asnumpy(y), copy=True, order="C")
    return obs


def _observe_xps(y: Any) -> Observed:
    obs = _observe_numpy(y._array)
    obs.kind = "array_api_strict.Array"
    return obs


def _observe_pa_tensor(y: Any) -> Observed:
    a = y.to_numpy()
    obs = _observe_numpy(a)
    obs.kind = "pyarrow.Tensor"
    obs.writable = bool(y.is_mutable)
    return obs


def _observe_pa_array(y: Any) -> Observed:
    a = y.to_numpy(zero_copy_only=False)
    obs = _observe_numpy(a)
    obs.kind = "pyarrow.Array"
    obs.writable = False
    return obs


def _device_values(y: Any) -> np.ndarray | None:
    """Host copy of an array on a device the checker can reach through a library (oneAPI)."""
    dev = _dev(y)
    if dev is not None and dev[0] == 14:
        try:
            import dpnp

            return np.array(dpnp.asnumpy(dpnp.from_dlpack(y)), copy=True, order="C")
        except Exception:  # noqa: BLE001
            return None
    return None


def _observe_tvm(y: Any) -> Observed:
    obs = Observed(kind="tvm_ffi.Tensor")
    dev = _dev(y)
    if dev is not None and dev[0] not in HOST_TYPES:
        info = rc.probe(y)
        if info is None:
            raise BufferError("cannot read the tensor's capsule")
        _from_capsule_info(obs, info)
        obs.values = _device_values(y)
    else:
        info = rc.read_object(y)
        _from_capsule_info(obs, info)
    obs.dtype = info.dtype
    obs.ptr = info.data_ptr if info.size else None
    obs.device = info.device
    obs.writable = None  # tvm_ffi tensors carry no read-only flag; kernels may write them
    return obs


def _observe_tf(y: Any) -> Observed:
    obs = Observed(kind="tensorflow.Tensor")
    info = rc.read_object(y)
    _from_capsule_info(obs, info)
    obs.dtype = y.dtype.name
    obs.ptr = info.data_ptr if info.size else None
    obs.device = info.device
    obs.writable = False  # TensorFlow tensors are immutable
    return obs


def _observe_capsule_of(y: Any, kind: str, writable: bool | None) -> Observed:
    """Read a result through its own DLPack export (the reference consumer)."""
    obs = Observed(kind=kind)
    info = rc.read_object(y)
    _from_capsule_info(obs, info)
    obs.ptr = info.data_ptr if info.size else None
    obs.device = info.device
    obs.writable = writable
    return obs


def _observe_paddle(y: Any) -> Observed:
    # the dtype comes from the capsule: paddle 3.3 prints its uint16 as "paddle.bfloat16"
    return _observe_capsule_of(y, "paddle.Tensor", True)  # paddle tensors cannot be read-only


def _observe_mlx(y: Any) -> Observed:
    import mlx.core as mx

    if y.dtype == mx.bfloat16:  # MLX 0.32 cannot export bfloat16 through DLPack
        import ml_dtypes

        obs = Observed(
            kind="mlx.core.array",
            dtype="bfloat16",
            shape=tuple(y.shape),
            writable=True,
            device=(1, 0),
        )
        obs.values = np.array(y.astype(mx.float32)).astype(ml_dtypes.bfloat16)
        return obs
    # MLX arrays export writable buffers (np.asarray(x) writes into them): writable
    return _observe_capsule_of(y, "mlx.core.array", True)


def _observe_warp(y: Any) -> Observed:
    return _observe_capsule_of(y, "warp.array", True)  # warp arrays have no read-only flag


def _observe_cupy(y: Any) -> Observed:
    obs = Observed(kind="cupy.ndarray")
    obs.dtype = np.dtype(y.dtype).name
    obs.shape = tuple(y.shape)
    obs.writable = True
    obs.device = _dev(y)
    obs.ptr = int(y.data.ptr) if y.size else None
    obs.strides = tuple(s // y.itemsize for s in y.strides) if y.itemsize else None
    obs.values = np.array(y.get(), copy=True, order="C")
    return obs


def _observe_pandas(y: Any) -> Observed:
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


def _observe_dlbridge(y: Any) -> Observed:
    obs = Observed(kind="dlbridge.Tensor")
    obs.dtype = y.dtype.name
    obs.shape = tuple(y.shape)
    obs.strides = tuple(y.strides)
    obs.ptr = int(y.data_ptr) if y.size else None
    obs.writable = not y.readonly
    obs.is_copied = bool(y.is_copied)
    d = y.device
    obs.device = (int(d.type), int(d.id))
    if obs.device[0] in HOST_TYPES:
        info = rc.read_object(y)
        obs.values = info.values
        if info.dtype != obs.dtype:
            obs.problems.append(f"Tensor.dtype is {obs.dtype} but its capsule says {info.dtype}")
    return obs


class RefResult:
    """What the reference consumer returns: the capsule's description and a copy."""

    def __init__(self, info: rc.CapsuleInfo, problems: list[str]) -> None:
        self.info = info
        self.problems = problems


def _observe_ref(y: RefResult) -> Observed:
    info = y.info
    obs = Observed(kind="capsule")
    _from_capsule_info(obs, info)
    obs.ptr = info.data_ptr if info.size else None
    obs.writable = not info.readonly
    obs.device = info.device
    obs.is_copied = info.is_copied if info.versioned else None
    obs.problems = list(y.problems)
    obs.notes.append(info.describe())
    return obs


def _observe_pyarrow(y: Any) -> Observed:
    return _observe_pa_tensor(y) if type(y).__name__ == "Tensor" else _observe_pa_array(y)


#: The reader of each library's results, by the top-level module of the result's type.
_OBSERVERS: dict[str, Callable[[Any], Observed]] = {
    "torch": _observe_torch,
    "jax": _observe_jax,
    "jaxlib": _observe_jax,
    "dpnp": _observe_dpnp,
    "dpctl": _observe_dpnp,
    "array_api_strict": _observe_xps,
    "pyarrow": _observe_pyarrow,
    "tvm_ffi": _observe_tvm,
    "tensorflow": _observe_tf,
    "dlbridge": _observe_dlbridge,
    "paddle": _observe_paddle,
    "mlx": _observe_mlx,
    "warp": _observe_warp,
    "cupy": _observe_cupy,
    "pandas": _observe_pandas,
}


def observe(y: Any) -> Observed:
    """Inspect any result array (dispatch on its type's module)."""
    mod = type(y).__module__ or ""
    name = type(y).__name__
    if isinstance(y, np.ndarray):
        return _observe_numpy(y)
    if isinstance(y, RefResult):
        return _observe_ref(y)
    reader = _OBSERVERS.get(mod.split(".", 1)[0])
    if reader is not None:
        return reader(y)
    # unknown: read it through DLPack
    obs = Observed(kind=f"{mod}.{name}")
    info = rc.read_object(y)
    _from_capsule_info(obs, info)
    obs.ptr = info.data_ptr if info.size else None
    obs.device = info.device
    return obs


# ----------------------------------------------------------------------------- adapters


class Library:
    """Base adapter. Subclasses set the class attributes and override what they support."""

    name = ""
    module = ""  # import name
    dist = ""  # distribution name for the version
    #: several distributions that install the module (the first installed one names the version)
    dists: tuple[str, ...] = ()
    pip = ""  # install hint
    producer = True
    consumer = True
    builtin = False  # part of the checker (always available)
    #: True when results of ``consume`` can be read-only (so aliasing read-only data is safe).
    readonly_results = False
    #: device types the consumer can hold without copying to the host
    devices: frozenset[int] = frozenset({1})
    #: can the consumer pass ``device=`` / ``copy=``?
    takes_kwargs = True
    #: importing the library takes seconds: the checker runs its consumer units in one worker
    slow_import = False
    note = ""

    def __init__(self) -> None:
        self._mod: Any = None

    # discovery
    def installed(self) -> bool:
        if self.builtin:
            return True
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False

    def version(self) -> str:
        for dist in self.dists or (self.dist or self.module,):
            try:
                return importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
        return str(getattr(self.load(), "__version__", "?"))

    def load(self) -> Any:
        if self._mod is None:
            self._mod = importlib.import_module(self.module)
            self.setup()
        return self._mod

    def setup(self) -> None:
        """Called once after the first import."""

    # producer side
    def make(self, recipe: Recipe, ref: np.ndarray) -> Any:
        raise Unsupported(f"{self.name} is not a producer")

    def src_readonly(self, x: Any) -> bool:
        """Is the producer's array read-only (must not be written through any alias)?"""
        return False

    def src_ptr(self, x: Any) -> int | None:
        info = rc.probe(x)
        return info.data_ptr if info is not None else None

    def src_device(self, x: Any) -> tuple[int, int]:
        return _dev(x) or (1, 0)

    # consumer side
    def device_arg(self, which: str) -> Any:
        """The library's spelling of a device: ``"cpu"`` or ``"native"`` (its default)."""
        if which == "cpu":
            return "cpu"
        raise Unsupported(f"{self.name} has no default device object")

    def from_dlpack(self, obj: Any, **kw: Any) -> Any:
        raise NotImplementedError

    def consume(self, obj: Any, *, device: str | None = None, copy: bool | None = None) -> Any:
        kw: dict[str, Any] = {}
        if device is not None:
            kw["device"] = self.device_arg(device)
        if copy is not None:
            kw["copy"] = copy
        if kw and not self.takes_kwargs:
            raise Unsupported(f"{self.name}'s from_dlpack has no device= / copy= arguments")
        return self.from_dlpack(obj, **kw)

    def reduce(self, y: Any) -> complex:
        """Sum with the library that owns the result (a consumer may return another library's
        array)."""
        if isinstance(y, np.ndarray):
            return complex(np.sum(y))
        return self.native_reduce(y)

    def native_reduce(self, y: Any) -> complex:
        raise Unsupported(f"no reduction for {self.name}")

    def __repr__(self) -> str:
        return f"<{self.name}>"


class NumPyLib(Library):
    name = module = dist = pip = "numpy"
    readonly_results = True

    def make(self, recipe, ref):
        return reference(recipe)  # a fresh array with the reference's layout and flags

    def src_readonly(self, x):
        return not x.flags.writeable

    def src_ptr(self, x):
        return x.__array_interface__["data"][0]

    def device_arg(self, which):
        if which in ("cpu", "native"):
            return "cpu"
        return super().device_arg(which)

    def from_dlpack(self, obj, **kw):
        return np.from_dlpack(obj, **kw)

    def native_reduce(self, y):
        return complex(np.sum(y))


def _torch_dtype(torch: Any, name: str) -> Any:
    dt = getattr(torch, name, None)
    if dt is None or not isinstance(dt, torch.dtype):
        raise Unsupported(f"torch has no dtype {name}")
    return dt


class TorchLib(Library):
    name = module = dist = pip = "torch"

    def make(self, recipe, ref):
        torch = self.load()
        dt = _torch_dtype(torch, recipe.dtype)
        if recipe.readonly:
            raise Unsupported("torch tensors cannot be read-only")
        if negative_strides(ref.shape, ref.strides):
            raise Unsupported("torch tensors cannot have negative strides")
        if any(op[0] == "misalign" for op in recipe.ops):
            raise Unsupported("not expressible with torch")
        if any(op[0] == "shift8" for op in recipe.ops):
            t = torch.from_numpy(ref)  # shares the shifted buffer
            return t
        base = det_values(recipe.dtype, recipe.shape, recipe.order)
        if recipe.dtype == "bfloat16" or recipe.dtype.startswith(
            "float8"
        ):  # ml_dtypes: via float32, exact here
            t = torch.from_numpy(base.astype(np.float32)).to(dt)
        else:
            t = torch.from_numpy(base)
        for op in recipe.ops:
            if op[0] == "T":
                t = t.permute(*reversed(range(t.ndim)))
            elif op[0] == "ix":
                t = t[op[1]]
            elif op[0] == "broadcast":
                t = t.expand(*op[1])
        return t

    def src_ptr(self, x):
        return int(x.data_ptr())

    def src_device(self, x):
        return (1, 0) if x.device.type == "cpu" else super().src_device(x)

    def device_arg(self, which):
        if which in ("cpu", "native"):
            return "cpu"  # the CPU build: torch's default device
        return super().device_arg(which)

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y):
        return complex(y.sum().item())


class JaxLib(Library):
    name = module = "jax"
    dist = "jax"
    pip = "jax[cpu]"
    readonly_results = True
    note = "run with jax_enable_x64=True so that 64-bit dtypes exist"

    def setup(self):
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy

    def make(self, recipe, ref):
        self.load()
        import jax.numpy as jnp

        if not recipe.plain:
            raise Unsupported(
                "JAX arrays have no user-visible layout (always its "
                "own C-contiguous, aligned buffer)"
            )
        try:
            dt = jnp.dtype(recipe.dtype)
        except TypeError as e:
            raise Unsupported(f"jax has no dtype {recipe.dtype}") from e
        return jnp.asarray(np.array(ref, copy=True, order="C"), dtype=dt)

    def src_readonly(self, x):
        return True  # immutable

    def src_ptr(self, x):
        return int(x.unsafe_buffer_pointer())

    def device_arg(self, which):
        import jax

        if which in ("cpu", "native"):
            return jax.devices("cpu")[0]
        return super().device_arg(which)

    def from_dlpack(self, obj, **kw):
        self.load()
        import jax.numpy as jnp

        return jnp.from_dlpack(obj, **kw)

    def native_reduce(self, y):
        import jax.numpy as jnp

        return complex(jnp.sum(y))


class PyArrowLib(Library):
    name = module = dist = pip = "pyarrow"
    readonly_results = True
    note = ("producer: pyarrow.Array for 1-D data, pyarrow.Tensor otherwise; consumer: "
            "pyarrow.Tensor.from_dlpack")

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


class DpnpLib(Library):
    name = module = dist = "dpnp"
    pip = "dpnp intel-opencl-rt"
    readonly_results = True
    devices = frozenset({1, 14})
    note = "arrays live on a SYCL device (kDLOneAPI = 14): the real cross-device cases"

    def setup(self):
        import dpnp

        dpnp.arange(2)  # fail early if the SYCL device is unavailable

    def make(self, recipe, ref):
        dpnp = self.load()
        if recipe.dtype in ("bfloat16",) or recipe.dtype.startswith("float8"):
            raise Unsupported(f"dpnp has no {recipe.dtype}")
        if any(op[0] in ("misalign", "shift8") for op in recipe.ops):
            raise Unsupported("not expressible with dpnp (it allocates its own memory)")
        base = det_values(recipe.dtype, recipe.shape, recipe.order)
        x = dpnp.asarray(np.array(base, copy=True, order="C"))
        if recipe.order == "F":
            x = dpnp.asfortranarray(x)
        for op in recipe.ops:
            if op[0] == "T":
                x = x.T
            elif op[0] == "ix":
                x = x[op[1]]
            elif op[0] == "broadcast":
                x = dpnp.broadcast_to(x, op[1])
        if recipe.readonly:
            x.get_array().flags.writable = False
        return x

    def src_readonly(self, x):
        return not bool(x.get_array().flags.writable)

    def src_ptr(self, x):
        return int(x.get_array()._pointer)

    def device_arg(self, which):
        if which == "cpu":
            return (1, 0)
        if which == "native":
            return self.load().arange(1).sycl_device
        return super().device_arg(which)

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y):
        return complex(self.load().sum(y))


class ArrayApiStrictLib(Library):
    name = module = "array_api_strict"
    dist = pip = "array-api-strict"
    readonly_results = True

    def make(self, recipe, ref):
        xps = self.load()
        if recipe.dtype in ("float16", "bfloat16") or recipe.dtype.startswith("float8"):
            raise Unsupported(f"array_api_strict has no {recipe.dtype}")
        x = xps.asarray(ref)
        if x._array.ctypes.data != ref.ctypes.data or x._array.strides != ref.strides:
            raise Unsupported("array_api_strict copied the data (layout not expressible)")
        return x

    def src_readonly(self, x):
        return not x._array.flags.writeable

    def src_ptr(self, x):
        return x._array.__array_interface__["data"][0]

    def device_arg(self, which):
        xps = self.load()
        if which in ("cpu", "native"):
            return xps.Device("CPU_DEVICE")
        return super().device_arg(which)

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y):
        return complex(self.load().sum(y)._array)


class TvmFfiLib(Library):
    name = module = "tvm_ffi"
    dist = pip = "apache-tvm-ffi"
    takes_kwargs = False
    devices = frozenset({1, 2, 3, 4, 7, 8, 10, 13, 14})

    def make(self, recipe, ref):
        tvm_ffi = self.load()
        if recipe.readonly:
            raise Unsupported("tvm_ffi tensors have no read-only flag")
        return tvm_ffi.from_dlpack(ref)

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj, **kw)


class TensorFlowLib(Library):
    name = module = "tensorflow"
    pip = "tensorflow-cpu"
    readonly_results = True
    takes_kwargs = False
    slow_import = True
    note = ("consumer: tf.experimental.dlpack.from_dlpack of the legacy capsule x.__dlpack__() "
            "(it takes raw capsules only); TensorFlow tensors are immutable and C-contiguous")
    #: distributions that install the ``tensorflow`` module
    dists = ("tensorflow", "tensorflow-cpu", "tf-nightly", "tf-nightly-cpu")

    def make(self, recipe, ref):
        tf = self.load()
        if not recipe.plain:
            raise Unsupported(
                "TensorFlow tensors have no user-visible layout (always C-contiguous)"
            )
        try:
            dt = tf.as_dtype(ref.dtype)
        except TypeError as e:
            raise Unsupported(f"tensorflow has no dtype {recipe.dtype}") from e
        return tf.constant(np.array(ref, copy=True, order="C"), dtype=dt)

    def make_in_gpu_scope(self, ref):
        """C31: a tensor created under a GPU device scope (placed on the CPU without a GPU)."""
        tf = self.load()
        with tf.device("/GPU:0"):
            return tf.constant(np.array(ref, copy=True, order="C"))

    def src_readonly(self, x):
        return True  # immutable

    def from_dlpack(self, obj, **kw):
        tf = self.load()
        cap = obj if type(obj).__name__ == "PyCapsule" else obj.__dlpack__()
        return tf.experimental.dlpack.from_dlpack(cap)

    def native_reduce(self, y):
        return complex(self.load().reduce_sum(y).numpy())


class ArrowProducerLib(Library):
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
    lacks = ("bool", "bfloat16", "float16", "float8", "complex", "bcomplex")

    def build(self, na, values):
        return na.c_array(values)


class Arro3Lib(ArrowProducerLib):
    name = "arro3"
    module = "arro3.core"
    dist = pip = "arro3-core"

    def build(self, a3, values):
        return a3.Array.from_numpy(values)


class PolarsLib(ArrowProducerLib):
    name = module = dist = pip = "polars"
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


def _ops_view(x: Any, recipe: Recipe, *, transpose, index, broadcast=None) -> Any:
    """Apply the recipe's view operations with the library's own view functions."""
    for op in recipe.ops:
        if op[0] == "T":
            x = transpose(x)
        elif op[0] == "ix":
            x = index(x, op[1])
        elif op[0] == "broadcast" and broadcast is not None:
            x = broadcast(x, op[1])
        else:
            raise Unsupported(f"not expressible: {op[0]}")
    return x


def _steps(recipe: Recipe) -> list[int]:
    return [
        s.step
        for op in recipe.ops
        if op[0] == "ix"
        for s in (op[1] if isinstance(op[1], tuple) else (op[1],))
        if isinstance(s, slice) and s.step is not None
    ]


class PaddleLib(Library):
    name = "paddle"
    module = "paddle"
    dist = "paddlepaddle"
    pip = "paddlepaddle"
    slow_import = True  # about 3 s
    note = ("paddle.Tensor (CPU); consumer: paddle.from_dlpack(x, device=, copy=), which asks for "
            "max_version=(1, 2); also offers __dlpack_c_exchange_api__")

    def setup(self):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "No ccache found" on import
            import paddle

        paddle.set_device("cpu")

    def load(self):
        if self._mod is None:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return super().load()
        return self._mod

    def make(self, recipe, ref):
        paddle = self.load()
        dt = getattr(paddle, recipe.dtype if recipe.dtype != "bool" else "bool", None)
        if dt is None or recipe.dtype.startswith("float8_e4m3fnuz"):
            raise Unsupported(f"paddle has no dtype {recipe.dtype}")
        if recipe.readonly:
            raise Unsupported("paddle tensors cannot be read-only")
        if negative_strides(ref.shape, ref.strides) or any(s < 0 for s in _steps(recipe)):
            raise Unsupported("paddle tensors cannot have negative strides (paddle.flip copies)")
        if any(op[0] in ("misalign", "broadcast") for op in recipe.ops):
            raise Unsupported(
                "not expressible with paddle (expand copies; it allocates aligned memory)"
            )
        if any(op[0] == "shift8" for op in recipe.ops):
            return paddle.from_dlpack(ref)  # shares the shifted NumPy buffer
        base = det_values(recipe.dtype, recipe.shape, recipe.order)
        if recipe.dtype in ("bfloat16",) or recipe.dtype.startswith("float8"):  # exact via float32
            t = paddle.to_tensor(base.astype(np.float32)).astype(dt)
            if recipe.order == "F" and len(recipe.shape) > 1:
                raise Unsupported("F-order bfloat16/float8 not built")
        else:
            t = paddle.from_dlpack(base)  # paddle aliases the NumPy buffer, F order included
        return _ops_view(
            t, recipe,
            transpose=lambda v: v.transpose(list(reversed(range(v.ndim)))),
            index=lambda v, ix: v[ix],
        )

    def device_arg(self, which):
        if which in ("cpu", "native"):
            return "cpu"
        return super().device_arg(which)

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y):
        return complex(self.load().sum(y).item())


class MlxLib(Library):
    name = "mlx"
    module = "mlx.core"
    dist = "mlx"
    pip = "mlx[cpu]"
    note = (
        "mlx.core.array on the CPU: exports legacy capsules only (writable memory, imported "
        "read-only by dlbridge's rule); consumer: mx.from_dlpack(x, copy=), which always copies "
        "CPU data and has no device="
    )

    def _dt(self, name):
        mx = self.load()
        if name not in Mlx.DTYPES:
            raise Unsupported(f"mlx has no dtype {name}")
        return getattr(mx, "bool_" if name == "bool" else name)

    def make(self, recipe, ref):
        mx = self.load()
        dt = self._dt(recipe.dtype)
        if recipe.readonly:
            raise Unsupported("mlx arrays cannot be read-only")
        if any(op[0] in ("misalign", "shift8") for op in recipe.ops):
            raise Unsupported("not expressible with mlx (it allocates its own memory)")
        base = det_values(recipe.dtype, recipe.shape, recipe.order)
        if recipe.dtype == "bfloat16":
            host = np.ascontiguousarray(base.astype(np.float32))
        else:
            host = np.ascontiguousarray(base)
        if recipe.order == "F" and base.ndim > 1:  # an F-order view of a C-order buffer
            x = mx.array(np.ascontiguousarray(host.T), dtype=dt).T
        elif base.ndim == 0:  # mx.array(0-d ndarray) has shape (1,) in MLX 0.32
            x = mx.array(host.reshape(1), dtype=dt).reshape(())
        else:
            x = mx.array(host, dtype=dt)
        x = _ops_view(
            x, recipe,
            transpose=lambda v: v.T,
            index=lambda v, ix: v[ix],
            broadcast=lambda v, shape: mx.broadcast_to(v, shape),
        )
        mx.eval(x)
        return x

    def consume(self, obj, *, device=None, copy=None):
        if device is not None:
            raise Unsupported("mx.from_dlpack has no device= argument")
        kw = {} if copy is None else {"copy": copy}
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y):
        mx = self.load()
        return complex(mx.sum(y.astype(mx.float32) if y.dtype == mx.bfloat16 else y).item())


class WarpLib(Library):
    name = "warp"
    module = "warp"
    dist = "warp-lang"
    pip = "warp-lang"
    takes_kwargs = False
    note = ("warp.array on its CPU device: __dlpack__(stream=) only, legacy capsules of writable "
            "memory (imported read-only by dlbridge's rule); consumer: wp.from_dlpack(x), no "
            "device= / copy=; producer: plain cases are Warp's own allocations, views are "
            "wp.from_dlpack of the NumPy reference")

    def setup(self):
        import warp as wp

        config: Any = wp.config  # warp 1.19 reads config.quiet but does not declare it
        config.quiet = True
        wp.init()

    def make(self, recipe, ref):
        wp = self.load()
        if recipe.dtype not in Warp.DTYPES:
            raise Unsupported(f"warp has no dtype {recipe.dtype}")
        if recipe.readonly:
            raise Unsupported("warp arrays cannot be read-only")
        if ref.ndim == 0:
            raise Unsupported("warp has no 0-d arrays (wp.array of a 0-d array has shape (1,))")
        if recipe.plain:
            return wp.array(
                np.array(ref, copy=True, order="C"),
                dtype=wp.dtype_from_numpy(ref.dtype),
                device="cpu",
            )
        # a Warp view of the reference's memory (Warp keeps any strides, negative and zero ones too)
        x = wp.from_dlpack(ref)
        want = tuple(ref.strides)
        if tuple(x.strides) != want or tuple(x.shape) != tuple(ref.shape):
            raise Unsupported(f"warp did not keep the layout: strides {x.strides}, expected {want}")
        return x

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj)

    def native_reduce(self, y):
        wp = self.load()
        if y.dtype not in (wp.float32, wp.float64):
            raise Unsupported("wp.utils.array_sum takes float arrays")
        return complex(float(wp.utils.array_sum(y)))


class CupyLib(Library):
    """CuPy: needs a CUDA device. Importing it works without one (cupy 14), using it does not:
    discovery runs a device probe in a subprocess and reports the library as not installed, with
    the reason, when the probe fails."""

    name = module = "cupy"
    pip = "cupy-cuda13x"
    devices = frozenset({2})
    dists = ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy")
    note = "cupy.ndarray on CUDA device 0; consumer: cupy.from_dlpack"
    _probe: tuple[bool, str] | None = None  # shared by the instances of one process

    def installed(self):
        if not super().installed():
            return False
        return self.probe()[0]

    def probe(self) -> tuple[bool, str]:
        """(usable, why not): import cupy and count the CUDA devices in a subprocess."""
        if CupyLib._probe is None:
            import subprocess

            code = ("import cupy, sys\n"
                    "n = cupy.cuda.runtime.getDeviceCount()\n"
                    "cupy.arange(2).sum()\n"
                    "print(n)\n")
            try:
                proc = subprocess.run(
                    [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
                )
            except subprocess.TimeoutExpired:
                CupyLib._probe = (False, "importing cupy and counting CUDA devices took over 120 s")
            else:
                if proc.returncode == 0:
                    CupyLib._probe = (True, "")
                else:
                    lines = [
                        x.strip() for x in (proc.stderr or "").strip().splitlines() if x.strip()
                    ]
                    last = lines[-1] if lines else f"exit status {proc.returncode}"
                    CupyLib._probe = (
                        False,
                        f"installed, but not usable here (no CUDA device?): {last[:200]}",
                    )
        return CupyLib._probe

    def setup(self):
        self._mod.cuda.runtime.getDeviceCount()

    def make(self, recipe, ref):
        cp = self.load()
        if recipe.dtype == "bfloat16" or recipe.dtype.startswith("float8"):
            raise Unsupported(f"cupy has no {recipe.dtype}")
        if recipe.readonly:
            raise Unsupported("cupy arrays cannot be read-only")
        if any(op[0] in ("misalign", "shift8") for op in recipe.ops):
            raise Unsupported("not expressible with cupy (it allocates its own memory)")
        base = det_values(recipe.dtype, recipe.shape, recipe.order)
        x = cp.asarray(base)
        if recipe.order == "F":
            x = cp.asfortranarray(x)
        return _ops_view(x, recipe, transpose=lambda v: v.T, index=lambda v, ix: v[ix],
                         broadcast=lambda v, shape: cp.broadcast_to(v, shape))

    def src_ptr(self, x):
        return int(x.data.ptr)

    def src_device(self, x):
        return (2, int(x.device.id))

    def device_arg(self, which):
        raise Unsupported("cupy.from_dlpack's device= is not exercised by the checker")

    def from_dlpack(self, obj, **kw):
        return self.load().from_dlpack(obj, **kw)

    def native_reduce(self, y):
        return complex(self.load().sum(y).get())


_PANDAS_LACKS = ("bfloat16", "float8", "complex", "bcomplex")  # Arrow has no such type


class PandasLib(Library):
    name = module = dist = pip = "pandas"
    takes_kwargs = False
    note = ("producer: 1-D cases a pandas.Series (it offers __arrow_c_stream__ only), 2-D cases "
            "DataFrame.to_numpy() (a read-only view under copy-on-write); consumer: "
            "pandas.Series.from_arrow (Arrow PyCapsule objects only, 1-D, always a copy)")

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


class PythonLib(Library):
    """Python's own objects: a memoryview over the data (buffer protocol), and lists."""

    name = "python"
    module = "sys"
    builtin = True
    consumer = False
    note = ("memoryview (buffer protocol, no DLPack): what dlbridge imports that DLPack "
            "consumers cannot")

    def version(self):
        return sys.version.split()[0]

    def make(self, recipe, ref):
        if recipe.dtype == "bfloat16" or recipe.dtype.startswith("float8"):
            raise Unsupported(f"no buffer-protocol format for {recipe.dtype}")
        return memoryview(ref)

    def src_readonly(self, x):
        return bool(getattr(x, "readonly", False))

    def src_ptr(self, x):
        return np.asarray(x).__array_interface__["data"][0] if isinstance(x, memoryview) else None


class RefLib(Library):
    """The checker's own reference DLPack producer and consumer (ctypes)."""

    name = "dlpack-ref"
    module = "ctypes"
    builtin = True
    readonly_results = True
    note = "reference DLPack producer/consumer in ctypes: checks every field of a capsule"

    def version(self):
        return "DLPack {}.{}".format(*rc.REF_VERSION)

    def make(self, recipe, ref):
        return rc.RefArray(ref, readonly=recipe.readonly)

    def src_readonly(self, x):
        return x.readonly if isinstance(x, rc.RefArray) else False

    def src_ptr(self, x):
        return x.data_ptr if isinstance(x, rc.RefArray) else None

    def src_device(self, x):
        return x.__dlpack_device__() if isinstance(x, rc.RefArray) else (1, 0)

    def device_arg(self, which):
        if which in ("cpu", "native"):
            return (1, 0)
        return super().device_arg(which)

    def consume(self, obj, *, device=None, copy=None):
        kw: dict[str, Any] = {}
        if device is not None:
            kw["dl_device"] = self.device_arg(device)
        if copy is not None:
            kw["copy"] = copy
        return ref_consume(obj, **kw)


def ref_consume(obj: Any, **kw: Any) -> RefResult:
    """The reference consumer: read the capsule, note every spec violation."""
    info = rc.read_object(obj, **kw)
    problems = []
    if info.versioned and info.version is not None and info.version > rc.REF_VERSION:
        problems.append(
            f"capsule version {info.version} is newer than the "
            f"max_version {rc.REF_VERSION} asked for"
        )
    code = info.code_bits_lanes[0]
    if code in rc.CODES_SINCE_1_1:
        # C26: the same dtype must be refused to a DLPack 1.0 consumer
        try:
            cap = obj.__dlpack__(max_version=(1, 0))
        except BufferError:
            pass
        except Exception as e:  # noqa: BLE001
            problems.append(
                f"asked for a {info.dtype} capsule with max_version=(1, 0), it raised "
                f"{type(e).__name__} instead of BufferError"
            )
        else:
            try:
                got = rc.read_capsule(cap, read_values=False)
                if got.code_bits_lanes[0] in rc.CODES_SINCE_1_1:
                    problems.append(
                        f"exported {info.dtype} (a DLPack 1.1 type code) "
                        f"to a consumer that asked for "
                        f"max_version=(1, 0); expected BufferError"
                    )
            except Exception:  # noqa: BLE001
                pass
    return RefResult(info, problems)


ALL_LIBRARIES: list[type[Library]] = [
    NumPyLib,
    TorchLib,
    JaxLib,
    PyArrowLib,
    DpnpLib,
    ArrayApiStrictLib,
    TvmFfiLib,
    TensorFlowLib,
    NanoarrowLib,
    Arro3Lib,
    PolarsLib,
    PaddleLib,
    MlxLib,
    WarpLib,
    PandasLib,
    CupyLib,
    PythonLib,
    RefLib,
]

#: Array libraries with DLPack support that the checker has no adapter for yet (reported as
#: "installed but not checked yet" when found).
KNOWN_WITHOUT_ADAPTER: dict[str, tuple[str, str]] = {}


def by_name() -> dict[str, Library]:
    return {cls.name: cls() for cls in ALL_LIBRARIES}


def not_installed_unadapted() -> list[str]:
    out = []
    for name, (mod, _dist) in KNOWN_WITHOUT_ADAPTER.items():
        try:
            if importlib.util.find_spec(mod) is None:
                out.append(name)
        except (ImportError, ValueError):
            out.append(name)
    return out


@dataclass
class Discovered:
    name: str
    installed: bool
    version: str | None
    producer: bool
    consumer: bool
    builtin: bool
    note: str = ""
    slow_import: bool = False
    #: why an installed library cannot be used here (then ``installed`` is False), e.g. CuPy
    #: without a CUDA device
    reason: str = ""


def discover(selected: list[str] | None = None) -> list[Discovered]:
    """Which libraries are installed (no imports: versions come from package metadata)."""
    out = []
    for lib in by_name().values():
        if selected is not None and lib.name not in selected and not lib.builtin:
            continue
        inst = lib.installed()
        ver = None
        if inst:
            try:
                ver = lib.version()
            except Exception:  # noqa: BLE001
                ver = "?"
        reason = ""
        probe = getattr(lib, "probe", None)
        if not inst and probe is not None and Library.installed(lib):
            reason = probe()[1]  # found, but not usable here
            try:
                ver = lib.version()
            except Exception:  # noqa: BLE001
                ver = "?"
        out.append(
            Discovered(
                lib.name,
                inst,
                ver,
                lib.producer,
                lib.consumer,
                lib.builtin,
                lib.note,
                lib.slow_import,
                reason,
            )
        )
    return out


def discover_unadapted() -> dict[str, str]:
    """Installed array libraries that the checker has no adapter for yet."""
    out = {}
    for name, (mod, dist) in KNOWN_WITHOUT_ADAPTER.items():
        try:
            if importlib.util.find_spec(mod) is not None:
                try:
                    out[name] = importlib.metadata.version(dist)
                except importlib.metadata.PackageNotFoundError:
                    out[name] = "?"
        except (ImportError, ValueError):
            pass
    return out


__all__ = [
    "ALL_LIBRARIES",
    "Discovered",
    "Library",
    "Observed",
    "Recipe",
    "RefResult",
    "Unsupported",
    "by_name",
    "det_values",
    "discover",
    "observe",
    "reference",
]

