//! The CUDA driver API, loaded at run time: the symbol table, the loader, error conversion, and
//! the primary contexts. Nothing here links against CUDA; without the library (or without the
//! `cuda` feature) every entry point reports [`Error::CudaUnavailable`].
#![cfg_attr(not(feature = "cuda"), allow(dead_code))]

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::{Mutex, OnceLock};

use crate::error::{Error, Result};

/// `CUresult`.
pub(crate) type CuResult = c_int;
/// `CUdevice`.
pub(crate) type CuDevice = c_int;
/// `CUcontext`.
pub(crate) type CuContext = *mut c_void;
/// `CUstream`.
pub(crate) type CuStream = *mut c_void;
/// `CUevent`.
pub(crate) type CuEvent = *mut c_void;
/// `CUdeviceptr` (64-bit).
pub(crate) type CuDevicePtr = u64;

/// `CUDA_SUCCESS`.
pub(crate) const CUDA_SUCCESS: CuResult = 0;
/// `CUDA_ERROR_INVALID_VALUE`: what `cuPointerGetAttribute` says for memory CUDA never saw.
pub(crate) const CUDA_ERROR_INVALID_VALUE: CuResult = 1;
/// `CU_STREAM_LEGACY`: the legacy default stream.
pub(crate) const CU_STREAM_LEGACY: usize = 0x1;
/// `CU_STREAM_PER_THREAD`: the per-thread default stream.
pub(crate) const CU_STREAM_PER_THREAD: usize = 0x2;
/// `CU_EVENT_DISABLE_TIMING`.
pub(crate) const CU_EVENT_DISABLE_TIMING: c_uint = 0x2;
/// `CU_STREAM_NON_BLOCKING`.
pub(crate) const CU_STREAM_NON_BLOCKING: c_uint = 0x1;
/// `CU_MEMHOSTALLOC_PORTABLE`: pinned for every context.
pub(crate) const CU_MEMHOSTALLOC_PORTABLE: c_uint = 0x1;
/// `CU_MEM_ATTACH_GLOBAL`.
pub(crate) const CU_MEM_ATTACH_GLOBAL: c_uint = 0x1;
/// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE`.
pub(crate) const CU_POINTER_ATTRIBUTE_MEMORY_TYPE: c_int = 2;
/// `CU_POINTER_ATTRIBUTE_IS_MANAGED`.
pub(crate) const CU_POINTER_ATTRIBUTE_IS_MANAGED: c_int = 8;
/// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL` (CUDA 9.2+).
pub(crate) const CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: c_int = 9;
/// `CU_MEMORYTYPE_HOST`.
pub(crate) const CU_MEMORYTYPE_HOST: c_uint = 1;
/// `CU_MEMORYTYPE_DEVICE`.
pub(crate) const CU_MEMORYTYPE_DEVICE: c_uint = 2;
/// `CU_MEMORYTYPE_UNIFIED`.
pub(crate) const CU_MEMORYTYPE_UNIFIED: c_uint = 4;
/// `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`.
pub(crate) const CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: c_uint = 0x1;
/// Bytes of a `CUipcMemHandle`.
pub(crate) const CU_IPC_HANDLE_SIZE: usize = 64;

/// `CUipcMemHandle`: names one device allocation to other processes (passed by value).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CuIpcMemHandle {
    pub(crate) reserved: [u8; CU_IPC_HANDLE_SIZE],
}

/// `CU_STREAM_CAPTURE_STATUS_NONE`.
pub(crate) const CU_STREAM_CAPTURE_STATUS_NONE: c_int = 0;

