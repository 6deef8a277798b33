"""Type stubs for the native extension of dlbridge (built from crates/dlbridge-py)."""

from typing import Any, Literal, Self, SupportsIndex, final, overload

__all__ = [
    "__version__",
    "DLPACK_VERSION",
    "_LEGACY_CAPSULES_WRITABLE",
    "Tensor",
    "from_dlpack",
    "DType",
    "Device",
    "NoProtocolError",
    "copyto",
    "from_arrow",
    "to_numpy",
    "to_shared",
    "_rebuild",
    "_shared_handle",
    "_map_shared",
    "_open_cuda_ipc",
    "_register_fallbacks",
    "_copy_decision",
]

__version__: str

#: Highest DLPack version dlbridge speaks (producer and consumer).
DLPACK_VERSION: tuple[int, int]

#: Top-level packages whose arrays' legacy capsules import writable: mutable arrays that
#: export their own memory (any other legacy capsule imports read-only).
_LEGACY_CAPSULES_WRITABLE: list[str]

# The classes cannot be subclassed (the extension defines them so): @final says it.
@final
class DType:
    """An element type: DLPack code, bits per lane and lanes.

    Speaks the dtype exchange protocol: :meth:`__dlpack_data_type__` gives the DLPack
    ``(code, bits, lanes)`` triple, so libraries that read the protocol take a DType as their
    own dtype. Compares equal to anything the constructor takes (``DType("float32") ==
    "float32" == numpy.float32``); pickles as its name.
    """

    def __new__(cls, dtype: Any) -> Self:
        """Parse a dtype, as every dlbridge API that takes one does:

        - a NumPy / ml_dtypes name (or a vector type's name such as ``"float32x4"``, as
          :attr:`name` gives it), or a DType;
        - any object with ``__dlpack_data_type__()`` returning a ``(code, bits, lanes)`` tuple
          (the dtype exchange protocol, spoken by Paddle's dtypes);
        - a NumPy dtype or scalar type (``numpy.float32``), an ml_dtypes type
          (``ml_dtypes.bfloat16``), a torch dtype, a JAX scalar type (``jax.numpy.float32``)
          or a tvm-ffi dtype.

        TypeError for any other type; ValueError for an unknown name, a NumPy dtype of
        non-native byte order or without a DLPack equivalent, a peer's dtype dlbridge does not
        know (``torch.complex32``), and a protocol value that is not a tuple of three integers
        or names no DLPack dtype. An exception raised by ``__dlpack_data_type__`` itself
        propagates."""
    @property
    def name(self) -> str:
        """The NumPy / ml_dtypes name, e.g. ``"float32"``, ``"bfloat16"``, ``"float8_e4m3fn"``;
        a vector type appends its lanes (``"float32x4"``)."""
    @property
    def code(self) -> int:
        """The DLPack type code (``kDLFloat`` = 2, ...)."""
    @property
    def bits(self) -> int:
        """Bits per lane."""
    @property
    def lanes(self) -> int:
        """Number of SIMD lanes (1 for scalars)."""
    @property
    def itemsize(self) -> int:
        """Bytes per element (``ceil(bits * lanes / 8)``)."""
    def __dlpack_data_type__(self) -> tuple[int, int, int]:
        """``(code, bits, lanes)``, as DLPack's ``DLDataType`` holds them."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Device:
    """A device: DLPack device type and ordinal.

    Speaks the device exchange protocol: :meth:`__dlpack_device__` gives the DLPack
    ``(device_type, device_id)`` pair, so libraries that read the protocol take a Device as
    their own device. Compares equal to anything the constructor takes (its string form
    ``"cpu"``, ``"cuda:1"``, ``"oneapi:0"``, a ``(type, id)`` tuple, ...); pickles as its
    ``(type, id)`` pair.
    """

    def __new__(cls, device: Any) -> Self:
        """Parse a device, as every dlbridge API that takes one does:

        - ``"cpu"``, ``"cuda"``, ``"cuda:1"``, a ``(type, id)`` tuple, or a Device;
        - any object with ``__dlpack_device__()`` returning a ``(device_type, device_id)``
          tuple (the device exchange protocol, spoken by Paddle's places, and by arrays, which
          stand for their device);
        - a torch, JAX, dpnp / dpctl (SYCL, a oneAPI device) or tvm-ffi device.

        TypeError for any other type; ValueError for an unknown name, and for a tuple (given
        or returned by the protocol) that is not two integers, has a type below 1 or a
        negative id. Unknown positive device types are kept. An exception raised by
        ``__dlpack_device__`` itself propagates."""
    @property
    def type(self) -> int:
        """The DLPack device type (``kDLCPU`` = 1, ``kDLCUDA`` = 2, ``kDLOneAPI`` = 14, ...)."""
    @property
    def id(self) -> int:
        """The device ordinal."""
    @property
    def name(self) -> str:
        """The device kind name (``"cpu"``, ``"cuda"``, ``"cuda_host"``, ``"oneapi"``,
        ``"tpu_host"``, ``"ascend"``...)."""
    @property
    def is_host_accessible(self) -> bool:
        """True when the host CPU reads and writes this device's memory directly: plain host
        memory, CUDA and ROCm pinned memory, CUDA managed memory, a TPU runtime's pinned host
        memory."""
    @property
    def dlbridge_copies_from(self) -> bool:
        """True when dlbridge itself copies data out of this device's memory (host memory,
        and CUDA memory through the driver). Other memory (oneAPI, ROCm, Metal...) is copied
        by the library that owns it."""
    @property
    def dlbridge_copies_to(self) -> bool:
        """True when dlbridge itself makes copies on this device (the host CPU, and CUDA
        pinned, managed and device memory). Other devices are reached by their library."""
    def __dlpack_device__(self) -> tuple[int, int]:
        """``(type, id)``."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Tensor:
    """An owned, validated view of array memory: device, dtype, shape, strides, flags and the
    owner that keeps the memory alive.

    ``Tensor(x, *, device=None, copy=None)`` is ``from_dlpack(x, device=device, copy=copy)``.

    Tensors pickle with their dtype, shape, strides, ``dim_names`` and read-only flag. With
    protocol 5 and a ``buffer_callback`` the data of a C- or F-contiguous host tensor travels
    out of band as one ``pickle.PickleBuffer``, zero-copy both ways: the loaded tensor views
    the buffer ``pickle.loads`` is given (read-only when that buffer or the source is). Other
    protocols carry the bytes in the pickle. A layout that is neither C- nor F-contiguous
    travels as a compact C-order copy. CUDA data is staged through the host and restored on the
    same device at load (BufferError where that device is missing); a tensor on a device
    dlbridge cannot allocate on (oneAPI...) is refused at dump time (BufferError): move it to
    the host first. Loading validates everything against the bytes received, but unpickling
    untrusted data is unsafe in Python whatever the types involved. For ``multiprocessing``,
    a tensor made by :func:`to_shared` travels as a handle to its shared memory instead.
    """

    #: The DLPack 1.3 C exchange API table (a capsule named ``"dlpack_exchange_api"``): C
    #: consumers (tvm-ffi, ...) exchange dlbridge tensors through it without a Python call.
    __dlpack_c_exchange_api__: Any
    def __new__(cls, x: Any, *, device: Any = None, copy: bool | None = None) -> Self: ...
    @property
    def shape(self) -> tuple[int, ...]:
        """Extents of each dimension."""
    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements (DLPack convention), not bytes."""
    @property
    def dtype(self) -> DType:
        """The element type."""
    @property
    def device(self) -> Device:
        """Where the memory lives."""
    @property
    def dim_names(self) -> tuple[str, ...] | None:
        """Names of the dimensions, one per dimension, or None.

        Set by an import of an Arrow ``arrow.fixed_shape_tensor`` that has ``dim_names``
        (:func:`from_dlpack`, :func:`from_arrow`, ``Tensor(x)``), in logical order (after the
        extension's ``permutation``); dimension 0, the Arrow array's rows, is named ``""``.
        Kept by ``copy()``, ``contiguous()``, ``to_device()`` and ``view()``, dropped by
        anything that changes the shape, and written back (in physical order) by the Arrow
        export, so ``pa.array(dlbridge.from_dlpack(arr))`` keeps them.
        """
    @property
    def ndim(self) -> int:
        """Number of dimensions."""
    @property
    def size(self) -> int:
        """Number of elements."""
    @property
    def itemsize(self) -> int:
        """Bytes per element."""
    @property
    def nbytes(self) -> int:
        """Bytes covered by the elements (``size * itemsize``; packed for sub-byte dtypes)."""
    @property
    def readonly(self) -> bool:
        """True when the memory must not be written through this tensor."""
    @property
    def is_copied(self) -> bool:
        """True when this tensor's memory is a copy made for it (no one else aliases it)."""
    @property
    def data_ptr(self) -> int:
        """Address of the first element (data + byte_offset)."""
    @property
    def is_c_contiguous(self) -> bool:
        """Row-major dense (dims of extent <= 1 ignored)."""
    @property
    def is_f_contiguous(self) -> bool:
        """Column-major dense (dims of extent <= 1 ignored)."""
    @property
    def __array_interface__(self) -> dict[str, Any]:
        """NumPy array interface v3 (CPU-accessible tensors only; BufferError otherwise)."""
    def tolist(self) -> Any:
        """Nested lists of Python scalars (CPU-accessible tensors with a Python scalar type)."""
    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """``__cuda_array_interface__`` v3 (CUDA device, managed or pinned memory only;
        AttributeError elsewhere, so ``hasattr`` tells consumers which protocol to use)."""
    def to_device(self, device: Any, /, *, stream: int | None = None) -> Tensor:
        """This tensor on ``device`` (anything :class:`Device` takes: ``"cpu"``, ``"cuda:0"``, ...):
        itself when already there, else a copy. dlbridge copies host and CUDA memory itself
        (``is_copied`` set); memory it cannot reach (oneAPI, ...) is copied by the installed
        library that owns such memory, as :func:`to_numpy` does (dpnp for oneAPI), and flagged as
        that library exports it. Host results are complete on return; CUDA copies are enqueued
        on ``stream`` (default: the legacy default stream)."""
    def view(self, dtype: Any) -> Tensor:
        """The same memory read as ``dtype`` (anything :class:`DType` takes, of the same item
        size), zero-copy: e.g. uint16 bytes as bfloat16. ValueError when the item sizes differ."""
    def contiguous(self) -> Tensor:
        """A C-contiguous tensor with the same values, on the same device: itself when already
        C-contiguous, else :meth:`copy`."""
    def copy(self, order: Literal["C", "F"] = "C") -> Tensor:
        """A new, writable, C- (or F-) contiguous copy with ``is_copied`` set, on the tensor's
        own device (CUDA data is copied on the GPU, on the legacy default stream). Memory
        dlbridge cannot copy itself (oneAPI...) is copied in C order by the installed library
        that owns it (dpnp), flagged as that library exports it; an F-order copy of such memory
        is a BufferError naming the way to the host."""
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """Export as a DLPack capsule (versioned when ``max_version >= (1, 0)``, legacy
        otherwise)."""
    def __dlpack_device__(self) -> tuple[int, int]:
        """``(device_type, device_id)`` of the memory."""
    def __arrow_c_schema__(self) -> Any:
        """An ``arrow_schema`` PyCapsule: the Arrow field the tensor exports as.

        A 1-d tensor is a primitive array (``float16`` is ``e``); an N-d tensor is an
        ``arrow.fixed_shape_tensor`` over a ``FixedSizeList`` (first dimension = the array's
        length, the others = the cell shape, with a ``permutation`` for transposed cells);
        ``bool`` is the ``arrow.bool8`` extension (int8 storage). BufferError for dtypes Arrow
        has no type for (bfloat16, complex, float8...) and for 0-d tensors.
        """
    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]:
        """``(arrow_schema, arrow_array)`` PyCapsules over the tensor's memory (host tensors).

        Zero-copy when Arrow can express the layout; otherwise (negative, overlapping or gapped
        strides, a first dimension that is not the outermost) a C-order copy. The Arrow array
        keeps the memory alive. ``requested_schema`` (an ``arrow_schema`` capsule) may ask for
        Arrow's bit-packed ``bool`` (a copy) or the bare storage type without the extension;
        other requests get the default schema.
        """
    def __arrow_c_device_array__(
        self, requested_schema: Any = None, **kwargs: Any
    ) -> tuple[Any, Any]:
        """``(arrow_schema, arrow_device_array)`` PyCapsules on the tensor's own device.

        CPU memory is published with Arrow's device id -1; ``sync_event`` is NULL, so CUDA data
        is complete on return (dlbridge waits for its pending copies into it and for its
        device's legacy default stream). Never copies across devices. Unknown keywords are
        accepted only with the value None (NotImplementedError otherwise).
        """
    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """An ``arrow_array_stream`` PyCapsule yielding the tensor as a single chunk."""
    def __arrow_c_device_stream__(self, requested_schema: Any = None, **kwargs: Any) -> Any:
        """An ``arrow_device_array_stream`` PyCapsule yielding the tensor as one device array
        (the schema and array of ``__arrow_c_device_array__``), then the end: ``get_next``
        gives a released array from then on. Never copies across devices. Unknown keywords
        are accepted only with the value None (NotImplementedError otherwise)."""

    def __arrow_array__(self, type: Any = None) -> Any:
        """A ``pyarrow.Array`` of the tensor (what ``pyarrow.array(tensor)`` returns).

        Zero-copy wherever the Arrow export is; the array keeps the tensor's memory alive and
        a read-only tensor gives immutable buffers. 1-d contiguous integer and float tensors
        go through ``pyarrow.Array.from_dlpack`` (pyarrow's fastest zero-copy constructor),
        everything else through ``__arrow_c_device_array__``. ``type`` (a
        ``pyarrow.DataType``) is requested of the export, then the result is cast to it if it
        differs (a safe cast, like ``pyarrow.array(numpy_array, type=...)``); anything else
        is a TypeError.
        """
    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __len__(self) -> int: ...
    def __reduce_ex__(self, protocol: SupportsIndex, /) -> tuple[Any, ...]:
        """Pickle support (see the class docstring): ``(reconstructor, (data, metadata))``,
        the data a ``pickle.PickleBuffer`` from protocol 5, bytes before."""

