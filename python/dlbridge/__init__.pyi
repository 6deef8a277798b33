from ._native import DLPACK_VERSION as DLPACK_VERSION
from ._native import Device as Device
from ._native import DType as DType
from ._native import Tensor as Tensor
from ._native import __version__ as __version__
from ._native import copyto as copyto
from ._native import from_dlpack as from_dlpack

__all__ = ["DLPACK_VERSION", "DType", "Device", "Tensor", "__version__", "copyto", "from_dlpack"]