/// Declares the symbol table: one field per driver function, resolved by name at load time.
macro_rules! api {
    ($($name:ident : fn($($arg:ty),*);)*) => {
        /// The driver functions dlbridge uses (the `_v2` entry points where CUDA has them).
        #[allow(non_snake_case)]
        pub(crate) struct Api {
            $(pub(crate) $name: unsafe extern "C" fn($($arg),*) -> CuResult,)*
            #[cfg(feature = "cuda")]
            _library: libloading::Library,
        }

        /// Names of every symbol the table needs.
        #[cfg(test)]
        pub(crate) const SYMBOLS: &[&str] = &[$(stringify!($name)),*];

        #[cfg(feature = "cuda")]
        impl Api {
            /// Resolve every symbol of `library`.
            #[allow(non_snake_case)]
            fn resolve(library: libloading::Library) -> Result<Self> {
                $(
                    // SAFETY: the symbol is looked up by its exact C name and given the
                    // prototype of the CUDA driver API header for that name.
                    let $name = unsafe {
                        *library
                            .get::<unsafe extern "C" fn($($arg),*) -> CuResult>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                            .map_err(|e| Error::CudaUnavailable {
                                reason: format!(
                                    "the driver library lacks {} (driver too old?): {e}",
                                    stringify!($name)
                                ),
                            })?
                    };
                )*
                Ok(Self { $($name,)* _library: library })
            }
        }
    };
}

api! {
    cuInit: fn(c_uint);
    cuDeviceGetCount: fn(*mut c_int);
    cuDeviceGet: fn(*mut CuDevice, c_int);
    cuDevicePrimaryCtxRetain: fn(*mut CuContext, CuDevice);
    cuCtxPushCurrent_v2: fn(CuContext);
    cuCtxPopCurrent_v2: fn(*mut CuContext);
    cuMemAlloc_v2: fn(*mut CuDevicePtr, usize);
    cuMemFree_v2: fn(CuDevicePtr);
    cuMemHostAlloc: fn(*mut *mut c_void, usize, c_uint);
    cuMemFreeHost: fn(*mut c_void);
    cuMemAllocManaged: fn(*mut CuDevicePtr, usize, c_uint);
    cuMemcpyDtoHAsync_v2: fn(*mut c_void, CuDevicePtr, usize, CuStream);
    cuMemcpyHtoDAsync_v2: fn(CuDevicePtr, *const c_void, usize, CuStream);
    cuMemcpyDtoDAsync_v2: fn(CuDevicePtr, CuDevicePtr, usize, CuStream);
    cuMemcpyPeerAsync: fn(CuDevicePtr, CuContext, CuDevicePtr, CuContext, usize, CuStream);
    cuStreamCreate: fn(*mut CuStream, c_uint);
    cuStreamDestroy_v2: fn(CuStream);
    cuStreamSynchronize: fn(CuStream);
    cuStreamWaitEvent: fn(CuStream, CuEvent, c_uint);
    cuStreamIsCapturing: fn(CuStream, *mut c_int);
    cuEventCreate: fn(*mut CuEvent, c_uint);
    cuEventRecord: fn(CuEvent, CuStream);
    cuEventSynchronize: fn(CuEvent);
    cuEventDestroy_v2: fn(CuEvent);
    cuPointerGetAttribute: fn(*mut c_void, c_int, CuDevicePtr);
    cuMemGetAddressRange_v2: fn(*mut CuDevicePtr, *mut usize, CuDevicePtr);
    cuIpcGetMemHandle: fn(*mut CuIpcMemHandle, CuDevicePtr);
    cuIpcOpenMemHandle_v2: fn(*mut CuDevicePtr, CuIpcMemHandle, c_uint);
    cuIpcCloseMemHandle: fn(CuDevicePtr);
    cuGetErrorName: fn(CuResult, *mut *const c_char);
    cuGetErrorString: fn(CuResult, *mut *const c_char);
}

/// File names tried, in order, by [`driver`].
#[cfg(target_os = "windows")]
pub(crate) const LIBRARY_NAMES: &[&str] = &["nvcuda.dll"];
/// File names tried, in order, by [`driver`].
#[cfg(not(target_os = "windows"))]
pub(crate) const LIBRARY_NAMES: &[&str] = &["libcuda.so.1", "libcuda.so"];

/// The loaded, initialised driver and the primary contexts retained so far.
pub(crate) struct Driver {
    pub(crate) api: Api,
    contexts: Mutex<Vec<Option<Context>>>,
}

/// A retained primary context (retained once per device, for the life of the process, like
/// the CUDA runtime does: allocations may outlive any Rust scope).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Context(pub(crate) CuContext);

// SAFETY: a CUcontext is a process-wide handle the driver lets any thread use.
unsafe impl Send for Context {}
// SAFETY: see above.
unsafe impl Sync for Context {}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Driver")
    }
}

