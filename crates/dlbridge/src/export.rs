//! Tensor -> `DLManagedTensorVersioned` / `DLManagedTensor`.
//!
//! One heap block holds the managed struct, the shape and strides, and a share of the tensor's
//! owner; `manager_ctx` points at the block and the deleter frees it (dropping the owner share).

use std::ffi::c_void;
use std::ptr;

use crate::copy::Order;
use crate::device::DeviceType;
use crate::error::{Error, Result};
use crate::ffi::dlpack::{
    DLManagedTensor, DLManagedTensorVersioned, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION,
    DLPackVersion, DLTensor, FLAG_IS_COPIED, FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY,
};
use crate::managed::ManagedTensor;
use crate::tensor::{Owner, Tensor};

/// Which managed-tensor flavour a consumer can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// `DLManagedTensor` (no version, no flags): only for consumers that did not pass
    /// `max_version` or asked for a major version below 1.
    Legacy,
    /// `DLManagedTensorVersioned`; `minor` is the highest minor version (of major 1) the
    /// consumer understands.
    Versioned {
        /// The consumer's highest minor version.
        minor: u32,
    },
}

impl Flavor {
    /// The flavour to produce for a consumer's `max_version` (`None` = legacy).
    pub fn for_max_version(max_version: Option<(u32, u32)>) -> Flavor {
        match max_version {
            Some((major, minor)) if major >= DLPACK_MAJOR_VERSION => Flavor::Versioned {
                minor: if major > DLPACK_MAJOR_VERSION {
                    u32::MAX
                } else {
                    minor
                },
            },
            _ => Flavor::Legacy,
        }
    }
}

/// Shape followed by strides; up to 4 dimensions inline in the block.
type Dims = crate::dims::Dims<8>;

/// One heap allocation per export: the managed struct first (so the struct pointer is the
/// block pointer), then the dims its shape/strides point into, then the owner share.
#[repr(C)]
struct Block<M> {
    managed: M,
    dims: Dims,
    owner: Owner,
}

/// The two managed-struct flavours, as far as the block needs them.
trait ManagedStruct {
    fn tensor_and_ctx(&mut self) -> (&mut DLTensor, &mut *mut c_void);
}

impl ManagedStruct for DLManagedTensor {
    fn tensor_and_ctx(&mut self) -> (&mut DLTensor, &mut *mut c_void) {
        (&mut self.dl_tensor, &mut self.manager_ctx)
    }
}

impl ManagedStruct for DLManagedTensorVersioned {
    fn tensor_and_ctx(&mut self) -> (&mut DLTensor, &mut *mut c_void) {
        (&mut self.dl_tensor, &mut self.manager_ctx)
    }
}

/// Build the block directly in its heap allocation (no stack copy of the whole block) and point
/// its tensor's shape/strides (and `manager_ctx`) into it.
fn into_raw_block<M: ManagedStruct>(
    managed: M,
    dims: Dims,
    owner: Owner,
    ndim: usize,
) -> *mut Block<M> {
    let raw = Box::into_raw(Box::<Block<M>>::new_uninit()).cast::<Block<M>>();
    // The block never moves again, so pointers into its own `dims` (inline or heap) stay valid
    // until the deleter frees it.
    // SAFETY: `raw` is a fresh, uniquely owned Block allocation; each field is written once
    // through a raw field pointer before the block is used whole; `dims` holds 2 * ndim values.
    unsafe {
        ptr::addr_of_mut!((*raw).managed).write(managed);
        ptr::addr_of_mut!((*raw).dims).write(dims);
        ptr::addr_of_mut!((*raw).owner).write(owner);
        let block = &mut *raw;
        let (tensor, ctx) = block.managed.tensor_and_ctx();
        *ctx = raw.cast();
        if ndim > 0 {
            tensor.shape = block.dims.as_mut_ptr();
            tensor.strides = tensor.shape.add(ndim);
        }
    }
    raw
}

unsafe extern "C" fn delete_versioned(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: `managed` is the first field of a repr(C) Block made by `into_raw_block`; the
    // DLPack contract calls the deleter exactly once.
    drop(unsafe { Box::from_raw(managed.cast::<Block<DLManagedTensorVersioned>>()) });
}

