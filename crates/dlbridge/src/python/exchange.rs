//! The DLPack C exchange API, consumer side: find a producer type's `DLPackExchangeAPI` table
//! (`__dlpack_c_exchange_api__` capsule, DLPack 1.3, or the 1.2 `__c_dlpack_exchange_api__`
//! int) and import through it without a Python-level `__dlpack__` call.

use pyo3::exceptions::PyBufferError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::ffi::dlpack::{DLPACK_MAJOR_VERSION, DLPackExchangeAPI, DLPackExchangeAPIHeader};
use crate::managed::ManagedTensor;
use crate::python::capsule::{EXCHANGE_API, is_capsule};
use crate::tensor::Tensor;

/// A table of process lifetime (the protocol's promise).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Api(&'static DLPackExchangeAPI);

/// The usable exchange API of a type, if any (see [`crate::python::protocols`] for caching).
pub(crate) fn discover(ty: &Bound<'_, PyType>) -> PyResult<Option<Api>> {
    let py = ty.py();
    let header: *const DLPackExchangeAPIHeader =
        if let Some(capsule) = ty.getattr_opt(intern!(py, "__dlpack_c_exchange_api__"))? {
            if !is_capsule(&capsule) {
                return Ok(None);
            }
            // SAFETY: `capsule` is a capsule; a NULL result (other name) sets an error we clear.
            let ptr =
                unsafe { pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), EXCHANGE_API.as_ptr()) };
            if ptr.is_null() {
                // SAFETY: clear the name-mismatch error just raised.
                unsafe { pyo3::ffi::PyErr_Clear() };
                return Ok(None);
            }
            ptr.cast()
        } else if let Some(address) = ty.getattr_opt(intern!(py, "__c_dlpack_exchange_api__"))? {
            match address.extract::<usize>() {
                Ok(a) if a != 0 => a as *const DLPackExchangeAPIHeader,
                _ => return Ok(None),
            }
        } else {
            return Ok(None);
        };
    Ok(find_major(header).map(Api))
}

/// Walk the `prev_api` chain to a table of our major version.
fn find_major(mut header: *const DLPackExchangeAPIHeader) -> Option<&'static DLPackExchangeAPI> {
    // A chain longer than a few links is not a real chain.
    for _ in 0..8 {
        if header.is_null() {
            return None;
        }
        // SAFETY: the producer promises a table of process lifetime; the header is the first
        // field of every version's table, and its version is checked before anything else.
        let h = unsafe { &*header };
        if h.version.major == DLPACK_MAJOR_VERSION {
            // SAFETY: a table of major version 1 is a DLPackExchangeAPI (same layout).
            let api = unsafe { &*header.cast::<DLPackExchangeAPI>() };
            return api
                .managed_tensor_from_py_object_no_sync
                .is_some()
                .then_some(api);
        }
        header = h.prev_api;
    }
    None
}

impl Api {
    /// Export `obj` through the table. Returns `None` when the data is not host-accessible:
    /// the table does not synchronise streams, so device data goes through `__dlpack__`.
    pub(crate) fn import(self, obj: &Bound<'_, PyAny>) -> PyResult<Option<Tensor>> {
        let export = self
            .0
            .managed_tensor_from_py_object_no_sync
            .expect("checked in find_major");
        let mut out = std::ptr::null_mut();
        // SAFETY: `obj` is of the type the table was found on (cache key), this thread is
        // attached to the interpreter (the table's requirement for its Python entry points), and
        // `out` receives an owned managed tensor or stays NULL with an exception set.
        let status = unsafe { export(obj.as_ptr().cast(), &mut out) };
        // SAFETY: on success `out` is an owned versioned tensor; NULL gives None.
        let managed = unsafe { ManagedTensor::from_versioned(out) };
        let managed = match (status, managed) {
            (0, Some(m)) => m,
            (_, m) => {
                drop(m);
                return Err(PyErr::take(obj.py()).unwrap_or_else(|| {
                    PyBufferError::new_err(
                        "the producer's DLPack exchange API failed without saying why",
                    )
                }));
            }
        };
        let tensor = Tensor::from_managed(managed)?;
        Ok(tensor.device().is_host_accessible().then_some(tensor))
    }
}
