//! `Tensor` as an argument and a return value of any PyO3 function: taking a `Tensor` imports
//! the argument as `dlbridge.from_dlpack(x)` does (no device, `copy=None`), and returning one
//! hands Python this crate's `Tensor` class.

use pyo3::prelude::*;

use crate::tensor::Tensor;

use super::fastcall;
use super::tensor::{import_object, PyTensor};

impl<'a, 'py> FromPyObject<'a, 'py> for Tensor {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(t) = obj.cast_exact::<PyTensor>() {
            return Ok(t.get().0.clone());
        }
        Ok(import_object(&obj, None, None)?.0)
    }
}

impl<'py> IntoPyObject<'py> for Tensor {
    type Target = PyTensor;
    type Output = Bound<'py, PyTensor>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyTensor>> {
        fastcall::install_dlpack_method(py)?;
        Bound::new(py, PyTensor(self, None))
    }
}
