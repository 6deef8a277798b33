//! `#[repr(C)]` mirror of `dlpack.h` version 1.3.
//!
//! Enumerations are held as integers (`i32` device types, `u8` type codes): a newer producer may
//! send values this version does not know, and turning an unknown value into a Rust `enum` would
//! be undefined behaviour.
//!
//! The managed-tensor structs keep their fields private to the crate: outside code can read them
//! through accessors but cannot build one whose `deleter` points somewhere bogus.

use std::ffi::c_void;

/// Major version of the DLPack ABI implemented here.
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// Minor version of the DLPack ABI implemented here.
pub const DLPACK_MINOR_VERSION: u32 = 3;

/// `DLPACK_FLAG_BITMASK_READ_ONLY`: the consumer must not write through the tensor.
pub const FLAG_READ_ONLY: u64 = 1 << 0;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`: the producer made a fresh copy for this export.
pub const FLAG_IS_COPIED: u64 = 1 << 1;
/// `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`: sub-byte elements are padded to one byte each.
pub const FLAG_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// `DLPackVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version: a change means the layout of `DLManagedTensorVersioned` changed.
    pub major: u32,
    /// Minor version: additions only.
    pub minor: u32,
}

/// `DLDevice`: device type (a `DLDeviceType` value) and ordinal.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    /// A `DLDeviceType` value, possibly one this version does not know.
    pub device_type: i32,
    /// The producer's device ordinal.
    pub device_id: i32,
}

/// `DLDataType`: type code, bits per lane and number of lanes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDataType {
    /// A `DLDataTypeCode` value, possibly one this version does not know.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Number of lanes (1 for scalars).
    pub lanes: u16,
}

/// `DLTensor`: a non-owning description of strided memory.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    pub(crate) data: *mut c_void,
    pub(crate) device: DLDevice,
    pub(crate) ndim: i32,
    pub(crate) dtype: DLDataType,
    pub(crate) shape: *mut i64,
    pub(crate) strides: *mut i64,
    pub(crate) byte_offset: u64,
}

