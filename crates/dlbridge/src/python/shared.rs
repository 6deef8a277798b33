//! `dlbridge.to_shared` and the handles `multiprocessing` sends for shared tensors (the Python
//! side registers them with `ForkingPickler`; plain pickles always carry the data).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::python::pickle::Metadata;
use crate::tensor::Tensor;

/// A copy of `t` in memory other processes can map: a memfd for host data (Linux only).
pub fn to_shared(t: &Tensor) -> Result<Tensor> {
    #[cfg(target_os = "linux")]
    {
        crate::shared::to_shared(t)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = t;
        Err(Error::SharedMemory(
            "dlbridge.to_shared needs Linux (memfd_create); pickle the tensor instead, which \
             sends its data"
                .to_owned(),
        ))
    }
}

/// For a tensor made by [`to_shared`] (or a view of one): `(fd, length, metadata)`, where `fd`
/// is the memfd to duplicate into the receiver and `metadata` describes `t` within its
/// `length` bytes; `None` for any other tensor.
pub fn handle<'py>(
    py: Python<'py>,
    t: &Tensor,
    dim_names: Option<&[String]>,
) -> PyResult<Option<(i32, usize, Bound<'py, PyTuple>)>> {
    #[cfg(target_os = "linux")]
    {
        let Some((memory, description)) = crate::shared::handle(t) else {
            return Ok(None);
        };
        let metadata = Metadata {
            description,
            readonly: t.readonly(),
            dim_names: dim_names.map(<[String]>::to_vec),
            device: Device::CPU,
        };
        Ok(Some((
            memory.raw_fd(),
            memory.len(),
            metadata.to_tuple(py)?,
        )))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (py, t, dim_names);
        Ok(None)
    }
}

/// The receiving side of [`handle`]: map the memfd `fd` (duplicated here; the caller keeps and
/// closes its own) of `length` bytes and view it as `metadata` says, after checking that the
/// descriptor is a sealed memfd of that size and that the view stays inside it.
pub fn map(
    fd: i32,
    length: usize,
    metadata: &Bound<'_, PyAny>,
) -> PyResult<(Tensor, Option<Vec<String>>)> {
    let metadata = Metadata::from_tuple(metadata)?;
    if metadata.device != Device::CPU {
        return Err(PyValueError::new_err(format!(
            "a shared-memory handle names device {}; only host memory travels as a memfd",
            metadata.device
        )));
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::{FromRawFd, OwnedFd};
        use std::sync::Arc;

        // SAFETY: dup reads no memory; any integer is allowed (EBADF when it is not open).
        let duplicate = unsafe { libc::dup(fd) };
        if duplicate < 0 {
            let e = std::io::Error::last_os_error();
            return Err(
                Error::SharedMemory(format!("cannot duplicate file descriptor {fd}: {e}")).into(),
            );
        }
        // SAFETY: `duplicate` is a new descriptor that nothing else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(duplicate) };
        let memory = Arc::new(crate::shared::SharedMemory::map(
            owned,
            length,
            !metadata.readonly,
        )?);
        let tensor = crate::shared::view(&memory, &metadata.description, metadata.readonly, false)?;
        Ok((tensor, metadata.dim_names))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (fd, length);
        Err(Error::SharedMemory("shared memory needs Linux".to_owned()).into())
    }
}
