//! DLPack capsules: names, export with a destructor, and consumption (validate, then rename and
//! clear the destructor, then own), per the capsule protocol.

use std::ffi::CStr;
use std::sync::Arc;

use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;

use crate::ffi::dlpack::{DLManagedTensor, DLManagedTensorVersioned};
use crate::managed::ManagedTensor;
use crate::python::raised::SavedException;
use crate::python::{errors, producers};
use crate::tensor::Tensor;

/// Capsule name of a fresh versioned managed tensor.
pub const VERSIONED: &CStr = c"dltensor_versioned";
/// Capsule name of a consumed versioned managed tensor.
pub const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
/// Capsule name of a fresh legacy managed tensor.
pub const LEGACY: &CStr = c"dltensor";
/// Capsule name of a consumed legacy managed tensor.
pub const USED_LEGACY: &CStr = c"used_dltensor";
/// Capsule name of a DLPack C exchange API table (a type's `__dlpack_c_exchange_api__`).
pub(crate) const EXCHANGE_API: &CStr = c"dlpack_exchange_api";

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
    // SAFETY: called by CPython on an attached thread, on a live capsule; the in-flight exception is
    // saved first and restored last, and pointers are only taken under the exact fresh name.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, used.as_ptr()) == 1 {
            return;
        }
        let saved = SavedException::take();
        let raw = ffi::PyCapsule_GetPointer(capsule, fresh.as_ptr());
        if raw.is_null() {
            ffi::PyErr_WriteUnraisable(capsule);
        } else {
            drop(reclaim(raw, versioned));
        }
        saved.restore();
    }
}

unsafe extern "C" fn destroy_versioned(capsule: *mut ffi::PyObject) {
    destroy(capsule, VERSIONED, USED_VERSIONED, true);
}

unsafe extern "C" fn destroy_legacy(capsule: *mut ffi::PyObject) {
    destroy(capsule, LEGACY, USED_LEGACY, false);
}

/// The name of the capsule `obj` (None for a capsule without one); TypeError when `obj` is no
/// capsule.
fn name_of<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Option<&'a CStr>> {
    if !is_capsule(obj) {
        let type_name = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        return Err(PyTypeError::new_err(format!(
            "expected a DLPack capsule, got an object of type {type_name}"
        )));
    }
    // SAFETY: `obj` is a live capsule; PyCapsule_GetName returns its name pointer (possibly
    // NULL), valid while the capsule keeps that name, and never sets an exception for a
    // capsule.
    let ptr = unsafe { ffi::PyCapsule_GetName(obj.as_ptr()) };
    // SAFETY: a non-NULL capsule name is a NUL-terminated C string.
    Ok((!ptr.is_null()).then(|| unsafe { CStr::from_ptr(ptr) }))
}

/// True when `obj` is a DLPack capsule that was consumed already.
fn is_used(obj: &Bound<'_, PyAny>) -> bool {
    matches!(name_of(obj), Ok(Some(n)) if n == USED_VERSIONED || n == USED_LEGACY)
}

/// The flavour of a fresh DLPack capsule: `(fresh name, used name, versioned)`.
fn flavor(obj: &Bound<'_, PyAny>) -> PyResult<(&'static CStr, &'static CStr, bool)> {
    // One read of the name, compared here (PyCapsule_IsValid per candidate name would compare
    // up to four times on every import).
    match name_of(obj)? {
        Some(n) if n == VERSIONED => Ok((VERSIONED, USED_VERSIONED, true)),
        Some(n) if n == LEGACY => Ok((LEGACY, USED_LEGACY, false)),
        Some(n) if n == USED_VERSIONED || n == USED_LEGACY => Err(PyBufferError::new_err(
            "this DLPack capsule was already consumed; a capsule can be imported only once, call __dlpack__() again for a new one",
        )),
        _ => Err(errors::no_protocol_error(
            obj.py(),
            "the capsule is not a DLPack capsule (expected the name \"dltensor\" or \"dltensor_versioned\")".to_owned(),
        )),
    }
}

/// Consume a DLPack capsule: validate, rename to the `used_` name, clear its destructor, and
/// own the tensor. On any failure the capsule is left as it was, so its destructor still
/// deletes the tensor.
///
/// One capsule consumed from several threads at once is taken by exactly one of them; the
/// others get the BufferError of a consumed capsule. The check of the name and the rename run
/// inside a critical section on the capsule (CPython's per-object lock on free-threaded
/// builds; on builds with the GIL, CPython makes it a no-op because the attached thread runs
/// alone), and nothing between them calls into Python code or detaches the thread, so the
/// section is never suspended.
///
/// A legacy capsule imports read-only: it cannot say whether writes are allowed.
pub fn consume(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    pyo3::sync::critical_section::with_critical_section(obj, || consume_locked(obj, false))
}

