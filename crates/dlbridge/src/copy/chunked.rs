//! Large contiguous copies split into chunks that the calling thread and helpers on the rayon
//! pool claim one at a time.
//!
//! The calling thread copies too (it does not hand the work over and sleep), and a helper
//! only takes chunks nobody has taken yet: on a busy machine where the helper does not get a
//! CPU, the caller copies every chunk itself, at single-thread speed plus one `spawn`; with a
//! free CPU both copy, and the copy runs at up to twice the speed of one `memcpy` (one core
//! cannot keep enough misses in flight to use the memory bandwidth). For an allocating copy
//! this also spreads the first-touch page faults of the fresh destination over the threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// A contiguous copy, shared with the helpers.
struct Chunks {
    src: *const u8,
    dst: *mut u8,
    len: usize,
    chunk: usize,
    count: usize,
    /// The next chunk nobody has claimed.
    next: AtomicUsize,
    /// Chunks not yet copied (claimed or not).
    left: Mutex<usize>,
    /// Signalled when `left` reaches zero.
    all_copied: Condvar,
}

// SAFETY: the pointers are plain addresses; a helper dereferences them only for a chunk it
// claimed, and `copy` does not return before every claimed chunk is copied, so the memory is
// valid whenever it is touched and each destination byte is written by one thread.
unsafe impl Send for Chunks {}
// SAFETY: as above; the shared counters are atomics or behind the mutex.
unsafe impl Sync for Chunks {}

impl Chunks {
    /// Claim and copy chunks until none is left to claim.
    fn work(&self) {
        loop {
            let k = self.next.fetch_add(1, Ordering::Relaxed);
            if k >= self.count {
                return;
            }
            let start = k * self.chunk;
            let n = self.chunk.min(self.len - start);
            // SAFETY: chunk k lies inside the `len` bytes the caller of `copy` vouched for,
            // was claimed by this thread alone, and its bytes are copied before `copy`
            // returns (it waits for `left` to reach zero, counted down below).
            unsafe { std::ptr::copy_nonoverlapping(self.src.add(start), self.dst.add(start), n) };
            let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
            *left -= 1;
            if *left == 0 {
                self.all_copied.notify_all();
            }
        }
    }
}

/// Copy `len` bytes in chunks of `chunk` bytes on the calling thread and `helpers` rayon jobs.
///
/// # Safety
/// `len` bytes are readable at `src` and writable at `dst`, and the two ranges do not overlap.
/// The rayon pool must be usable from this process (see `kernel::pool_usable`).
pub(super) unsafe fn copy(src: *const u8, dst: *mut u8, len: usize, chunk: usize, helpers: usize) {
    let count = len.div_ceil(chunk);
    let chunks = Arc::new(Chunks {
        src,
        dst,
        len,
        chunk,
        count,
        next: AtomicUsize::new(0),
        left: Mutex::new(count),
        all_copied: Condvar::new(),
    });
    for _ in 0..helpers.min(count.saturating_sub(1)) {
        let shared = Arc::clone(&chunks);
        rayon::spawn(move || shared.work());
    }
    chunks.work();
    // Every chunk is claimed now; wait for those the helpers are still copying.
    let mut left = chunks.left.lock().unwrap_or_else(PoisonError::into_inner);
    while *left > 0 {
        left = chunks
            .all_copied
            .wait(left)
            .unwrap_or_else(PoisonError::into_inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_once_whatever_the_tail_and_helpers() {
        let chunk = 4096;
        for len in [1, chunk - 1, chunk, chunk + 1, 5 * chunk + 3, 64 * chunk] {
            let src: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            for helpers in [0, 1, 3] {
                // One guard byte on each side must stay untouched.
                let mut dst = vec![0xAAu8; len + 2];
                // SAFETY: `len` bytes of `src` are readable and `dst[1..=len]` is writable;
                // the vectors do not overlap.
                unsafe { copy(src.as_ptr(), dst.as_mut_ptr().add(1), len, chunk, helpers) };
                assert_eq!(&dst[1..=len], &src[..], "len {len}, helpers {helpers}");
                assert_eq!((dst[0], dst[len + 1]), (0xAA, 0xAA));
            }
        }
    }
}
