//! DLPack capsules: names, export with a destructor, and consumption (validate, then rename,
//! then own), per the capsule protocol.

use std::ffi::{c_char, CStr};
use std::sync::Arc;

use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::ffi::dlpack::{DLManagedTensor, DLManagedTensorVersioned};
use crate::ffi::managed::ManagedTensor;
use crate::tensor::Tensor;

/// Capsule name of a fresh versioned managed tensor.
pub const VERSIONED: &CStr = c"dltensor_versioned";
/// Capsule name of a consumed versioned managed tensor.
pub const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
/// Capsule name of a fresh legacy managed tensor.
pub const LEGACY: &CStr = c"dltensor";
/// Capsule name of a consumed legacy managed tensor.
pub const USED_LEGACY: &CStr = c"used_dltensor";

/// True when `obj` is a capsule (of any name).
pub fn is_capsule(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: PyCapsule_CheckExact only reads the type of a live object.
    unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) == 1 }
}

/// Wrap a managed tensor in a fresh capsule. The capsule owns it until a consumer renames it.
pub fn export<'py>(py: Python<'py>, managed: ManagedTensor) -> PyResult<Bound<'py, PyAny>> {
    let (name, destructor): (&'static CStr, unsafe extern "C" fn(*mut ffi::PyObject)) =
        if managed.is_versioned() {
            (VERSIONED, destroy_versioned)
        } else {
            (LEGACY, destroy_legacy)
        };
    let raw = managed.into_raw();
    // SAFETY: `raw` is a valid managed tensor whose ownership passes to the capsule; the name is
    // a static C string, as capsules keep the pointer.
    let capsule = unsafe { ffi::PyCapsule_New(raw, name.as_ptr(), Some(destructor)) };
    if capsule.is_null() {
        // SAFETY: PyCapsule_New failed, so we still own `raw`; the flavour matches the name.
        drop(unsafe { reclaim(raw, name == VERSIONED) });
    }
    // SAFETY: a new reference or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, capsule) }
}

/// # Safety
/// `raw` must be an owned managed tensor of the given flavour.
unsafe fn reclaim(raw: *mut std::ffi::c_void, versioned: bool) -> Option<ManagedTensor> {
    if versioned {
        // SAFETY: caller's contract.
        unsafe { ManagedTensor::from_versioned(raw.cast::<DLManagedTensorVersioned>()) }
    } else {
        // SAFETY: caller's contract.
        unsafe { ManagedTensor::from_legacy(raw.cast::<DLManagedTensor>()) }
    }
}

/// Capsule destructor: delete the tensor unless a consumer took it (renamed the capsule).
/// Never raises; an exception in flight is kept.
fn destroy(capsule: *mut ffi::PyObject, fresh: &CStr, used: &CStr, versioned: bool) {
    // SAFETY: called by CPython with the GIL held on a live capsule; the in-flight exception is
    // saved first and restored last, and pointers are only taken under the exact fresh name.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, used.as_ptr()) == 1 {
            return;
        }
        let (mut t, mut v, mut tb) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        ffi::PyErr_Fetch(&mut t, &mut v, &mut tb);
        let raw = ffi::PyCapsule_GetPointer(capsule, fresh.as_ptr());
        if raw.is_null() {
            ffi::PyErr_WriteUnraisable(capsule);
        } else {
            drop(reclaim(raw, versioned));
        }
        ffi::PyErr_Restore(t, v, tb);
    }
}

unsafe extern "C" fn destroy_versioned(capsule: *mut ffi::PyObject) {
    destroy(capsule, VERSIONED, USED_VERSIONED, true);
}

unsafe extern "C" fn destroy_legacy(capsule: *mut ffi::PyObject) {
    destroy(capsule, LEGACY, USED_LEGACY, false);
}

fn capsule_name(obj: &Bound<'_, PyAny>) -> Option<&'static CStr> {
    // SAFETY: `obj` is a capsule; the returned name, if any, is the NUL-terminated string the
    // capsule keeps (valid as long as the capsule's name is not changed, which we check only
    // against our static names).
    let name: *const c_char = unsafe { ffi::PyCapsule_GetName(obj.as_ptr()) };
    if name.is_null() {
        // SAFETY: clear the error PyCapsule_GetName may have set for a NULL name.
        unsafe { ffi::PyErr_Clear() };
        return None;
    }
    // SAFETY: non-NULL capsule names are NUL-terminated C strings.
    let name = unsafe { CStr::from_ptr(name) };
    [VERSIONED, LEGACY, USED_VERSIONED, USED_LEGACY]
        .into_iter()
        .find(|known| *known == name)
}

/// Consume a DLPack capsule: validate, rename to the `used_` name, and own the tensor.
/// On any failure the capsule is left as it was, so its destructor still deletes the tensor.
pub fn consume(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let (fresh, used, versioned) = match capsule_name(obj) {
        Some(n) if n == VERSIONED => (VERSIONED, USED_VERSIONED, true),
        Some(n) if n == LEGACY => (LEGACY, USED_LEGACY, false),
        Some(_) => {
            return Err(PyBufferError::new_err(
                "this DLPack capsule was already consumed; a capsule can be imported only once, call __dlpack__() again for a new one",
            ))
        }
        None => return Err(PyTypeError::new_err("the capsule is not a DLPack capsule (expected the name \"dltensor\" or \"dltensor_versioned\")")),
    };
    // SAFETY: the capsule is valid under `fresh` (checked by name above).
    let raw = unsafe { ffi::PyCapsule_GetPointer(obj.as_ptr(), fresh.as_ptr()) };
    if raw.is_null() {
        return Err(PyErr::fetch(obj.py()));
    }
    // SAFETY: the pointer of a fresh DLPack capsule of this name is an owned managed tensor of
    // that flavour; we hand ownership back (into_raw) on every failure path below.
    let managed = unsafe { reclaim(raw, versioned) }.expect("checked non-NULL");
    let described = match managed.describe() {
        Ok(d) => d,
        Err(e) => {
            managed.into_raw();
            return Err(e.into());
        }
    };
    // SAFETY: renaming a valid capsule to a static name.
    if unsafe { ffi::PyCapsule_SetName(obj.as_ptr(), used.as_ptr()) } != 0 {
        managed.into_raw();
        return Err(PyErr::fetch(obj.py()));
    }
    Ok(Tensor::from_described(described, Arc::new(managed)))
}
