//! The Arrow PyCapsule interface: capsules for schemas, arrays, device arrays and streams
//! (named `arrow_schema`, `arrow_array`, `arrow_device_array`, `arrow_array_stream`,
//! `arrow_device_array_stream`), the exports behind `Tensor.__arrow_c_*__`, and the import of
//! any object that offers `__arrow_c_device_array__`, `__arrow_c_array__`,
//! `__arrow_c_device_stream__` or `__arrow_c_stream__`.
//!
//! Capsules follow the protocol: the struct is allocated released, wrapped in the capsule, and
//! only then filled, so an error leaks nothing; the destructor releases the struct if no
//! consumer moved it out, then frees it. Importing moves the struct out of the capsule.

use std::ffi::{CStr, c_void};
use std::mem::ManuallyDrop;
use std::sync::Arc;

use pyo3::exceptions::{PyBufferError, PyNotImplementedError, PyTypeError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrow::{self as convert, ExportOptions, Imported, Nulls};
use crate::arrow::{
    ArrowData, ArrowStruct, OwnedArray, OwnedDeviceStream, OwnedSchema, OwnedStream, SchemaView,
    export_device_stream, export_stream,
};
use crate::device::DeviceType;
use crate::ffi::arrow::{
    ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema,
};
use crate::python::held::with_gil;
use crate::python::protocols::Protocols;
use crate::python::raised::SavedException;
use crate::tensor::Tensor;

/// Capsule name of an `ArrowSchema`.
pub(crate) const SCHEMA: &CStr = c"arrow_schema";
/// Capsule name of an `ArrowArray`.
pub(crate) const ARRAY: &CStr = c"arrow_array";
/// Capsule name of an `ArrowDeviceArray`.
pub(crate) const DEVICE_ARRAY: &CStr = c"arrow_device_array";
/// Capsule name of an `ArrowArrayStream`.
pub(crate) const ARRAY_STREAM: &CStr = c"arrow_array_stream";
/// Capsule name of an `ArrowDeviceArrayStream`.
pub(crate) const DEVICE_ARRAY_STREAM: &CStr = c"arrow_device_array_stream";

/// A C struct that can travel in a capsule (its release is [`ArrowStruct`]'s).
trait CapsuleStruct: ArrowStruct + Sized {
    /// The capsule name.
    const CAPSULE_NAME: &'static CStr;
    /// A released (zero-initialised) struct.
    fn released() -> Self;
}

/// Implements [`CapsuleStruct`] with each type's own `released()`.
macro_rules! capsule_structs {
    ($($ty:ident => $name:ident),*) => {$(
        impl CapsuleStruct for $ty {
            const CAPSULE_NAME: &'static CStr = $name;
            fn released() -> Self {
                $ty::released()
            }
        }
    )*};
}

capsule_structs!(
    ArrowSchema => SCHEMA,
    ArrowArray => ARRAY,
    ArrowDeviceArray => DEVICE_ARRAY,
    ArrowArrayStream => ARRAY_STREAM,
    ArrowDeviceArrayStream => DEVICE_ARRAY_STREAM
);

/// Capsule destructor: release the struct unless a consumer moved it out, then free it.
/// Never raises; an exception in flight is kept.
unsafe extern "C" fn destroy<T: CapsuleStruct>(capsule: *mut ffi::PyObject) {
    // SAFETY: CPython calls this on an attached thread, on a live capsule we created with name
    // T::CAPSULE_NAME around a `Box<T>`; the in-flight exception is saved first and restored
    // last.
    unsafe {
        let saved = SavedException::take();
        let raw = ffi::PyCapsule_GetPointer(capsule, T::CAPSULE_NAME.as_ptr()).cast::<T>();
        if raw.is_null() {
            ffi::PyErr_WriteUnraisable(capsule);
        } else {
            let mut boxed = Box::from_raw(raw);
            // A struct still live (not moved out by a consumer) is released once.
            if let Some(release) = *boxed.release_slot() {
                release(boxed.base());
            }
        }
        saved.restore();
    }
}

/// A new capsule around a released `T`, then filled by `fill` (which moves a struct in).
fn new_capsule<'py, T: CapsuleStruct>(
    py: Python<'py>,
    fill: impl FnOnce(*mut T) -> PyResult<()>,
) -> PyResult<Bound<'py, PyAny>> {
    let raw = Box::into_raw(Box::new(T::released()));
    // SAFETY: `raw` is a heap struct whose ownership passes to the capsule (freed by
    // `destroy::<T>`); the name is a static C string, as capsules keep the pointer.
    let capsule =
        unsafe { ffi::PyCapsule_New(raw.cast(), T::CAPSULE_NAME.as_ptr(), Some(destroy::<T>)) };
    if capsule.is_null() {
        // SAFETY: the capsule was not created, so we still own the released box.
        drop(unsafe { Box::from_raw(raw) });
    }
    // SAFETY: a new reference or NULL with an exception set.
    let capsule = unsafe { Bound::from_owned_ptr_or_err(py, capsule) }?;
    fill(raw)?;
    Ok(capsule)
}