unsafe extern "C" fn delete_legacy(managed: *mut DLManagedTensor) {
    // SAFETY: as for delete_versioned.
    drop(unsafe { Box::from_raw(managed.cast::<Block<DLManagedTensor>>()) });
}

/// Host memory, where `data` is a plain address: exports put the first element in `data` with
/// `byte_offset = 0`, the convention every host consumer accepts. Device memory is re-exported
/// exactly as received (`data`, `byte_offset`): `data` may be an opaque handle (OpenCL,
/// Metal, Vulkan) or an allocation base that the consumer resolves (dpctl's USM pointers,
/// which must not be moved past elements that negative strides reach).
fn has_pointer_data(kind: DeviceType) -> bool {
    kind.is_host_accessible()
}

/// `data` and `byte_offset` to publish: the first element with offset 0 where `data` is an
/// address, the received base and offset otherwise.
pub(crate) fn data_and_offset(tensor: &Tensor) -> (*mut c_void, u64) {
    if has_pointer_data(tensor.device().kind) {
        (tensor.first_element().cast::<c_void>(), 0)
    } else {
        (tensor.raw_data(), tensor.byte_offset())
    }
}

impl Tensor {
    /// Export as a managed tensor of `flavor` that shares this tensor's memory (zero-copy).
    ///
    /// Refused with a BufferError-kind error: a read-only tensor through a legacy capsule, and
    /// a dtype newer than the consumer's version.
    pub fn export(&self, flavor: Flavor) -> Result<ManagedTensor> {
        self.export_flagged(flavor, false)
    }

    /// Export a fresh host copy in `order`, flagged `IS_COPIED` (the consumer is its only user).
    pub fn export_copy(&self, flavor: Flavor, order: Order) -> Result<ManagedTensor> {
        self.copy(order)?.export_owned(flavor)
    }

    /// Export this tensor, giving it up. `IS_COPIED` is set when its memory is a copy that no
    /// other tensor or export shares, so that the consumer becomes its only user (the flag's
    /// promise); e.g. the result of [`Tensor::copy`] or of a device transfer.
    ///
    /// "No other" counts every owner, strong or weak, as [`Tensor::check_exclusive`] does, so
    /// that the consumer's mutable views can alias nothing. The owner is not public, so safe
    /// code cannot keep a second one across the export:
    ///
    /// ```compile_fail,E0624
    /// use dlbridge::{Flavor, Tensor};
    ///
    /// let t = Tensor::from_vec(vec![0f32; 4], &[4])?;
    /// let weak = std::sync::Arc::downgrade(t.owner()); // private: does not compile
    /// let mut mine = Tensor::from_managed(t.export_owned(Flavor::Versioned { minor: 3 })?)?;
    /// let other = weak.upgrade().unwrap();
    /// let w = mine.as_slice_mut::<f32>()?;
    /// # Ok::<(), dlbridge::Error>(())
    /// ```
    pub fn export_owned(mut self, flavor: Flavor) -> Result<ManagedTensor> {
        let sole = self.is_copied() && self.owner_is_unique();
        self.export_flagged(flavor, sole)
    }

