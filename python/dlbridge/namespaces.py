"""What dlbridge knows about each array library, as a target and as a source.

One :class:`Namespace` per library (``numpy``, ``torch``, ``jax``, ``dpnp``, ``pyarrow``,
``tensorflow``, ``array_api_strict``, ``cupy``, ``tvm_ffi``, ``paddle``, ``mlx``, ``warp``,
``pandas`` and ``dlbridge`` itself). The planner
of :func:`dlbridge.convert` asks a namespace what its DLPack consumer can take (devices, dtypes,
layouts, the read-only flag) and how to hand it a :class:`dlbridge.Tensor`; it asks the source's
namespace about framework state DLPack cannot carry (torch's autograd and lazy bits, JAX arrays
still being computed) and how to bring an array back to the host.

Every fact here was measured against the peer (versions in the comments); nothing imports a
library before it is needed, and :func:`get` resolves ``"np"``, ``numpy`` (the module),
``"jax.numpy"``... to the same namespace.

Measured peer facts this module encodes:

- torch 2.15: ``torch.from_dlpack`` asks for ``max_version=(1, 0)`` only (so float8 needs a
  versioned capsule handed over directly, which torch accepts), ignores READ_ONLY (a writable
  alias of read-only memory) and refuses negative strides.
- JAX 0.10: ``jnp.from_dlpack`` asks for legacy capsules only, so read-only data cannot reach it
  zero-copy (and no float8); it takes compact strides only (a permutation of a dense layout),
  aliases only 64-byte aligned data (copies otherwise, ``ValueError`` under ``copy=False``), and
  without ``jax_enable_x64`` it silently narrows 64-bit types (float64 -> float32).
- NumPy 2.4: ``numpy.from_dlpack`` has no bfloat16/float8 (``RuntimeError``/``BufferError``);
  with ml_dtypes installed dlbridge hands NumPy such data as an ml_dtypes view instead.
- dpnp 0.20: arrays live on a SYCL device (``kDLOneAPI``); ``dpnp.from_dlpack`` of host data
  returns a *NumPy* array unless ``device=`` names a SYCL device (then it copies); it honours
  READ_ONLY; no bfloat16/float8.
- pyarrow 26: arrays are immutable; ``pa.array(tensor)`` asks ``Tensor.__arrow_array__``
  (1-D: a primitive array, N-D: ``arrow.fixed_shape_tensor``); no complex, bfloat16, float8,
  0-d.
- array_api_strict 2.6: wraps NumPy (honours READ_ONLY), has no float16/bfloat16.
- tvm_ffi 0.1: any device and layout, no read-only flag.
- paddle 3.3: ``paddle.from_dlpack`` asks for ``max_version=(1, 2)``, ignores READ_ONLY and
  reads negative strides wrongly (wrong values, no error); ``__dlpack_device__`` answers
  ``(kDLCPU, None)``.
- mlx 0.32: ``mx.from_dlpack`` always copies host data and narrows float64/complex128 (so the
  target imports with ``mx.array(t, dtype=...)``, a copy); MLX exports legacy capsules only.
- warp 1.19: ``wp.from_dlpack`` asks for legacy capsules only, keeps any strides; no complex,
  no 0-d arrays.
- pandas 3.1: copy-on-write; a Series' Arrow stream turns NaN into nulls, so NumPy-backed
  Series and frames are read through ``to_numpy()`` (a read-only view).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from typing import Any, Callable

from ._native import Device, DType, Tensor

# DLPack device types (dlpack.h)
CPU, CUDA, CUDA_HOST, OPENCL, VULKAN, METAL, VPI, ROCM, ROCM_HOST, EXT_DEV, CUDA_MANAGED, ONEAPI = (
    1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14,
)
#: Device types whose memory the host CPU reads directly.
HOST_TYPES = frozenset({CPU, CUDA_HOST, ROCM_HOST, CUDA_MANAGED})
#: Device types dlbridge itself can copy from and to (host memory; CUDA through the driver).
DLBRIDGE_REACHES = HOST_TYPES | {CUDA}

SUBBYTE = ("float4_", "float6_")
FLOAT8 = "float8"
BASIC_DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
)
SIXTY_FOUR_BIT = ("int64", "uint64", "float64", "complex128")


def host(device: Device) -> bool:
    """Can the host CPU read memory on ``device`` directly?"""
    return device.type in HOST_TYPES


def device_of(x: Any) -> Device | None:
    """``x.__dlpack_device__()`` as a Device (None when ``x`` offers none)."""
    if isinstance(x, Tensor):
        return x.device
    method = getattr(x, "__dlpack_device__", None)
    if method is None:
        return None
    try:
        kind, ident = method()
        return Device((int(kind), int(ident)))
    except Exception:  # noqa: BLE001 - a producer that cannot say where its data is
        return None


def has_ml_dtypes() -> bool:
    return "ml_dtypes" in sys.modules or importlib.util.find_spec("ml_dtypes") is not None


# ---------------------------------------------------------------------------------- layouts


def negative_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    return any(s < 0 for n, s in zip(shape, strides) if n > 1)


def compact(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """A permutation of a dense layout (what JAX accepts): no gaps, no overlaps, no negative
    strides. Dims of extent <= 1 do not count; an empty array is compact."""
    if any(n == 0 for n in shape):
        return True
    dims = sorted(((s, n) for n, s in zip(shape, strides) if n > 1), reverse=True)
    expected = 1
    for s, n in reversed(dims):
        if s != expected:
            return False
        expected *= n
    return True


def arrow_zero_copy(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Can ``Tensor.__arrow_c_array__`` export this layout without its C-order copy? A dense
    permutation whose first dimension is the outermost (Arrow's array length)."""
    if any(n == 0 for n in shape):
        return True
    if not compact(shape, strides):
        return False
    if len(shape) == 0 or shape[0] <= 1:
        return True
    return all(strides[0] >= s for n, s in zip(shape[1:], strides[1:]) if n > 1)