/// Wrap a schema in an `arrow_schema` capsule.
pub(crate) fn schema_capsule(py: Python<'_>, schema: OwnedSchema) -> PyResult<Bound<'_, PyAny>> {
    new_capsule::<ArrowSchema>(py, |out| {
        // SAFETY: `out` is the capsule's released struct.
        unsafe { schema.move_into(out) };
        Ok(())
    })
}

/// Wrap a CPU-accessible array in an `arrow_array` capsule.
pub(crate) fn array_capsule(py: Python<'_>, array: OwnedArray) -> PyResult<Bound<'_, PyAny>> {
    // SAFETY: `out` is the capsule's released struct.
    new_capsule::<ArrowArray>(py, |out| Ok(unsafe { array.move_into(out) }?))
}

/// Wrap an array in an `arrow_device_array` capsule.
pub(crate) fn device_array_capsule(
    py: Python<'_>,
    array: OwnedArray,
) -> PyResult<Bound<'_, PyAny>> {
    new_capsule::<ArrowDeviceArray>(py, |out| {
        // SAFETY: `out` is the capsule's released struct.
        unsafe { array.move_into_device(out) };
        Ok(())
    })
}

/// Wrap a stream in an `arrow_array_stream` capsule.
pub(crate) fn stream_capsule(py: Python<'_>, stream: OwnedStream) -> PyResult<Bound<'_, PyAny>> {
    new_capsule::<ArrowArrayStream>(py, |out| {
        // SAFETY: `out` is the capsule's released struct.
        unsafe { stream.move_into(out) };
        Ok(())
    })
}

/// Wrap a device stream in an `arrow_device_array_stream` capsule.
pub(crate) fn device_stream_capsule(
    py: Python<'_>,
    stream: OwnedDeviceStream,
) -> PyResult<Bound<'_, PyAny>> {
    new_capsule::<ArrowDeviceArrayStream>(py, |out| {
        // SAFETY: `out` is the capsule's released struct.
        unsafe { stream.move_into(out) };
        Ok(())
    })
}

/// The struct pointer of a capsule named `T::CAPSULE_NAME`; TypeError for anything else.
fn capsule_pointer<T: CapsuleStruct>(obj: &Bound<'_, PyAny>) -> PyResult<*mut T> {
    // SAFETY: PyCapsule_IsValid accepts any object and sets no exception.
    if unsafe { ffi::PyCapsule_IsValid(obj.as_ptr(), T::CAPSULE_NAME.as_ptr()) } != 1 {
        return Err(PyTypeError::new_err(format!(
            "expected a PyCapsule named {:?}, got {}",
            T::CAPSULE_NAME,
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        )));
    }
    // SAFETY: a valid capsule of that name.
    let raw = unsafe { ffi::PyCapsule_GetPointer(obj.as_ptr(), T::CAPSULE_NAME.as_ptr()) };
    if raw.is_null() {
        return Err(PyErr::fetch(obj.py()));
    }
    Ok(raw.cast())
}

/// `take` run on the struct of a capsule named `T::CAPSULE_NAME`, inside a critical section on
/// the capsule (CPython's per-object lock on free-threaded builds, a no-op where the GIL makes
/// the attached thread run alone): a capsule moved out from several threads at once is moved
/// out once, and the others find its struct released. `take` only copies the struct and marks
/// the source released; it calls nothing that could suspend the section.
fn move_out<T: CapsuleStruct, R>(
    capsule: &Bound<'_, PyAny>,
    take: impl FnOnce(*mut T) -> crate::error::Result<R>,
) -> PyResult<R> {
    pyo3::sync::critical_section::with_critical_section(capsule, || {
        let raw = capsule_pointer::<T>(capsule)?;
        Ok(take(raw)?)
    })
}

/// Move the schema out of an `arrow_schema` capsule.
pub(crate) fn take_schema(capsule: &Bound<'_, PyAny>) -> PyResult<OwnedSchema> {
    move_out::<ArrowSchema, _>(capsule, |raw| {
        // SAFETY: an arrow_schema capsule holds a valid (or released) ArrowSchema, alive while
        // we borrow the capsule; the capsule protocol lets the consumer move it out.
        unsafe { OwnedSchema::take(raw) }
    })
}

/// Move the array out of an `arrow_array` capsule.
pub(crate) fn take_array(capsule: &Bound<'_, PyAny>) -> PyResult<OwnedArray> {
    move_out::<ArrowArray, _>(capsule, |raw| {
        // SAFETY: as for take_schema, with an ArrowArray of CPU memory.
        unsafe { OwnedArray::take(raw) }
    })
}

/// Move the array out of an `arrow_device_array` capsule.
pub(crate) fn take_device_array(capsule: &Bound<'_, PyAny>) -> PyResult<OwnedArray> {
    move_out::<ArrowDeviceArray, _>(capsule, |raw| {
        // SAFETY: as for take_schema, with an ArrowDeviceArray.
        unsafe { OwnedArray::take_device(raw) }
    })
}

/// Move the stream out of an `arrow_array_stream` capsule.
pub(crate) fn take_stream(capsule: &Bound<'_, PyAny>) -> PyResult<OwnedStream> {
    move_out::<ArrowArrayStream, _>(capsule, |raw| {
        // SAFETY: as for take_schema, with an ArrowArrayStream.
        unsafe { OwnedStream::take(raw) }
    })
}

/// Move the stream out of an `arrow_device_array_stream` capsule.
pub(crate) fn take_device_stream(capsule: &Bound<'_, PyAny>) -> PyResult<OwnedDeviceStream> {
    move_out::<ArrowDeviceArrayStream, _>(capsule, |raw| {
        // SAFETY: as for take_schema, with an ArrowDeviceArrayStream.
        unsafe { OwnedDeviceStream::take(raw) }
    })
}

// ------------------------------------------------------------------------------------------
// Export
// ------------------------------------------------------------------------------------------

/// The export options for a `requested_schema` argument (`None` or an `arrow_schema` capsule,
/// read without consuming it), with the tensor's `dim_names`.
fn options(
    tensor: &Tensor,
    dim_names: Option<&[String]>,
    requested: Option<&Bound<'_, PyAny>>,
) -> PyResult<ExportOptions> {
    let mut options = match requested.filter(|r| !r.is_none()) {
        None => ExportOptions::default(),
        Some(requested) => {
            let raw = capsule_pointer::<ArrowSchema>(requested)?;
            // SAFETY: the capsule's schema stays valid while we borrow `requested`; we only
            // read it.
            let view = unsafe { SchemaView::borrow(raw) }?;
            ExportOptions::for_request(tensor, view)?
        }
    };
    options.dim_names = dim_names.map(<[String]>::to_vec);
    Ok(options)
}

/// Raise NotImplementedError for a keyword this version does not know whose value is not None
/// (the PyCapsule rule for the device methods).
pub(crate) fn check_device_kwargs(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
    for (key, value) in kwargs.into_iter().flatten() {
        if !value.is_none() {
            return Err(PyNotImplementedError::new_err(format!(
                "unsupported keyword argument {key}={}: no device keyword is standardised yet, only None is accepted",
                value.repr()?
            )));
        }
    }
    Ok(())
}

/// `__arrow_c_schema__`: the field the tensor exports as (`dim_names`: logical names of the
/// cell's dimensions, see [`ExportOptions::dim_names`]).
pub(crate) fn export_schema<'py>(
    py: Python<'py>,
    tensor: &Tensor,
    dim_names: Option<&[String]>,
) -> PyResult<Bound<'py, PyAny>> {
    let spec = convert::export_schema(tensor, &options(tensor, dim_names, None)?)?;
    schema_capsule(py, spec.export()?)
}

