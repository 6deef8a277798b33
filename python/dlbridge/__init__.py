"""dlbridge: move arrays between array libraries and devices correctly.

Zero copies where possible, explicit copies where not, and read-only memory kept read-only.
The public API is re-exported from the native extension:

- :func:`from_dlpack` imports any array-like (DLPack producer or capsule, buffer protocol,
  ``__array_interface__``) as a :class:`Tensor`.
- :class:`Tensor` exports itself through ``__dlpack__``, the buffer protocol and
  ``__array_interface__``.
- :class:`DType` and :class:`Device` describe element types and devices.
"""

from ._native import DLPACK_VERSION, Device, DType, Tensor, __version__, copyto, from_dlpack

__all__ = ["DLPACK_VERSION", "DType", "Device", "Tensor", "__version__", "copyto", "from_dlpack"]
