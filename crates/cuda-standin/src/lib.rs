//! A strict stand-in for the CUDA driver (`libcuda`), for tests on machines without a GPU.
//!
//! dlbridge loads it instead of the real driver when `DLBRIDGE_CUDA_DRIVER` names this
//! library. It exports exactly the driver entry points dlbridge resolves, with cuda.h's
//! prototypes and `CUresult` codes, and keeps the driver's contract more strictly than a GPU:
//!
//! - device memory (`cuMemAlloc`, opened IPC handles) is mapped `PROT_NONE`: a host access
//!   crashes; the stand-in copies through a second, read-write mapping of the same memfd;
//!   pinned and managed memory are host-accessible;
//! - calls that need a current context fail with `CUDA_ERROR_INVALID_CONTEXT` without one, the
//!   default stream handles (`0`, `CU_STREAM_LEGACY`, `CU_STREAM_PER_THREAD`) name the streams
//!   of the *current* context, and every handle and address is validated;
//! - copies are queued on their stream and run only at a synchronisation point (stream or
//!   event synchronisation, a wait on a recorded event, the legacy default stream's implicit
//!   barrier, a free): a missing wait leaves stale bytes for the test to see;
//! - IPC handles name the memfd of the exporting process, which another process maps through
//!   `/proc/<pid>/fd/<fd>`; a process cannot open its own handles;
//! - `DLBRIDGE_STANDIN_FAIL=call=code[*n],...` or [`dlbridge_standin_fail`] make calls fail;
//!   `DLBRIDGE_STANDIN_DEVICES` (default 2) and `DLBRIDGE_STANDIN_MEMORY` (bytes of device
//!   and managed memory, default 8 GiB) size the machine.
//!
//! Linux only (memfd, /proc); elsewhere the library is empty.
#![cfg(target_os = "linux")]
#![allow(non_snake_case)] // the driver's entry points keep their C names

mod codes;
mod memory;
mod state;

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};

use codes::{
    CuResult, INVALID_CONTEXT, INVALID_DEVICE, INVALID_HANDLE, INVALID_VALUE, OUT_OF_MEMORY,
};
use memory::Mapping;
use state::{Alloc, CURRENT, Handle, Kind, State, Work, enter, with_state};

/// Bytes of a `CUipcMemHandle`.
const IPC_HANDLE_SIZE: usize = 64;
/// What the stand-in's IPC handles start with.
const IPC_MAGIC: &[u8; 8] = b"DLBSTDIN";

/// `CUipcMemHandle`, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CuIpcMemHandle {
    reserved: [u8; IPC_HANDLE_SIZE],
}