/// `__arrow_c_array__` (`device = false`, host memory only) or `__arrow_c_device_array__`
/// (`device = true`, any device, never copied across devices): `(schema, array)` capsules.
pub(crate) fn export_array<'py>(
    py: Python<'py>,
    tensor: &Tensor,
    dim_names: Option<&[String]>,
    requested: Option<&Bound<'py, PyAny>>,
    device: bool,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    if !device && !tensor.device().is_host_accessible() {
        return Err(PyBufferError::new_err(format!(
            "the tensor is on {}, which __arrow_c_array__ cannot hand out (it promises CPU memory); use __arrow_c_device_array__, or copy it to the host first",
            tensor.device()
        )));
    }
    if device {
        // The array goes out without a sync event: its data must be complete for any stream.
        crate::cuda::complete_on_host(tensor)?;
    }
    let exported = convert::export(tensor, &options(tensor, dim_names, requested)?)?;
    let schema = schema_capsule(py, exported.schema.export()?)?;
    // SAFETY: `convert::export` built the array over the tensor's memory (or a copy) on
    // `exported.device`, as its schema describes, kept alive by the owner the array carries.
    let array = unsafe { exported.array.export(exported.device) };
    let array = if device {
        device_array_capsule(py, array)?
    } else {
        array_capsule(py, array)?
    };
    Ok((schema, array))
}

