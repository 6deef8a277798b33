//! DLPack stream values (spec §7) and the stream and event handles built on the driver.
//!
//! The rules, by device:
//!
//! | device | `None` | `-1` | `0` | `1` | `2` | `> 2` |
//! |---|---|---|---|---|---|---|
//! | CUDA, CUDA pinned, CUDA managed | legacy default | no sync | **invalid** | legacy default | per-thread default | `CUstream` |
//! | ROCm | default | no sync | default | invalid | invalid | `hipStream_t` |
//! | CPU and every other device | nothing to order | nothing to order | invalid | invalid | invalid | invalid |
//!
//! CUDA pinned and managed memory follow the CUDA rules because CUDA consumers (PyTorch among
//! them) treat it as CUDA memory and pass their stream; NumPy passes `None`, which is valid
//! everywhere.

use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};

use super::driver::{
    CU_EVENT_DISABLE_TIMING, CU_STREAM_LEGACY, CU_STREAM_NON_BLOCKING, CU_STREAM_PER_THREAD,
    Context, CuEvent, CuStream, Driver, driver,
};

/// A validated `stream` argument of `__dlpack__` (or `stream` key of
/// `__cuda_array_interface__`): the stream the consumer will use, or the producer's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StreamRequest {
    /// `None`: the device's default stream (for CUDA the legacy default stream); for devices
    /// without streams, nothing to order.
    Default,
    /// `-1`: the consumer asks the producer not to synchronise at all.
    NoSync,
    /// CUDA `2`: the per-thread default stream.
    PerThread,
    /// A stream handle (`cudaStream_t` / `hipStream_t`), which only an `unsafe` promise
    /// ([`StreamHandle::from_raw`]) or a live [`Stream`] can make.
    Handle(StreamHandle),
}

/// A stream handle that the driver will be given: built from an integer only through the
/// `unsafe` [`StreamHandle::from_raw`], because dlbridge enqueues work on it (`cuEventRecord`,
/// `cuStreamWaitEvent`) and the driver cannot be asked whether an integer names a live stream.
///
/// Safe code cannot make one from an integer:
///
/// ```compile_fail,E0133
/// use dlbridge::cuda::{StreamHandle, StreamRequest};
/// let request = StreamRequest::Handle(StreamHandle::from_raw(0x1234)); // unsafe: a promise
/// ```
///
/// ```compile_fail,E0423
/// let handle = dlbridge::cuda::StreamHandle(0x1234); // the field is private
/// ```
///
/// The well-known streams need no promise: [`StreamRequest::Default`],
/// [`StreamRequest::PerThread`] and [`StreamRequest::NoSync`] are safe to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamHandle(usize);

impl StreamHandle {
    /// A handle for the stream whose `cudaStream_t` / `hipStream_t` is `raw`.
    ///
    /// # Safety
    /// `raw` must be a stream handle of the device the request is used for (or of its
    /// context), and stay valid for as long as any request carrying it is passed to dlbridge:
    /// the driver is handed `raw` as is. DLPack's `stream` argument and the `stream` key of
    /// `__cuda_array_interface__` are such a promise from the caller.
    pub const unsafe fn from_raw(raw: usize) -> Self {
        Self(raw)
    }

    /// The handle as an integer.
    pub fn raw(self) -> usize {
        self.0
    }
}

/// The family of stream rules a device follows.
#[cfg_attr(not(feature = "pyo3"), allow(dead_code))] // for the Python face
fn family(device: Device) -> Family {
    match device.kind {
        DeviceType::CUDA | DeviceType::CUDA_HOST | DeviceType::CUDA_MANAGED => Family::Cuda,
        DeviceType::ROCM | DeviceType::ROCM_HOST => Family::Rocm,
        _ => Family::None,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "pyo3"), allow(dead_code))] // for the Python face
enum Family {
    Cuda,
    Rocm,
    None,
}

