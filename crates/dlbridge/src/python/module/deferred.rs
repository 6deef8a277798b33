//! The module's functions, given deferred reference counting on free-threaded interpreters.
//!
//! There, a reference that a thread takes to an object it did not create is an atomic operation
//! on a count in the object's header, so threads that all call `dlbridge.from_dlpack` would
//! pass that count's cache line back and forth on every call (the interpreter takes a reference
//! to the function it loads). CPython spares its own module functions this: those that
//! `PyModule_AddFunctions` makes get deferred reference counting, which the interpreter's
//! references skip. The functions PyO3 and [`super::fastcall`] make one at a time do not, so
//! [`defer`] asks for it, through `PyUnstable_Object_EnableDeferredRefcount` (CPython 3.14's
//! public, unstable C API). On builds with the GIL a reference is a plain increment and there is
//! nothing to do.

use pyo3::prelude::*;
use pyo3::types::PyCFunction;

/// Add the function `f` to the module `m`, deferred (see the module documentation).
pub(super) fn add_function<'py>(
    m: &Bound<'py, PyModule>,
    f: Bound<'py, PyCFunction>,
) -> PyResult<()> {
    defer(f.as_any());
    m.add_function(f)
}

/// Give `obj` deferred reference counting on a free-threaded interpreter; `obj` is then freed
/// only by the garbage collector, which suits objects that live as long as the module.
#[cfg(Py_GIL_DISABLED)]
pub(super) fn defer(obj: &Bound<'_, PyAny>) {
    use pyo3::ffi;
    use std::ffi::c_int;
    unsafe extern "C" {
        // Not in pyo3-ffi: `Include/cpython/object.h`, CPython 3.14 and later.
        fn PyUnstable_Object_EnableDeferredRefcount(op: *mut ffi::PyObject) -> c_int;
    }
    // SAFETY: `obj` is a live object and the thread is attached. The call only sets a flag and
    // adjusts the shared count, atomically, so it is sound while other threads use `obj`; it
    // returns 0, doing nothing, for an object it cannot defer (one the collector does not track).
    unsafe { PyUnstable_Object_EnableDeferredRefcount(obj.as_ptr()) };
}

/// Nothing to do on builds with the GIL.
#[cfg(not(Py_GIL_DISABLED))]
pub(super) fn defer(_obj: &Bound<'_, PyAny>) {}
