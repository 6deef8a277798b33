//! `Tensor` as an argument and a return value of any PyO3 function: taking a `Tensor` imports
//! the argument as `dlbridge.from_dlpack(x)` does (no device, `copy=None`), and returning one
//! hands Python this crate's `Tensor` class. [`Import`] chooses `device`, `copy` and write
//! access; [`HostTensor`] and [`WritableTensor`] are the common choices as argument types.

use std::ops::{Deref, DerefMut};

use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;

use crate::Device;
use crate::python::{import, numpy_api};
use crate::tensor::Tensor;

use super::fastcall;
use super::tensor::PyTensor;

impl<'a, 'py> FromPyObject<'a, 'py> for Tensor {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        // NumPy arrays, the most common argument, read straight from NumPy's fields: what
        // `import_object` does first for them, without looking up the type's protocols. (The
        // table is found by that lookup, the first time an array comes through it.)
        if let Some(api) = numpy_api::Api::found().filter(|api| api.is_exact_ndarray(&obj)) {
            if let Some(tensor) = api.import(&obj)? {
                return Ok(match import::apply_policy(&tensor, None, None)? {
                    None => tensor,
                    Some(copied) => copied,
                });
            }
        }
        if let Some(t) = super::exact::<PyTensor>(&obj) {
            return Ok(t.get().tensor().clone());
        }
        Ok(import::import_object(&obj, None, None)?.0)
    }
}

impl<'py> IntoPyObject<'py> for Tensor {
    type Target = PyTensor;
    type Output = Bound<'py, PyTensor>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyTensor>> {
        fastcall::install_dlpack_method(py)?;
        Bound::new(py, PyTensor::of(self, None))
    }
}

/// How to import a Python object as a [`Tensor`]: the `device=` and `copy=` of
/// `dlbridge.from_dlpack`, and whether the tensor will be written in place.
///
/// `Import::default()` is what taking a `Tensor` argument does: any device, `copy=None`
/// (zero-copy when possible), read access.
///
/// ```no_run
/// use dlbridge::python::Import;
/// use dlbridge::Device;
/// use pyo3::prelude::*;
///
/// /// Sums a float64 array from any library, copied to the host if it lives elsewhere.
/// #[pyfunction]
/// fn host_sum(x: &Bound<'_, PyAny>) -> PyResult<f64> {
///     let host = Import { device: Some(Device::CPU), ..Import::default() };
///     let t = host.extract(x)?;
///     Ok(t.iter::<f64>()?.sum())
/// }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Import {
    /// The device the tensor must be on (`device=`); `None` keeps the producer's.
    pub device: Option<Device>,
    /// `copy=`: `Some(true)` always copies, `Some(false)` never does (BufferError when a copy
    /// is needed), `None` copies only when needed.
    pub copy: Option<bool>,
    /// The caller's memory will be written in place: refuse read-only data, and (unless
    /// `copy` is `Some(true)`, which asks for a fresh writable copy) refuse to copy, since
    /// writes to a copy would not reach the caller's array. Both refusals are BufferErrors.
    pub writable: bool,
}

impl Import {
    /// Import `obj` as these options say (a `dlbridge.Tensor` of this extension is taken as
    /// it is when no copy or transfer is asked for).
    pub fn extract(&self, obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
        let copy = match self.copy {
            None if self.writable => Some(false),
            other => other,
        };
        let imported = if let Some(t) = super::exact::<PyTensor>(obj) {
            super::tensor::reimported(t, self.device, copy).map(|t| t.get().tensor().clone())
        } else {
            import::import_object(obj, self.device, copy).map(|(t, _)| t)
        };
        let tensor = match imported {
            Err(e) if self.writable && e.is_instance_of::<PyBufferError>(obj.py()) => {
                return Err(PyBufferError::new_err(format!(
                    "this {} argument is written in place, so its data must be used as it is: {}",
                    type_name(obj),
                    e.value(obj.py())
                )));
            }
            other => other?,
        };
        if self.writable && tensor.is_readonly() {
            return Err(PyBufferError::new_err(format!(
                "this {} argument is written in place, but its data is read-only; pass a writable array (numpy.array(x) makes a writable copy, which the caller then holds)",
                type_name(obj)
            )));
        }
        Ok(tensor)
    }
}

/// The name of `obj`'s type, for messages.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

/// A `#[pyfunction]` argument imported to host memory: `from_dlpack(x, device="cpu")`, zero-copy
/// for host data and a copy for device data. Dereferences to the [`Tensor`].
#[derive(Clone, Debug)]
pub struct HostTensor(pub Tensor);

impl<'a, 'py> FromPyObject<'a, 'py> for HostTensor {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let host = Import {
            device: Some(Device::CPU),
            ..Import::default()
        };
        host.extract(&obj).map(HostTensor)
    }
}

/// A `#[pyfunction]` argument whose memory will be written in place: the caller's own array,
/// writable, never a copy (BufferError otherwise, naming the way out). Dereferences to the
/// [`Tensor`].
///
/// The memory still belongs to the caller's array, which Python code (and other imports of
/// the same array) can reach, so safe mutable views ([`Tensor::as_slice_mut`]) refuse it:
/// writing goes through [`Tensor::as_slice_mut_unchecked`], whose contract the function keeps:
/// it makes no other view of the array, and, like NumPy's in-place operations, it documents
/// that no other thread may read or write the array during the call (Python gives arrays no
/// lock, so the GIL does not ensure it: on a free-threaded interpreter, or once the function
/// releases the GIL, other threads run).
///
/// ```no_run
/// use dlbridge::python::WritableTensor;
/// use pyo3::prelude::*;
///
/// /// Doubles a float32 array in place (numpy, torch, ...).
/// #[pyfunction]
/// fn double(mut x: WritableTensor) -> PyResult<()> {
///     // SAFETY: the caller lends the array for the call, with no other thread reading or
///     // writing it meanwhile (this function's documented contract); no other view is made.
///     for v in unsafe { x.as_slice_mut_unchecked::<f32>() }? {
///         *v *= 2.0;
///     }
///     Ok(())
/// }
/// ```
#[derive(Clone, Debug)]
pub struct WritableTensor(pub Tensor);

impl<'a, 'py> FromPyObject<'a, 'py> for WritableTensor {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let in_place = Import {
            writable: true,
            ..Import::default()
        };
        in_place.extract(&obj).map(WritableTensor)
    }
}

macro_rules! tensor_wrapper {
    ($($wrapper:ident),*) => { $(
        impl Deref for $wrapper {
            type Target = Tensor;
            fn deref(&self) -> &Tensor {
                &self.0
            }
        }
        impl DerefMut for $wrapper {
            fn deref_mut(&mut self) -> &mut Tensor {
                &mut self.0
            }
        }
        impl From<$wrapper> for Tensor {
            fn from(wrapper: $wrapper) -> Tensor {
                wrapper.0
            }
        }
    )* };
}
tensor_wrapper!(HostTensor, WritableTensor);
