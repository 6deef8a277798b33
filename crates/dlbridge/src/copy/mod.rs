//! Host copies: a new, writable, dense tensor from any host-accessible tensor
//! ([`Tensor::copy`], [`Tensor::contiguous`]), and copies into an existing tensor
//! ([`copy_into`]).
//!
//! Kernels move bytes of the element size, so every dtype works: contiguous data is one
//! `memcpy`, strided data (negative strides included) is walked in the fewest, longest loops,
//! transposes go through a cache-blocked kernel, and large copies run on the rayon pool. See
//! the `kernel` module. Packed sub-byte data can only be copied when it is already dense in the
//! requested order.

mod buffer;
mod chunked;
mod kernel;
mod plan;
#[cfg(target_arch = "x86_64")]
mod simd;
mod stream;
mod view;

pub(crate) use buffer::HostBuffer;
use kernel::Destination;
#[cfg(test)]
use kernel::PARALLEL_THRESHOLD;

use std::sync::Arc;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::layout::{Layout, c_strides, f_strides};
use crate::tensor::Described;
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

fn check_host(t: &Tensor) -> Result<()> {
    if t.device().is_host_accessible() {
        Ok(())
    } else {
        Err(Error::NotHostAccessible { device: t.device() })
    }
}

fn is_packed_subbyte(t: &Tensor) -> bool {
    t.dtype().is_subbyte() && !t.is_subbyte_padded()
}

/// Strides in elements of a dense layout of `shape` in `order`.
fn dense_strides(shape: &[i64], order: Order) -> Vec<i64> {
    match order {
        Order::C => c_strides(shape),
        Order::F => f_strides(shape),
    }
    .expect("validated shapes do not overflow")
}

/// A writable CPU tensor that owns `buffer`, laid out by `layout`.
pub(crate) fn tensor_from_buffer(
    buffer: HostBuffer,
    dtype: DType,
    layout: Layout,
    subbyte_padded: bool,
) -> Tensor {
    let mut buffer = buffer;
    let data = buffer.as_mut_ptr().cast();
    Tensor::from_described(
        Described {
            data,
            byte_offset: 0,
            device: Device::CPU,
            dtype,
            layout,
            readonly: false,
            is_copied: true,
            subbyte_padded,
        },
        Arc::new(buffer),
    )
}

impl Tensor {
    /// A new, zero-filled, writable, C-contiguous host tensor.
    ///
    /// ```
    /// let t = dlbridge::Tensor::zeros(dlbridge::DType::FLOAT32, &[2, 3])?;
    /// assert_eq!(t.to_vec::<f32>()?, [0.0; 6]);
    /// # Ok::<(), dlbridge::Error>(())
    /// ```
    pub fn zeros(dtype: DType, shape: &[usize]) -> Result<Self> {
        Self::zeros_in(dtype, Layout::contiguous_usize(shape, dtype.itemsize())?)
    }

    /// [`Tensor::zeros`] with a C-contiguous `layout` of `dtype` items made already.
    pub(crate) fn zeros_in(dtype: DType, layout: Layout) -> Result<Self> {
        let nbytes = dtype
            .packed_nbytes(layout.size())
            .filter(|_| dtype.is_subbyte())
            .unwrap_or(layout.size() * dtype.itemsize());
        let buffer = crate::copy::HostBuffer::new(nbytes)?;
        Ok(crate::copy::tensor_from_buffer(
            buffer, dtype, layout, false,
        ))
    }

