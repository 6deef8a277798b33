//! [`Error`] -> Python exception, by [`ErrorKind`], with the way out in Python's words.

use pyo3::exceptions::{PyAttributeError, PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::error::{Error, ErrorKind};
use crate::ffi::dlpack::DLPACK_MINOR_VERSION;

/// The Python exception [`ErrorKind`] names (`BufferError`, `ValueError` or `TypeError`), its
/// message followed by what a Python caller can do about it (`copy=True`, `device="cpu"`,
/// ...): `?` in a `#[pyfunction]` raises it.
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
        Error::Aliased { .. } => {
            "import it with copy=True for memory of its own, or write through the producer"
                .to_owned()
        }
        Error::NotContiguous { .. } => "pass a C-contiguous array (numpy.ascontiguousarray(x), x.contiguous() in torch, or dlbridge.from_dlpack(x, copy=True))".to_owned(),
        Error::Misaligned { .. } => {
            "pass a copy, which is aligned (x.copy(), or dlbridge.from_dlpack(x, copy=True))"
                .to_owned()
        }
        Error::WrongDType { asked, .. } => format!(
            "pass an array of {asked} (convert it first, e.g. x.astype(\"{asked}\") in NumPy)"
        ),
        Error::CopyRequired { .. } => {
            "pass copy=None or copy=True instead of copy=False".to_owned()
        }
        Error::NotHostAccessible { .. } => {
            "pass device=\"cpu\" to copy it to the host (dlbridge.from_dlpack(x, device=\"cpu\") or t.to_device(\"cpu\"))".to_owned()
        }
        Error::UnsupportedDevice { .. } => {
            "from_dlpack(x, device=...) asks the producer for the device".to_owned()
        }
        _ => return None,
    };
    Some(hint)
}

/// A BufferError with `msg`.
pub(crate) fn buffer_error(msg: impl Into<String>) -> PyErr {
    PyBufferError::new_err(msg.into())
}

/// `dlbridge.NoProtocolError`: raised for an object that offers no exchange protocol at all.
/// It derives from both `TypeError` (what dlbridge has always documented) and
/// `AttributeError` (what the array API's `from_dlpack` names, and what NumPy, PyArrow and
/// array-api-strict raise), so code written against either catches it.
pub(crate) fn no_protocol_error_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let ty = TYPE.get_or_try_init(py, || {
        let bases = PyTuple::new(
            py,
            [
                py.get_type::<PyTypeError>(),
                py.get_type::<PyAttributeError>(),
            ],
        )?;
        let namespace = PyDict::new(py);
        namespace.set_item("__module__", "dlbridge")?;
        namespace.set_item(
            "__doc__",
            "The object offers no array exchange protocol (no __dlpack__, DLPack capsule, Arrow \
             PyCapsule interface, buffer protocol or array interface). A TypeError and an \
             AttributeError.",
        )?;
        py.get_type::<PyType>()
            .call1(("NoProtocolError", bases, namespace))?
            .cast_into::<PyType>()
            .map(Bound::unbind)
            .map_err(PyErr::from)
    })?;
    Ok(ty.bind(py))
}

/// A [`no_protocol_error_type`] exception with `msg`.
pub(crate) fn no_protocol_error(py: Python<'_>, msg: String) -> PyErr {
    match no_protocol_error_type(py) {
        Ok(ty) => PyErr::from_type(ty.clone(), msg),
        Err(err) => err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Device, DeviceType};
    use pyo3::Python;

    #[test]
    fn python_errors_add_the_keyword_that_is_the_way_out() {
        let cuda = Device::new(DeviceType::CUDA, 0);
        let cases = [
            (
                Error::UnsupportedVersion { major: 2, minor: 0 },
                "ask the producer for max_version=(1, 3)",
            ),
            (
                Error::DTypeNeedsNewerVersion {
                    dtype: "float8_e4m3fn".to_owned(),
                    needed_minor: 1,
                    asked: "DLPack 1.0".to_owned(),
                },
                "must pass max_version=(1, 1) or newer",
            ),
            (
                Error::ReadOnlyLegacy,
                "ask with max_version=(1, 0) or newer, or pass copy=True",
            ),
            (Error::ReadOnly, "make a copy with copy=True"),
            (
                Error::CopyRequired {
                    reason: "the data is not aligned to 8 bytes".to_owned(),
                },
                "pass copy=None or copy=True instead of copy=False",
            ),
            (
                Error::NotHostAccessible { device: cuda },
                "pass device=\"cpu\" to copy it to the host",
            ),
            (
                Error::UnsupportedDevice {
                    from: cuda,
                    to: Device::new(DeviceType(14), 0),
                    reason: "dlbridge can allocate only host memory and CUDA memory".to_owned(),
                },
                "from_dlpack(x, device=...)",
            ),
            (
                Error::Nulls {
                    format: "f".to_owned(),
                    count: 1,
                    what: "null value",
                },
                "dlbridge.from_arrow(x, fill_null=0)",
            ),
            (
                Error::NonNativeByteOrder {
                    what: "buffer format \">f8\"".to_owned(),
                },
                "arr.astype(arr.dtype.newbyteorder('='))",
            ),
        ];
        Python::initialize();
        Python::attach(|py| {
            for (error, hint) in cases {
                let core = error.to_string();
                assert!(
                    !core.contains('='),
                    "a Python keyword in the core's message: {core}"
                );
                let raised = PyErr::from(error);
                assert!(raised.is_instance_of::<PyBufferError>(py), "{raised}");
                let text = raised.value(py).to_string();
                assert!(text.starts_with(&format!("{core}; ")), "{text}");
                assert!(text.contains(hint), "{text}");
            }
            let strided = PyErr::from(Error::NotContiguous {
                shape: vec![3, 2],
                strides: vec![1, 3],
            });
            assert!(strided.is_instance_of::<PyBufferError>(py));
            let text = strided.value(py).to_string();
            assert!(
                text.contains("not C-contiguous") && text.contains("copy=True"),
                "{text}"
            );
            assert!(!text.contains("copy=False"), "{text}");
            let wrong = PyErr::from(Error::WrongDType {
                held: "float32".to_owned(),
                asked: "float64".to_owned(),
            });
            assert!(wrong.is_instance_of::<PyTypeError>(py));
            assert!(
                wrong
                    .value(py)
                    .to_string()
                    .contains("x.astype(\"float64\")")
            );
            let plain = PyErr::from(Error::InvalidArgument("bad order 'Q'".to_owned()));
            assert!(plain.is_instance_of::<PyValueError>(py));
            assert_eq!(plain.value(py).to_string(), "bad order 'Q'");
        });
    }
}