/// The environment variable naming a driver library to load instead of [`LIBRARY_NAMES`]
/// (a path, e.g. the test suite's stand-in for the driver). Read once, on first use.
pub(crate) const DRIVER_OVERRIDE: &str = "DLBRIDGE_CUDA_DRIVER";

static DRIVER: OnceLock<Result<Driver, String>> = OnceLock::new();

/// The process-wide driver, loaded and initialised on first use. Failure is remembered.
pub(crate) fn driver() -> Result<&'static Driver> {
    DRIVER
        .get_or_init(|| {
            if let Some(path) = std::env::var_os(DRIVER_OVERRIDE).filter(|p| !p.is_empty()) {
                return match path.to_str() {
                    Some(path) => load_first(&[path]),
                    None => Err(format!("{DRIVER_OVERRIDE} is not valid UTF-8: {path:?}")),
                };
            }
            if cfg!(target_os = "macos") {
                return Err(
                    "CUDA is not available on macOS: NVIDIA ships no driver for it".to_owned(),
                );
            }
            load_first(LIBRARY_NAMES)
        })
        .as_ref()
        .map_err(|reason| Error::CudaUnavailable {
            reason: reason.clone(),
        })
}

/// The first of `names` that loads and initialises, or why none did.
fn load_first(names: &[&str]) -> Result<Driver, String> {
    let mut reasons = Vec::new();
    for name in names {
        match Driver::load(name) {
            Ok(d) => return Ok(d),
            Err(Error::CudaUnavailable { reason }) => reasons.push(reason),
            Err(e) => reasons.push(e.to_string()),
        }
    }
    // The first name is the one that matters (the others are fallbacks for unusual installs).
    let mut reason = reasons.into_iter().next().unwrap_or_default();
    if names.len() > 1 {
        reason.push_str(&format!(" (also tried {})", names[1..].join(", ")));
    }
    Err(reason)
}

impl Driver {
    /// Load the driver library `name` (a file name or path), resolve the symbol table and call
    /// `cuInit(0)`.
    #[cfg(feature = "cuda")]
    pub(crate) fn load(name: &str) -> Result<Self> {
        // SAFETY: loading runs the library's initialisers; the CUDA driver's are safe to run
        // from any thread at any time (that is how every CUDA application loads it).
        let library =
            unsafe { libloading::Library::new(name) }.map_err(|e| Error::CudaUnavailable {
                reason: format!("no NVIDIA driver found: cannot load {name} ({e})"),
            })?;
        let api = Api::resolve(library)?;
        let driver = Self {
            api,
            contexts: Mutex::new(Vec::new()),
        };
        // SAFETY: cuInit takes flags (must be 0) and may be called more than once.
        let status = unsafe { (driver.api.cuInit)(0) };
        if status != CUDA_SUCCESS {
            let e = driver.error("cuInit", status);
            return Err(Error::CudaUnavailable {
                reason: format!("the driver loaded but did not initialise: {e}"),
            });
        }
        Ok(driver)
    }

    /// Without the `cuda` feature there is no loader.
    #[cfg(not(feature = "cuda"))]
    pub(crate) fn load(_name: &str) -> Result<Self> {
        Err(Error::CudaUnavailable {
            reason: "dlbridge was built without its `cuda` feature".to_owned(),
        })
    }

    /// A typed error for `status` returned by `call`.
    pub(crate) fn error(&self, call: &'static str, status: CuResult) -> Error {
        let text = |f: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult| {
            let mut p: *const c_char = std::ptr::null();
            // SAFETY: the driver writes a pointer to a static NUL-terminated string, or fails.
            let ok = unsafe { f(status, &mut p) } == CUDA_SUCCESS && !p.is_null();
            if ok {
                // SAFETY: a non-NULL result is a static C string owned by the driver.
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            } else {
                "unknown error".to_owned()
            }
        };
        Error::Cuda {
            call,
            code: status,
            name: text(self.api.cuGetErrorName),
            message: text(self.api.cuGetErrorString),
        }
    }

    /// `Ok` for `CUDA_SUCCESS`, else the typed error.
    pub(crate) fn check(&self, call: &'static str, status: CuResult) -> Result<()> {
        if status == CUDA_SUCCESS {
            Ok(())
        } else {
            Err(self.error(call, status))
        }
    }