    /// A new, writable host copy, dense in `order`, with `is_copied` set.
    ///
    /// Works for every host-accessible device (CPU, CUDA pinned and managed memory) and every
    /// layout, including negative and zero strides; packed sub-byte data must already be dense
    /// in `order`. Device memory is refused with [`Error::NotHostAccessible`] (use
    /// [`crate::cuda::copy_to_host`]).
    pub fn copy(&self, order: Order) -> Result<Tensor> {
        check_host(self)?;
        let shape = self.shape();
        let strides = dense_strides(shape, order);
        let layout = Layout::new(shape, Some(&strides), self.itemsize())?;
        let nbytes = self.nbytes();
        let already_dense = match order {
            Order::C => self.is_c_contiguous(),
            Order::F => self.is_f_contiguous(),
        };
        if is_packed_subbyte(self) && !already_dense {
            return Err(Error::UnsupportedFormat {
                format: self.dtype().name(),
                reason: "packed sub-byte data can only be copied when contiguous".to_owned(),
            });
        }
        // SAFETY: every byte is written below before the buffer is read or handed out: dense
        // data is copied whole, otherwise the plan writes every element of the dense layout,
        // whose elements tile the `nbytes` bytes exactly.
        let mut buffer = unsafe { HostBuffer::uninit(nbytes) }?;
        let src = self.first_element().cast_const();
        if already_dense {
            // One contiguous run of bytes (packed sub-byte data included).
            let bytes = [nbytes as i64];
            if let Some(plan) = plan::plan(&bytes, &[1], &[1]) {
                // SAFETY: the tensor is dense in `order`, so its `nbytes` bytes start at the
                // first element and are host-readable while `self` lives; the fresh buffer
                // holds exactly `nbytes` and is disjoint.
                unsafe { kernel::run(&plan, 1, src, buffer.as_mut_ptr(), Destination::Fresh) };
            }
        } else if let Some(plan) = plan::plan(shape, self.strides(), &strides) {
            // SAFETY: the validated source layout reaches only readable host memory; the
            // destination is the fresh dense buffer of exactly these elements (disjoint from
            // the source, and no two of its elements share bytes).
            unsafe {
                kernel::run(
                    &plan,
                    self.itemsize(),
                    src,
                    buffer.as_mut_ptr(),
                    Destination::Fresh,
                )
            };
        }
        Ok(tensor_from_buffer(
            buffer,
            self.dtype(),
            layout,
            self.is_subbyte_padded(),
        ))
    }

    /// This tensor when it is already C-contiguous (a cheap clone sharing the memory),
    /// otherwise a C-contiguous host copy.
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_c_contiguous() {
            Ok(self.clone())
        } else {
            self.copy(Order::C)
        }
    }
}

/// The strides (elements) that make a source of `shape`/`strides` broadcast to `target`
/// (NumPy rules: trailing dimensions match or are 1; missing leading dimensions are added).
fn broadcast_strides(shape: &[i64], strides: &[i64], target: &[i64]) -> Option<Vec<i64>> {
    if shape.len() > target.len() {
        return None;
    }
    let lead = target.len() - shape.len();
    let mut out = vec![0i64; target.len()];
    for (k, (&n, &s)) in shape.iter().zip(strides).enumerate() {
        let want = target[lead + k];
        out[lead + k] = if n == want {
            s
        } else if n == 1 {
            0
        } else {
            return None;
        };
    }
    Some(out)
}

/// Byte range `[start, end)` the elements of a host tensor occupy (empty for no elements).
fn byte_range(t: &Tensor) -> (usize, usize) {
    if t.size() == 0 {
        return (0, 0);
    }
    let item = t.itemsize() as i128;
    let first = t.data_ptr() as i128;
    let start = first + i128::from(t.layout().min_offset()) * item;
    let end = first + (i128::from(t.layout().max_offset()) + 1) * item;
    (start as usize, end as usize)
}

