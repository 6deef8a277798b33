//! `#[repr(C)]` mirrors of the Arrow C Data, C Stream and C Device Data interfaces (`abi.h`),
//! owning handles that release a struct exactly once, builders for the structs dlbridge
//! produces, and the only code that reads memory an Arrow producer handed over.
//!
//! Ownership follows the spec:
//! - the base struct lives in consumer storage; everything it points to belongs to the producer;
//! - a *move* copies the struct's bytes to new storage and marks the source released
//!   (`release = NULL`) without calling it;
//! - the owner of a base struct calls its `release` exactly once; children and dictionaries are
//!   released by their parent, never by the consumer;
//! - nothing is read from a struct after its release.
//!
//! Output structs handed to a producer callback are zero-initialised (released) first, and are
//! only taken over when the callback reports success.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr;
use std::sync::Arc;

use crate::copy::HostBuffer;
use crate::device::{Device, DeviceType};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::{Owner, Tensor};

/// `ARROW_FLAG_DICTIONARY_ORDERED`: the dictionary index order is meaningful.
pub const FLAG_DICTIONARY_ORDERED: i64 = 1;
/// `ARROW_FLAG_NULLABLE`: the field is semantically nullable.
pub const FLAG_NULLABLE: i64 = 2;
/// `ARROW_FLAG_MAP_KEYS_SORTED`: map keys are sorted within each map value.
pub const FLAG_MAP_KEYS_SORTED: i64 = 4;

/// `EINVAL`, the error code dlbridge's stream callbacks return for bad input.
const EINVAL: c_int = 22;
/// `EIO`, the generic error code of dlbridge's stream callbacks.
const EIO: c_int = 5;

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

fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidLayout(msg.into())
}

fn released_error(what: &str) -> Error {
    invalid(format!(
        "the {what} is already released (consumed); ask the producer for a new one"
    ))
}

// ------------------------------------------------------------------------------------------
// Owning handles
// ------------------------------------------------------------------------------------------

mod sealed {
    /// Keeps [`ArrowStruct`](super::ArrowStruct) implemented by this module's structs only.
    pub trait Sealed {}
}

/// A base struct an [`Owned`] handle can hold: where its `release` callback sits and what it
/// is called on. Sealed: implemented by this module's C structs only.
pub trait ArrowStruct: sealed::Sealed {
    /// The C name, for error messages.
    const NAME: &'static str;
    /// The struct `release` is called on: `Self`, or the `ArrowArray` a device array embeds.
    type Base;
    /// The struct `release` is called on.
    fn base(&mut self) -> &mut Self::Base;
    /// The `release` callback; NULL marks the struct released.
    fn release_slot(&mut self) -> &mut Option<unsafe extern "C" fn(*mut Self::Base)>;
}

/// Implements [`ArrowStruct`] for structs that carry their own `release` callback.
macro_rules! self_releasing {
    ($($ty:ident),*) => {$(
        impl sealed::Sealed for $ty {}
        impl ArrowStruct for $ty {
            const NAME: &'static str = stringify!($ty);
            type Base = Self;
            fn base(&mut self) -> &mut Self {
                self
            }
            fn release_slot(&mut self) -> &mut Option<unsafe extern "C" fn(*mut Self)> {
                &mut self.release
            }
        }
    )*};
}

self_releasing!(
    ArrowSchema,
    ArrowArray,
    ArrowArrayStream,
    ArrowDeviceArrayStream
);

impl sealed::Sealed for ArrowDeviceArray {}
impl ArrowStruct for ArrowDeviceArray {
    const NAME: &'static str = "ArrowDeviceArray";
    type Base = ArrowArray;
    fn base(&mut self) -> &mut ArrowArray {
        &mut self.array
    }
    fn release_slot(&mut self) -> &mut Option<unsafe extern "C" fn(*mut ArrowArray)> {
        &mut self.array.release
    }
}

/// A base struct this handle owns, in a box of its own: dropping the handle calls the
/// producer's `release` once (unless the struct was moved on).
#[derive(Debug)]
pub struct Owned<T: ArrowStruct>(Box<T>);

/// An `ArrowSchema` this handle owns: dropping it calls the producer's `release` once.
pub type OwnedSchema = Owned<ArrowSchema>;

/// An array this handle owns, with its device (kept as an `ArrowDeviceArray`; a CPU array
/// gets device CPU, id -1): dropping it calls the producer's `release` once.
pub type OwnedArray = Owned<ArrowDeviceArray>;

/// An `ArrowArrayStream` this handle owns: dropping it calls `release` once.
pub type OwnedStream = Owned<ArrowArrayStream>;

/// An `ArrowDeviceArrayStream` this handle owns: dropping it calls `release` once.
pub type OwnedDeviceStream = Owned<ArrowDeviceArrayStream>;

// SAFETY: a schema is immutable description data; the C Data Interface ties neither reading
// nor `release` to a thread (pyarrow, nanoarrow and arro3 take the GIL themselves where their
// private data needs it), and shared access never writes.
unsafe impl Send for OwnedSchema {}
// SAFETY: see above.
unsafe impl Sync for OwnedSchema {}

// SAFETY: as for OwnedSchema: the buffers are immutable while shared (rule R8), and release is
// not tied to a thread. The sync event is only read.
unsafe impl Send for OwnedArray {}
// SAFETY: see above.
unsafe impl Sync for OwnedArray {}

// SAFETY: streams are not thread-safe, but the handle needs `&mut self` for every callback, so
// calls are serialised; the stream may be moved to and released on another thread.
unsafe impl Send for OwnedStream {}
// SAFETY: as for OwnedStream.
unsafe impl Send for OwnedDeviceStream {}

/// Move the struct out of `src` (bitwise copy, then `src`'s release slot set to NULL without
/// calling it). The result is the only live copy: the caller must release it or move it on.
///
/// # Safety
/// `src` must be NULL or point to a writable `T` that is either released or valid (per the C
/// Data Interface) and that the caller may move.
unsafe fn move_out<T: ArrowStruct>(src: *mut T) -> Result<T> {
    // SAFETY: `src` is NULL or a valid, writable struct (caller's contract).
    let Some(src) = (unsafe { src.as_mut() }) else {
        return Err(invalid(format!("the {} pointer is NULL", T::NAME)));
    };
    if src.release_slot().is_none() {
        return Err(released_error(T::NAME));
    }
    // SAFETY: `src` is a live struct; a move is a bitwise copy followed by marking the source
    // released, so exactly one copy stays live.
    let moved = unsafe { ptr::read(src) };
    *src.release_slot() = None;
    Ok(moved)
}

impl<T: ArrowStruct> Owned<T> {
    /// Move the struct out of `src` into a box (see [`move_out`]).
    ///
    /// # Safety
    /// As for [`move_out`].
    unsafe fn move_from(src: *mut T) -> Result<Self> {
        // SAFETY: the caller's contract is `move_out`'s.
        Ok(Self(Box::new(unsafe { move_out(src) }?)))
    }

    /// Give up ownership without releasing: the box that holds the live struct.
    fn into_box(self) -> Box<T> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the box is read out exactly once.
        unsafe { ptr::read(&this.0) }
    }

    /// Give up ownership without releasing: the live struct itself (a bitwise move).
    fn into_inner(self) -> T {
        *self.into_box()
    }

    /// Give up the box without releasing (the struct stays live at the returned address).
    fn into_raw_box(self) -> *mut T {
        Box::into_raw(self.into_box())
    }
}

impl<T: ArrowStruct<Base = T>> Owned<T> {
    /// Move the struct out of `src` (bitwise copy, then `src.release = NULL`).
    ///
    /// # Safety
    /// `src` must be NULL or point to a writable struct that is either released or valid (per
    /// the C Data Interface) and that the caller may move.
    pub unsafe fn take(src: *mut T) -> Result<Self> {
        // SAFETY: the caller's contract is `move_from`'s.
        unsafe { Self::move_from(src) }
    }

    /// Move the struct into consumer storage `out` (bitwise), giving up ownership.
    ///
    /// # Safety
    /// `out` must be valid for writes and must not hold a live struct (it is overwritten).
    pub unsafe fn move_into(self, out: *mut T) {
        // SAFETY: `out` is writable (caller's contract) and receives the only live copy: the
        // handle gives the struct up without releasing it.
        unsafe { ptr::write(out, self.into_inner()) };
    }
}

