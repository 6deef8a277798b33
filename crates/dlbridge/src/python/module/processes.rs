//! The module functions that carry tensors across processes: the pickle reconstructor,
//! `to_shared`, and the handles `multiprocessing` sends for shared tensors (registered with its
//! `ForkingPickler` by `dlbridge._processes`). Their arguments are positional-only, as the
//! stubs (`_native.pyi`) say and `mypy.stubtest` checks.

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::python::{pickle, shared};

use super::tensor::{PyTensor, import_object};

/// The reconstructor that pickles of a Tensor name (see `Tensor.__reduce_ex__`): validates the
/// metadata against the bytes of `payload` and views them.
#[pyfunction]
#[pyo3(signature = (payload, metadata, /))]
pub(super) fn _rebuild(
    payload: &Bound<'_, PyAny>,
    metadata: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let (tensor, names) = pickle::rebuild(payload, metadata)?;
    Ok(PyTensor::of(tensor, names.map(Into::into)))
}

/// `dlbridge.to_shared(x, /)`: `x` (imported like `from_dlpack`) in memory that other
/// processes on this machine can open, which `multiprocessing` sends as a handle rather than
/// as data: host data copied once into anonymous shared memory (a Linux memfd), CUDA device
/// data exported in place through CUDA IPC (the source must then outlive every receiver).
#[pyfunction]
#[pyo3(signature = (x, /))]
pub(super) fn to_shared(x: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let shared = match super::instance::<PyTensor>(x) {
        Some(t) => PyTensor::of(shared::to_shared(&t.get().0)?, t.get().1.clone()),
        None => {
            let imported = import_object(x, None, None)?;
            PyTensor::of(shared::to_shared(&imported.0)?, imported.1.clone())
        }
    };
    Ok(shared)
}

/// The handle of a shared tensor, `("memfd", fd, length, metadata)` or
/// `("cuda_ipc", handle, allocation_size, metadata)`, or None (see `to_shared`).
#[pyfunction]
#[pyo3(signature = (t, /))]
pub(super) fn _shared_handle<'py>(
    t: &Bound<'py, PyTensor>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    shared::handle(t.py(), &t.get().0, t.get().1.as_deref())
}

/// Map the memfd `fd` (duplicated; the caller closes its own) sent by `_shared_handle`.
#[pyfunction]
#[pyo3(signature = (fd, length, metadata, /))]
pub(super) fn _map_shared(
    fd: i32,
    length: usize,
    metadata: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let (tensor, names) = shared::map(fd, length, metadata)?;
    Ok(PyTensor::of(tensor, names.map(Into::into)))
}

/// Open a CUDA IPC handle sent by `_shared_handle` (in another process than the sender).
#[pyfunction]
#[pyo3(signature = (handle, allocation_size, metadata, /))]
pub(super) fn _open_cuda_ipc(
    handle: &[u8],
    allocation_size: usize,
    metadata: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let (tensor, names) = shared::open_cuda(handle, allocation_size, metadata)?;
    Ok(PyTensor::of(tensor, names.map(Into::into)))
}