# ---------------------------------------------------------------------------------- state


@dataclass
class State:
    """Framework state of a source array that DLPack cannot carry, and how to resolve it.

    ``option`` names the :func:`dlbridge.convert` keyword that opts in to the fix (None: applied
    automatically, or ``refuse`` set: no fix dlbridge can apply); ``copies`` is what the fix
    costs.
    """

    what: str
    fix: str
    option: str | None
    copies: int
    apply: Callable[[Any], Any] | None
    refuse: bool = False


# ---------------------------------------------------------------------------------- base


class Namespace:
    """What dlbridge knows about one array library. Subclasses fill in the facts."""

    name = ""
    module = ""
    aliases: tuple[str, ...] = ()
    pip = ""
    #: a read-only source can reach this library zero-copy and stay read-only (its arrays carry
    #: the flag or are immutable, and its from_dlpack accepts read-only data). False: a
    #: read-only source needs a copy under ``copy=None`` and is refused under ``copy=False``
    #: (C15, C16): never a writable alias.
    alias_readonly = True
    #: why not, for messages (when ``alias_readonly`` is False)
    readonly_why = ""
    #: arrays are immutable (JAX, Arrow): aliasing writable memory is worth a note
    immutable = False
    #: the library has arrays in host memory (``to_host`` returns its own arrays)
    has_host = True
    #: the type ``convert(..., to=this)`` returns (documentation)
    result = ""
    #: what the library calls its arrays, for messages
    noun = "array"

    def __init__(self) -> None:
        self._mod: Any = None
        self._installed: bool | None = None

    # discovery ------------------------------------------------------------------------
    def installed(self) -> bool:
        if self.module in sys.modules:
            return True
        if self._installed is None:
            try:
                self._installed = importlib.util.find_spec(self.module) is not None
            except (ImportError, ValueError):
                self._installed = False
        return self._installed

    def load(self) -> Any:
        if self._mod is None:
            self._mod = importlib.import_module(self.module)
        return self._mod

    def loaded(self) -> Any:
        """The module if it has been imported (by anyone), else None: an object cannot be one
        of this library's arrays unless the library is imported."""
        return sys.modules.get(self.module)

    # source role ----------------------------------------------------------------------
    def owns(self, x: Any) -> bool:
        """Is ``x`` an array of this library?"""
        return False

    def is_result(self, x: Any) -> bool:
        """Is ``x`` already what ``convert(..., to=this)`` returns (so it can be returned as
        is)?"""
        return self.owns(x)

    def device(self, x: Any) -> Device | None:
        return device_of(x)

    def state(self, x: Any) -> list[State]:
        """Framework state of ``x`` that must be resolved before a DLPack export."""
        return []

    def source(self, x: Any) -> Any:
        """The object to hand to ``dlbridge.from_dlpack`` for ``x``."""
        return x

    def to_host(self, x: Any) -> Any:
        """An array of this library on the CPU with ``x``'s values (``x`` itself when it is
        there already). Only called when ``has_host``."""
        raise NotImplementedError

    # target role ----------------------------------------------------------------------
    def devices(self) -> list[Device]:
        """Devices this library has arrays on (for messages and the default)."""
        return [Device("cpu")]

    def can_hold(self, device: Device) -> bool:
        return device.type in HOST_TYPES

    def dtype_route(self, dtype: str) -> str:
        """How a tensor of ``dtype`` reaches this library: ``"dlpack"`` (its from_dlpack),
        another route name the namespace implements, or ``"refuse: <why and the fix>"``."""
        if dtype in BASIC_DTYPES:
            return "dlpack"
        return f"refuse: {self.name} has no {dtype} dtype"

    def layout_problem(self, t: "LayoutView") -> str | None:
        """Why this library cannot alias this layout (None: it can); a copy fixes it."""
        return None

    def shape_refusal(self, shape: tuple[int, ...]) -> str | None:
        """Why this library has no array of this shape at all (None: it has)."""
        return None

    def from_tensor(self, t: Tensor, route: str) -> Any:
        """Import ``t`` (already on a device this library holds, with a layout, dtype and flags
        it takes) zero-copy."""
        raise NotImplementedError

    def from_host(self, t: Tensor, device: Device, route: str) -> Any:
        """An array of this library on ``device`` copied from the host tensor ``t`` by the
        library's own transfer. Only namespaces that override it have one; for the others
        dlbridge (CUDA) or a library that reaches the device makes the copy."""
        raise NotImplementedError

    def copy_on_device(self, t: Tensor) -> Tensor | None:
        """A copy of ``t`` on its own (non-host) device made by this library, or None."""
        return None

    def device_hint(self) -> str:
        """A ``device=`` value that works for this library, for error messages."""
        devs = self.devices()
        return str(devs[0]) if devs else "cpu"

    def __repr__(self) -> str:
        return f"<dlbridge namespace {self.name}>"