impl<T: ArrowStruct> Drop for Owned<T> {
    fn drop(&mut self) {
        if let Some(release) = *self.0.release_slot() {
            // SAFETY: we own a live struct and call its release exactly once (the producer sets
            // `release` to NULL); neither the struct nor any callback is used again.
            unsafe { release(self.0.base()) };
        }
    }
}

impl Owned<ArrowSchema> {
    /// Read access to the fields.
    pub fn view(&self) -> SchemaView<'_> {
        SchemaView(&self.0)
    }
}

impl Owned<ArrowDeviceArray> {
    /// Move a CPU array out of `src`.
    ///
    /// # Safety
    /// As for [`OwnedSchema::take`], for an `ArrowArray` whose buffers are CPU memory.
    pub unsafe fn take(src: *mut ArrowArray) -> Result<Self> {
        // SAFETY: caller's contract (move_out's). The array goes straight into the device
        // struct, a valid move: its release callback does not depend on its address (rule R5).
        let array = unsafe { move_out(src) }?;
        Ok(Self::on_device(array, DeviceType::CPU.0, -1))
    }

    /// Move a device array out of `src` (all 128 bytes; the source's `array.release` becomes
    /// NULL). The sync event stays owned by the array and lives until its release.
    ///
    /// # Safety
    /// As for [`OwnedSchema::take`], for an `ArrowDeviceArray`.
    pub unsafe fn take_device(src: *mut ArrowDeviceArray) -> Result<Self> {
        // SAFETY: the caller's contract is `move_from`'s.
        unsafe { Self::move_from(src) }
    }

    /// Take over a live plain array (moved out of its owner) whose buffers live on device
    /// `device_type`/`device_id` (Arrow's numbering), without a sync event. The release
    /// callback does not depend on the struct's address (rule R5), so moving the array into
    /// the device struct is a valid move.
    fn on_device(array: ArrowArray, device_type: i32, device_id: i64) -> Self {
        Owned(Box::new(ArrowDeviceArray {
            array,
            device_id,
            device_type,
            sync_event: ptr::null_mut(),
            reserved: [0; 3],
        }))
    }

    /// Move into consumer storage for a plain `ArrowArray`. Refused for non-CPU memory (the
    /// CPU interface must yield CPU-accessible pointers).
    ///
    /// # Safety
    /// `out` must be valid for writes and hold no live array.
    pub unsafe fn move_into(self, out: *mut ArrowArray) -> Result<()> {
        let device = self.device()?;
        if !device.is_host_accessible() {
            return Err(Error::NotHostAccessible { device });
        }
        // SAFETY: `out` is writable (caller's contract) and receives the only live copy of the
        // array (rule R5: its release does not depend on its address).
        unsafe { ptr::write(out, self.into_inner().array) };
        Ok(())
    }

    /// Move into consumer storage for an `ArrowDeviceArray` (reserved bytes zeroed).
    ///
    /// # Safety
    /// `out` must be valid for writes and hold no live array.
    pub unsafe fn move_into_device(self, out: *mut ArrowDeviceArray) {
        let mut moved = self.into_inner();
        moved.reserved = [0; 3];
        // SAFETY: `out` is writable (caller's contract) and receives the only live copy.
        unsafe { ptr::write(out, moved) };
    }

    /// The device of the buffers. Arrow's CPU id -1 (and -1 for any device type without an
    /// intrinsic id) becomes DLPack's 0.
    pub fn device(&self) -> Result<Device> {
        let (device_type, device_id) = (self.0.device_type, self.0.device_id);
        let id = match device_id {
            -1 => 0,
            id => i32::try_from(id)
                .ok()
                .filter(|i| *i >= 0)
                .ok_or_else(|| invalid(format!("invalid Arrow device_id {id}")))?,
        };
        if device_type <= 0 {
            return Err(invalid(format!("invalid Arrow device_type {device_type}")));
        }
        Ok(Device::new(DeviceType(device_type), id))
    }

    /// The producer's sync event (a pointer to a device event handle, e.g. `cudaEvent_t*`), or
    /// NULL. A consumer must wait on it before touching the buffers.
    pub fn sync_event(&self) -> *mut c_void {
        self.0.sync_event
    }

    /// Number of items.
    pub fn length(&self) -> i64 {
        self.0.array.length
    }
}

/// An array together with the schema that describes it; the unit every typed read uses.
#[derive(Debug)]
pub struct ArrowData {
    schema: Arc<OwnedSchema>,
    array: OwnedArray,
}

impl ArrowData {
    /// Pair an array with its schema.
    ///
    /// # Safety
    /// `schema` must describe `array` (the producer exported them together, or the array is
    /// a chunk of a stream whose schema this is): typed reads trust the buffer sizes the
    /// schema's formats imply.
    pub unsafe fn new(schema: Arc<OwnedSchema>, array: OwnedArray) -> Self {
        Self { schema, array }
    }

    /// The schema.
    pub fn schema(&self) -> &OwnedSchema {
        &self.schema
    }

    /// The array.
    pub fn array(&self) -> &OwnedArray {
        &self.array
    }

    /// Split into the schema and the array.
    pub fn into_parts(self) -> (Arc<OwnedSchema>, OwnedArray) {
        (self.schema, self.array)
    }

    /// The top-level field and array.
    pub fn root(&self) -> Result<Node<'_>> {
        Ok(Node {
            schema: self.schema.view(),
            array: &self.array.0.array,
            device: self.array.device()?,
        })
    }
}

impl AsRef<ArrowData> for ArrowData {
    fn as_ref(&self) -> &ArrowData {
        self
    }
}

impl Owned<ArrowArrayStream> {
    /// The schema of every chunk (`get_schema`).
    pub fn schema(&mut self) -> Result<OwnedSchema> {
        let get_schema = self
            .0
            .get_schema
            .ok_or_else(|| invalid("the stream has no get_schema callback"))?;
        let mut out = ArrowSchema::released();
        // SAFETY: the stream is live (we own it and have not released it); `out` is
        // zero-initialised consumer storage.
        let rc = unsafe { get_schema(&mut *self.0, &mut out) };
        if rc != 0 {
            // On failure `out` is not ours: it is dropped without calling anything in it.
            return Err(self.failure("get_schema", rc));
        }
        // SAFETY: on success `out` is a valid schema we may move.
        unsafe { OwnedSchema::take(&mut out) }
    }

    /// The next chunk, or `None` at the end of the stream (`get_next`).
    pub fn next_array(&mut self) -> Result<Option<OwnedArray>> {
        let get_next = self
            .0
            .get_next
            .ok_or_else(|| invalid("the stream has no get_next callback"))?;
        let mut out = ArrowArray::released();
        // SAFETY: as in `schema`.
        let rc = unsafe { get_next(&mut *self.0, &mut out) };
        if rc != 0 {
            return Err(self.failure("get_next", rc));
        }
        if out.is_released() {
            return Ok(None);
        }
        // SAFETY: on success a non-released `out` is a valid array we may move.
        unsafe { OwnedArray::take(&mut out) }.map(Some)
    }

    /// The error of the callback that just failed (see [`stream_failure`]).
    fn failure(&mut self, what: &str, rc: c_int) -> Error {
        let get_last_error = self.0.get_last_error;
        stream_failure(&mut *self.0, get_last_error, what, rc)
    }
}

impl Owned<ArrowDeviceArrayStream> {
    /// The device type every chunk is on (Arrow's numbering, the same as DLPack's).
    pub fn device_type(&self) -> DeviceType {
        DeviceType(self.0.device_type)
    }

    /// The schema of every chunk (`get_schema`).
    pub fn schema(&mut self) -> Result<OwnedSchema> {
        let get_schema = self
            .0
            .get_schema
            .ok_or_else(|| invalid("the device stream has no get_schema callback"))?;
        let mut out = ArrowSchema::released();
        // SAFETY: the stream is live (we own it and have not released it); `out` is
        // zero-initialised consumer storage.
        let rc = unsafe { get_schema(&mut *self.0, &mut out) };
        if rc != 0 {
            // On failure `out` is not ours: it is dropped without calling anything in it.
            let get_last_error = self.0.get_last_error;
            return Err(stream_failure(
                &mut *self.0,
                get_last_error,
                "get_schema",
                rc,
            ));
        }
        // SAFETY: on success `out` is a valid schema we may move.
        unsafe { OwnedSchema::take(&mut out) }
    }

