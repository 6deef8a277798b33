//! [`HostBuffer`]: owned host memory aligned to 64 bytes, zeroed or (inside the crate)
//! uninitialised for destinations a kernel overwrites completely.
//!
//! Buffers of [`HUGE_PAGE_THRESHOLD`] bytes or more are advised to use transparent huge pages on
//! Linux (as NumPy does): the first touch of a 64 MiB buffer then costs 32 page faults instead of
//! 16 384, which is most of the time a fresh allocating copy takes (measurements:
//! benches/README.md).

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::error::{Error, Result};

/// Alignment of every buffer: a cache line, and enough for any element type.
pub(super) const ALIGN: usize = 64;

/// Buffers at least this large are advised to use huge pages (Linux).
pub(super) const HUGE_PAGE_THRESHOLD: usize = 4 << 20;

/// Owned host memory of a fixed length, aligned to 64 bytes (a cache line).
pub(crate) struct HostBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer uniquely owns its allocation (like a Vec<u8>); shared access only reads.
unsafe impl Send for HostBuffer {}
// SAFETY: see above; `&HostBuffer` gives out only `&[u8]`.
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// `len` zeroed bytes.
    pub(crate) fn new(len: usize) -> Result<Self> {
        Self::allocate(len, true)
    }

    /// `len` uninitialised bytes.
    ///
    /// # Safety
    /// Every byte must be written (through [`HostBuffer::as_mut_ptr`]) before the buffer is read
    /// in any way: before [`HostBuffer::as_slice`] or [`HostBuffer::as_mut_slice`] is called and
    /// before its memory is handed to a [`Tensor`](crate::Tensor).
    pub(crate) unsafe fn uninit(len: usize) -> Result<Self> {
        Self::allocate(len, false)
    }

    fn allocate(len: usize, zeroed: bool) -> Result<Self> {
        if len == 0 {
            return Ok(Self {
                ptr: dangling(),
                len,
            });
        }
        let layout = layout_for(len).ok_or(Error::OutOfMemory(len))?;
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe {
            if zeroed {
                alloc::alloc_zeroed(layout)
            } else {
                alloc::alloc(layout)
            }
        };
        let ptr = NonNull::new(raw).ok_or(Error::OutOfMemory(len))?;
        if len >= HUGE_PAGE_THRESHOLD {
            advise_huge_pages(ptr.as_ptr(), len);
        }
        Ok(Self { ptr, len })
    }

    /// Length in bytes.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The start of the memory, for writing.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: the allocation holds `len` bytes, initialised (zeroed, or written under the
        // contract of `uninit`), and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as for `as_slice`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        let layout = layout_for(self.len).expect("checked at allocation");
        // SAFETY: allocated in `allocate` with this very layout, freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
    }
}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuffer")
            .field("len", &self.len)
            .finish()
    }
}

/// The allocation layout of a `len`-byte buffer. (Aligning large buffers to 2 MiB was tried
/// and made first-touch slower with glibc: plain cache-line alignment it is.)
fn layout_for(len: usize) -> Option<Layout> {
    Layout::from_size_align(len, ALIGN).ok()
}

/// A non-NULL, [`ALIGN`]-aligned pointer for empty buffers (never dereferenced).
fn dangling() -> NonNull<u8> {
    NonNull::new(std::ptr::without_provenance_mut(ALIGN)).expect("ALIGN is not zero")
}

/// Ask the kernel to back `[ptr, ptr + len)` with transparent huge pages; best effort. (Not
/// under Miri, which cannot call `madvise`; the advice changes no contents.)
#[cfg(all(target_os = "linux", not(miri)))]
fn advise_huge_pages(ptr: *mut u8, len: usize) {
    const PAGE: usize = 4096;
    let addr = ptr as usize;
    let start = addr.next_multiple_of(PAGE);
    let end = (addr + len) & !(PAGE - 1);
    if end > start {
        // SAFETY: the page-aligned range lies inside an allocation this buffer owns (`start` is
        // at most `end`, which is at most `addr + len`); madvise with MADV_HUGEPAGE changes no
        // contents, only how future faults are served.
        unsafe {
            libc::madvise(
                ptr.add(start - addr).cast(),
                end - start,
                libc::MADV_HUGEPAGE,
            );
        }
    }
}

#[cfg(any(not(target_os = "linux"), miri))]
fn advise_huge_pages(_ptr: *mut u8, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_sized() {
        let mut b = HostBuffer::new(100).unwrap();
        assert_eq!(b.as_slice().len(), 100);
        assert_eq!(b.as_mut_slice().as_ptr() as usize % 64, 0);
        assert!(b.as_slice().iter().all(|x| *x == 0));
        let empty = HostBuffer::new(0).unwrap();
        assert_eq!(empty.len(), 0);
        assert!(empty.as_slice().is_empty());
    }

    #[test]
    fn uninit_then_written() {
        // Past the huge-page threshold natively; Miri, which skips the advice, checks a few
        // pages instead of reading 4 MiB one byte at a time.
        let large = if cfg!(miri) {
            3 * 4096 + 3
        } else {
            HUGE_PAGE_THRESHOLD + 3
        };
        for len in [0, 1, 63, 64, 65, large] {
            // SAFETY: every byte is written below before the buffer is read.
            let mut b = unsafe { HostBuffer::uninit(len) }.unwrap();
            // SAFETY: the allocation holds `len` bytes.
            unsafe { std::ptr::write_bytes(b.as_mut_ptr(), 7, len) };
            assert_eq!(b.len(), len);
            assert_eq!(b.as_mut_ptr() as usize % ALIGN, 0);
            assert!(b.as_slice().iter().all(|x| *x == 7));
        }
    }

    #[test]
    fn huge_allocation_fails_cleanly() {
        assert!(matches!(
            HostBuffer::new(usize::MAX - 8),
            Err(Error::OutOfMemory(_))
        ));
    }
}
