//! Layout validation (`Layout::new`) and everything that trusts a validated layout.
//!
//! Arbitrary shapes, strides (or none) and item sizes go to `Layout::new`. Checked:
//! - no panic; a refusal is a BufferError-kind error;
//! - an accepted layout has non-negative extents, the right element count, extreme offsets
//!   equal to a brute-force walk, and a byte span that fits in `isize`;
//! - `is_c_contiguous` / `is_f_contiguous` agree with their meaning (the elements in C / F
//!   index order sit at offsets 0, 1, 2, ...), `export_strides` and the dense-stride helpers
//!   do not panic for any accepted layout;
//! - over a real buffer the layout fits in: copies in both orders, `copy_into` a fresh tensor,
//!   `to_vec`, DLPack export/import and Arrow export/import all equal a brute-force gather.
#![no_main]

#[path = "common.rs"]
mod common;

use std::sync::Arc;

use arbitrary::Arbitrary;
use common::*;
use dlbridge::arrow::ArrowData;
use dlbridge::arrow::{ExportOptions, export as arrow_export, tensor_from_arrow};
use dlbridge::{DType, Device, ErrorKind, Flavor, Layout, Order, Tensor, TensorFlags};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    shape: Vec<Extent>,
    strides: Option<Vec<Stride>>,
    /// Mismatched stride count (must be refused).
    extra_stride: bool,
    itemsize: u8,
    readonly: bool,
    export_minor: u8,
}

/// Row-major strides (in elements) of `shape`, extents of 0 counted as 1, as the crate makes
/// them for a layout given without strides.
fn c_strides(shape: &[i64]) -> Option<Vec<i64>> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for (s, &n) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.checked_mul(n.max(1))?;
    }
    Some(strides)
}