    fn export_flagged(&self, flavor: Flavor, is_copied: bool) -> Result<ManagedTensor> {
        let needed = self
            .dtype()
            .min_dlpack_minor()
            .max(u32::from(self.is_subbyte_padded()));
        let asked = match flavor {
            Flavor::Legacy => None,
            Flavor::Versioned { minor } => Some(minor),
        };
        if needed > 0 && asked.is_none_or(|m| m < needed) {
            return Err(Error::DTypeNeedsNewerVersion {
                dtype: self.dtype().name(),
                needed_minor: needed,
                asked: asked.map_or("a legacy capsule".to_owned(), |m| format!("DLPack 1.{m}")),
            });
        }
        if flavor == Flavor::Legacy && self.is_readonly() {
            return Err(Error::ReadOnlyLegacy);
        }

        let ndim = self.ndim();
        let dims = Dims::new(self.shape(), &self.layout().export_strides());
        let (shape, strides) = (ptr::null_mut(), ptr::null_mut());
        let (data, byte_offset) = data_and_offset(self);
        let dl_tensor = DLTensor {
            data: if self.size() == 0 && data.is_null() {
                ptr::null_mut()
            } else {
                data
            },
            device: self.device().to_dl(),
            ndim: ndim as i32,
            dtype: self.dtype().to_dl(),
            shape,
            strides,
            byte_offset,
        };
        let owner = self.owner().clone();
        let managed = match flavor {
            Flavor::Legacy => {
                let managed = DLManagedTensor {
                    dl_tensor,
                    manager_ctx: ptr::null_mut(),
                    deleter: Some(delete_legacy),
                };
                let raw = into_raw_block(managed, dims, owner, ndim);
                // SAFETY: a valid legacy managed tensor whose deleter frees it; ownership passes.
                unsafe { ManagedTensor::from_legacy(raw.cast()) }
            }
            Flavor::Versioned { .. } => {
                let mut flags = 0;
                if self.is_readonly() {
                    flags |= FLAG_READ_ONLY;
                }
                if is_copied {
                    flags |= FLAG_IS_COPIED;
                }
                if self.is_subbyte_padded() {
                    flags |= FLAG_IS_SUBBYTE_TYPE_PADDED;
                }
                let managed = DLManagedTensorVersioned {
                    version: DLPackVersion {
                        major: DLPACK_MAJOR_VERSION,
                        minor: DLPACK_MINOR_VERSION,
                    },
                    manager_ctx: ptr::null_mut(),
                    deleter: Some(delete_versioned),
                    flags,
                    dl_tensor,
                };
                let raw = into_raw_block(managed, dims, owner, ndim);
                // SAFETY: a valid versioned managed tensor whose deleter frees it.
                unsafe { ManagedTensor::from_versioned(raw.cast()) }
            }
        };
        Ok(managed.expect("Box::into_raw is never NULL"))
    }
}

