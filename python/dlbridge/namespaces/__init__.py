"""What dlbridge knows about each array library, as a target and as a source.

One :class:`Namespace` per library, each in the module of its family (``numpy``, ``torch``,
``jax``, ``arrow``, ``sycl``, ``cuda``, ``tensorflow``, ``paddle``, ``mlx``, ``warp``, ``tvm``,
``dlbridge``) with the peer facts it encodes, measured against the peer (versions in its
docstring); :mod:`.registry` finds them in the package's modules (``NAMES``, in the order of
their ``rank``) and resolves ``"np"``, ``numpy`` (the module), ``"jax.numpy"``... to the same
namespace (:func:`get`). The checker's adapter of each is in the module of the same name in
:mod:`dlbridge_check.adapters`. The planner of
:func:`dlbridge.convert` asks a namespace what its DLPack consumer can take (devices, dtypes,
layouts, the read-only flag) and how to hand it a :class:`dlbridge.Tensor`; it asks the source's
namespace about framework state DLPack cannot carry (torch's autograd and lazy bits, JAX arrays
still being computed) and how to bring an array back to the host. Nothing imports a library
before it is needed.

The base class and shared helpers live in ``base``, the layout predicates in
:mod:`dlbridge._layout`; both, and the registry's functions, are re-exported here. The library
classes are imported from their modules (``from dlbridge.namespaces.numpy import NumPy``).
"""

from __future__ import annotations

from .._layout import arrow_zero_copy, c_contiguous, compact, negative_strides
from .base import (
    BASIC_DTYPES,
    CPU,
    CUDA,
    CUDA_HOST,
    CUDA_MANAGED,
    EXT_DEV,
    FLOAT8,
    METAL,
    ONEAPI,
    OPENCL,
    ROCM,
    ROCM_HOST,
    SIXTY_FOUR_BIT,
    SUBBYTE,
    VPI,
    VULKAN,
    ImportRoute,
    LayoutView,
    Namespace,
    State,
    device_of,
    has_ml_dtypes,
)
from .numpy import ml_dtypes_view
from .registry import NAMES, device_helper, get, installed, owner

__all__ = [
    "BASIC_DTYPES",
    "CPU",
    "CUDA",
    "CUDA_HOST",
    "CUDA_MANAGED",
    "EXT_DEV",
    "FLOAT8",
    "ImportRoute",
    "LayoutView",
    "METAL",
    "NAMES",
    "Namespace",
    "ONEAPI",
    "OPENCL",
    "ROCM",
    "ROCM_HOST",
    "SIXTY_FOUR_BIT",
    "SUBBYTE",
    "State",
    "VPI",
    "VULKAN",
    "arrow_zero_copy",
    "c_contiguous",
    "compact",
    "device_helper",
    "device_of",
    "get",
    "has_ml_dtypes",
    "installed",
    "ml_dtypes_view",
    "negative_strides",
    "owner",
]
