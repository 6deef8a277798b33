//! Host memory that other processes on the same machine can map: an anonymous memfd (Linux).
//!
//! [`to_shared`] copies a tensor into a fresh memfd, sealed against resizing, and returns a
//! tensor whose owner is the [`SharedMemory`] mapping. A process that receives the file
//! descriptor maps the same pages with [`SharedMemory::map`]. The memfd has no name in the file
//! system: the kernel frees it when the last descriptor and mapping are gone, so a killed
//! process leaks nothing.
//!
//! Mapping a received descriptor is `unsafe` ([`SharedMemory::map`]): the memory is shared
//! with other processes, which may write it while a Rust reference here views it; the caller
//! states how the processes take turns.

use std::ffi::c_void;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::tensor::{Owner, Tensor};
use crate::wire::{self, Description};

/// A mapping of a sealed memfd, unmapped (and the descriptor closed) on drop.
#[derive(Debug)]
pub struct SharedMemory {
    fd: OwnedFd,
    ptr: *mut u8,
    len: usize,
    writable: bool,
}

// SAFETY: the mapping is process-wide memory owned by this value and unmapped exactly once, in
// Drop; the value itself never reads or writes it.
unsafe impl Send for SharedMemory {}
// SAFETY: see above.
unsafe impl Sync for SharedMemory {}

fn os_error(what: &str) -> Error {
    Error::SharedMemory(format!(
        "{what} failed: {}",
        std::io::Error::last_os_error()
    ))
}

impl SharedMemory {
    /// A new, zero-filled, writable memfd of `len` bytes, sealed against shrinking and growing
    /// (so no process can make a mapping of it fault), and mapped here.
    pub fn create(len: usize) -> Result<Self> {
        let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
        // SAFETY: a NUL-terminated name and valid flags; returns a new descriptor or -1.
        let raw = unsafe { libc::memfd_create(c"dlbridge".as_ptr(), flags) };
        if raw < 0 {
            return Err(os_error("memfd_create"));
        }
        // SAFETY: `raw` is a descriptor just returned to us and owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let size = libc::off_t::try_from(len).map_err(|_| Error::OutOfMemory(len))?;
        // SAFETY: plain system calls on a descriptor we own.
        unsafe {
            if libc::ftruncate(fd.as_raw_fd(), size) != 0 {
                return Err(Error::OutOfMemory(len));
            }
            let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
            if libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) != 0 {
                return Err(os_error("sealing the memfd"));
            }
        }
        Self::map_fd(fd, len, true)
    }

    /// Map the memfd `fd` (its ownership is taken: closed on error too), which must be exactly
    /// `len` bytes and sealed against shrinking; read-only unless `writable`.
    ///
    /// # Safety
    /// The pages are shared with every process that holds the memfd (the sender keeps a
    /// writable mapping), and a Rust reference promises that nothing else writes what it
    /// views. While this mapping lives, the caller ensures that no other process writes the
    /// bytes that code here reads through a reference ([`Tensor::as_slice`],
    /// [`Tensor::host_bytes`], `as_array` on a tensor from [`view`]) while that reference
    /// lives, and that no other process reads or writes bytes written here meanwhile: for
    /// instance, the sender writes the data before it sends the descriptor, and neither side
    /// writes it afterwards. The size cannot change (the memfd is sealed), so the mapping stays
    /// valid whatever the other processes do; only the values are theirs.
    pub unsafe fn map(fd: OwnedFd, len: usize, writable: bool) -> Result<Self> {
        // SAFETY: fstat writes one struct for a descriptor we own; fcntl only reads its seals.
        let (size, seals) = unsafe {
            let mut stat: libc::stat = std::mem::zeroed();
            if libc::fstat(fd.as_raw_fd(), &mut stat) != 0 {
                return Err(os_error("fstat of the shared memory"));
            }
            (stat.st_size, libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS))
        };
        if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
            return Err(Error::SharedMemory(
                "the descriptor received is not a dlbridge shared memory (a memfd sealed against \
                 shrinking)"
                    .to_owned(),
            ));
        }
        if usize::try_from(size).ok() != Some(len) {
            return Err(Error::SharedMemory(format!(
                "the shared memory holds {size} bytes but {len} were announced"
            )));
        }
        Self::map_fd(fd, len, writable)
    }

    fn map_fd(fd: OwnedFd, len: usize, writable: bool) -> Result<Self> {
        let ptr = if len == 0 {
            std::ptr::NonNull::<u64>::dangling().as_ptr().cast::<u8>()
        } else {
            let prot = libc::PROT_READ | if writable { libc::PROT_WRITE } else { 0 };
            // SAFETY: a new shared mapping of `len` bytes of a file that is exactly `len` bytes
            // long and cannot shrink (sealed); the kernel chooses the address.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    prot,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(os_error("mmap of the shared memory"));
            }
            p.cast::<u8>()
        };
        Ok(Self {
            fd,
            ptr,
            len,
            writable,
        })
    }

    /// The memfd, for handing to another process (which must duplicate it).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when no bytes are mapped.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// True when the mapping may be written.
    pub fn is_writable(&self) -> bool {
        self.writable
    }
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmaps exactly the mapping made in `map_fd`, once; the tensors that
            // viewed it are gone (this value is their owner).
            unsafe { libc::munmap(self.ptr.cast::<c_void>(), self.len) };
        }
    }
}