/// Validate the `stream` a consumer passed for data on `device` (spec §7). A bad value is an
/// [`Error::InvalidArgument`] (ValueError) saying which values are allowed.
///
/// # Safety
/// A value above 2 (any non-negative value but 0 for ROCm) becomes a
/// [`StreamRequest::Handle`]: it must meet [`StreamHandle::from_raw`]'s contract.
#[cfg_attr(not(feature = "pyo3"), allow(dead_code))] // for the Python face
pub(crate) unsafe fn parse_stream(device: Device, stream: Option<i64>) -> Result<StreamRequest> {
    let Some(value) = stream else {
        return Ok(StreamRequest::Default);
    };
    if value == -1 {
        return Ok(StreamRequest::NoSync);
    }
    let invalid = |why: &str| {
        Err(Error::InvalidArgument(format!(
            "stream={value} is not valid for data on {device}: {why}"
        )))
    };
    match (family(device), value) {
        (Family::Cuda, 0) => invalid(
            "0 is ambiguous for CUDA and disallowed; pass 1 for the legacy default stream, 2 for the per-thread default stream, or None",
        ),
        (Family::Cuda, 1) => Ok(StreamRequest::Default),
        (Family::Cuda, 2) => Ok(StreamRequest::PerThread),
        (Family::Rocm, 0) => Ok(StreamRequest::Default),
        (Family::Rocm, 1 | 2) => invalid(
            "ROCm has no legacy or per-thread stream values; pass 0 for the default stream or None",
        ),
        (Family::Cuda | Family::Rocm, v) if v > 2 => {
            // SAFETY: the caller's contract: a value naming a stream is a live handle.
            Ok(StreamRequest::Handle(unsafe {
                StreamHandle::from_raw(v as usize)
            }))
        }
        (Family::None, _) => invalid("this device has no streams; pass stream=None"),
        _ => invalid("streams are None, -1 or a non-negative integer"),
    }
}

impl StreamRequest {
    /// The `CUstream` to enqueue on: `None` for [`StreamRequest::NoSync`].
    pub(crate) fn cu_stream(self) -> Option<CuStream> {
        match self {
            StreamRequest::Default => Some(CU_STREAM_LEGACY as CuStream),
            StreamRequest::PerThread => Some(CU_STREAM_PER_THREAD as CuStream),
            StreamRequest::Handle(h) => Some(h.raw() as CuStream),
            StreamRequest::NoSync => None,
        }
    }

    /// The stream copies are enqueued on: the request's stream, the legacy default stream for
    /// `NoSync` (a copy always needs some stream).
    pub(crate) fn copy_stream(self) -> CuStream {
        self.cu_stream().unwrap_or(CU_STREAM_LEGACY as CuStream)
    }

    /// True for the legacy default stream.
    pub(crate) fn is_legacy(self) -> bool {
        self == StreamRequest::Default
    }
}

/// A CUDA event (timing disabled), destroyed on drop.
#[derive(Debug)]
pub struct Event {
    raw: CuEvent,
    driver: &'static Driver,
}

// SAFETY: CUDA events are process-wide handles usable from any thread.
unsafe impl Send for Event {}
// SAFETY: see above; every operation on a shared Event is a thread-safe driver call.
unsafe impl Sync for Event {}

impl Event {
    /// A new event in context `ctx`.
    pub(crate) fn new_in(driver: &'static Driver, ctx: Context) -> Result<Self> {
        let _guard = driver.enter(ctx)?;
        let mut raw: CuEvent = std::ptr::null_mut();
        // SAFETY: writes one event handle; the context is current.
        driver.check("cuEventCreate", unsafe {
            (driver.api.cuEventCreate)(&mut raw, CU_EVENT_DISABLE_TIMING)
        })?;
        Ok(Self { raw, driver })
    }

    /// A new event on CUDA device `ordinal`.
    pub fn new(ordinal: i32) -> Result<Self> {
        let driver = driver()?;
        Self::new_in(driver, driver.primary_context(ordinal)?)
    }

    /// Record the event on `stream` (whose context must be current, or any for a handle).
    pub(crate) fn record(&self, stream: CuStream) -> Result<()> {
        // SAFETY: a live event and a stream handle from the caller.
        self.driver.check("cuEventRecord", unsafe {
            (self.driver.api.cuEventRecord)(self.raw, stream)
        })
    }

    /// Make `stream` wait (on the device, without blocking the host) for the work captured by
    /// the last record.
    pub(crate) fn wait_on(&self, stream: CuStream) -> Result<()> {
        // SAFETY: a live event and a stream handle; flags must be 0.
        self.driver.check("cuStreamWaitEvent", unsafe {
            (self.driver.api.cuStreamWaitEvent)(stream, self.raw, 0)
        })
    }

