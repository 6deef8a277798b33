//! Which exchange protocols a Python type offers, looked up once per type.
//!
//! Dunder protocols are looked up on the type, so the answer is cached per type (the cache
//! holds the type strongly, so its address is never reused by another type). Probing an
//! instance for a missing attribute raises and clears an AttributeError, which costs more than
//! the whole exchange; the cache avoids that on every call.

use std::os::raw::c_ulong;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, Ordering};

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};

use crate::python::exchange::{self, Api};
use crate::python::{numpy_api, paddle, pandas, torch};

/// The protocols a type offers.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Protocols {
    /// Its DLPack C exchange API table, if it has a usable one.
    pub exchange: Option<Api>,
    /// `__dlpack__`.
    pub dlpack: bool,
    /// The function every `obj.__dlpack__(...)` of this type calls, when that cannot change
    /// (see [`fixed_method`]): calling it directly skips the attribute lookup.
    pub dlpack_method: Option<&'static Py<PyAny>>,
    /// `__cuda_array_interface__`.
    pub cuda_array_interface: bool,
    /// `__arrow_c_device_array__`.
    pub arrow_device_array: bool,
    /// `__arrow_c_array__`.
    pub arrow_array: bool,
    /// `__arrow_c_stream__`.
    pub arrow_stream: bool,
    /// `__arrow_c_device_stream__`.
    pub arrow_device_stream: bool,
    /// `__array_interface__`.
    pub array_interface: bool,
    /// `torch.Tensor` or a subclass (see [`crate::python::torch`]).
    pub torch_tensor: bool,
    /// Exactly `numpy.ndarray` (not a subclass): NumPy's C-API table, read directly (see
    /// [`crate::python::numpy_api`]).
    pub numpy_ndarray: Option<numpy_api::Api>,
    /// Exactly one of pyarrow's primitive numeric array classes (`pyarrow.lib.Int8Array` ...
    /// `DoubleArray`), whose own `__dlpack__` import uses first (see `import.rs`).
    pub pyarrow_primitive: bool,
    /// `paddle.Tensor` or a subclass (see [`crate::python::paddle`]).
    pub paddle_tensor: bool,
    /// A pandas Series or DataFrame (see [`crate::python::pandas`]).
    pub pandas: Option<pandas::Kind>,
}

/// One cached type; entries are leaked on purpose (they live as long as the process, like the
/// strong reference to the type they hold) so that [`LAST`] can point at them without a lock.
/// Every thread reads the entry of its arrays' type on every import, so it has cache lines of
/// its own (128 bytes: a line and the one fetched with it): a small heap block written by one
/// thread on every call (an owner's count) next to it would make the others' reads miss.
#[repr(align(128))]
struct Entry {
    ty: Py<PyType>,
    protocols: Protocols,
}

static CACHE: Mutex<Vec<&'static Entry>> = Mutex::new(Vec::new());

/// The entry found last: most programs exchange one kind of array over and over.
static LAST: AtomicPtr<Entry> = AtomicPtr::new(std::ptr::null_mut());

/// The protocols `obj`'s type offers.
pub(crate) fn of(obj: &Bound<'_, PyAny>) -> PyResult<Protocols> {
    let ty = obj.get_type();
    let last = LAST.load(Ordering::Acquire);
    if !last.is_null() {
        // SAFETY: LAST only ever holds pointers to leaked, immutable entries.
        let entry = unsafe { &*last };
        if entry.ty.as_ptr() == ty.as_ptr() {
            return Ok(entry.protocols);
        }
    }
    let find =
        |cache: &[&'static Entry]| cache.iter().copied().find(|e| e.ty.as_ptr() == ty.as_ptr());
    let found = find(&CACHE.lock().unwrap_or_else(|e| e.into_inner()));
    let entry = match found {
        Some(e) => e,
        None => {
            // Discovery runs Python code, so it must not hold the lock (another thread could
            // hold the lock while waiting for the GIL this thread holds).
            let protocols = discover(&ty)?;
            let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
            match find(&cache) {
                Some(e) => e,
                None => {
                    let e: &'static Entry = Box::leak(Box::new(Entry {
                        ty: ty.unbind(),
                        protocols,
                    }));
                    cache.push(e);
                    e
                }
            }
        }
    };
    LAST.store((entry as *const Entry).cast_mut(), Ordering::Release);
    Ok(entry.protocols)
}