class NoProtocolError(TypeError, AttributeError):
    """The object offers no array exchange protocol: no ``__dlpack__``, DLPack capsule, Arrow
    PyCapsule interface, ``__cuda_array_interface__``, buffer protocol or
    ``__array_interface__`` (a list, an int, a plain object, a capsule of another kind).

    Both a TypeError (what dlbridge documents) and an AttributeError (what the array API's
    ``from_dlpack`` names, and NumPy and PyArrow raise), so code written for either catches it.
    """

def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Tensor:
    """Import any array-like as a Tensor, zero-copy when possible.

    Tries, in order: dlbridge Tensor, a raw DLPack capsule, a NumPy array (read through NumPy's
    C API), the producer's DLPack C exchange API (e.g. torch), the Arrow PyCapsule interface
    (``__arrow_c_device_array__``, ``__arrow_c_array__``, ``__arrow_c_device_stream__``,
    ``__arrow_c_stream__``; taken before ``__dlpack__`` for objects that offer both, like pyarrow
    arrays, except pyarrow's integer and float arrays, whose own ``__dlpack__`` is faster),
    ``__dlpack__`` (versioned, legacy fallback), ``__cuda_array_interface__``, the buffer
    protocol and ``__array_interface__``. A protocol whose method raises NotImplementedError is
    passed over for the next one the object offers (BufferError naming each refusal when all
    do); any other error from the producer is raised as it is. An object that offers no
    protocol at all raises :class:`NoProtocolError`, a TypeError and an AttributeError. A torch
    tensor DLPack cannot describe (sparse, mkldnn, nested, quantized, on the meta device) is a
    BufferError naming the call that makes an exportable one. Arrow imports are read-only and keep a
    ``fixed_shape_tensor``'s ``dim_names``; nulls are a BufferError (see :func:`from_arrow`);
    bit-packed booleans and several stream chunks need a copy (several chunks on a device the host
    cannot read are a BufferError). ``device`` (anything :class:`Device` takes) asks the producer
    first, then dlbridge's own transfer. ``copy=True`` always copies, ``copy=False`` never does
    (BufferError if it must),
    ``copy=None`` copies only when needed. A dlbridge Tensor given with ``copy=True`` is always
    copied (on its device, as :meth:`Tensor.copy` copies), even one that is itself a fresh copy.
    """

