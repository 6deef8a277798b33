//! Owning handles for Arrow C structs another library produced: each releases its struct
//! exactly once, moves follow the C Data Interface (copy the bytes, mark the source released),
//! and streams are read chunk by chunk.
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

use std::ffi::{CStr, c_char, c_int, c_void};
use std::ptr;
use std::sync::Arc;

use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::ffi::arrow::{
    ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema,
};

use super::view::{Node, SchemaView};
use super::{invalid, released_error};

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
pub struct Owned<T: ArrowStruct>(pub(super) Box<T>);

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
    pub(super) fn into_inner(self) -> T {
        *self.into_box()
    }

    /// Give up the box without releasing (the struct stays live at the returned address).
    pub(super) fn into_raw_box(self) -> *mut T {
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
    pub(super) fn on_device(array: ArrowArray, device_type: i32, device_id: i64) -> Self {
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
        self.device()?.require_host()?;
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
    pub(crate) fn root(&self) -> Result<Node<'_>> {
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
