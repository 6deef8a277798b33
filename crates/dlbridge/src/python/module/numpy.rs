//! `dlbridge.to_numpy`: NumPy arrays built directly with NumPy's C API, falling back to the
//! Python implementation the dlbridge package registered ([`fallbacks`]) for everything else.

use pyo3::exceptions::PyImportError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyModule};

use crate::python::{capsule, import, numpy_api::Api, pandas, protocols};
use crate::{Device, Tensor};

use super::fallbacks;
use super::tensor::PyTensor;

/// A host NumPy array with the values of ``x``, from any library on any device.
///
/// ``convert(x, numpy, device="cpu", copy=copy)``: zero-copy for host data NumPy can take, a
/// device-to-host copy otherwise (asked of the producer: dpnp, CuPy, torch...). Read-only
/// sources stay read-only unless copied. bfloat16, float8 and float6 / float4 stored one per
/// byte (as ml_dtypes stores them) come back as ml_dtypes arrays (zero-copy; BufferError
/// naming ``pip install ml_dtypes`` without it). ``copy=False``:
/// BufferError when a copy would be needed (device data, data that must be realigned).
/// Framework state is not resolved silently: a torch tensor that requires grad or has its
/// conjugate/negative bit set is a BufferError naming ``.detach()`` / ``.resolve_conj()``.
#[pyfunction]
#[pyo3(signature = (x, *, copy=None))]
pub(super) fn to_numpy<'py>(
    x: &Bound<'py, PyAny>,
    copy: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let source = match native(x, copy)? {
        Route::Done(array) => return Ok(array),
        Route::General(source) => source,
    };
    let py = x.py();
    let general = fallbacks::to_numpy(py)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item(intern!(py, "copy"), copy)?;
    general.call((source,), Some(&kwargs))
}

/// What the native path did.
enum Route<'py> {
    /// The array.
    Done(Bound<'py, PyAny>),
    /// Not covered: the general path converts this (the argument itself, or the dlbridge
    /// Tensor it was already imported as, so that nothing is read from its producer twice).
    General(Bound<'py, PyAny>),
}

/// The array when this path covers the call, else what the general path should convert.
/// Covered: NumPy arrays themselves (returned as they are unless
/// ``copy=True``), and anything dlbridge imports into plain CPU memory with a dtype NumPy has
/// built in, which becomes an ndarray over the same memory (or over the copy ``copy=True`` or
/// misaligned data asks for) whose base keeps the memory alive (the Tensor given, else a
/// capsule around the memory's owner), read-only when the data is.
/// Raw DLPack capsules are left alone (importing consumes them). An import that fails is an
/// error here: the producer is never asked twice (a stream can be read only once).
fn native<'py>(x: &Bound<'py, PyAny>, copy: Option<&Bound<'py, PyAny>>) -> PyResult<Route<'py>> {
    let py = x.py();
    let general = || Ok(Route::General(x.clone()));
    let copy = match copy {
        None => None,
        Some(c) if c.is_none() => None,
        Some(c) => match c.cast::<PyBool>() {
            Ok(b) => Some(b.is_true()),
            Err(_) => return general(),
        },
    };
    let Some(api) = Api::get(py) else {
        return general();
    };
    if api.is_ndarray(x) && copy != Some(true) {
        return Ok(Route::Done(x.clone()));
    }
    let (tensor, given) = match super::exact::<PyTensor>(x) {
        Some(t) => (t.get().tensor().clone(), Some(t)),
        None if capsule::is_capsule(x) => return general(),
        // A table: the general path asks pandas for one array of its columns.
        None if protocols::of(x)?.pandas == Some(pandas::Kind::DataFrame) => return general(),
        // Only copy=False reaches the import: any copy is made below, on the host.
        None => (import::import(x, None, copy.filter(|c| !c))?, None),
    };
    if tensor.device() != Device::CPU {
        // A transfer is the producer's to make (it knows its device): from `x` itself.
        return general();
    }
    let tensor = import::apply_policy(&tensor, None, copy)?.unwrap_or(tensor);
    // A dtype NumPy lacks is built with ml_dtypes' NumPy dtype when ml_dtypes has it.
    let ml_dtype = if api.supports(tensor.dtype()) {
        None
    } else {
        match ml_dtypes_descr(py, &tensor)? {
            Some(descr) => Some(descr),
            // Without ml_dtypes (the general path names it), or a packed sub-byte tensor: from
            // the tensor already imported.
            None => {
                return Ok(Route::General(
                    Bound::new(py, PyTensor::of(tensor, None))?.into_any(),
                ));
            }
        }
    };
    // The array's base keeps the memory alive: the Tensor it was given, else a capsule around
    // the memory's owner (cheaper than a Tensor object; like NumPy's own DLPack imports).
    let base = match given {
        Some(t) if t.get().0.data_ptr() == tensor.data_ptr() => t.clone().into_any(),
        _ => capsule::owner(py, tensor.owner().clone())?,
    };
    let array = match ml_dtype {
        None => api.to_ndarray(&tensor, base)?,
        Some(descr) => api.to_ndarray_as(&tensor, descr, base)?,
    };
    match array {
        Some(array) => Ok(Route::Done(array)),
        None => Ok(Route::General(x.clone())),
    }
}

/// The ml_dtypes NumPy dtype of a host tensor whose dtype NumPy has no builtin type for
/// (`numpy.dtype(ml_dtypes.bfloat16)`...), when ml_dtypes is installed and has it; `None`
/// otherwise, and for packed sub-byte tensors (ml_dtypes stores float4 and float6 one element
/// per byte, as padded tensors do).
fn ml_dtypes_descr<'py>(py: Python<'py>, tensor: &Tensor) -> PyResult<Option<Bound<'py, PyAny>>> {
    let dtype = tensor.dtype();
    if tensor.device() != Device::CPU
        || dtype.lanes() != 1
        || (dtype.is_subbyte() && !tensor.is_subbyte_padded())
    {
        return Ok(None);
    }
    // Imported once it imports; not installed is asked again next time (it may be installed
    // while the process runs, and the general path's error names it).
    static ML_DTYPES: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let ml_dtypes = match ML_DTYPES.get(py) {
        Some(m) => m.bind(py),
        None => match py.import(intern!(py, "ml_dtypes")) {
            Ok(m) => ML_DTYPES.get_or_init(py, || m.unbind()).bind(py),
            Err(err) if err.is_instance_of::<PyImportError>(py) => return Ok(None),
            Err(err) => return Err(err),
        },
    };
    let Some(scalar) = ml_dtypes.getattr_opt(dtype.name())? else {
        return Ok(None); // an older ml_dtypes
    };
    let numpy_dtype = py
        .import(intern!(py, "numpy"))?
        .getattr(intern!(py, "dtype"))?;
    numpy_dtype.call1((scalar,)).map(Some)
}
