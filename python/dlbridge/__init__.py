"""dlbridge: move arrays between array libraries and devices correctly.

Zero copies where possible, explicit copies where not, and read-only memory kept read-only.
The public API:

- :func:`from_dlpack` imports any array-like (DLPack producer or capsule, buffer protocol,
  ``__array_interface__``, Arrow) as a :class:`Tensor`; :func:`from_arrow` imports Arrow
  arrays with their nulls filled or reported as a validity mask.
- :class:`Tensor` exports itself through ``__dlpack__``, the buffer protocol,
  ``__array_interface__`` and the Arrow PyCapsule interface.
- :class:`DType` and :class:`Device` describe element types and devices; :func:`copyto`
  copies elements into an existing tensor; :class:`NoProtocolError` (a TypeError and an
  AttributeError) is raised for objects that offer no exchange protocol.
- :func:`convert` turns an array of one library into an array of another (``"numpy"``,
  ``"torch"``, ``"jax"``, ``"dpnp"``, ``"pyarrow"``...), on the device asked, copied or not as
  asked; :func:`explain` returns its :class:`Plan` without running it.
- :func:`to_numpy`, :func:`to_memoryview` and :func:`to_host` bring any array to the host;
  :func:`describe` says what dlbridge sees in any object.
- Tensors pickle (zero-copy out of band with protocol 5); :func:`to_shared` puts one in shared
  memory that ``multiprocessing`` sends to other processes as a handle.
"""

try:
    from ._native import (
        DLPACK_VERSION,
        Device,
        DType,
        NoProtocolError,
        Tensor,
        __version__,
        copyto,
        from_arrow,
        from_dlpack,
        to_shared,
    )
except ImportError as _error:  # the wheel does not fit this interpreter: say which one does
    from .doctor.environment import extension_problem

    raise ImportError(f"dlbridge's compiled extension does not load ({_error}): "
                      f"{extension_problem()}") from _error
from . import (
    _native,
    _processes,  # noqa: F401 - registers the multiprocessing reduction
)
from .convert import _copied_by_library, convert, explain
from .describe import describe
from .host import _to_numpy_general, to_host, to_memoryview, to_numpy
from .plan import Plan

# The one way Rust reaches the package's Python code: what it is handed here, once.
_native._register_fallbacks(_to_numpy_general, _copied_by_library)

__all__ = [
    "DLPACK_VERSION",
    "DType",
    "Device",
    "NoProtocolError",
    "Plan",
    "Tensor",
    "__version__",
    "convert",
    "copyto",
    "describe",
    "explain",
    "from_arrow",
    "from_dlpack",
    "to_host",
    "to_memoryview",
    "to_numpy",
    "to_shared",
]
