//! The copy kernels: raw-pointer loops that execute a [`Plan`]. Every element access of the
//! copy module happens here or in the register-level helpers it calls (`simd`, `stream`).
//!
//! - rows with unit strides on both sides: one `memcpy` per row (a whole contiguous tensor is
//!   one row); a contiguous copy into existing memory of at least [`STREAMING_THRESHOLD`] bytes
//!   writes with non-temporal stores instead;
//! - other rows: an element-wise strided loop, specialised for 1, 2, 4, 8 and 16-byte elements
//!   (any other size moves `itemsize` bytes per element);
//! - tiles: a cache-blocked transpose that stages one square tile of whole cache lines through a
//!   small stack buffer, so that every source line is read once and every destination line is
//!   written once, whatever the (often power-of-two, cache-set-aliasing) pitch; large 1-byte
//!   transposes go in bands of source lines prefetched in order;
//! - copies of at least [`PARALLEL_THRESHOLD`] bytes ([`CONTIGUOUS_THRESHOLD`] for one
//!   contiguous run) are cut along one loop into chunks that the calling thread and the rayon
//!   pool claim one at a time (the `chunked` module), when no two destination elements share
//!   memory.

use std::mem::size_of;
use std::ptr;
use std::sync::OnceLock;

use super::plan::{Dim, Kernel, Plan};
#[cfg(target_arch = "x86_64")]
use super::simd::Simd;

/// The instructions the tile kernel uses: outside x86-64, plain loads and stores.
#[cfg(not(target_arch = "x86_64"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Simd {
    /// Element by element through the staging tile.
    Scalar,
}

#[cfg(not(target_arch = "x86_64"))]
impl Simd {
    fn detected() -> Self {
        Simd::Scalar
    }
}

/// Copies (other than one contiguous run) of at least this many bytes are shared with the
/// rayon pool.
pub(super) const PARALLEL_THRESHOLD: usize = 1 << 20;

/// Bytes of one chunk of a shared copy other than one contiguous run (about: a tiled loop is
/// cut on tile boundaries).
const LEAF_BYTES: usize = 512 << 10;

/// A contiguous copy of at least this many bytes is shared between the calling thread and the
/// rayon pool (see the `chunked` module), in chunks of [`CHUNK_BYTES`]: below it, waking a pool
/// thread costs more than sharing saves (measurements: benches/README.md, "The measurements
/// behind the copy kernel's constants").
pub(super) const CONTIGUOUS_THRESHOLD: usize = 4 << 20;

/// Bytes of one chunk of a shared contiguous copy (see [`CONTIGUOUS_THRESHOLD`]).
const CHUNK_BYTES: usize = 256 << 10;

/// A contiguous copy into existing memory of at least this many bytes writes with
/// non-temporal stores (the `stream` module) instead of `memcpy`: once a copy outgrows the
/// caches, an ordinary store first reads the line it writes (3 bytes of traffic per byte
/// copied, against 2), while below the last-level cache's size the cache serves ordinary
/// stores better (measurements: benches/README.md).
pub(super) const STREAMING_THRESHOLD: usize = 32 << 20;

/// Bytes of one tile side: a cache line.
const LINE: usize = 64;

/// A transpose writing at least this many bytes stores its full tiles with non-temporal stores
/// (where the destination lines are 16-byte aligned), for 1-byte elements always and for wider
/// ones into existing memory only: its destination lines then go to memory whole instead of
/// being read into the caches first. Wider elements lose into fresh memory, whose pages the
/// kernel has just zeroed through the caches (measurements, and why 4096² uint8 stays below
/// half the contiguous copy's speed: benches/README.md).
const STREAM_BYTES: usize = 16 << 20;

/// What every piece of one copy shares.
#[derive(Clone, Copy)]
struct Job {
    kernel: Kernel,
    itemsize: usize,
    /// The instructions the tile kernel uses.
    simd: Simd,
    /// Whether the copy bypasses the caches on its way to the destination: contiguous rows
    /// ([`STREAMING_THRESHOLD`]), or full tiles to aligned destination lines ([`STREAM_BYTES`]).
    stream: bool,
}

/// Source and destination of a (sub-)copy.
#[derive(Clone, Copy)]
struct Ptrs {
    src: *const u8,
    dst: *mut u8,
}

// SAFETY: the pointers are plain addresses handed to the threads that copy the chunks; the
// caller of `run` guarantees the memory is valid and that parallel pieces write disjoint
// destination bytes.
unsafe impl Send for Ptrs {}
// SAFETY: see above; `Ptrs` itself is never written through a shared reference.
unsafe impl Sync for Ptrs {}

impl Ptrs {
    /// Both pointers advanced by element offsets.
    ///
    /// # Safety
    /// The results must stay inside the source and destination regions of the copy.
    unsafe fn advance(self, src: isize, dst: isize, itemsize: usize) -> Self {
        let size = itemsize as isize;
        // SAFETY: caller's contract; validated layouts keep every product inside isize.
        unsafe {
            Self {
                src: self.src.offset(src * size),
                dst: self.dst.offset(dst * size),
            }
        }
    }