    /// Number of CUDA devices.
    pub(crate) fn device_count(&self) -> Result<usize> {
        let mut n: c_int = 0;
        // SAFETY: writes one int.
        self.check("cuDeviceGetCount", unsafe {
            (self.api.cuDeviceGetCount)(&mut n)
        })?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// The primary context of CUDA device `ordinal`, retained on first use.
    pub(crate) fn primary_context(&self, ordinal: i32) -> Result<Context> {
        let count = self.device_count()?;
        let index = usize::try_from(ordinal)
            .ok()
            .filter(|i| *i < count)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "there is no CUDA device {ordinal} (this machine has {count})"
                ))
            })?;
        let mut contexts = self.contexts.lock().unwrap_or_else(|e| e.into_inner());
        if contexts.len() < count {
            contexts.resize(count, None);
        }
        if let Some(ctx) = contexts[index] {
            return Ok(ctx);
        }
        let mut device: CuDevice = 0;
        // SAFETY: writes one CUdevice for a valid ordinal.
        self.check("cuDeviceGet", unsafe {
            (self.api.cuDeviceGet)(&mut device, ordinal)
        })?;
        let mut ctx: CuContext = std::ptr::null_mut();
        // SAFETY: writes one context handle; retained for the life of the process.
        self.check("cuDevicePrimaryCtxRetain", unsafe {
            (self.api.cuDevicePrimaryCtxRetain)(&mut ctx, device)
        })?;
        let ctx = Context(ctx);
        contexts[index] = Some(ctx);
        Ok(ctx)
    }

    /// Make `ctx` current on this thread until the guard drops (which restores the previous
    /// current context): no device switch leaks to the caller.
    pub(crate) fn enter(&self, ctx: Context) -> Result<ContextGuard<'_>> {
        // SAFETY: pushes a valid (retained) context onto this thread's stack.
        self.check("cuCtxPushCurrent_v2", unsafe {
            (self.api.cuCtxPushCurrent_v2)(ctx.0)
        })?;
        Ok(ContextGuard {
            driver: self,
            _not_send: std::marker::PhantomData,
        })
    }
}

