//! Moving tensors between the host and CUDA devices, and ordering device work for consumers.
//!
//! The contract dlbridge keeps for the CUDA memory it holds: the data is ready on the **legacy
//! default stream** of its device — because dlbridge asks producers for it when it imports
//! (`stream=None`, given explicitly: DLPack's name for that stream), and waits for a
//! `__cuda_array_interface__` producer's stream — unless the tensor's
//! memory is an allocation dlbridge filled asynchronously, which then carries a `ready` event.

use std::sync::Arc;

use crate::copy::{HostBuffer, Order, copy_into};
use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::Described;
use crate::tensor::{Owner, Tensor, TensorFlags};

use super::driver::{CU_STREAM_LEGACY, Context, CuDevicePtr, CuStream, Driver, driver};
use super::memory::{AllocKind, Allocation};
use super::stream::{Event, StreamRequest, is_capturing, synchronize};

/// How dlbridge moves data from one device to another (see [`route`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// Host-readable source into host memory (CPU, or CUDA pinned / managed memory): the host
    /// copy kernels.
    HostToHost,
    /// Host-readable source into CUDA device memory: `cuMemcpyHtoD`.
    HostToDevice,
    /// CUDA device memory into host memory: `cuMemcpyDtoH`.
    DeviceToHost,
    /// CUDA device memory into device or managed memory: `cuMemcpyDtoD` / `cuMemcpyPeer`.
    DeviceToDevice,
}

impl Route {
    /// True when the route needs the CUDA driver (all but a copy from host memory to the CPU).
    #[cfg(test)]
    pub(crate) fn needs_driver(self, to: Device) -> bool {
        !(self == Route::HostToHost && to.kind == DeviceType::CPU)
    }
}

/// Where data of `device` can be read from.
fn readable(device: Device) -> Option<bool> {
    match device.kind {
        // Host-readable memory: plain, pinned (CUDA or ROCm) and managed.
        _ if device.is_host_accessible() => Some(true),
        DeviceType::CUDA => Some(false),
        _ => None,
    }
}

/// Whether dlbridge copies data out of memory of `device` itself (host memory, and CUDA
/// memory through the driver); other memory is copied by the library that owns it.
#[cfg(feature = "pyo3")]
pub(crate) fn copies_from(device: Device) -> bool {
    readable(device).is_some()
}

/// Whether dlbridge makes copies on `device` itself (the host CPU, and CUDA pinned, managed
/// and device memory); other devices are reached by the library that owns them.
#[cfg(feature = "pyo3")]
pub(crate) fn copies_to(device: Device) -> bool {
    route(Device::CPU, device).is_ok()
}

/// The route from `from` to `to`, decided from the device types alone (no driver call).
///
/// Reachable: the CPU and CUDA pinned, managed and device memory, in every direction (ROCm
/// pinned memory as a source only, being host memory). Anything else is an
/// [`Error::UnsupportedDevice`] (BufferError) that says to ask the producer.
pub(crate) fn route(from: Device, to: Device) -> Result<Route> {
    let unsupported = |reason: &str| Error::UnsupportedDevice {
        from,
        to,
        reason: reason.to_owned(),
    };
    if to.kind == DeviceType::CPU && to.id != 0 {
        return Err(unsupported(
            "the host CPU is device 0 (DLPack numbers no other CPU); ask for (kDLCPU, 0)",
        ));
    }
    let host_source = readable(from).ok_or_else(|| {
        unsupported("dlbridge can read only host memory and CUDA memory; ask the producer to move the data, or use its own transfer function")
    })?;
    match (host_source, to.kind) {
        (true, DeviceType::CPU | DeviceType::CUDA_HOST | DeviceType::CUDA_MANAGED) => {
            Ok(Route::HostToHost)
        }
        (true, DeviceType::CUDA) => Ok(Route::HostToDevice),
        (false, DeviceType::CPU | DeviceType::CUDA_HOST) => Ok(Route::DeviceToHost),
        (false, DeviceType::CUDA | DeviceType::CUDA_MANAGED) => Ok(Route::DeviceToDevice),
        _ => Err(unsupported(
            "dlbridge can allocate only host memory and CUDA memory; ask the producer for the device",
        )),
    }
}