/// [`consume`] of the capsule `producer.__dlpack__()` returned: a legacy capsule imports
/// writable when `producer`'s library hands out its own, mutable memory
/// ([`producers::legacy_capsule_is_writable`]).
pub(crate) fn consume_from(
    obj: &Bound<'_, PyAny>,
    producer: &Bound<'_, PyAny>,
) -> PyResult<Tensor> {
    // Asked before the critical section, which runs no Python code; the name only ever changes
    // from fresh to used, and a capsule another thread consumed first is refused below anyway.
    let flavor = flavor(obj);
    if flavor.is_err() && is_used(obj) {
        // Not the caller's doing: the producer returned a capsule it had handed out before.
        let producer_type = producer
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        return Err(PyBufferError::new_err(format!(
            "{producer_type}.__dlpack__() returned a DLPack capsule that was already consumed: the producer hands out one capsule for several exports, which only one consumer can import (some releases of tvm-ffi do; python -m dlbridge doctor names them and their fixes); import it once and hand the result to the other consumers"
        )));
    }
    let legacy_writable =
        matches!(flavor, Ok((_, _, false))) && producers::legacy_capsule_is_writable(producer);
    pyo3::sync::critical_section::with_critical_section(obj, || {
        consume_locked(obj, legacy_writable)
    })
}

/// [`consume`], inside the critical section on `obj`; a legacy capsule is writable when
/// `legacy_writable` says so.
fn consume_locked(obj: &Bound<'_, PyAny>, legacy_writable: bool) -> PyResult<Tensor> {
    let (fresh, used, versioned) = flavor(obj)?;
    // SAFETY: the capsule is named `fresh` (checked above); GetPointer sets an exception and
    // returns NULL for a NULL pointer, which is refused here.
    let raw = unsafe { ffi::PyCapsule_GetPointer(obj.as_ptr(), fresh.as_ptr()) };
    if raw.is_null() {
        drop(PyErr::take(obj.py()));
        return Err(PyBufferError::new_err(
            "invalid DLPack capsule: its pointer is NULL; ask the producer for a new one",
        ));
    }
    // SAFETY: the pointer of a fresh DLPack capsule of this name is an owned managed tensor of
    // that flavour; we hand ownership back (into_raw) on every failure path below.
    let managed = unsafe { reclaim(raw, versioned) }.expect("checked non-NULL");
    let mut described = match managed.describe() {
        Ok(d) => d,
        Err(e) => {
            managed.into_raw();
            return Err(e.into());
        }
    };
    if !versioned && legacy_writable {
        described.readonly = false;
    }
    // SAFETY: renaming a valid capsule to a static name.
    if unsafe { ffi::PyCapsule_SetName(obj.as_ptr(), used.as_ptr()) } != 0 {
        managed.into_raw();
        return Err(PyErr::fetch(obj.py()));
    }
    // The renamed capsule's destructor has nothing left to do, and some do it slowly: JAX's
    // asks for the pointer under the fresh name, which raises and clears a ValueError on every
    // import. Removed, as tvm-ffi's consumer does; the rename alone already keeps the tensor
    // from being deleted twice, so a failure here changes nothing.
    // SAFETY: `obj` is a valid capsule; clearing its destructor only changes what its
    // deallocation runs.
    if unsafe { ffi::PyCapsule_SetDestructor(obj.as_ptr(), None) } != 0 {
        drop(PyErr::take(obj.py()));
    }
    Ok(Tensor::from_described(described, Arc::new(managed)))
}

/// A capsule named `dlpack_exchange_api` around a table of process lifetime (no destructor),
/// for a type's `__dlpack_c_exchange_api__` attribute.
pub(crate) fn exchange_api<'py>(
    py: Python<'py>,
    api: &'static crate::ffi::dlpack::DLPackExchangeAPI,
) -> PyResult<Bound<'py, PyAny>> {
    let ptr = (api as *const crate::ffi::dlpack::DLPackExchangeAPI)
        .cast_mut()
        .cast();
    // SAFETY: the table is a static (never freed, never written), the name is a static C string.
    let capsule = unsafe { ffi::PyCapsule_New(ptr, EXCHANGE_API.as_ptr(), None) };
    // SAFETY: a new reference or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, capsule) }
}

/// Capsule name of an [`owner`] capsule.
const OWNER: &CStr = c"dlbridge.owner";

/// A capsule that keeps `owner` (a tensor's memory) alive until it is destroyed: the cheapest
/// Python object to hang foreign views on (a NumPy array's `base`).
pub(crate) fn owner<'py>(
    py: Python<'py>,
    owner: crate::tensor::Owner,
) -> PyResult<Bound<'py, PyAny>> {
    let raw = Box::into_raw(Box::new(owner));
    // SAFETY: `raw` is a live boxed owner whose ownership passes to the capsule (its destructor
    // frees it); the name is a static C string.
    let capsule = unsafe { ffi::PyCapsule_New(raw.cast(), OWNER.as_ptr(), Some(destroy_owner)) };
    if capsule.is_null() {
        // SAFETY: PyCapsule_New failed, so `raw` is still ours.
        drop(unsafe { Box::from_raw(raw) });
    }
    // SAFETY: a new reference or NULL with an exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, capsule) }
}

unsafe extern "C" fn destroy_owner(capsule: *mut ffi::PyObject) {
    // SAFETY: called once by CPython, on an attached thread, on a capsule made by `owner` (the only
    // user of this destructor), whose pointer is a boxed owner under that name.
    unsafe {
        let raw = ffi::PyCapsule_GetPointer(capsule, OWNER.as_ptr());
        if raw.is_null() {
            ffi::PyErr_WriteUnraisable(capsule);
        } else {
            drop(Box::from_raw(raw.cast::<crate::tensor::Owner>()));
        }
    }
}