fn discover(ty: &Bound<'_, PyType>) -> PyResult<Protocols> {
    let py = ty.py();
    Ok(Protocols {
        exchange: exchange::discover(ty)?,
        dlpack: ty.hasattr(intern!(py, "__dlpack__"))?,
        dlpack_method: fixed_method(ty, intern!(py, "__dlpack__"))?,
        cuda_array_interface: ty.hasattr(intern!(py, "__cuda_array_interface__"))?,
        arrow_device_array: ty.hasattr(intern!(py, "__arrow_c_device_array__"))?,
        arrow_array: ty.hasattr(intern!(py, "__arrow_c_array__"))?,
        arrow_stream: ty.hasattr(intern!(py, "__arrow_c_stream__"))?,
        arrow_device_stream: ty.hasattr(intern!(py, "__arrow_c_device_stream__"))?,
        array_interface: ty.hasattr(intern!(py, "__array_interface__"))?,
        torch_tensor: torch::is_tensor_type(ty),
        numpy_ndarray: numpy_api::Api::for_exact_ndarray(ty),
        pyarrow_primitive: is_pyarrow_primitive(ty),
        paddle_tensor: paddle::is_tensor_type(ty),
        pandas: pandas::kind_of(ty),
    })
}

/// The function that `obj.name(...)` calls for every instance `obj` of `ty`, when nothing can
/// change that: the type is immutable (its attributes cannot be reassigned), its instances have
/// no `__dict__` (no instance attribute can shadow the method), and the attribute found first
/// on the MRO is a method descriptor (which `obj.name` binds to `obj`, so that calling it with
/// `obj` as the first argument is the same call). Leaked, like the cache entries: it lives as
/// long as the type, which the cache holds for the rest of the process.
fn fixed_method(
    ty: &Bound<'_, PyType>,
    name: &Bound<'_, PyString>,
) -> PyResult<Option<&'static Py<PyAny>>> {
    let py = ty.py();
    // `tp_flags` is a C `unsigned long`: 64 bits on Linux and macOS, 32 on Windows.
    let flags = |t: &Bound<'_, PyAny>| -> PyResult<c_ulong> {
        t.getattr(intern!(py, "__flags__"))?.extract()
    };
    if flags(ty.as_any())? & ffi::Py_TPFLAGS_IMMUTABLETYPE == 0
        || ty
            .getattr(intern!(py, "__dictoffset__"))?
            .extract::<isize>()?
            != 0
    {
        return Ok(None);
    }
    for class in ty.mro().iter() {
        let namespace = class.getattr(intern!(py, "__dict__"))?;
        if !namespace.contains(name)? {
            continue;
        }
        let attr = namespace.get_item(name)?;
        if flags(attr.get_type().as_any())? & ffi::Py_TPFLAGS_METHOD_DESCRIPTOR == 0 {
            return Ok(None);
        }
        return Ok(Some(Box::leak(Box::new(attr.unbind()))));
    }
    Ok(None)
}

/// pyarrow's array classes for integers and floats, in module `pyarrow.lib`; subclasses
/// (`TimestampArray`, extension arrays...) are other types and do not count.
const PYARROW_PRIMITIVE_ARRAYS: [&str; 11] = [
    "Int8Array",
    "Int16Array",
    "Int32Array",
    "Int64Array",
    "UInt8Array",
    "UInt16Array",
    "UInt32Array",
    "UInt64Array",
    "HalfFloatArray",
    "FloatArray",
    "DoubleArray",
];

fn is_pyarrow_primitive(ty: &Bound<'_, PyType>) -> bool {
    // A type without a usable `__module__` is simply not one of them.
    let (Ok(module), Ok(name)) = (ty.module(), ty.qualname()) else {
        return false;
    };
    module.to_cow().is_ok_and(|m| m == "pyarrow.lib")
        && name
            .to_cow()
            .is_ok_and(|n| PYARROW_PRIMITIVE_ARRAYS.contains(&&*n))
}