    /// The next chunk, or `None` at the end of the stream (`get_next`).
    pub fn next_array(&mut self) -> Result<Option<OwnedArray>> {
        let get_next = self
            .0
            .get_next
            .ok_or_else(|| invalid("the device stream has no get_next callback"))?;
        let mut out = ArrowDeviceArray::released();
        // SAFETY: as in `schema`.
        let rc = unsafe { get_next(&mut *self.0, &mut out) };
        if rc != 0 {
            let get_last_error = self.0.get_last_error;
            return Err(stream_failure(&mut *self.0, get_last_error, "get_next", rc));
        }
        if out.is_released() {
            return Ok(None);
        }
        // SAFETY: on success a non-released `out` is a valid device array we may move.
        unsafe { OwnedArray::take_device(&mut out) }.map(Some)
    }
}

/// The error of a stream callback that just failed, with the producer's message copied out
/// (its string is only valid until the next call).
fn stream_failure<S>(
    stream: *mut S,
    get_last_error: Option<unsafe extern "C" fn(*mut S) -> *const c_char>,
    what: &str,
    rc: c_int,
) -> Error {
    let detail = get_last_error.and_then(|get_last_error| {
        // SAFETY: the stream is live and the previous call failed, which is when
        // get_last_error may be called; the string is copied before any other call.
        let msg = unsafe { get_last_error(stream) };
        if msg.is_null() {
            None
        } else {
            // SAFETY: a non-NULL result is a NUL-terminated string valid until the next
            // call on the stream.
            Some(
                unsafe { CStr::from_ptr(msg) }
                    .to_string_lossy()
                    .into_owned(),
            )
        }
    });
    invalid(format!(
        "the Arrow stream's {what} failed with error code {rc}{}",
        detail.map(|d| format!(": {d}")).unwrap_or_default()
    ))
}

// ------------------------------------------------------------------------------------------
// Reading schemas and arrays
// ------------------------------------------------------------------------------------------

/// Read access to a live schema's fields (valid while its owner is unreleased).
#[derive(Clone, Copy, Debug)]
pub struct SchemaView<'a>(&'a ArrowSchema);

/// Largest metadata blob dlbridge reads (a sanity bound against garbage lengths).
const MAX_METADATA_BYTES: usize = 1 << 30;

impl<'a> SchemaView<'a> {
    /// Borrow a schema that someone else owns (e.g. a `requested_schema` capsule).
    ///
    /// # Safety
    /// `ptr` must be NULL or point to an `ArrowSchema` that stays valid and unreleased for
    /// `'a`.
    pub unsafe fn borrow(ptr: *const ArrowSchema) -> Result<Self> {
        // SAFETY: caller's contract.
        match unsafe { ptr.as_ref() } {
            None => Err(invalid("the ArrowSchema pointer is NULL")),
            Some(s) if s.is_released() => Err(released_error("ArrowSchema")),
            Some(s) => Ok(Self(s)),
        }
    }

    /// The format string.
    pub fn format(self) -> Result<&'a str> {
        if self.0.format.is_null() {
            return Err(invalid("the ArrowSchema's format is NULL"));
        }
        // SAFETY: a valid schema's format is a NUL-terminated string that lives as long as the
        // schema.
        let format = unsafe { CStr::from_ptr(self.0.format) };
        format
            .to_str()
            .map_err(|_| invalid("the ArrowSchema's format is not UTF-8"))
    }

    /// The field name, if any (and valid UTF-8).
    pub fn name(self) -> Option<&'a str> {
        if self.0.name.is_null() {
            return None;
        }
        // SAFETY: as for `format`.
        unsafe { CStr::from_ptr(self.0.name) }.to_str().ok()
    }

    /// The flags (`FLAG_*`).
    pub fn flags(self) -> i64 {
        self.0.flags
    }

    /// True for a dictionary-encoded field.
    pub fn has_dictionary(self) -> bool {
        !self.0.dictionary.is_null()
    }

    /// The metadata as (key, value) byte pairs, in order (empty when absent).
    pub fn metadata(self) -> Result<Vec<(&'a [u8], &'a [u8])>> {
        let mut pairs = vec![];
        self.each_metadata(|key, value| pairs.push((key, value)))?;
        Ok(pairs)
    }

    /// The value of metadata `key`, if present (the first one). The whole blob is checked, as
    /// [`SchemaView::metadata`] does, but nothing is allocated.
    pub fn metadata_value(self, key: &str) -> Result<Option<&'a [u8]>> {
        let mut found = None;
        self.each_metadata(|k, value| {
            if found.is_none() && k == key.as_bytes() {
                found = Some(value);
            }
        })?;
        Ok(found)
    }

    /// Call `visit` on each (key, value) pair of the metadata, in order; an error for a
    /// malformed blob (after visiting the pairs before the fault).
    fn each_metadata(self, mut visit: impl FnMut(&'a [u8], &'a [u8])) -> Result<()> {
        let base = self.0.metadata.cast::<u8>();
        if base.is_null() {
            return Ok(());
        }
        let bad = || invalid("the ArrowSchema's metadata is malformed");
        let mut pos = 0usize;
        // Reads a native-endian int32 length at `pos`.
        let read_len = |pos: &mut usize| -> Result<usize> {
            // SAFETY: a valid metadata blob holds an int32 at every position the encoding
            // announces; the read is unaligned-safe.
            let n = unsafe { ptr::read_unaligned(base.add(*pos).cast::<i32>()) };
            *pos += 4;
            usize::try_from(n)
                .ok()
                .filter(|n| *pos + n <= MAX_METADATA_BYTES)
                .ok_or_else(bad)
        };
        let count = read_len(&mut pos)?;
        for _ in 0..count {
            let mut bytes = [&[][..], &[][..]];
            for item in &mut bytes {
                let len = read_len(&mut pos)?;
                // SAFETY: the encoding announced `len` bytes at `pos`, within the blob, which
                // lives as long as the schema.
                *item = unsafe { std::slice::from_raw_parts(base.add(pos), len) };
                pos += len;
            }
            visit(bytes[0], bytes[1]);
        }
        Ok(())
    }

    /// The child fields.
    pub fn children(self) -> Result<Vec<SchemaView<'a>>> {
        let ptrs = self.child_pointers()?;
        ptrs.iter()
            .map(|&child| {
                // SAFETY: each pointer is NULL or a child schema that lives as long as the
                // parent (children are released by the parent only).
                unsafe { SchemaView::borrow(child) }
            })
            .collect()
    }

    /// The only child field when there is exactly one (what [`SchemaView::children`] would
    /// return alone, with the same errors), `None` for any other count; nothing is allocated.
    pub fn single_child(self) -> Result<Option<SchemaView<'a>>> {
        match self.child_pointers()? {
            // SAFETY: as in `children`.
            [child] => unsafe { SchemaView::borrow(*child) }.map(Some),
            _ => Ok(None),
        }
    }

    /// The `n_children` child pointers (checked count; a NULL array only when there are none).
    fn child_pointers(self) -> Result<&'a [*mut ArrowSchema]> {
        let n = checked_count(self.0.n_children, "n_children")?;
        if n == 0 {
            return Ok(&[]);
        }
        if self.0.children.is_null() {
            return Err(invalid(
                "the ArrowSchema has children but a NULL children array",
            ));
        }
        // SAFETY: a valid schema has `n_children` child pointers, live as long as the parent.
        Ok(unsafe { std::slice::from_raw_parts(self.0.children, n) })
    }
}

fn checked_count(n: i64, what: &str) -> Result<usize> {
    usize::try_from(n)
        .ok()
        .filter(|n| *n <= 1 << 20)
        .ok_or_else(|| invalid(format!("invalid {what} {n}")))
}