    /// Both pointers moved to element `(x, y)` of a 2-D slab whose loops are `a` (`x`) and `i`
    /// (`y`).
    ///
    /// # Safety
    /// As for [`Ptrs::advance`].
    unsafe fn at(self, a: Dim, i: Dim, x: usize, y: usize, itemsize: usize) -> Self {
        let (x, y) = (x as isize, y as isize);
        // SAFETY: caller's contract.
        unsafe { self.advance(x * a.src + y * i.src, x * a.dst + y * i.dst, itemsize) }
    }
}

/// What a copy writes into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Destination {
    /// A buffer allocated for this copy, dense: no two elements share a byte, and its pages
    /// are first touched by the copy. Contiguous rows go in with ordinary stores: the kernel
    /// has just zeroed each page it faults in, through the caches, and streaming stores past
    /// those lines did not pay (64 MiB to 1 GiB float32 from Python, medians within a few
    /// per cent of each other either way, on an idle machine), and they lost for transposes
    /// of wider elements (see [`STREAM_BYTES`]).
    Fresh,
    /// Memory that exists already; `disjoint` when no two elements share a byte, which is
    /// what lets the copy be shared between threads.
    Existing {
        /// No two destination elements share a byte.
        disjoint: bool,
    },
}

/// Execute `plan` for elements of `itemsize` bytes.
///
/// # Safety
/// - For every element the plan reaches, the `itemsize` bytes at `src` + source offset are
///   readable and those at `dst` + destination offset are writable (offsets after the plan's
///   shifts, in elements);
/// - the source and destination regions do not overlap;
/// - `destination` describes `dst` truthfully (a fresh or disjoint destination has no two
///   elements sharing a byte).
pub(crate) unsafe fn run(
    plan: &Plan,
    itemsize: usize,
    src: *const u8,
    dst: *mut u8,
    destination: Destination,
) {
    let (parallel, fresh) = match destination {
        Destination::Fresh => (true, true),
        Destination::Existing { disjoint } => (disjoint, false),
    };
    let base = Ptrs { src, dst };
    // SAFETY: the shifts move the bases to the first element each loop visits, inside the
    // regions (caller's contract).
    let start = unsafe { base.advance(plan.src_shift, plan.dst_shift, itemsize) };
    let bytes = plan.dims.iter().map(|d| d.n).product::<usize>() * itemsize;
    let job = Job {
        kernel: plan.kernel,
        itemsize,
        simd: Simd::detected(),
        stream: match plan.kernel {
            Kernel::Rows => {
                !fresh && is_contiguous(&plan.dims, plan.kernel) && bytes >= STREAMING_THRESHOLD
            }
            Kernel::Tiles => bytes >= STREAM_BYTES && (itemsize == 1 || !fresh),
        },
    };
    let cuts = chunking(&plan.dims, job).filter(|_| parallel && pool_usable());
    let Some(cuts) = cuts else {
        // SAFETY: forwarded contract.
        return unsafe { exec(&plan.dims, job, start) };
    };
    let dims = plan.dims.clone();
    let count = cuts.iter().map(|c| dims[c.k].n.div_ceil(c.piece)).product();
    super::chunked::run(count, rayon::current_num_threads() - 1, move |c| {
        let mut part = dims.clone();
        let (mut src, mut dst, mut rest) = (0isize, 0isize, c);
        for cut in cuts.iter().rev() {
            let n = dims[cut.k].n;
            let pieces = n.div_ceil(cut.piece);
            let first = (rest % pieces) * cut.piece;
            rest /= pieces;
            part[cut.k].n = cut.piece.min(n - first);
            src += first as isize * dims[cut.k].src;
            dst += first as isize * dims[cut.k].dst;
        }
        // Chunk c starts `first` steps along each cut loop, inside the regions; the chunks
        // cover disjoint index ranges, and no two destination elements share a byte (the
        // caller's contract for `parallel`).
        // SAFETY: so the chunks write disjoint bytes inside the regions; `chunked::run`
        // returns only after every chunk is done, while the caller's memory is still valid.
        unsafe { exec(&part, job, start.advance(src, dst, itemsize)) };
    });
}

/// One loop cut into pieces of `piece` steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cut {
    k: usize,
    piece: usize,
}

