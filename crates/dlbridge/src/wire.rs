//! A tensor as one run of bytes plus the [`Description`] that gives them their meaning: what
//! pickling and shared memory send to another process, and the checks a receiver makes before
//! it views bytes it was handed (a pickle may come from anywhere, so nothing is trusted).

use std::ffi::c_void;

use crate::device::Device;
use crate::dtype::{DType, TypeCode};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::Described;
use crate::tensor::{Owner, Tensor};

/// Everything about a tensor that travels beside its bytes to another process: no addresses,
/// only what can be checked against the bytes a receiver gets. A tensor in shared memory
/// (`shared::handle` and `shared::view`, on Linux)
/// and one opened from a CUDA IPC handle ([`cuda::IpcHandle`](crate::cuda::IpcHandle)) are
/// described by one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Description {
    /// DLPack type code, bits and lanes of the elements.
    pub dtype: (u8, u8, u16),
    /// Extents.
    pub shape: Vec<i64>,
    /// Strides in elements.
    pub strides: Vec<i64>,
    /// Bytes from the start of the bytes to the first element.
    pub byte_offset: u64,
    /// Sub-byte elements stored one per byte rather than packed.
    pub subbyte_padded: bool,
}

impl Description {
    /// What `t` looks like to a receiver of its bytes alone ([`Tensor::host_bytes`] of a
    /// contiguous tensor): its own layout, first element at offset 0.
    pub fn of(t: &Tensor) -> Self {
        let dtype = t.dtype();
        Self {
            dtype: (dtype.code().0, dtype.bits(), dtype.lanes()),
            shape: t.shape().to_vec(),
            strides: t.strides().to_vec(),
            byte_offset: 0,
            subbyte_padded: t.is_subbyte_padded(),
        }
    }

    /// Check this description against `len` bytes. With `exact`, the bytes must be the
    /// elements and nothing else: C- or F-contiguous, starting at offset 0 and `len` equal to
    /// their byte count (what [`Description::of`] describes). Otherwise every element the
    /// layout reaches must lie within the `len` bytes (a view into a larger shared mapping).
    pub fn check(&self, len: usize, exact: bool) -> Result<(DType, Layout)> {
        let (code, bits, lanes) = self.dtype;
        let dtype = DType::new(TypeCode(code), bits, lanes)?;
        let layout = Layout::new(&self.shape, Some(&self.strides), dtype.itemsize())?;
        let packed = dtype.is_subbyte() && !self.subbyte_padded;
        if packed && !layout.is_c_contiguous() {
            return Err(mismatch(
                "packed sub-byte elements must be C-contiguous".to_owned(),
            ));
        }
        let dense = layout.is_c_contiguous() || layout.is_f_contiguous();
        let nbytes = element_bytes(dtype, &layout, packed)?;
        let first = usize::try_from(self.byte_offset)
            .map_err(|_| mismatch(format!("byte offset {} is too large", self.byte_offset)))?;
        if exact {
            if !dense || first != 0 || len != nbytes {
                return Err(mismatch(format!(
                    "{len} bytes cannot hold exactly a dense layout of shape {:?}, strides {:?} and \
                     {dtype} at byte offset {first} ({nbytes} bytes)",
                    self.shape, self.strides
                )));
            }
            return Ok((dtype, layout));
        }
        let item = dtype.itemsize();
        // The layout bounds its byte span by isize::MAX, so these products cannot overflow.
        let below = layout.min_offset().unsigned_abs() as usize * item;
        let above = if layout.size() == 0 {
            0
        } else if packed {
            nbytes
        } else {
            (layout.max_offset() as usize + 1) * item
        };
        let inside = first >= below && first.checked_add(above).is_some_and(|end| end <= len);
        if !inside {
            return Err(mismatch(format!(
                "shape {:?} and strides {:?} of {dtype} at byte offset {first} reach outside the \
                 {len} bytes given",
                self.shape, self.strides
            )));
        }
        Ok((dtype, layout))
    }
}