/// Bits per value of the fixed-width formats dlbridge reads (`b` is the bit-packed boolean).
pub fn fixed_width_bits(format: &str) -> Option<u32> {
    Some(match format {
        "b" => 1,
        "c" | "C" => 8,
        "s" | "S" | "e" => 16,
        "i" | "I" | "f" => 32,
        "l" | "L" | "g" => 64,
        _ => return None,
    })
}

/// One level of a schema/array pair: a field and the array it describes.
#[derive(Clone, Copy, Debug)]
pub struct Node<'a> {
    schema: SchemaView<'a>,
    array: &'a ArrowArray,
    device: Device,
}

impl<'a> Node<'a> {
    /// The field.
    pub fn schema(self) -> SchemaView<'a> {
        self.schema
    }
    /// Number of items.
    pub fn length(self) -> i64 {
        self.array.length
    }
    /// Items skipped at the start of the buffers.
    pub fn offset(self) -> i64 {
        self.array.offset
    }
    /// Nulls as reported by the producer (-1 = not computed).
    pub fn null_count(self) -> i64 {
        self.array.null_count
    }
    /// Where the buffers live.
    pub fn device(self) -> Device {
        self.device
    }
    /// True for a dictionary-encoded array.
    pub fn has_dictionary(self) -> bool {
        !self.array.dictionary.is_null()
    }

    /// Length and offset, checked to be non-negative and to fit together.
    fn extent(self) -> Result<(i64, i64)> {
        let (length, offset) = (self.array.length, self.array.offset);
        if length < 0 || offset < 0 || length.checked_add(offset).is_none() {
            return Err(invalid(format!(
                "invalid ArrowArray length {length} / offset {offset}"
            )));
        }
        Ok((length, offset))
    }

    /// The child levels (schema and array children paired; counts must agree).
    pub fn children(self) -> Result<Vec<Node<'a>>> {
        let schemas = self.schema.children()?;
        let n = checked_count(self.array.n_children, "n_children")?;
        if n != schemas.len() {
            return Err(invalid(format!(
                "the ArrowArray has {n} children but its schema has {}",
                schemas.len()
            )));
        }
        self.child_arrays(n)?
            .iter()
            .zip(schemas)
            .map(|(&child, schema)| self.child(schema, child))
            .collect()
    }

    /// The only child level when the schema and the array each have exactly one child (what
    /// [`Node::children`] would return alone, with the same errors), `None` when either count
    /// is another one (ask [`Node::children`] for the error); nothing is allocated.
    pub fn single_child(self) -> Result<Option<Node<'a>>> {
        let Some(schema) = self.schema.single_child()? else {
            return Ok(None);
        };
        if self.array.n_children != 1 {
            return Ok(None);
        }
        self.child(schema, self.child_arrays(1)?[0]).map(Some)
    }

    /// The array's `n` child pointers (`n` being its checked `n_children`).
    fn child_arrays(self, n: usize) -> Result<&'a [*mut ArrowArray]> {
        if n == 0 {
            return Ok(&[]);
        }
        if self.array.children.is_null() {
            return Err(invalid(
                "the ArrowArray has children but a NULL children array",
            ));
        }
        // SAFETY: a valid array has `n_children` child pointers, live as long as the parent.
        Ok(unsafe { std::slice::from_raw_parts(self.array.children, n) })
    }

    /// The level of child array `child` (one of [`Node::child_arrays`]) under field `schema`.
    fn child(self, schema: SchemaView<'a>, child: *mut ArrowArray) -> Result<Node<'a>> {
        // SAFETY: each child pointer is NULL or a child array that lives as long as the parent.
        match unsafe { child.as_ref() } {
            None => Err(invalid("NULL child ArrowArray")),
            Some(array) => Ok(Node {
                schema,
                array,
                device: self.device,
            }),
        }
    }

    /// Buffer `index`, after checking that the array has exactly `expected` buffers.
    fn buffer(self, index: usize, expected: usize) -> Result<*const c_void> {
        let n = checked_count(self.array.n_buffers, "n_buffers")?;
        if n != expected {
            return Err(invalid(format!(
                "the ArrowArray has {n} buffers where its format {:?} needs {expected}",
                self.schema.format().unwrap_or("?")
            )));
        }
        if self.array.buffers.is_null() {
            return Err(invalid("the ArrowArray's buffers array is NULL"));
        }
        // SAFETY: a valid array has `n_buffers` buffer pointers and `index < n_buffers`.
        Ok(unsafe { *self.array.buffers.add(index) })
    }

    /// The number of null items among logical items `[start, start + count)`.
    ///
    /// Reads the validity bitmap (buffer 0, which every layout dlbridge reads has) only when
    /// the producer's `null_count` does not already answer; a bitmap on a device the CPU cannot
    /// read is an error unless the count is known. `n_buffers` is the number of buffers the
    /// field's layout has (1 for a fixed-size list, 2 for a primitive array); a mismatch is an
    /// error.
    pub fn count_nulls(self, start: i64, count: i64, n_buffers: usize) -> Result<i64> {
        let length = self.check_range(start, count)?;
        let null_count = self.array.null_count;
        if null_count == 0 || count == 0 {
            return Ok(0);
        }
        if null_count > 0 && start == 0 && count == length {
            return Ok(null_count);
        }
        let Some((bits, first)) = self.validity(start, n_buffers)? else {
            return Ok(0);
        };
        let valid = (first..first + count as usize)
            .filter(|&j| bits[j / 8] >> (j % 8) & 1 == 1)
            .count();
        Ok(count - valid as i64)
    }

    /// The positions (relative to `start`) of the null items among logical items
    /// `[start, start + count)`, read from the validity bitmap (see [`Node::count_nulls`]).
    pub fn null_positions(self, start: i64, count: i64, n_buffers: usize) -> Result<Vec<usize>> {
        self.check_range(start, count)?;
        if self.array.null_count == 0 || count == 0 {
            return Ok(vec![]);
        }
        let Some((bits, first)) = self.validity(start, n_buffers)? else {
            return Ok(vec![]);
        };
        Ok((0..count as usize)
            .filter(|&k| bits[(first + k) / 8] >> ((first + k) % 8) & 1 == 0)
            .collect())
    }

    /// Checks that items `[start, start + count)` lie in the array; returns its length.
    fn check_range(self, start: i64, count: i64) -> Result<i64> {
        let (length, _) = self.extent()?;
        if start < 0 || count < 0 || start.checked_add(count).is_none_or(|end| end > length) {
            return Err(invalid(format!(
                "items {start}..{start}+{count} are outside the array of length {length}"
            )));
        }
        Ok(length)
    }

    /// The validity bitmap (`None` when absent) and the bit of logical item `start`.
    fn validity(self, start: i64, n_buffers: usize) -> Result<Option<(&'a [u8], usize)>> {
        let (length, offset) = self.extent()?;
        let validity = self.buffer(0, n_buffers)?;
        if validity.is_null() {
            return Ok(None);
        }
        if !self.device.is_host_accessible() {
            return Err(invalid(format!(
                "cannot check for nulls: the validity bitmap is on {} and the producer did not report a null_count of 0",
                self.device
            )));
        }
        let total_bits = (offset + length) as usize;
        // SAFETY: buffer 0 of these layouts is a validity bitmap covering `offset + length`
        // bits, in host-readable memory that lives as long as the array.
        let bits =
            unsafe { std::slice::from_raw_parts(validity.cast::<u8>(), total_bits.div_ceil(8)) };
        Ok(Some((bits, (offset + start) as usize)))
    }

    /// A zero-copy, read-only tensor over the values buffer (buffer 1) of a fixed-width leaf.
    ///
    /// `start` is the physical index (counted from the start of the buffer, so including the
    /// array's `offset`) of the tensor's first element; every element `layout` reaches must be
    /// an item of the buffer.
    ///
    /// # Safety
    /// `owner` must keep the array this node belongs to alive (for example, hold the `Arc` of
    /// its [`ArrowData`]): the tensor points into the array's buffers and outlives this borrow.
    pub unsafe fn values_tensor(
        self,
        start: i64,
        layout: Layout,
        dtype: DType,
        owner: Owner,
    ) -> Result<Tensor> {
        let format = self.schema.format()?;
        let bits = fixed_width_bits(format)
            .filter(|b| *b >= 8 && dtype.lanes() == 1 && u32::from(dtype.bits()) == *b)
            .ok_or_else(|| {
                invalid(format!(
                    "format {format:?} does not hold {dtype} values in place"
                ))
            })?;
        self.reached_items(start, &layout)?;
        let data = self.buffer(1, 2)?;
        if data.is_null() && layout.size() > 0 {
            return Err(invalid("the values buffer is NULL for a non-empty array"));
        }
        let itemsize = u64::from(bits / 8);
        // `start >= 0`: reached_items checked `start + min_offset >= 0` and `min_offset <= 0`.
        let byte_offset = if layout.size() == 0 {
            0
        } else {
            start as u64 * itemsize
        };
        // The producer guarantees buffer 1 of this fixed-width array holds `offset + length`
        // items of `bits` bits (its schema describes it: ArrowData::new), alive until release,
        // which `owner` delays (this function's contract). Arrow data is immutable: read-only.
        // SAFETY: `reached_items` checked every element the layout reaches is one of those items.
        unsafe {
            Tensor::from_raw_parts(
                data.cast_mut(),
                byte_offset,
                self.device,
                dtype,
                layout,
                true,
                false,
                owner,
            )
        }
    }

    /// A writable copy of bit-packed booleans (format `b`), one byte (0 or 1) per element, laid
    /// out by `layout` from physical bit `start` (see [`Node::values_tensor`]).
    pub fn unpack_bools(self, start: i64, layout: Layout) -> Result<Tensor> {
        let format = self.schema.format()?;
        if format != "b" {
            return Err(invalid(format!(
                "format {format:?} is not bit-packed boolean"
            )));
        }
        if !self.device.is_host_accessible() {
            return Err(Error::NotHostAccessible {
                device: self.device,
            });
        }
        let (first, last) = self.reached_items(start, &layout)?;
        let span = if layout.size() == 0 {
            0
        } else {
            (last - first + 1) as usize
        };
        // The bitmap is checked before anything is allocated for the unpacked bytes.
        let data = if span > 0 {
            self.buffer(1, 2)?
        } else {
            std::ptr::null()
        };
        if span > 0 && data.is_null() {
            return Err(invalid("the values buffer is NULL for a non-empty array"));
        }
        let mut out = HostBuffer::new(span)?;
        if span > 0 {
            let (length, offset) = self.extent()?;
            let total_bits = (offset + length) as usize;
            // SAFETY: buffer 1 of a boolean array is a bitmap of `offset + length` bits in
            // host-readable memory, alive while the array is (the caller holds it).
            let bits =
                unsafe { std::slice::from_raw_parts(data.cast::<u8>(), total_bits.div_ceil(8)) };
            for (k, byte) in out.as_mut_slice().iter_mut().enumerate() {
                let j = first as usize + k;
                *byte = bits[j / 8] >> (j % 8) & 1;
            }
        }
        // Element 0 sits `-min_offset` elements after the first reached one (byte 0).
        host_tensor(out, (-layout.min_offset()) as u64, DType::BOOL, layout)
    }

    /// The first and last physical item `layout` reaches from `start`, checked to lie in
    /// `0..offset + length`.
    fn reached_items(self, start: i64, layout: &Layout) -> Result<(i64, i64)> {
        let (length, offset) = self.extent()?;
        if layout.size() == 0 {
            return Ok((0, -1));
        }
        let first = start.checked_add(layout.min_offset());
        let last = start.checked_add(layout.max_offset());
        match (first, last) {
            (Some(first), Some(last)) if first >= 0 && last < offset + length => Ok((first, last)),
            _ => Err(invalid(format!(
                "the tensor would reach items outside the Arrow buffer of {} items",
                offset + length
            ))),
        }
    }
}

