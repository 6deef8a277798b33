//! `dlbridge.Tensor` as an Arrow producer (the PyCapsule interface methods), and
//! `dlbridge.from_arrow`, the Arrow import with a choice of what to do with nulls.

use pyo3::exceptions::{PyNotImplementedError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyTuple};

use crate::arrow::{FillValue, Imported, Nulls, all_valid};
use crate::python::errors;
use crate::python::import::refused_by_each;
use crate::python::{arrow, import, protocols};

use super::tensor::{PyTensor, row_and_cell_names};

/// The Python value of `fill_null` as a fill value (TypeError for anything but a bool, an
/// integer or a float).
fn fill_value(value: &Bound<'_, PyAny>) -> PyResult<FillValue> {
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(FillValue::Bool(b.is_true()));
    }
    if let Ok(i) = value.extract::<i128>() {
        return Ok(FillValue::Int(i));
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(FillValue::Float(value.extract()?));
    }
    match value.extract::<f64>() {
        Ok(f) => Ok(FillValue::Float(f)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "fill_null must be a bool, an int or a float, not {}",
            value.get_type().name()?
        ))),
    }
}

/// Import `x` through the first Arrow protocol its type offers that does not raise
/// NotImplementedError (the interface's way of saying "not this protocol", e.g. a device
/// method on a host-only build); any other error is about the data and is raised as it is.
/// NoProtocolError (a TypeError) when the type offers none; a BufferError naming each refusal
/// when every one it offers refused.
fn import_first_accepted(
    x: &Bound<'_, PyAny>,
    copy: Option<bool>,
    nulls: Nulls,
) -> PyResult<Imported> {
    let py = x.py();
    let offers = protocols::of(x)?;
    let mut refusals = Vec::new();
    for protocol in arrow::Protocol::ORDER {
        if !protocol.is_offered(&offers) {
            continue;
        }
        match arrow::import_with(x, protocol, copy, nulls) {
            Err(err) if err.is_instance_of::<PyNotImplementedError>(py) => {
                refusals.push((protocol.method(), err));
            }
            result => return result,
        }
    }
    if refusals.is_empty() {
        return Err(errors::no_protocol_error(
            py,
            format!(
                "from_arrow needs an object with the Arrow PyCapsule interface (__arrow_c_array__, __arrow_c_stream__...); {} offers none: use dlbridge.from_dlpack for other arrays",
                x.get_type().name()?
            ),
        ));
    }
    Err(refused_by_each(
        x,
        "every Arrow protocol it offers refused",
        refusals,
        "dlbridge.from_dlpack also tries DLPack and the buffer protocol",
    ))
}

/// Import an object with the Arrow PyCapsule interface; nulls refused, filled (`fill_null`)
/// or reported (`with_validity`). See the stub for the full contract.
#[pyfunction]
#[pyo3(signature = (x, /, *, fill_null=None, with_validity=false, copy=None))]
pub(super) fn from_arrow<'py>(
    x: &Bound<'py, PyAny>,
    fill_null: Option<&Bound<'py, PyAny>>,
    with_validity: bool,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = x.py();
    let nulls = match fill_null.filter(|v| !v.is_none()) {
        Some(value) => Nulls::Fill(fill_value(value)?),
        None if with_validity => Nulls::Report,
        None => Nulls::Refuse,
    };
    let imported = import_first_accepted(x, copy, nulls)?;
    let names = row_and_cell_names(imported.dim_names);
    let values = imported.values;
    let values = import::apply_policy(&values, None, copy)?.unwrap_or(values);
    if !with_validity {
        return Ok(Bound::new(py, PyTensor::of(values, names))?.into_any());
    }
    let valid = match imported.validity {
        Some(valid) => valid,
        None => all_valid(values.shape())?,
    };
    let values = Bound::new(py, PyTensor::of(values, names.clone()))?;
    let valid = Bound::new(py, PyTensor::of(valid, names))?;
    Ok(PyTuple::new(py, [values.into_any(), valid.into_any()])?.into_any())
}
