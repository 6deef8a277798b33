//! The classes and functions of the `dlbridge` Python module, defined once for every
//! extension that links this crate: `Tensor` (with `__dlpack__`, the buffer protocol, the array
//! interfaces and the Arrow PyCapsule interface), `DType`, `Device`, `from_dlpack`, `copyto`,
//! `from_arrow`, `to_numpy`, `to_shared` and the reconstructors of pickled and shared tensors.
//!
//! [`register`] adds them to a module. The `dlbridge._native` extension is built from it, and a
//! user's PyO3 extension may call it too: each extension then has its own `Tensor` type object
//! (Python types are per binary) with the same behaviour, and instances of one are imported by
//! the other through DLPack like any other producer's.

mod arguments;
mod arrow;
mod contention;
mod exchange;
mod fallbacks;
mod fastcall;
mod numpy;
mod processes;
mod pyarrow;
mod tensor;
mod types;

use pyo3::PyTypeInfo;
use pyo3::prelude::*;

use crate::Device;
use crate::python::import;

pub use arguments::{HostTensor, Import, WritableTensor};
pub use tensor::PyTensor;
pub(super) use types::{PyDType, PyDevice};

/// `dlbridge.from_dlpack`: import any array-like as a Tensor, zero-copy when possible
/// (installed as a raw fastcall function by [`fastcall`]).
fn from_dlpack<'py>(
    x: &Bound<'py, PyAny>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyTensor>> {
    if let Some(t) = exact::<PyTensor>(x) {
        return tensor::reimported(t, device, copy);
    }
    Bound::new(x.py(), tensor::import_object(x, device, copy)?)
}

/// `obj` as a `T` when its type is exactly `T`'s. Unlike `cast_exact`, a miss makes no error
/// (`CastError`), which would take and drop a reference to `T`'s type object: on a
/// free-threaded interpreter those are atomic operations on a count all threads share, so that
/// threads importing other arrays would pass that cache line back and forth on every call.
fn exact<'a, 'py, T: PyTypeInfo>(obj: &'a Bound<'py, PyAny>) -> Option<&'a Bound<'py, T>> {
    obj.is_exact_instance_of::<T>()
        .then(|| obj.cast_exact::<T>().ok())
        .flatten()
}

/// `obj` as a `T` when it is an instance of `T` (or a subclass), without `cast`'s error on a
/// miss (see [`exact`]).
fn instance<'a, 'py, T: PyTypeInfo>(obj: &'a Bound<'py, PyAny>) -> Option<&'a Bound<'py, T>> {
    obj.is_instance_of::<T>()
        .then(|| obj.cast::<T>().ok())
        .flatten()
}

/// `_native._copy_decision(here, device, copy, needs, fresh, why="")`: [`import::decide`], the
/// copy and device rule of `from_dlpack`, asked by the planner of `convert`: `"keep"`,
/// `"copy"`, `"move"`, `"refuse transfer"` or `"refuse copy"`, and for a refusal the message
/// `from_dlpack` raises for it ([`import::Refusal::error`]; `why`: what needs the copy), else
/// None. `here` and `device` may be None (no device asked: where the data is does not matter).
#[pyfunction]
#[pyo3(signature = (here, device, copy, needs, fresh, why=""))]
fn _copy_decision(
    py: Python<'_>,
    here: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
    needs: bool,
    fresh: bool,
    why: &str,
) -> PyResult<(&'static str, Option<String>)> {
    let parse = |d: Option<&Bound<'_, PyAny>>| {
        d.filter(|d| !d.is_none())
            .map(types::parse_device)
            .transpose()
    };
    let device = parse(device)?;
    let here = parse(here)?.or(device).unwrap_or(Device::CPU);
    let refused = |refusal: import::Refusal| {
        let err: PyErr = refusal.error(here, device, why).into();
        Some(err.value(py).to_string())
    };
    Ok(match import::decide(here, device, copy, needs, fresh) {
        import::Decision::Keep => ("keep", None),
        import::Decision::Copy => ("copy", None),
        import::Decision::Move(_) => ("move", None),
        import::Decision::Refuse(r @ import::Refusal::Transfer) => ("refuse transfer", refused(r)),
        import::Decision::Refuse(r @ import::Refusal::Copy) => ("refuse copy", refused(r)),
    })
}