    /// The raw `CUevent` (= `cudaEvent_t`), e.g. for an Arrow device array's `sync_event`;
    /// valid while `self` lives.
    pub fn handle(&self) -> usize {
        self.raw as usize
    }

    /// Block the host until the recorded work is done.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: a live event.
        self.driver.check("cuEventSynchronize", unsafe {
            (self.driver.api.cuEventSynchronize)(self.raw)
        })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: destroyed once; the driver defers the release until recorded work completes.
        unsafe { (self.driver.api.cuEventDestroy_v2)(self.raw) };
    }
}

/// A non-blocking CUDA stream created by dlbridge, destroyed on drop.
#[derive(Debug)]
pub struct Stream {
    raw: CuStream,
    driver: &'static Driver,
}

// SAFETY: CUDA streams are process-wide handles usable from any thread.
unsafe impl Send for Stream {}
// SAFETY: see above.
unsafe impl Sync for Stream {}

impl Stream {
    /// A new non-blocking stream on CUDA device `ordinal`.
    pub fn new(ordinal: i32) -> Result<Self> {
        let driver = driver()?;
        let _guard = driver.enter(driver.primary_context(ordinal)?)?;
        let mut raw: CuStream = std::ptr::null_mut();
        // SAFETY: writes one stream handle; the context is current.
        driver.check("cuStreamCreate", unsafe {
            (driver.api.cuStreamCreate)(&mut raw, CU_STREAM_NON_BLOCKING)
        })?;
        Ok(Self { raw, driver })
    }

    /// The handle as the integer DLPack and `__cuda_array_interface__` use.
    pub fn handle(&self) -> usize {
        self.raw as usize
    }

    /// As a [`StreamRequest`].
    ///
    /// # Safety
    /// The request must not be used after `self` is dropped (it carries the raw handle, which
    /// the drop destroys).
    pub unsafe fn request(&self) -> StreamRequest {
        // SAFETY: a live stream this value created; the caller keeps it alive while the
        // request is used.
        StreamRequest::Handle(unsafe { StreamHandle::from_raw(self.handle()) })
    }

    /// Block the host until the work on the stream is done.
    pub fn synchronize(&self) -> Result<()> {
        synchronize(self.driver, self.raw)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: destroyed once; pending work still completes.
        unsafe { (self.driver.api.cuStreamDestroy_v2)(self.raw) };
    }
}

/// Make the legacy default stream of CUDA device `device` wait (on the device, the host does
/// not block) for a foreign event — e.g. the `sync_event` of an Arrow device array — so that
/// the data it guards is ready where dlbridge reads it.
///
/// # Safety
/// `event` must be a valid `CUevent` / `cudaEvent_t` for the duration of the call.
pub unsafe fn wait_raw_event(event: usize, device: Device) -> Result<()> {
    let driver = driver()?;
    let ordinal = if device.kind == DeviceType::CUDA {
        device.id
    } else {
        0
    };
    let _guard = driver.enter(driver.primary_context(ordinal)?)?;
    // SAFETY: a valid event (caller's contract) and the legacy stream handle; flags 0.
    driver.check("cuStreamWaitEvent", unsafe {
        (driver.api.cuStreamWaitEvent)(CU_STREAM_LEGACY as CuStream, event as CuEvent, 0)
    })
}

/// Block the host until a foreign event (a `CUevent` / `cudaEvent_t`, e.g. the `sync_event`
/// of an Arrow device array) has fired, through the driver dlbridge loaded.
///
/// # Safety
/// `event` must be a valid `CUevent` for the duration of the call.
#[cfg_attr(not(feature = "pyo3"), allow(dead_code))] // for the Python face
pub(crate) unsafe fn synchronize_raw_event(event: usize) -> Result<()> {
    let driver = driver()?;
    // SAFETY: a valid event (the caller's contract).
    driver.check("cuEventSynchronize", unsafe {
        (driver.api.cuEventSynchronize)(event as CuEvent)
    })
}

/// Block the host until the work on `stream` is done.
pub(crate) fn synchronize(driver: &Driver, stream: CuStream) -> Result<()> {
    // SAFETY: a stream handle from the caller.
    driver.check("cuStreamSynchronize", unsafe {
        (driver.api.cuStreamSynchronize)(stream)
    })
}

