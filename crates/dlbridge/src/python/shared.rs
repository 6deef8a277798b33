//! `dlbridge.to_shared` and the handles `multiprocessing` sends for shared tensors (the Python
//! side registers them with `ForkingPickler`; plain pickles always carry the data).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::cuda;
use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::python::errors::buffer_error;
use crate::python::pickle::Metadata;
use crate::tensor::Tensor;

/// `t` in memory other processes can open: host data copied into a memfd (Linux only), CUDA
/// device data exported in place through CUDA IPC.
pub(crate) fn to_shared(t: &Tensor) -> Result<Tensor> {
    if t.device().kind == DeviceType::CUDA {
        return cuda::to_ipc_shared(t);
    }
    #[cfg(target_os = "linux")]
    {
        crate::shared::to_shared(t)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = t;
        Err(Error::SharedMemory(format!(
            "dlbridge.to_shared of host memory is not available on {}: it needs Linux's sealed \
             memfd (memfd_create); pickle the tensor instead, which sends its data",
            platform_name()
        )))
    }
}

/// For a tensor made by [`to_shared`] (or a view of one), what `multiprocessing` sends:
/// `("memfd", fd, length, metadata)`, where `fd` is the memfd to duplicate into the receiver,
/// or `("cuda_ipc", handle, allocation_size, metadata)`; `metadata` describes `t` within those
/// bytes. `None` for any other tensor.
pub(crate) fn handle<'py>(
    py: Python<'py>,
    t: &Tensor,
    dim_names: Option<&[String]>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let names = dim_names.map(<[String]>::to_vec);
    if let Some(ipc) = cuda::ipc_handle(t) {
        let metadata = Metadata {
            description: ipc.description,
            readonly: t.is_readonly(),
            dim_names: names,
            device: ipc.device,
        };
        let handle = PyBytes::new(py, &ipc.handle);
        let fields = (
            "cuda_ipc",
            handle,
            ipc.allocation_size,
            metadata.to_tuple(py)?,
        );
        return Ok(Some(fields.into_pyobject(py)?));
    }
    #[cfg(target_os = "linux")]
    {
        let Some((memory, description)) = crate::shared::handle(t) else {
            return Ok(None);
        };
        let metadata = Metadata {
            description,
            readonly: t.is_readonly(),
            dim_names: names,
            device: Device::CPU,
        };
        let fields = (
            "memfd",
            memory.raw_fd(),
            memory.len(),
            metadata.to_tuple(py)?,
        );
        Ok(Some(fields.into_pyobject(py)?))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (py, names);
        Ok(None)
    }
}

/// The receiving side of [`handle`]: map the memfd `fd` (duplicated here; the caller keeps and
/// closes its own) of `length` bytes and view it as `metadata` says, after checking that the
/// descriptor is a sealed memfd of that size and that the view stays inside it.
pub(crate) fn map(
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
        // The memory is shared with the sending process, as Python's shared memory
        // (`multiprocessing.shared_memory`, torch's `share_memory_`) is: the processes take
        // turns by their own means.
        // SAFETY: dlbridge keeps no reference to it across Python code (its own reads are copies
        // made while one call runs), and the sealed size keeps the mapping valid.
        let memory = Arc::new(unsafe {
            crate::shared::SharedMemory::map(owned, length, !metadata.readonly)
        }?);
        let tensor = crate::shared::view(&memory, &metadata.description, metadata.readonly, false)?;
        Ok((tensor, metadata.dim_names))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (fd, length);
        Err(Error::SharedMemory(format!(
            "a shared host tensor (a Linux memfd) cannot be mapped on {}",
            platform_name()
        ))
        .into())
    }
}

/// The operating system's name as its users write it, for messages about what it lacks.
#[cfg(not(target_os = "linux"))]
fn platform_name() -> &'static str {
    match std::env::consts::OS {
        "macos" => "macOS",
        "windows" => "Windows",
        other => other,
    }
}

/// The receiving side of a `"cuda_ipc"` [`handle`]: open the CUDA IPC `handle` (64 bytes) of an
/// allocation of `allocation_size` bytes on the device `metadata` names, and view the tensor it
/// describes (checked to stay inside the allocation). Fails in the process that exported it.
pub(crate) fn open_cuda(
    handle: &[u8],
    allocation_size: usize,
    metadata: &Bound<'_, PyAny>,
) -> PyResult<(Tensor, Option<Vec<String>>)> {
    let metadata = Metadata::from_tuple(metadata)?;
    let handle: [u8; 64] = handle.try_into().map_err(|_| {
        PyValueError::new_err(format!(
            "a CUDA IPC handle has 64 bytes, not {}",
            handle.len()
        ))
    })?;
    let ipc = cuda::IpcHandle {
        handle,
        allocation_size,
        device: metadata.device,
        description: metadata.description,
    };
    let device = ipc.device;
    let tensor = cuda::open_ipc_handle(&ipc, metadata.readonly).map_err(|e| {
        buffer_error(format!(
            "cannot open the CUDA IPC handle of a tensor on {device} here ({e}); it must be \
             opened on a machine with {device}, in another process than the one that shared it"
        ))
    })?;
    Ok((tensor, metadata.dim_names))
}