@dataclass
class LayoutView:
    """The layout facts a namespace needs to decide whether it can alias data."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    itemsize: int
    data_ptr: int
    size: int


# ---------------------------------------------------------------------------------- numpy


class NumPy(Namespace):
    name = module = pip = "numpy"
    aliases = ("np", "numpy")
    result = "numpy.ndarray"

    def owns(self, x):
        np = self.loaded()
        return np is not None and isinstance(x, np.ndarray)

    def device(self, x):
        return Device("cpu")

    def source(self, x):
        # NumPy's __dlpack__ refuses ml_dtypes types (bfloat16, float8): hand dlbridge the
        # same bytes as unsigned ints and view them as the real dtype (zero-copy).
        name = x.dtype.name
        if name not in BASIC_DTYPES and not name.startswith(SUBBYTE) and x.dtype.itemsize in (1, 2):
            try:
                target = DType(name)
            except ValueError:
                return x
            if target.itemsize != x.dtype.itemsize:
                return x
            np = self.load()
            unsigned = x.view(np.uint8 if x.dtype.itemsize == 1 else np.uint16)
            from ._native import from_dlpack

            return from_dlpack(unsigned).view(target)
        return x

    def to_host(self, x):
        return x

    def dtype_route(self, dtype):
        if dtype in BASIC_DTYPES:
            return "dlpack"
        if dtype.startswith(SUBBYTE):
            return f"refuse: NumPy has no packed {dtype} (DLPack packs two 4-bit values per byte)"
        if dtype == "bfloat16" or dtype.startswith(FLOAT8):
            if has_ml_dtypes():
                return "ml_dtypes"
            return (
                f"refuse: numpy.from_dlpack has no {dtype}; install ml_dtypes "
                f"(pip install ml_dtypes) and dlbridge returns an ml_dtypes.{dtype} array"
            )
        return f"refuse: NumPy has no {dtype} dtype"

    def from_tensor(self, t, route):
        np = self.load()
        if route == "ml_dtypes":
            return ml_dtypes_view(t)
        return np.from_dlpack(t)


class _ArrayInterface:
    """Keeps a Tensor alive behind a NumPy view built from an ``__array_interface__``."""

    def __init__(self, tensor: Tensor, iface: dict) -> None:
        self.tensor = tensor
        self.__array_interface__ = iface


def ml_dtypes_view(t: Tensor) -> Any:
    """A zero-copy NumPy view of a host tensor whose dtype NumPy only knows through ml_dtypes
    (bfloat16, float8): the bytes as unsigned ints, then viewed as the ml_dtypes type."""
    import ml_dtypes
    import numpy as np

    dt = np.dtype(getattr(ml_dtypes, t.dtype.name))
    size = t.itemsize
    iface = {
        "version": 3,
        "shape": tuple(t.shape),
        "typestr": f"{'<' if sys.byteorder == 'little' else '>'}u{size}" if size > 1 else "|u1",
        "data": (t.data_ptr, bool(t.readonly)),
        "strides": tuple(s * size for s in t.strides),
    }
    return np.asarray(_ArrayInterface(t, iface)).view(dt)


# ---------------------------------------------------------------------------------- torch


class Torch(Namespace):
    name = module = pip = "torch"
    noun = "tensor"
    aliases = ("torch",)
    alias_readonly = False
    readonly_why = (
        "torch tensors cannot be read-only (torch.from_dlpack ignores the READ_ONLY flag and "
        "hands out a writable alias)"
    )
    result = "torch.Tensor"

    def owns(self, x):
        torch = self.loaded()
        return torch is not None and isinstance(x, torch.Tensor)

    def device(self, x):
        if x.device.type == "cpu":
            return Device("cpu")
        return device_of(x)

    def state(self, x):
        torch = self.load()
        if x.layout != torch.strided:
            return [State(
                f"is {str(x.layout).removeprefix('torch.')} (DLPack describes strided memory only)",
                ".to_dense()", None, 0, None, refuse=True,
            )]
        if x.device.type == "meta":
            return [State("is on the meta device (it has no data)", ".to(device)", None, 0, None,
                          refuse=True)]
        out = []
        if x.requires_grad:
            out.append(State(
                "requires grad",
                ".detach() (no copy; the result is not tracked by autograd)",
                "detach", 0, lambda v: v.detach(),
            ))
        if x.is_conj():
            out.append(State(
                "has its conjugate bit set (a lazy view: its bytes hold the unconjugated values)",
                ".resolve_conj() (a copy)", "resolve", 1, lambda v: v.resolve_conj(),
            ))
        if x.is_neg():
            out.append(State(
                "has its negative bit set (a lazy view: its bytes hold the un-negated values)",
                ".resolve_neg() (a copy)", "resolve", 1, lambda v: v.resolve_neg(),
            ))
        return out

    def to_host(self, x):
        return x if x.device.type == "cpu" else x.cpu()

    def devices(self):
        torch = self.load()
        out = [Device("cpu")]
        if torch.cuda.is_available():
            kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
            out += [Device(f"{kind}:{i}") for i in range(torch.cuda.device_count())]
        return out

    def can_hold(self, device):
        if device.type == CPU:
            return True
        return any(d == device for d in self.devices())

    def dtype_route(self, dtype):
        torch = self.load()
        dt = getattr(torch, dtype, None)
        if not isinstance(dt, torch.dtype):
            return f"refuse: torch {torch.__version__} has no {dtype} dtype"
        if dtype.startswith(FLOAT8):
            return "capsule"  # torch asks for DLPack 1.0; float8 needs 1.1: hand it a capsule
        return "dlpack"

    def layout_problem(self, t):
        if negative_strides(t.shape, t.strides):
            return "torch tensors cannot have negative strides (torch.from_dlpack refuses them)"
        return None

    def from_tensor(self, t, route):
        torch = self.load()
        if route == "capsule":
            return torch.from_dlpack(t.__dlpack__(max_version=(1, 3)))
        return torch.from_dlpack(t)

    def from_host(self, t, device, route):
        torch = self.load()
        name = "cuda" if device.type in (CUDA, ROCM) else device.name
        return self.from_tensor(t, route).to(torch.device(f"{name}:{device.id}"))


# ---------------------------------------------------------------------------------- jax


class Jax(Namespace):
    name = module = "jax"
    pip = "jax[cpu]"
    aliases = ("jax", "jax.numpy", "jnp")
    immutable = True
    alias_readonly = False
    readonly_why = (
        "jnp.from_dlpack asks for legacy DLPack capsules only, which cannot carry the read-only "
        "flag (dlbridge refuses read-only data to them)"
    )
    result = "jax.Array"
    #: JAX aliases only data aligned to this many bytes (it copies otherwise)
    alignment = 64

    def load(self):
        if self._mod is None:
            import jax
            import jax.numpy  # noqa: F401

            self._mod = jax
        return self._mod

    def owns(self, x):
        jax = self.loaded()
        return jax is not None and isinstance(x, jax.Array)

    def device(self, x):
        devs = list(x.devices())
        if len(devs) != 1:
            return None
        return Device(devs[0])

    def state(self, x):
        out = []
        try:
            ndev = len(x.devices())
        except Exception:  # noqa: BLE001 - tracers
            ndev = 1
        if ndev > 1:
            out.append(State(
                f"is sharded over {ndev} devices (DLPack describes one buffer)",
                "jax.device_get(x) or x.addressable_data(0)", None, 0, None, refuse=True,
            ))
        is_ready = getattr(x, "is_ready", None)
        if is_ready is not None and not is_ready():
            out.append(State(
                "is still being computed", ".block_until_ready()", None, 0,
                lambda v: v.block_until_ready(),
            ))
        return out

    def to_host(self, x):
        jax = self.load()
        if all(d.platform == "cpu" for d in x.devices()):
            return x
        return jax.device_put(x, jax.devices("cpu")[0])

    def devices(self):
        jax = self.load()
        out = [Device("cpu")]
        try:
            out += [Device(d) for d in jax.devices() if d.platform != "cpu"]
        except Exception:  # noqa: BLE001
            pass
        return out

    def can_hold(self, device):
        if device.type == CPU:
            return True
        return any(d == device for d in self.devices())

    def x64(self) -> bool:
        return bool(self.load().config.jax_enable_x64)

    def dtype_route(self, dtype):
        jax = self.load()
        if dtype.startswith(SUBBYTE):
            return f"refuse: JAX has no packed {dtype}"
        try:
            jax.numpy.dtype(dtype)
        except TypeError:
            return f"refuse: JAX has no {dtype} dtype"
        if dtype in SIXTY_FOUR_BIT and not self.x64():
            return (
                f"refuse: without jax_enable_x64 JAX would silently narrow {dtype} to "
                f"{dtype.replace('64', '32').replace('complex128', 'complex64')}; call "
                "jax.config.update('jax_enable_x64', True) first"
            )
        if dtype.startswith(FLOAT8):
            # jnp.from_dlpack asks for legacy capsules, which cannot carry float8 (DLPack 1.1)
            return "host_copy"
        return "dlpack"

    def layout_problem(self, t):
        if not compact(t.shape, t.strides):
            return (
                "JAX takes only compact strides (a permutation of a dense layout), not "
                f"strides {t.strides} for shape {t.shape}"
            )
        if t.size and t.data_ptr % self.alignment:
            return f"JAX aliases only {self.alignment}-byte aligned data (it would copy it itself)"
        return None

    def _device(self, device: Device | None) -> Any:
        jax = self.load()
        if device is None or device.type == CPU:
            return jax.devices("cpu")[0]
        for d in jax.devices():
            if Device(d) == device:
                return d
        raise BufferError(f"JAX has no device {device}")

    def from_tensor(self, t, route):
        jax = self.load()
        if route == "host_copy":  # float8: through an ml_dtypes NumPy view, copied by JAX
            return jax.numpy.array(ml_dtypes_view(t), copy=True)
        return jax.numpy.from_dlpack(t)

    def from_host(self, t, device, route):
        import numpy as np

        jax = self.load()
        host_view = ml_dtypes_view(t) if route == "host_copy" else np.from_dlpack(t)
        return jax.device_put(host_view, self._device(device))


# ---------------------------------------------------------------------------------- dpnp


class Dpnp(Namespace):
    name = module = "dpnp"
    pip = "dpnp intel-opencl-rt"
    aliases = ("dpnp",)
    has_host = False
    result = "dpnp.ndarray"

    def owns(self, x):
        dpnp = self.loaded()
        return dpnp is not None and isinstance(x, dpnp.ndarray)

    def devices(self):
        try:
            import dpctl

            return [Device((ONEAPI, d.get_device_id())) for d in dpctl.get_devices()]
        except Exception:  # noqa: BLE001 - no SYCL runtime
            return []

    def can_hold(self, device):
        return device.type == ONEAPI

    def device_hint(self):
        devs = self.devices()
        return str(devs[0]) if devs else "oneapi:0"

    def _sycl(self, device: Device) -> Any:
        import dpctl

        devices = dpctl.get_devices()
        if device.id >= len(devices):
            raise BufferError(f"no SYCL device {device} (dpctl sees {len(devices)})")
        return devices[device.id]

    def dtype_route(self, dtype):
        if dtype in BASIC_DTYPES:
            return "dlpack"
        return f"refuse: dpnp has no {dtype} dtype"

    def from_tensor(self, t, route):
        return self.load().from_dlpack(t)

    def from_host(self, t, device, route):
        # dpnp.from_dlpack(t, device=...) copies host data itself, but its fallback mishandles
        # strided, 0-d, empty and read-only tensors (dpnp 0.20); dpnp.asarray of a NumPy view
        # of the same memory handles them all, in one host-to-device copy.
        import numpy as np

        return self.load().asarray(np.from_dlpack(t), device=self._sycl(device))

    def copy_on_device(self, t):
        from ._native import from_dlpack

        dpnp = self.load()
        return from_dlpack(dpnp.copy(dpnp.from_dlpack(t)))


# ---------------------------------------------------------------------------------- pyarrow


class PyArrow(Namespace):
    name = module = pip = "pyarrow"
    aliases = ("pyarrow", "pa")
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


# ---------------------------------------------------------------------------------- array_api_strict


class ArrayApiStrict(Namespace):
    name = module = "array_api_strict"
    pip = "array-api-strict"
    aliases = ("array_api_strict", "xps")
    result = "array_api_strict.Array"

    def owns(self, x):
        xps = self.loaded()
        return xps is not None and type(x).__module__.startswith("array_api_strict") and hasattr(x, "__array_namespace__")

    def device(self, x):
        return Device("cpu")

    def to_host(self, x):
        xps = self.load()
        cpu = xps.Device("CPU_DEVICE")
        return x if x.device == cpu else x.to_device(cpu)

    def dtype_route(self, dtype):
        if dtype in BASIC_DTYPES and dtype != "float16":
            return "dlpack"
        return f"refuse: array_api_strict has no {dtype} dtype (the array API has none)"

    def from_tensor(self, t, route):
        return self.load().from_dlpack(t)


# ---------------------------------------------------------------------------------- tvm_ffi


class TvmFfi(Namespace):
    name = module = "tvm_ffi"
    noun = "tensor"
    pip = "apache-tvm-ffi"
    aliases = ("tvm_ffi", "tvm")
    alias_readonly = False
    readonly_why = "tvm_ffi tensors have no read-only flag (kernels may write them)"
    result = "tvm_ffi.Tensor"

    def owns(self, x):
        tvm = self.loaded()
        return tvm is not None and isinstance(x, tvm.Tensor)

    def to_host(self, x):
        dev = device_of(x)
        if dev is None or host(dev):
            return x
        return None  # the caller moves it through dlbridge

    def devices(self):
        return [Device("cpu")]

    def can_hold(self, device):
        return True

    def dtype_route(self, dtype):
        return "dlpack"

    def from_tensor(self, t, route):
        return self.load().from_dlpack(t)


# ---------------------------------------------------------------------------------- dlbridge


class Dlbridge(Namespace):
    name = module = pip = "dlbridge"
    noun = "tensor"
    aliases = ("dlbridge",)
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
        return x if host(x.device) else None  # moved by the caller

    def can_hold(self, device):
        return True

    def dtype_route(self, dtype):
        return "dlpack"

    def from_tensor(self, t, route):
        return t


# ---------------------------------------------------------------------------------- tensorflow


class TensorFlow(Namespace):
    """TensorFlow: ``tf.experimental.dlpack`` takes raw legacy capsules only; its tensors are
    immutable and C-contiguous."""

    name = module = "tensorflow"
    noun = "tensor"
    pip = "tensorflow-cpu"
    aliases = ("tensorflow", "tf")
    alias_readonly = False
    readonly_why = (
        "tf.experimental.dlpack.from_dlpack takes legacy capsules only, which cannot carry "
        "the read-only flag"
    )
    result = "tensorflow.Tensor"

    def owns(self, x):
        tf = self.loaded()
        return tf is not None and isinstance(x, tf.Tensor)

    def device(self, x):
        # C31: where the bytes live; TF keeps int32 tensors in host memory even "on" a GPU,
        # and its DLPack capsule says so.
        return device_of(x) or Device("cpu")

    def source(self, x):
        if hasattr(x, "__dlpack__"):
            return x
        return self.load().experimental.dlpack.to_dlpack(x)

    def to_host(self, x):
        tf = self.load()
        with tf.device("/CPU:0"):
            return tf.identity(x)

    def devices(self):
        tf = self.load()
        gpus = tf.config.list_logical_devices("GPU")
        return [Device("cpu")] + [Device(f"cuda:{i}") for i in range(len(gpus))]

    def can_hold(self, device):
        return device.type == CPU or any(d == device for d in self.devices())

    def dtype_route(self, dtype):
        if dtype in BASIC_DTYPES or dtype == "bfloat16":
            return "dlpack"
        return f"refuse: TensorFlow has no {dtype} dtype"

    def layout_problem(self, t):
        # tf#51598: TensorFlow imports row-major data only
        if t.size and not c_contiguous(t.shape, t.strides):
            return "TensorFlow imports C-contiguous (row-major) data only"
        return None

    def from_tensor(self, t, route):
        return self.load().experimental.dlpack.from_dlpack(t.__dlpack__())


def c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Row-major dense (dims of extent <= 1 ignored)."""
    expected = 1
    for n, s in reversed(list(zip(shape, strides))):
        if n > 1 and s != expected:
            return False
        expected *= n
    return True