/// A writable host tensor that owns `buffer`, its element 0 at `byte_offset`; refused unless
/// every element `layout` reaches lies inside the buffer.
pub fn host_tensor(
    mut buffer: HostBuffer,
    byte_offset: u64,
    dtype: DType,
    layout: Layout,
) -> Result<Tensor> {
    let itemsize = dtype.itemsize() as i128;
    let len = buffer.as_slice().len() as i128;
    let first = i128::from(byte_offset);
    let fits = layout.size() == 0
        || first + i128::from(layout.min_offset()) * itemsize >= 0
            && first + (i128::from(layout.max_offset()) + 1) * itemsize <= len;
    if !fits || dtype.is_subbyte() {
        return Err(invalid(format!(
            "a layout of shape {:?} does not fit a buffer of {len} bytes",
            layout.shape()
        )));
    }
    let data = buffer.as_mut_slice().as_mut_ptr();
    // SAFETY: checked above: every element the layout reaches from `data + byte_offset` lies in
    // `buffer`, which the owner passed along keeps alive; the memory is writable and aliased by
    // nothing else.
    unsafe {
        Tensor::from_raw_parts(
            data.cast(),
            byte_offset,
            Device::CPU,
            dtype,
            layout,
            false,
            true,
            Arc::new(buffer),
        )
    }
}

// ------------------------------------------------------------------------------------------
// Producing schemas, arrays and streams
// ------------------------------------------------------------------------------------------

/// A field to export: format, name, metadata (encoded per the spec), flags and children.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaSpec {
    /// The format string.
    pub format: String,
    /// The field name.
    pub name: String,
    /// Key/value metadata in order (empty = `metadata` NULL).
    pub metadata: Vec<(String, String)>,
    /// `FLAG_*` bits.
    pub flags: i64,
    /// Child fields.
    pub children: Vec<SchemaSpec>,
}

struct SchemaPrivate {
    _format: CString,
    _name: CString,
    _metadata: Option<Box<[u8]>>,
    children: Box<[*mut ArrowSchema]>,
}

/// Encode metadata pairs: int32 count, then int32 length + bytes for each key and value.
fn encode_metadata(pairs: &[(String, String)]) -> Result<Option<Box<[u8]>>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let len32 = |n: usize| {
        i32::try_from(n).map_err(|_| Error::InvalidArgument("metadata too large".to_owned()))
    };
    let mut out = Vec::new();
    out.extend_from_slice(&len32(pairs.len())?.to_ne_bytes());
    for (k, v) in pairs {
        for s in [k, v] {
            out.extend_from_slice(&len32(s.len())?.to_ne_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
    Ok(Some(out.into_boxed_slice()))
}

fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::InvalidArgument(format!("{s:?} contains a NUL byte")))
}

unsafe extern "C" fn release_schema(schema: *mut ArrowSchema) {
    // SAFETY: called by the owner of a live schema built by `SchemaSpec::export`, whose
    // private_data is a SchemaPrivate and whose children are boxes we allocated. Each child is
    // released unless a consumer moved it out (release NULL), then its box is freed.
    unsafe {
        let Some(schema) = schema.as_mut() else {
            return;
        };
        if schema.release.is_none() {
            return;
        }
        let private = Box::from_raw(schema.private_data.cast::<SchemaPrivate>());
        for &child in private.children.iter() {
            if let Some(release) = (*child).release {
                release(child);
            }
            drop(Box::from_raw(child));
        }
        schema.private_data = ptr::null_mut();
        schema.release = None;
    }
}

impl SchemaSpec {
    /// A field without metadata or children.
    pub fn new(format: impl Into<String>, name: impl Into<String>, flags: i64) -> Self {
        Self {
            format: format.into(),
            name: name.into(),
            flags,
            ..Self::default()
        }
    }

    /// Build the C struct (owning its strings and children; `release` frees them).
    pub fn export(&self) -> Result<OwnedSchema> {
        let children: Vec<OwnedSchema> = self
            .children
            .iter()
            .map(SchemaSpec::export)
            .collect::<Result<_>>()?;
        let format = c_string(&self.format)?;
        let name = c_string(&self.name)?;
        let metadata = encode_metadata(&self.metadata)?;
        let children: Box<[*mut ArrowSchema]> = children
            .into_iter()
            .map(OwnedSchema::into_raw_box)
            .collect();
        let mut private = Box::new(SchemaPrivate {
            _format: format,
            _name: name,
            _metadata: metadata,
            children,
        });
        let schema = ArrowSchema {
            format: private._format.as_ptr(),
            name: private._name.as_ptr(),
            metadata: private
                ._metadata
                .as_ref()
                .map_or(ptr::null(), |m| m.as_ptr().cast()),
            flags: self.flags,
            n_children: private.children.len() as i64,
            children: if private.children.is_empty() {
                ptr::null_mut()
            } else {
                private.children.as_mut_ptr()
            },
            dictionary: ptr::null_mut(),
            release: Some(release_schema),
            private_data: Box::into_raw(private).cast(),
        };
        Ok(Owned(Box::new(schema)))
    }
}