/// Bytes the elements of `layout` occupy when dense.
fn element_bytes(dtype: DType, layout: &Layout, packed: bool) -> Result<usize> {
    let bytes = if packed {
        dtype.packed_nbytes(layout.size())
    } else {
        layout.size().checked_mul(dtype.itemsize())
    };
    bytes.ok_or_else(|| mismatch("the element count overflows".to_owned()))
}

#[cold]
#[inline(never)]
fn mismatch(what: String) -> Error {
    Error::InvalidLayout(format!("the bytes do not match their description: {what}"))
}

/// The bytes of a C- or F-contiguous host tensor as a 1-d `uint8` tensor that shares its
/// memory, owner and read-only flag: what a pickle sends out of band. Other layouts need a
/// copy first ([`Tensor::copy`]); device memory a transfer to the host.
#[cfg_attr(not(feature = "pyo3"), allow(dead_code))] // for the Python face
pub(crate) fn bytes_of(t: &Tensor) -> Result<Tensor> {
    t.device().require_host()?;
    if !(t.is_c_contiguous() || t.is_f_contiguous()) {
        return Err(Error::CopyRequired {
            reason: "the tensor is not contiguous".to_owned(),
        });
    }
    let nbytes = t.nbytes();
    let layout = Layout::contiguous(&[nbytes as i64], 1)?;
    Ok(Tensor::from_described(
        Described {
            data: t.raw_data(),
            byte_offset: t.byte_offset(),
            device: t.device(),
            dtype: DType::UINT8,
            layout,
            readonly: t.is_readonly(),
            is_copied: false,
            subbyte_padded: false,
        },
        t.owner().clone(),
    ))
}