# ---------------------------------------------------------------------------------- cupy


class CuPy(Namespace):
    """CuPy (needs CUDA: not available on the machine this was written on, so untested)."""

    name = module = "cupy"
    pip = "cupy-cuda12x"
    aliases = ("cupy", "cp")
    alias_readonly = False
    readonly_why = "CuPy arrays have no read-only flag"
    has_host = False
    result = "cupy.ndarray"

    def owns(self, x):
        cp = self.loaded()
        return cp is not None and isinstance(x, cp.ndarray)

    def devices(self):
        cp = self.load()
        try:
            n = cp.cuda.runtime.getDeviceCount()
        except Exception:  # noqa: BLE001
            n = 0
        return [Device(f"cuda:{i}") for i in range(n)]

    def can_hold(self, device):
        return device.type in (CUDA, CUDA_MANAGED, ROCM)

    def device_hint(self):
        return "cuda:0"

    def from_tensor(self, t, route):
        return self.load().from_dlpack(t)

    def from_host(self, t, device, route):
        import numpy as np

        cp = self.load()
        with cp.cuda.Device(device.id):
            return cp.asarray(np.from_dlpack(t))

    def copy_on_device(self, t):
        from ._native import from_dlpack

        cp = self.load()
        return from_dlpack(cp.array(cp.from_dlpack(t), copy=True))


