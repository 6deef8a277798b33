//! `ndarray` interop (feature `ndarray`): [`Tensor::as_array`] and [`Tensor::as_array_mut`]
//! view a host tensor as an [`ArrayViewD`] / [`ArrayViewMutD`] that borrows it, and
//! `Tensor::from` takes an owned [`Array`] without copying: the array moves into the tensor's
//! owner and keeps its strides (negative ones included).
//!
//! ```
//! use dlbridge::Tensor;
//! use ndarray::{s, Array2};
//!
//! let mut a = Array2::from_shape_fn((3, 4), |(i, j)| (10 * i + j) as f64);
//! a.slice_collapse(s![.., ..;-2]); // columns 3 and 1: negative strides
//! let first = a.as_ptr() as usize;
//! let t = Tensor::from(a);
//! assert_eq!(t.data_ptr(), first); // zero-copy
//! assert_eq!(t.strides(), &[4, -2]);
//! let view = t.as_array::<f64>()?;
//! assert_eq!(view[[2, 1]], 21.0);
//! # Ok::<(), dlbridge::Error>(())
//! ```

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use ndarray::{Array, ArrayViewD, ArrayViewMutD, Axis, Dimension, IxDyn, ShapeBuilder};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::{Described, Element, Tensor};

/// Where a view's pointer starts and how it walks: the lowest-addressed element, the strides
/// made positive, and the axes to flip back afterwards.
struct Walk {
    shape: Vec<usize>,
    strides: Vec<usize>,
    lowest: *mut u8,
    flipped: Vec<usize>,
}

/// The walk of `tensor`'s validated layout (items of `itemsize` bytes). A zero-size tensor
/// walks nothing: row-major strides from a dangling, aligned pointer (`lowest` is null then).
fn walk(tensor: &Tensor) -> Walk {
    let shape: Vec<usize> = tensor.shape().iter().map(|&n| n as usize).collect();
    if tensor.size() == 0 {
        return Walk {
            strides: Vec::new(),
            shape,
            lowest: std::ptr::null_mut(),
            flipped: Vec::new(),
        };
    }
    let mut lowest = tensor.first_element();
    let mut flipped = Vec::new();
    for (axis, (&n, &s)) in tensor.shape().iter().zip(tensor.strides()).enumerate() {
        if s < 0 && n > 1 {
            // Stays inside the validated span: the element at index n - 1 along this axis.
            lowest = lowest.wrapping_offset(((n - 1) * s) as isize * tensor.itemsize() as isize);
            flipped.push(axis);
        }
    }
    Walk {
        strides: tensor
            .strides()
            .iter()
            .map(|s| s.unsigned_abs() as usize)
            .collect(),
        shape,
        lowest,
        flipped,
    }
}

impl Tensor {
    /// A read-only `ndarray` view of a host tensor of `T`, any strides: it borrows the tensor,
    /// which keeps the memory alive. Errors as [`Tensor::as_slice`] does for the device, dtype,
    /// item size and alignment; C-contiguity is not needed.
    pub fn as_array<T: Element>(&self) -> Result<ArrayViewD<'_, T>> {
        self.check_view::<T>()?;
        let walk = walk(self);
        if walk.lowest.is_null() {
            // SAFETY: a zero-size view reads nothing; the pointer is non-null and aligned.
            return Ok(unsafe {
                ArrayViewD::from_shape_ptr(IxDyn(&walk.shape), NonNull::<T>::dangling().as_ptr())
            });
        }
        // `check_view` made sure the memory is host memory of `T`s whose first element is
        // aligned (so every element is: strides count whole items); the layout was validated
        // against the memory. Every bit pattern is a valid `T`, and a shared view may see
        // elements more than once.
        // SAFETY: so every element the non-negative strides reach from the lowest one is a
        // valid, aligned `T` in memory the tensor's owner keeps alive for the borrow `'_`.
        let mut view = unsafe {
            ArrayViewD::from_shape_ptr(
                IxDyn(&walk.shape).strides(IxDyn(&walk.strides)),
                walk.lowest.cast::<T>().cast_const(),
            )
        };
        for axis in walk.flipped {
            view.invert_axis(Axis(axis));
        }
        Ok(view)
    }

    /// A mutable `ndarray` view of a host tensor of `T` that this tensor alone can reach
    /// ([`Tensor::check_exclusive`]) and whose indices reach distinct elements
    /// ([`Layout::elements_are_distinct`]; broadcast strides are refused).
    ///
    /// ```
    /// use dlbridge::Tensor;
    ///
    /// let mut t = Tensor::zeros(dlbridge::DType::INT32, &[2, 2])?;
    /// t.as_array_mut::<i32>()?.fill(7);
    /// assert_eq!(t.to_vec::<i32>()?, [7, 7, 7, 7]);
    /// # Ok::<(), dlbridge::Error>(())
    /// ```
    pub fn as_array_mut<T: Element>(&mut self) -> Result<ArrayViewMutD<'_, T>> {
        self.check_exclusive()?;
        self.check_view::<T>()?;
        if !self.layout().elements_are_distinct() {
            return Err(Error::Aliased {
                reason: "several indices reach the same element (broadcast strides)".to_owned(),
            });
        }
        let walk = walk(self);
        if walk.lowest.is_null() {
            // SAFETY: a zero-size view touches nothing; the pointer is non-null and aligned.
            return Ok(unsafe {
                ArrayViewMutD::from_shape_ptr(IxDyn(&walk.shape), NonNull::<T>::dangling().as_ptr())
            });
        }
        // SAFETY: as in `as_array` for where the elements are and their validity; the memory is
        // writable and reachable through nothing else while `self` is borrowed mutably
        // (`check_exclusive`), and no two indices reach the same element.
        let mut view = unsafe {
            ArrayViewMutD::from_shape_ptr(
                IxDyn(&walk.shape).strides(IxDyn(&walk.strides)),
                walk.lowest.cast::<T>(),
            )
        };
        for axis in walk.flipped {
            view.invert_axis(Axis(axis));
        }
        Ok(view)
    }
}

