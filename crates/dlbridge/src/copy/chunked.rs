//! Large copies cut into chunks that the calling thread and helpers on the rayon pool claim
//! one at a time.
//!
//! The calling thread copies too (it does not hand the work over and sleep), and a helper
//! only takes chunks nobody has taken yet: on a busy machine where a helper does not get a
//! CPU, the caller copies every chunk itself, at single-thread speed plus one `spawn`; with a
//! free CPU both copy, and a contiguous copy runs at up to twice the speed of one `memcpy` (one
//! core cannot keep enough misses in flight to use the memory bandwidth). For an allocating
//! copy this also spreads the first-touch page faults of the fresh destination over the threads.
//! (Splitting with `rayon::join` from a thread outside the pool parks the caller until two pool
//! threads have run both halves, which on a loaded machine is often slower than one thread.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// The chunks of one copy, shared with the helpers.
struct Chunks<F> {
    work: F,
    count: usize,
    /// The next chunk nobody has claimed.
    next: AtomicUsize,
    /// Chunks not yet done (claimed or not).
    left: Mutex<usize>,
    /// Signalled when `left` reaches zero.
    all_done: Condvar,
}

impl<F: Fn(usize)> Chunks<F> {
    /// Claim and run chunks until none is left to claim.
    fn claim_and_run(&self) {
        loop {
            let k = self.next.fetch_add(1, Ordering::Relaxed);
            if k >= self.count {
                return;
            }
            (self.work)(k);
            let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
            *left -= 1;
            if *left == 0 {
                self.all_done.notify_all();
            }
        }
    }
}

/// Call `work(k)` exactly once for every `k < count`, on this thread and on up to `helpers`
/// rayon jobs; return when every call has returned. (A helper that starts after that finds
/// nothing left to claim and does not call `work`.) A panic in `work` aborts the process
/// (rayon aborts on a panic in a spawned job; on this thread [`AbortOnUnwind`] does), so that
/// no call can outlive `run`.
pub(super) fn run<F>(count: usize, helpers: usize, work: F)
where
    F: Fn(usize) + Send + Sync + 'static,
{
    let _abort = AbortOnUnwind;
    let chunks = Arc::new(Chunks {
        work,
        count,
        next: AtomicUsize::new(0),
        left: Mutex::new(count),
        all_done: Condvar::new(),
    });
    for _ in 0..helpers.min(count.saturating_sub(1)) {
        let shared = Arc::clone(&chunks);
        rayon::spawn(move || shared.claim_and_run());
    }
    chunks.claim_and_run();
    // Every chunk is claimed now; wait for those the helpers are still running.
    let mut left = chunks.left.lock().unwrap_or_else(PoisonError::into_inner);
    while *left > 0 {
        left = chunks
            .all_done
            .wait(left)
            .unwrap_or_else(PoisonError::into_inner);
    }
}

/// Aborts the process when dropped while its thread unwinds: a chunk that panicked on the
/// calling thread would leave helpers running chunks on memory the caller is about to free.
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        if std::thread::panicking() {
            std::process::abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "rayon's crossbeam-epoch breaks Stacked Borrows (upstream); scripts/miri_test.sh runs it under Tree Borrows"
    )]
    fn every_chunk_once_whatever_the_helpers() {
        for count in [0, 1, 2, 7, 64] {
            for helpers in [0, 1, 3] {
                let seen: Arc<Vec<AtomicUsize>> =
                    Arc::new((0..count).map(|_| AtomicUsize::new(0)).collect());
                let counts = Arc::clone(&seen);
                run(count, helpers, move |k| {
                    counts[k].fetch_add(1, Ordering::Relaxed);
                });
                // `run` has returned: every call is done and visible here.
                assert!(
                    seen.iter().all(|c| c.load(Ordering::Relaxed) == 1),
                    "count {count}, helpers {helpers}"
                );
            }
        }
    }
}