# ---------------------------------------------------------------------------------- paddle


class Paddle(Namespace):
    """PaddlePaddle: ``paddle.from_dlpack`` asks for ``max_version=(1, 2)``, ignores READ_ONLY
    (a writable alias) and reads negative strides wrongly (garbage values, no error)."""

    name = "paddle"
    module = "paddle"
    pip = "paddlepaddle"
    noun = "tensor"
    aliases = ("paddle", "paddlepaddle")
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
            return "paddle.from_dlpack reads negative strides wrongly (paddle 3.3: wrong values, no error)"
        return None

    def from_tensor(self, t, route):
        return self.load().from_dlpack(t)


# ---------------------------------------------------------------------------------- mlx


class Mlx(Namespace):
    """MLX: ``mx.from_dlpack`` copies host data (always), narrows float64 to float32 and
    complex128 to complex64 on import, and refuses negative strides (ValueError); its arrays
    export legacy capsules only, so dlbridge imports them read-only."""

    name = "mlx"
    module = "mlx.core"
    pip = "mlx[cpu]"
    aliases = ("mlx", "mlx.core", "mx")
    result = "mlx.core.array"
    #: dtypes MLX holds (on the CPU; its GPU has no float64)
    DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "bfloat16", "float32", "float64", "complex64")

    def owns(self, x):
        mx = self.loaded()
        return mx is not None and isinstance(x, mx.array)

    def device(self, x):
        return device_of(x) or Device("cpu")

    def to_host(self, x):
        return x

    def dtype_route(self, dtype):
        if dtype in self.DTYPES:
            return "import_copy"  # MLX copies host data on import, always
        return f"refuse: mlx has no {dtype} dtype"

    def layout_problem(self, t):
        if negative_strides(t.shape, t.strides):
            return "mx.from_dlpack refuses negative strides"
        return None

    def from_tensor(self, t, route):
        mx = self.load()
        dt = getattr(mx, "bool_" if t.dtype.name == "bool" else t.dtype.name)
        # mx.from_dlpack copies anyway, and would narrow float64/complex128; mx.array keeps the
        # dtype it is given
        y = mx.array(t, dtype=dt)
        mx.eval(y)
        return y


