//! In-register transposes for the tile kernel (x86-64, SSE2 — part of the x86-64 baseline, so
//! no run-time detection is needed). Shuffles move bits unchanged, so the float-typed
//! instructions carry any 4- or 8-byte element.

use std::arch::x86_64::{
    _mm_loadu_pd, _mm_loadu_ps, _mm_movehl_ps, _mm_movelh_ps, _mm_storeu_pd, _mm_storeu_ps,
    _mm_unpackhi_pd, _mm_unpackhi_ps, _mm_unpacklo_pd, _mm_unpacklo_ps,
};

/// Write the transpose of the `B`×`B` tile `buf` of 4-byte elements: destination line `x`
/// (at `dst + x * dst_a`) receives column `x` of `buf`. 4×4 blocks, one destination line group
/// at a time.
///
/// # Safety
/// For `x, y < B`: `dst + x * dst_a + y` is writable. `B` is a multiple of 4.
#[inline(always)]
pub(super) unsafe fn write_transposed_4<const B: usize>(
    buf: &[[u32; B]; B],
    dst: *mut u32,
    dst_a: isize,
) {
    for x0 in (0..B).step_by(4) {
        for y0 in (0..B).step_by(4) {
            // SAFETY: four in-bounds 4-element reads of the tile buffer (x0 + 4 <= B).
            let [r0, r1, r2, r3] = std::array::from_fn(|k| unsafe {
                _mm_loadu_ps(buf[y0 + k].as_ptr().add(x0).cast::<f32>())
            });
            // SAFETY: register-only shuffles; SSE2 is part of the x86-64 baseline.
            let cols = unsafe {
                let t0 = _mm_unpacklo_ps(r0, r1);
                let t1 = _mm_unpacklo_ps(r2, r3);
                let t2 = _mm_unpackhi_ps(r0, r1);
                let t3 = _mm_unpackhi_ps(r2, r3);
                [
                    _mm_movelh_ps(t0, t1),
                    _mm_movehl_ps(t1, t0),
                    _mm_movelh_ps(t2, t3),
                    _mm_movehl_ps(t3, t2),
                ]
            };
            for (k, c) in cols.into_iter().enumerate() {
                let at = (x0 + k) as isize * dst_a + y0 as isize;
                // SAFETY: elements y0..y0 + 4 of destination line x0 + k (caller's contract).
                unsafe { _mm_storeu_ps(dst.offset(at).cast::<f32>(), c) };
            }
        }
    }
}

/// As [`write_transposed_4`], for 8-byte elements in 2×2 blocks.
///
/// # Safety
/// For `x, y < B`: `dst + x * dst_a + y` is writable. `B` is even.
#[inline(always)]
pub(super) unsafe fn write_transposed_8<const B: usize>(
    buf: &[[u64; B]; B],
    dst: *mut u64,
    dst_a: isize,
) {
    for x0 in (0..B).step_by(2) {
        for y0 in (0..B).step_by(2) {
            // SAFETY: two in-bounds 2-element reads of the tile buffer (x0 + 2 <= B).
            let (r0, r1) = unsafe {
                (
                    _mm_loadu_pd(buf[y0].as_ptr().add(x0).cast::<f64>()),
                    _mm_loadu_pd(buf[y0 + 1].as_ptr().add(x0).cast::<f64>()),
                )
            };
            // SAFETY: register-only shuffles; SSE2 is part of the x86-64 baseline.
            let (c0, c1) = unsafe { (_mm_unpacklo_pd(r0, r1), _mm_unpackhi_pd(r0, r1)) };
            let at0 = x0 as isize * dst_a + y0 as isize;
            // SAFETY: elements y0..y0 + 2 of destination lines x0 and x0 + 1.
            unsafe {
                _mm_storeu_pd(dst.offset(at0).cast::<f64>(), c0);
                _mm_storeu_pd(dst.offset(at0 + dst_a).cast::<f64>(), c1);
            }
        }
    }
}
