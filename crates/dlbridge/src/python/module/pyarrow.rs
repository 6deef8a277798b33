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

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::{DeviceType, Tensor, TypeCode};

/// The pyarrow objects `__arrow_array__` uses, looked up once.
pub(super) struct Pyarrow {
    /// `pyarrow.Array.from_dlpack` (pyarrow 16 and later).
    pub(super) from_dlpack: Option<Py<PyAny>>,
    /// How the capsules are imported.
    pub(super) import: CapsuleImport,
    /// `pyarrow.DataType`
    pub(super) data_type: Py<PyAny>,
}

/// The capsule import `pyarrow.array()` itself would use.
pub(super) enum CapsuleImport {
    /// `pyarrow.Array._import_from_c_device_capsule` with `__arrow_c_device_array__`'s capsules.
    Device(Py<PyAny>),
    /// `pyarrow.Array._import_from_c_capsule` with `__arrow_c_array__`'s capsules (pyarrow 14
    /// and 15, which have no device import).
    Host(Py<PyAny>),
}

static PYARROW: PyOnceLock<Pyarrow> = PyOnceLock::new();

pub(super) fn pyarrow(py: Python<'_>) -> PyResult<&Pyarrow> {
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
pub(super) fn dlpack_route(tensor: &Tensor) -> bool {
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