# ---------------------------------------------------------------------------------- warp


class Warp(Namespace):
    """NVIDIA Warp: ``wp.from_dlpack`` asks for a legacy capsule (``__dlpack__()``, no keywords)
    and takes any strides; warp arrays have no read-only flag; no complex, bfloat16 or float8."""

    name = "warp"
    module = "warp"
    pip = "warp-lang"
    aliases = ("warp", "wp")
    alias_readonly = False
    readonly_why = (
        "wp.from_dlpack asks for legacy DLPack capsules only, which cannot carry the read-only "
        "flag (and warp arrays have none)"
    )
    result = "warp.array"
    DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64")

    def load(self):
        if self._mod is None:
            import warp

            warp.config.quiet = True
            warp.init()
            self._mod = warp
        return self._mod

    def owns(self, x):
        wp = self.loaded()
        return wp is not None and isinstance(x, wp.array)

    def device(self, x):
        if x.device.is_cpu:
            return Device("cpu")
        return Device(f"cuda:{x.device.ordinal}")

    def to_host(self, x):
        return x if x.device.is_cpu else x.to("cpu")

    def devices(self):
        wp = self.load()
        return [Device("cpu")] + [Device(f"cuda:{d.ordinal}") for d in wp.get_cuda_devices()]

    def can_hold(self, device):
        return device.type == CPU or any(d == device for d in self.devices())

    def dtype_route(self, dtype):
        if dtype in self.DTYPES:
            return "dlpack"
        return f"refuse: warp has no {dtype} dtype"

    def shape_refusal(self, shape):
        if len(shape) == 0:
            return "warp has no 0-d arrays; reshape to (1,) first"
        if len(shape) > 4:
            return "warp arrays have at most 4 dimensions"
        return None

    def from_tensor(self, t, route):
        return self.load().from_dlpack(t)