@overload
def from_arrow(
    x: Any,
    /,
    *,
    fill_null: bool | int | float | None = None,
    with_validity: Literal[False] = False,
    copy: bool | None = None,
) -> Tensor: ...
@overload
def from_arrow(
    x: Any,
    /,
    *,
    fill_null: bool | int | float | None = None,
    with_validity: Literal[True],
    copy: bool | None = None,
) -> tuple[Tensor, Tensor]: ...
# the documented signature: the docs (mkdocstrings) take the docstring from here
def from_arrow(  # type: ignore[misc]
    x: Any,
    /,
    *,
    fill_null: bool | int | float | None = None,
    with_validity: bool = False,
    copy: bool | None = None,
) -> Tensor | tuple[Tensor, Tensor]:
    """Import an Arrow array, choosing what happens to its nulls (DLPack has no validity).

    ``x``: any object with the Arrow PyCapsule interface (``__arrow_c_device_array__``,
    ``__arrow_c_array__``, ``__arrow_c_stream__``: arrays, chunked arrays, streams, from
    pyarrow, nanoarrow, arro3, polars...); anything else is a :class:`NoProtocolError`, a TypeError
    (use :func:`from_dlpack`).
    The protocols are tried in that order (device variants first); one that raises
    NotImplementedError is passed over for the next, and when every one offered does, a
    BufferError names each. Without options this is :func:`from_dlpack`'s Arrow import: zero-copy
    and read-only, with
    a BufferError for nulls.

    - ``fill_null=v``: nulls become ``v`` in a fresh, writable, C-contiguous copy (``is_copied``);
      an array without nulls stays zero-copy (read-only). ``copy=False`` with nulls present is
      a BufferError. ``v`` must fit the dtype exactly: a fraction or an out-of-range integer
      for an integer dtype, a finite float that overflows a float dtype, or anything but
      ``True``/``False``/0/1 for ``bool`` is a ValueError; a non-number is a TypeError.
    - ``with_validity=True``: returns ``(values, valid)``. ``values`` is zero-copy where the
      data allows, and its entries under nulls are unspecified (whatever the producer left
      there; filled when ``fill_null`` is given too). ``valid`` is a ``bool`` tensor of
      ``values``' shape, True where the value is present (all True without nulls).

    Nulls count at every level: a null cell of a ``FixedSizeList`` or
    ``arrow.fixed_shape_tensor`` covers all the cell's elements, and nulls in the child values
    count too. Bit-packed booleans are unpacked (a copy, refused by ``copy=False``); several
    stream chunks are joined into a copy (and so are their masks). ``copy=True`` always
    returns a fresh C-contiguous copy.
    """

