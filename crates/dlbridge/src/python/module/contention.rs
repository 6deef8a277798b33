//! The objects every call touches, kept out of reference-count contention on free-threaded
//! interpreters.
//!
//! There, a reference that a thread takes to an object another thread created is an atomic
//! operation on a count in the object's header, so threads that all call `dlbridge.from_dlpack`
//! would pass that count's cache line back and forth on every call. Two objects are touched so:
//!
//! - the function itself, to which the interpreter takes a reference when it loads it. CPython
//!   spares its own module functions this: those that `PyModule_AddFunctions` makes get deferred
//!   reference counting, which the interpreter's references skip. The functions PyO3 and
//!   [`super::fastcall`] make one at a time do not, so [`defer`] asks for it, through
//!   `PyUnstable_Object_EnableDeferredRefcount` (CPython 3.14's public, unstable C API);
//! - the `Tensor` type, to which every instance holds a reference, dropped by PyO3's
//!   `tp_dealloc` with `Py_DECREF`. CPython keeps such references per thread only for the types
//!   of instances it frees itself (its internal `_Py_DECREF_TYPE`), so [`immortalize`] makes the
//!   class types immortal, as CPython makes its static types: `Py_INCREF` and `Py_DECREF` then
//!   leave their counts alone. CPython 3.14 does this through `_Py_SetImmortal`, exported
//!   though not documented (the public `PyUnstable_SetImmortal` of 3.15 takes only objects no
//!   one else refers to, which a type never is).
//!
//! On builds with the GIL a reference is a plain increment and there is nothing to do.
//!
//! Which build gets what, by the cfgs PyO3 sets for it:
//!
//! | build                                | cfgs                                           | [`defer`] | [`immortalize`] |
//! |--------------------------------------|------------------------------------------------|-----------|-----------------|
//! | `cp314t` wheel (free-threaded 3.14)  | `Py_GIL_DISABLED`                              | yes       | yes             |
//! | version-specific free-threaded 3.15+ | `Py_GIL_DISABLED`, `Py_3_15`                   | yes       | no              |
//! | `abi3.abi3t` wheel (3.15+, any)      | `Py_LIMITED_API`, `Py_GIL_DISABLED`, `Py_3_15` | no        | no              |
//! | abi3 wheel; other GIL builds         | `Py_LIMITED_API`, or neither                   | no        | no              |
//!
//! The stable ABI (abi3t included) has neither function, so the `abi3.abi3t` wheel leaves
//! both objects' counts shared on 3.15t: correct, only slower when many threads call in.

use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyType};

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
#[cfg(all(Py_GIL_DISABLED, not(Py_LIMITED_API)))]
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

/// Nothing to do on builds with the GIL, and nothing the stable ABI allows on the `abi3t` build.
#[cfg(not(all(Py_GIL_DISABLED, not(Py_LIMITED_API))))]
pub(super) fn defer(_obj: &Bound<'_, PyAny>) {}

/// Make the class type `ty` immortal on free-threaded CPython 3.14 (see the module
/// documentation). The type must be one of this crate's `#[pyclass]` types, which PyO3 keeps
/// alive for the rest of the process.
#[cfg(all(Py_GIL_DISABLED, not(Py_LIMITED_API), not(Py_3_15)))]
pub(super) fn immortalize(ty: &Bound<'_, PyType>) {
    use pyo3::ffi;
    unsafe extern "C" {
        // `Include/internal/pycore_object.h`, exported by CPython 3.14 (`PyAPI_FUNC`).
        fn _Py_SetImmortal(op: *mut ffi::PyObject);
    }
    // The call stops the garbage collector tracking `ty` and stores an immortal count, with
    // plain stores: a thread changing the count at that moment can only undo the immortality
    // (the owning thread's non-atomic store) or leave the count too high, never make it reach
    // zero, since the reference PyO3 keeps for the rest of the process is counted either by the
    // owning thread, whose count then stays above zero, or, once merged, in a count that no
    // thread owns and whose immortality nothing undoes.
    // SAFETY: `ty` is a live heap type, the thread is attached, and no count can reach zero
    // (above); immortal, the type is never freed, as PyO3 never frees it.
    unsafe { _Py_SetImmortal(ty.as_ptr()) };
}

/// Nothing to do on builds with the GIL; none is done on interpreters after 3.14, which
/// dlbridge has not been measured on, nor on the `abi3t` build, whose stable ABI lacks it.
#[cfg(not(all(Py_GIL_DISABLED, not(Py_LIMITED_API), not(Py_3_15))))]
pub(super) fn immortalize(_ty: &Bound<'_, PyType>) {}