impl DLTensor {
    /// A non-owning description of `tensor` whose shape and strides point into its layout
    /// (valid while `tensor` lives and is not changed). For devices whose `data` is a real
    /// address, `data` is the first element and `byte_offset` is 0.
    pub fn describing(tensor: &Tensor) -> Self {
        let (data, byte_offset) = data_and_offset(tensor);
        let ndim = tensor.ndim();
        let (shape, strides) = if ndim == 0 {
            (std::ptr::null_mut(), std::ptr::null_mut())
        } else {
            (
                tensor.shape().as_ptr().cast_mut(),
                tensor.strides().as_ptr().cast_mut(),
            )
        };
        Self {
            data,
            device: tensor.device().to_dl(),
            ndim: ndim as i32,
            dtype: tensor.dtype().to_dl(),
            shape,
            strides,
            byte_offset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::tensor::TensorFlags;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn round_trip_versioned_and_legacy() {
        let t = Tensor::from_vec((0..12).map(|x| x as f64).collect(), &[3, 4]).unwrap();
        for flavor in [Flavor::Versioned { minor: 3 }, Flavor::Legacy] {
            let m = t.export(flavor).unwrap();
            assert_eq!(m.is_versioned(), flavor != Flavor::Legacy);
            let back = Tensor::from_managed(m).unwrap();
            assert_eq!(back.shape(), &[3, 4]);
            assert_eq!(back.strides(), &[4, 1]);
            assert_eq!(back.data_ptr(), t.data_ptr());
            assert_eq!(back.to_vec::<f64>().unwrap(), t.to_vec::<f64>().unwrap());
            // Legacy imports are read-only (they cannot say otherwise); versioned keep the flag.
            assert_eq!(back.is_readonly(), flavor == Flavor::Legacy);
        }
    }

    #[test]
    fn is_copied_only_for_an_unshared_copy() {
        let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        let flags = |m: &ManagedTensor| {
            // SAFETY: a versioned export made just above, still owned by `m`.
            unsafe { (*m.as_versioned_ptr().unwrap()).flags() }
        };
        // Shared with `t`: no IS_COPIED, even though `t` owns a copy.
        let shared = t
            .clone()
            .export_owned(Flavor::Versioned { minor: 3 })
            .unwrap();
        assert_eq!(flags(&shared) & FLAG_IS_COPIED, 0);
        drop(shared);
        let copy = t
            .export_copy(Flavor::Versioned { minor: 3 }, Order::C)
            .unwrap();
        assert_eq!(flags(&copy) & FLAG_IS_COPIED, FLAG_IS_COPIED);
        let sole = t.export_owned(Flavor::Versioned { minor: 3 }).unwrap();
        assert_eq!(flags(&sole) & FLAG_IS_COPIED, FLAG_IS_COPIED);
    }

    /// The probe of a second owner kept across an owned export: inside the crate a `Weak` can
    /// still be taken, and it must count as an owner.
    #[test]
    fn a_weak_owner_denies_is_copied_and_mutable_views() {
        let t = Tensor::from_vec(vec![0f32; 4], &[4]).unwrap();
        let weak = Arc::downgrade(t.owner());
        let mut mine =
            Tensor::from_managed(t.export_owned(Flavor::Versioned { minor: 3 }).unwrap()).unwrap();
        assert!(!mine.is_copied());
        let other = weak.upgrade().unwrap();
        assert!(matches!(
            mine.as_slice_mut::<f32>(),
            Err(Error::Aliased { .. })
        ));
        drop(other);
        // A strong share kept elsewhere denies it too, on any thread.
        let mut t = Tensor::from_vec(vec![0f32; 4], &[4]).unwrap();
        let strong = t.owner().clone();
        assert!(!t.owner_is_unique());
        std::thread::spawn(move || drop(strong)).join().unwrap();
        assert!(t.owner_is_unique());
        let mut mine =
            Tensor::from_managed(t.export_owned(Flavor::Versioned { minor: 3 }).unwrap()).unwrap();
        assert!(mine.is_copied());
        mine.as_slice_mut::<f32>().unwrap()[0] = 1.0;
    }

    #[test]
    fn readonly_never_through_legacy() {
        let t = Tensor::from_vec(vec![1u8, 2], &[2])
            .unwrap()
            .into_readonly();
        assert!(matches!(
            t.export(Flavor::Legacy),
            Err(Error::ReadOnlyLegacy)
        ));
        let back = Tensor::from_managed(t.export(Flavor::Versioned { minor: 0 }).unwrap()).unwrap();
        assert!(back.is_readonly());
    }

    #[test]
    fn new_dtypes_need_new_versions() {
        let t = Tensor::from_vec(vec![0u8; 4], &[4]).unwrap();
        let fp8 = DType::from_name("float8_e4m3fn").unwrap();
        // SAFETY: same bytes, same owner, one-byte elements.
        let t = unsafe {
            Tensor::from_raw_parts(
                t.raw_data(),
                0,
                t.device(),
                fp8,
                t.layout().clone(),
                TensorFlags::WRITABLE,
                t.owner().clone(),
            )
        }
        .unwrap();
        assert!(matches!(
            t.export(Flavor::Versioned { minor: 0 }),
            Err(Error::DTypeNeedsNewerVersion { .. })
        ));
        assert!(t.export(Flavor::Legacy).is_err());
        let m = t.export(Flavor::Versioned { minor: 1 }).unwrap();
        assert_eq!(Tensor::from_managed(m).unwrap().dtype().code().0, 10);
    }

    #[test]
    fn owner_released_once_after_all_exports() {
        struct Counter(Arc<AtomicUsize>);
        impl Drop for Counter {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let drops = Arc::new(AtomicUsize::new(0));
        let values = vec![1.0f32; 4];
        let layout = crate::layout::Layout::contiguous(&[4], 4).unwrap();
        // SAFETY: `values` is leaked into the owner below, so it outlives every export.
        let t = unsafe {
            let owner: Owner = Arc::new((Counter(drops.clone()), values));
            let ptr = owner
                .downcast_ref::<(Counter, Vec<f32>)>()
                .unwrap()
                .1
                .as_ptr();
            Tensor::from_raw_parts(
                ptr as *mut c_void,
                0,
                crate::Device::CPU,
                DType::FLOAT32,
                layout,
                TensorFlags::WRITABLE,
                owner,
            )
            .unwrap()
        };
        let a = t.export(Flavor::Versioned { minor: 3 }).unwrap();
        let b = t.export(Flavor::Legacy).unwrap();
        drop(t);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        let handle = std::thread::spawn(move || drop(a));
        handle.join().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        drop(b);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    /// A drop counter and a tensor whose owner is the counter plus `values`.
    fn counted(values: Vec<f32>, drops: &Arc<AtomicUsize>) -> Tensor {
        struct Counter(Arc<AtomicUsize>);
        impl Drop for Counter {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let layout = crate::layout::Layout::contiguous(&[values.len() as i64], 4).unwrap();
        let owner: Owner = Arc::new((Counter(drops.clone()), values));
        let data = owner
            .downcast_ref::<(Counter, Vec<f32>)>()
            .unwrap()
            .1
            .as_ptr();
        // SAFETY: the vector lives in the owner, which every clone and export keeps alive; it
        // is only read.
        unsafe {
            Tensor::from_raw_parts(
                data.cast_mut().cast(),
                0,
                crate::Device::CPU,
                DType::FLOAT32,
                layout,
                TensorFlags::WRITABLE,
                owner,
            )
        }
        .unwrap()
    }

    /// One tensor read, exported, imported back and dropped from several threads at once:
    /// every thread sees the values, and the owner is released once, after the last user.
    #[test]
    fn threads_share_export_and_drop_one_tensor() {
        let drops = Arc::new(AtomicUsize::new(0));
        let values: Vec<f32> = (0..64).map(|x| x as f32).collect();
        let t = counted(values.clone(), &drops);
        std::thread::scope(|scope| {
            for i in 0..4 {
                let t = &t;
                let values = &values;
                scope.spawn(move || {
                    for _ in 0..8 {
                        let flavor = if i % 2 == 0 {
                            Flavor::Versioned { minor: 3 }
                        } else {
                            Flavor::Legacy
                        };
                        let back = Tensor::from_managed(t.export(flavor).unwrap()).unwrap();
                        assert_eq!(back.as_slice::<f32>().unwrap(), &values[..]);
                        assert_eq!(t.clone().to_vec::<f32>().unwrap(), *values);
                    }
                });
            }
        });
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        drop(t);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    /// Exports handed to other threads and deleted there, all at once: the deleters run
    /// concurrently and the owner is released exactly once, by whichever runs last.
    #[test]
    fn threads_delete_exports_concurrently() {
        let drops = Arc::new(AtomicUsize::new(0));
        let t = counted(vec![1.0; 16], &drops);
        let exports: Vec<ManagedTensor> = (0..8)
            .map(|i| {
                let flavor = if i % 2 == 0 {
                    Flavor::Versioned { minor: 3 }
                } else {
                    Flavor::Legacy
                };
                t.export(flavor).unwrap()
            })
            .collect();
        drop(t);
        let start = Arc::new(std::sync::Barrier::new(exports.len()));
        let handles: Vec<_> = exports
            .into_iter()
            .map(|m| {
                let start = start.clone();
                std::thread::spawn(move || {
                    start.wait();
                    drop(m);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    /// Owned exports of one tensor's clones from several threads: at most one (the last clone)
    /// may claim `IS_COPIED`, and only a claimant may write.
    #[test]
    fn threads_owned_exports_claim_sole_ownership_at_most_once() {
        let t = Tensor::from_vec(vec![0u32; 8], &[8]).unwrap();
        let clones: Vec<Tensor> = (0..4).map(|_| t.clone()).collect();
        drop(t);
        let claimed: Vec<bool> = std::thread::scope(|scope| {
            let handles: Vec<_> = clones
                .into_iter()
                .map(|c| {
                    scope.spawn(move || {
                        let managed = c.export_owned(Flavor::Versioned { minor: 3 }).unwrap();
                        let mut back = Tensor::from_managed(managed).unwrap();
                        let sole = back.is_copied();
                        assert_eq!(back.as_slice_mut::<u32>().is_ok(), sole);
                        sole
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(claimed.iter().filter(|&&c| c).count() <= 1, "{claimed:?}");
    }

    #[test]
    fn scalar_has_null_shape_and_zero_size_row_major_strides() {
        let s = Tensor::from_vec(vec![7i64], &[]).unwrap();
        let m = s.export(Flavor::Versioned { minor: 3 }).unwrap();
        let back = Tensor::from_managed(m).unwrap();
        assert_eq!(back.ndim(), 0);
        assert_eq!(back.to_vec::<i64>().unwrap(), vec![7]);
    }
}
