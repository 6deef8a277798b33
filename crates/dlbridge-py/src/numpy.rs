//! The native path of `dlbridge.to_numpy`: NumPy arrays built directly with NumPy's C API.

use pyo3::prelude::*;
use pyo3::types::PyBool;

use dlbridge::python::{capsule, import, numpy_api::Api};
use dlbridge::Device;

use crate::tensor::{new_tensor, PyTensor};

/// `dlbridge.to_numpy(x, copy=copy)` when this path covers it, else None: the Python
/// implementation then runs with the same arguments and decides (errors included).
///
/// Covered: NumPy arrays themselves (returned as they are unless ``copy=True``), and anything
/// dlbridge imports into plain CPU memory with a dtype NumPy has built in, which becomes an
/// ndarray over the same memory (or over the copy ``copy=True`` or misaligned data asks for)
/// whose base is the dlbridge Tensor, read-only when the data is. Raw DLPack capsules are
/// left to the Python path, as importing consumes them.
#[pyfunction]
#[pyo3(signature = (x, copy))]
pub fn _to_numpy<'py>(
    x: &Bound<'py, PyAny>,
    copy: &Bound<'py, PyAny>,
) -> Option<Bound<'py, PyAny>> {
    let py = x.py();
    let copy = if copy.is_none() {
        None
    } else {
        Some(copy.cast::<PyBool>().ok()?.is_true())
    };
    let api = Api::get(py)?;
    if api.is_ndarray(x) && copy != Some(true) {
        return Some(x.clone());
    }
    let (tensor, given) = match x.cast::<PyTensor>() {
        Ok(t) => (t.get().0.clone(), Some(t)),
        Err(_) if capsule::is_capsule(x) => return None,
        // Only copy=False reaches the import: any copy is made below, on the host.
        Err(_) => (import::import(x, None, copy.filter(|c| !c)).ok()?, None),
    };
    if tensor.device() != Device::CPU {
        return None;
    }
    let base = match (import::apply_policy(&tensor, None, copy).ok()?, given) {
        (Some(copied), _) => new_tensor(py, copied).ok()?,
        (None, Some(t)) => t.clone(),
        (None, None) => new_tensor(py, tensor).ok()?,
    };
    let owner = base.clone().into_any();
    api.to_ndarray(&base.get().0, owner).ok()?
}