/// `__arrow_c_stream__`: a stream of one chunk (host memory only).
pub(crate) fn export_stream_capsule<'py>(
    py: Python<'py>,
    tensor: &Tensor,
    dim_names: Option<&[String]>,
    requested: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    if !tensor.device().is_host_accessible() {
        return Err(PyBufferError::new_err(format!(
            "the tensor is on {}; an Arrow stream hands out CPU memory only: copy it to the host first",
            tensor.device()
        )));
    }
    let exported = convert::export(tensor, &options(tensor, dim_names, requested)?)?;
    // SAFETY: as in `export_array`: the array is the tensor's memory (or a copy) on the CPU,
    // as the schema describes, kept alive by its owner.
    let stream = unsafe { export_stream(exported.schema, vec![exported.array]) };
    stream_capsule(py, stream)
}

/// `__arrow_c_device_stream__`: a device stream of one chunk on the tensor's own device (the
/// schema and array of `__arrow_c_device_array__`).
pub(crate) fn export_device_stream_capsule<'py>(
    py: Python<'py>,
    tensor: &Tensor,
    dim_names: Option<&[String]>,
    requested: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    // As in `export_array`: no sync event goes out with the chunk.
    crate::cuda::complete_on_host(tensor)?;
    let exported = convert::export(tensor, &options(tensor, dim_names, requested)?)?;
    // SAFETY: as in `export_array`, on `exported.device`.
    let stream =
        unsafe { export_device_stream(exported.schema, vec![exported.array], exported.device) };
    device_stream_capsule(py, stream)
}

// ------------------------------------------------------------------------------------------
// Import
// ------------------------------------------------------------------------------------------

/// Which Arrow protocol to import through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// `__arrow_c_device_array__`
    DeviceArray,
    /// `__arrow_c_array__`
    Array,
    /// `__arrow_c_device_stream__` (device-aware chunked arrays and streams)
    DeviceStream,
    /// `__arrow_c_stream__` (chunked arrays, tables' columns, streams)
    Stream,
}

