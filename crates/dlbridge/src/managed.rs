//! Owning handles for managed tensors that someone else produced, and the one function that
//! reads and validates their fields.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ffi::dlpack::{
    DLManagedTensor, DLManagedTensorVersioned, DLPACK_MAJOR_VERSION, DLTensor, FLAG_IS_COPIED,
    FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY,
};
use crate::layout::{Layout, MAX_NDIM, check_address_range};
use crate::tensor::{Described, Tensor};

/// An owned managed tensor (legacy or versioned). Dropping it calls the producer's deleter
/// exactly once (or nothing when the deleter is NULL).
#[derive(Debug)]
pub struct ManagedTensor(Managed);

#[derive(Debug)]
enum Managed {
    Versioned(NonNull<DLManagedTensorVersioned>),
    Legacy(NonNull<DLManagedTensor>),
}

// SAFETY: DLPack requires deleters to be callable from any thread (rule O5), and a
// ManagedTensor only reads the struct, which the producer does not change while it is lent.
unsafe impl Send for ManagedTensor {}
// SAFETY: see above; shared access never writes through the pointer.
unsafe impl Sync for ManagedTensor {}

impl ManagedTensor {
    /// Take ownership of a versioned managed tensor. Returns `None` for a NULL pointer.
    ///
    /// # Safety
    /// `ptr` must point to a `DLManagedTensorVersioned` that stays valid until its deleter is
    /// called, and ownership (the duty to call the deleter) passes to the returned value.
    /// Only `version`, `manager_ctx`, `deleter` and `flags` are assumed readable when the
    /// major version is not 1 (the ABI promise of DLPack).
    pub unsafe fn from_versioned(ptr: *mut DLManagedTensorVersioned) -> Option<Self> {
        NonNull::new(ptr).map(|p| Self(Managed::Versioned(p)))
    }

    /// Take ownership of a legacy managed tensor. Returns `None` for a NULL pointer.
    ///
    /// # Safety
    /// `ptr` must point to a valid `DLManagedTensor` that stays valid until its deleter is
    /// called, and ownership passes to the returned value.
    pub unsafe fn from_legacy(ptr: *mut DLManagedTensor) -> Option<Self> {
        NonNull::new(ptr).map(|p| Self(Managed::Legacy(p)))
    }

    /// Give ownership back without calling the deleter (the caller becomes responsible).
    pub fn into_raw(self) -> *mut c_void {
        let ptr = match self.0 {
            Managed::Versioned(p) => p.as_ptr().cast(),
            Managed::Legacy(p) => p.as_ptr().cast(),
        };
        std::mem::forget(self);
        ptr
    }

    /// The versioned struct, for inspection (`None` for a legacy tensor). The pointer is valid
    /// while `self` is alive.
    pub fn as_versioned_ptr(&self) -> Option<*const DLManagedTensorVersioned> {
        match self.0 {
            Managed::Versioned(p) => Some(p.as_ptr()),
            Managed::Legacy(_) => None,
        }
    }

    /// True for a versioned (DLPack >= 1.0) tensor.
    pub fn is_versioned(&self) -> bool {
        matches!(self.0, Managed::Versioned(_))
    }

