//! The DLPack C exchange API, producer side: `dlbridge.Tensor.__dlpack_c_exchange_api__`, so
//! that torch, tvm-ffi and other C consumers take dlbridge tensors without a Python call.
//!
//! Every entry point is called by C code with the GIL held (the protocol's contract for
//! functions that take or return Python objects), must not unwind, and reports failure as -1
//! with a Python exception set (or through `SetError` for the allocator).

use std::ffi::{CString, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::exceptions::{PyBufferError, PySystemError, PyTypeError};
use pyo3::prelude::*;

use crate::export::Flavor;
use crate::ffi::dlpack::{
    DLManagedTensorVersioned, DLPACK_MINOR_VERSION, DLPackExchangeAPI, DLTensor,
};
use crate::layout::Layout;
use crate::{DType, Device, ManagedTensor, Tensor};

use super::tensor::PyTensor;

/// The table; process lifetime, never written.
pub(super) static API: DLPackExchangeAPI = DLPackExchangeAPI::new(
    allocate,
    managed_tensor_from_py_object,
    managed_tensor_to_py_object,
    Some(dltensor_from_py_object),
    current_work_stream,
);

const FLAVOR: Flavor = Flavor::Versioned {
    minor: DLPACK_MINOR_VERSION,
};

/// Run `f` attached to the interpreter; an error or a panic becomes -1 with an exception set.
fn guarded(f: impl FnOnce(Python<'_>) -> PyResult<()>) -> i32 {
    // SAFETY: the exchange API is only called on a thread attached to the interpreter (see
    // the module docs).
    let py = unsafe { Python::assume_attached() };
    match catch_unwind(AssertUnwindSafe(|| f(py))) {
        Ok(Ok(())) => 0,
        Ok(Err(err)) => {
            err.restore(py);
            -1
        }
        Err(_) => {
            PySystemError::new_err("dlbridge panicked inside the DLPack exchange API").restore(py);
            -1
        }
    }
}

/// The dlbridge tensor behind `py_object`.
fn tensor_of<'py>(py: Python<'py>, py_object: *mut c_void) -> PyResult<Bound<'py, PyTensor>> {
    // SAFETY: the caller passes a live object of the type the table was found on (it may
    // still be a subclass or, in a broken caller, another type: that is checked below).
    let obj = unsafe { Bound::from_borrowed_ptr(py, py_object.cast()) };
    obj.cast_into::<PyTensor>().map_err(|_| {
        PyTypeError::new_err("the DLPack exchange API of dlbridge.Tensor was given another type")
    })
}

unsafe extern "C" fn managed_tensor_from_py_object(
    py_object: *mut c_void,
    out: *mut *mut DLManagedTensorVersioned,
) -> i32 {
    guarded(|py| {
        let tensor = tensor_of(py, py_object)?;
        let managed = tensor.get().0.export(FLAVOR)?;
        // SAFETY: `out` is the caller's out-parameter; ownership of the managed tensor passes.
        unsafe { *out = managed.into_raw().cast() };
        Ok(())
    })
}

unsafe extern "C" fn managed_tensor_to_py_object(
    tensor: *mut DLManagedTensorVersioned,
    out: *mut *mut c_void,
) -> i32 {
    guarded(|py| {
        // SAFETY: the caller hands over an owned versioned managed tensor (stolen).
        let managed = unsafe { ManagedTensor::from_versioned(tensor) }
            .ok_or_else(|| PyBufferError::new_err("NULL managed tensor"))?;
        let object = Py::new(py, PyTensor::of(Tensor::from_managed(managed)?, None))?;
        // SAFETY: `out` is the caller's out-parameter and receives a new reference.
        unsafe { *out = object.into_ptr().cast() };
        Ok(())
    })
}

unsafe extern "C" fn dltensor_from_py_object(py_object: *mut c_void, out: *mut DLTensor) -> i32 {
    guarded(|py| {
        let tensor = tensor_of(py, py_object)?;
        // SAFETY: `out` is the caller's DLTensor; the shape/strides it points into belong to
        // the tensor, alive at least while the caller holds `py_object`.
        unsafe { *out = DLTensor::describing(&tensor.get().0) };
        Ok(())
    })
}

unsafe extern "C" fn current_work_stream(
    _device_type: i32,
    _device_id: i32,
    out: *mut *mut c_void,
) -> i32 {
    // dlbridge enqueues nothing on any stream: the default stream (NULL) is right everywhere.
    // SAFETY: `out` is the caller's out-parameter.
    unsafe { *out = std::ptr::null_mut() };
    0
}

type SetError = Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>;

unsafe extern "C" fn allocate(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: SetError,
) -> i32 {
    let result = catch_unwind(|| -> Result<ManagedTensor, String> {
        // SAFETY: the caller passes a valid prototype; only dtype, ndim, shape and device are read.
        let proto = unsafe { &*prototype };
        let device = Device::from_dl(proto.device());
        if device != Device::CPU {
            return Err(format!(
                "dlbridge allocates host memory only, not on {device}"
            ));
        }
        let dtype = DType::from_dl(proto.dtype()).map_err(|e| e.to_string())?;
        let ndim = usize::try_from(proto.ndim()).map_err(|_| "negative ndim".to_owned())?;
        let shape = if ndim == 0 {
            &[][..]
        } else {
            // SAFETY: a valid prototype has `ndim` shape entries.
            unsafe { std::slice::from_raw_parts(proto.shape_ptr(), ndim) }
        };
        let layout = Layout::contiguous(shape, dtype.itemsize()).map_err(|e| e.to_string())?;
        let tensor = Tensor::zeros_in(dtype, layout).map_err(|e| e.to_string())?;
        tensor.export(FLAVOR).map_err(|e| e.to_string())
    });
    match result {
        Ok(Ok(managed)) => {
            // SAFETY: `out` is the caller's out-parameter; ownership passes.
            unsafe { *out = managed.into_raw().cast() };
            0
        }
        Ok(Err(message)) => report(error_ctx, set_error, &message),
        Err(_) => report(error_ctx, set_error, "dlbridge panicked while allocating"),
    }
}

fn report(error_ctx: *mut c_void, set_error: SetError, message: &str) -> i32 {
    if let Some(set_error) = set_error {
        let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: the caller's error callback with its own context and NUL-terminated strings
        // that outlive the call.
        unsafe { set_error(error_ctx, c"BufferError".as_ptr(), message.as_ptr()) };
    }
    -1
}
