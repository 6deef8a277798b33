//! NumPy's `__array_interface__` (version 3): import from the dict, and build it for export.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::device::Device;
use crate::dtype::DType;
use crate::error::Error;
use crate::layout::Layout;
use crate::python::buffer::element_strides;
use crate::python::errors::buffer_error;
use crate::tensor::Tensor;

fn malformed(obj: &Bound<'_, PyAny>, what: &str) -> PyErr {
    let type_name = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default();
    buffer_error(format!(
        "{type_name}.__array_interface__ is malformed: {what}"
    ))
}

fn ints(obj: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, key: &str) -> PyResult<Vec<i64>> {
    let tuple = value
        .cast::<PyTuple>()
        .map_err(|_| malformed(obj, &format!("'{key}' must be a tuple of ints")))?;
    tuple
        .iter()
        .map(|v| {
            v.extract::<i64>()
                .map_err(|_| malformed(obj, &format!("'{key}' must be a tuple of ints")))
        })
        .collect()
}

/// Import `obj` through its `__array_interface__` dict `iface`. The object is kept alive as
/// the owner of the memory.
pub fn import(obj: &Bound<'_, PyAny>, iface: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let dict = iface
        .cast::<PyDict>()
        .map_err(|_| malformed(obj, "it is not a dict"))?;
    let get = |key: &str| dict.get_item(key);
    if let Some(v) = get("version")? {
        if v.extract::<i64>().ok() != Some(3) {
            return Err(malformed(obj, "only version 3 is supported"));
        }
    }
    if get("mask")?.is_some_and(|m| !m.is_none()) {
        return Err(buffer_error(
            "__array_interface__ with a mask (masked array) cannot be exchanged; fill it first",
        ));
    }
    let shape = ints(
        obj,
        &get("shape")?.ok_or_else(|| malformed(obj, "'shape' is missing"))?,
        "shape",
    )?;
    let typestr: String = get("typestr")?
        .ok_or_else(|| malformed(obj, "'typestr' is missing"))?
        .extract()
        .map_err(|_| malformed(obj, "'typestr' must be a str"))?;
    if let Some(descr) = get("descr")? {
        let simple = descr.len().ok() == Some(1)
            && descr
                .get_item(0)
                .and_then(|f| f.get_item(0))
                .and_then(|n| n.extract::<String>())
                .is_ok_and(|n| n.is_empty());
        if !simple {
            return Err(buffer_error(
                "structured dtypes (a 'descr' with fields) cannot be exchanged",
            ));
        }
    }
    let dtype = DType::from_typestr(&typestr)?;
    let itemsize = dtype.itemsize();
    let strides = match get("strides")? {
        Some(s) if !s.is_none() => {
            let bytes = ints(obj, &s, "strides")?;
            if bytes.len() != shape.len() {
                let what = format!("{} strides for {} dimensions", bytes.len(), shape.len());
                return Err(malformed(obj, &what));
            }
            Some(element_strides(&shape, bytes.into_iter(), itemsize)?)
        }
        _ => None,
    };
    let layout = Layout::new(&shape, strides.as_deref(), itemsize)?;
    let data = get("data")?.ok_or_else(|| malformed(obj, "'data' is missing"))?;
    let (address, readonly) = if let Ok(tuple) = data.cast::<PyTuple>() {
        if tuple.len() != 2 {
            return Err(malformed(obj, "'data' must be (address, readonly)"));
        }
        let address: usize = tuple
            .get_item(0)?
            .extract()
            .map_err(|_| malformed(obj, "the data address must be a non-negative int"))?;
        let readonly: bool = tuple.get_item(1)?.is_truthy()?;
        (address, readonly)
    } else {
        return Err(buffer_error(
            "__array_interface__ whose 'data' is a buffer object or None is not supported; pass the buffer itself",
        ));
    };
    if address == 0 && layout.size() > 0 {
        return Err(Error::InvalidLayout(
            "__array_interface__ data address is NULL for a non-empty array".into(),
        )
        .into());
    }
    let owner: Py<PyAny> = obj.clone().unbind();
    // SAFETY: the array interface promises that the memory at `address` with this layout stays
    // valid while `obj` lives; `obj` is the owner.
    Ok(unsafe {
        Tensor::from_raw_parts(
            address as *mut std::ffi::c_void,
            0,
            Device::CPU,
            dtype,
            layout,
            readonly,
            false,
            Arc::new(owner),
        )
    }?)
}

/// The `__array_interface__` dict of a host-accessible tensor.
pub fn export<'py>(py: Python<'py>, tensor: &Tensor) -> PyResult<Bound<'py, PyDict>> {
    if !tensor.device().is_host_accessible() {
        return Err(Error::NotHostAccessible {
            device: tensor.device(),
        }
        .into());
    }
    let dtype = tensor.dtype();
    let typestr = dtype.typestr().ok_or_else(|| {
        buffer_error(format!(
            "dtype {dtype} has no NumPy typestr; use dlbridge.to_numpy(t) (an ml_dtypes view, zero-copy, needs ml_dtypes) or a DLPack consumer that has {dtype}"
        ))
    })?;
    let dict = PyDict::new(py);
    dict.set_item("version", 3)?;
    dict.set_item("shape", PyTuple::new(py, tensor.shape())?)?;
    dict.set_item("typestr", &typestr)?;
    dict.set_item("descr", vec![("", typestr.as_str())])?;
    let address = if tensor.size() == 0 && tensor.data_ptr() == 0 {
        0
    } else {
        tensor.data_ptr()
    };
    dict.set_item("data", (address, tensor.readonly()))?;
    if tensor.is_c_contiguous() {
        dict.set_item("strides", py.None())?;
    } else {
        let item = tensor.itemsize() as i64;
        let bytes: Vec<i64> = tensor.strides().iter().map(|s| s * item).collect();
        dict.set_item("strides", PyTuple::new(py, bytes)?)?;
    }
    Ok(dict)
}