# ---------------------------------------------------------------------------------- pandas


class Pandas(Namespace):
    """pandas 3 (copy-on-write): a Series offers only ``__arrow_c_stream__`` (NaN in a float
    column becomes an Arrow null there), ``.values`` / ``.to_numpy()`` are read-only views. As a
    source, a Series or DataFrame of NumPy dtypes goes through ``to_numpy()`` (zero-copy where
    pandas can, NaN kept, read-only); other columns through the Arrow stream. As a target, a
    1-D tensor becomes a Series and a 2-D one a DataFrame over the same memory: read-only memory
    stays read-only (writes raise ValueError)."""

    name = module = pip = "pandas"
    aliases = ("pandas", "pd")
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


# ---------------------------------------------------------------------------------- registry

_CLASSES: list[type[Namespace]] = [
    NumPy, Torch, Jax, Dpnp, PyArrow, TensorFlow, ArrayApiStrict, CuPy, TvmFfi, Dlbridge,
    Paddle, Mlx, Warp, Pandas,
]
_INSTANCES: dict[str, Namespace] = {cls.name: cls() for cls in _CLASSES}
_ALIASES: dict[str, Namespace] = {
    alias: ns for ns in _INSTANCES.values() for alias in (ns.name, *ns.aliases)
}
#: module names (``module.__name__``) that stand for a namespace
_MODULES = {
    "numpy": "numpy", "torch": "torch", "jax": "jax", "jax.numpy": "jax", "dpnp": "dpnp",
    "pyarrow": "pyarrow", "tensorflow": "tensorflow", "array_api_strict": "array_api_strict",
    "cupy": "cupy", "tvm_ffi": "tvm_ffi", "dlbridge": "dlbridge",
    "paddle": "paddle", "mlx.core": "mlx", "mlx": "mlx", "warp": "warp", "pandas": "pandas",
}

