//! In-register transposes of whole tiles for the tile kernel (x86-64): SSE2, part of the x86-64
//! baseline, everywhere, and AVX2 where the CPU has it ([`Simd::detected`]). Unpack
//! instructions move bits unchanged, so they carry elements of any type of their width.
//!
//! One 16-byte lane holds `N = 16 / size` elements; `N` rows of `N` elements are transposed by
//! `log2(N)` rounds of unpacks (one round for 8-byte elements, four for 1-byte ones), and a
//! 16-byte element is its own 1×1 transpose. AVX2 unpacks work within each 16-byte half of a
//! register, so one AVX2 register holds rows `y` and `y + N` of the same columns, and after the
//! rounds holds `2N` consecutive elements of one destination line: each transpose is half the
//! unpacks and half the stores of two SSE2 ones. A tile line is one cache line (`4N`
//! elements), and every destination line of a tile is written by consecutive stores (two AVX2
//! or four SSE2 ones), so that it is fetched once even when the tile's lines all fall into one
//! cache set (a 4096-byte pitch), or, for large copies, written with non-temporal stores that
//! the write-combining buffers merge into whole lines (`STREAM_BYTES` in the kernel module).
//!
//! Why whole destination lines, and what was tried and left out (prefetching, skipping the
//! staging tile, AVX-512): the measurements are in benches/README.md.

use std::arch::x86_64::{
    _MM_HINT_T1, _mm_loadu_si128, _mm_prefetch, _mm_setzero_si128, _mm_sfence, _mm_storeu_si128,
    _mm_stream_si128, _mm_unpackhi_epi8, _mm_unpackhi_epi16, _mm_unpackhi_epi32,
    _mm_unpackhi_epi64, _mm_unpacklo_epi8, _mm_unpacklo_epi16, _mm_unpacklo_epi32,
    _mm_unpacklo_epi64, _mm256_castsi256_si128, _mm256_extracti128_si256, _mm256_loadu2_m128i,
    _mm256_setzero_si256, _mm256_storeu_si256, _mm256_unpackhi_epi8, _mm256_unpackhi_epi16,
    _mm256_unpackhi_epi32, _mm256_unpackhi_epi64, _mm256_unpacklo_epi8, _mm256_unpacklo_epi16,
    _mm256_unpacklo_epi32, _mm256_unpacklo_epi64,
};
use std::mem::size_of;
use std::ptr;

/// The instruction set the tile kernel uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Simd {
    /// 16-byte SSE2 registers (every x86-64 CPU).
    Sse2,
    /// 32-byte AVX2 registers.
    Avx2,
}

impl Simd {
    /// The widest kind this CPU runs (`is_x86_feature_detected!` caches its answer).
    pub(super) fn detected() -> Self {
        if is_x86_feature_detected!("avx2") {
            Simd::Avx2
        } else {
            Simd::Sse2
        }
    }
}

/// Transpose one full `B`×`B` tile: source line `y` (`B` contiguous elements at
/// `src + y * src_i`) becomes column `y` of the destination lines (`B` contiguous elements at
/// `dst + x * dst_a`). The source lines go whole into `buf` first, so that each is read once
/// however the pitch aliases in the cache.
///
/// # Safety
/// - For `x, y < B`: `src + y * src_i + x` is readable and `dst + x * dst_a + y` writable;
/// - `T` is 1, 2, 4, 8 or 16 bytes with every bit pattern valid, `N * size_of::<T>() == 16`,
///   and `B == 4 * N` (a tile line is one cache line);
/// - `simd` is [`Simd::Sse2`] or what [`Simd::detected`] returned;
/// - with `stream` (non-temporal stores; the caller fences them with [`store_fence`]), every
///   destination line starts at a multiple of 16 bytes.
#[inline(always)]
pub(super) unsafe fn transpose_tile<T: Copy, const B: usize, const N: usize>(
    simd: Simd,
    stream: bool,
    src: *const T,
    src_i: isize,
    dst: *mut T,
    dst_a: isize,
    buf: &mut [[T; B]; B],
) {
    debug_assert!(N * size_of::<T>() == 16 && B == 4 * N);
    match simd {
        // SAFETY: the caller's contract; SSE2 is part of the x86-64 baseline.
        Simd::Sse2 => unsafe { tile_sse2::<T, B, N>(stream, src, src_i, dst, dst_a, buf) },
        // SAFETY: the caller's contract; `Avx2` only comes from `Simd::detected` (the CPU has
        // AVX2).
        Simd::Avx2 => unsafe { tile_avx2::<T, B, N>(stream, src, src_i, dst, dst_a, buf) },
    }
}