/// An array to export: its buffers (addresses the producer keeps valid through `owner`) and
/// children. `null_count` is 0 and buffers are CPU or device memory of the export's device.
#[derive(Debug, Default)]
pub struct ArraySpec {
    /// Number of items.
    pub length: i64,
    /// Number of nulls (dlbridge exports none: 0).
    pub null_count: i64,
    /// Items to skip at the start of the buffers.
    pub offset: i64,
    /// Buffer addresses (NULL for an absent validity bitmap or an empty buffer).
    pub buffers: Vec<*const c_void>,
    /// Child arrays.
    pub children: Vec<ArraySpec>,
    /// Keeps the buffers alive until the array (or a child moved out of it) is released.
    pub owner: Option<Owner>,
}

struct ArrayPrivate {
    buffers: Box<[*const c_void]>,
    children: Box<[*mut ArrowArray]>,
    _owner: Option<Owner>,
}

unsafe extern "C" fn release_array(array: *mut ArrowArray) {
    // SAFETY: called by the owner of a live array built by `ArraySpec::export`, whose
    // private_data is an ArrayPrivate and whose children are boxes we allocated.
    unsafe {
        let Some(array) = array.as_mut() else {
            return;
        };
        if array.release.is_none() {
            return;
        }
        let private = Box::from_raw(array.private_data.cast::<ArrayPrivate>());
        for &child in private.children.iter() {
            if let Some(release) = (*child).release {
                release(child);
            }
            drop(Box::from_raw(child));
        }
        array.private_data = ptr::null_mut();
        array.release = None;
    }
}

impl ArraySpec {
    /// Build the C struct for memory on `device` (CPU is published with Arrow's id -1).
    ///
    /// # Safety
    /// A consumer reads the buffers as the schema paired with this array describes them: every
    /// address in `buffers` (and in the children's) must be NULL where the format allows it or
    /// point to memory of `device` holding at least the bytes that format, `offset` and `length`
    /// imply, valid until `owner` is dropped.
    pub unsafe fn export(self, device: Device) -> OwnedArray {
        let device_id = if device.kind == DeviceType::CPU {
            -1
        } else {
            i64::from(device.id)
        };
        OwnedArray::on_device(self.export_array().into_inner(), device.kind.0, device_id)
    }

    /// Build the plain `ArrowArray` (owning its children; `release` frees them).
    fn export_array(self) -> Owned<ArrowArray> {
        let children: Box<[*mut ArrowArray]> = self
            .children
            .into_iter()
            .map(|c| c.export_array().into_raw_box())
            .collect();
        let mut private = Box::new(ArrayPrivate {
            buffers: self.buffers.into_boxed_slice(),
            children,
            _owner: self.owner,
        });
        let array = ArrowArray {
            length: self.length,
            null_count: self.null_count,
            offset: self.offset,
            n_buffers: private.buffers.len() as i64,
            n_children: private.children.len() as i64,
            buffers: if private.buffers.is_empty() {
                ptr::null_mut()
            } else {
                private.buffers.as_mut_ptr()
            },
            children: if private.children.is_empty() {
                ptr::null_mut()
            } else {
                private.children.as_mut_ptr()
            },
            dictionary: ptr::null_mut(),
            release: Some(release_array),
            private_data: Box::into_raw(private).cast(),
        };
        Owned(Box::new(array))
    }
}

struct StreamPrivate {
    schema: SchemaSpec,
    chunks: VecDeque<ArraySpec>,
    device: Device,
    last_error: Option<CString>,
}

impl StreamPrivate {
    fn into_private_data(
        schema: SchemaSpec,
        chunks: Vec<ArraySpec>,
        device: Device,
    ) -> *mut c_void {
        Box::into_raw(Box::new(Self {
            schema,
            chunks: chunks.into(),
            device,
            last_error: None,
        }))
        .cast()
    }

    /// The private data of a live stream of ours (`None` once released).
    ///
    /// # Safety
    /// `private_data` must be the `StreamPrivate` of a stream built here whose `release` is
    /// `live`, used by one caller at a time (streams are not thread-safe by spec).
    unsafe fn of<'a>(live: bool, private_data: *mut c_void) -> Option<&'a mut Self> {
        // SAFETY: caller's contract.
        live.then(|| unsafe { private_data.cast::<Self>().as_mut() })
            .flatten()
    }

    /// `get_schema` into the consumer's storage `out`.
    fn write_schema(&mut self, out: *mut ArrowSchema) -> c_int {
        if out.is_null() {
            return EINVAL;
        }
        match self.schema.export() {
            Ok(schema) => {
                // SAFETY: `out` is the consumer's storage for one schema.
                unsafe { schema.move_into(out) };
                0
            }
            Err(e) => {
                self.last_error = CString::new(e.to_string()).ok();
                EIO
            }
        }
    }

    fn last_error(&self) -> *const c_char {
        self.last_error.as_ref().map_or(ptr::null(), |e| e.as_ptr())
    }
}

/// The two stream structs of ours, as far as their shared callbacks need them.
trait OurStream {
    /// Whether the stream is live, and its private data.
    fn live_and_private(&mut self) -> (bool, *mut c_void);
    /// Mark the stream released.
    fn mark_released(&mut self);
}

impl OurStream for ArrowArrayStream {
    fn live_and_private(&mut self) -> (bool, *mut c_void) {
        (self.release.is_some(), self.private_data)
    }
    fn mark_released(&mut self) {
        self.private_data = ptr::null_mut();
        self.release = None;
    }
}

impl OurStream for ArrowDeviceArrayStream {
    fn live_and_private(&mut self) -> (bool, *mut c_void) {
        (self.release.is_some(), self.private_data)
    }
    fn mark_released(&mut self) {
        self.private_data = ptr::null_mut();
        self.release = None;
    }
}

/// # Safety
/// `stream` must be NULL or a stream built by [`export_stream`] / [`export_device_stream`].
unsafe fn stream_private<'a, S: OurStream>(stream: *mut S) -> Option<&'a mut StreamPrivate> {
    // SAFETY: caller's contract.
    unsafe {
        let (live, private) = stream.as_mut()?.live_and_private();
        StreamPrivate::of(live, private)
    }
}

unsafe extern "C" fn stream_get_last_error<S: OurStream>(stream: *mut S) -> *const c_char {
    // SAFETY: the consumer calls us on a stream of ours.
    unsafe { stream_private(stream) }.map_or(ptr::null(), |p| p.last_error())
}

unsafe extern "C" fn stream_release<S: OurStream>(stream: *mut S) {
    // SAFETY: called once by the owner of a live stream of ours; its private data is freed
    // (releasing the chunks not yet handed out) and the struct marked released.
    unsafe {
        let Some(stream) = stream.as_mut() else {
            return;
        };
        let (live, private) = stream.live_and_private();
        if !live {
            return;
        }
        drop(Box::from_raw(private.cast::<StreamPrivate>()));
        stream.mark_released();
    }
}

unsafe extern "C" fn stream_get_schema<S: OurStream>(
    stream: *mut S,
    out: *mut ArrowSchema,
) -> c_int {
    // SAFETY: the consumer calls us on a stream of ours.
    match unsafe { stream_private(stream) } {
        Some(private) => private.write_schema(out),
        None => EINVAL,
    }
}