def copyto(dst: Tensor, src: Any) -> None:
    """Copy the elements of ``src`` (anything ``from_dlpack`` takes) into the writable tensor
    ``dst``, broadcasting like ``numpy.copyto`` (no casting: same dtype). BufferError for a
    read-only ``dst``, ValueError for a shape or dtype mismatch. As with ``numpy.copyto``, no
    other thread may read or write ``dst``'s elements during the copy: arrays have no lock."""

def to_numpy(x: Any, *, copy: bool | None = None) -> Any:
    """``dlbridge.to_numpy``: a host NumPy array with ``x``'s values. NumPy arrays (as they
    are) and host data of NumPy's builtin dtypes are built natively (an ndarray whose base is
    the dlbridge Tensor), and so is host data of bfloat16, float8 and one-per-byte float6 /
    float4 as ml_dtypes arrays when ml_dtypes is installed; everything else goes to the
    general path the dlbridge package registered (``convert(x, "numpy", device="cpu")``)."""

def _copy_decision(
    here: Any, device: Any, copy: bool | None, needs: bool, fresh: bool, why: str = ""
) -> tuple[Literal["keep", "copy", "move", "refuse transfer", "refuse copy"], str | None]:
    """dlbridge's one copy and device rule, which ``from_dlpack``, ``Tensor.to_device``,
    ``Tensor.copy`` and the planner of ``convert`` all follow, for data on ``here`` asked for
    ``device`` and ``copy``: another device is a transfer (``"move"``), a copy the consumer
    ``needs`` is made, and ``copy=True`` copies unless the data is ``fresh`` (a private copy
    already); under ``copy=False`` a transfer or needed copy is refused. With the decision
    comes, for a refusal, the message ``from_dlpack`` raises for it (``why``: what needs the
    copy), else None. ``here`` and ``device`` may be None (no device asked)."""