/// A copy of `src` on device `to`, C-contiguous, writable, with `is_copied` set.
///
/// Synchronisation (the array API asks to document it):
/// - results in host-accessible memory (`cpu`, `cuda_host`, `cuda_managed`) are complete on
///   return (host code reads them without asking for a stream);
/// - host → device copies are enqueued on `stream` (the legacy default stream for `Default` and
///   `NoSync`) and complete on return (the host source may be freed right after);
/// - device → device copies are asynchronous: enqueued on `stream`, and the result carries an
///   event that every later dlbridge copy and export waits for; the source is
///   kept alive until the result is dropped.
///
/// Non-contiguous device tensors are gathered through the host: dlbridge runs no device code.
/// Reading a non-contiguous device tensor transfers the whole byte span it covers.
pub fn to_device(src: &Tensor, to: Device, stream: StreamRequest) -> Result<Tensor> {
    match route(src.device(), to)? {
        Route::HostToHost if to.kind == DeviceType::CPU => {
            wait_host_readable(src)?;
            src.copy(Order::C)
        }
        Route::HostToHost => host_to_driver_memory(src, to),
        Route::HostToDevice => host_to_device(src, to, stream),
        Route::DeviceToHost => device_to_host(src, to, stream),
        Route::DeviceToDevice => device_to_device(src, to, stream),
    }
}

/// A C-contiguous host (CPU) copy of `src`, complete on return: `copy_to_host` for CUDA
/// tensors, a plain host copy for host-accessible ones.
pub fn copy_to_host(src: &Tensor) -> Result<Tensor> {
    to_device(src, Device::CPU, StreamRequest::Default)
}

/// A C-contiguous copy of `src` on `device`, enqueued on the legacy default stream (see
/// [`to_device`] for when it completes).
pub fn copy_to_device(src: &Tensor, device: Device) -> Result<Tensor> {
    to_device(src, device, StreamRequest::Default)
}

/// Make work that a consumer submits on `consumer` after this call see every write to
/// `tensor` dlbridge knows of — the producer's duty under DLPack's stream rules (§7):
///
/// - `NoSync` (`-1`), and data that is not CUDA memory: nothing;
/// - data dlbridge filled asynchronously: `consumer` waits for its `ready` event;
/// - other CUDA device data (ready on the legacy default stream): nothing for the legacy
///   default stream, otherwise an event recorded on the legacy default stream that `consumer`
///   waits for — on the device, the host never blocks.
///
/// The consumer's stream is one of the data's device (DLPack's rule): `Default` and `PerThread`
/// name that device's default streams whatever context the calling thread has current.
///
/// While `consumer` is being captured into a CUDA graph nothing is enqueued (that would
/// invalidate the capture): pending dlbridge copies are waited for on the host instead, and
/// data ready on the legacy default stream is, by then, already complete for the capture.
pub(crate) fn order_for_consumer(tensor: &Tensor, consumer: StreamRequest) -> Result<()> {
    order_on(tensor, consumer, ordinal_of(tensor.device()))
}

/// [`order_for_consumer`] for a consumer stream of CUDA device `consumer_ordinal`.
///
/// The driver reads the legacy and per-thread default stream handles (`1`, `2`) as the streams
/// of the context current on the calling thread, so that device's primary context is made
/// current around every call given `consumer` (with none current they fail, with another
/// device's they name the wrong stream); the event of data ready on the legacy default stream
/// is recorded with the data's own context current, for the same reason.
fn order_on(tensor: &Tensor, consumer: StreamRequest, consumer_ordinal: i32) -> Result<()> {
    let device = tensor.device();
    if !matches!(
        device.kind,
        DeviceType::CUDA | DeviceType::CUDA_HOST | DeviceType::CUDA_MANAGED
    ) {
        return Ok(());
    }
    let Some(stream) = consumer.cu_stream() else {
        return Ok(());
    };
    let ready = ready_event(tensor);
    let data_ordinal = ordinal_of(device);
    // Data ready on a legacy default stream is ready for that same stream (each device has its
    // own: they do not order each other).
    let same_legacy = consumer.is_legacy() && consumer_ordinal == data_ordinal;
    if ready.is_none() && (same_legacy || device.kind != DeviceType::CUDA) {
        return Ok(());
    }
    let driver = driver()?;
    let _consumer = driver.enter(driver.primary_context(consumer_ordinal)?)?;
    let capturing = is_capturing(driver, stream).unwrap_or(true);
    if let Some(ready) = ready {
        return if capturing {
            ready.synchronize()
        } else {
            ready.wait_on(stream)
        };
    }
    if capturing {
        return Ok(());
    }
    let data_ctx = driver.primary_context(data_ordinal)?;
    let event = Event::new_in(driver, data_ctx)?;
    {
        // The legacy default stream of the data's device, not the consumer's.
        let _data = driver.enter(data_ctx)?;
        event.record(CU_STREAM_LEGACY as CuStream)?;
    }
    event.wait_on(stream)
}