/// [`transpose_tile`] with `N`×`N` blocks in 16-byte registers: the four blocks of `N`
/// columns are transposed before any is stored, so that each destination line is written whole
/// by four stores in a row.
///
/// # Safety
/// As for [`transpose_tile`].
#[target_feature(enable = "sse2")]
unsafe fn tile_sse2<T: Copy, const B: usize, const N: usize>(
    stream: bool,
    src: *const T,
    src_i: isize,
    dst: *mut T,
    dst_a: isize,
    buf: &mut [[T; B]; B],
) {
    // SAFETY: the caller's contract.
    unsafe { stage(src, src_i, buf) };
    let unpack = |width, a, b| match width {
        1 => [_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b)],
        2 => [_mm_unpacklo_epi16(a, b), _mm_unpackhi_epi16(a, b)],
        4 => [_mm_unpacklo_epi32(a, b), _mm_unpackhi_epi32(a, b)],
        _ => [_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b)],
    };
    for x0 in (0..B).step_by(N) {
        let mut blocks = [[_mm_setzero_si128(); N]; 4];
        for (j, block) in blocks.iter_mut().enumerate() {
            // SAFETY: N in-bounds 16-byte reads of the tile buffer (x0 + N <= B, 4N = B).
            let rows = std::array::from_fn(|k| unsafe {
                _mm_loadu_si128(buf[j * N + k].as_ptr().add(x0).cast())
            });
            *block = transpose(rows, unpack);
        }
        for (k, x) in bit_reversed::<N>().into_iter().enumerate() {
            // SAFETY: destination line x0 + x of the tile (caller's contract).
            let line = unsafe { dst.offset((x0 + x) as isize * dst_a) };
            for (j, block) in blocks.iter().enumerate() {
                let to = line.wrapping_add(j * N).cast();
                if stream {
                    // SAFETY: elements j * N..(j + 1) * N of that line, 16-byte aligned with
                    // `stream`.
                    unsafe { _mm_stream_si128(to, block[k]) };
                } else {
                    // SAFETY: elements j * N..(j + 1) * N of that line.
                    unsafe { _mm_storeu_si128(to, block[k]) };
                }
            }
        }
    }
}

