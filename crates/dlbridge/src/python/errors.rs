//! [`Error`] -> Python exception, by [`ErrorKind`].

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::PyErr;

use crate::error::{Error, ErrorKind};

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        let msg = e.to_string();
        match e.kind() {
            ErrorKind::Buffer => PyBufferError::new_err(msg),
            ErrorKind::Value => PyValueError::new_err(msg),
            ErrorKind::Type => PyTypeError::new_err(msg),
        }
    }
}

/// A BufferError with `msg`.
pub fn buffer_error(msg: impl Into<String>) -> PyErr {
    PyBufferError::new_err(msg.into())
}