/// Adopt a producer's stream (the `stream` key of `__cuda_array_interface__`): make the legacy
/// default stream of `device` wait for the work enqueued so far on `producer`, so the data is
/// ready on the legacy default stream like all CUDA data dlbridge holds. `Default` (the legacy
/// stream itself) and `NoSync` need nothing.
///
/// Pinned and managed memory is read by the host as well, which no device-side wait orders:
/// for it the host waits here for the producer's stream (the legacy one included).
#[cfg_attr(not(feature = "pyo3"), allow(dead_code))] // for the Python face
pub(crate) fn adopt_producer_stream(device: Device, producer: StreamRequest) -> Result<()> {
    let host_reads = device.kind != DeviceType::CUDA;
    let stream = match producer {
        StreamRequest::NoSync => return Ok(()),
        StreamRequest::Default if !host_reads => return Ok(()),
        other => other.copy_stream(),
    };
    let driver = driver()?;
    let ctx = driver.primary_context(ordinal_of(device))?;
    let _guard = driver.enter(ctx)?;
    let event = Event::new_in(driver, ctx)?;
    event.record(stream)?;
    if host_reads {
        event.synchronize()
    } else {
        event.wait_on(CU_STREAM_LEGACY as CuStream)
    }
}

/// Validate the `stream` of a transfer from `from` to `to` (`to_device(device, stream=...)`,
/// `__dlpack__(dl_device=..., stream=...)`): the stream belongs to the CUDA side of the
/// transfer — the destination when it is CUDA memory, else the source — and follows that
/// device's rules ([`parse_stream`](super::stream::parse_stream)). A transfer between host
/// memories takes only `None` (or `-1`).
///
/// # Safety
/// As for [`parse_stream`](super::stream::parse_stream): a value naming a stream must be a live
/// handle ([`StreamHandle::from_raw`](super::StreamHandle::from_raw)).
#[cfg_attr(not(feature = "pyo3"), allow(dead_code))] // for the Python face
pub(crate) unsafe fn transfer_stream(
    from: Device,
    to: Device,
    stream: Option<i64>,
) -> Result<StreamRequest> {
    let cuda_like = |d: Device| {
        matches!(
            d.kind,
            DeviceType::CUDA | DeviceType::CUDA_HOST | DeviceType::CUDA_MANAGED
        )
    };
    let side = if cuda_like(to) || !cuda_like(from) {
        to
    } else {
        from
    };
    // SAFETY: the caller's contract, passed on.
    unsafe { super::stream::parse_stream(side, stream) }
}

/// The stream a copy is enqueued on, as a request and a handle: the requested one, or the
/// legacy default stream for `NoSync` (a copy always needs a stream).
fn copy_stream(stream: StreamRequest) -> (StreamRequest, CuStream) {
    let request = match stream {
        StreamRequest::NoSync => StreamRequest::Default,
        other => other,
    };
    (request, request.copy_stream())
}

/// The `ready` event of memory dlbridge filled asynchronously.
fn ready_event(tensor: &Tensor) -> Option<&Event> {
    tensor
        .owner()
        .downcast_ref::<Allocation>()
        .and_then(|a| a.ready.as_ref())
}

/// Before the host reads `tensor` (managed memory dlbridge filled asynchronously).
pub(crate) fn wait_host_readable(tensor: &Tensor) -> Result<()> {
    ready_event(tensor).map_or(Ok(()), Event::synchronize)
}

/// Before `tensor`'s memory goes to a consumer that is told of no stream or event (an Arrow
/// device array without `sync_event`): wait on the host for dlbridge's pending copies into it
/// and for the legacy default stream of its device, where its data is ready. Nothing for
/// memory that is not CUDA's, nor without a driver (nothing can be pending then).
#[cfg_attr(not(feature = "pyo3"), allow(dead_code))] // for the Python face
pub(crate) fn complete_on_host(tensor: &Tensor) -> Result<()> {
    let device = tensor.device();
    let cuda_memory = matches!(
        device.kind,
        DeviceType::CUDA | DeviceType::CUDA_HOST | DeviceType::CUDA_MANAGED
    );
    if !cuda_memory {
        return Ok(());
    }
    let Ok(driver) = driver() else {
        return Ok(());
    };
    wait_host_readable(tensor)?;
    let _guard = driver.enter(driver.primary_context(ordinal_of(device))?)?;
    synchronize(driver, CU_STREAM_LEGACY as CuStream)
}

/// The CUDA ordinal whose primary context holds memory of `device`: its id for device memory,
/// 0 for pinned and managed memory (whose DLPack id is 0).
fn ordinal_of(device: Device) -> i32 {
    if device.kind == DeviceType::CUDA {
        device.id
    } else {
        0
    }
}

