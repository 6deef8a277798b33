//! Python references held by tensors, released under the GIL as CPython accounts for it.
//!
//! A tensor's owner may be dropped on any thread: by a consumer's DLPack deleter, on a Rust
//! thread, or inside code that released the GIL. PyO3's `Python::try_attach` decides from its
//! own per-thread count, which still says "attached" when code called from a PyO3 frame has
//! released the GIL (torch releases it around tensor deallocation, where our deleters run):
//! the reference count would then change without the GIL, and another thread could free the
//! object under us. `PyGILState_Ensure` asks CPython instead. After finalisation nothing is
//! touched and the reference is leaked on purpose.

use std::ptr::NonNull;

use pyo3::ffi;
use pyo3::prelude::*;

/// Run `f` holding the GIL (taken if this thread does not hold it); `None`, with `f` not run,
/// once the interpreter is finalised.
pub(crate) fn with_gil<R>(f: impl FnOnce() -> R) -> Option<R> {
    // SAFETY: Py_IsInitialized may be called at any time; PyGILState_Ensure/Release are paired
    // on this thread and may be called whether or not it holds the GIL, while the interpreter
    // is initialised.
    unsafe {
        if ffi::Py_IsInitialized() == 0 {
            return None;
        }
        let state = ffi::PyGILState_Ensure();
        let result = f();
        ffi::PyGILState_Release(state);
        Some(result)
    }
}

/// A strong reference to a Python object that may be dropped on any thread.
pub(crate) struct HeldObject(NonNull<ffi::PyObject>);

// SAFETY: the object is never used through this handle; the reference is released in Drop
// under the GIL (with_gil), or leaked after finalisation.
unsafe impl Send for HeldObject {}
// SAFETY: see above.
unsafe impl Sync for HeldObject {}

impl HeldObject {
    /// A new strong reference to `obj`.
    pub(crate) fn new(obj: &Bound<'_, PyAny>) -> Self {
        let ptr = obj.clone().into_ptr();
        Self(NonNull::new(ptr).expect("a live object is never NULL"))
    }
}

impl Drop for HeldObject {
    fn drop(&mut self) {
        let ptr = self.0.as_ptr();
        // SAFETY: `ptr` is the strong reference this handle owns, released exactly once, here,
        // with the GIL held.
        with_gil(|| unsafe { ffi::Py_DECREF(ptr) });
    }
}