/// True while `stream` is being captured into a CUDA graph (then nothing may be ordered
/// against the legacy default stream without invalidating the capture).
pub(crate) fn is_capturing(driver: &Driver, stream: CuStream) -> Result<bool> {
    let mut status: std::ffi::c_int = 0;
    // SAFETY: writes one capture status for a stream handle.
    driver.check("cuStreamIsCapturing", unsafe {
        (driver.api.cuStreamIsCapturing)(stream, &mut status)
    })?;
    Ok(status != super::driver::CU_STREAM_CAPTURE_STATUS_NONE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use StreamRequest::Handle;

    const CUDA1: Device = Device::new(DeviceType::CUDA, 1);

    /// `parse_stream` for requests these tests only compare, never hand to the driver.
    fn parse(device: Device, stream: Option<i64>) -> Result<StreamRequest> {
        // SAFETY: no request made here reaches the driver.
        unsafe { parse_stream(device, stream) }
    }

    /// The handle request for `raw`, for comparisons only.
    fn handle(raw: usize) -> StreamRequest {
        // SAFETY: compared, never handed to the driver.
        Handle(unsafe { StreamHandle::from_raw(raw) })
    }

    #[test]
    fn cuda_stream_rules() {
        use StreamRequest::*;
        assert_eq!(parse(CUDA1, None).unwrap(), Default);
        assert_eq!(parse(CUDA1, Some(-1)).unwrap(), NoSync);
        assert_eq!(parse(CUDA1, Some(1)).unwrap(), Default);
        assert_eq!(parse(CUDA1, Some(2)).unwrap(), PerThread);
        assert_eq!(parse(CUDA1, Some(0xdead0)).unwrap(), handle(0xdead0));
        let e = parse(CUDA1, Some(0)).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Value);
        assert!(e.to_string().contains("ambiguous"), "{e}");
        assert!(parse(CUDA1, Some(-2)).is_err());
        // Pinned and managed memory follow the CUDA rules.
        for kind in [DeviceType::CUDA_HOST, DeviceType::CUDA_MANAGED] {
            let d = Device::new(kind, 0);
            assert_eq!(parse(d, Some(2)).unwrap(), PerThread);
            assert!(parse(d, Some(0)).is_err());
        }
    }

    #[test]
    fn rocm_and_host_stream_rules() {
        use StreamRequest::*;
        let rocm = Device::new(DeviceType::ROCM, 0);
        assert_eq!(parse(rocm, Some(0)).unwrap(), Default);
        assert!(parse(rocm, Some(1)).is_err());
        assert!(parse(rocm, Some(2)).is_err());
        assert_eq!(parse(rocm, Some(77)).unwrap(), handle(77));
        for d in [Device::CPU, Device::new(DeviceType::ONEAPI, 0)] {
            assert_eq!(parse(d, None).unwrap(), Default);
            assert_eq!(parse(d, Some(-1)).unwrap(), NoSync);
            for bad in [0, 1, 2, 5] {
                let e = parse(d, Some(bad)).unwrap_err();
                assert_eq!(e.kind(), crate::ErrorKind::Value);
            }
        }
    }

    #[test]
    fn handles() {
        assert_eq!(
            StreamRequest::Default.cu_stream(),
            Some(CU_STREAM_LEGACY as CuStream)
        );
        assert_eq!(
            StreamRequest::PerThread.cu_stream(),
            Some(CU_STREAM_PER_THREAD as CuStream)
        );
        assert_eq!(StreamRequest::NoSync.cu_stream(), None);
        assert_eq!(
            StreamRequest::NoSync.copy_stream(),
            CU_STREAM_LEGACY as CuStream
        );
        assert_eq!(handle(0xbeef).cu_stream(), Some(0xbeef as CuStream));
    }

    #[test]
    fn events_and_streams_need_a_driver() {
        if driver().is_err() {
            assert!(matches!(
                Event::new(0).unwrap_err(),
                Error::CudaUnavailable { .. }
            ));
            assert!(matches!(
                Stream::new(0).unwrap_err(),
                Error::CudaUnavailable { .. }
            ));
            // SAFETY: without a driver the handle is never used.
            let e = unsafe { wait_raw_event(0x1234, CUDA1) }.unwrap_err();
            assert!(matches!(e, Error::CudaUnavailable { .. }));
        }
    }
}
