//! CUDA IPC: a device tensor another process on the same machine opens in place.
//!
//! The driver's contract (`cuIpcGetMemHandle` / `cuIpcOpenMemHandle` / `cuIpcCloseMemHandle`):
//! a handle names a whole allocation, so a view travels as the handle of its allocation's base
//! (`cuMemGetAddressRange`) plus its offset; the receiver opens the handle on the same device,
//! once per import, and closes it when the last tensor using it is gone; a process cannot open
//! a handle it exported itself; the exporting process must keep the allocation alive while
//! receivers use it (CUDA does not count their references).

use std::ffi::c_void;
use std::sync::Arc;

use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::tensor::Described;
use crate::tensor::Tensor;
use crate::wire::Description;

use super::driver::{
    CU_IPC_HANDLE_SIZE, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, CU_STREAM_LEGACY, Context, CuDevicePtr,
    CuIpcMemHandle, Driver, driver,
};
use super::transfer::wait_host_readable;

/// What another process needs to open a tensor's memory: the allocation's handle and size, and
/// the tensor's description relative to the allocation's base.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpcHandle {
    /// The `CUipcMemHandle` bytes.
    pub handle: [u8; CU_IPC_HANDLE_SIZE],
    /// Bytes of the allocation.
    pub allocation_size: usize,
    /// The CUDA device.
    pub device: Device,
    /// The tensor within the allocation (`byte_offset` from its base).
    pub description: Description,
}

/// The owner of a tensor returned by [`to_ipc_shared`]: the source tensor (kept alive) and the
/// handle of its allocation.
struct Exported {
    _source: Tensor,
    handle: CuIpcMemHandle,
    base: CuDevicePtr,
    size: usize,
}

/// The owner of a tensor opened by [`open_ipc_handle`]: closes the handle once, on drop.
struct Opened {
    driver: &'static Driver,
    ctx: Context,
    base: CuDevicePtr,
}

// SAFETY: a device address and a process-wide context handle; closed exactly once, in Drop.
unsafe impl Send for Opened {}
// SAFETY: shared access does nothing with the address.
unsafe impl Sync for Opened {}

impl Drop for Opened {
    fn drop(&mut self) {
        if let Ok(_guard) = self.driver.enter(self.ctx) {
            // SAFETY: `base` was returned by cuIpcOpenMemHandle in this context and is closed
            // exactly once, here, after the last tensor viewing it is gone.
            unsafe { (self.driver.api.cuIpcCloseMemHandle)(self.base) };
        }
    }
}

/// The same tensor (zero-copy), with its allocation exported for other processes: pickled by
/// `multiprocessing`, it travels as an [`IpcHandle`]. Work dlbridge queued on it is waited for
/// first, as is the legacy default stream; work the producer queued on its own streams must be
/// complete before a receiver reads.
pub fn to_ipc_shared(t: &Tensor) -> Result<Tensor> {
    let device = t.device();
    if device.kind != DeviceType::CUDA {
        return Err(Error::UnsupportedDevice {
            from: device,
            to: device,
            reason: "CUDA IPC shares CUDA device memory only".to_owned(),
        });
    }
    let driver = driver()?;
    let ctx = driver.primary_context(device.id)?;
    wait_host_readable(t)?;
    let _guard = driver.enter(ctx)?;
    super::stream::synchronize(driver, CU_STREAM_LEGACY as *mut c_void)?;
    let (mut base, mut size): (CuDevicePtr, usize) = (0, 0);
    // SAFETY: writes the base and size of the allocation containing the address.
    driver.check("cuMemGetAddressRange_v2", unsafe {
        (driver.api.cuMemGetAddressRange_v2)(&mut base, &mut size, t.data_ptr() as CuDevicePtr)
    })?;
    let mut handle = CuIpcMemHandle {
        reserved: [0; CU_IPC_HANDLE_SIZE],
    };
    // SAFETY: writes one handle for the base of a device allocation.
    driver.check("cuIpcGetMemHandle", unsafe {
        (driver.api.cuIpcGetMemHandle)(&mut handle, base)
    })?;
    let owner = Arc::new(Exported {
        _source: t.clone(),
        handle,
        base,
        size,
    });
    Ok(Tensor::from_described(
        described(t, t.raw_data(), t.byte_offset()),
        owner,
    ))
}

fn described(t: &Tensor, data: *mut c_void, byte_offset: u64) -> Described {
    Described {
        data,
        byte_offset,
        device: t.device(),
        dtype: t.dtype(),
        layout: t.layout().clone(),
        readonly: t.is_readonly(),
        is_copied: false,
        subbyte_padded: t.is_subbyte_padded(),
    }
}

/// The [`IpcHandle`] of a tensor made by [`to_ipc_shared`] (or a view of one); `None` for any
/// other tensor.
pub fn ipc_handle(t: &Tensor) -> Option<IpcHandle> {
    let exported = t.owner().downcast_ref::<Exported>()?;
    let mut description = Description::of(t);
    description.byte_offset = (t.data_ptr() as u64).wrapping_sub(exported.base);
    Some(IpcHandle {
        handle: exported.handle.reserved,
        allocation_size: exported.size,
        device: t.device(),
        description,
    })
}

