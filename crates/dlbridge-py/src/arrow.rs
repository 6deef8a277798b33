//! `dlbridge.Tensor` as an Arrow producer: the PyCapsule interface methods.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use dlbridge::python::arrow;

use crate::tensor::PyTensor;

#[pymethods]
impl PyTensor {
    /// An `arrow_schema` capsule: the Arrow field `__arrow_c_array__` exports (a primitive type
    /// for 1-d tensors, `arrow.fixed_shape_tensor` for N-d, `arrow.bool8` for bool).
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        arrow::export_schema(py, &self.0)
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
        arrow::export_array(py, &self.0, requested_schema, false)
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
        arrow::export_array(py, &self.0, requested_schema, true)
    }

    /// An `arrow_array_stream` capsule yielding the tensor as one chunk (host tensors only).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        arrow::export_stream_capsule(py, &self.0, requested_schema)
    }
}
