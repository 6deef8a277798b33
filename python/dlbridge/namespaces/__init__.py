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

The package has one module per library family (``numpy``, ``torch``, ``jax``, ``arrow``,
``sycl``, ``cuda``, ``tensorflow``, ``paddle``, ``mlx``, ``warp``, ``tvm``, ``dlbridge``), the
base class and shared helpers in ``base`` and the lookup functions in ``registry``; the layout
predicates live in :mod:`dlbridge._layout`. Everything is re-exported here.
"""

from __future__ import annotations

from .._layout import arrow_zero_copy, c_contiguous, compact, negative_strides
from .arrow import Pandas, PyArrow
from .base import (
    BASIC_DTYPES,
    CPU,
    CUDA,
    CUDA_HOST,
    CUDA_MANAGED,
    DLBRIDGE_REACHES,
    EXT_DEV,
    FLOAT8,
    HOST_TYPES,
    METAL,
    ONEAPI,
    OPENCL,
    ROCM,
    ROCM_HOST,
    SIXTY_FOUR_BIT,
    SUBBYTE,
    VPI,
    VULKAN,
    LayoutView,
    Namespace,
    State,
    device_of,
    has_ml_dtypes,
    host,
)
from .cuda import CuPy
from .dlbridge import Dlbridge
from .jax import Jax
from .mlx import Mlx
from .numpy import ArrayApiStrict, NumPy, ml_dtypes_view
from .paddle import Paddle
from .registry import NAMES, device_helper, get, installed, owner
from .sycl import Dpnp
from .tensorflow import TensorFlow
from .torch import Torch
from .tvm import TvmFfi
from .warp import Warp

__all__ = [
    "ArrayApiStrict",
    "BASIC_DTYPES",
    "CPU",
    "CUDA",
    "CUDA_HOST",
    "CUDA_MANAGED",
    "CuPy",
    "DLBRIDGE_REACHES",
    "Dlbridge",
    "Dpnp",
    "EXT_DEV",
    "FLOAT8",
    "HOST_TYPES",
    "Jax",
    "LayoutView",
    "METAL",
    "Mlx",
    "NAMES",
    "Namespace",
    "NumPy",
    "ONEAPI",
    "OPENCL",
    "Paddle",
    "Pandas",
    "PyArrow",
    "ROCM",
    "ROCM_HOST",
    "SIXTY_FOUR_BIT",
    "SUBBYTE",
    "State",
    "TensorFlow",
    "Torch",
    "TvmFfi",
    "VPI",
    "VULKAN",
    "Warp",
    "arrow_zero_copy",
    "c_contiguous",
    "compact",
    "device_helper",
    "device_of",
    "get",
    "has_ml_dtypes",
    "host",
    "installed",
    "ml_dtypes_view",
    "negative_strides",
    "owner",
]