/// [`transpose_tile`] with two `N`×`N` blocks, rows `y0..y0 + N` and `y0 + N..y0 + 2N`, per
/// 32-byte register; both halves of `N` columns are transposed before either is stored, so
/// that each destination line is written whole by two stores in a row.
///
/// # Safety
/// As for [`transpose_tile`], on a CPU with AVX2.
#[target_feature(enable = "avx2")]
unsafe fn tile_avx2<T: Copy, const B: usize, const N: usize>(
    stream: bool,
    src: *const T,
    src_i: isize,
    dst: *mut T,
    dst_a: isize,
    buf: &mut [[T; B]; B],
) {
    // SAFETY: the caller's contract.
    unsafe { stage(src, src_i, buf) };
    let unpack = |width, a, b| match width {
        1 => [_mm256_unpacklo_epi8(a, b), _mm256_unpackhi_epi8(a, b)],
        2 => [_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b)],
        4 => [_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b)],
        _ => [_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b)],
    };
    for x0 in (0..B).step_by(N) {
        let mut halves = [[_mm256_setzero_si256(); N]; 2];
        for (j, half) in halves.iter_mut().enumerate() {
            // SAFETY: 2N in-bounds 16-byte reads of the tile buffer (x0 + N <= B, 4N = B).
            let rows = std::array::from_fn(|k| unsafe {
                let low = buf[2 * j * N + k].as_ptr().add(x0);
                let high = buf[(2 * j + 1) * N + k].as_ptr().add(x0);
                _mm256_loadu2_m128i(high.cast(), low.cast())
            });
            *half = transpose(rows, unpack);
        }
        for (k, x) in bit_reversed::<N>().into_iter().enumerate() {
            // SAFETY: destination line x0 + x of the tile (caller's contract).
            let line = unsafe { dst.offset((x0 + x) as isize * dst_a) };
            for (j, half) in halves.iter().enumerate() {
                let to = line.wrapping_add(2 * j * N);
                if stream {
                    let (low, high) = (
                        _mm256_castsi256_si128(half[k]),
                        _mm256_extracti128_si256::<1>(half[k]),
                    );
                    // SAFETY: elements 2 * j * N..2 * (j + 1) * N of that line, 16-byte aligned
                    // with `stream`.
                    unsafe {
                        _mm_stream_si128(to.cast(), low);
                        _mm_stream_si128(to.wrapping_add(N).cast(), high);
                    };
                } else {
                    // SAFETY: elements 2 * j * N..2 * (j + 1) * N of that line.
                    unsafe { _mm256_storeu_si256(to.cast(), half[k]) };
                }
            }
        }
    }
}

/// Order this thread's earlier non-temporal stores before its later stores (an `sfence`).
pub(super) fn store_fence() {
    // SAFETY: SSE is part of the x86-64 baseline; a fence only orders stores.
    unsafe { _mm_sfence() };
}

/// Ask for `lines` lines of `bytes` bytes each, `pitch` bytes apart from `start`, to be
/// brought into the L2 cache, in memory order (a hint: it changes no memory and cannot fault).
pub(super) fn prefetch_lines(start: *const u8, pitch: isize, lines: usize, bytes: usize) {
    for y in 0..lines as isize {
        let line = start.wrapping_offset(y * pitch);
        for x in (0..bytes).step_by(64) {
            // SAFETY: a prefetch is a hint: whatever the address, it never faults and changes
            // no memory; SSE is part of the x86-64 baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(line.wrapping_add(x).cast()) };
        }
    }
}

/// Read the `B` source lines of a tile into `buf`.
///
/// # Safety
/// For `x, y < B`: `src + y * src_i + x` is readable.
#[inline(always)]
unsafe fn stage<T: Copy, const B: usize>(src: *const T, src_i: isize, buf: &mut [[T; B]; B]) {
    for (y, line) in buf.iter_mut().enumerate() {
        // SAFETY: B contiguous source elements of line y of the tile.
        *line = unsafe { ptr::read_unaligned(src.offset(y as isize * src_i).cast::<[T; B]>()) };
    }
}

/// Transpose `N` rows of `N` elements (of `16 / N` bytes) in each 16-byte lane; `unpack(w, a,
/// b)` interleaves the low and the high halves of `a` and `b` in units of `w` bytes. Each
/// round pairs neighbouring registers and interleaves units twice as wide as the round before;
/// the result holds the columns in bit-reversed order (column `bit_reversed::<N>()[k]` in
/// register `k`). `N` is a constant, so the rounds that do not apply fold away; each round is
/// written out (a loop over the unit width compiled to a run-time loop with a branch per
/// width).
#[inline(always)]
fn transpose<R: Copy, const N: usize>(
    mut regs: [R; N],
    unpack: impl Fn(usize, R, R) -> [R; 2],
) -> [R; N] {
    if N >= 16 {
        regs = round(regs, 1, &unpack);
    }
    if N >= 8 {
        regs = round(regs, 2, &unpack);
    }
    if N >= 4 {
        regs = round(regs, 4, &unpack);
    }
    if N >= 2 {
        regs = round(regs, 8, &unpack);
    }
    regs
}

