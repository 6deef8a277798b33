//! Any Python array-like -> [`Tensor`], in the documented order, then the `device` / `copy`
//! policy of the array API.

use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::copy::Order;
use crate::device::{Device, DeviceType};
use crate::error::Error;
use crate::ffi::dlpack::{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
use crate::python::{array_interface, buffer, capsule};
use crate::tensor::Tensor;

/// Import `obj` zero-copy when possible, honouring `device` and `copy` like the array API's
/// `from_dlpack`: `copy=True` always copies (C-contiguous result), `copy=False` never copies,
/// `copy=None` copies only when needed (e.g. data not aligned to its item size).
pub fn from_object(
    obj: &Bound<'_, PyAny>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<Tensor> {
    let tensor = import(obj, device, copy)?;
    apply_policy(tensor, device, copy)
}

/// Import without applying the copy policy (the producer may still have been asked for a copy
/// on another device).
pub fn import(
    obj: &Bound<'_, PyAny>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<Tensor> {
    let py = obj.py();
    if capsule::is_capsule(obj) {
        return capsule::consume(obj);
    }
    if let Some(method) = obj.getattr_opt(intern!(py, "__dlpack__"))? {
        return import_dlpack(obj, &method, device, copy);
    }
    if buffer::has_buffer(obj) {
        return buffer::import(obj);
    }
    if let Some(iface) = obj.getattr_opt(intern!(py, "__array_interface__"))? {
        return array_interface::import(obj, &iface);
    }
    let type_name = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default();
    Err(PyTypeError::new_err(format!(
        "cannot import an object of type {type_name}: it offers none of __dlpack__, a DLPack capsule, the buffer protocol or __array_interface__ (for a Python list, build an array first, e.g. numpy.asarray)"
    )))
}

fn is_keyword_type_error(py: Python<'_>, err: &PyErr) -> bool {
    err.is_instance_of::<PyTypeError>(py)
        && err
            .value(py)
            .str()
            .map(|s| {
                let s = s.to_string_lossy();
                s.contains("keyword") || s.contains("argument")
            })
            .unwrap_or(false)
}

fn import_dlpack(
    obj: &Bound<'_, PyAny>,
    method: &Bound<'_, PyAny>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<Tensor> {
    let py = obj.py();
    let kwargs = PyDict::new(py);
    kwargs.set_item(
        intern!(py, "max_version"),
        (DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION),
    )?;
    if let Some(target) = device {
        let (kind, id): (i32, i32) = obj
            .call_method0(intern!(py, "__dlpack_device__"))?
            .extract()?;
        let here = Device::new(DeviceType(kind), id);
        if here != target {
            kwargs.set_item(intern!(py, "dl_device"), (target.kind.0, target.id))?;
            if let Some(c) = copy {
                kwargs.set_item(intern!(py, "copy"), c)?;
            }
        }
    }
    let capsule = match method.call((), Some(&kwargs)) {
        Ok(c) => c,
        Err(err) if is_keyword_type_error(py, &err) => method.call0()?,
        Err(err) => return Err(err),
    };
    capsule::consume(&capsule)
}

/// Apply `device` / `copy` to an imported tensor.
pub fn apply_policy(
    tensor: Tensor,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<Tensor> {
    if let Some(target) = device {
        if tensor.device() != target {
            return Err(PyBufferError::new_err(format!(
                "the data is on {} and cannot be moved to {target} by dlbridge here; ask the producer for that device or use device=\"{}\"",
                tensor.device(),
                tensor.device()
            )));
        }
    }
    match copy {
        Some(true) if !(tensor.is_copied() && tensor.is_c_contiguous()) => {
            Ok(tensor.copy(Order::C)?)
        }
        Some(false) if needs_realignment(&tensor) => Err(Error::CopyRequired {
            reason: "the data is not aligned to its item size".to_owned(),
        }
        .into()),
        None if needs_realignment(&tensor) => Ok(tensor.copy(Order::C)?),
        _ => Ok(tensor),
    }
}

fn needs_realignment(tensor: &Tensor) -> bool {
    tensor.device().is_host_accessible() && !tensor.is_aligned()
}