impl<T: Element, D: Dimension + 'static> From<Array<T, D>> for Tensor {
    /// The array as a host tensor, zero-copy: the array moves into the tensor's owner (dropped
    /// with the last tensor or export using it) and its strides are kept. The tensor is
    /// writable and [`Tensor::is_copied`] (no one else holds the memory).
    ///
    /// # Panics
    /// When `T`'s [`Element`] implementation breaks its contract (`size_of::<T>()` is not the
    /// dtype's item size).
    fn from(array: Array<T, D>) -> Self {
        let itemsize = std::mem::size_of::<T>();
        assert_eq!(
            itemsize,
            T::DTYPE.itemsize(),
            "Element for a Rust type of {itemsize} bytes claims {}",
            T::DTYPE
        );
        let shape: Vec<i64> = array.shape().iter().map(|&n| n as i64).collect();
        let strides: Vec<i64> = array.strides().iter().map(|&s| s as i64).collect();
        // ndarray keeps every offset of an array within isize::MAX bytes, which Layout accepts.
        let layout = Layout::new(&shape, Some(&strides), itemsize)
            .expect("an ndarray array's shape and strides are a valid layout");
        let mut owner = Arc::new(array);
        // Derived after the move into the owner, through a unique borrow: the pointer carries
        // write permission for later mutable views.
        let data = Arc::get_mut(&mut owner)
            .expect("a new Arc is unique")
            .as_mut_ptr()
            .cast::<c_void>();
        let described = Described {
            data,
            byte_offset: 0,
            device: Device::CPU,
            dtype: T::DTYPE,
            layout,
            readonly: false,
            is_copied: true,
            subbyte_padded: false,
        };
        Tensor::from_described(described, owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::tensor::TensorFlags;
    use ndarray::{Array1, ArrayD, SliceInfoElem};
    use proptest::prelude::*;

    #[test]
    fn views_refuse_devices_dtypes_and_misalignment() {
        let t = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
        assert!(matches!(t.as_array::<f64>(), Err(Error::WrongDType { .. })));
        assert!(matches!(t.as_array::<i32>(), Err(Error::WrongDType { .. })));
        let cuda = crate::device::Device::new(crate::device::DeviceType::CUDA, 0);
        // SAFETY: a device description never dereferenced: the view is refused first.
        let device = unsafe {
            Tensor::from_raw_parts(
                0x1000 as *mut c_void,
                0,
                cuda,
                DType::FLOAT32,
                Layout::contiguous(&[2], 4).unwrap(),
                TensorFlags::WRITABLE,
                Arc::new(()),
            )
        }
        .unwrap();
        assert!(matches!(
            device.as_array::<f32>(),
            Err(Error::NotHostAccessible { .. })
        ));
        let bytes = Tensor::from_vec(vec![0u64; 2], &[2]).unwrap();
        // SAFETY: 8 bytes from byte 2 of a 16-byte buffer that `owner` keeps alive.
        let shifted = unsafe {
            Tensor::from_raw_parts(
                bytes.raw_data(),
                2,
                Device::CPU,
                DType::INT32,
                Layout::contiguous(&[2], 4).unwrap(),
                TensorFlags::COPIED,
                bytes.owner().clone(),
            )
        }
        .unwrap();
        assert!(matches!(
            shifted.as_array::<i32>(),
            Err(Error::Misaligned { align: 4, .. })
        ));
    }

    #[test]
    fn zero_size_and_zero_dimensional() {
        let empty = Tensor::from_vec(Vec::<i16>::new(), &[3, 0]).unwrap();
        assert_eq!(empty.as_array::<i16>().unwrap().shape(), &[3, 0]);
        let scalar = Tensor::from(ndarray::arr0(2.5f64));
        assert_eq!(scalar.ndim(), 0);
        assert_eq!(scalar.as_array::<f64>().unwrap()[IxDyn(&[])], 2.5);
        let mut owned = Tensor::from(Array1::<u8>::zeros(0));
        assert_eq!(owned.as_array_mut::<u8>().unwrap().len(), 0);
    }

    #[test]
    fn mutable_views_refuse_shared_and_broadcast_memory() {
        let mut t = Tensor::from(Array1::from(vec![1i64, 2, 3]));
        let clone = t.clone();
        assert!(matches!(
            t.as_array_mut::<i64>(),
            Err(Error::Aliased { .. })
        ));
        drop(clone);
        t.as_array_mut::<i64>().unwrap()[1] = 20;
        assert_eq!(t.to_vec::<i64>().unwrap(), [1, 20, 3]);
        let mut readonly = t.into_readonly();
        assert!(matches!(
            readonly.as_array_mut::<i64>(),
            Err(Error::ReadOnly)
        ));

        let base = Tensor::from_vec(vec![5u32; 3], &[3]).unwrap();
        // SAFETY: a broadcast view (stride 0) of 3 writable items the owner keeps alive; the
        // owner moves in, so the view is its only holder.
        let mut broadcast = unsafe {
            Tensor::from_raw_parts(
                base.raw_data(),
                0,
                Device::CPU,
                DType::UINT32,
                Layout::new(&[2, 3], Some(&[0, 1]), 4).unwrap(),
                TensorFlags::COPIED,
                Arc::new(base),
            )
        }
        .unwrap();
        assert_eq!(broadcast.as_array::<u32>().unwrap().sum(), 30);
        assert!(matches!(
            broadcast.as_array_mut::<u32>(),
            Err(Error::Aliased { .. })
        ));
    }

    /// A strided owned array: `shape`, values 0.., axes permuted by `perm`, and each axis
    /// sliced with `steps` (negative steps walk backwards).
    fn strided(shape: &[usize], perm: &[usize], steps: &[isize]) -> ArrayD<i32> {
        let n: usize = shape.iter().product();
        let mut a = ArrayD::from_shape_vec(IxDyn(shape), (0..n as i32).collect())
            .unwrap()
            .permuted_axes(IxDyn(perm));
        let info: Vec<SliceInfoElem> = steps
            .iter()
            .map(|&step| SliceInfoElem::Slice {
                start: 0,
                end: None,
                step,
            })
            .collect();
        a.slice_collapse(info.as_slice());
        a
    }

    fn case() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<isize>)> {
        prop::collection::vec(0usize..5, 0..4).prop_flat_map(|shape| {
            let ndim = shape.len();
            (
                Just(shape),
                Just((0..ndim).collect::<Vec<_>>()).prop_shuffle(),
                prop::collection::vec(prop_oneof![-3isize..=-1, 1isize..=3], ndim),
            )
        })
    }

    proptest! {
        #[test]
        fn arrays_move_in_and_view_back_without_copies((shape, perm, steps) in case()) {
            let array = strided(&shape, &perm, &steps);
            let expected: Vec<i32> = array.iter().copied().collect();
            let view_shape = array.shape().to_vec();
            let first = array.as_ptr() as usize;
            let mut t = Tensor::from(array);
            if t.size() > 0 {
                prop_assert_eq!(t.data_ptr(), first);
            }
            prop_assert_eq!(t.to_vec::<i32>().unwrap(), expected.clone());
            prop_assert_eq!(t.iter::<i32>().unwrap().collect::<Vec<_>>(), expected.clone());
            let view = t.as_array::<i32>().unwrap();
            prop_assert_eq!(view.shape(), view_shape.as_slice());
            prop_assert_eq!(view.iter().copied().collect::<Vec<_>>(), expected.clone());
            let mut view = t.as_array_mut::<i32>().unwrap();
            view.map_inplace(|v| *v = -*v);
            let negated: Vec<i32> = expected.iter().map(|v| -v).collect();
            prop_assert_eq!(t.to_vec::<i32>().unwrap(), negated);
        }
    }
}