/// Copy the elements of `src` into the existing, writable tensor `dst` (`numpy.copyto`
/// without casting): `src` is imported like `from_dlpack` and broadcast to `dst`'s shape. As
/// with `numpy.copyto`, no other thread may read or write `dst`'s elements during the copy.
#[pyfunction]
fn copyto(dst: &Bound<'_, PyTensor>, src: &Bound<'_, PyAny>) -> PyResult<()> {
    let src = match instance::<PyTensor>(src) {
        Some(t) => t.get().tensor().clone(),
        None => import::from_object(src, None, None)?,
    };
    // The elements themselves have no lock, in Python as in NumPy: that no other thread reads
    // or writes them during the copy is the caller's rule, exactly as with `numpy.copyto` (on
    // a free-threaded interpreter another thread may run at any moment).
    // SAFETY: `copy_into` writes only inside `dst`'s validated layout and refuses read-only
    // memory; this call runs no Python code and holds no other view of `dst` while it writes.
    unsafe { crate::copy::copy_into(&dst.get().0, &src) }?;
    Ok(())
}

/// Add the classes `Tensor`, `DType` and `Device`, the exception `NoProtocolError`, the
/// functions `from_dlpack`, `copyto`,
/// `from_arrow`, `to_numpy` and `to_shared` (with the reconstructors pickles name), and
/// `DLPACK_VERSION` (the highest DLPack version exported) and `_LEGACY_CAPSULES_WRITABLE` (the
/// packages whose legacy capsules import writable, for the checker) to the module `m`, and
/// `_register_fallbacks`, through which the dlbridge Python package hands over its Python
/// fallbacks at import, and `_copy_decision`, the copy and device rule for the planner.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "DLPACK_VERSION",
        (
            crate::ffi::dlpack::DLPACK_MAJOR_VERSION,
            crate::ffi::dlpack::DLPACK_MINOR_VERSION,
        ),
    )?;
    m.add(
        "_LEGACY_CAPSULES_WRITABLE",
        crate::python::producers::LEGACY_CAPSULES_WRITABLE,
    )?;
    contention::immortalize(&m.py().get_type::<PyTensor>());
    contention::immortalize(&m.py().get_type::<PyDType>());
    contention::immortalize(&m.py().get_type::<PyDevice>());
    m.add_class::<PyTensor>()?;
    fastcall::install(m)?;
    m.add_class::<PyDType>()?;
    m.add_class::<PyDevice>()?;
    m.add(
        "NoProtocolError",
        crate::python::errors::no_protocol_error_type(m.py())?,
    )?;
    contention::add_function(m, wrap_pyfunction!(copyto, m)?)?;
    contention::add_function(m, wrap_pyfunction!(arrow::from_arrow, m)?)?;
    contention::add_function(m, wrap_pyfunction!(numpy::to_numpy, m)?)?;
    contention::add_function(m, wrap_pyfunction!(processes::to_shared, m)?)?;
    contention::add_function(m, wrap_pyfunction!(processes::_rebuild, m)?)?;
    contention::add_function(m, wrap_pyfunction!(processes::_shared_handle, m)?)?;
    contention::add_function(m, wrap_pyfunction!(processes::_map_shared, m)?)?;
    contention::add_function(m, wrap_pyfunction!(processes::_open_cuda_ipc, m)?)?;
    contention::add_function(m, wrap_pyfunction!(fallbacks::_register_fallbacks, m)?)?;
    contention::add_function(m, wrap_pyfunction!(_copy_decision, m)?)?;
    Ok(())
}
