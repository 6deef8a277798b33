//! Memory behind the stand-in's allocations: a memfd mapped twice. The first mapping is the
//! address handed out (for device memory `PROT_NONE`, so any host access of device memory
//! crashes, as it would on a GPU); the second, always read-write, is the stand-in's own view,
//! through which its copies run. Another process maps the same memfd through
//! `/proc/<pid>/fd/<fd>` (CUDA IPC).

use std::ffi::c_void;

/// A memfd and its two mappings.
#[derive(Debug)]
pub(crate) struct Mapping {
    /// The address handed out.
    pub(crate) visible: usize,
    /// The stand-in's read-write view of the same pages.
    pub(crate) rw: usize,
    /// Bytes mapped (a whole number of pages).
    pub(crate) len: usize,
    /// The memfd (kept open: IPC receivers open it through /proc).
    pub(crate) fd: libc::c_int,
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// Map `fd` (`len` bytes) twice; `host_access` makes the visible mapping read-write too.
fn map_twice(fd: libc::c_int, len: usize, host_access: bool) -> Option<Mapping> {
    let prot = if host_access {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_NONE
    };
    let map = |prot| {
        // SAFETY: a fresh shared mapping of an open fd at an address the kernel chooses.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, 0) };
        (p != libc::MAP_FAILED).then_some(p as usize)
    };
    let visible = map(prot)?;
    let Some(rw) = map(libc::PROT_READ | libc::PROT_WRITE) else {
        // SAFETY: the mapping made just above, unmapped once.
        unsafe { libc::munmap(visible as *mut c_void, len) };
        return None;
    };
    Some(Mapping {
        visible,
        rw,
        len,
        fd,
    })
}

impl Mapping {
    /// A fresh, zero-filled memfd of at least `bytes` (> 0) bytes, mapped twice.
    pub(crate) fn new(bytes: usize, host_access: bool) -> Option<Self> {
        let page = page_size();
        let len = bytes.checked_add(page - 1)? / page * page;
        // SAFETY: a NUL-terminated name and valid flags.
        let fd =
            unsafe { libc::memfd_create(c"dlbridge-cuda-standin".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: sizes the memfd just created (sparse: untouched pages cost nothing).
        let sized = unsafe { libc::ftruncate(fd, libc::off_t::try_from(len).ok()?) } == 0;
        let mapping = if sized {
            map_twice(fd, len, host_access)
        } else {
            None
        };
        if mapping.is_none() {
            // SAFETY: the fd opened above, closed once.
            unsafe { libc::close(fd) };
        }
        mapping
    }

    /// Map the memfd `fd` of process `pid` (`len` bytes), as device memory.
    pub(crate) fn open_foreign(pid: u32, fd: i32, len: usize) -> Option<Self> {
        let path = std::ffi::CString::new(format!("/proc/{pid}/fd/{fd}")).ok()?;
        // SAFETY: a NUL-terminated path.
        let own = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if own < 0 {
            return None;
        }
        // SAFETY: an all-zero stat is a valid value for fstat to overwrite.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the fd opened above and a stat to write.
        let ok = unsafe { libc::fstat(own, &mut st) } == 0
            && usize::try_from(st.st_size).is_ok_and(|size| size >= len);
        let mapping = if ok { map_twice(own, len, false) } else { None };
        if mapping.is_none() {
            // SAFETY: the fd opened above, closed once.
            unsafe { libc::close(own) };
        }
        mapping
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: both mappings and the fd were made by `new`/`open_foreign` and are released
        // once, here.
        unsafe {
            libc::munmap(self.visible as *mut c_void, self.len);
            libc::munmap(self.rw as *mut c_void, self.len);
            libc::close(self.fd);
        }
    }
}
