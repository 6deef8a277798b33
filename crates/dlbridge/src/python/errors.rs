//! [`Error`] -> Python exception, by [`ErrorKind`], with the way out in Python's words.

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::PyErr;

use crate::error::{Error, ErrorKind};
use crate::ffi::dlpack::DLPACK_MINOR_VERSION;

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        let msg = match hint(&e) {
            Some(hint) => format!("{e}; {hint}"),
            None => e.to_string(),
        };
        match e.kind() {
            ErrorKind::Buffer => PyBufferError::new_err(msg),
            ErrorKind::Value => PyValueError::new_err(msg),
            ErrorKind::Type => PyTypeError::new_err(msg),
        }
    }
}

/// What a Python caller can do about `e`: the keyword of `from_dlpack`, `__dlpack__` or
/// `from_arrow` that gets what the data needs, or the NumPy / PyArrow call that fixes it.
fn hint(e: &Error) -> Option<String> {
    let hint = match e {
        Error::UnsupportedVersion { .. } => format!(
            "upgrade dlbridge or ask the producer for max_version=(1, {DLPACK_MINOR_VERSION})"
        ),
        Error::DTypeNeedsNewerVersion { needed_minor, .. } => format!(
            "the consumer must pass max_version=(1, {needed_minor}) or newer, or convert the data first"
        ),
        Error::Nulls { .. } => "fill them with dlbridge.from_arrow(x, fill_null=0) or pyarrow.compute.fill_null(x, 0), get the values with a validity mask from dlbridge.from_arrow(x, with_validity=True), or convert with x.to_numpy(zero_copy_only=False), which turns them into NaN".to_owned(),
        Error::NonNativeByteOrder { .. } => {
            "convert it first (e.g. arr.astype(arr.dtype.newbyteorder('=')))".to_owned()
        }
        Error::ReadOnlyLegacy => {
            "ask with max_version=(1, 0) or newer, or pass copy=True for a writable copy".to_owned()
        }
        Error::ReadOnly => "request read-only access or make a copy with copy=True".to_owned(),
        Error::CopyRequired { .. } => {
            "pass copy=None or copy=True instead of copy=False".to_owned()
        }
        Error::NotHostAccessible { .. } => {
            "pass device=\"cpu\" to copy it to the host".to_owned()
        }
        Error::UnsupportedDevice { .. } => {
            "from_dlpack(x, device=...) asks the producer for the device".to_owned()
        }
        _ => return None,
    };
    Some(hint)
}

/// A BufferError with `msg`.
pub fn buffer_error(msg: impl Into<String>) -> PyErr {
    PyBufferError::new_err(msg.into())
}