/// How to cut a copy into chunks for the threads (along one or two loops), or `None` when the
/// copy is too small to share.
///
/// A contiguous copy is cut once it holds [`CONTIGUOUS_THRESHOLD`] bytes, into chunks of
/// [`CHUNK_BYTES`]; any other once it holds [`PARALLEL_THRESHOLD`] bytes, into chunks of about
/// [`LEAF_BYTES`]: along the outermost loop, or, for a single transpose, into square blocks of
/// whole tiles. No strip suits every element size, and squares are never far from the better
/// one (measurements: benches/README.md).
fn chunking(dims: &[Dim], job: Job) -> Option<Vec<Cut>> {
    let bytes = dims.iter().map(|d| d.n).product::<usize>() * job.itemsize;
    let (threshold, chunk) = if is_contiguous(dims, job.kernel) {
        (CONTIGUOUS_THRESHOLD, CHUNK_BYTES)
    } else {
        (PARALLEL_THRESHOLD, LEAF_BYTES)
    };
    if bytes < threshold {
        return None;
    }
    let k = split_dim(dims, job.kernel)?;
    let last = dims.len() - 1;
    if job.kernel == Kernel::Tiles && k + 1 >= last {
        // A single 2-D transpose: square blocks whose side is a whole number of tiles.
        let side = ((chunk / job.itemsize).isqrt() / 64).max(1) * 64;
        let cuts: Vec<Cut> = [last - 1, last]
            .into_iter()
            .filter(|&k| dims[k].n > side)
            .map(|k| Cut { k, piece: side })
            .collect();
        return (!cuts.is_empty()).then_some(cuts);
    }
    let piece = (chunk / (bytes / dims[k].n)).max(1);
    (dims[k].n > piece).then_some(vec![Cut { k, piece }])
}

/// True when the loops are one contiguous run of bytes.
fn is_contiguous(dims: &[Dim], kernel: Kernel) -> bool {
    matches!((kernel, dims), (Kernel::Rows, [d]) if d.src == 1 && d.dst == 1)
}

/// True when the rayon pool can run our pieces: it has more than one thread, and this is the
/// process that started it — after `fork()` (Python's multiprocessing) the child inherits the
/// pool's bookkeeping but not its threads, and joining would wait forever; the child then
/// copies on its own thread.
fn pool_usable() -> bool {
    static POOL_PID: OnceLock<u32> = OnceLock::new();
    let pid = std::process::id();
    *POOL_PID.get_or_init(|| pid) == pid && rayon::current_num_threads() > 1
}

/// Run the loops `dims` from `p` on this thread.
///
/// # Safety
/// As for [`run`], for the loops `dims` starting at `p`.
unsafe fn exec(dims: &[Dim], job: Job, p: Ptrs) {
    let Job {
        kernel, itemsize, ..
    } = job;
    let core = match kernel {
        Kernel::Rows => 1,
        Kernel::Tiles => 2,
    };
    let (outer, inner) = dims.split_at(dims.len() - core);
    match kernel {
        Kernel::Rows => {
            // The innermost outer loop runs inline (many short rows stay cheap).
            let (last, rest) = outer.split_last().map_or(
                (
                    Dim {
                        n: 1,
                        src: 0,
                        dst: 0,
                    },
                    outer,
                ),
                |(l, r)| (*l, r),
            );
            for_each_outer(rest, |s, d| {
                // SAFETY: (s, d) are the offsets of the first row of a group the plan reaches.
                let q = unsafe { p.advance(s, d, itemsize) };
                // SAFETY: `last.n` rows of the plan from there.
                unsafe { rows(last, inner[0], job, q) };
            });
        }
        Kernel::Tiles => for_each_outer(outer, |s, d| {
            // SAFETY: (s, d) are the offsets of one slab origin reached by the plan.
            let q = unsafe { p.advance(s, d, itemsize) };
            // SAFETY: one 2-D slab of the plan from its origin.
            unsafe { tiles(inner[0], inner[1], job, q) };
        }),
    }
}

/// The loop to halve: the outermost outer loop longer than 1, else the longest core loop
/// (so that tiled pieces stay square-ish).
fn split_dim(dims: &[Dim], kernel: Kernel) -> Option<usize> {
    let core = match kernel {
        Kernel::Rows => 1,
        Kernel::Tiles => 2,
    };
    let outer = dims.len() - core;
    dims[..outer].iter().position(|d| d.n > 1).or_else(|| {
        (outer..dims.len())
            .filter(|&k| dims[k].n > 1)
            .max_by_key(|&k| dims[k].n)
    })
}

/// Call `f(src_offset, dst_offset)` for every index of the loops `outer` (row-major).
fn for_each_outer(outer: &[Dim], mut f: impl FnMut(isize, isize)) {
    let mut index = vec![0usize; outer.len()];
    let (mut s, mut d) = (0isize, 0isize);
    loop {
        f(s, d);
        let mut k = outer.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            index[k] += 1;
            s += outer[k].src;
            d += outer[k].dst;
            if index[k] < outer[k].n {
                break;
            }
            index[k] = 0;
            s -= outer[k].src * outer[k].n as isize;
            d -= outer[k].dst * outer[k].n as isize;
        }
    }
}

