//! CUDA, with the driver library (`libcuda.so.1` / `nvcuda.dll`) loaded at run time: nothing
//! links CUDA, so dlbridge imports and works where there is no GPU, and every CUDA operation
//! there fails with [`Error::CudaUnavailable`](crate::Error::CudaUnavailable) (a BufferError),
//! never a panic.
//!
//! The loader sits behind the `cuda` cargo feature (on by default); without it this module keeps
//! its API, the pure parts (stream rules, routes) work, and every driver call reports the
//! missing feature.
//!
//! - transfers: [`to_device`], [`copy_to_host`], [`copy_to_device`] between the CPU and CUDA
//!   device, pinned (`cuda_host`) and managed (`cuda_managed`) memory; results own their memory
//!   (freed on drop, with the right context current);
//! - DLPack stream semantics: [`parse_stream`] validates a consumer's `stream` (a stream
//!   handle is the caller's promise, so building one is `unsafe`: [`StreamHandle`]),
//!   [`order_for_consumer`] makes the consumer's stream wait for the data (an event, no host
//!   sync), [`import_stream`] is what to pass when importing, [`adopt_producer_stream`] takes a
//!   `__cuda_array_interface__` producer's stream;
//! - [`transfer_stream`] validates the `stream` of a transfer, [`wait_raw_event`] waits for a
//!   foreign `cudaEvent_t` (Arrow's `sync_event`);
//! - the driver's view of an address: [`pointer_info`], [`device_of_pointer`];
//! - CUDA IPC: [`to_ipc_shared`] exports a tensor's allocation, [`ipc_handle`] reads the
//!   handle back, [`open_ipc_handle`] opens it in another process;
//! - handles: [`Stream`], [`Event`].
//!
//! Contexts: dlbridge uses each device's primary context (what the CUDA runtime, PyTorch and
//! CuPy use), makes it current only for the duration of a call and restores the caller's
//! current context afterwards, so no device switch leaks.

mod driver;
mod ipc;
mod memory;
mod stream;
mod transfer;

pub use ipc::{IpcHandle, ipc_handle, open_ipc_handle, to_ipc_shared};
pub use memory::{MemoryKind, PointerInfo, device_of_pointer, pointer_info};
pub use stream::{
    Event, Stream, StreamHandle, StreamRequest, import_stream, parse_stream, wait_raw_event,
};
pub use transfer::{
    Route, adopt_producer_stream, copy_to_device, copy_to_host, order_for_consumer, route,
    to_device, transfer_stream,
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