    /// Read and validate every field. Nothing but the version is read when the major version
    /// is unknown.
    pub(crate) fn describe(&self) -> Result<Described> {
        let (t, flags, strides_required): (&DLTensor, u64, bool) = match self.0 {
            Managed::Versioned(p) => {
                // SAFETY: from_versioned's contract: `version` is at the same offset in every
                // major version; it is read alone, through a raw pointer, before anything
                // assumes the rest of the struct has this version's layout.
                let v = unsafe { std::ptr::addr_of!((*p.as_ptr()).version).read() };
                if v.major != DLPACK_MAJOR_VERSION {
                    return Err(Error::UnsupportedVersion {
                        major: v.major,
                        minor: v.minor,
                    });
                }
                // SAFETY: a major-1 struct is a whole DLManagedTensorVersioned, valid while we
                // own it.
                let m = unsafe { p.as_ref() };
                (&m.dl_tensor, m.flags, v.minor >= 2)
            }
            Managed::Legacy(p) => {
                // SAFETY: from_legacy's contract: the struct is valid while we own it.
                let m = unsafe { p.as_ref() };
                // A legacy capsule cannot say whether writes are allowed: read-only here; the
                // Python import knows the libraries that hand out writable memory.
                (&m.dl_tensor, FLAG_READ_ONLY, false)
            }
        };
        let dtype = DType::from_dl(t.dtype)?;
        let ndim = match usize::try_from(t.ndim) {
            Ok(n) if n <= MAX_NDIM => n,
            _ => return Err(ndim_out_of_range(t.ndim)),
        };
        let (shape, strides): (&[i64], Option<&[i64]>) = if ndim == 0 {
            (&[], None)
        } else if t.shape.is_null() {
            return Err(null_shape(ndim));
        } else {
            // SAFETY: a valid DLTensor has `ndim` readable shape entries when shape is non-NULL.
            let shape = unsafe { std::slice::from_raw_parts(t.shape, ndim) };
            if t.strides.is_null() {
                if strides_required {
                    return Err(null_strides());
                }
                (shape, None)
            } else {
                // SAFETY: a valid DLTensor has `ndim` readable stride entries when non-NULL.
                (
                    shape,
                    Some(unsafe { std::slice::from_raw_parts(t.strides, ndim) }),
                )
            }
        };
        let itemsize = dtype.itemsize();
        let (layout, reach) = Layout::with_reach(shape, strides, itemsize)?;
        let device = Device::from_dl(t.device);
        if layout.size() > 0 {
            if t.data.is_null() {
                return Err(null_data(layout.size()));
            }
            if device.is_host_accessible() {
                check_address_range(t.data as usize, t.byte_offset, reach, itemsize)?;
            }
        }
        Ok(Described {
            data: t.data,
            byte_offset: t.byte_offset,
            device,
            dtype,
            layout,
            readonly: flags & FLAG_READ_ONLY != 0,
            is_copied: flags & FLAG_IS_COPIED != 0,
            subbyte_padded: flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0,
        })
    }
}

#[cold]
#[inline(never)]
fn ndim_out_of_range(ndim: i32) -> Error {
    Error::InvalidLayout(format!("ndim {ndim} is out of range 0..={MAX_NDIM}"))
}

#[cold]
#[inline(never)]
fn null_shape(ndim: usize) -> Error {
    Error::InvalidLayout(format!("shape is NULL but ndim is {ndim}"))
}

#[cold]
#[inline(never)]
fn null_strides() -> Error {
    Error::InvalidLayout("strides is NULL, which DLPack 1.2+ forbids for ndim > 0".to_owned())
}

#[cold]
#[inline(never)]
fn null_data(size: usize) -> Error {
    Error::InvalidLayout(format!("data is NULL but the tensor has {size} elements"))
}

impl Tensor {
    /// Import a managed tensor. On failure the tensor is dropped, so its deleter still runs.
    pub fn from_managed(managed: ManagedTensor) -> Result<Self> {
        let described = managed.describe()?;
        Ok(Self::from_described(described, Arc::new(managed)))
    }
}

impl Drop for ManagedTensor {
    fn drop(&mut self) {
        match self.0 {
            Managed::Versioned(p) => {
                // SAFETY: we own the tensor; `deleter` is at a fixed offset in every major
                // version, and it is called exactly once (this drop), then never touched again.
                unsafe {
                    if let Some(deleter) = (*p.as_ptr()).deleter {
                        deleter(p.as_ptr());
                    }
                }
            }
            Managed::Legacy(p) => {
                // SAFETY: we own the tensor and call its deleter exactly once.
                unsafe {
                    if let Some(deleter) = (*p.as_ptr()).deleter {
                        deleter(p.as_ptr());
                    }
                }
            }
        }
    }
}
