//! Shared pieces of the fuzz targets: `#[repr(C)]` mirrors of the DLPack structs (dlbridge keeps
//! its fields private to the crate, as a producer's struct would be foreign anyway), biased
//! integer generators, and a brute-force reference for strided layouts.
#![allow(dead_code)]

use std::ffi::c_void;

use arbitrary::{Arbitrary, Result, Unstructured};

// ------------------------------------------------------------------------------------------
// DLPack ABI (dlpack.h 1.3), as a foreign producer lays it out.
// ------------------------------------------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLPackVersion {
    pub major: u32,
    pub minor: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

#[repr(C)]
pub struct DLManagedTensor {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
pub struct DLManagedTensorVersioned {
    pub version: DLPackVersion,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

/// Bytes of a versioned struct that every major version promises: version, manager_ctx,
/// deleter, flags.
pub const VERSIONED_HEADER: usize = 32;

const _: () = {
    assert!(std::mem::size_of::<DLTensor>() == 48);
    assert!(std::mem::size_of::<DLManagedTensor>() == 64);
    assert!(std::mem::size_of::<DLManagedTensorVersioned>() == 80);
    assert!(std::mem::offset_of!(DLManagedTensorVersioned, dl_tensor) == VERSIONED_HEADER);
};

// ------------------------------------------------------------------------------------------
// Biased integers: mostly small, sometimes anything.
// ------------------------------------------------------------------------------------------

/// An extent: usually 0..=5, sometimes an arbitrary i64 (negative, huge).
#[derive(Clone, Copy, Debug)]
pub struct Extent(pub i64);

impl<'a> Arbitrary<'a> for Extent {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(Extent(match u.int_in_range(0u8..=15)? {
            0 => i64::arbitrary(u)?,
            1 => *u.choose(&[
                -1,
                i64::MIN,
                i64::MAX,
                1 << 31,
                1 << 32,
                (1 << 62) + 1,
                i64::MAX / 2 + 1,
                0x7fff_ffff_ffff,
            ])?,
            2..=3 => 1,
            _ => i64::from(u.int_in_range(0u8..=5)?),
        }))
    }
}

/// A stride in elements: usually -8..=8, sometimes arbitrary.
#[derive(Clone, Copy, Debug)]
pub struct Stride(pub i64);

impl<'a> Arbitrary<'a> for Stride {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(Stride(match u.int_in_range(0u8..=15)? {
            0 => i64::arbitrary(u)?,
            1 => *u.choose(&[i64::MIN, i64::MAX, -(1 << 40), 1 << 40, 1 << 61, -(1 << 61)])?,
            _ => i64::from(u.int_in_range(-8i8..=8)?),
        }))
    }
}

/// A DLPack dtype: usually one dlbridge knows, sometimes raw bytes.
#[derive(Clone, Copy, Debug)]
pub struct RawDType(pub DLDataType);

impl<'a> Arbitrary<'a> for RawDType {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        const KNOWN: &[(u8, u8)] = &[
            (0, 8),
            (0, 16),
            (0, 32),
            (0, 64),
            (1, 8),
            (1, 16),
            (1, 32),
            (1, 64),
            (2, 16),
            (2, 32),
            (2, 64),
            (4, 16),
            (5, 64),
            (5, 128),
            (6, 8),
            (10, 8),
            (12, 8),
            (14, 8),
            (15, 6),
            (17, 4),
            (3, 64),
        ];
        Ok(RawDType(if u.ratio(1u8, 8)? {
            DLDataType {
                code: u8::arbitrary(u)?,
                bits: u8::arbitrary(u)?,
                lanes: u16::arbitrary(u)?,
            }
        } else {
            let &(code, bits) = u.choose(KNOWN)?;
            let lanes = if u.ratio(1u8, 10)? {
                *u.choose(&[0u16, 2, 4, 16, u16::MAX])?
            } else {
                1
            };
            DLDataType { code, bits, lanes }
        }))
    }
}

// ------------------------------------------------------------------------------------------
// Reference strided walk (independent of dlbridge's own `for_each_offset`).
// ------------------------------------------------------------------------------------------

/// Element offsets of every element, row-major (`f_order = false`) or column-major index order.
pub fn offsets(shape: &[i64], strides: &[i64], f_order: bool) -> Vec<i64> {
    let size: i64 = shape.iter().product();
    if size <= 0 {
        return vec![];
    }
    let ndim = shape.len();
    let mut out = Vec::with_capacity(size as usize);
    let mut index = vec![0i64; ndim];
    for _ in 0..size {
        out.push(index.iter().zip(strides).map(|(i, s)| i * s).sum());
        // advance the index: last dim fastest (C) or first dim fastest (F)
        for k in 0..ndim {
            let d = if f_order { k } else { ndim - 1 - k };
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}

/// Gather the elements of a strided layout from `base` (byte address of element 0) into a
/// dense byte vector in the given index order.
///
/// # Safety
/// Every element the layout reaches must be readable.
pub unsafe fn gather(
    base: *const u8,
    shape: &[i64],
    strides: &[i64],
    itemsize: usize,
    f_order: bool,
) -> Vec<u8> {
    let mut out = Vec::new();
    for off in offsets(shape, strides, f_order) {
        let p = unsafe { base.offset(off as isize * itemsize as isize) };
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(p, itemsize) });
    }
    out
}

/// The byte range `[lo, hi)` a non-empty layout reaches from `first` (i128: no overflow here).
pub fn reach(first: i128, shape: &[i64], strides: &[i64], itemsize: usize) -> (i128, i128) {
    let mut lo = 0i128;
    let mut hi = 0i128;
    for (&n, &s) in shape.iter().zip(strides) {
        let r = i128::from(n - 1) * i128::from(s);
        if r < 0 {
            lo += r;
        } else {
            hi += r;
        }
    }
    let item = itemsize as i128;
    (first + lo * item, first + (hi + 1) * item)
}
