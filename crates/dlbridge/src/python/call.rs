//! Method calls through vectorcall: no bound method, no kwargs dict, no fresh tuple per call
//! (`obj.__dlpack__(max_version=(1, 3))` is the hot path of every import).

#[cfg(not(windows))]
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyTuple;

use crate::ffi::dlpack::{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};

// Windows: an abi3 extension links python3.dll, which exports these two only from 3.12 on;
// there the calls below go through pyo3's tuple-and-dict API instead.
#[cfg(not(windows))]
unsafe extern "C" {
    // Public CPython API since 3.9 and in the stable ABI since 3.12; present in every CPython
    // this package supports (3.11+), though the 3.11 limited-API headers do not declare it.
    fn PyObject_VectorcallMethod(
        name: *mut ffi::PyObject,
        args: *const *mut ffi::PyObject,
        nargsf: usize,
        kwnames: *mut ffi::PyObject,
    ) -> *mut ffi::PyObject;
    // The same (public since 3.9, stable ABI since 3.12).
    fn PyObject_Vectorcall(
        callable: *mut ffi::PyObject,
        args: *const *mut ffi::PyObject,
        nargsf: usize,
        kwnames: *mut ffi::PyObject,
    ) -> *mut ffi::PyObject;
}

#[cfg(not(windows))]
static KWNAMES: PyOnceLock<Py<PyTuple>> = PyOnceLock::new();
static MAX_VERSION: PyOnceLock<Py<PyTuple>> = PyOnceLock::new();

/// `obj.__dlpack__(stream=None, max_version=(1, 3))`; `method`, when given, is the function
/// that call resolves to (called with `obj` as its first argument, without looking it up).
///
/// `stream=None` is DLPack's "the legacy default stream" for CUDA data, where dlbridge reads
/// and copies it; it is passed rather than left out because torch, whose own default is -1
/// ("no synchronisation"), applies it only when given: left out, data torch was still writing
/// on its current stream would be read too early. Producers of host data take None as nothing.
pub(crate) fn dlpack_with_max_version<'py>(
    obj: &Bound<'py, PyAny>,
    method: Option<&Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    let version = MAX_VERSION.get_or_try_init(py, || {
        PyTuple::new(py, [DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION]).map(Bound::unbind)
    })?;
    #[cfg(windows)]
    {
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item(intern!(py, "stream"), py.None())?;
        kwargs.set_item(intern!(py, "max_version"), version.bind(py))?;
        match method {
            Some(m) => m.bind(py).call((obj,), Some(&kwargs)),
            None => obj.call_method(intern!(py, "__dlpack__"), (), Some(&kwargs)),
        }
    }
    #[cfg(not(windows))]
    {
        // The name is interned: a Python-level `__dlpack__` (JAX, array-api-strict) matches
        // keywords to its parameters by identity first, and a fresh equal string takes CPython's
        // fallback of one rich comparison per parameter (about 300 instructions; 20-30 ns per
        // import).
        let kwnames = KWNAMES.get_or_try_init(py, || {
            PyTuple::new(py, [intern!(py, "stream"), intern!(py, "max_version")]).map(Bound::unbind)
        })?;
        let none = py.None();
        let args = [obj.as_ptr(), none.as_ptr(), version.as_ptr()];
        let result = match method {
            // SAFETY: the thread is attached; `method` is a live callable; `args` holds `self` then
            // two keyword values, all borrowed and alive for the call; `kwnames` is a tuple of
            // two strs.
            Some(m) => unsafe {
                PyObject_Vectorcall(m.as_ptr(), args.as_ptr(), 1, kwnames.as_ptr())
            },
            // SAFETY: as above, with the method looked up by name on `args[0]`.
            None => unsafe {
                let name = intern!(py, "__dlpack__");
                PyObject_VectorcallMethod(name.as_ptr(), args.as_ptr(), 1, kwnames.as_ptr())
            },
        };
        // SAFETY: the result is a new reference or NULL with an exception set.
        unsafe { Bound::from_owned_ptr_or_err(py, result) }
    }
}

/// `function(arg)`, without a tuple for the argument.
pub(crate) fn function1<'py>(
    function: &Bound<'py, PyAny>,
    arg: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    #[cfg(windows)]
    {
        function.call1((arg,))
    }
    #[cfg(not(windows))]
    {
        let args = [arg.as_ptr()];
        // SAFETY: the thread is attached; `function` is a live callable; `args` holds one borrowed object,
        // alive for the call; no keywords; the result is a new reference or NULL with an exception
        // set.
        unsafe {
            let result =
                PyObject_Vectorcall(function.as_ptr(), args.as_ptr(), 1, std::ptr::null_mut());
            Bound::from_owned_ptr_or_err(function.py(), result)
        }
    }
}