/// Element types the kernels move as one unit (every bit pattern valid, no padding).
trait Word: Copy + Default {
    /// Transpose one full `B`×`B` tile: source line `y` (`B` contiguous elements at
    /// `src + y * src_i`) becomes column `y` of the destination lines (`B` contiguous elements
    /// at `dst + x * dst_a`), staged through `buf`.
    ///
    /// With `stream`, the destination lines may be written with non-temporal stores.
    ///
    /// # Safety
    /// For `x, y < B`: `src + y * src_i + x` is readable and `dst + x * dst_a + y` writable;
    /// `simd` is what [`Simd::detected`] returned or the baseline; with `stream`, every
    /// destination line starts at a multiple of 16 bytes.
    #[inline(always)]
    unsafe fn transpose_tile<const B: usize>(
        _simd: Simd,
        _stream: bool,
        src: *const Self,
        src_i: isize,
        dst: *mut Self,
        dst_a: isize,
        buf: &mut [[Self; B]; B],
    ) {
        for (y, line) in buf.iter_mut().enumerate() {
            // SAFETY: B contiguous source elements of line y of the tile.
            *line =
                unsafe { ptr::read_unaligned(src.offset(y as isize * src_i).cast::<[Self; B]>()) };
        }
        #[allow(clippy::needless_range_loop)] // `x` indexes the inner arrays, not `buf`
        for x in 0..B {
            let out: [Self; B] = std::array::from_fn(|y| buf[y][x]);
            // SAFETY: B contiguous destination elements of line x (caller's contract).
            unsafe {
                ptr::write_unaligned(dst.offset(x as isize * dst_a).cast::<[Self; B]>(), out)
            };
        }
    }
}
/// Words moved through vector registers: `$lanes` elements per 16 bytes.
#[cfg(target_arch = "x86_64")]
macro_rules! simd_word {
    ($($t:ty => $lanes:literal),*) => {$(
        impl Word for $t {
            #[inline(always)]
            unsafe fn transpose_tile<const B: usize>(
                simd: Simd,
                stream: bool,
                src: *const $t,
                src_i: isize,
                dst: *mut $t,
                dst_a: isize,
                buf: &mut [[$t; B]; B],
            ) {
                // SAFETY: forwarded contract; the tile side `B` (64 bytes of elements) is four
                // 16-byte lanes of elements.
                unsafe {
                    super::simd::transpose_tile::<$t, B, $lanes>(
                        simd, stream, src, src_i, dst, dst_a, buf,
                    )
                }
            }
        }
    )*};
}
#[cfg(target_arch = "x86_64")]
simd_word!(u8 => 16, u16 => 8, u32 => 4, u64 => 2, u128 => 1);
#[cfg(not(target_arch = "x86_64"))]
impl Word for u8 {}
#[cfg(not(target_arch = "x86_64"))]
impl Word for u16 {}
#[cfg(not(target_arch = "x86_64"))]
impl Word for u32 {}
#[cfg(not(target_arch = "x86_64"))]
impl Word for u64 {}
#[cfg(not(target_arch = "x86_64"))]
impl Word for u128 {}

/// `outer.n` rows of `dim`, the rows `outer` apart.
///
/// # Safety
/// Each row's `dim.n` elements are readable at `p.src` and writable at `p.dst` (advanced by
/// the row index times `outer`'s strides) with the row's strides; sources and destinations do
/// not overlap.
unsafe fn rows(outer: Dim, dim: Dim, job: Job, p: Ptrs) {
    let itemsize = job.itemsize;
    if dim.src == 1 && dim.dst == 1 {
        let bytes = dim.n * itemsize;
        if job.stream {
            // SAFETY: a contiguous row of `bytes` on both sides (caller's contract).
            each_row(outer, itemsize, p, |q| unsafe {
                super::stream::copy_nontemporal(q.src, q.dst, bytes)
            });
        } else if bytes <= 64 {
            // SAFETY: a contiguous row of `bytes` on both sides (caller's contract).
            each_row(outer, itemsize, p, |q| unsafe {
                copy_small(q.src, q.dst, bytes)
            });
        } else {
            // SAFETY: as above.
            each_row(outer, itemsize, p, |q| unsafe {
                ptr::copy_nonoverlapping(q.src, q.dst, bytes)
            });
        }
        return;
    }
    match itemsize {
        // SAFETY: one row per call (caller's contract) of 1-byte elements.
        1 => each_row(outer, itemsize, p, |q| unsafe { strided::<u8>(dim, q) }),
        // SAFETY: as above, 2-byte elements.
        2 => each_row(outer, itemsize, p, |q| unsafe { strided::<u16>(dim, q) }),
        // SAFETY: as above, 4-byte elements.
        4 => each_row(outer, itemsize, p, |q| unsafe { strided::<u32>(dim, q) }),
        // SAFETY: as above, 8-byte elements.
        8 => each_row(outer, itemsize, p, |q| unsafe { strided::<u64>(dim, q) }),
        // SAFETY: as above, 16-byte elements.
        16 => each_row(outer, itemsize, p, |q| unsafe { strided::<u128>(dim, q) }),
        // SAFETY: as above, `itemsize`-byte elements.
        _ => each_row(outer, itemsize, p, |q| unsafe {
            strided_bytes(dim, itemsize, q)
        }),
    }
}

/// Call `f` with the start of each of the `outer.n` rows (addresses only: `f` dereferences).
#[inline(always)]
fn each_row(outer: Dim, itemsize: usize, p: Ptrs, mut f: impl FnMut(Ptrs)) {
    let size = itemsize as isize;
    for r in 0..outer.n as isize {
        f(Ptrs {
            src: p.src.wrapping_offset(r * outer.src * size),
            dst: p.dst.wrapping_offset(r * outer.dst * size),
        });
    }
}