/// A host tensor viewing `len` bytes at `data` as `description` says, after checking (see
/// [`Description::check`]) that it stays within them. Read-only when `readonly`.
///
/// # Safety
/// `len` bytes at `data` must be readable host memory (and writable unless `readonly`) for as
/// long as `owner` lives; `data` may be dangling only when `len` is 0.
pub(crate) unsafe fn from_bytes(
    data: *mut u8,
    len: usize,
    readonly: bool,
    owner: Owner,
    description: &Description,
    exact: bool,
) -> Result<Tensor> {
    let (dtype, layout) = description.check(len, exact)?;
    let data = if layout.size() == 0 {
        std::ptr::null_mut()
    } else {
        data.cast::<c_void>()
    };
    Ok(Tensor::from_described(
        Described {
            data,
            byte_offset: if data.is_null() {
                0
            } else {
                description.byte_offset
            },
            device: Device::CPU,
            dtype,
            layout,
            readonly,
            is_copied: false,
            subbyte_padded: description.subbyte_padded && dtype.is_subbyte(),
        },
        owner,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;

    fn describe(shape: &[i64], strides: &[i64], offset: u64) -> Description {
        Description {
            dtype: (TypeCode::FLOAT.0, 32, 1),
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            byte_offset: offset,
            subbyte_padded: false,
        }
    }

    #[test]
    fn bytes_round_trip_zero_copy() {
        let t = Tensor::from_vec((0..6).map(|x| x as f32).collect(), &[2, 3]).unwrap();
        let bytes = bytes_of(&t).unwrap();
        assert_eq!(bytes.shape(), &[24]);
        assert_eq!(bytes.data_ptr(), t.data_ptr());
        // SAFETY: the 24 bytes of `t` stay valid while `bytes` (the owner) holds its memory.
        let back = unsafe {
            from_bytes(
                bytes.first_element(),
                24,
                true,
                Arc::new(bytes.clone()),
                &Description::of(&t),
                true,
            )
        }
        .unwrap();
        assert_eq!(back.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
        assert_eq!(back.data_ptr(), t.data_ptr());
        assert!(back.is_readonly());
    }

    #[test]
    fn exact_descriptions_must_fill_the_bytes() {
        assert!(describe(&[2, 3], &[3, 1], 0).check(24, true).is_ok());
        assert!(describe(&[2, 3], &[1, 2], 0).check(24, true).is_ok());
        assert!(describe(&[2, 3], &[3, 1], 0).check(23, true).is_err());
        assert!(describe(&[2, 3], &[3, 1], 0).check(25, true).is_err());
        assert!(describe(&[2, 3], &[3, 1], 4).check(28, true).is_err());
        assert!(describe(&[2, 3], &[6, 2], 0).check(48, true).is_err());
        assert!(describe(&[3], &[-1], 8).check(12, true).is_err());
        assert!(describe(&[0, 5], &[9, 9], 0).check(0, true).is_ok());
        assert!(describe(&[-1], &[1], 0).check(0, true).is_err());
        assert!(describe(&[i64::MAX, 2], &[2, 1], 0).check(0, true).is_err());
    }

    #[test]
    fn views_must_stay_inside_the_bytes() {
        assert!(describe(&[3], &[-1], 8).check(12, false).is_ok());
        assert!(describe(&[3], &[-1], 4).check(12, false).is_err());
        assert!(describe(&[2, 2], &[4, 1], 8).check(32, false).is_ok());
        assert!(describe(&[2, 2], &[4, 1], 12).check(32, false).is_err());
        assert!(describe(&[2], &[1], u64::MAX).check(32, false).is_err());
    }

    #[test]
    fn packed_subbyte_counts_packed_bytes() {
        let fp4 = DType::from_name("float4_e2m1fn").unwrap();
        let d = Description {
            dtype: (fp4.code().0, fp4.bits(), 1),
            shape: vec![3],
            strides: vec![1],
            byte_offset: 0,
            subbyte_padded: false,
        };
        assert!(d.check(2, true).is_ok());
        assert!(d.check(3, true).is_err());
        let padded = Description {
            subbyte_padded: true,
            ..d
        };
        assert!(padded.check(3, true).is_ok());
    }

    #[test]
    fn bad_dtypes_are_refused() {
        let mut d = describe(&[1], &[1], 0);
        d.dtype = (TypeCode::FLOAT.0, 7, 1);
        assert!(d.check(1, true).is_err());
        d.dtype = (TypeCode::FLOAT.0, 32, 0);
        assert!(d.check(0, true).is_err());
    }

    /// Byte range `[first, end)` of every element of a small layout, by brute force.
    fn element_bytes_reached(d: &Description, item: usize) -> Vec<(i128, i128)> {
        let mut out = Vec::new();
        let mut index = vec![0i64; d.shape.len()];
        if d.shape.iter().any(|&n| n <= 0) {
            return out;
        }
        loop {
            let offset: i128 = index
                .iter()
                .zip(&d.strides)
                .map(|(&i, &s)| i128::from(i) * i128::from(s))
                .sum();
            let first = i128::from(d.byte_offset) + offset * item as i128;
            out.push((first, first + item as i128));
            let mut k = d.shape.len();
            loop {
                if k == 0 {
                    return out;
                }
                k -= 1;
                index[k] += 1;
                if index[k] < d.shape[k] {
                    break;
                }
                index[k] = 0;
            }
        }
    }

    proptest! {
        #[test]
        fn accepted_descriptions_stay_inside_the_bytes(
            dims in prop::collection::vec((0i64..5, -12i64..13), 0..4),
            byte_offset in prop_oneof![0u64..64, Just(u64::MAX)],
            len in 0usize..160,
            bits in prop::sample::select(vec![8u8, 16, 32, 64]),
            exact in any::<bool>(),
        ) {
            let d = Description {
                dtype: (TypeCode::UINT.0, bits, 1),
                shape: dims.iter().map(|x| x.0).collect(),
                strides: dims.iter().map(|x| x.1).collect(),
                byte_offset,
                subbyte_padded: false,
            };
            if let Ok((dtype, layout)) = d.check(len, exact) {
                let reached = element_bytes_reached(&d, dtype.itemsize());
                prop_assert_eq!(reached.len(), layout.size());
                for (first, end) in reached {
                    prop_assert!(first >= 0 && end <= len as i128, "{first}..{end} of {len}");
                }
                if exact {
                    prop_assert_eq!(layout.size() * dtype.itemsize(), len);
                    prop_assert!(layout.is_c_contiguous() || layout.is_f_contiguous());
                }
            }
        }
    }
}