def _register_fallbacks(to_numpy: Any, by_library: Any) -> None:
    """Called once by the dlbridge package at import: the Python functions this module calls
    (``to_numpy``'s general path, and the copy made by the library that owns memory dlbridge
    cannot copy itself); Rust imports no module of the package by name."""

def to_shared(x: Any, /) -> Tensor:
    """``x`` (anything :func:`from_dlpack` takes) in memory other processes on this machine can
    open; ``multiprocessing`` (pools, queues, ``Process`` arguments, ``ProcessPoolExecutor``,
    ``DataLoader`` workers; fork, spawn and forkserver) then sends a handle instead of the data,
    and a receiver that writes into the tensor writes into the memory the sender sees.

    Host data is copied once into anonymous shared memory (a Linux memfd: no file in
    ``/dev/shm``, freed by the kernel when the last process using it ends, also when killed);
    the result keeps the layout (C order for non-contiguous sources), ``dim_names`` and
    read-only flag of ``x``, and ``is_copied`` is False (other processes may alias it). CUDA
    device data is shared in place through CUDA IPC: the source
    must outlive every receiver. Plain ``pickle`` of the result still writes the data. Other
    devices, and systems other than Linux, raise BufferError.
    """

def _rebuild(payload: Any, metadata: tuple[Any, ...], /) -> Tensor:
    """The reconstructor named by pickles of a Tensor."""

def _shared_handle(t: Tensor, /) -> tuple[str, Any, int, tuple[Any, ...]] | None:
    """What ``multiprocessing`` sends for a tensor made by :func:`to_shared`, or None."""

def _map_shared(fd: int, length: int, metadata: tuple[Any, ...], /) -> Tensor:
    """Map a memfd sent by :func:`_shared_handle` (duplicated; the caller closes ``fd``)."""

def _open_cuda_ipc(handle: bytes, allocation_size: int, metadata: tuple[Any, ...], /) -> Tensor:
    """Open a CUDA IPC handle sent by :func:`_shared_handle` in another process."""