impl Protocol {
    /// Every protocol, in the documented order of preference: a single array before a stream,
    /// and the device variant of each before the host one.
    pub(crate) const ORDER: [Self; 4] = [
        Self::DeviceArray,
        Self::Array,
        Self::DeviceStream,
        Self::Stream,
    ];

    /// True when a type that offers `offers` has this protocol's method.
    pub(crate) fn is_offered(self, offers: &Protocols) -> bool {
        match self {
            Self::DeviceArray => offers.arrow_device_array,
            Self::Array => offers.arrow_array,
            Self::DeviceStream => offers.arrow_device_stream,
            Self::Stream => offers.arrow_stream,
        }
    }

    /// The protocol's method name.
    pub(crate) fn method(self) -> &'static str {
        match self {
            Self::DeviceArray => "__arrow_c_device_array__",
            Self::Array => "__arrow_c_array__",
            Self::DeviceStream => "__arrow_c_device_stream__",
            Self::Stream => "__arrow_c_stream__",
        }
    }
}

/// An imported array whose release runs holding the GIL (some producers' private data holds
/// Python objects; see [`crate::python::held`]); after finalisation it is leaked on purpose.
struct Attached(ManuallyDrop<ArrowData>);

impl AsRef<ArrowData> for Attached {
    fn as_ref(&self) -> &ArrowData {
        &self.0
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        // SAFETY: taken exactly once, here; the field is never used again.
        let data = unsafe { ManuallyDrop::take(&mut self.0) };
        let mut data = Some(data);
        with_gil(|| drop(data.take()));
        if let Some(leaked) = data {
            std::mem::forget(leaked);
        }
    }
}

/// Import `obj` through `protocol` (read-only, zero-copy where the bytes allow; see
/// [`crate::arrow`]). `copy=Some(false)` refuses the copies bit-packed booleans and several
/// stream chunks need. `nulls` says what to do with nulls; also returns the validity and the
/// dimension names (see [`convert::import_arrow`]).
pub(crate) fn import_with(
    obj: &Bound<'_, PyAny>,
    protocol: Protocol,
    copy: Option<bool>,
    nulls: Nulls,
) -> PyResult<Imported> {
    let py = obj.py();
    let (schema, array) = match protocol {
        Protocol::Stream => return import_stream(obj, copy, nulls),
        Protocol::DeviceStream => return import_device_stream(obj, copy, nulls),
        Protocol::DeviceArray => {
            let (s, a): (Bound<'_, PyAny>, Bound<'_, PyAny>) = obj
                .call_method0(intern!(py, "__arrow_c_device_array__"))?
                .extract()?;
            (take_schema(&s)?, take_device_array(&a)?)
        }
        Protocol::Array => {
            let (s, a): (Bound<'_, PyAny>, Bound<'_, PyAny>) = obj
                .call_method0(intern!(py, "__arrow_c_array__"))?
                .extract()?;
            (take_schema(&s)?, take_array(&a)?)
        }
    };
    wait_for_event(py, &array)?;
    // SAFETY: the producer handed out this schema with this array.
    let data = unsafe { ArrowData::new(Arc::new(schema), array) };
    Ok(convert::import_arrow(
        Attached(ManuallyDrop::new(data)),
        copy,
        nulls,
    )?)
}

fn import_stream(obj: &Bound<'_, PyAny>, copy: Option<bool>, nulls: Nulls) -> PyResult<Imported> {
    let capsule = obj.call_method0(intern!(obj.py(), "__arrow_c_stream__"))?;
    let mut stream = take_stream(&capsule)?;
    let schema = Arc::new(stream.schema()?);
    let mut chunks = vec![];
    while let Some(array) = stream.next_array()? {
        // SAFETY: every chunk of a stream is described by the stream's schema.
        let data = unsafe { ArrowData::new(schema.clone(), array) };
        chunks.push(convert::import_arrow(
            Attached(ManuallyDrop::new(data)),
            copy,
            nulls,
        )?);
    }
    drop(stream);
    Ok(convert::concatenate_imported(schema.view(), chunks, copy)?)
}

