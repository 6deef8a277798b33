//! CUDA memory: allocations that a [`Tensor`](crate::Tensor) owns (freed on drop, in the right
//! context) and what the driver knows about a pointer.

use std::ffi::c_void;

use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

use super::driver::{
    CU_MEM_ATTACH_GLOBAL, CU_MEMHOSTALLOC_PORTABLE, CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST,
    CU_MEMORYTYPE_UNIFIED, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_IS_MANAGED,
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUDA_ERROR_INVALID_VALUE, CUDA_SUCCESS, Context, CuDevicePtr,
    Driver, driver,
};
use super::stream::Event;

/// What kind of memory an allocation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AllocKind {
    /// `cuMemAlloc`: device memory.
    Device,
    /// `cuMemHostAlloc(PORTABLE)`: pinned host memory.
    Pinned,
    /// `cuMemAllocManaged(GLOBAL)`: managed (unified) memory.
    Managed,
}

/// Memory allocated by dlbridge through the driver: the owner of a tensor's memory. Dropping
/// it waits for pending copies into it, frees it with its context current, and then releases
/// the source it was copied from.
#[derive(Debug)]
pub(crate) struct Allocation {
    ptr: CuDevicePtr,
    kind: AllocKind,
    ctx: Context,
    driver: &'static Driver,
    /// Recorded after the asynchronous copy that fills the allocation, if any.
    pub(crate) ready: Option<Event>,
    /// The source of that copy, kept alive until the allocation goes.
    pub(crate) keep_alive: Option<Tensor>,
}

// SAFETY: the allocation is a process-wide address freed exactly once (Drop); the driver calls
// made on it are thread-safe.
unsafe impl Send for Allocation {}
// SAFETY: shared access never frees or writes.
unsafe impl Sync for Allocation {}

impl Allocation {
    /// Allocate `bytes` (> 0) of `kind` in context `ctx`.
    pub(crate) fn new(
        driver: &'static Driver,
        ctx: Context,
        kind: AllocKind,
        bytes: usize,
    ) -> Result<Self> {
        let _guard = driver.enter(ctx)?;
        let mut ptr: CuDevicePtr = 0;
        let (call, status) = match kind {
            // SAFETY: writes one device pointer; the context is current.
            AllocKind::Device => ("cuMemAlloc_v2", unsafe {
                (driver.api.cuMemAlloc_v2)(&mut ptr, bytes)
            }),
            AllocKind::Pinned => {
                let mut host: *mut c_void = std::ptr::null_mut();
                // SAFETY: writes one host pointer; the context is current.
                let status = unsafe {
                    (driver.api.cuMemHostAlloc)(&mut host, bytes, CU_MEMHOSTALLOC_PORTABLE)
                };
                ptr = host as CuDevicePtr;
                ("cuMemHostAlloc", status)
            }
            // SAFETY: writes one managed pointer; the context is current.
            AllocKind::Managed => ("cuMemAllocManaged", unsafe {
                (driver.api.cuMemAllocManaged)(&mut ptr, bytes, CU_MEM_ATTACH_GLOBAL)
            }),
        };
        driver.check(call, status)?;
        Ok(Self {
            ptr,
            kind,
            ctx,
            driver,
            ready: None,
            keep_alive: None,
        })
    }

    /// The address.
    pub(crate) fn ptr(&self) -> CuDevicePtr {
        self.ptr
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        if let Some(ready) = &self.ready {
            // Errors cannot be reported from drop; a failed wait means the context is gone.
            let _ = ready.synchronize();
        }
        if let Ok(_guard) = self.driver.enter(self.ctx) {
            // SAFETY: allocated in `new` with this kind, freed exactly once, its context
            // current. Errors (e.g. the driver shutting down at exit) leave nothing to do.
            unsafe {
                match self.kind {
                    AllocKind::Device | AllocKind::Managed => {
                        (self.driver.api.cuMemFree_v2)(self.ptr);
                    }
                    AllocKind::Pinned => {
                        (self.driver.api.cuMemFreeHost)(self.ptr as *mut c_void);
                    }
                }
            }
        }
        // `ready` and `keep_alive` drop after the memory is gone.
    }
}

/// What the CUDA driver says about an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryKind {
    /// Device memory of one GPU.
    Device,
    /// Page-locked (pinned) host memory allocated or registered through CUDA.
    Pinned,
    /// Managed (unified) memory.
    Managed,
    /// Memory CUDA does not know: plain host memory.
    Unregistered,
}

