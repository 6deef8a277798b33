//! CUDA, with the driver library (`libcuda.so.1` / `nvcuda.dll`) loaded at run time: nothing
//! links CUDA, so dlbridge imports and works where there is no GPU, and every CUDA operation
//! there fails with [`Error::CudaUnavailable`](crate::Error::CudaUnavailable) (a BufferError),
//! never a panic.
//!
//! The environment variable `DLBRIDGE_CUDA_DRIVER`, when set, names the library to load
//! instead (a path; the test suite's strict stand-in for the driver, on machines without a
//! GPU).
//!
//! The loader sits behind the `cuda` cargo feature (on by default); without it this module keeps
//! its API, the pure parts (stream rules, routes) work, and every driver call reports the
//! missing feature.
//!
//! - whether CUDA is there: [`availability`], [`is_available`], [`device_count`];
//! - transfers: [`to_device`], [`copy_to_host`], [`copy_to_device`] between the CPU and CUDA
//!   device, pinned (`cuda_host`) and managed (`cuda_managed`) memory; results own their memory
//!   (freed on drop, with the right context current);
//! - streams: a transfer is ordered on a [`StreamRequest`]: the legacy or per-thread default
//!   stream, or a stream of the caller's ([`StreamHandle`]: building one from a raw handle is
//!   the caller's promise that it is a live stream, so it is `unsafe`); [`wait_raw_event`]
//!   waits for a foreign `cudaEvent_t` (Arrow's `sync_event`);
//! - the driver's view of an address: [`pointer_info`], [`device_of_pointer`];
//! - CUDA IPC: [`to_ipc_shared`] exports a tensor's allocation, [`ipc_handle`] reads the
//!   handle back, [`open_ipc_handle`] opens it in another process;
//! - handles: [`Stream`], [`Event`].
//!
//! The DLPack stream rules of the Python face (validating a consumer's `stream=`, ordering the
//! consumer's stream after the data) are internal to the crate.
//!
//! Contexts: dlbridge uses each device's primary context (what the CUDA runtime, PyTorch and
//! CuPy use), makes it current only for the duration of a call and restores the caller's
//! current context afterwards, so no device switch leaks.

mod driver;
mod ipc;
mod memory;
mod stream;
mod transfer;

#[cfg(all(test, feature = "cuda", target_os = "linux"))]
mod standin_tests;

pub use ipc::{IpcHandle, ipc_handle, open_ipc_handle, to_ipc_shared};
pub use memory::{MemoryKind, PointerInfo, device_of_pointer, pointer_info};
pub use stream::{Event, Stream, StreamHandle, StreamRequest, wait_raw_event};
pub use transfer::{copy_to_device, copy_to_host, to_device};
// The DLPack stream rules of the Python face (`__dlpack__(stream=)`, `to_device(stream=)`,
// `__cuda_array_interface__`'s stream).
#[cfg(feature = "pyo3")]
pub(crate) use stream::{parse_stream, synchronize_raw_event};
#[cfg(feature = "pyo3")]
pub(crate) use transfer::{
    adopt_producer_stream, complete_on_host, copies_from, copies_to, order_for_consumer, route,
    transfer_stream,
};

use crate::error::Result;

/// `Ok` when the CUDA driver is loaded and initialised, else the reason as
/// [`Error::CudaUnavailable`](crate::Error::CudaUnavailable). The first call loads the driver.
pub fn availability() -> Result<()> {
    driver::driver().map(|_| ())
}

/// True when the CUDA driver is loaded and initialised.
pub fn is_available() -> bool {
    availability().is_ok()
}

/// Number of CUDA devices (an error when CUDA is unavailable).
pub fn device_count() -> Result<usize> {
    driver::driver()?.device_count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn availability_is_consistent() {
        assert_eq!(is_available(), availability().is_ok());
        assert_eq!(is_available(), device_count().is_ok());
    }
}
