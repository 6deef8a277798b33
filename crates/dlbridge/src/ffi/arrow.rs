//! `#[repr(C)]` mirrors of the Arrow C Data, C Stream and C Device Data interfaces (`abi.h`),
//! their flag constants and their released (zero) states. Nothing here reads producer memory.

use std::ffi::{c_char, c_int, c_void};
use std::ptr;

/// `ARROW_FLAG_DICTIONARY_ORDERED`: the dictionary index order is meaningful.
pub const FLAG_DICTIONARY_ORDERED: i64 = 1;
/// `ARROW_FLAG_NULLABLE`: the field is semantically nullable.
pub const FLAG_NULLABLE: i64 = 2;
/// `ARROW_FLAG_MAP_KEYS_SORTED`: map keys are sorted within each map value.
pub const FLAG_MAP_KEYS_SORTED: i64 = 4;

/// `struct ArrowSchema` (72 bytes): the type of one field and its children.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowSchema {
    pub(crate) format: *const c_char,
    pub(crate) name: *const c_char,
    pub(crate) metadata: *const c_char,
    pub(crate) flags: i64,
    pub(crate) n_children: i64,
    pub(crate) children: *mut *mut ArrowSchema,
    pub(crate) dictionary: *mut ArrowSchema,
    pub(crate) release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    pub(crate) private_data: *mut c_void,
}

/// `struct ArrowArray` (80 bytes): the buffers of one array and its children.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowArray {
    pub(crate) length: i64,
    pub(crate) null_count: i64,
    pub(crate) offset: i64,
    pub(crate) n_buffers: i64,
    pub(crate) n_children: i64,
    pub(crate) buffers: *mut *const c_void,
    pub(crate) children: *mut *mut ArrowArray,
    pub(crate) dictionary: *mut ArrowArray,
    pub(crate) release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    pub(crate) private_data: *mut c_void,
}

/// `struct ArrowArrayStream` (40 bytes): a producer of arrays of one schema.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowArrayStream {
    pub(crate) get_schema:
        Option<unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowSchema) -> c_int>,
    pub(crate) get_next:
        Option<unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowArray) -> c_int>,
    pub(crate) get_last_error: Option<unsafe extern "C" fn(*mut ArrowArrayStream) -> *const c_char>,
    pub(crate) release: Option<unsafe extern "C" fn(*mut ArrowArrayStream)>,
    pub(crate) private_data: *mut c_void,
}

/// `struct ArrowDeviceArray` (128 bytes): an array whose buffers live on a device.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowDeviceArray {
    pub(crate) array: ArrowArray,
    pub(crate) device_id: i64,
    pub(crate) device_type: i32,
    pub(crate) sync_event: *mut c_void,
    pub(crate) reserved: [i64; 3],
}