/// The context to allocate memory of device `to` in: the primary context of
/// [`ordinal_of`]`(to)`.
fn context_for(driver: &'static Driver, to: Device) -> Result<Context> {
    driver.primary_context(ordinal_of(to))
}

fn alloc_kind(to: Device) -> AllocKind {
    match to.kind {
        DeviceType::CUDA_HOST => AllocKind::Pinned,
        DeviceType::CUDA_MANAGED => AllocKind::Managed,
        _ => AllocKind::Device,
    }
}

/// A C-contiguous tensor of `like`'s dtype and shape on `to`, over `data` kept alive by
/// `owner` (NULL and a unit owner for zero bytes).
///
/// `data` must be a fresh allocation of `like.nbytes()` bytes on `to` (or NULL for none),
/// laid out C-contiguously, writable and aliased by nothing else.
fn wrap(like: &Tensor, to: Device, data: usize, owner: Owner) -> Result<Tensor> {
    let layout = Layout::contiguous(like.shape(), like.itemsize())?;
    Ok(Tensor::from_described(
        Described {
            data: data as *mut std::ffi::c_void,
            byte_offset: 0,
            device: to,
            dtype: like.dtype(),
            layout,
            readonly: false,
            is_copied: true,
            subbyte_padded: like.is_subbyte_padded(),
        },
        owner,
    ))
}

/// Fresh driver memory of `to` for `nbytes`, or `None` for zero bytes.
fn allocate(driver: &'static Driver, to: Device, nbytes: usize) -> Result<Option<Allocation>> {
    if nbytes == 0 {
        return Ok(None);
    }
    Allocation::new(driver, context_for(driver, to)?, alloc_kind(to), nbytes).map(Some)
}

fn owned(alloc: Option<Allocation>) -> (usize, Owner) {
    match alloc {
        Some(a) => (a.ptr() as usize, Arc::new(a)),
        None => (0, Arc::new(())),
    }
}

/// Host-readable source into pinned or managed memory, with the host copy kernels.
fn host_to_driver_memory(src: &Tensor, to: Device) -> Result<Tensor> {
    let driver = driver()?;
    wait_host_readable(src)?;
    let (data, owner) = owned(allocate(driver, to, src.nbytes())?);
    let dst = wrap(src, to, data, owner)?;
    // SAFETY: `dst` is fresh host-accessible memory nobody else can reach yet.
    unsafe { copy_into(&dst, src) }?;
    Ok(dst)
}

fn host_to_device(src: &Tensor, to: Device, stream: StreamRequest) -> Result<Tensor> {
    let driver = driver()?;
    wait_host_readable(src)?;
    let src = src.contiguous()?;
    let nbytes = src.nbytes();
    let alloc = allocate(driver, to, nbytes)?;
    if let Some(a) = &alloc {
        let _guard = driver.enter(context_for(driver, to)?)?;
        let (_, s) = copy_stream(stream);
        // SAFETY: `nbytes` host-readable bytes at the C-contiguous source, into a fresh device
        // allocation of that size; the stream is synchronised before `src` can go away.
        driver.check("cuMemcpyHtoDAsync_v2", unsafe {
            (driver.api.cuMemcpyHtoDAsync_v2)(a.ptr(), src.data_ptr() as *const _, nbytes, s)
        })?;
        synchronize(driver, s)?;
    }
    let (data, owner) = owned(alloc);
    wrap(&src, to, data, owner)
}

