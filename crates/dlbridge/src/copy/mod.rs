//! Host copies: a new, writable, contiguous tensor from any host-accessible tensor.
//!
//! Kernels move bytes of the element size, so every dtype works. Packed sub-byte data can only be
//! copied when it is already contiguous.

mod buffer;

pub use buffer::HostBuffer;

use std::sync::Arc;

use crate::device::Device;
use crate::error::{Error, Result};
use crate::layout::{c_strides, f_strides, Layout};
use crate::tensor::Tensor;

/// Memory order of a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Row-major.
    C,
    /// Column-major.
    F,
}

impl std::str::FromStr for Order {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "C" | "c" => Ok(Order::C),
            "F" | "f" => Ok(Order::F),
            _ => Err(Error::InvalidArgument(format!(
                "unknown order {s:?}: expected \"C\" or \"F\""
            ))),
        }
    }
}

/// Call `f` with the element offset of every element of `layout`, in row-major index order.
pub fn for_each_offset(layout: &Layout, mut f: impl FnMut(i64)) {
    if layout.size() == 0 {
        return;
    }
    let shape = layout.shape();
    let strides = layout.strides();
    let ndim = shape.len();
    let mut index = vec![0i64; ndim];
    let mut offset = 0i64;
    loop {
        f(offset);
        let mut d = ndim;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            offset += strides[d];
            if index[d] < shape[d] {
                break;
            }
            offset -= strides[d] * shape[d];
            index[d] = 0;
        }
    }
}

impl Tensor {
    /// A new, writable host copy in `order`, with `is_copied` set.
    pub fn copy(&self, order: Order) -> Result<Tensor> {
        if !self.device().is_host_accessible() {
            return Err(Error::NotHostAccessible {
                device: self.device(),
            });
        }
        let nbytes = self.nbytes();
        let mut buffer = HostBuffer::new(nbytes)?;
        let itemsize = self.itemsize();
        let packed_subbyte = self.dtype().is_subbyte() && !self.subbyte_padded();
        let src = self.data_ptr() as *const u8;
        let same_order = match order {
            Order::C => self.is_c_contiguous(),
            Order::F => self.is_f_contiguous(),
        };
        if same_order {
            // SAFETY: the tensor is dense in `order`, so its `nbytes` bytes start at the first
            // element and are host-readable while `self` lives.
            buffer
                .as_mut_slice()
                .copy_from_slice(unsafe { std::slice::from_raw_parts(src, nbytes) });
        } else if packed_subbyte {
            return Err(Error::UnsupportedFormat {
                format: self.dtype().name(),
                reason: "packed sub-byte data can only be copied when contiguous".to_owned(),
            });
        } else {
            let dst = buffer.as_mut_slice();
            let layout = match order {
                Order::C => self.layout().clone(),
                Order::F => reversed(self.layout()),
            };
            let mut pos = 0;
            for_each_offset(&layout, |offset| {
                // SAFETY: `offset` is an element offset the validated layout reaches; each of
                // its `itemsize` bytes is host-readable while `self` lives.
                let elem = unsafe {
                    std::slice::from_raw_parts(
                        src.offset(offset as isize * itemsize as isize),
                        itemsize,
                    )
                };
                dst[pos..pos + itemsize].copy_from_slice(elem);
                pos += itemsize;
            });
        }
        let shape = self.shape();
        let strides = match order {
            Order::C => c_strides(shape),
            Order::F => f_strides(shape),
        }
        .expect("validated shapes do not overflow");
        let layout = Layout::new(shape, Some(&strides), itemsize)?;
        let data = buffer.as_mut_slice().as_mut_ptr().cast();
        // SAFETY: `buffer` holds `nbytes` bytes laid out by `layout` and is kept alive by the
        // owner passed along; it is writable and aliased by nothing else.
        unsafe {
            Tensor::from_raw_parts(
                data,
                0,
                Device::CPU,
                self.dtype(),
                layout,
                false,
                true,
                Arc::new(buffer),
            )
        }
    }
}

/// The same layout with its dimensions reversed (row-major walk of it = column-major walk).
fn reversed(layout: &Layout) -> Layout {
    let shape: Vec<i64> = layout.shape().iter().rev().copied().collect();
    let strides: Vec<i64> = layout.strides().iter().rev().copied().collect();
    Layout::new(&shape, Some(&strides), 1).expect("a permutation of a valid layout is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transposed(t: &Tensor) -> Tensor {
        let shape: Vec<i64> = t.shape().iter().rev().copied().collect();
        let strides: Vec<i64> = t.strides().iter().rev().copied().collect();
        let layout = Layout::new(&shape, Some(&strides), t.itemsize()).unwrap();
        // SAFETY: same memory and owner, permuted dims reach the same elements.
        unsafe {
            Tensor::from_raw_parts(
                t.raw_data(),
                0,
                t.device(),
                t.dtype(),
                layout,
                true,
                false,
                t.owner().clone(),
            )
            .unwrap()
        }
    }

    #[test]
    fn copy_of_transpose_is_c_order() {
        let t = Tensor::from_vec((0..6).collect::<Vec<i32>>(), &[2, 3]).unwrap();
        let tt = transposed(&t);
        assert_eq!(tt.to_vec::<i32>().unwrap(), vec![0, 3, 1, 4, 2, 5]);
        let c = tt.copy(Order::C).unwrap();
        assert!(c.is_c_contiguous() && c.is_copied() && !c.readonly());
        assert_eq!(c.as_slice::<i32>().unwrap(), &[0, 3, 1, 4, 2, 5]);
        let f = tt.copy(Order::F).unwrap();
        assert!(f.is_f_contiguous());
        assert_eq!(f.to_vec::<i32>().unwrap(), vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn offsets_walk_row_major() {
        let l = Layout::new(&[2, 3], Some(&[1, 2]), 4).unwrap();
        let mut seen = vec![];
        for_each_offset(&l, |o| seen.push(o));
        assert_eq!(seen, vec![0, 2, 4, 1, 3, 5]);
        let empty = Layout::new(&[0, 3], None, 4).unwrap();
        for_each_offset(&empty, |_| panic!("no elements"));
    }
}