fuzz_target!(|input: Input| {
    let shape: Vec<i64> = input.shape.iter().take(70).map(|e| e.0).collect();
    let mut strides: Option<Vec<i64>> = input.strides.as_ref().map(|s| {
        let mut v: Vec<i64> = s.iter().take(70).map(|x| x.0).collect();
        v.resize(shape.len(), 1);
        v
    });
    if input.extra_stride {
        if let Some(s) = strides.as_mut() {
            s.push(1);
        }
    }
    let itemsize = usize::from(input.itemsize % 33);
    let layout = match Layout::new(&shape, strides.as_deref(), itemsize) {
        Ok(l) => l,
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Buffer, "{e}");
            let _ = e.to_string();
            return;
        }
    };
    assert!(
        !input.extra_stride || strides.is_none(),
        "stride count mismatch accepted"
    );
    assert!(shape.len() <= 64);
    assert!(shape.iter().all(|n| *n >= 0), "negative extent accepted");
    assert_eq!(layout.shape(), &shape[..]);
    assert_eq!(layout.ndim(), shape.len());
    let strides = strides.unwrap_or_else(|| c_strides(&shape).expect("accepted"));
    let product = shape.iter().try_fold(1i128, |a, &n| {
        Some(a * i128::from(n)).filter(|p| *p <= i128::from(i64::MAX))
    });
    assert_eq!(Some(layout.size() as i128), product, "size");
    // Helpers that `expect` on accepted layouts must not panic.
    let exported = layout.export_strides();
    assert_eq!(exported.len(), shape.len());
    // A dense layout of the same shape spans no more bytes than one whose elements are distinct;
    // overlapping strides may describe more elements than their bytes (then `copy` refuses the
    // dense copy with an error, as Layout::contiguous does here).
    if layout.elements_are_distinct() {
        let _ = Layout::contiguous(&shape, itemsize).expect("dense strides of an accepted shape");
    }
    let _ = format!("{layout:?}");
    if layout.size() == 0 {
        assert_eq!((layout.min_offset(), layout.max_offset()), (0, 0));
        assert!(layout.is_c_contiguous() && layout.is_f_contiguous());
        assert_eq!(
            &*exported,
            &c_strides(&shape).expect("zero-size strides")[..]
        );
        return;
    }
    assert_eq!(layout.strides(), &strides[..]);
    let (lo, hi) = reach(0, &shape, &strides, 1);
    assert_eq!(i128::from(layout.min_offset()), lo);
    assert_eq!(i128::from(layout.max_offset()) + 1, hi);
    let span = (hi - lo) * itemsize.max(1) as i128;
    assert!(span <= isize::MAX as i128, "span {span} accepted");

    // Semantics of contiguity, by brute force on small layouts.
    if layout.size() <= 1 << 12 {
        let c = offsets(&shape, &strides, false);
        let f = offsets(&shape, &strides, true);
        let dense = |o: &[i64]| o.iter().enumerate().all(|(i, &x)| x == i as i64);
        assert_eq!(layout.is_c_contiguous(), dense(&c), "is_c_contiguous");
        assert_eq!(layout.is_f_contiguous(), dense(&f), "is_f_contiguous");
        // Finding F4 (fixed), that the crate's row-major offset walker never steps past the
        // extent, is a unit test of the crate since the walker is internal
        // (`offsets_never_step_past_the_extent`, `walk_matches_brute_force` in src/layout.rs).
    }

    // Over a real buffer, when it fits.
    let dtype = match itemsize {
        1 => DType::UINT8,
        2 => DType::UINT16,
        4 => DType::FLOAT32,
        8 => DType::INT64,
        16 => DType::COMPLEX128,
        _ => return,
    };
    let span_elems = (hi - lo) as usize;
    if layout.size() > 1 << 12 || span_elems > 1 << 14 {
        return;
    }
    let nbytes = span_elems * itemsize;
    // u64 storage keeps every element aligned to its size (up to 8; complex128 needs 8).
    let words: Vec<u64> = (0..nbytes.div_ceil(8) as u64)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect();
    let words = Arc::new(words);
    let base = words.as_ptr() as *mut u8;
    // Element 0 sits -lo elements into the buffer.
    let first = (-lo) as u64 * itemsize as u64;
    // SAFETY: every element the layout reaches from base + first lies in `words`, which the
    // owner keeps alive; the memory is only read.
    let t = unsafe {
        Tensor::from_raw_parts(
            base.cast(),
            first,
            Device::CPU,
            dtype,
            layout.clone(),
            TensorFlags { readonly: input.readonly, copied: false },
            words.clone(),
        )
    }
    .expect("a layout inside its buffer is a valid tensor");
    let data = t.data_ptr() as *const u8;
    // SAFETY: inside `words`.
    let c_ref = unsafe { gather(data, &shape, &strides, itemsize, false) };
    let f_ref = unsafe { gather(data, &shape, &strides, itemsize, true) };

    let c = t.copy(Order::C).expect("copy C");
    assert_eq!(c.host_bytes().unwrap(), &c_ref[..]);
    let f = t.copy(Order::F).expect("copy F");
    // SAFETY: a fresh dense copy of nbytes.
    let fb = unsafe { std::slice::from_raw_parts(f.data_ptr() as *const u8, f.nbytes()) };
    assert_eq!(fb, &f_ref[..]);
    if dtype == DType::INT64 {
        let v = t.to_vec::<i64>().unwrap();
        let b: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        assert_eq!(b, c_ref);
    }
    // copy_into a fresh, writable tensor of the same shape (F-ordered destination).
    let extents: Vec<usize> = shape.iter().map(|&n| n as usize).collect();
    let dst = Tensor::zeros(dtype, &extents)
        .expect("zeros")
        .copy(Order::F)
        .unwrap();
    // SAFETY: `dst` is a fresh copy nobody else touches.
    unsafe { dlbridge::copy::copy_into(&dst, &t) }.expect("copy_into");
    assert_eq!(
        dst.copy(Order::C).unwrap().host_bytes().unwrap(),
        &c_ref[..]
    );

    // DLPack round trip.
    let flavor = if input.export_minor % 2 == 0 {
        Flavor::Legacy
    } else {
        Flavor::Versioned {
            minor: u32::from(input.export_minor % 4),
        }
    };
    match t.export(flavor) {
        Ok(m) => {
            let back = Tensor::from_managed(m).expect("re-import");
            assert_eq!(
                back.copy(Order::C).unwrap().host_bytes().unwrap(),
                &c_ref[..]
            );
        }
        Err(e) => assert!(input.readonly && flavor == Flavor::Legacy, "{e}"),
    }

    // Arrow round trip (complex has no Arrow type; 0-d has no array form).
    if shape.is_empty() || dtype == DType::COMPLEX128 {
        return;
    }
    let exported = arrow_export(&t, &ExportOptions::default());
    let exported = match exported {
        Ok(e) => e,
        Err(e) => {
            // Only cells too large for Arrow's int32 list sizes may be refused.
            assert_eq!(e.kind(), ErrorKind::Buffer);
            return;
        }
    };
    let schema = Arc::new(exported.schema.export().expect("schema"));
    // SAFETY: `arrow_export` built the array over the tensor's memory on `exported.device`,
    // as its schema describes, kept alive by the owner the array carries.
    let array = unsafe { exported.array.export(exported.device) };
    // SAFETY: exported together.
    let data = unsafe { ArrowData::new(schema, array) };
    let back = tensor_from_arrow(data, None).expect("arrow re-import");
    assert_eq!(back.shape(), &shape[..]);
    assert_eq!(
        back.copy(Order::C).unwrap().host_bytes().unwrap(),
        &c_ref[..]
    );
});