/// Copy `n <= 64` bytes with at most two (overlapping) loads and stores, no `memcpy` call.
///
/// # Safety
/// `n` bytes readable at `src` and writable at `dst`, not overlapping.
#[inline(always)]
unsafe fn copy_small(src: *const u8, dst: *mut u8, n: usize) {
    macro_rules! two {
        ($t:ty) => {{
            let w = size_of::<$t>();
            // SAFETY: `w <= n`, so [0, w) and [n - w, n) lie inside both regions; both loads
            // happen before the stores.
            unsafe {
                let a = ptr::read_unaligned(src.cast::<$t>());
                let b = ptr::read_unaligned(src.add(n - w).cast::<$t>());
                ptr::write_unaligned(dst.cast::<$t>(), a);
                ptr::write_unaligned(dst.add(n - w).cast::<$t>(), b);
            }
        }};
    }
    debug_assert!(n <= 64);
    match n {
        0 => {}
        1 => two!(u8),
        2..=3 => two!(u16),
        4..=7 => two!(u32),
        8..=15 => two!(u64),
        16..=31 => two!(u128),
        _ => two!([u128; 2]),
    }
}

/// One row, element by element.
///
/// # Safety
/// The row's `dim.n` elements are readable at `p.src` and writable at `p.dst` with the row's
/// strides (`size_of::<T>()`-byte elements, alignment not required); no overlap.
#[inline(always)]
unsafe fn strided<T: Word>(dim: Dim, p: Ptrs) {
    let (src, dst) = (p.src.cast::<T>(), p.dst.cast::<T>());
    if dim.dst == 1 {
        for j in 0..dim.n {
            // SAFETY: element j of the row on both sides (caller's contract).
            unsafe {
                let v = ptr::read_unaligned(src.offset(j as isize * dim.src));
                ptr::write_unaligned(dst.add(j), v);
            }
        }
        return;
    }
    for j in 0..dim.n as isize {
        // SAFETY: element j of the row on both sides (caller's contract).
        unsafe {
            let v = ptr::read_unaligned(src.offset(j * dim.src));
            ptr::write_unaligned(dst.offset(j * dim.dst), v);
        }
    }
}

/// # Safety
/// As for [`strided`], with `itemsize`-byte elements.
unsafe fn strided_bytes(dim: Dim, itemsize: usize, p: Ptrs) {
    for j in 0..dim.n as isize {
        // SAFETY: element j of the row on both sides (caller's contract).
        unsafe {
            let q = p.advance(j * dim.src, j * dim.dst, itemsize);
            ptr::copy_nonoverlapping(q.src, q.dst, itemsize);
        }
    }
}

/// A 2-D slab: `a` is fast in the source, `i` (the last loop) fast in the destination.
///
/// # Safety
/// Every element of the slab is readable at `p.src` and writable at `p.dst` with the given
/// strides; the two regions do not overlap.
unsafe fn tiles(a: Dim, i: Dim, job: Job, p: Ptrs) {
    // SAFETY: (every arm) caller's contract; the tile side is one cache line of elements.
    unsafe {
        match job.itemsize {
            1 => tiled::<u8, { LINE }>(job, a, i, p),
            2 => tiled::<u16, { LINE / 2 }>(job, a, i, p),
            4 => tiled::<u32, { LINE / 4 }>(job, a, i, p),
            8 => tiled::<u64, { LINE / 8 }>(job, a, i, p),
            16 => tiled::<u128, { LINE / 16 }>(job, a, i, p),
            _ => tiled_bytes(a, i, job.itemsize, p),
        }
    }
    // Non-temporal stores are weakly ordered: fence them before this thread's part of the
    // copy counts as done.
    #[cfg(target_arch = "x86_64")]
    if job.stream {
        super::simd::store_fence();
    }
}

/// Blocked transpose with `B`×`B` tiles of `T`: 1-byte elements written with non-temporal
/// stores go in bands ([`banded`]), everything else in macro blocks of [`MACRO_BYTES`] per line
/// so that the pages and lines of one macro block stay in the TLB and L2 cache.
///
/// # Safety
/// As for [`tiles`], with `size_of::<T>()`-byte elements.
unsafe fn tiled<T: Word, const B: usize>(job: Job, a: Dim, i: Dim, p: Ptrs) {
    if job.stream && size_of::<T>() == 1 {
        // SAFETY: forwarded contract.
        return unsafe { banded::<T, B>(job, a, i, p) };
    }
    let m = (MACRO_BYTES / size_of::<T>()).clamp(B, MACRO_MAX);
    let mut a0 = 0;
    while a0 < a.n {
        let na = m.min(a.n - a0);
        let mut i0 = 0;
        while i0 < i.n {
            let ni = m.min(i.n - i0);
            // SAFETY: the macro block origin (a0, i0) lies inside the slab.
            let q = unsafe { p.at(a, i, a0, i0, size_of::<T>()) };
            let (sa, si) = (Dim { n: na, ..a }, Dim { n: ni, ..i });
            // SAFETY: the (na, ni) block from its origin lies inside the slab.
            unsafe { walk_tiles::<T, B>(job, sa, si, q, Walk::AlongSource) };
            i0 += m;
        }
        a0 += m;
    }
}

