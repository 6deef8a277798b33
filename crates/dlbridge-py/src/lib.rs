//! The `dlbridge._native` extension module: `Tensor`, `DType`, `Device` and `from_dlpack`.
//! Everything here is a thin shell over the `dlbridge` crate.

mod arrow;
mod exchange;
mod tensor;
mod types;

use pyo3::prelude::*;

use dlbridge::python::import;

use crate::tensor::{new_tensor, PyTensor};
use crate::types::{parse_device, PyDType, PyDevice};

/// Import any array-like as a Tensor, zero-copy when possible.
#[pyfunction]
#[pyo3(signature = (x, /, *, device=None, copy=None))]
fn from_dlpack<'py>(
    x: &Bound<'py, PyAny>,
    device: Option<&Bound<'py, PyAny>>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyTensor>> {
    let device = device
        .filter(|d| !d.is_none())
        .map(parse_device)
        .transpose()?;
    if let Ok(t) = x.cast::<PyTensor>() {
        return match import::apply_policy(&t.get().0, device, copy)? {
            None => Ok(t.clone()),
            Some(copied) => new_tensor(x.py(), copied),
        };
    }
    new_tensor(x.py(), import::from_object(x, device, copy)?)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "DLPACK_VERSION",
        (
            dlbridge::ffi::dlpack::DLPACK_MAJOR_VERSION,
            dlbridge::ffi::dlpack::DLPACK_MINOR_VERSION,
        ),
    )?;
    m.add_class::<PyTensor>()?;
    m.add_class::<PyDType>()?;
    m.add_class::<PyDevice>()?;
    m.add_function(wrap_pyfunction!(from_dlpack, m)?)?;
    Ok(())
}
