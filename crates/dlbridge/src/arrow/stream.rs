//! Arrow C streams that dlbridge produces: a schema and a queue of arrays behind the stream
//! callbacks.

use std::collections::VecDeque;
use std::ffi::{CString, c_char, c_int, c_void};
use std::ptr;

use crate::device::Device;
use crate::ffi::arrow::{
    ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema,
};

use super::build::{ArraySpec, SchemaSpec};
use super::owned::{Owned, OwnedDeviceStream, OwnedStream};

/// `EINVAL`, the error code dlbridge's stream callbacks return for bad input.
pub(super) const EINVAL: c_int = 22;
/// `EIO`, the generic error code of dlbridge's stream callbacks.
const EIO: c_int = 5;

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