/// Write `value` through `out`, or `INVALID_VALUE` for NULL.
///
/// # Safety
/// A non-NULL `out` is valid for a write of `T` (the caller's contract for the entry point).
unsafe fn put<T>(out: *mut T, value: T) -> Result<(), CuResult> {
    if out.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-NULL and valid for writes (this function's contract).
    unsafe { out.write_unaligned(value) };
    Ok(())
}

/// Fails with `INVALID_VALUE` for a NULL output pointer, before anything is allocated.
fn nonnull<T>(out: *mut T) -> Result<(), CuResult> {
    if out.is_null() {
        Err(INVALID_VALUE)
    } else {
        Ok(())
    }
}

/// Declares exported driver entry points: each runs its body on the state through
/// [`enter`] (injected failures, `CUDA_ERROR_NOT_INITIALIZED` before `cuInit`).
macro_rules! entries {
    ($($(#[doc = $doc:literal])* fn $name:ident($($arg:ident: $ty:ty),*) |$s:ident| $body:block)*) => {
        $(
            $(#[doc = $doc])*
            ///
            /// # Safety
            /// Pointer arguments are valid for what cuda.h says this call reads or writes.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> CuResult {
                enter(stringify!($name), |$s: &mut State| $body)
            }
        )*
    };
}

impl State {
    /// A new allocation of `kind` in the current context, at its visible address.
    fn allocate(&mut self, kind: Kind, size: usize) -> Result<usize, CuResult> {
        let ctx = self.require_context()?;
        if size == 0 {
            return Err(INVALID_VALUE);
        }
        let counted = if kind == Kind::Pinned { 0 } else { size };
        if self.memory_used + counted > self.memory_limit {
            return Err(OUT_OF_MEMORY);
        }
        let mapping = Mapping::new(size, kind != Kind::Device).ok_or(OUT_OF_MEMORY)?;
        let visible = mapping.visible;
        let ordinal = self.ordinal_of(ctx).ok_or(INVALID_CONTEXT)?;
        self.memory_used += counted;
        let alloc = Alloc {
            kind,
            size,
            ordinal,
            ctx,
            mapping,
            ipc: None,
        };
        self.allocations.insert(visible, alloc);
        Ok(visible)
    }

    /// Free the allocation at base `ptr`, which must be of a kind in `kinds` and not an
    /// opened IPC handle; queued work runs first (the driver's frees synchronise).
    fn free(&mut self, ptr: usize, kinds: &[Kind]) -> Result<(), CuResult> {
        self.require_context()?;
        let ok = self
            .allocations
            .get(&ptr)
            .is_some_and(|a| kinds.contains(&a.kind) && a.ipc.is_none());
        if !ok {
            return Err(INVALID_VALUE);
        }
        self.drain_all();
        let a = self.allocations.remove(&ptr).expect("checked above");
        if a.kind != Kind::Pinned {
            self.memory_used -= a.size;
        }
        Ok(())
    }

    /// Queue a copy of `len` bytes on the stream `raw` names (a current context needed).
    fn copy(
        &mut self,
        raw: *mut c_void,
        dst: Result<usize, CuResult>,
        src: Result<usize, CuResult>,
        len: usize,
    ) -> Result<(), CuResult> {
        self.require_context()?;
        let stream = self.resolve(raw as Handle)?;
        let (dst, src) = (dst?, src?);
        if len > 0 {
            self.enqueue(stream, Work::Copy { dst, src, len });
        }
        Ok(())
    }

    /// A retained primary context, or `INVALID_CONTEXT`.
    fn context(&self, ctx: *mut c_void) -> Result<Handle, CuResult> {
        let ctx = ctx as Handle;
        self.ordinal_of(ctx).map(|_| ctx).ok_or(INVALID_CONTEXT)
    }

    /// For a peer copy: device memory must belong to the context named with it.
    fn owned_by(&self, ptr: u64, len: usize, ctx: Handle) -> Result<usize, CuResult> {
        let (_, a) = self.find(ptr as usize, len).ok_or(INVALID_VALUE)?;
        if a.kind == Kind::Device && a.ctx != ctx {
            return Err(INVALID_VALUE);
        }
        self.cuda_bytes(ptr as usize, len)
    }
}

entries! {
    /// `cuInit`: flags must be 0.
    fn cuInit(flags: c_uint) |s| {
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        s.initialized = true;
        s.contexts.resize(usize::try_from(s.devices).unwrap_or(0), None);
        Ok(())
    }

    /// `cuDeviceGetCount`.
    fn cuDeviceGetCount(count: *mut c_int) |s| {
        // SAFETY: the caller's int.
        unsafe { put(count, s.devices) }
    }

    /// `cuDeviceGet`.
    fn cuDeviceGet(device: *mut c_int, ordinal: c_int) |s| {
        if !(0..s.devices).contains(&ordinal) {
            return Err(INVALID_DEVICE);
        }
        // SAFETY: the caller's CUdevice.
        unsafe { put(device, ordinal) }
    }

    /// `cuDevicePrimaryCtxRetain`: the same context for a device every time.
    fn cuDevicePrimaryCtxRetain(ctx: *mut *mut c_void, device: c_int) |s| {
        let index = usize::try_from(device).ok().filter(|i| *i < s.contexts.len());
        let index = index.ok_or(INVALID_DEVICE)?;
        nonnull(ctx)?;
        let handle = match s.contexts[index] {
            Some(h) => h,
            None => {
                let h = s.handle();
                s.contexts[index] = Some(h);
                h
            }
        };
        // SAFETY: the caller's CUcontext.
        unsafe { put(ctx, handle as *mut c_void) }
    }

    /// `cuCtxPushCurrent_v2`: only retained primary contexts.
    fn cuCtxPushCurrent_v2(ctx: *mut c_void) |s| {
        let ctx = s.context(ctx)?;
        CURRENT.with(|c| c.borrow_mut().push(ctx));
        Ok(())
    }

    /// `cuCtxPopCurrent_v2`: `INVALID_CONTEXT` when this thread has none current.
    fn cuCtxPopCurrent_v2(ctx: *mut *mut c_void) |_s| {
        let popped = CURRENT.with(|c| c.borrow_mut().pop()).ok_or(INVALID_CONTEXT)?;
        if ctx.is_null() {
            return Ok(());
        }
        // SAFETY: the caller's CUcontext.
        unsafe { put(ctx, popped as *mut c_void) }
    }

    /// `cuMemAlloc_v2`: device memory (`PROT_NONE` on the host).
    fn cuMemAlloc_v2(ptr: *mut u64, size: usize) |s| {
        nonnull(ptr)?;
        let p = s.allocate(Kind::Device, size)?;
        // SAFETY: the caller's CUdeviceptr.
        unsafe { put(ptr, p as u64) }
    }

    /// `cuMemFree_v2`: device or managed memory, by its base address.
    fn cuMemFree_v2(ptr: u64) |s| {
        s.free(ptr as usize, &[Kind::Device, Kind::Managed])
    }

    /// `cuMemHostAlloc`: pinned host memory (flags PORTABLE, DEVICEMAP, WRITECOMBINED).
    fn cuMemHostAlloc(pp: *mut *mut c_void, size: usize, flags: c_uint) |s| {
        if flags & !0x7 != 0 {
            return Err(INVALID_VALUE);
        }
        nonnull(pp)?;
        let p = s.allocate(Kind::Pinned, size)?;
        // SAFETY: the caller's pointer slot.
        unsafe { put(pp, p as *mut c_void) }
    }

    /// `cuMemFreeHost`.
    fn cuMemFreeHost(p: *mut c_void) |s| {
        s.free(p as usize, &[Kind::Pinned])
    }

    /// `cuMemAllocManaged`: flags must be exactly ATTACH_GLOBAL or ATTACH_HOST.
    fn cuMemAllocManaged(ptr: *mut u64, size: usize, flags: c_uint) |s| {
        if flags != 0x1 && flags != 0x2 {
            return Err(INVALID_VALUE);
        }
        nonnull(ptr)?;
        let p = s.allocate(Kind::Managed, size)?;
        // SAFETY: the caller's CUdeviceptr.
        unsafe { put(ptr, p as u64) }
    }

    /// `cuMemcpyDtoHAsync_v2`: queued.
    fn cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: u64, len: usize, stream: *mut c_void) |s| {
        let d = s.host_bytes(dst as usize, len);
        let from = s.cuda_bytes(src as usize, len);
        s.copy(stream, d, from, len)
    }

    /// `cuMemcpyHtoDAsync_v2`: queued (the host source is read when the copy runs).
    fn cuMemcpyHtoDAsync_v2(dst: u64, src: *const c_void, len: usize, stream: *mut c_void) |s| {
        let d = s.cuda_bytes(dst as usize, len);
        let from = s.host_bytes(src as usize, len);
        s.copy(stream, d, from, len)
    }

    /// `cuMemcpyDtoDAsync_v2`: queued.
    fn cuMemcpyDtoDAsync_v2(dst: u64, src: u64, len: usize, stream: *mut c_void) |s| {
        let d = s.cuda_bytes(dst as usize, len);
        let from = s.cuda_bytes(src as usize, len);
        s.copy(stream, d, from, len)
    }

    /// `cuMemcpyPeerAsync`: each device pointer must belong to the context named with it.
    fn cuMemcpyPeerAsync(
        dst: u64,
        dst_ctx: *mut c_void,
        src: u64,
        src_ctx: *mut c_void,
        len: usize,
        stream: *mut c_void
    ) |s| {
        let (dc, sc) = (s.context(dst_ctx)?, s.context(src_ctx)?);
        let d = s.owned_by(dst, len, dc);
        let from = s.owned_by(src, len, sc);
        s.copy(stream, d, from, len)
    }

    /// `cuStreamCreate`: flags 0 (blocking) or `CU_STREAM_NON_BLOCKING`.
    fn cuStreamCreate(stream: *mut *mut c_void, flags: c_uint) |s| {
        let ctx = s.require_context()?;
        if flags & !0x1 != 0 {
            return Err(INVALID_VALUE);
        }
        nonnull(stream)?;
        let h = s.create_stream(ctx, flags & 0x1 != 0);
        // SAFETY: the caller's CUstream.
        unsafe { put(stream, h as *mut c_void) }
    }

    /// `cuStreamDestroy_v2`: created streams only; their queued work runs first.
    fn cuStreamDestroy_v2(stream: *mut c_void) |s| {
        let h = stream as Handle;
        if h <= 2 || s.resolve(h).is_err() {
            return Err(INVALID_HANDLE);
        }
        s.destroy_stream(h);
        Ok(())
    }

    /// `cuStreamSynchronize`: runs the stream's queued work (and what it waits for).
    fn cuStreamSynchronize(stream: *mut c_void) |s| {
        let h = s.resolve(stream as Handle)?;
        s.drain(h, u64::MAX);
        Ok(())
    }

    /// `cuStreamWaitEvent`: flags must be 0.
    fn cuStreamWaitEvent(stream: *mut c_void, event: *mut c_void, flags: c_uint) |s| {
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        let h = s.resolve(stream as Handle)?;
        s.wait(h, event as Handle)
    }

    /// `cuStreamIsCapturing`: never capturing.
    fn cuStreamIsCapturing(stream: *mut c_void, status: *mut c_int) |s| {
        s.resolve(stream as Handle)?;
        // SAFETY: the caller's CUstreamCaptureStatus.
        unsafe { put(status, 0) }
    }

    /// `cuEventCreate`: flags BLOCKING_SYNC, DISABLE_TIMING, INTERPROCESS.
    fn cuEventCreate(event: *mut *mut c_void, flags: c_uint) |s| {
        let ctx = s.require_context()?;
        if flags & !0x7 != 0 {
            return Err(INVALID_VALUE);
        }
        nonnull(event)?;
        let h = s.create_event(ctx);
        // SAFETY: the caller's CUevent.
        unsafe { put(event, h as *mut c_void) }
    }

    /// `cuEventRecord`: the event and the stream must share a context.
    fn cuEventRecord(event: *mut c_void, stream: *mut c_void) |s| {
        let h = s.resolve(stream as Handle)?;
        s.record(event as Handle, h)
    }

    /// `cuEventSynchronize`: runs the work the last record captured.
    fn cuEventSynchronize(event: *mut c_void) |s| {
        s.synchronize_event(event as Handle)
    }

    /// `cuEventDestroy_v2`.
    fn cuEventDestroy_v2(event: *mut c_void) |s| {
        s.events.remove(&(event as Handle)).map(|_| ()).ok_or(INVALID_HANDLE)
    }

    /// `cuPointerGetAttribute`: MEMORY_TYPE, IS_MANAGED and DEVICE_ORDINAL (4-byte values);
    /// `INVALID_VALUE` for memory CUDA does not know, as the driver says.
    fn cuPointerGetAttribute(data: *mut c_void, attribute: c_int, ptr: u64) |s| {
        let (_, a) = s.find(ptr as usize, 1).ok_or(INVALID_VALUE)?;
        let value: u32 = match attribute {
            // Managed memory reports DEVICE, with IS_MANAGED set (what the driver does).
            2 => if a.kind == Kind::Pinned { 1 } else { 2 },
            8 => u32::from(a.kind == Kind::Managed),
            9 => a.ordinal as u32,
            _ => return Err(INVALID_VALUE),
        };
        // SAFETY: every attribute answered here is 4 bytes.
        unsafe { put(data.cast::<u32>(), value) }
    }

    /// `cuMemGetAddressRange_v2`: base and size of the allocation holding `ptr`.
    fn cuMemGetAddressRange_v2(base: *mut u64, size: *mut usize, ptr: u64) |s| {
        s.require_context()?;
        let (b, a) = s.find(ptr as usize, 1).ok_or(INVALID_VALUE)?;
        let n = a.size;
        if !base.is_null() {
            // SAFETY: the caller's CUdeviceptr.
            unsafe { put(base, b as u64) }?;
        }
        if !size.is_null() {
            // SAFETY: the caller's size_t.
            unsafe { put(size, n) }?;
        }
        Ok(())
    }

    /// `cuIpcGetMemHandle`: for the base of device memory this process allocated.
    fn cuIpcGetMemHandle(handle: *mut CuIpcMemHandle, ptr: u64) |s| {
        s.require_context()?;
        let a = s.allocations.get(&(ptr as usize));
        let a = a.filter(|a| a.kind == Kind::Device && a.ipc.is_none()).ok_or(INVALID_VALUE)?;
        let mut reserved = [0u8; IPC_HANDLE_SIZE];
        reserved[..8].copy_from_slice(IPC_MAGIC);
        reserved[8..12].copy_from_slice(&std::process::id().to_le_bytes());
        reserved[12..16].copy_from_slice(&a.mapping.fd.to_le_bytes());
        reserved[16..24].copy_from_slice(&(a.size as u64).to_le_bytes());
        reserved[24..28].copy_from_slice(&a.ordinal.to_le_bytes());
        // SAFETY: the caller's CUipcMemHandle.
        unsafe { put(handle, CuIpcMemHandle { reserved }) }
    }

    /// `cuIpcOpenMemHandle_v2`: maps another process's allocation; opening a handle again
    /// returns the same address (reference counted); the exporter cannot open its own.
    fn cuIpcOpenMemHandle_v2(ptr: *mut u64, handle: CuIpcMemHandle, flags: c_uint) |s| {
        let ctx = s.require_context()?;
        if flags & !0x1 != 0 {
            return Err(INVALID_VALUE);
        }
        nonnull(ptr)?;
        let r = &handle.reserved;
        let field = |i: usize| <[u8; 4]>::try_from(&r[i..i + 4]).expect("4 bytes");
        if &r[..8] != IPC_MAGIC {
            return Err(INVALID_VALUE);
        }
        let (pid, fd) = (u32::from_le_bytes(field(8)), i32::from_le_bytes(field(12)));
        let size = u64::from_le_bytes(r[16..24].try_into().expect("8 bytes")) as usize;
        let ordinal = i32::from_le_bytes(field(24));
        if pid == std::process::id() {
            return Err(INVALID_CONTEXT);
        }
        if !(0..s.devices).contains(&ordinal) {
            return Err(INVALID_DEVICE);
        }
        let open = s.allocations.iter_mut().find(|(_, a)| a.ipc.is_some_and(|(k, _)| k == (pid, fd)));
        let p = if let Some((p, a)) = open {
            a.ipc = a.ipc.map(|(k, n)| (k, n + 1));
            *p
        } else {
            let mapping = Mapping::open_foreign(pid, fd, size).ok_or(INVALID_HANDLE)?;
            let visible = mapping.visible;
            let ipc = Some(((pid, fd), 1));
            let alloc = Alloc { kind: Kind::Device, size, ordinal, ctx, mapping, ipc };
            s.allocations.insert(visible, alloc);
            visible
        };
        // SAFETY: the caller's CUdeviceptr.
        unsafe { put(ptr, p as u64) }
    }

    /// `cuIpcCloseMemHandle`: unmaps when the last open is closed.
    fn cuIpcCloseMemHandle(ptr: u64) |s| {
        s.require_context()?;
        let a = s.allocations.get_mut(&(ptr as usize)).ok_or(INVALID_VALUE)?;
        let (key, n) = a.ipc.ok_or(INVALID_VALUE)?;
        if n > 1 {
            a.ipc = Some((key, n - 1));
        } else {
            s.drain_all();
            s.allocations.remove(&(ptr as usize));
        }
        Ok(())
    }
}

/// Write the name or message of `code` through `out`.
///
/// # Safety
/// `out` is NULL or valid for a write of a pointer.
unsafe fn describe(code: CuResult, out: *mut *const c_char, message: bool) -> CuResult {
    let Some(text) = codes::describe(code, message) else {
        return INVALID_VALUE;
    };
    // SAFETY: the caller's contract.
    match unsafe { put(out, text.as_ptr()) } {
        Ok(()) => codes::SUCCESS,
        Err(e) => e,
    }
}

/// `cuGetErrorName` (needs no `cuInit`, like the driver's).
///
/// # Safety
/// `out` is valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorName(code: CuResult, out: *mut *const c_char) -> CuResult {
    // SAFETY: the caller's contract.
    unsafe { describe(code, out, false) }
}

/// `cuGetErrorString` (needs no `cuInit`, like the driver's).
///
/// # Safety
/// `out` is valid for a write of a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorString(code: CuResult, out: *mut *const c_char) -> CuResult {
    // SAFETY: the caller's contract.
    unsafe { describe(code, out, true) }
}

/// Test control: make the next `times` calls of the entry point `call` return `code`
/// (`times` < 0: every call; 0: stop failing). Returns 0, or -1 for a bad name pointer.
///
/// # Safety
/// `call` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlbridge_standin_fail(
    call: *const c_char,
    code: c_int,
    times: c_int,
) -> c_int {
    if call.is_null() {
        return -1;
    }
    // SAFETY: a NUL-terminated string (the caller's contract).
    let name = unsafe { CStr::from_ptr(call) }
        .to_string_lossy()
        .into_owned();
    with_state(|s| {
        if times == 0 {
            s.failures.remove(&name);
        } else {
            s.failures.insert(name, (code, i64::from(times)));
        }
    });
    0
}

/// Test probe: how many copies and waits are queued and not yet run.
#[unsafe(no_mangle)]
pub extern "C" fn dlbridge_standin_pending() -> usize {
    with_state(|s| s.pending())
}

/// Test probe: how many allocations (device, pinned, managed, opened IPC) are live.
#[unsafe(no_mangle)]
pub extern "C" fn dlbridge_standin_allocations() -> usize {
    with_state(|s| s.allocations.len())
}