unsafe extern "C" fn stream_get_next(stream: *mut ArrowArrayStream, out: *mut ArrowArray) -> c_int {
    // SAFETY: as in stream_get_schema.
    let Some(private) = (unsafe { stream_private(stream) }) else {
        return EINVAL;
    };
    if out.is_null() {
        return EINVAL;
    }
    match private.chunks.pop_front() {
        // SAFETY: `out` is the consumer's storage; the end of the stream is a released array.
        None => unsafe { ptr::write(out, ArrowArray::released()) },
        Some(chunk) => {
            // SAFETY: the chunk's buffers were vouched for when the stream was made
            // (`export_stream`'s contract).
            let array = unsafe { chunk.export(Device::CPU) };
            // SAFETY: `out` is the consumer's storage; a CPU array always moves.
            if let Err(e) = unsafe { array.move_into(out) } {
                private.last_error = CString::new(e.to_string()).ok();
                return EIO;
            }
        }
    }
    0
}

unsafe extern "C" fn device_stream_get_next(
    stream: *mut ArrowDeviceArrayStream,
    out: *mut ArrowDeviceArray,
) -> c_int {
    // SAFETY: as in stream_get_schema.
    let Some(private) = (unsafe { stream_private(stream) }) else {
        return EINVAL;
    };
    if out.is_null() {
        return EINVAL;
    }
    match private.chunks.pop_front() {
        // SAFETY: `out` is the consumer's storage; the end of the stream is a released array
        // (every time it is asked again).
        None => unsafe { ptr::write(out, ArrowDeviceArray::released()) },
        // SAFETY: `out` is the consumer's storage for one device array; the chunk's buffers
        // were vouched for when the stream was made (`export_device_stream`'s contract).
        Some(chunk) => unsafe { chunk.export(private.device).move_into_device(out) },
    }
    0
}

/// A CPU stream that yields `chunks` (all described by `schema`), then ends.
///
/// # Safety
/// Every chunk must satisfy [`ArraySpec::export`]'s contract for `schema` and the CPU.
pub unsafe fn export_stream(schema: SchemaSpec, chunks: Vec<ArraySpec>) -> OwnedStream {
    Owned(Box::new(ArrowArrayStream {
        get_schema: Some(stream_get_schema::<ArrowArrayStream>),
        get_next: Some(stream_get_next),
        get_last_error: Some(stream_get_last_error::<ArrowArrayStream>),
        release: Some(stream_release::<ArrowArrayStream>),
        private_data: StreamPrivate::into_private_data(schema, chunks, Device::CPU),
    }))
}

