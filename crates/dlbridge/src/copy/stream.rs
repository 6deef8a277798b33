//! Contiguous copies that bypass the caches on the way out: non-temporal ("streaming") stores.
//!
//! An ordinary store to a line that is not in the cache first reads that line from memory
//! (read-for-ownership), so copying `n` bytes moves `3n` bytes over the memory bus; a
//! non-temporal store writes the whole line without reading it, `2n` in all. When a copy is
//! larger than the last-level cache, the bus is the bound and the destination would not stay
//! cached anyway, so this is up to 1.5 times faster. Below that size ordinary stores win: the
//! data the caller touches next is still in the cache.
//!
//! x86-64 only (SSE2 is part of its baseline, so no run-time detection is needed); other
//! targets copy with `memcpy`.

/// Copy `n` bytes from `src` to `dst` with non-temporal stores, then fence them so that they
/// are ordered before any store that follows (the lock that reports the chunk done).
///
/// # Safety
/// `n` bytes are readable at `src` and writable at `dst`; the two regions do not overlap.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn copy_nontemporal(src: *const u8, dst: *mut u8, n: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    const LANE: usize = 16;
    // Bytes up to the first 16-byte aligned destination address, copied the ordinary way:
    // a streaming store needs an aligned address.
    let head = dst.align_offset(LANE).min(n);
    let body = (n - head) / LANE * LANE;
    // SAFETY: the caller's contract covers all `n` bytes; head, body and tail split them in
    // order, every store of the body is 16-byte aligned (`dst + head` is), and the fence
    // orders the streaming stores before whatever this thread stores next.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, head);
        let (src, dst) = (src.add(head), dst.add(head));
        let mut k = 0;
        // Four lanes a step: one cache line when the destination is line-aligned.
        while k + 4 * LANE <= body {
            let a = _mm_loadu_si128(src.add(k).cast::<__m128i>());
            let b = _mm_loadu_si128(src.add(k + LANE).cast::<__m128i>());
            let c = _mm_loadu_si128(src.add(k + 2 * LANE).cast::<__m128i>());
            let d = _mm_loadu_si128(src.add(k + 3 * LANE).cast::<__m128i>());
            _mm_stream_si128(dst.add(k).cast::<__m128i>(), a);
            _mm_stream_si128(dst.add(k + LANE).cast::<__m128i>(), b);
            _mm_stream_si128(dst.add(k + 2 * LANE).cast::<__m128i>(), c);
            _mm_stream_si128(dst.add(k + 3 * LANE).cast::<__m128i>(), d);
            k += 4 * LANE;
        }
        while k < body {
            let a = _mm_loadu_si128(src.add(k).cast::<__m128i>());
            _mm_stream_si128(dst.add(k).cast::<__m128i>(), a);
            k += LANE;
        }
        std::ptr::copy_nonoverlapping(src.add(body), dst.add(body), n - head - body);
        _mm_sfence();
    }
}

/// Copy `n` bytes from `src` to `dst` (`memcpy`: this target has no streaming path here).
///
/// # Safety
/// `n` bytes are readable at `src` and writable at `dst`; the two regions do not overlap.
#[cfg(not(target_arch = "x86_64"))]
pub(super) unsafe fn copy_nontemporal(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "non-temporal stores (_mm_stream_si128) are inline assembly, which Miri cannot run"
    )]
    fn copies_every_length_and_alignment() {
        let src: Vec<u8> = (0..600u32).map(|i| (i * 7 + 3) as u8).collect();
        for src_at in [0, 1, 5, 16] {
            for dst_at in [0, 3, 8, 15, 16] {
                for n in [0, 1, 15, 16, 17, 63, 64, 65, 127, 200, 511] {
                    let mut dst = vec![0xEEu8; 600];
                    // SAFETY: both ranges lie inside their vectors (at most 16 + 511 bytes
                    // from their starts), and the vectors are distinct.
                    unsafe {
                        copy_nontemporal(src.as_ptr().add(src_at), dst.as_mut_ptr().add(dst_at), n)
                    };
                    assert_eq!(&dst[dst_at..dst_at + n], &src[src_at..src_at + n]);
                    assert!(
                        dst[..dst_at].iter().all(|&b| b == 0xEE),
                        "{src_at} {dst_at} {n}"
                    );
                    assert!(
                        dst[dst_at + n..].iter().all(|&b| b == 0xEE),
                        "{src_at} {dst_at} {n}"
                    );
                }
            }
        }
    }
}