/// Copy the elements of `src` into the existing tensor `dst` (`numpy.copyto` without casting):
/// `src` broadcasts to `dst`'s shape, both must be host-accessible and of the same dtype.
///
/// Errors: a read-only `dst` is [`Error::ReadOnly`] (BufferError); a dtype or shape mismatch is
/// [`Error::InvalidArgument`] (ValueError); device memory is [`Error::NotHostAccessible`].
/// Overlapping `src` and `dst` are handled (the source is copied first). A destination whose
/// elements may share memory (zero or interleaved strides) is written sequentially, so the
/// last write wins.
///
/// # Safety
/// The call writes through `dst`'s memory, which other tensors or foreign arrays may alias (a
/// `Tensor` is `Clone` and `Sync`, so the writes cannot be made exclusive by the borrow checker):
/// no other thread may read or write those elements while it runs (the rule `numpy.copyto`
/// has), and no shared view of them ([`Tensor::as_slice`], [`Tensor::host_bytes`]) may be alive.
pub unsafe fn copy_into(dst: &Tensor, src: &Tensor) -> Result<()> {
    if dst.is_readonly() {
        return Err(Error::ReadOnly);
    }
    check_host(dst)?;
    check_host(src)?;
    if dst.dtype() != src.dtype() {
        return Err(Error::InvalidArgument(format!(
            "cannot copy {} into a tensor of {} without casting; convert the source first",
            src.dtype(),
            dst.dtype()
        )));
    }
    let strides = broadcast_strides(src.shape(), src.strides(), dst.shape()).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "cannot copy a source of shape {:?} into a destination of shape {:?}: the shapes do not broadcast",
            src.shape(),
            dst.shape()
        ))
    })?;
    if dst.size() == 0 {
        return Ok(());
    }
    let (ds, de) = byte_range(dst);
    let (ss, se) = byte_range(src);
    if ss < de && ds < se {
        // Overlapping memory: read everything before writing anything.
        let staged = src.copy(Order::C)?;
        // SAFETY: forwarded contract; the staged copy is fresh memory.
        return unsafe { copy_into(dst, &staged) };
    }
    if is_packed_subbyte(dst) || is_packed_subbyte(src) {
        if dst.is_c_contiguous() && src.is_c_contiguous() && src.shape() == dst.shape() {
            // SAFETY: both dense, same element count, so both span `nbytes` bytes from their
            // first element; the ranges are disjoint (checked above) and `dst` is writable.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    src.first_element().cast_const(),
                    dst.first_element(),
                    dst.nbytes(),
                )
            };
            return Ok(());
        }
        return Err(Error::UnsupportedFormat {
            format: dst.dtype().name(),
            reason: "packed sub-byte data can only be copied between contiguous tensors of the same shape".to_owned(),
        });
    }
    let Some(plan) = plan::plan(dst.shape(), &strides, dst.strides()) else {
        return Ok(());
    };
    let disjoint = plan::provably_disjoint(dst.shape(), dst.strides());
    // Both layouts were validated against host-accessible memory (broadcasting only zeroes
    // strides, reaching a subset of the source); `dst` is writable and not read-only; the byte
    // ranges are disjoint; `disjoint` only when no two destination elements share bytes.
    // SAFETY: the above, and exclusivity of the destination is the caller's contract.
    unsafe {
        kernel::run(
            &plan,
            dst.itemsize(),
            src.first_element().cast_const(),
            dst.first_element(),
            Destination::Existing { disjoint },
        )
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::for_each_offset;
    use crate::tensor::TensorFlags;
    use proptest::prelude::*;

    /// A view of `t`'s memory with another layout (first element moved by `offset` elements).
    fn view(t: &Tensor, dtype: DType, shape: &[i64], strides: &[i64], offset: i64) -> Tensor {
        let layout = Layout::new(shape, Some(strides), dtype.itemsize()).unwrap();
        let byte_offset = t.byte_offset() + (offset as u64) * dtype.itemsize() as u64;
        // SAFETY: the tests only build views that stay inside `t`'s bytes.
        unsafe {
            Tensor::from_raw_parts(
                t.raw_data(),
                byte_offset,
                t.device(),
                dtype,
                layout,
                TensorFlags {
                    readonly: t.is_readonly(),
                    copied: false,
                },
                t.owner().clone(),
            )
            .unwrap()
        }
    }

    fn transposed(t: &Tensor) -> Tensor {
        let shape: Vec<i64> = t.shape().iter().rev().copied().collect();
        let strides: Vec<i64> = t.strides().iter().rev().copied().collect();
        view(t, t.dtype(), &shape, &strides, 0)
    }

    /// Element bytes in row-major index order, by the naive walk.
    fn reference(t: &Tensor) -> Vec<u8> {
        let item = t.itemsize();
        let mut out = Vec::with_capacity(t.size() * item);
        for_each_offset(t.layout(), |o| {
            let p = t.data_ptr() as isize + o as isize * item as isize;
            // SAFETY: an element of a validated host tensor.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(p as *const u8, item) });
        });
        out
    }

    #[test]
    fn copy_of_transpose_is_c_order() {
        let t = Tensor::from_vec((0..6).collect::<Vec<i32>>(), &[2, 3]).unwrap();
        let tt = transposed(&t);
        assert_eq!(tt.to_vec::<i32>().unwrap(), vec![0, 3, 1, 4, 2, 5]);
        let c = tt.copy(Order::C).unwrap();
        assert!(c.is_c_contiguous() && c.is_copied() && !c.is_readonly());
        assert_eq!(c.as_slice::<i32>().unwrap(), &[0, 3, 1, 4, 2, 5]);
        let f = tt.copy(Order::F).unwrap();
        assert!(f.is_f_contiguous());
        assert_eq!(f.to_vec::<i32>().unwrap(), vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "copies of megabytes, for the parallel and streaming paths: hours under Miri (scripts/tsan_test.sh runs them)"
    )]
    fn big_transposes_every_itemsize() {
        for (item, dtype) in [
            (1, DType::UINT8),
            (2, DType::UINT16),
            (4, DType::UINT32),
            (8, DType::UINT64),
            (16, DType::COMPLEX128),
            (12, DType::new(crate::TypeCode::FLOAT, 32, 3).unwrap()),
        ] {
            let (rows, cols) = (300i64, 520i64); // > PARALLEL_THRESHOLD for 8+ bytes
            let bytes: Vec<u8> = (0..rows * cols * item)
                .map(|x| (x * 7 % 251) as u8)
                .collect();
            let raw = Tensor::from_vec(bytes, &[(rows * cols * item) as usize]).unwrap();
            let t = view(&raw, dtype, &[rows, cols], &[cols, 1], 0);
            let tt = transposed(&t);
            let c = tt.copy(Order::C).unwrap();
            assert_eq!(c.host_bytes().unwrap(), reference(&tt), "itemsize {item}");
            assert_eq!(c.shape(), &[cols, rows]);
            let f = tt.copy(Order::F).unwrap();
            assert_eq!(reference(&transposed(&f)), raw.host_bytes().unwrap());
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "copies of megabytes, for the parallel and streaming paths: hours under Miri (scripts/tsan_test.sh runs them)"
    )]
    fn large_copies() {
        // Many parallel pieces, tiles with 64-byte aligned destination lines.
        let (rows, cols) = (1024i64, 4160i64);
        let t = Tensor::from_vec(
            (0..(rows * cols) as u32).collect::<Vec<u32>>(),
            &[rows as usize, cols as usize],
        )
        .unwrap();
        let c = t.transposed().copy(Order::C).unwrap();
        assert_eq!(c.host_bytes().unwrap(), reference(&t.transposed()));
        let d = t.copy(Order::C).unwrap();
        assert_eq!(d.host_bytes().unwrap(), t.host_bytes().unwrap());
        let w = Tensor::from_vec(
            (0..(rows * cols) as u64).collect::<Vec<u64>>(),
            &[rows as usize, cols as usize],
        )
        .unwrap();
        let c = w.transposed().copy(Order::C).unwrap();
        assert_eq!(c.host_bytes().unwrap(), reference(&w.transposed()));
    }

    #[test]
    fn contiguous_is_self_when_dense() {
        let t = Tensor::from_vec((0..6).collect::<Vec<i16>>(), &[2, 3]).unwrap();
        let same = t.contiguous().unwrap();
        assert_eq!(same.data_ptr(), t.data_ptr());
        let c = transposed(&t).contiguous().unwrap();
        assert_ne!(c.data_ptr(), t.data_ptr());
        assert_eq!(c.to_vec::<i16>().unwrap(), vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "copies of megabytes, for the parallel and streaming paths: hours under Miri (scripts/tsan_test.sh runs them)"
    )]
    fn big_contiguous_copy() {
        let n = (3 * PARALLEL_THRESHOLD / 8 + 5) as i64;
        let t = Tensor::from_vec((0..n).collect::<Vec<i64>>(), &[n as usize]).unwrap();
        let c = t.copy(Order::C).unwrap();
        assert_eq!(c.as_slice::<i64>().unwrap(), t.as_slice::<i64>().unwrap());
        // A reversed view goes through the strided rows.
        let r = view(&t, DType::INT64, &[n], &[-1], n - 1);
        let rc = r.copy(Order::C).unwrap();
        assert_eq!(rc.as_slice::<i64>().unwrap()[0], n - 1);
        assert_eq!(rc.host_bytes().unwrap(), reference(&r));
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "copies of megabytes, for the parallel and streaming paths: hours under Miri (scripts/tsan_test.sh runs them)"
    )]
    fn contiguous_copies_around_the_chunked_threshold() {
        let at = kernel::CONTIGUOUS_THRESHOLD;
        for bytes in [at - 1, at, at + 4097] {
            let values: Vec<u8> = (0..bytes).map(|i| (i * 13 % 251) as u8).collect();
            let t = Tensor::from_vec(values, &[bytes]).unwrap();
            let c = t.copy(Order::C).unwrap();
            assert_eq!(c.host_bytes().unwrap(), t.host_bytes().unwrap(), "{bytes}");
            let dst = Tensor::zeros(DType::UINT8, &[bytes]).unwrap();
            // SAFETY: nothing else uses `dst`.
            unsafe { copy_into(&dst, &t) }.unwrap();
            assert_eq!(
                dst.host_bytes().unwrap(),
                t.host_bytes().unwrap(),
                "{bytes}"
            );
        }
        // 16-byte elements in two dimensions that the planner merges into one run.
        let n = (at / 16 + 3) as i64;
        let raw: Vec<u8> = (0..2 * n * 16).map(|i| (i % 253) as u8).collect();
        let raw = Tensor::from_vec(raw, &[2 * n as usize * 16]).unwrap();
        let t = view(&raw, DType::COMPLEX128, &[2, n], &[n, 1], 0);
        let dst = Tensor::zeros(DType::COMPLEX128, &[2, n as usize]).unwrap();
        // SAFETY: nothing else uses `dst`.
        unsafe { copy_into(&dst, &t) }.unwrap();
        assert_eq!(dst.host_bytes().unwrap(), raw.host_bytes().unwrap());
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "copies of megabytes, for the parallel and streaming paths: hours under Miri (scripts/tsan_test.sh runs them)"
    )]
    fn large_contiguous_copies_of_unaligned_views() {
        // Views that start 3 bytes into their buffers: above the threshold, the streaming
        // kernel copies an unaligned head and tail the ordinary way.
        let at = kernel::STREAMING_THRESHOLD;
        for bytes in [at - 1, at + 77] {
            let values: Vec<u8> = (0..bytes + 3).map(|i| (i * 31 % 253) as u8).collect();
            let raw = Tensor::from_vec(values, &[bytes + 3]).unwrap();
            let t = view(&raw, DType::UINT8, &[bytes as i64], &[1], 3);
            let expected = &raw.host_bytes().unwrap()[3..];
            let c = t.copy(Order::C).unwrap();
            assert_eq!(c.host_bytes().unwrap(), expected, "{bytes}");
            let buffer = Tensor::zeros(DType::UINT8, &[bytes + 3]).unwrap();
            let dst = view(&buffer, DType::UINT8, &[bytes as i64], &[1], 3);
            // SAFETY: nothing else uses `buffer`.
            unsafe { copy_into(&dst, &t) }.unwrap();
            let written = buffer.host_bytes().unwrap();
            assert_eq!(&written[3..], expected, "{bytes}");
            assert_eq!(&written[..3], &[0, 0, 0]);
        }
    }

    #[test]
    fn copy_into_checks_and_broadcasts() {
        let dst = Tensor::from_vec(vec![0i32; 6], &[2, 3]).unwrap();
        let row = Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap();
        // SAFETY: nothing else uses `dst`.
        unsafe { copy_into(&dst, &row) }.unwrap();
        assert_eq!(dst.as_slice::<i32>().unwrap(), &[1, 2, 3, 1, 2, 3]);
        let bad = Tensor::from_vec(vec![1i32, 2], &[2]).unwrap();
        // SAFETY: as above.
        let e = unsafe { copy_into(&dst, &bad) }.unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Value);
        let other = Tensor::from_vec(vec![1i64, 2, 3], &[3]).unwrap();
        // SAFETY: as above.
        let e = unsafe { copy_into(&dst, &other) }.unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Value);
        let ro = dst.clone().into_readonly();
        // SAFETY: as above.
        let e = unsafe { copy_into(&ro, &row) }.unwrap_err();
        assert!(matches!(e, Error::ReadOnly));
        assert_eq!(e.kind(), crate::ErrorKind::Buffer);
    }

    #[test]
    fn copy_into_overlapping_self_transpose() {
        let t = Tensor::from_vec((0..16).collect::<Vec<u32>>(), &[4, 4]).unwrap();
        let expected: Vec<u32> = transposed(&t).to_vec().unwrap();
        // SAFETY: nothing else uses `t` during the call.
        unsafe { copy_into(&t, &transposed(&t)) }.unwrap();
        assert_eq!(t.to_vec::<u32>().unwrap(), expected);
    }

    #[test]
    fn empty_and_scalar() {
        let e = Tensor::from_vec(Vec::<f32>::new(), &[0, 3]).unwrap();
        let c = e.copy(Order::C).unwrap();
        assert_eq!((c.size(), c.shape()), (0, &[0i64, 3][..]));
        let s = Tensor::from_vec(vec![2.5f64], &[]).unwrap();
        assert_eq!(
            s.copy(Order::F).unwrap().to_vec::<f64>().unwrap(),
            vec![2.5]
        );
    }

    /// A random strided view: per dimension an extent, a step (negative = reversed) and
    /// a permutation of the dimensions, over a buffer big enough to hold it.
    fn strided_case() -> impl Strategy<Value = (usize, Vec<(i64, i64)>, Vec<usize>)> {
        let itemsize = prop::sample::select(vec![1usize, 2, 3, 4, 8, 12, 16]);
        let extent = prop_oneof![4 => 0i64..7, 1 => 8i64..80];
        // Miri interprets every element copy: the same shapes, layouts and kernels, on smaller
        // buffers (a 100k-element case took minutes there; scripts/miri_test.sh).
        let max_base: i64 = if cfg!(miri) { 2_000 } else { 100_000 };
        let dims = prop::collection::vec((extent, -3i64..4), 0..5).prop_filter(
            "a bounded number of elements in the base buffer",
            move |dims| {
                dims.iter()
                    .map(|(n, s)| n * s.abs().max(1))
                    .product::<i64>()
                    <= max_base
            },
        );
        (itemsize, dims).prop_flat_map(|(item, dims)| {
            let n = dims.len();
            (
                Just(item),
                Just(dims),
                Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
            )
        })
    }

    fn dtype_of(itemsize: usize) -> DType {
        match itemsize {
            1 => DType::UINT8,
            2 => DType::UINT16,
            4 => DType::FLOAT32,
            8 => DType::INT64,
            16 => DType::COMPLEX128,
            n => DType::new(crate::TypeCode::UINT, 8, n as u16).unwrap(),
        }
    }

    /// Build the view described by `dims` (extent, step) and `perm` over a fresh buffer.
    fn build(item: usize, dims: &[(i64, i64)], perm: &[usize]) -> Tensor {
        // A C-contiguous base with extents |step| * n, then stepped, then permuted.
        let base_shape: Vec<i64> = dims.iter().map(|(n, s)| n * s.abs().max(1)).collect();
        let base_strides = c_strides(&base_shape).unwrap();
        let total: i64 = base_shape.iter().product::<i64>().max(1);
        let bytes: Vec<u8> = (0..total * item as i64)
            .map(|x| (x * 31 % 253) as u8)
            .collect();
        let raw = Tensor::from_vec(bytes, &[total as usize * item]).unwrap();
        let mut offset = 0;
        let mut shape = vec![];
        let mut strides = vec![];
        for ((&(n, s), &bs), &bn) in dims.iter().zip(&base_strides).zip(&base_shape) {
            shape.push(n);
            strides.push(bs * s);
            if s < 0 && bn > 0 {
                offset += (bn - 1) * bs;
            }
        }
        let shape: Vec<i64> = perm.iter().map(|&k| shape[k]).collect();
        let strides: Vec<i64> = perm.iter().map(|&k| strides[k]).collect();
        view(&raw, dtype_of(item), &shape, &strides, offset)
    }

    proptest! {
        #[test]
        fn copy_equals_naive_reference((item, dims, perm) in strided_case()) {
            let t = build(item, &dims, &perm);
            let c = t.copy(Order::C).unwrap();
            prop_assert!(c.is_c_contiguous());
            prop_assert_eq!(c.host_bytes().unwrap(), &reference(&t)[..]);
            let f = t.copy(Order::F).unwrap();
            prop_assert!(f.is_f_contiguous());
            prop_assert_eq!(reference(&f), reference(&t));
        }

        #[test]
        fn copy_into_strided_destination((item, dims, perm) in strided_case()) {
            let src = build(item, &dims, &perm);
            // The destination: another strided view of the same shape over its own buffer
            // (reversed, stepped and permuted alike, but without zero strides).
            let unique: Vec<(i64, i64)> =
                dims.iter().map(|&(n, s)| (n, if s == 0 { 1 } else { -s })).collect();
            let dst = build(item, &unique, &perm);
            // SAFETY: nothing else uses `dst`'s memory.
            unsafe { copy_into(&dst, &src) }.unwrap();
            prop_assert_eq!(reference(&dst), reference(&src));
        }
    }
}