fn device_to_host(src: &Tensor, to: Device, stream: StreamRequest) -> Result<Tensor> {
    let driver = driver()?;
    let item = src.itemsize();
    let contiguous = src.is_c_contiguous();
    // The bytes to transfer: the tensor itself, or the whole span its strides cover.
    let (start, span) = if contiguous {
        (src.data_ptr(), src.nbytes())
    } else {
        let lo = src.layout().min_offset();
        let hi = src.layout().max_offset();
        let start = (src.data_ptr() as i128 + i128::from(lo) * item as i128) as usize;
        (start, ((hi - lo + 1) as usize) * item)
    };
    let into_pinned = contiguous && to.kind == DeviceType::CUDA_HOST;
    let (dst_ptr, keep): (usize, Keep) = if src.size() == 0 {
        (0, Keep::Nothing)
    } else if into_pinned {
        let a = allocate(driver, to, span)?.expect("non-empty");
        (a.ptr() as usize, Keep::Driver(a))
    } else {
        // SAFETY: the whole buffer is written by the transfer below before anything reads it;
        // on failure it is dropped unread.
        let mut b = unsafe { HostBuffer::uninit(span) }?;
        (b.as_mut_ptr() as usize, Keep::Host(b))
    };
    if span > 0 && src.size() > 0 {
        let ctx = driver.primary_context(src.device().id)?;
        let _guard = driver.enter(ctx)?;
        let (request, s) = copy_stream(stream);
        order_for_consumer(src, request)?;
        // SAFETY: `span` bytes of device memory starting at `start` (the layout was validated),
        // into `span` writable host bytes; the stream is synchronised before returning.
        driver.check("cuMemcpyDtoHAsync_v2", unsafe {
            (driver.api.cuMemcpyDtoHAsync_v2)(dst_ptr as *mut _, start as CuDevicePtr, span, s)
        })?;
        synchronize(driver, s)?;
    }
    match keep {
        Keep::Nothing => wrap(src, to, 0, Arc::new(())),
        Keep::Driver(a) => wrap(src, to, dst_ptr, Arc::new(a)),
        Keep::Host(b) if contiguous && to.kind == DeviceType::CPU => {
            let layout = Layout::contiguous(src.shape(), item)?;
            Ok(crate::copy::tensor_from_buffer(
                b,
                src.dtype(),
                layout,
                src.is_subbyte_padded(),
            ))
        }
        Keep::Host(b) => {
            // A host view of the staged span with the source's strides, then a dense copy.
            let first = (src.data_ptr() - start) as u64;
            // SAFETY: the staging buffer holds the whole span, so the source layout from
            // `first` reaches only its bytes; it is initialised and kept alive by the owner.
            let staged = unsafe {
                Tensor::from_raw_parts(
                    dst_ptr as *mut std::ffi::c_void,
                    first,
                    Device::CPU,
                    src.dtype(),
                    src.layout().clone(),
                    TensorFlags::WRITABLE,
                    Arc::new(b),
                )
            }?;
            if to.kind == DeviceType::CPU {
                staged.copy(Order::C)
            } else {
                host_to_driver_memory(&staged, to)
            }
        }
    }
}

/// What holds the destination of a device → host transfer.
enum Keep {
    Nothing,
    Host(HostBuffer),
    Driver(Allocation),
}