/// `DLManagedTensor`, the legacy (pre-1.0) managed tensor; it carries no version and no flags.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    pub(crate) dl_tensor: DLTensor,
    pub(crate) manager_ctx: *mut c_void,
    pub(crate) deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLManagedTensorVersioned`, the managed tensor of DLPack 1.x.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    pub(crate) version: DLPackVersion,
    pub(crate) manager_ctx: *mut c_void,
    pub(crate) deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub(crate) flags: u64,
    pub(crate) dl_tensor: DLTensor,
}

// Layout checks against the C header (LP64 / LLP64, 64-bit targets).
#[cfg(target_pointer_width = "64")]
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<DLPackVersion>() == 8 && align_of::<DLPackVersion>() == 4);
    assert!(size_of::<DLDevice>() == 8 && align_of::<DLDevice>() == 4);
    assert!(size_of::<DLDataType>() == 4 && align_of::<DLDataType>() == 2);
    assert!(offset_of!(DLDataType, bits) == 1 && offset_of!(DLDataType, lanes) == 2);
    assert!(size_of::<DLTensor>() == 48 && align_of::<DLTensor>() == 8);
    assert!(offset_of!(DLTensor, device) == 8);
    assert!(offset_of!(DLTensor, ndim) == 16);
    assert!(offset_of!(DLTensor, dtype) == 20);
    assert!(offset_of!(DLTensor, shape) == 24);
    assert!(offset_of!(DLTensor, strides) == 32);
    assert!(offset_of!(DLTensor, byte_offset) == 40);
    assert!(size_of::<DLManagedTensor>() == 64);
    assert!(offset_of!(DLManagedTensor, manager_ctx) == 48);
    assert!(offset_of!(DLManagedTensor, deleter) == 56);
    assert!(size_of::<DLManagedTensorVersioned>() == 80);
    assert!(offset_of!(DLManagedTensorVersioned, manager_ctx) == 8);
    assert!(offset_of!(DLManagedTensorVersioned, deleter) == 16);
    assert!(offset_of!(DLManagedTensorVersioned, flags) == 24);
    assert!(offset_of!(DLManagedTensorVersioned, dl_tensor) == 32);
};

impl DLTensor {
    /// The data pointer as the producer gave it (may be an opaque handle on some devices).
    pub fn data(&self) -> *mut c_void {
        self.data
    }
    /// The device.
    pub fn device(&self) -> DLDevice {
        self.device
    }
    /// Number of dimensions.
    pub fn ndim(&self) -> i32 {
        self.ndim
    }
    /// The element type.
    pub fn dtype(&self) -> DLDataType {
        self.dtype
    }
    /// Bytes from `data` to the first element.
    pub fn byte_offset(&self) -> u64 {
        self.byte_offset
    }
    /// The shape pointer (`ndim` entries, or NULL when `ndim == 0`).
    pub fn shape_ptr(&self) -> *const i64 {
        self.shape
    }
}

impl DLManagedTensorVersioned {
    /// The version the producer filled in.
    pub fn version(&self) -> DLPackVersion {
        self.version
    }
    /// The flag bits (`FLAG_*`).
    pub fn flags(&self) -> u64 {
        self.flags
    }
    /// The tensor description (only meaningful when `version().major == 1`).
    pub fn dl_tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }
}

impl DLManagedTensor {
    /// The tensor description.
    pub fn dl_tensor(&self) -> &DLTensor {
        &self.dl_tensor
    }
}

/// `DLPackManagedTensorAllocator`: allocate a producer-owned tensor shaped like `prototype`.
pub type ManagedTensorAllocator = unsafe extern "C" fn(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: Option<
        unsafe extern "C" fn(*mut c_void, *const std::ffi::c_char, *const std::ffi::c_char),
    >,
) -> i32;
/// `DLPackManagedTensorFromPyObjectNoSync`: export a Python object as an owned managed tensor.
pub type ManagedTensorFromPyObject =
    unsafe extern "C" fn(py_object: *mut c_void, out: *mut *mut DLManagedTensorVersioned) -> i32;
/// `DLPackManagedTensorToPyObjectNoSync`: wrap (stealing) a managed tensor as a Python object.
pub type ManagedTensorToPyObject =
    unsafe extern "C" fn(tensor: *mut DLManagedTensorVersioned, out: *mut *mut c_void) -> i32;
/// `DLPackDLTensorFromPyObjectNoSync`: describe a Python object in a caller-provided DLTensor.
pub type DLTensorFromPyObject =
    unsafe extern "C" fn(py_object: *mut c_void, out: *mut DLTensor) -> i32;
/// `DLPackCurrentWorkStream`: the producer's current stream for a device.
pub type CurrentWorkStream =
    unsafe extern "C" fn(device_type: i32, device_id: i32, out: *mut *mut c_void) -> i32;

/// `DLPackExchangeAPIHeader`.
#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPIHeader {
    pub(crate) version: DLPackVersion,
    pub(crate) prev_api: *mut DLPackExchangeAPIHeader,
}

/// `DLPackExchangeAPI` (DLPack 1.2+, discovered through `__dlpack_c_exchange_api__` in 1.3).
#[repr(C)]
#[derive(Debug)]
pub struct DLPackExchangeAPI {
    pub(crate) header: DLPackExchangeAPIHeader,
    pub(crate) managed_tensor_allocator: Option<ManagedTensorAllocator>,
    pub(crate) managed_tensor_from_py_object_no_sync: Option<ManagedTensorFromPyObject>,
    pub(crate) managed_tensor_to_py_object_no_sync: Option<ManagedTensorToPyObject>,
    pub(crate) dltensor_from_py_object_no_sync: Option<DLTensorFromPyObject>,
    pub(crate) current_work_stream: Option<CurrentWorkStream>,
}

// SAFETY: the table is immutable function pointers and a NULL `prev_api`, shared for the
// process lifetime; nothing in it is ever written after construction.
unsafe impl Sync for DLPackExchangeAPI {}

#[cfg(target_pointer_width = "64")]
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<DLPackExchangeAPIHeader>() == 16);
    assert!(size_of::<DLPackExchangeAPI>() == 56);
    assert!(offset_of!(DLPackExchangeAPI, managed_tensor_allocator) == 16);
    assert!(offset_of!(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync) == 24);
    assert!(offset_of!(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync) == 32);
    assert!(offset_of!(DLPackExchangeAPI, dltensor_from_py_object_no_sync) == 40);
    assert!(offset_of!(DLPackExchangeAPI, current_work_stream) == 48);
};

impl DLPackExchangeAPI {
    /// A version-1.3 table with no older table behind it.
    pub const fn new(
        managed_tensor_allocator: ManagedTensorAllocator,
        managed_tensor_from_py_object_no_sync: ManagedTensorFromPyObject,
        managed_tensor_to_py_object_no_sync: ManagedTensorToPyObject,
        dltensor_from_py_object_no_sync: Option<DLTensorFromPyObject>,
        current_work_stream: CurrentWorkStream,
    ) -> Self {
        Self {
            header: DLPackExchangeAPIHeader {
                version: DLPackVersion {
                    major: DLPACK_MAJOR_VERSION,
                    minor: DLPACK_MINOR_VERSION,
                },
                prev_api: std::ptr::null_mut(),
            },
            managed_tensor_allocator: Some(managed_tensor_allocator),
            managed_tensor_from_py_object_no_sync: Some(managed_tensor_from_py_object_no_sync),
            managed_tensor_to_py_object_no_sync: Some(managed_tensor_to_py_object_no_sync),
            dltensor_from_py_object_no_sync,
            current_work_stream: Some(current_work_stream),
        }
    }

    /// The version the table was written for.
    pub fn version(&self) -> DLPackVersion {
        self.header.version
    }
}