/// Open `handle` in this process (not the one that exported it) and view the tensor it
/// describes, after checking that the description stays within the allocation the driver
/// reports. Read-only when `readonly`.
pub fn open_ipc_handle(handle: &IpcHandle, readonly: bool) -> Result<Tensor> {
    let device = handle.device;
    if device.kind != DeviceType::CUDA {
        return Err(Error::InvalidArgument(format!(
            "a CUDA IPC handle names a CUDA device, not {device}"
        )));
    }
    let driver = driver()?;
    let ctx = driver.primary_context(device.id)?;
    let _guard = driver.enter(ctx)?;
    let mut base: CuDevicePtr = 0;
    let raw = CuIpcMemHandle {
        reserved: handle.handle,
    };
    // SAFETY: writes one device pointer; the handle is passed by value and only read.
    driver.check("cuIpcOpenMemHandle_v2", unsafe {
        (driver.api.cuIpcOpenMemHandle_v2)(&mut base, raw, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
    })?;
    let opened = Arc::new(Opened { driver, ctx, base });
    let (mut found, mut size): (CuDevicePtr, usize) = (0, 0);
    // SAFETY: writes the base and size of the allocation just opened.
    driver.check("cuMemGetAddressRange_v2", unsafe {
        (driver.api.cuMemGetAddressRange_v2)(&mut found, &mut size, base)
    })?;
    // The driver does not promise that the importer sees the exporter's exact size (a mapping
    // may be reported rounded up to its granularity), so only a smaller one is refused; the
    // description is checked against the announced size, which the mapping covers.
    if size < handle.allocation_size {
        return Err(Error::InvalidLayout(format!(
            "the CUDA IPC allocation holds {size} bytes but {} were announced",
            handle.allocation_size
        )));
    }
    let (dtype, layout) = handle.description.check(handle.allocation_size, false)?;
    Ok(Tensor::from_described(
        Described {
            data: base as *mut c_void,
            byte_offset: handle.description.byte_offset,
            device,
            dtype,
            layout,
            readonly,
            is_copied: false,
            subbyte_padded: handle.description.subbyte_padded && dtype.is_subbyte(),
        },
        opened,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::TensorFlags;

    #[test]
    fn host_tensors_have_no_ipc_handle() {
        let t = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
        assert!(ipc_handle(&t).is_none());
        assert!(matches!(
            to_ipc_shared(&t),
            Err(Error::UnsupportedDevice { .. })
        ));
    }

    #[test]
    fn opening_needs_a_cuda_device_and_a_driver() {
        let handle = IpcHandle {
            handle: [0; CU_IPC_HANDLE_SIZE],
            allocation_size: 4,
            device: Device::CPU,
            description: Description::of(&Tensor::from_vec(vec![1.0f32], &[1]).unwrap()),
        };
        assert!(open_ipc_handle(&handle, false).is_err());
        let on_cuda = IpcHandle {
            device: Device::new(DeviceType::CUDA, 0),
            ..handle
        };
        if crate::cuda::availability().is_err() {
            assert!(matches!(
                open_ipc_handle(&on_cuda, false),
                Err(Error::CudaUnavailable { .. })
            ));
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn ipc_handles_name_the_allocation_base() {
        use crate::dtype::DType;
        use crate::layout::Layout;
        let host = Tensor::from_vec((0..1024).map(|x| x as f32).collect(), &[1024]).unwrap();
        let cuda0 = Device::new(DeviceType::CUDA, 0);
        let d = crate::cuda::copy_to_device(&host, cuda0).unwrap();
        // A view 400 bytes into the allocation.
        let layout = Layout::contiguous(&[10], 4).unwrap();
        // SAFETY: 10 floats from element 100 of a 1024-float device allocation kept alive by
        // the owner; never read on the host.
        let view = unsafe {
            Tensor::from_raw_parts(
                d.raw_data(),
                d.byte_offset() + 400,
                cuda0,
                DType::FLOAT32,
                layout,
                TensorFlags::WRITABLE,
                Arc::new(d.clone()),
            )
        }
        .unwrap();
        let shared = to_ipc_shared(&view).unwrap();
        assert_eq!(shared.data_ptr(), view.data_ptr()); // in place
        let h = ipc_handle(&shared).unwrap();
        assert_eq!(h.device, cuda0);
        assert_eq!(h.description.byte_offset, 400);
        assert!(h.allocation_size >= 4096, "{}", h.allocation_size);
        assert_ne!(h.handle, [0; CU_IPC_HANDLE_SIZE]);
        // The exporting process cannot open its own handle (the driver refuses it): a typed
        // error, never a crash. Should a driver allow it, the view must read right.
        match open_ipc_handle(&h, true) {
            Err(e) => assert!(matches!(e, Error::Cuda { .. }), "{e}"),
            Ok(t) => assert_eq!(
                crate::cuda::copy_to_host(&t)
                    .unwrap()
                    .to_vec::<f32>()
                    .unwrap(),
                (100..110).map(|x| x as f32).collect::<Vec<_>>()
            ),
        }
    }
}