/// Bytes of one line of a macro block (per source and destination line).
const MACRO_BYTES: usize = 1024;
/// Most elements per line of a macro block.
const MACRO_MAX: usize = 256;

/// Blocked transpose in bands of [`BAND_LINES`] source lines (up to [`BAND_WIDTH`] wide):
/// each band's source lines are prefetched into the L2 cache in memory order, then its tiles
/// are walked [`Walk::AlongDestination`], so that each destination line gets [`BAND_LINES`]
/// elements in a row.
///
/// A transpose of 1-byte elements gathers 64 source lines, from 64 pages, into each
/// destination line. Walked in macro blocks, its reads and streaming stores both land in
/// scattered lines, and memory serves neither at its speed; bands read 256 whole source lines
/// in order and write each destination line 256 bytes at a time. For wider elements, whose
/// tiles gather fewer lines, bands did not pay (measurements: benches/README.md).
///
/// # Safety
/// As for [`tiles`], with `size_of::<T>()`-byte elements.
unsafe fn banded<T: Word, const B: usize>(job: Job, a: Dim, i: Dim, p: Ptrs) {
    for i0 in (0..i.n).step_by(BAND_LINES) {
        let ni = BAND_LINES.min(i.n - i0);
        for a0 in (0..a.n).step_by(BAND_WIDTH) {
            let na = BAND_WIDTH.min(a.n - a0);
            // SAFETY: the band origin (a0, i0) lies inside the slab.
            let q = unsafe { p.at(a, i, a0, i0, size_of::<T>()) };
            #[cfg(target_arch = "x86_64")]
            if a.src == 1 {
                let size = size_of::<T>();
                super::simd::prefetch_lines(q.src, i.src * size as isize, ni, na * size);
            }
            let (sa, si) = (Dim { n: na, ..a }, Dim { n: ni, ..i });
            // SAFETY: the (na, ni) band from its origin lies inside the slab.
            unsafe { walk_tiles::<T, B>(job, sa, si, q, Walk::AlongDestination) };
        }
    }
}

/// Source lines of one band of [`banded`].
const BAND_LINES: usize = 256;
/// Most elements of a source line in one band of [`banded`]: a band fills at most the 1 MiB
/// L2 cache of the test machine (on which 1 KiB and 4 KiB timed alike at 4096²).
const BAND_WIDTH: usize = 4096;

/// The order in which [`walk_tiles`] visits the tiles of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Walk {
    /// Along each row of tiles (`B` source lines) first.
    AlongSource,
    /// Down each column of tiles (`B` destination lines) first.
    AlongDestination,
}

/// One block, tile by tile in the order `walk`.
///
/// # Safety
/// As for [`tiles`], with `size_of::<T>()`-byte elements.
unsafe fn walk_tiles<T: Word, const B: usize>(job: Job, a: Dim, i: Dim, p: Ptrs, walk: Walk) {
    let unit = a.src == 1 && i.dst == 1;
    let stream_pitch = job.stream && (a.dst * size_of::<T>() as isize) % 16 == 0;
    let mut buf = [[T::default(); B]; B];
    let (outer, inner) = match walk {
        Walk::AlongSource => (i.n, a.n),
        Walk::AlongDestination => (a.n, i.n),
    };
    for o in (0..outer).step_by(B) {
        for n in (0..inner).step_by(B) {
            let (a0, i0) = match walk {
                Walk::AlongSource => (n, o),
                Walk::AlongDestination => (o, n),
            };
            let (na, ni) = (B.min(a.n - a0), B.min(i.n - i0));
            // SAFETY: the tile origin (a0, i0) lies inside the block.
            let q = unsafe { p.at(a, i, a0, i0, size_of::<T>()) };
            let (s, d) = (q.src.cast::<T>(), q.dst.cast::<T>());
            if na == B && ni == B && unit {
                let stream = stream_pitch && (d as usize).is_multiple_of(16);
                // SAFETY: a full tile inside the block with unit source stride along `a` and
                // unit destination stride along `i`; `simd` comes from the job; with `stream`,
                // every destination line starts 16-byte aligned.
                unsafe { T::transpose_tile::<B>(job.simd, stream, s, i.src, d, a.dst, &mut buf) };
            } else {
                // SAFETY: the (na, ni) block from the tile origin lies inside the block.
                unsafe { block::<T>(s, d, na, ni, a, i) };
            }
        }
    }
}

/// An edge block (or any strides), element by element.
///
/// # Safety
/// Every element `(x, y)` with `x < na`, `y < ni` is readable at `src + x*a.src + y*i.src`
/// and writable at `dst + x*a.dst + y*i.dst`.
unsafe fn block<T: Word>(src: *const T, dst: *mut T, na: usize, ni: usize, a: Dim, i: Dim) {
    for x in 0..na as isize {
        for y in 0..ni as isize {
            // SAFETY: element (x, y) of the block (caller's contract).
            unsafe {
                let v = ptr::read_unaligned(src.offset(x * a.src + y * i.src));
                ptr::write_unaligned(dst.offset(x * a.dst + y * i.dst), v);
            }
        }
    }
}