/// Kind and device ordinal of the memory at an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointerInfo {
    /// The memory kind.
    pub kind: MemoryKind,
    /// The CUDA device ordinal the memory belongs to (device memory only).
    pub ordinal: Option<i32>,
}

impl PointerInfo {
    /// The DLPack device for this memory: `cuda:N` for device memory, `cuda_managed:0` and
    /// `cuda_host:0` for managed and pinned memory (the DLPack header's rule: id 0), `cpu` for
    /// memory CUDA does not know.
    pub fn device(self) -> Device {
        match self.kind {
            MemoryKind::Device => Device::new(DeviceType::CUDA, self.ordinal.unwrap_or(0)),
            MemoryKind::Managed => Device::new(DeviceType::CUDA_MANAGED, 0),
            MemoryKind::Pinned => Device::new(DeviceType::CUDA_HOST, 0),
            MemoryKind::Unregistered => Device::CPU,
        }
    }
}

/// Ask the driver what the memory at `address` is (`cuPointerGetAttribute`).
pub fn pointer_info(address: usize) -> Result<PointerInfo> {
    let driver = driver()?;
    let ptr = address as CuDevicePtr;
    // A zeroed 8-byte slot reads back right whether the driver writes a 1-byte bool or a
    // 4-byte int into it (all CUDA platforms are little-endian).
    let query = |attribute, call| -> Result<Option<u64>> {
        let mut value: u64 = 0;
        // SAFETY: the driver writes at most 8 bytes (an int, enum or bool) into `value`.
        let status = unsafe {
            (driver.api.cuPointerGetAttribute)((&mut value as *mut u64).cast(), attribute, ptr)
        };
        match status {
            CUDA_SUCCESS => Ok(Some(value)),
            CUDA_ERROR_INVALID_VALUE => Ok(None),
            other => Err(driver.error(call, other)),
        }
    };
    let Some(memory_type) = query(
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        "cuPointerGetAttribute(MEMORY_TYPE)",
    )?
    else {
        return Ok(PointerInfo {
            kind: MemoryKind::Unregistered,
            ordinal: None,
        });
    };
    let managed = query(
        CU_POINTER_ATTRIBUTE_IS_MANAGED,
        "cuPointerGetAttribute(IS_MANAGED)",
    )?
    .is_some_and(|v| v != 0);
    let kind = match (managed, memory_type as u32) {
        (true, _) | (false, CU_MEMORYTYPE_UNIFIED) => MemoryKind::Managed,
        (false, CU_MEMORYTYPE_DEVICE) => MemoryKind::Device,
        (false, CU_MEMORYTYPE_HOST) => MemoryKind::Pinned,
        (false, other) => {
            return Err(Error::InvalidLayout(format!(
                "the CUDA driver reports memory type {other} for address {address:#x}, which cannot be exchanged (CUDA arrays are not strided memory)"
            )));
        }
    };
    let ordinal = if kind == MemoryKind::Device {
        query(
            CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            "cuPointerGetAttribute(DEVICE_ORDINAL)",
        )?
        .map(|v| v as u32 as i32)
    } else {
        None
    };
    Ok(PointerInfo { kind, ordinal })
}

/// The DLPack device of the memory at `address` (see [`PointerInfo::device`]).
pub fn device_of_pointer(address: usize) -> Result<Device> {
    pointer_info(address).map(PointerInfo::device)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_of_memory_kinds() {
        let info = |kind, ordinal| PointerInfo { kind, ordinal };
        assert_eq!(
            info(MemoryKind::Device, Some(1)).device(),
            Device::new(DeviceType::CUDA, 1)
        );
        assert_eq!(
            info(MemoryKind::Managed, None).device(),
            Device::new(DeviceType::CUDA_MANAGED, 0)
        );
        assert_eq!(
            info(MemoryKind::Pinned, None).device(),
            Device::new(DeviceType::CUDA_HOST, 0)
        );
        assert_eq!(info(MemoryKind::Unregistered, None).device(), Device::CPU);
    }

    #[test]
    fn pointer_queries_need_a_driver() {
        let local = 5u32;
        match pointer_info(&local as *const u32 as usize) {
            Ok(i) => assert_eq!(i.kind, MemoryKind::Unregistered),
            Err(e) => assert!(matches!(e, Error::CudaUnavailable { .. }), "{e}"),
        }
    }
}
