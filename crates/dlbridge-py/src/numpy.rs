//! `dlbridge.to_numpy`: NumPy arrays built directly with NumPy's C API, falling back to the
//! Python implementation (`dlbridge.host._to_numpy_general`) for everything else.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict};

use dlbridge::python::{capsule, import, numpy_api::Api};
use dlbridge::Device;

use crate::tensor::PyTensor;

/// A host NumPy array with the values of ``x``, from any library on any device.
///
/// ``convert(x, numpy, device="cpu", copy=copy)``: zero-copy for host data NumPy can take, a
/// device-to-host copy otherwise (asked of the producer: dpnp, CuPy, torch...). Read-only
/// sources stay read-only unless copied. bfloat16 and float8 come back as ml_dtypes arrays
/// (zero-copy; BufferError naming ``pip install ml_dtypes`` without it). ``copy=False``:
/// BufferError when a copy would be needed (device data, data that must be realigned).
/// Framework state is not resolved silently: a torch tensor that requires grad or has its
/// conjugate/negative bit set is a BufferError naming ``.detach()`` / ``.resolve_conj()``.
#[pyfunction]
#[pyo3(signature = (x, *, copy=None))]
pub fn to_numpy<'py>(
    x: &Bound<'py, PyAny>,
    copy: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(array) = native(x, copy) {
        return Ok(array);
    }
    static GENERAL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let py = x.py();
    let general = GENERAL.import(py, "dlbridge.host", "_to_numpy_general")?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("copy", copy)?;
    general.call((x,), Some(&kwargs))
}

/// The array when this path covers the call, else None (the general path then runs with the
/// same arguments and decides, errors included). Covered: NumPy arrays themselves (returned
/// as they are unless ``copy=True``), and anything dlbridge imports into plain CPU memory
/// with a dtype NumPy has built in, which becomes an ndarray over the same memory (or over
/// the copy ``copy=True`` or misaligned data asks for) whose base is the dlbridge Tensor,
/// read-only when the data is. Raw DLPack capsules are left alone (importing consumes them).
fn native<'py>(
    x: &Bound<'py, PyAny>,
    copy: Option<&Bound<'py, PyAny>>,
) -> Option<Bound<'py, PyAny>> {
    let py = x.py();
    let copy = match copy {
        None => None,
        Some(c) if c.is_none() => None,
        Some(c) => Some(c.cast::<PyBool>().ok()?.is_true()),
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
        (Some(copied), _) => Bound::new(py, PyTensor(copied, None)).ok()?,
        (None, Some(t)) => t.clone(),
        (None, None) => Bound::new(py, PyTensor(tensor, None)).ok()?,
    };
    let owner = base.clone().into_any();
    api.to_ndarray(&base.get().0, owner).ok()?
}