/// `struct ArrowDeviceArrayStream` (48 bytes): a producer of device arrays of one schema.
#[repr(C)]
#[derive(Debug)]
pub struct ArrowDeviceArrayStream {
    pub(crate) device_type: i32,
    pub(crate) get_schema:
        Option<unsafe extern "C" fn(*mut ArrowDeviceArrayStream, *mut ArrowSchema) -> c_int>,
    pub(crate) get_next:
        Option<unsafe extern "C" fn(*mut ArrowDeviceArrayStream, *mut ArrowDeviceArray) -> c_int>,
    pub(crate) get_last_error:
        Option<unsafe extern "C" fn(*mut ArrowDeviceArrayStream) -> *const c_char>,
    pub(crate) release: Option<unsafe extern "C" fn(*mut ArrowDeviceArrayStream)>,
    pub(crate) private_data: *mut c_void,
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<ArrowSchema>() == 72 && align_of::<ArrowSchema>() == 8);
    assert!(offset_of!(ArrowSchema, format) == 0);
    assert!(offset_of!(ArrowSchema, name) == 8);
    assert!(offset_of!(ArrowSchema, metadata) == 16);
    assert!(offset_of!(ArrowSchema, flags) == 24);
    assert!(offset_of!(ArrowSchema, n_children) == 32);
    assert!(offset_of!(ArrowSchema, children) == 40);
    assert!(offset_of!(ArrowSchema, dictionary) == 48);
    assert!(offset_of!(ArrowSchema, release) == 56);
    assert!(offset_of!(ArrowSchema, private_data) == 64);

    assert!(size_of::<ArrowArray>() == 80 && align_of::<ArrowArray>() == 8);
    assert!(offset_of!(ArrowArray, length) == 0);
    assert!(offset_of!(ArrowArray, null_count) == 8);
    assert!(offset_of!(ArrowArray, offset) == 16);
    assert!(offset_of!(ArrowArray, n_buffers) == 24);
    assert!(offset_of!(ArrowArray, n_children) == 32);
    assert!(offset_of!(ArrowArray, buffers) == 40);
    assert!(offset_of!(ArrowArray, children) == 48);
    assert!(offset_of!(ArrowArray, dictionary) == 56);
    assert!(offset_of!(ArrowArray, release) == 64);
    assert!(offset_of!(ArrowArray, private_data) == 72);

    assert!(size_of::<ArrowArrayStream>() == 40 && align_of::<ArrowArrayStream>() == 8);
    assert!(offset_of!(ArrowArrayStream, get_schema) == 0);
    assert!(offset_of!(ArrowArrayStream, get_next) == 8);
    assert!(offset_of!(ArrowArrayStream, get_last_error) == 16);
    assert!(offset_of!(ArrowArrayStream, release) == 24);
    assert!(offset_of!(ArrowArrayStream, private_data) == 32);

    assert!(size_of::<ArrowDeviceArray>() == 128 && align_of::<ArrowDeviceArray>() == 8);
    assert!(offset_of!(ArrowDeviceArray, array) == 0);
    assert!(offset_of!(ArrowDeviceArray, device_id) == 80);
    assert!(offset_of!(ArrowDeviceArray, device_type) == 88);
    assert!(offset_of!(ArrowDeviceArray, sync_event) == 96);
    assert!(offset_of!(ArrowDeviceArray, reserved) == 104);

    assert!(size_of::<ArrowDeviceArrayStream>() == 48);
    assert!(offset_of!(ArrowDeviceArrayStream, device_type) == 0);
    assert!(offset_of!(ArrowDeviceArrayStream, get_schema) == 8);
    assert!(offset_of!(ArrowDeviceArrayStream, get_next) == 16);
    assert!(offset_of!(ArrowDeviceArrayStream, get_last_error) == 24);
    assert!(offset_of!(ArrowDeviceArrayStream, release) == 32);
    assert!(offset_of!(ArrowDeviceArrayStream, private_data) == 40);
};

impl ArrowSchema {
    /// A zero-initialised, released struct (`release == NULL`): the state of consumer storage
    /// before a producer fills it.
    pub const fn released() -> Self {
        Self {
            format: ptr::null(),
            name: ptr::null(),
            metadata: ptr::null(),
            flags: 0,
            n_children: 0,
            children: ptr::null_mut(),
            dictionary: ptr::null_mut(),
            release: None,
            private_data: ptr::null_mut(),
        }
    }
    /// True when `release` is NULL.
    pub fn is_released(&self) -> bool {
        self.release.is_none()
    }
}

impl ArrowArray {
    /// A zero-initialised, released struct.
    pub const fn released() -> Self {
        Self {
            length: 0,
            null_count: 0,
            offset: 0,
            n_buffers: 0,
            n_children: 0,
            buffers: ptr::null_mut(),
            children: ptr::null_mut(),
            dictionary: ptr::null_mut(),
            release: None,
            private_data: ptr::null_mut(),
        }
    }
    /// True when `release` is NULL.
    pub fn is_released(&self) -> bool {
        self.release.is_none()
    }
}

impl ArrowDeviceArray {
    /// A zero-initialised, released struct.
    pub const fn released() -> Self {
        Self {
            array: ArrowArray::released(),
            device_id: 0,
            device_type: 0,
            sync_event: ptr::null_mut(),
            reserved: [0; 3],
        }
    }
    /// True when `array.release` is NULL.
    pub fn is_released(&self) -> bool {
        self.array.is_released()
    }
}

impl ArrowArrayStream {
    /// A zero-initialised, released struct.
    pub const fn released() -> Self {
        Self {
            get_schema: None,
            get_next: None,
            get_last_error: None,
            release: None,
            private_data: ptr::null_mut(),
        }
    }
    /// True when `release` is NULL.
    pub fn is_released(&self) -> bool {
        self.release.is_none()
    }
}

impl ArrowDeviceArrayStream {
    /// A zero-initialised, released struct.
    pub const fn released() -> Self {
        Self {
            device_type: 0,
            get_schema: None,
            get_next: None,
            get_last_error: None,
            release: None,
            private_data: ptr::null_mut(),
        }
    }
    /// True when `release` is NULL.
    pub fn is_released(&self) -> bool {
        self.release.is_none()
    }
}
