//! NumPy's `__array_interface__` (version 3): import from the dict, and build it for export.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::device::Device;
use crate::python::errors::buffer_error;
use crate::python::held::HeldObject;
use crate::python::interface_dict::{Fields, InterfaceDict};
use crate::tensor::{Tensor, TensorFlags};

/// Import `obj` through its `__array_interface__` dict `iface`. The object is kept alive as
/// the owner of the memory.
pub(crate) fn import(obj: &Bound<'_, PyAny>, iface: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let dict = InterfaceDict::new(obj, iface, "__array_interface__")?;
    dict.version(3..=3, Some(3))?;
    let Fields {
        dtype,
        layout,
        address,
        readonly,
    } = dict.fields()?;
    let owner = HeldObject::new(obj);
    // SAFETY: the array interface promises that the memory at `address` with this layout stays
    // valid while `obj` lives; `obj` is the owner.
    Ok(unsafe {
        Tensor::from_raw_parts(
            address as *mut std::ffi::c_void,
            0,
            Device::CPU,
            dtype,
            layout,
            TensorFlags {
                readonly,
                copied: false,
            },
            Arc::new(owner),
        )
    }?)
}

/// The `__array_interface__` dict of a host-accessible tensor.
pub(crate) fn export<'py>(py: Python<'py>, tensor: &Tensor) -> PyResult<Bound<'py, PyDict>> {
    tensor.device().require_host()?;
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
    dict.set_item("data", (address, tensor.is_readonly()))?;
    if tensor.is_c_contiguous() {
        dict.set_item("strides", py.None())?;
    } else {
        let item = tensor.itemsize() as i64;
        let bytes: Vec<i64> = tensor.strides().iter().map(|s| s * item).collect();
        dict.set_item("strides", PyTuple::new(py, bytes)?)?;
    }
    Ok(dict)
}