/// A device stream that yields `chunks` (all described by `schema`, their buffers on
/// `device`) as device arrays, then ends (a released array, as often as asked).
///
/// # Safety
/// Every chunk must satisfy [`ArraySpec::export`]'s contract for `schema` and `device`.
pub unsafe fn export_device_stream(
    schema: SchemaSpec,
    chunks: Vec<ArraySpec>,
    device: Device,
) -> OwnedDeviceStream {
    Owned(Box::new(ArrowDeviceArrayStream {
        device_type: device.kind.0,
        get_schema: Some(stream_get_schema::<ArrowDeviceArrayStream>),
        get_next: Some(device_stream_get_next),
        get_last_error: Some(stream_get_last_error::<ArrowDeviceArrayStream>),
        release: Some(stream_release::<ArrowDeviceArrayStream>),
        private_data: StreamPrivate::into_private_data(schema, chunks, device),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn spec_f32() -> SchemaSpec {
        SchemaSpec {
            format: "+w:2".into(),
            name: "".into(),
            metadata: vec![
                ("ARROW:extension:name".into(), "x.y".into()),
                ("k".into(), "".into()),
            ],
            flags: FLAG_NULLABLE,
            children: vec![SchemaSpec::new("f", "item", FLAG_NULLABLE)],
        }
    }

    #[test]
    fn schema_round_trip_reads_everything_back() {
        let schema = spec_f32().export().unwrap();
        let v = schema.view();
        assert_eq!(v.format().unwrap(), "+w:2");
        assert_eq!(v.name(), Some(""));
        assert_eq!(v.flags(), FLAG_NULLABLE);
        assert_eq!(
            v.metadata().unwrap(),
            vec![
                (&b"ARROW:extension:name"[..], &b"x.y"[..]),
                (&b"k"[..], &b""[..])
            ]
        );
        assert_eq!(v.metadata_value("k").unwrap(), Some(&b""[..]));
        assert_eq!(v.metadata_value("zz").unwrap(), None);
        let children = v.children().unwrap();
        assert_eq!(children.len(), 1);
        assert_eq!(children[0].format().unwrap(), "f");
        assert_eq!(children[0].name(), Some("item"));
        assert!(children[0].metadata().unwrap().is_empty());
        assert!(!v.has_dictionary());
    }

    #[test]
    fn single_child_and_metadata_value_agree_with_the_full_readers() {
        let leaf = || SchemaSpec::new("f", "item", 0);
        for n in 0..3 {
            let spec = SchemaSpec {
                children: (0..n).map(|_| leaf()).collect(),
                metadata: vec![
                    ("a".into(), "1".into()),
                    ("b".into(), "2".into()),
                    ("a".into(), "3".into()),
                ],
                ..SchemaSpec::new("+w:1", "", 0)
            };
            let schema = spec.export().unwrap();
            let v = schema.view();
            let all = v.children().unwrap();
            let single = v.single_child().unwrap();
            assert_eq!(single.is_some(), all.len() == 1);
            if let Some(child) = single {
                assert!(ptr::eq(child.0, all[0].0));
            }
            for key in ["a", "b", "c"] {
                let first = v
                    .metadata()
                    .unwrap()
                    .into_iter()
                    .find(|(k, _)| *k == key.as_bytes());
                assert_eq!(v.metadata_value(key).unwrap(), first.map(|(_, v)| v));
            }
            let values = ArraySpec {
                length: 1,
                buffers: vec![ptr::null()],
                children: (0..n)
                    .map(|_| ArraySpec {
                        length: 1,
                        buffers: vec![ptr::null(), VALUES.as_ptr().cast()],
                        ..ArraySpec::default()
                    })
                    .collect(),
                ..ArraySpec::default()
            };
            let schema = Arc::new(schema);
            // SAFETY: the schema describes the array, whose buffers are NULL or `VALUES`.
            let data = unsafe { ArrowData::new(schema, values.export(Device::CPU)) };
            let root = data.root().unwrap();
            let nodes = root.children().unwrap();
            let single = root.single_child().unwrap();
            assert_eq!(single.is_some(), nodes.len() == 1);
            if let Some(child) = single {
                assert!(ptr::eq(child.array, nodes[0].array));
            }
        }
    }

    #[test]
    fn metadata_encoding_is_the_spec_example() {
        let m = encode_metadata(&[("key1".into(), "value1".into())])
            .unwrap()
            .unwrap();
        let mut want = vec![];
        want.extend_from_slice(&1i32.to_ne_bytes());
        want.extend_from_slice(&4i32.to_ne_bytes());
        want.extend_from_slice(b"key1");
        want.extend_from_slice(&6i32.to_ne_bytes());
        want.extend_from_slice(b"value1");
        assert_eq!(&*m, &want[..]);
        assert!(encode_metadata(&[]).unwrap().is_none());
    }

    #[test]
    fn move_marks_source_released_and_release_runs_once() {
        let mut storage = ArrowSchema::released();
        // SAFETY: `storage` is writable and holds no live schema.
        unsafe { spec_f32().export().unwrap().move_into(&mut storage) };
        assert!(!storage.is_released());
        // SAFETY: `storage` holds a live schema we may move.
        let owned = unsafe { OwnedSchema::take(&mut storage) }.unwrap();
        assert!(storage.is_released());
        // SAFETY: a released struct is refused, never read further.
        assert!(unsafe { OwnedSchema::take(&mut storage) }.is_err());
        // SAFETY: NULL is refused.
        assert!(unsafe { OwnedSchema::take(ptr::null_mut()) }.is_err());
        drop(owned);
    }

    #[test]
    fn moved_out_child_outlives_its_parent() {
        // R7: a consumer moves a child out, then releases the parent at once.
        let parent = spec_f32().export().unwrap();
        let child_ptr = {
            // SAFETY: the parent is live and has one child.
            unsafe { *parent.0.children }
        };
        // SAFETY: the child is live; moving it out is allowed by R7.
        let child = unsafe { OwnedSchema::take(child_ptr) }.unwrap();
        drop(parent);
        assert_eq!(child.view().format().unwrap(), "f");
    }

    struct Counter(Arc<AtomicUsize>);
    impl Drop for Counter {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counted_array(drops: &Arc<AtomicUsize>, values: &'static [f32]) -> ArraySpec {
        let owner: Owner = Arc::new(Counter(drops.clone()));
        ArraySpec {
            length: values.len() as i64,
            buffers: vec![ptr::null(), values.as_ptr().cast()],
            owner: Some(owner),
            ..ArraySpec::default()
        }
    }

    static VALUES: [f32; 4] = [1.0, 2.0, 3.0, 4.0];

    #[test]
    fn array_release_drops_owner_once_and_device_move_zeroes_reserved() {
        let drops = Arc::new(AtomicUsize::new(0));
        // SAFETY: the buffers are NULL or the static `VALUES` (4 floats).
        let array = unsafe { counted_array(&drops, &VALUES).export(Device::CPU) };
        assert_eq!(array.device().unwrap(), Device::CPU);
        let mut storage = ArrowDeviceArray::released();
        storage.reserved = [7; 3];
        // SAFETY: `storage` is writable and holds no live array.
        unsafe { array.move_into_device(&mut storage) };
        assert_eq!((storage.device_type, storage.device_id), (1, -1));
        assert_eq!(storage.reserved, [0; 3]);
        assert!(storage.sync_event.is_null());
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        // SAFETY: `storage` holds a live device array.
        let owned = unsafe { OwnedArray::take_device(&mut storage) }.unwrap();
        assert!(storage.is_released());
        drop(owned);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn values_tensor_checks_every_reached_item() {
        let drops = Arc::new(AtomicUsize::new(0));
        let schema = Arc::new(SchemaSpec::new("f", "", 0).export().unwrap());
        let mut spec = counted_array(&drops, &VALUES);
        spec.offset = 1;
        spec.length = 3;
        // SAFETY: the schema describes the array, whose values are the static `VALUES`.
        let data = Arc::new(unsafe { ArrowData::new(schema, spec.export(Device::CPU)) });
        let root = data.root().unwrap();
        let owner: Owner = data.clone();
        // SAFETY: `owner` is the Arc holding the array (the same below).
        let t = unsafe {
            root.values_tensor(
                1,
                Layout::contiguous(&[3], 4).unwrap(),
                DType::FLOAT32,
                owner.clone(),
            )
        }
        .unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0]);
        assert!(t.readonly());
        let too_far = Layout::contiguous(&[4], 4).unwrap();
        // SAFETY: as above.
        assert!(unsafe { root.values_tensor(1, too_far, DType::FLOAT32, owner.clone()) }.is_err());
        let wrong_type = Layout::contiguous(&[2], 8).unwrap();
        // SAFETY: as above.
        assert!(unsafe { root.values_tensor(0, wrong_type, DType::FLOAT64, owner) }.is_err());
        assert_eq!(root.count_nulls(0, 3, 2).unwrap(), 0);
        drop(t);

        drop(data);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    static BITS: [u8; 2] = [0b1011_0101, 0b0000_0010];

    #[test]
    fn bools_unpack_and_nulls_count_from_bitmaps() {
        let schema = Arc::new(SchemaSpec::new("b", "", 0).export().unwrap());
        let spec = ArraySpec {
            length: 9,
            null_count: -1,
            offset: 1,
            buffers: vec![BITS.as_ptr().cast(), BITS.as_ptr().cast()],
            ..ArraySpec::default()
        };
        // SAFETY: the schema describes the array, whose buffers are the static `BITS` (bitmaps
        // of 10 bits).
        let data = unsafe { ArrowData::new(schema, spec.export(Device::CPU)) };
        let root = data.root().unwrap();
        let t = root
            .unpack_bools(1, Layout::contiguous(&[9], 1).unwrap())
            .unwrap();
        assert_eq!(t.dtype(), DType::BOOL);
        assert!(t.is_copied() && !t.readonly());
        assert_eq!(t.host_bytes().unwrap(), &[0, 1, 0, 1, 1, 0, 1, 0, 1]);
        // validity bits 1..10 of BITS: 0,1,0,1,1,0,1,0,1 -> 4 nulls
        assert_eq!(root.count_nulls(0, 9, 2).unwrap(), 4);
        assert_eq!(root.count_nulls(1, 1, 2).unwrap(), 0);
        assert!(root.count_nulls(5, 5, 2).is_err());
    }

    #[test]
    fn stream_yields_schema_chunks_then_end() {
        let drops = Arc::new(AtomicUsize::new(0));
        let chunks = vec![
            counted_array(&drops, &VALUES),
            counted_array(&drops, &VALUES),
        ];
        let mut storage = ArrowArrayStream::released();
        // SAFETY: `storage` is writable; the chunks' buffers are the static `VALUES`.
        unsafe { export_stream(SchemaSpec::new("f", "", 0), chunks).move_into(&mut storage) };
        // SAFETY: a live stream.
        let mut stream = unsafe { OwnedStream::take(&mut storage) }.unwrap();
        assert_eq!(stream.schema().unwrap().view().format().unwrap(), "f");
        let first = stream.next_array().unwrap().unwrap();
        assert_eq!(first.length(), 4);
        drop(stream); // the unread chunk is released with the stream
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(first); // results outlive the stream
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn device_stream_yields_device_arrays_then_released_ones() {
        let drops = Arc::new(AtomicUsize::new(0));
        let device = Device::new(DeviceType::CUDA, 1);
        let chunks = vec![counted_array(&drops, &VALUES)];
        let mut storage = ArrowDeviceArrayStream::released();
        // SAFETY: `storage` is writable; the chunk's buffers are the static `VALUES` (never read:
        // the test only moves the array).
        unsafe {
            export_device_stream(SchemaSpec::new("f", "", 0), chunks, device)
                .move_into(&mut storage)
        };
        // SAFETY: a live stream.
        let mut stream = unsafe { OwnedDeviceStream::take(&mut storage) }.unwrap();
        assert_eq!(stream.device_type(), DeviceType::CUDA);
        assert_eq!(stream.schema().unwrap().view().format().unwrap(), "f");
        let first = stream.next_array().unwrap().unwrap();
        assert_eq!(first.device().unwrap(), device);
        assert!(stream.next_array().unwrap().is_none());
        assert!(stream.next_array().unwrap().is_none());
        drop(stream);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        drop(first);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    unsafe extern "C" fn failing_get_schema(
        _: *mut ArrowArrayStream,
        out: *mut ArrowSchema,
    ) -> c_int {
        // Leave garbage in `out` to prove the consumer never calls through it (C49).
        // SAFETY: `out` is the consumer's writable storage.
        unsafe {
            (*out).release = Some(panicking_release);
        }
        EINVAL
    }
    unsafe extern "C" fn panicking_release(_: *mut ArrowSchema) {
        std::process::abort();
    }
    unsafe extern "C" fn last_error(_: *mut ArrowArrayStream) -> *const c_char {
        c"unsupported format".as_ptr()
    }
    unsafe extern "C" fn count_release(stream: *mut ArrowArrayStream) {
        // SAFETY: the test's private data is a leaked AtomicUsize.
        unsafe {
            (*(*stream).private_data.cast::<AtomicUsize>()).fetch_add(1, Ordering::SeqCst);
            (*stream).release = None;
        }
    }

    #[test]
    fn failed_callbacks_never_touch_the_output_and_report_the_error() {
        static RELEASES: AtomicUsize = AtomicUsize::new(0);
        let releases = &RELEASES;
        let mut raw = ArrowArrayStream {
            get_schema: Some(failing_get_schema),
            get_next: None,
            get_last_error: Some(last_error),
            release: Some(count_release),
            private_data: (releases as *const AtomicUsize).cast_mut().cast(),
        };
        // SAFETY: a live stream.
        let mut stream = unsafe { OwnedStream::take(&mut raw) }.unwrap();
        let err = stream.schema().unwrap_err().to_string();
        assert!(
            err.contains("unsupported format") && err.contains("22"),
            "{err}"
        );
        assert!(stream.next_array().is_err());
        drop(stream);
        assert_eq!(releases.load(Ordering::SeqCst), 1);
    }
}