/// Pops the context pushed by [`Driver::enter`]; bound to the thread that pushed it.
pub(crate) struct ContextGuard<'a> {
    driver: &'a Driver,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for ContextGuard<'_> {
    fn drop(&mut self) {
        let mut popped: CuContext = std::ptr::null_mut();
        // SAFETY: pops the context this guard pushed on this thread (guards are not Send).
        unsafe { (self.driver.api.cuCtxPopCurrent_v2)(&mut popped) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_is_a_typed_error() {
        let reason = load_first(&["/nonexistent/libcuda.so.1"]).err().unwrap();
        // Without the `cuda` feature nothing is loaded: the reason is the missing feature.
        let expected = if cfg!(feature = "cuda") {
            "/nonexistent/libcuda.so.1"
        } else {
            "without its `cuda` feature"
        };
        assert!(reason.contains(expected), "{reason}");
        let e = Error::CudaUnavailable { reason };
        assert_eq!(e.kind(), crate::ErrorKind::Buffer);
        assert!(e.to_string().starts_with("CUDA is not available"), "{e}");
    }

    #[cfg(all(feature = "cuda", target_os = "linux"))]
    #[test]
    fn library_without_the_symbols_is_a_typed_error() {
        // libc loads fine but has no cuInit: the symbol table refuses it.
        let e = Driver::load("libc.so.6").err().unwrap();
        match e {
            Error::CudaUnavailable { reason } => assert!(reason.contains("cuInit"), "{reason}"),
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn symbol_table_names_are_driver_entry_points() {
        assert!(SYMBOLS.contains(&"cuMemcpyDtoHAsync_v2"));
        assert!(SYMBOLS.iter().all(|s| s.starts_with("cu")));
    }

    /// The names libcuda exports for the API names dlbridge uses: where cuda.h (13.2) maps an
    /// API name to a versioned entry point (`#define cuMemAlloc cuMemAlloc_v2`), the
    /// unversioned export is the old 32-bit ABI or older semantics, so the table must name the
    /// versioned one; the others are exported under their own name.
    #[test]
    fn symbol_table_uses_the_exported_versions() {
        const EXPORTED: &[&str] = &[
            "cuInit",
            "cuDeviceGetCount",
            "cuDeviceGet",
            "cuDevicePrimaryCtxRetain",
            "cuCtxPushCurrent_v2",
            "cuCtxPopCurrent_v2",
            "cuMemAlloc_v2",
            "cuMemFree_v2",
            "cuMemHostAlloc",
            "cuMemFreeHost",
            "cuMemAllocManaged",
            "cuMemcpyDtoHAsync_v2",
            "cuMemcpyHtoDAsync_v2",
            "cuMemcpyDtoDAsync_v2",
            "cuMemcpyPeerAsync",
            "cuStreamCreate",
            "cuStreamDestroy_v2",
            "cuStreamSynchronize",
            "cuStreamWaitEvent",
            "cuStreamIsCapturing",
            "cuEventCreate",
            "cuEventRecord",
            "cuEventSynchronize",
            "cuEventDestroy_v2",
            "cuPointerGetAttribute",
            "cuMemGetAddressRange_v2",
            "cuIpcGetMemHandle",
            "cuIpcOpenMemHandle_v2",
            "cuIpcCloseMemHandle",
            "cuGetErrorName",
            "cuGetErrorString",
        ];
        let mut table = SYMBOLS.to_vec();
        let mut expected = EXPORTED.to_vec();
        table.sort_unstable();
        expected.sort_unstable();
        assert_eq!(table, expected);
    }

    /// The values of cuda.h (13.2; none has changed since the driver API introduced it).
    #[test]
    fn constants_match_cuda_h() {
        assert_eq!(CUDA_SUCCESS, 0);
        assert_eq!(CUDA_ERROR_INVALID_VALUE, 1);
        assert_eq!(CU_STREAM_LEGACY, 0x1);
        assert_eq!(CU_STREAM_PER_THREAD, 0x2);
        assert_eq!(CU_EVENT_DISABLE_TIMING, 0x2);
        assert_eq!(CU_STREAM_NON_BLOCKING, 0x1);
        assert_eq!(CU_MEMHOSTALLOC_PORTABLE, 0x1);
        assert_eq!(CU_MEM_ATTACH_GLOBAL, 0x1);
        assert_eq!(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 2);
        assert_eq!(CU_POINTER_ATTRIBUTE_IS_MANAGED, 8);
        assert_eq!(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, 9);
        assert_eq!(CU_MEMORYTYPE_HOST, 1);
        assert_eq!(CU_MEMORYTYPE_DEVICE, 2);
        assert_eq!(CU_MEMORYTYPE_UNIFIED, 4);
        assert_eq!(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, 0x1);
        assert_eq!(CU_STREAM_CAPTURE_STATUS_NONE, 0);
        assert_eq!(CU_IPC_HANDLE_SIZE, 64);
    }

    /// The C types crossing the ABI: `CUipcMemHandle` is `struct { char reserved[64]; }`,
    /// passed by value to cuIpcOpenMemHandle; `CUdeviceptr` is `unsigned long long` on every
    /// 64-bit platform; handles are pointers; `CUresult`, `CUdevice` and the enums are ints.
    #[test]
    fn abi_types_have_the_c_layout() {
        use std::mem::{align_of, size_of};
        assert_eq!(size_of::<CuIpcMemHandle>(), 64);
        assert_eq!(align_of::<CuIpcMemHandle>(), 1);
        assert_eq!(size_of::<CuDevicePtr>(), 8);
        assert_eq!(size_of::<CuContext>(), size_of::<usize>());
        assert_eq!(size_of::<CuStream>(), size_of::<usize>());
        assert_eq!(size_of::<CuEvent>(), size_of::<usize>());
        assert_eq!(size_of::<CuResult>(), 4);
        assert_eq!(size_of::<CuDevice>(), 4);
    }

    #[test]
    fn process_driver_never_panics() {
        // Either a working driver or a typed error, here and on every later call.
        match driver() {
            Ok(d) => assert!(d.device_count().is_ok()),
            Err(e) => assert!(matches!(e, Error::CudaUnavailable { .. })),
        }
        assert_eq!(driver().is_ok(), driver().is_ok());
    }
}