NAMES: tuple[str, ...] = tuple(_INSTANCES)


def get(to: Any) -> Namespace:
    """The namespace ``to`` names: a module (``numpy``, ``torch``, ``jax.numpy``...) or a name
    (``"numpy"``, ``"np"``, ``"torch"``, ``"jax"``...). ValueError when unknown."""
    if isinstance(to, Namespace):
        return to
    if isinstance(to, str):
        ns = _ALIASES.get(to)
        if ns is not None:
            return ns
    else:
        name = getattr(to, "__name__", None)
        if isinstance(name, str) and name in _MODULES:
            return _INSTANCES[_MODULES[name]]
    raise ValueError(
        f"unknown target {to!r}: pass a module or one of the names "
        f"{', '.join(repr(n) for n in NAMES)}"
    )


def owner(x: Any) -> Namespace | None:
    """The namespace whose array ``x`` is (None for other objects)."""
    for ns in _INSTANCES.values():
        if ns.loaded() is not None and ns.owns(x):
            return ns
    return None


def device_helper(device: Device) -> Namespace | None:
    """An installed library that can copy data on ``device``, which dlbridge cannot reach
    itself (dpnp for oneAPI devices)."""
    for name in ("dpnp", "cupy"):
        ns = _INSTANCES[name]
        if ns.installed() and ns.can_hold(device) and type(ns).copy_on_device is not Namespace.copy_on_device:
            return ns
    return None


def installed() -> list[str]:
    """Names of the namespaces whose library is installed."""
    return [ns.name for ns in _INSTANCES.values() if ns.installed()]


__all__ = [
    "NAMES",
    "LayoutView",
    "Namespace",
    "State",
    "arrow_zero_copy",
    "compact",
    "device_helper",
    "get",
    "installed",
    "negative_strides",
    "owner",
]