/// A host tensor with the values, layout (C order for non-contiguous sources, F order kept)
/// and read-only flag of `t`, in a new [`SharedMemory`]: one copy in.
pub fn to_shared(t: &Tensor) -> Result<Tensor> {
    if !t.device().is_host_accessible() {
        return Err(Error::NotHostAccessible { device: t.device() });
    }
    let dense = if t.is_c_contiguous() || t.is_f_contiguous() {
        t.clone()
    } else {
        t.copy(crate::copy::Order::C)?
    };
    let description = Description::of(&dense);
    let memory = Arc::new(SharedMemory::create(dense.nbytes())?);
    let shared = view(&memory, &description, false, true)?;
    // SAFETY: `shared` is fresh memory no one else can see yet.
    unsafe { crate::copy::copy_into(&shared, &dense) }?;
    Ok(if t.is_readonly() {
        shared.into_readonly()
    } else {
        shared
    })
}

/// `memory` viewed as `description` says (checked to stay within it: see
/// [`Description::check`]), read-only when asked or when the mapping is.
pub fn view(
    memory: &Arc<SharedMemory>,
    description: &Description,
    readonly: bool,
    exact: bool,
) -> Result<Tensor> {
    let owner: Owner = memory.clone();
    // SAFETY: `len` mapped bytes at `ptr` stay valid while the SharedMemory (the owner) lives;
    // they are writable unless the mapping is read-only, which makes the tensor read-only.
    unsafe {
        wire::from_bytes(
            memory.ptr,
            memory.len,
            readonly || !memory.writable,
            owner,
            description,
            exact,
        )
    }
}

/// The shared memory `t` views and `t`'s description relative to its start, when `t` is (a
/// view of) a tensor made by [`to_shared`] or [`view`].
pub fn handle(t: &Tensor) -> Option<(Arc<SharedMemory>, Description)> {
    let owner = t.owner().clone();
    let memory = owner.downcast::<SharedMemory>().ok()?;
    let mut description = Description::of(t);
    if t.size() > 0 {
        description.byte_offset = (t.data_ptr() - memory.ptr as usize) as u64;
    }
    Some((memory, description))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "memfd_create, fcntl seals and mmap are foreign functions Miri cannot run"
    )]
    fn shared_copy_has_the_values_and_is_recognised() {
        let t = Tensor::from_vec((0..12).collect::<Vec<i32>>(), &[3, 4]).unwrap();
        let s = to_shared(&t).unwrap();
        assert_eq!(s.to_vec::<i32>().unwrap(), t.to_vec::<i32>().unwrap());
        let (memory, description) = handle(&s).unwrap();
        assert_eq!((memory.len(), description.byte_offset), (48, 0));
        assert!(handle(&t).is_none());
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "memfd_create, fcntl seals and mmap are foreign functions Miri cannot run"
    )]
    fn a_second_mapping_sees_the_same_memory() {
        let t = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], &[3]).unwrap();
        let s = to_shared(&t).unwrap();
        let (memory, description) = handle(&s).unwrap();
        // SAFETY: dup returns a new descriptor that we own.
        let fd = unsafe { OwnedFd::from_raw_fd(libc::dup(memory.raw_fd())) };
        // SAFETY: both mappings are in this thread of this process, which takes turns below:
        // the write ends before the read starts.
        let other = Arc::new(unsafe { SharedMemory::map(fd, memory.len(), true) }.unwrap());
        let seen = view(&other, &description, false, true).unwrap();
        assert_ne!(seen.data_ptr(), s.data_ptr());
        let one = Tensor::from_vec(vec![9.0f64], &[1]).unwrap();
        // SAFETY: single-threaded test; nothing else reads the memory meanwhile.
        unsafe { crate::copy::copy_into(&s, &one) }.unwrap();
        assert_eq!(seen.to_vec::<f64>().unwrap(), vec![9.0; 3]);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "memfd_create, fcntl seals and mmap are foreign functions Miri cannot run"
    )]
    fn mapping_checks_size_and_seals() {
        let memory = SharedMemory::create(64).unwrap();
        // SAFETY: as above.
        let dup = || unsafe { OwnedFd::from_raw_fd(libc::dup(memory.raw_fd())) };
        // SAFETY: nothing reads or writes the mappings made here.
        let map = |fd, len, writable| unsafe { SharedMemory::map(fd, len, writable) };
        assert!(map(dup(), 65, true).is_err());
        assert!(map(dup(), 63, true).is_err());
        assert!(map(dup(), 64, false).is_ok());
        let file = std::fs::File::open("/proc/self/exe").unwrap();
        let size = file.metadata().unwrap().len() as usize;
        assert!(map(file.into(), size, false).is_err());
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "memfd_create, fcntl seals and mmap are foreign functions Miri cannot run"
    )]
    fn empty_and_read_only_tensors() {
        let e = to_shared(&Tensor::from_vec(Vec::<f32>::new(), &[0, 3]).unwrap()).unwrap();
        assert_eq!((e.size(), e.nbytes()), (0, 0));
        let r = to_shared(&Tensor::from_vec(vec![1u8], &[1]).unwrap().into_readonly()).unwrap();
        assert!(r.is_readonly());
    }
}