/// A device stream: one chunk imports zero-copy (on its device); several are joined into a
/// host copy, which memory the host cannot read cannot be.
fn import_device_stream(
    obj: &Bound<'_, PyAny>,
    copy: Option<bool>,
    nulls: Nulls,
) -> PyResult<Imported> {
    let py = obj.py();
    let capsule = obj.call_method0(intern!(py, "__arrow_c_device_stream__"))?;
    let mut stream = take_device_stream(&capsule)?;
    let schema = Arc::new(stream.schema()?);
    let mut arrays = vec![];
    while let Some(array) = stream.next_array()? {
        let device = array.device()?;
        if device.kind != stream.device_type() {
            return Err(PyBufferError::new_err(format!(
                "the device stream promised device type {} but a chunk is on {device}",
                stream.device_type().0
            )));
        }
        if !arrays.is_empty() && !device.is_host_accessible() {
            return Err(PyBufferError::new_err(format!(
                "the device stream has several chunks on {device}: joining them needs a copy on the device, which dlbridge does not make; combine the chunks with the producer first (e.g. combine_chunks()) or import them one by one"
            )));
        }
        arrays.push(array);
    }
    drop(stream);
    let mut chunks = Vec::with_capacity(arrays.len());
    for array in arrays {
        wait_for_event(py, &array)?;
        // SAFETY: every chunk of a stream is described by the stream's schema.
        let data = unsafe { ArrowData::new(schema.clone(), array) };
        chunks.push(convert::import_arrow(
            Attached(ManuallyDrop::new(data)),
            copy,
            nulls,
        )?);
    }
    Ok(convert::concatenate_imported(schema.view(), chunks, copy)?)
}

/// Wait until the producer's sync event has fired, so the buffers are safe to read from any
/// stream. CPU arrays carry no event (one would be ignored: there is nothing to wait on).
fn wait_for_event(py: Python<'_>, array: &OwnedArray) -> PyResult<()> {
    let event = array.sync_event();
    if event.is_null() {
        return Ok(());
    }
    let device = array.device()?;
    // SAFETY: for the device types below a non-NULL sync_event points to the event handle
    // (cudaEvent_t / hipEvent_t, pointer-sized), owned by the live array.
    let handle = || unsafe { *event.cast::<*mut c_void>() } as usize;
    match device.kind {
        DeviceType::CPU => Ok(()),
        // Through the driver dlbridge loaded (a CUevent is the runtime's cudaEvent_t).
        DeviceType::CUDA | DeviceType::CUDA_HOST | DeviceType::CUDA_MANAGED => {
            // SAFETY: a live event of the array (above).
            unsafe { crate::cuda::synchronize_raw_event(handle()) }.map_err(|e| {
                PyBufferError::new_err(format!(
                    "cannot wait on the producer's {device} sync event (cuEventSynchronize): {e}"
                ))
            })
        }
        DeviceType::ROCM | DeviceType::ROCM_HOST => {
            let library = if cfg!(windows) {
                "amdhip64.dll"
            } else {
                "libamdhip64.so"
            };
            hip_event_synchronize(py, library, handle()).map_err(|e| {
                PyBufferError::new_err(format!(
                    "cannot wait on the producer's {device} sync event (hipEventSynchronize in {library}): {e}"
                ))
            })
        }
        _ => Err(PyBufferError::new_err(format!(
            "the producer attached a sync event for {device}, which dlbridge cannot wait on"
        ))),
    }
}

/// Call `hipEventSynchronize(handle)` from the HIP runtime `library` through ctypes.
fn hip_event_synchronize(py: Python<'_>, library: &str, handle: usize) -> PyResult<()> {
    let ctypes = py.import("ctypes")?;
    let lib = ctypes.getattr("CDLL")?.call1((library,))?;
    let function = lib.getattr("hipEventSynchronize")?;
    function.setattr("argtypes", vec![ctypes.getattr("c_void_p")?])?;
    let rc: i32 = function.call1((handle,))?.extract()?;
    if rc != 0 {
        return Err(PyBufferError::new_err(format!(
            "hipEventSynchronize returned {rc}"
        )));
    }
    Ok(())
}
