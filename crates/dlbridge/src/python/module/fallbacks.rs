//! What the dlbridge Python package hands this module at import, so that calls cross the
//! language boundary one way: Python calls Rust, and Rust reaches Python code only through
//! the callables registered here, never by importing a module of the package by name.
//!
//! `dlbridge/__init__.py` calls `_native._register_fallbacks(...)` once. A user's extension
//! that links this crate has its own statics, which nothing registers: its calls that would
//! need a fallback raise the error of [`missing`] (or dlbridge's own refusal), naming the
//! dlbridge package's function that does the whole job.

use pyo3::exceptions::PyImportError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// The Python functions registered by the dlbridge package.
struct Fallbacks {
    /// `to_numpy`'s general path: `(x, *, copy) -> ndarray`, for what the native path leaves.
    to_numpy: Py<PyAny>,
    /// A copy or move made by the array library that owns the memory:
    /// `(tensor, *, device, copy) -> Tensor`, for memory dlbridge cannot copy itself (oneAPI).
    by_library: Py<PyAny>,
}

static FALLBACKS: PyOnceLock<Fallbacks> = PyOnceLock::new();

/// `_native._register_fallbacks(to_numpy, by_library)`: called once by the dlbridge package
/// as it is imported (a second call changes nothing: the first registration stays).
#[pyfunction]
pub(super) fn _register_fallbacks(py: Python<'_>, to_numpy: Py<PyAny>, by_library: Py<PyAny>) {
    let _ = FALLBACKS.get_or_init(py, || Fallbacks {
        to_numpy,
        by_library,
    });
}

/// `to_numpy`'s general path, or the error that names the package's `to_numpy`.
pub(super) fn to_numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    match FALLBACKS.get(py) {
        Some(f) => Ok(f.to_numpy.bind(py)),
        None => Err(missing("to_numpy of this array", "dlbridge.to_numpy(x)")),
    }
}

/// The library-made copy, when the dlbridge package registered it.
pub(super) fn by_library(py: Python<'_>) -> Option<&Bound<'_, PyAny>> {
    FALLBACKS.get(py).map(|f| f.by_library.bind(py))
}

/// ImportError: `what` needs the dlbridge Python package's general path, which was not
/// registered with this extension; `instead` is the package's call that does it.
fn missing(what: &str, instead: &str) -> PyErr {
    PyImportError::new_err(format!(
        "{what} needs the general path of the dlbridge Python package, which this extension \
         was not given: install the dlbridge package and call {instead}"
    ))
}