/// Blocked transpose of elements of any size, 16×16 elements per block.
///
/// # Safety
/// As for [`tiles`].
unsafe fn tiled_bytes(a: Dim, i: Dim, itemsize: usize, p: Ptrs) {
    const B: usize = 16;
    for a0 in (0..a.n).step_by(B) {
        for i0 in (0..i.n).step_by(B) {
            for x in a0..(a0 + B).min(a.n) {
                for y in i0..(i0 + B).min(i.n) {
                    let (x, y) = (x as isize, y as isize);
                    // SAFETY: element (x, y) of the slab (caller's contract).
                    unsafe {
                        let q = p.advance(x * a.src + y * i.src, x * a.dst + y * i.dst, itemsize);
                        ptr::copy_nonoverlapping(q.src, q.dst, itemsize);
                    }
                }
            }
        }
    }
}

const _: () = assert!(size_of::<[[u8; LINE]; LINE]>() == 4096);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_only_for_large_copies_and_on_tile_boundaries() {
        let dim = |n, src, dst| Dim { n, src, dst };
        let rows = |itemsize| Job {
            kernel: Kernel::Rows,
            itemsize,
            simd: Simd::detected(),
            stream: false,
        };
        let one = |k, piece| Some(vec![Cut { k, piece }]);
        // One contiguous run: chunked from CONTIGUOUS_THRESHOLD bytes, in CHUNK_BYTES.
        let run = |n| [dim(n, 1, 1)];
        assert_eq!(chunking(&run(CONTIGUOUS_THRESHOLD - 1), rows(1)), None);
        assert_eq!(
            chunking(&run(CONTIGUOUS_THRESHOLD), rows(1)),
            one(0, CHUNK_BYTES)
        );
        assert_eq!(
            chunking(&run(CONTIGUOUS_THRESHOLD / 8), rows(8)),
            one(0, CHUNK_BYTES / 8)
        );
        // Strided rows: from PARALLEL_THRESHOLD, cut along the outer loop.
        let strided = [dim(PARALLEL_THRESHOLD / 64, 128, 64), dim(64, 2, 1)];
        assert_eq!(chunking(&strided, rows(1)), one(0, LEAF_BYTES / 64));
        assert_eq!(chunking(&strided[1..], rows(1)), None);
        // A 4096² transpose: square blocks of whole tiles, along both loops.
        let tiles = |itemsize| Job {
            kernel: Kernel::Tiles,
            itemsize,
            simd: Simd::detected(),
            stream: false,
        };
        let t = [dim(4096, 1, 4096), dim(4096, 4096, 1)];
        assert_eq!(
            chunking(&t, tiles(4)),
            Some(vec![Cut { k: 0, piece: 320 }, Cut { k: 1, piece: 320 }])
        );
        assert_eq!(
            chunking(&t, tiles(1)),
            Some(vec![Cut { k: 0, piece: 704 }, Cut { k: 1, piece: 704 }])
        );
        // A short side is not cut; a batch of transposes is cut along the batch.
        let wide = [dim(300, 1, 1 << 14), dim(1 << 14, 300, 1)];
        assert_eq!(chunking(&wide, tiles(4)), one(1, 320));
        let batch = [dim(8, 1 << 18, 1 << 18), dim(512, 1, 512), dim(512, 512, 1)];
        assert_eq!(chunking(&batch, tiles(4)), one(0, 1));
    }

    /// The instruction sets this machine runs: the baseline always, AVX2 where detected.
    fn every_simd() -> Vec<Simd> {
        let detected = Simd::detected();
        #[cfg(target_arch = "x86_64")]
        if detected != Simd::Sse2 {
            return vec![detected, Simd::Sse2];
        }
        vec![detected]
    }

    /// Copy `shape` from a source with strides `src` (in elements, any sign) into a C-order
    /// destination on this thread with `simd`, and compare with an element-by-element copy.
    fn check_copy(itemsize: usize, shape: &[i64], src: &[i64], simd: Simd, stream: bool) {
        let size: i64 = shape.iter().product();
        // Offsets relative to the first element span [low, high].
        let (mut low, mut high) = (0i64, 0i64);
        for (&n, &s) in shape.iter().zip(src) {
            let far = (n - 1) * s;
            (low, high) = (low + far.min(0), high + far.max(0));
        }
        let base = -low;
        let span = (high - low + 1) as usize * itemsize;
        let source: Vec<u8> = (0..span).map(|x| (x * 7 % 253) as u8).collect();
        let dst_strides = crate::layout::c_strides(shape).unwrap();
        let mut want = vec![0u8; size as usize * itemsize];
        for k in 0..size {
            let (mut rest, mut offset) = (k, base);
            for (&n, &s) in shape.iter().zip(src).rev() {
                offset += rest % n * s;
                rest /= n;
            }
            let from = offset as usize * itemsize;
            want[k as usize * itemsize..][..itemsize].copy_from_slice(&source[from..][..itemsize]);
        }
        let plan = super::super::plan::plan(shape, src, &dst_strides).unwrap();
        let job = Job {
            kernel: plan.kernel,
            itemsize,
            simd,
            stream,
        };
        // The destination from a 64-byte boundary, so that non-temporal stores apply wherever
        // the line pitch allows.
        let mut buffer = vec![0u8; want.len() + 64];
        let at = buffer.as_ptr().align_offset(64);
        let origin = Ptrs {
            src: source.as_ptr().wrapping_add(base as usize * itemsize),
            dst: buffer[at..].as_mut_ptr(),
        };
        // SAFETY: the plan reaches the elements of `shape`: with the shifts, source offsets in
        // [low, high] around the first element (inside `source`) and the C-order destination
        // (inside `buffer` from `at`); the vectors do not overlap.
        unsafe {
            let start = origin.advance(plan.src_shift, plan.dst_shift, itemsize);
            exec(&plan.dims, job, start);
        }
        let got = &buffer[at..][..want.len()];
        assert!(
            got == want,
            "{simd:?}, stream {stream}, {itemsize}-byte elements, shape {shape:?}, strides {src:?}"
        );
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "copies of megabytes, for the parallel and streaming paths: hours under Miri (scripts/tsan_test.sh runs them)"
    )]
    fn transposes_with_every_instruction_set() {
        for (simd, stream) in every_simd()
            .into_iter()
            .flat_map(|s| [(s, false), (s, true)])
        {
            for itemsize in [1, 2, 3, 4, 8, 12, 16] {
                // Sides around one tile (64 bytes of elements), around a macro block (256
                // elements for 1-byte ones) and around a band of a streamed 1-byte transpose
                // (256 lines of 4096), with tails not a multiple of the tile or of a
                // register's elements.
                let tile = (64 / itemsize).max(4) as i64;
                for (n, m) in [
                    (tile, tile),
                    (tile + 1, 2 * tile + 3),
                    (3 * tile - 5, tile + 7),
                    (9, 2 * tile + 1),
                    (300, 257),
                ]
                .into_iter()
                .chain((itemsize == 1).then_some((4096 + 70, 300)))
                {
                    // The transpose of a C-order (m, n) array.
                    check_copy(itemsize, &[n, m], &[1, n], simd, stream);
                    // Its rows reversed, then its columns reversed.
                    check_copy(itemsize, &[n, m], &[-1, n], simd, stream);
                    check_copy(itemsize, &[n, m], &[1, -n], simd, stream);
                    // Every other element: the tiled loops with non-unit strides.
                    check_copy(itemsize, &[n, m], &[2, 2 * n + 1], simd, stream);
                }
                // A batch of three transposes, and one inside a strided batch.
                let (n, m) = (tile + 3, 2 * tile);
                check_copy(itemsize, &[3, n, m], &[n * m, 1, n], simd, stream);
                check_copy(itemsize, &[3, n, m], &[-2 * n * m, 1, n], simd, stream);
            }
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "copies of megabytes, for the parallel and streaming paths: hours under Miri (scripts/tsan_test.sh runs them)"
    )]
    fn large_byte_transposes_stream_past_the_caches() {
        // The transpose of a C-order (rows, cols) uint8 array: past STREAM_BYTES, in parallel
        // pieces, with a pitch that is not a multiple of 16 bytes in one case.
        for (rows, cols) in [(4096usize, 4160usize), (4099, 4103)] {
            assert!(rows * cols >= STREAM_BYTES);
            let source: Vec<u8> = (0..rows * cols).map(|x| (x * 7 % 251) as u8).collect();
            let (r, c) = (rows as i64, cols as i64);
            let plan = super::super::plan::plan(&[c, r], &[1, c], &[r, 1]).unwrap();
            assert_eq!(plan.kernel, Kernel::Tiles);
            // The destination from a 64-byte boundary (non-temporal stores need 16).
            let mut buffer = vec![0u8; rows * cols + 64];
            let at = buffer.as_ptr().align_offset(64);
            let got = &mut buffer[at..][..rows * cols];
            let destination = Destination::Existing { disjoint: true };
            // SAFETY: the plan reaches the (cols, rows) elements of `source` and `got`, which
            // do not overlap and whose elements are single bytes.
            unsafe { run(&plan, 1, source.as_ptr(), got.as_mut_ptr(), destination) };
            for (k, chunk) in got.chunks(rows).enumerate() {
                let want = (0..rows).map(|y| source[y * cols + k]);
                assert!(chunk.iter().copied().eq(want), "({rows}, {cols}) line {k}");
            }
        }
    }

    #[test]
    fn small_copies_of_every_length() {
        let src: Vec<u8> = (0..64).map(|x| x as u8 + 1).collect();
        for n in 0..=64 {
            let mut dst = vec![0u8; 65];
            // SAFETY: `n <= 64` bytes inside both vectors, which do not overlap.
            unsafe { copy_small(src.as_ptr(), dst.as_mut_ptr(), n) };
            assert_eq!(&dst[..n], &src[..n]);
            assert!(dst[n..].iter().all(|x| *x == 0), "{n}");
        }
    }
}
