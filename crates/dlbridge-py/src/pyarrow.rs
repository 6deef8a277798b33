//! `dlbridge.Tensor.__arrow_array__`: the protocol `pyarrow.array()` asks for before the
//! Arrow PyCapsule interface.
//!
//! A 1-d, contiguous, aligned host tensor of a primitive numeric dtype goes through
//! `pyarrow.Array.from_dlpack` (zero-copy, READ_ONLY honoured; the fastest zero-copy
//! constructor pyarrow has, well ahead of importing the PyCapsules). Everything else is
//! built from the tensor's own `__arrow_c_device_array__` capsules by
//! `pyarrow.Array._import_from_c_device_capsule`, exactly what `pyarrow.array()` did before this
//! method existed (and without asking for `__arrow_array__` again).

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use dlbridge::python::arrow;
use dlbridge::{DeviceType, Tensor, TypeCode};

use crate::tensor::PyTensor;

/// The pyarrow objects `__arrow_array__` uses, looked up once.
struct Pyarrow {
    /// `pyarrow.Array.from_dlpack`
    from_dlpack: Py<PyAny>,
    /// `pyarrow.Array._import_from_c_device_capsule`
    import_device_capsules: Py<PyAny>,
    /// `pyarrow.DataType`
    data_type: Py<PyAny>,
}

static PYARROW: PyOnceLock<Pyarrow> = PyOnceLock::new();

fn pyarrow(py: Python<'_>) -> PyResult<&Pyarrow> {
    PYARROW.get_or_try_init(py, || {
        let pa = py.import("pyarrow")?;
        let array = pa.getattr("Array")?;
        Ok(Pyarrow {
            from_dlpack: array.getattr("from_dlpack")?.unbind(),
            import_device_capsules: array.getattr("_import_from_c_device_capsule")?.unbind(),
            data_type: pa.getattr("DataType")?.unbind(),
        })
    })
}

/// True when `pyarrow.Array.from_dlpack` takes the tensor as a primitive array without a
/// copy and with the type the Arrow export would give it: 1-d with unit stride (pyarrow
/// refuses any other stride, even of a single element), aligned, on the host CPU, and an integer or float dtype Arrow has a primitive type for (booleans are
/// `arrow.bool8`, which DLPack import does not produce).
fn dlpack_route(tensor: &Tensor) -> bool {
    let dtype = tensor.dtype();
    let primitive = dtype.lanes() == 1
        && match dtype.code() {
            TypeCode::INT | TypeCode::UINT => matches!(dtype.bits(), 8 | 16 | 32 | 64),
            TypeCode::FLOAT => matches!(dtype.bits(), 16 | 32 | 64),
            _ => false,
        };
    primitive
        && tensor.strides() == [1]
        && tensor.device().kind == DeviceType::CPU
        && tensor.is_aligned()
}

#[pymethods]
impl PyTensor {
    /// A `pyarrow.Array` over the tensor's memory, zero-copy where the Arrow export is (see
    /// `__arrow_c_device_array__`), keeping the tensor alive; read-only tensors give immutable
    /// buffers. `type` (a `pyarrow.DataType`) is asked of the export, as `pyarrow.array()` asks
    /// the PyCapsule interface, and the result is cast to it when it differs (a safe cast:
    /// pyarrow raises for lossy values, as `pyarrow.array(numpy_array, type=...)` does).
    #[pyo3(signature = (r#type=None))]
    fn __arrow_array__<'py>(
        slf: &Bound<'py, Self>,
        r#type: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let pa = pyarrow(py)?;
        let requested = r#type.filter(|t| !t.is_none());
        if let Some(ty) = requested {
            if !ty.is_instance(pa.data_type.bind(py))? {
                return Err(PyTypeError::new_err(format!(
                    "type must be a pyarrow.DataType or None, not {}",
                    ty.get_type().name()?
                )));
            }
        }
        let tensor = &slf.get().0;
        let array = if dlpack_route(tensor) {
            pa.from_dlpack.bind(py).call1((slf,))?
        } else {
            let schema = requested
                .map(|ty| ty.call_method0(intern!(py, "__arrow_c_schema__")))
                .transpose()?;
            let capsules = arrow::export_array(py, tensor, schema.as_ref(), true)?;
            pa.import_device_capsules.bind(py).call1(capsules)?
        };
        match requested {
            Some(ty) if !array.getattr(intern!(py, "type"))?.eq(ty)? => {
                array.call_method1(intern!(py, "cast"), (ty,))
            }
            _ => Ok(array),
        }
    }
}
