//! The `dlbridge._native` extension module: `Tensor`, `DType`, `Device` and `from_dlpack`.
//! Everything here is a thin shell over the `dlbridge` crate.

mod arrow;
mod exchange;
mod fastcall;
mod numpy;
mod pyarrow;
mod tensor;
mod types;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use dlbridge::python::{import, shared};
use dlbridge::Device;

use crate::tensor::{import_object, PyTensor};
use crate::types::{PyDType, PyDevice};

/// `dlbridge.from_dlpack`: import any array-like as a Tensor, zero-copy when possible
/// (installed as a raw fastcall function by [`fastcall`]).
fn from_dlpack<'py>(
    x: &Bound<'py, PyAny>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyTensor>> {
    if let Ok(t) = x.cast_exact::<PyTensor>() {
        return match import::apply_policy(&t.get().0, device, copy)? {
            None => Ok(t.clone()),
            Some(copied) => Bound::new(x.py(), PyTensor(copied, t.get().1.clone())),
        };
    }
    Bound::new(x.py(), import_object(x, device, copy)?)
}

/// Copy the elements of `src` into the existing, writable tensor `dst` (`numpy.copyto`
/// without casting): `src` is imported like `from_dlpack` and broadcast to `dst`'s shape.
#[pyfunction]
fn copyto(dst: &Bound<'_, PyTensor>, src: &Bound<'_, PyAny>) -> PyResult<()> {
    let src = match src.cast::<PyTensor>() {
        Ok(t) => t.get().0.clone(),
        Err(_) => import::from_object(src, None, None)?,
    };
    // SAFETY: the GIL is held for the whole copy, so no Python code can touch `dst`'s memory
    // meanwhile; foreign threads writing the same memory are the caller's concern, exactly as
    // with numpy.copyto.
    unsafe { dlbridge::copy::copy_into(&dst.get().0, &src) }?;
    Ok(())
}

/// The reconstructor that pickles of a Tensor name (see `Tensor.__reduce_ex__`): validates the
/// metadata against the bytes of `payload` and views them.
#[pyfunction]
fn _rebuild(payload: &Bound<'_, PyAny>, metadata: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let (tensor, names) = dlbridge::python::pickle::rebuild(payload, metadata)?;
    Ok(PyTensor(tensor, names.map(Into::into)))
}

/// `dlbridge.to_shared(x, /)`: `x` (imported like `from_dlpack`) in memory that other
/// processes on this machine can open, which `multiprocessing` sends as a handle rather than
/// as data: host data copied once into anonymous shared memory (a Linux memfd), CUDA device
/// data exported in place through CUDA IPC (the source must then outlive every receiver).
#[pyfunction]
fn to_shared(x: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let PyTensor(tensor, names) = match x.cast::<PyTensor>() {
        Ok(t) => PyTensor(t.get().0.clone(), t.get().1.clone()),
        Err(_) => import_object(x, None, None)?,
    };
    Ok(PyTensor(shared::to_shared(&tensor)?, names))
}

/// The handle of a shared tensor, `("memfd", fd, length, metadata)` or
/// `("cuda_ipc", handle, allocation_size, metadata)`, or None (see `to_shared`).
#[pyfunction]
fn _shared_handle<'py>(t: &Bound<'py, PyTensor>) -> PyResult<Option<Bound<'py, PyTuple>>> {
    shared::handle(t.py(), &t.get().0, t.get().1.as_deref())
}

/// Map the memfd `fd` (duplicated; the caller closes its own) sent by `_shared_handle`.
#[pyfunction]
fn _map_shared(fd: i32, length: usize, metadata: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let (tensor, names) = shared::map(fd, length, metadata)?;
    Ok(PyTensor(tensor, names.map(Into::into)))
}

/// Open a CUDA IPC handle sent by `_shared_handle` (in another process than the sender).
#[pyfunction]
fn _open_cuda_ipc(
    handle: &[u8],
    allocation_size: usize,
    metadata: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let (tensor, names) = shared::open_cuda(handle, allocation_size, metadata)?;
    Ok(PyTensor(tensor, names.map(Into::into)))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "DLPACK_VERSION",
        (
            dlbridge::ffi::dlpack::DLPACK_MAJOR_VERSION,
            dlbridge::ffi::dlpack::DLPACK_MINOR_VERSION,
        ),
    )?;
    m.add_class::<PyTensor>()?;
    fastcall::install(m)?;
    m.add_class::<PyDType>()?;
    m.add_class::<PyDevice>()?;
    m.add_function(wrap_pyfunction!(copyto, m)?)?;
    m.add_function(wrap_pyfunction!(_rebuild, m)?)?;
    m.add_function(wrap_pyfunction!(to_shared, m)?)?;
    m.add_function(wrap_pyfunction!(_shared_handle, m)?)?;
    m.add_function(wrap_pyfunction!(_map_shared, m)?)?;
    m.add_function(wrap_pyfunction!(_open_cuda_ipc, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::from_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(numpy::to_numpy, m)?)?;
    Ok(())
}
