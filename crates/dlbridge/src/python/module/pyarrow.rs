//! `dlbridge.Tensor.__arrow_array__`: the protocol `pyarrow.array()` asks for before the
//! Arrow PyCapsule interface.
//!
//! A 1-d, unit-stride, aligned host tensor of an integer or float dtype goes through
//! `pyarrow.Array.from_dlpack` (zero-copy, READ_ONLY honoured; the fastest zero-copy
//! constructor pyarrow has, well ahead of importing the PyCapsules). Everything else is built
//! from the tensor's own `__arrow_c_device_array__` capsules by
//! `pyarrow.Array._import_from_c_device_capsule`, exactly what `pyarrow.array()` did before
//! this method existed (and without asking for `__arrow_array__` again). pyarrow 14 and 15,
//! which have neither, get `__arrow_c_array__`'s capsules, as their `pyarrow.array()` did.

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use dlbridge::python::arrow;
use dlbridge::{DeviceType, Tensor, TypeCode};

use crate::tensor::{cell_names, PyTensor};

/// The pyarrow objects `__arrow_array__` uses, looked up once.
struct Pyarrow {
    /// `pyarrow.Array.from_dlpack` (pyarrow 16 and later).
    from_dlpack: Option<Py<PyAny>>,
    /// How the capsules are imported.
    import: CapsuleImport,
    /// `pyarrow.DataType`
    data_type: Py<PyAny>,
}

/// The capsule import `pyarrow.array()` itself would use.
enum CapsuleImport {
    /// `pyarrow.Array._import_from_c_device_capsule` with `__arrow_c_device_array__`'s capsules.
    Device(Py<PyAny>),
    /// `pyarrow.Array._import_from_c_capsule` with `__arrow_c_array__`'s capsules (pyarrow 14
    /// and 15, which have no device import).
    Host(Py<PyAny>),
}

static PYARROW: PyOnceLock<Pyarrow> = PyOnceLock::new();

fn pyarrow(py: Python<'_>) -> PyResult<&Pyarrow> {
    PYARROW.get_or_try_init(py, || {
        let pa = py.import("pyarrow")?;
        let array = pa.getattr("Array")?;
        let import = match array.getattr_opt("_import_from_c_device_capsule")? {
            Some(f) => CapsuleImport::Device(f.unbind()),
            None => CapsuleImport::Host(array.getattr("_import_from_c_capsule")?.unbind()),
        };
        Ok(Pyarrow {
            from_dlpack: array.getattr_opt("from_dlpack")?.map(Bound::unbind),
            import,
            data_type: pa.getattr("DataType")?.unbind(),
        })
    })
}

/// True when `pyarrow.Array.from_dlpack` takes the tensor as a primitive array without a
/// copy and with the type the Arrow export would give it: 1-d with unit stride (pyarrow
/// refuses any other stride, even of a single element), aligned, on the host CPU, and an
/// integer or float dtype (booleans export as `arrow.bool8`, which a DLPack import cannot
/// produce).
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
        let array = match &pa.from_dlpack {
            Some(from_dlpack) if dlpack_route(tensor) => from_dlpack.bind(py).call1((slf,))?,
            _ => {
                let schema = requested
                    .map(|ty| ty.call_method0(intern!(py, "__arrow_c_schema__")))
                    .transpose()?;
                let (import, device) = match &pa.import {
                    CapsuleImport::Device(f) => (f, true),
                    CapsuleImport::Host(f) => (f, false),
                };
                let names = cell_names(&slf.get().1);
                let capsules = arrow::export_array(py, tensor, names, schema.as_ref(), device)?;
                import.bind(py).call1(capsules)?
            }
        };
        match requested {
            Some(ty) if !array.getattr(intern!(py, "type"))?.eq(ty)? => {
                array.call_method1(intern!(py, "cast"), (ty,))
            }
            _ => Ok(array),
        }
    }
}
