//! The exception in flight, set aside while a capsule destructor runs C API calls that may
//! raise, and put back afterwards: a destructor must never lose or replace it.
//!
//! Interpreters from 3.12 keep one exception object (`PyErr_GetRaisedException`) and deprecate
//! the type/value/traceback triple of `PyErr_Fetch`; the stable ABI dlbridge's wheel targets
//! (3.11) has only the triple, so the build picks by the target's cfgs (see `build.rs`).

use pyo3::ffi;

/// The exception that was in flight when [`SavedException::take`] ran (possibly none).
#[must_use = "an exception set aside must be put back with restore()"]
pub(crate) struct SavedException {
    #[cfg(Py_3_12)]
    raised: *mut ffi::PyObject,
    #[cfg(not(Py_3_12))]
    triple: [*mut ffi::PyObject; 3],
}

impl SavedException {
    /// Takes the exception in flight, leaving none set.
    ///
    /// # Safety
    /// The calling thread is attached to the interpreter.
    pub(crate) unsafe fn take() -> Self {
        #[cfg(Py_3_12)]
        {
            // SAFETY: the caller is attached; this returns a new reference or NULL.
            let raised = unsafe { ffi::PyErr_GetRaisedException() };
            Self { raised }
        }
        #[cfg(not(Py_3_12))]
        {
            let mut triple = [std::ptr::null_mut(); 3];
            let [t, v, tb] = &mut triple;
            // SAFETY: the caller is attached; the three out-pointers are valid and receive new
            // references or NULL.
            unsafe { ffi::PyErr_Fetch(t, v, tb) };
            Self { triple }
        }
    }

    /// Sets the saved exception (or none) as the one in flight again, replacing any raised
    /// since [`take`](Self::take).
    ///
    /// # Safety
    /// The calling thread is attached to the interpreter.
    pub(crate) unsafe fn restore(self) {
        #[cfg(Py_3_12)]
        // SAFETY: the caller is attached; the reference taken by `take` (or NULL) is handed back.
        unsafe {
            ffi::PyErr_SetRaisedException(self.raised)
        };
        #[cfg(not(Py_3_12))]
        {
            let [t, v, tb] = self.triple;
            // SAFETY: the caller is attached; the three references taken by `take` are handed
            // back (PyErr_Restore steals them).
            unsafe { ffi::PyErr_Restore(t, v, tb) };
        }
    }
}