fn device_to_device(src: &Tensor, to: Device, stream: StreamRequest) -> Result<Tensor> {
    if !src.is_c_contiguous() {
        // No device kernels in dlbridge: gather through the host.
        let host = device_to_host(src, Device::CPU, stream)?;
        return to_device(&host, to, stream);
    }
    let driver = driver()?;
    let nbytes = src.nbytes();
    let Some(mut alloc) = allocate(driver, to, nbytes)? else {
        return wrap(src, to, 0, Arc::new(()));
    };
    let dst_ctx = context_for(driver, to)?;
    let src_ctx = driver.primary_context(src.device().id)?;
    let _guard = driver.enter(dst_ctx)?;
    let (request, s) = copy_stream(stream);
    // The copy runs on `s`, a stream of the destination's device.
    order_on(src, request, ordinal_of(to))?;
    let from = src.data_ptr() as CuDevicePtr;
    if dst_ctx == src_ctx {
        // SAFETY: `nbytes` device bytes of the C-contiguous source into the fresh allocation,
        // enqueued on `s`; the source is kept alive (below) until the copy is done.
        driver.check("cuMemcpyDtoDAsync_v2", unsafe {
            (driver.api.cuMemcpyDtoDAsync_v2)(alloc.ptr(), from, nbytes, s)
        })?;
    } else {
        // SAFETY: as above, across devices, each pointer with its own context.
        driver.check("cuMemcpyPeerAsync", unsafe {
            (driver.api.cuMemcpyPeerAsync)(alloc.ptr(), dst_ctx.0, from, src_ctx.0, nbytes, s)
        })?;
    }
    let ready = Event::new_in(driver, dst_ctx)?;
    ready.record(s)?;
    if to.kind == DeviceType::CUDA_MANAGED {
        // Host code reads managed memory with no stream to wait on (`Tensor::as_slice`, NumPy
        // through DLPack), so the copy must be complete before the tensor is handed out.
        ready.synchronize()?;
        let data = alloc.ptr() as usize;
        return wrap(src, to, data, Arc::new(alloc));
    }
    alloc.ready = Some(ready);
    alloc.keep_alive = Some(src.clone());
    let data = alloc.ptr() as usize;
    wrap(src, to, data, Arc::new(alloc))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(kind: DeviceType, id: i32) -> Device {
        Device::new(kind, id)
    }

    #[test]
    fn routes() {
        use DeviceType as T;
        use Route::*;
        let cuda0 = dev(T::CUDA, 0);
        let cuda1 = dev(T::CUDA, 1);
        let pinned = dev(T::CUDA_HOST, 0);
        let managed = dev(T::CUDA_MANAGED, 0);
        assert_eq!(route(Device::CPU, Device::CPU).unwrap(), HostToHost);
        assert_eq!(route(Device::CPU, cuda1).unwrap(), HostToDevice);
        assert_eq!(route(cuda1, Device::CPU).unwrap(), DeviceToHost);
        assert_eq!(route(cuda0, cuda1).unwrap(), DeviceToDevice);
        assert_eq!(route(pinned, Device::CPU).unwrap(), HostToHost);
        assert_eq!(route(managed, Device::CPU).unwrap(), HostToHost);
        assert_eq!(route(managed, cuda0).unwrap(), HostToDevice);
        assert_eq!(route(Device::CPU, managed).unwrap(), HostToHost);
        assert_eq!(route(cuda0, managed).unwrap(), DeviceToDevice);
        assert_eq!(route(cuda0, pinned).unwrap(), DeviceToHost);
        assert_eq!(
            route(dev(T::ROCM_HOST, 0), Device::CPU).unwrap(),
            HostToHost
        );
        assert!(!HostToHost.needs_driver(Device::CPU));
        assert!(HostToHost.needs_driver(pinned));
        assert!(HostToDevice.needs_driver(cuda0));
        for (from, to) in [
            (dev(T::ONEAPI, 0), Device::CPU),
            (Device::CPU, dev(T::ONEAPI, 0)),
            (dev(T::ROCM, 0), Device::CPU),
            (cuda0, dev(T::ROCM, 0)),
            (Device::CPU, dev(T::ROCM_HOST, 0)),
            (Device::CPU, dev(T::CPU, 1)),
            (dev(T(99), 0), Device::CPU),
        ] {
            let e = route(from, to).unwrap_err();
            assert!(matches!(e, Error::UnsupportedDevice { .. }), "{e}");
            assert_eq!(e.kind(), crate::ErrorKind::Buffer);
        }
    }

    #[test]
    fn transfer_streams_follow_the_cuda_side() {
        let cuda1 = dev(DeviceType::CUDA, 1);
        // SAFETY: the requests are only compared, never handed to the driver.
        let transfer_stream = |from, to, stream| unsafe { transfer_stream(from, to, stream) };
        assert_eq!(
            transfer_stream(Device::CPU, cuda1, Some(2)).unwrap(),
            StreamRequest::PerThread
        );
        assert_eq!(
            transfer_stream(cuda1, Device::CPU, Some(7)).unwrap(),
            // SAFETY: compared only.
            StreamRequest::Handle(unsafe { super::super::StreamHandle::from_raw(7) })
        );
        assert!(transfer_stream(cuda1, Device::CPU, Some(0)).is_err());
        assert!(transfer_stream(Device::CPU, Device::CPU, Some(5)).is_err());
        assert_eq!(
            transfer_stream(Device::CPU, Device::CPU, None).unwrap(),
            StreamRequest::Default
        );
    }

    #[test]
    fn host_copies_need_no_driver() {
        let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
        let c = copy_to_host(&t.transposed()).unwrap();
        assert_eq!(c.as_slice::<f32>().unwrap(), &[1.0, 3.0, 2.0, 4.0]);
        assert!(c.is_copied() && c.device() == Device::CPU);
        // CPU data needs no ordering for any consumer: the handle never reaches a driver.
        // SAFETY: not a stream, but CPU data returns before the driver is asked anything.
        let made_up = unsafe { super::super::StreamHandle::from_raw(1234) };
        order_for_consumer(&t, StreamRequest::Handle(made_up)).unwrap();
    }

    #[test]
    fn without_a_driver_cuda_is_a_typed_error() {
        if driver().is_ok() {
            return; // a machine with CUDA: covered by the GPU tests
        }
        let t = Tensor::from_vec(vec![1u8, 2, 3], &[3]).unwrap();
        for to in [
            dev(DeviceType::CUDA, 0),
            dev(DeviceType::CUDA_HOST, 0),
            dev(DeviceType::CUDA_MANAGED, 0),
        ] {
            let e = copy_to_device(&t, to).unwrap_err();
            assert!(matches!(e, Error::CudaUnavailable { .. }), "{e}");
        }
        // Safe code reaches the driver only with the three well-known streams, which need no
        // handle from anyone: they fail cleanly without a driver too.
        for request in [
            StreamRequest::Default,
            StreamRequest::PerThread,
            StreamRequest::NoSync,
        ] {
            let e = to_device(&t, dev(DeviceType::CUDA, 1), request).unwrap_err();
            assert!(matches!(e, Error::CudaUnavailable { .. }), "{e}");
        }
        // SAFETY: not a stream, but without a driver it is never used.
        let made_up = unsafe { super::super::StreamHandle::from_raw(77) };
        assert!(matches!(
            adopt_producer_stream(dev(DeviceType::CUDA, 0), StreamRequest::Handle(made_up)),
            Err(Error::CudaUnavailable { .. })
        ));
        adopt_producer_stream(dev(DeviceType::CUDA, 0), StreamRequest::Default).unwrap();
    }

    /// A device tensor described without memory behind it (no driver needed to build one).
    fn fake_device_tensor() -> Tensor {
        let layout = Layout::contiguous(&[4], 4).unwrap();
        // SAFETY: never dereferenced on the host: the tests only ask for ordering and copies,
        // which fail before touching it when there is no driver.
        unsafe {
            Tensor::from_raw_parts(
                0x1000 as *mut std::ffi::c_void,
                0,
                dev(DeviceType::CUDA, 0),
                crate::DType::FLOAT32,
                layout,
                TensorFlags::WRITABLE,
                Arc::new(()),
            )
        }
        .unwrap()
    }

    #[test]
    fn ordering_decisions_without_a_driver() {
        if driver().is_ok() {
            return;
        }
        let t = fake_device_tensor();
        // -1 and the legacy default stream need no driver call at all.
        order_for_consumer(&t, StreamRequest::NoSync).unwrap();
        order_for_consumer(&t, StreamRequest::Default).unwrap();
        // Another stream needs an event: a typed error without a driver.
        assert!(matches!(
            order_for_consumer(&t, StreamRequest::PerThread),
            Err(Error::CudaUnavailable { .. })
        ));
        assert!(matches!(
            copy_to_host(&t),
            Err(Error::CudaUnavailable { .. })
        ));
        // Ready on cuda:0's legacy stream is not ready on cuda:1's (a device-to-device copy's
        // stream there): that needs an event.
        order_on(&t, StreamRequest::Default, 0).unwrap();
        assert!(matches!(
            order_on(&t, StreamRequest::Default, 1),
            Err(Error::CudaUnavailable { .. })
        ));
        // Pinned and managed memory the host reads: even the legacy stream is waited for.
        let managed = dev(DeviceType::CUDA_MANAGED, 0);
        assert!(matches!(
            adopt_producer_stream(managed, StreamRequest::Default),
            Err(Error::CudaUnavailable { .. })
        ));
        adopt_producer_stream(managed, StreamRequest::NoSync).unwrap();
    }

    #[test]
    fn ordinals_of_cuda_memory() {
        assert_eq!(ordinal_of(dev(DeviceType::CUDA, 3)), 3);
        assert_eq!(ordinal_of(dev(DeviceType::CUDA_HOST, 0)), 0);
        assert_eq!(ordinal_of(dev(DeviceType::CUDA_MANAGED, 0)), 0);
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn round_trip_through_the_gpu() {
        let t = Tensor::from_vec((0..64).map(|x| x as f32).collect(), &[8, 8]).unwrap();
        let cuda0 = dev(DeviceType::CUDA, 0);
        let d = copy_to_device(&t.transposed(), cuda0).unwrap();
        assert_eq!(d.device(), cuda0);
        assert!(d.is_copied() && d.is_c_contiguous());
        let dd = to_device(&d, cuda0, StreamRequest::PerThread).unwrap();
        let h = copy_to_host(&dd).unwrap();
        assert_eq!(
            h.to_vec::<f32>().unwrap(),
            t.transposed().to_vec::<f32>().unwrap()
        );
        // A strided device view is gathered through the host.
        let back = copy_to_host(&d.transposed()).unwrap();
        assert_eq!(back.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
        for kind in [DeviceType::CUDA_HOST, DeviceType::CUDA_MANAGED] {
            let m = copy_to_device(&d, dev(kind, 0)).unwrap();
            assert_eq!(m.to_vec::<f32>().unwrap(), h.to_vec::<f32>().unwrap());
        }
        assert_eq!(
            super::super::device_of_pointer(d.data_ptr()).unwrap(),
            cuda0
        );
    }

    /// The bytes of `t`, copied to the host.
    fn host_bytes(t: &Tensor) -> Vec<u8> {
        copy_to_host(t).unwrap().to_vec::<u8>().unwrap()
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn consumer_streams_wait_for_pending_copies() {
        let t = Tensor::from_vec(vec![7u8; 1 << 20], &[1 << 20]).unwrap();
        let cuda0 = dev(DeviceType::CUDA, 0);
        let d = copy_to_device(&t, cuda0).unwrap();
        let producer = super::super::Stream::new(0).unwrap();
        // SAFETY: `producer` outlives every use of its request.
        let dd = to_device(&d, cuda0, unsafe { producer.request() }).unwrap();
        let consumer = super::super::Stream::new(0).unwrap();
        // SAFETY: `consumer` outlives every use of its request.
        order_for_consumer(&dd, unsafe { consumer.request() }).unwrap();
        order_for_consumer(&dd, StreamRequest::NoSync).unwrap();
        consumer.synchronize().unwrap();
        assert!(host_bytes(&dd).iter().all(|x| *x == 7));
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn memory_kinds_and_pointer_info() {
        use super::super::{MemoryKind, pointer_info};
        let t = Tensor::from_vec((0..256).map(|x| x as f32).collect(), &[256]).unwrap();
        let expected = t.to_vec::<f32>().unwrap();
        assert_eq!(
            pointer_info(t.data_ptr()).unwrap().kind,
            MemoryKind::Unregistered
        );
        let cuda0 = dev(DeviceType::CUDA, 0);
        let pinned = dev(DeviceType::CUDA_HOST, 0);
        let managed = dev(DeviceType::CUDA_MANAGED, 0);
        let d = copy_to_device(&t, cuda0).unwrap();
        let info = pointer_info(d.data_ptr()).unwrap();
        assert_eq!((info.kind, info.ordinal), (MemoryKind::Device, Some(0)));
        assert_eq!(info.device(), cuda0);
        // Every way into pinned and managed memory: from the host (host copy), from the device
        // (device-to-host into pinned, device-to-device into managed).
        for (src, to, kind) in [
            (&t, pinned, MemoryKind::Pinned),
            (&d, pinned, MemoryKind::Pinned),
            (&t, managed, MemoryKind::Managed),
            (&d, managed, MemoryKind::Managed),
        ] {
            let m = copy_to_device(src, to).unwrap();
            let what = format!("{to} from {}", src.device());
            let info = pointer_info(m.data_ptr()).unwrap();
            assert_eq!(info.kind, kind, "{what}");
            assert_eq!(info.device(), to, "{what}");
            // Complete on return: the host reads it at once.
            assert_eq!(m.as_slice::<f32>().unwrap(), &expected[..], "{what}");
            let back = copy_to_host(&copy_to_device(&m, cuda0).unwrap()).unwrap();
            assert_eq!(back.to_vec::<f32>().unwrap(), expected, "{what}");
        }
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn ordering_works_without_a_current_context() {
        let t = Tensor::from_vec(vec![3u8; 1 << 20], &[1 << 20]).unwrap();
        let cuda0 = dev(DeviceType::CUDA, 0);
        let d = copy_to_device(&t, cuda0).unwrap();
        let dd = to_device(&d, cuda0, StreamRequest::PerThread).unwrap();
        assert!(ready_event(&dd).is_some() && ready_event(&d).is_none());
        // dlbridge leaves no context current, and a new thread has none: the default stream
        // handles must still name cuda:0's streams.
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    for request in [
                        StreamRequest::Default,
                        StreamRequest::PerThread,
                        StreamRequest::NoSync,
                    ] {
                        order_for_consumer(&dd, request).unwrap();
                        order_for_consumer(&d, request).unwrap();
                        adopt_producer_stream(cuda0, request).unwrap();
                    }
                })
                .join()
                .unwrap();
        });
        assert!(host_bytes(&dd).iter().all(|x| *x == 3));
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn streams_and_events() {
        let driver = driver().unwrap();
        let stream = super::super::Stream::new(0).unwrap();
        let event = Event::new(0).unwrap();
        let raw = stream.handle() as CuStream;
        assert!(!is_capturing(driver, raw).unwrap());
        {
            let _guard = driver.enter(driver.primary_context(0).unwrap()).unwrap();
            assert!(!is_capturing(driver, CU_STREAM_LEGACY as CuStream).unwrap());
            event.record(CU_STREAM_LEGACY as CuStream).unwrap();
        }
        event.wait_on(raw).unwrap();
        event.record(raw).unwrap();
        stream.synchronize().unwrap();
        event.synchronize().unwrap();
        // A producer's stream adopted onto the legacy one, and a foreign event waited for.
        // SAFETY: `stream` outlives the request.
        adopt_producer_stream(dev(DeviceType::CUDA, 0), unsafe { stream.request() }).unwrap();
        // SAFETY: `event` is a live CUevent.
        unsafe { super::super::wait_raw_event(event.handle(), dev(DeviceType::CUDA, 0)) }.unwrap();
    }
}
