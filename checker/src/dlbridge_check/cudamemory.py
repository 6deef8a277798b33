"""Where the memory at an address lives, asked of the CUDA driver itself through ctypes.

The producer audit's device claims (:mod:`dlbridge_check.deviceclaim`) compare what a producer
says about its memory with what the driver knows about it. The checker loads the driver on its
own, as any CUDA library does, and reuses none of dlbridge's answers: the library
``DLBRIDGE_CUDA_DRIVER`` names (a stand-in for the driver on machines without a GPU, as in
dlbridge's own tests), else ``libcuda.so.1`` (``nvcuda.dll`` on Windows).

:func:`memory_at` classifies an address as one of

- :data:`HOST`: memory CUDA does not know (``cuPointerGetAttribute`` says
  ``CUDA_ERROR_INVALID_VALUE``): ordinary host memory;
- :data:`PINNED`: page-locked host memory (``CU_MEMORYTYPE_HOST``);
- :data:`DEVICE`: device memory of one device (``CU_MEMORYTYPE_DEVICE``), with its ordinal;
- :data:`MANAGED`: managed (unified) memory, which the host and the devices reach.
"""

from __future__ import annotations

import ctypes
import os
import sys

#: the environment variable that names the driver library to load instead of the system's
DRIVER_ENV = "DLBRIDGE_CUDA_DRIVER"

HOST, PINNED, DEVICE, MANAGED = "host", "pinned", "device", "managed"

_SUCCESS = 0
_INVALID_VALUE = 1
# CUpointer_attribute
_MEMORY_TYPE, _IS_MANAGED, _DEVICE_ORDINAL = 2, 8, 9
# CUmemorytype
_MEMORYTYPE_HOST, _MEMORYTYPE_DEVICE, _MEMORYTYPE_UNIFIED = 1, 2, 4


class NoDriver(Exception):
    """No CUDA driver could be loaded and initialised here (the message says why)."""


class DriverError(Exception):
    """The driver failed to answer about an address (the message names the call and error)."""


#: library name -> the loaded, initialised driver, or why it is not available (the reason, not
#: an exception: a raised exception keeps the frames it passed through, and their objects, alive)
_LOADED: dict[str, ctypes.CDLL | str] = {}


def library_name() -> str | None:
    """The driver library this process would load; None where CUDA has none (macOS)."""
    named = os.environ.get(DRIVER_ENV)
    if named:
        return named
    if sys.platform.startswith("linux"):
        return "libcuda.so.1"
    if sys.platform == "win32":
        return "nvcuda.dll"
    return None


def driver() -> ctypes.CDLL:
    """The CUDA driver, loaded and initialised once per process; raises :class:`NoDriver`."""
    name = library_name()
    if name is None:
        raise NoDriver(f"CUDA has no driver on {sys.platform}")
    if name not in _LOADED:
        _LOADED[name] = _load(name)
    loaded = _LOADED[name]
    if isinstance(loaded, str):
        raise NoDriver(loaded)
    return loaded


def _load(name: str) -> ctypes.CDLL | str:
    try:
        lib = ctypes.CDLL(name)
        lib.cuInit.argtypes = [ctypes.c_uint]
        lib.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
    except (OSError, AttributeError) as e:
        return f"{name} cannot be loaded: {e}"
    lib.cuInit.restype = lib.cuPointerGetAttribute.restype = ctypes.c_int
    status = lib.cuInit(0)
    if status != _SUCCESS:
        return f"{name} loaded, but cuInit failed with {error_name(lib, status)}"
    return lib


def error_name(lib: ctypes.CDLL, status: int) -> str:
    """The driver's name of a ``CUresult`` (``CUDA_ERROR_NO_DEVICE``), or its number."""
    text = ctypes.c_char_p()
    try:
        ok = lib.cuGetErrorName(ctypes.c_int(status), ctypes.byref(text)) == _SUCCESS
    except AttributeError:
        ok = False
    return text.value.decode() if ok and text.value else f"CUresult {status}"


def _attribute(lib: ctypes.CDLL, attribute: int, address: int) -> int | None:
    """One pointer attribute; None where the driver does not know the memory."""
    # A zeroed 8-byte slot reads back right whether the driver writes a 4-byte int or a bool.
    value = ctypes.c_uint64(0)
    status = lib.cuPointerGetAttribute(ctypes.byref(value), attribute, address)
    if status == _INVALID_VALUE:
        return None
    if status != _SUCCESS:
        raise DriverError(
            f"cuPointerGetAttribute({attribute}) of {address:#x} failed with "
            f"{error_name(lib, status)}"
        )
    return value.value


def memory_at(address: int) -> tuple[str, int | None]:
    """What the memory at ``address`` is (:data:`HOST`, :data:`PINNED`, :data:`DEVICE` or
    :data:`MANAGED`) and, for device memory, the ordinal of its device. Raises
    :class:`NoDriver` or :class:`DriverError`."""
    lib = driver()
    memory_type = _attribute(lib, _MEMORY_TYPE, address)
    if memory_type is None:
        return HOST, None
    if _attribute(lib, _IS_MANAGED, address) or memory_type == _MEMORYTYPE_UNIFIED:
        return MANAGED, None
    if memory_type == _MEMORYTYPE_HOST:
        return PINNED, None
    if memory_type == _MEMORYTYPE_DEVICE:
        return DEVICE, _attribute(lib, _DEVICE_ORDINAL, address)
    raise DriverError(f"the driver says memory type {memory_type} for {address:#x} (a CUDA array, "
                      "not strided memory)")
