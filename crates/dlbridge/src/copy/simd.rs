//! In-register transposes for the tile kernel (x86-64, SSE2 — part of the x86-64 baseline, so
//! no run-time detection is needed). Unpack instructions move bits unchanged, so they carry
//! elements of any type of their width.
//!
//! One 16-byte register holds `N = 16 / size` elements; `N` rows of `N` elements are
//! transposed by `log2(N)` rounds of unpacks (one round for 8-byte elements, four for 1-byte
//! ones), and a 16-byte element is its own 1×1 transpose. Measured on the 4096² transposes of
//! the copy benchmark (2-CPU AMD EPYC), this replaced a gather of one element at a time for
//! 1- and 2-byte elements.

use std::arch::x86_64::{
    __m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_unpackhi_epi16, _mm_unpackhi_epi32,
    _mm_unpackhi_epi64, _mm_unpackhi_epi8, _mm_unpacklo_epi16, _mm_unpacklo_epi32,
    _mm_unpacklo_epi64, _mm_unpacklo_epi8,
};
use std::mem::size_of;

/// Write the transpose of the `B`×`B` tile `buf`: destination line `x` (at `dst + x * dst_a`)
/// receives column `x` of `buf`. Works in `N`×`N` blocks, `N = 16 / size_of::<T>()`.
///
/// # Safety
/// For `x, y < B`: `dst + x * dst_a + y` is writable. `T` is 1, 2, 4, 8 or 16 bytes with every
/// bit pattern valid, `N * size_of::<T>() == 16` and `B` is a multiple of `N`.
#[inline(always)]
pub(super) unsafe fn write_transposed<T: Copy, const B: usize, const N: usize>(
    buf: &[[T; B]; B],
    dst: *mut T,
    dst_a: isize,
) {
    debug_assert!(N * size_of::<T>() == 16 && B % N == 0);
    for x0 in (0..B).step_by(N) {
        for y0 in (0..B).step_by(N) {
            // SAFETY: N in-bounds 16-byte reads of the tile buffer (x0 + N <= B).
            let rows: [__m128i; N] = std::array::from_fn(|k| unsafe {
                _mm_loadu_si128(buf[y0 + k].as_ptr().add(x0).cast())
            });
            for (k, column) in transpose(rows).into_iter().enumerate() {
                let x = x0 + bit_reversed::<N>(k);
                // SAFETY: elements y0..y0 + N of destination line x (caller's contract).
                unsafe {
                    _mm_storeu_si128(dst.offset(x as isize * dst_a + y0 as isize).cast(), column)
                };
            }
        }
    }
}

/// Transpose `N` rows of `N` elements (of `16 / N` bytes). Each round pairs neighbouring
/// registers and interleaves units twice as wide as the round before; the result holds the
/// columns in bit-reversed order (column `bit_reversed(k)` in register `k`). `N` is a
/// constant, so the rounds that do not apply fold away and each round unrolls (a loop over the
/// unit width compiled to a run-time loop for 1-byte elements; in an L2-resident 512² uint8
/// transpose both ran at 30 µs: the shuffles are not what bounds it).
#[inline(always)]
fn transpose<const N: usize>(mut regs: [__m128i; N]) -> [__m128i; N] {
    if N >= 16 {
        regs = round(
            regs,
            // SAFETY: a register-only shuffle; SSE2 is part of the x86-64 baseline.
            |a, b| unsafe { _mm_unpacklo_epi8(a, b) },
            // SAFETY: as above.
            |a, b| unsafe { _mm_unpackhi_epi8(a, b) },
        );
    }
    if N >= 8 {
        regs = round(
            regs,
            // SAFETY: a register-only shuffle; SSE2 is part of the x86-64 baseline.
            |a, b| unsafe { _mm_unpacklo_epi16(a, b) },
            // SAFETY: as above.
            |a, b| unsafe { _mm_unpackhi_epi16(a, b) },
        );
    }
    if N >= 4 {
        regs = round(
            regs,
            // SAFETY: a register-only shuffle; SSE2 is part of the x86-64 baseline.
            |a, b| unsafe { _mm_unpacklo_epi32(a, b) },
            // SAFETY: as above.
            |a, b| unsafe { _mm_unpackhi_epi32(a, b) },
        );
    }
    if N >= 2 {
        regs = round(
            regs,
            // SAFETY: a register-only shuffle; SSE2 is part of the x86-64 baseline.
            |a, b| unsafe { _mm_unpacklo_epi64(a, b) },
            // SAFETY: as above.
            |a, b| unsafe { _mm_unpackhi_epi64(a, b) },
        );
    }
    regs
}

/// One round: registers `2k` and `2k + 1` give register `k` (their low halves interleaved)
/// and register `k + N / 2` (their high halves).
#[inline(always)]
fn round<const N: usize>(
    regs: [__m128i; N],
    low: impl Fn(__m128i, __m128i) -> __m128i,
    high: impl Fn(__m128i, __m128i) -> __m128i,
) -> [__m128i; N] {
    let mut out = regs;
    for k in 0..N / 2 {
        out[k] = low(regs[2 * k], regs[2 * k + 1]);
        out[k + N / 2] = high(regs[2 * k], regs[2 * k + 1]);
    }
    out
}

/// `k` with its `log2(N)` low bits reversed.
#[inline(always)]
fn bit_reversed<const N: usize>(k: usize) -> usize {
    if N == 1 {
        k
    } else {
        k.reverse_bits() >> (usize::BITS - N.trailing_zeros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element size against the definition of a transpose.
    fn check<T: Copy + PartialEq + std::fmt::Debug, const B: usize, const N: usize>(
        value: impl Fn(usize) -> T,
    ) {
        let buf: [[T; B]; B] = std::array::from_fn(|y| std::array::from_fn(|x| value(y * B + x)));
        // Destination lines of B + 3 elements: a pitch that is not the tile side.
        let pitch = B + 3;
        let mut dst = vec![value(usize::MAX % 7); B * pitch];
        // SAFETY: line x of the destination starts at x * pitch and holds B elements.
        unsafe { write_transposed::<T, B, N>(&buf, dst.as_mut_ptr(), pitch as isize) };
        for x in 0..B {
            for y in 0..B {
                assert_eq!(dst[x * pitch + y], buf[y][x], "({x}, {y})");
            }
        }
    }

    #[test]
    fn transposes_every_element_size() {
        check::<u8, 64, 16>(|i| i as u8);
        check::<u16, 32, 8>(|i| i as u16);
        check::<u32, 16, 4>(|i| i as u32);
        check::<u64, 8, 2>(|i| i as u64);
        check::<u128, 4, 1>(|i| (i as u128) << 64 | !(i as u128) >> 64);
    }

    #[test]
    fn bit_reversal() {
        assert_eq!(
            (0..4).map(bit_reversed::<4>).collect::<Vec<_>>(),
            [0, 2, 1, 3]
        );
        assert_eq!(bit_reversed::<16>(1), 8);
        assert_eq!(bit_reversed::<1>(0), 0);
        assert_eq!(bit_reversed::<2>(1), 1);
    }
}