/// One round: registers `2k` and `2k + 1` give register `k` (their low halves interleaved in
/// units of `width` bytes) and register `k + N / 2` (their high halves).
#[inline(always)]
fn round<R: Copy, const N: usize>(
    regs: [R; N],
    width: usize,
    unpack: &impl Fn(usize, R, R) -> [R; 2],
) -> [R; N] {
    let mut out = regs;
    for k in 0..N / 2 {
        [out[k], out[k + N / 2]] = unpack(width, regs[2 * k], regs[2 * k + 1]);
    }
    out
}

/// `0..N` with the `log2(N)` low bits of each index reversed.
#[inline(always)]
fn bit_reversed<const N: usize>() -> [usize; N] {
    let bits = N.trailing_zeros();
    std::array::from_fn(|k| {
        if N == 1 {
            k
        } else {
            k.reverse_bits() >> (usize::BITS - bits)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tile of `T` through `simd` against the definition of a transpose.
    fn check<T: Copy + PartialEq + std::fmt::Debug, const B: usize, const N: usize>(
        simd: Simd,
        stream: bool,
        value: impl Fn(usize) -> T,
    ) {
        // Source lines of B + 5 elements, destination lines of B + 3 (or, for non-temporal
        // stores, of 96 bytes from a 32-byte boundary, so every other line is only 16-byte
        // aligned): pitches that are not the tile side.
        let size = size_of::<T>();
        let (src_pitch, dst_pitch) = (B + 5, if stream { B + 32 / size } else { B + 3 });
        let src: Vec<T> = (0..B * src_pitch).map(&value).collect();
        let mut dst = vec![value(usize::MAX % 7); B * dst_pitch + 32 / size];
        let start = if stream {
            dst.as_ptr().align_offset(32)
        } else {
            0
        };
        let mut buf = [[value(0); B]; B];
        // SAFETY: line y of the source starts at y * src_pitch and line x of the destination at
        // start + x * dst_pitch, each with B elements (16-byte aligned with `stream`); `simd`
        // is Sse2 or the detected kind.
        unsafe {
            transpose_tile::<T, B, N>(
                simd,
                stream,
                src.as_ptr(),
                src_pitch as isize,
                dst.as_mut_ptr().add(start),
                dst_pitch as isize,
                &mut buf,
            )
        };
        if stream {
            store_fence();
        }
        for x in 0..B {
            for y in 0..B {
                let (got, want) = (dst[start + x * dst_pitch + y], src[y * src_pitch + x]);
                assert_eq!(got, want, "{simd:?}, stream {stream} ({x}, {y})");
            }
        }
    }

    #[test]
    fn transposes_every_element_size() {
        let mut kinds = vec![Simd::Sse2];
        if Simd::detected() == Simd::Avx2 {
            kinds.push(Simd::Avx2);
        }
        // Non-temporal stores are inline assembly, which Miri cannot run: it checks the
        // ordinary stores only.
        let streams: &[bool] = if cfg!(miri) { &[false] } else { &[false, true] };
        for simd in kinds {
            for &stream in streams {
                check::<u8, 64, 16>(simd, stream, |i| (i * 7 % 251) as u8);
                check::<u16, 32, 8>(simd, stream, |i| i as u16);
                check::<u32, 16, 4>(simd, stream, |i| i as u32);
                check::<u64, 8, 2>(simd, stream, |i| i as u64);
                check::<u128, 4, 1>(simd, stream, |i| (i as u128) << 64 | !(i as u128) >> 64);
            }
        }
    }

    #[test]
    fn bit_reversal() {
        assert_eq!(bit_reversed::<4>(), [0, 2, 1, 3]);
        assert_eq!(bit_reversed::<8>(), [0, 4, 2, 6, 1, 5, 3, 7]);
        assert_eq!(bit_reversed::<16>()[1], 8);
        assert_eq!(bit_reversed::<2>(), [0, 1]);
        assert_eq!(bit_reversed::<1>(), [0]);
    }
}
