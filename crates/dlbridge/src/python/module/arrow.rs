//! `dlbridge.Tensor` as an Arrow producer (the PyCapsule interface methods), and
//! `dlbridge.from_arrow`, the Arrow import with a choice of what to do with nulls.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyTuple};

use dlbridge::arrow::{all_valid, FillValue, Nulls};
use dlbridge::python::{arrow, import, protocols};

use crate::tensor::{cell_names, row_and_cell_names, PyTensor};

#[pymethods]
impl PyTensor {
    /// An `arrow_schema` capsule: the Arrow field `__arrow_c_array__` exports (a primitive type
    /// for 1-d tensors, `arrow.fixed_shape_tensor` for N-d, `arrow.bool8` for bool).
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        arrow::export_schema(py, &self.0, cell_names(&self.1))
    }

    /// `(arrow_schema, arrow_array)` capsules over the tensor's memory (host tensors only).
    /// Zero-copy when Arrow can express the layout, else a C-order copy. `requested_schema`
    /// may ask for Arrow's bit-packed boolean or for the bare storage type (no extension);
    /// other requests get the default schema.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        arrow::export_array(py, &self.0, cell_names(&self.1), requested_schema, false)
    }

    /// `(arrow_schema, arrow_device_array)` capsules on the tensor's own device (CPU is
    /// published with Arrow's device id -1; no sync event). Never copies across devices.
    /// Unknown keywords are accepted only with the value None (NotImplementedError otherwise).
    #[pyo3(signature = (requested_schema=None, **kwargs))]
    fn __arrow_c_device_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        arrow::check_device_kwargs(kwargs)?;
        arrow::export_array(py, &self.0, cell_names(&self.1), requested_schema, true)
    }

    /// An `arrow_device_array_stream` capsule yielding the tensor as one device array (the
    /// schema and array of `__arrow_c_device_array__`), then the end. Unknown keywords are
    /// accepted only with the value None (NotImplementedError otherwise).
    #[pyo3(signature = (requested_schema=None, **kwargs))]
    fn __arrow_c_device_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        arrow::check_device_kwargs(kwargs)?;
        arrow::export_device_stream_capsule(py, &self.0, cell_names(&self.1), requested_schema)
    }

    /// An `arrow_array_stream` capsule yielding the tensor as one chunk (host tensors only).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        arrow::export_stream_capsule(py, &self.0, cell_names(&self.1), requested_schema)
    }
}

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

/// Import an object with the Arrow PyCapsule interface; nulls refused, filled (`fill_null`)
/// or reported (`with_validity`). See the stub for the full contract.
#[pyfunction]
#[pyo3(signature = (x, /, *, fill_null=None, with_validity=false, copy=None))]
pub fn from_arrow<'py>(
    x: &Bound<'py, PyAny>,
    fill_null: Option<&Bound<'py, PyAny>>,
    with_validity: bool,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = x.py();
    let offers = protocols::of(x)?;
    let Some(protocol) = arrow::Protocol::of(&offers) else {
        return Err(PyTypeError::new_err(format!(
            "from_arrow needs an object with the Arrow PyCapsule interface (__arrow_c_array__, __arrow_c_stream__...); {} offers none: use dlbridge.from_dlpack for other arrays",
            x.get_type().name()?
        )));
    };
    let nulls = match fill_null.filter(|v| !v.is_none()) {
        Some(value) => Nulls::Fill(fill_value(value)?),
        None if with_validity => Nulls::Report,
        None => Nulls::Refuse,
    };
    let imported = arrow::import_with(x, protocol, copy, nulls)?;
    let names = row_and_cell_names(imported.dim_names);
    let values = imported.values;
    let values = import::apply_policy(&values, None, copy)?.unwrap_or(values);
    if !with_validity {
        return Ok(Bound::new(py, PyTensor(values, names))?.into_any());
    }
    let valid = match imported.validity {
        Some(valid) => valid,
        None => all_valid(values.shape())?,
    };
    let values = Bound::new(py, PyTensor(values, names.clone()))?;
    let valid = Bound::new(py, PyTensor(valid, names))?;
    Ok(PyTuple::new(py, [values.into_any(), valid.into_any()])?.into_any())
}
