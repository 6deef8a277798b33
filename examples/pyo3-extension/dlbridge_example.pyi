"""Type stubs of the dlbridge_example extension (maturin ships them as its __init__.pyi)."""

from typing import Any, Protocol

class _Tensor(Protocol):
    """What `ramp`, `passthrough` and `row_sums` return: dlbridge's `Tensor` class as defined
    inside this extension (not an attribute of the module). Any DLPack consumer, the buffer
    protocol, the array interfaces and the Arrow PyCapsule interface take it zero-copy."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def strides(self) -> tuple[int, ...]: ...
    @property
    def data_ptr(self) -> int: ...
    @property
    def readonly(self) -> bool: ...
    @property
    def device(self) -> Any: ...
    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...

def total(x: Any) -> float:
    """The sum of a C-contiguous float32 host array from any library."""

def total_numpy(x: Any) -> float:
    """The same sum through rust-numpy: NumPy float32 arrays only."""

def host_total(x: Any) -> float:
    """The sum of a float32 array of any strides, copied to the host if it is elsewhere."""

def total_with(x: Any, *, copy: bool | None = None) -> float:
    """The sum of a float32 array imported to the host with `copy=` as in `from_dlpack`."""

def scale(x: Any, factor: float) -> None:
    """Multiply a writable, C-contiguous float32 host array by `factor`, in place."""

def row_sums(x: Any) -> _Tensor:
    """The sums along the last axis of a float32 host array of 2 or more dimensions."""

def ramp(n: int) -> _Tensor:
    """A new float32 array `[0, 1, ..., n - 1]`."""

def passthrough(x: Any) -> _Tensor:
    """The argument, imported zero-copy and handed back."""
