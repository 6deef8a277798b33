//! Tests that need the CUDA stand-in (`crates/cuda-standin`, loaded through
//! `DLBRIDGE_CUDA_DRIVER`): they read what a stream sees, which is deterministic only there
//! (on a GPU a missing wait is a race), and use its failure injection and probes. Ignored by
//! default; `scripts/cuda_standin_test.sh` runs them, one at a time (the probes and injected
//! failures are process-wide).

use std::ffi::{CString, c_char, c_int};

use crate::device::{Device, DeviceType};
use crate::error::Error;
use crate::tensor::Tensor;

use super::driver::{CU_STREAM_LEGACY, CuDevicePtr, CuStream, DRIVER_OVERRIDE, driver};
use super::stream::synchronize;
use super::transfer::{adopt_producer_stream, order_for_consumer};
use super::{Stream, StreamRequest, copy_to_device, copy_to_host, pointer_info, to_device};

const LEGACY: CuStream = CU_STREAM_LEGACY as CuStream;

fn cuda(id: i32) -> Device {
    Device::new(DeviceType::CUDA, id)
}

fn bytes(value: u8) -> Tensor {
    Tensor::from_vec(vec![value; 4096], &[4096]).unwrap()
}

/// The stand-in library (the same instance the driver loaded: dlopen counts references).
fn standin() -> libloading::Library {
    let path = std::env::var(DRIVER_OVERRIDE).expect("DLBRIDGE_CUDA_DRIVER names the stand-in");
    // SAFETY: the library the driver already loaded; loading it again runs nothing.
    unsafe { libloading::Library::new(path) }.unwrap()
}

/// Make the next `times` calls of driver entry point `call` fail with `code`.
fn fail(call: &str, code: i32, times: i32) {
    let lib = standin();
    // SAFETY: the stand-in's control function, with its prototype.
    let f = unsafe {
        lib.get::<unsafe extern "C" fn(*const c_char, c_int, c_int) -> c_int>(
            b"dlbridge_standin_fail\0",
        )
    }
    .unwrap();
    let name = CString::new(call).unwrap();
    // SAFETY: a NUL-terminated name.
    assert_eq!(unsafe { f(name.as_ptr(), code, times) }, 0);
}

/// A probe of the stand-in: `dlbridge_standin_pending` or `dlbridge_standin_allocations`.
fn probe(name: &[u8]) -> usize {
    let lib = standin();
    // SAFETY: the stand-in's probes take nothing and return a count.
    let f = unsafe { lib.get::<unsafe extern "C" fn() -> usize>(name) }.unwrap();
    // SAFETY: see above.
    unsafe { f() }
}

/// The bytes of device tensor `t` as work on `stream` sees them (read there, then waited for).
fn read_on(stream: CuStream, t: &Tensor) -> Vec<u8> {
    let driver = driver().unwrap();
    let _guard = driver
        .enter(driver.primary_context(t.device().id).unwrap())
        .unwrap();
    let mut out = vec![0u8; t.nbytes()];
    // SAFETY: all of `t`'s device bytes into a buffer of that size, complete before return.
    let status = unsafe {
        (driver.api.cuMemcpyDtoHAsync_v2)(
            out.as_mut_ptr().cast(),
            t.data_ptr() as CuDevicePtr,
            t.nbytes(),
            stream,
        )
    };
    driver.check("cuMemcpyDtoHAsync_v2", status).unwrap();
    synchronize(driver, stream).unwrap();
    out
}

/// Enqueue (and not wait for) a copy of `src` into `dst`, both on `dst`'s device, on `stream`.
fn enqueue_copy(dst: &Tensor, src: &Tensor, stream: CuStream) {
    let driver = driver().unwrap();
    let _guard = driver
        .enter(driver.primary_context(dst.device().id).unwrap())
        .unwrap();
    // SAFETY: two live device tensors of the same size; both outlive the work (the tests
    // synchronise before dropping them, and frees synchronise).
    let status = unsafe {
        (driver.api.cuMemcpyDtoDAsync_v2)(
            dst.data_ptr() as CuDevicePtr,
            src.data_ptr() as CuDevicePtr,
            dst.nbytes(),
            stream,
        )
    };
    driver.check("cuMemcpyDtoDAsync_v2", status).unwrap();
}

#[test]
#[ignore = "needs the CUDA stand-in (DLBRIDGE_CUDA_DRIVER)"]
fn device_memory_faults_on_the_host_and_host_kinds_do_not() {
    let d = copy_to_device(&bytes(1), cuda(0)).unwrap();
    let p = d.data_ptr() as *const u8;
    // SAFETY: the child only reads one byte and exits; the parent waits for it.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: on purpose: a host read of device memory, which must fault.
        unsafe {
            std::ptr::read_volatile(p);
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSEGV,
        "status {status:#x}"
    );
    for kind in [DeviceType::CUDA_HOST, DeviceType::CUDA_MANAGED] {
        let m = copy_to_device(&d, Device::new(kind, 0)).unwrap();
        assert!(m.as_slice::<u8>().unwrap().iter().all(|x| *x == 1));
    }
}

#[test]
#[ignore = "needs the CUDA stand-in (DLBRIDGE_CUDA_DRIVER)"]
fn the_stand_in_checks_contexts_and_handles() {
    let driver = driver().unwrap();
    let mut ptr: CuDevicePtr = 0;
    // SAFETY: driver calls with valid output pointers and made-up handles, which it refuses.
    unsafe {
        assert_eq!((driver.api.cuMemAlloc_v2)(&mut ptr, 16), 201); // no current context
        assert_eq!((driver.api.cuStreamSynchronize)(LEGACY), 201);
        assert_eq!((driver.api.cuEventSynchronize)(0x1234 as _), 400);
        let _guard = driver.enter(driver.primary_context(0).unwrap()).unwrap();
        assert_eq!((driver.api.cuMemFree_v2)(0x1234), 1);
        assert_eq!((driver.api.cuStreamSynchronize)(0x1234 as _), 400);
    }
}

#[test]
#[ignore = "needs the CUDA stand-in (DLBRIDGE_CUDA_DRIVER)"]
fn consumer_streams_see_the_data_only_when_ordered() {
    let cuda0 = cuda(0);
    let (sevens, zeros) = (vec![7u8; 4096], vec![0u8; 4096]);
    let src = copy_to_device(&bytes(7), cuda0).unwrap();
    let consumer = Stream::new(0).unwrap();
    let raw = consumer.handle() as CuStream;
    // SAFETY: the streams outlive every use of their requests.
    let (to_consumer, producer) = (unsafe { consumer.request() }, Stream::new(0).unwrap());

    // Data ready on the legacy default stream, its last write still queued there.
    let x = copy_to_device(&bytes(0), cuda0).unwrap();
    enqueue_copy(&x, &src, LEGACY);
    assert_eq!(read_on(raw, &x), zeros, "a missing wait must show");
    order_for_consumer(&x, to_consumer).unwrap();
    assert_eq!(read_on(raw, &x), sevens);

    // Data dlbridge copied on another stream (it carries a `ready` event).
    // SAFETY: see above.
    let dd = to_device(&src, cuda0, unsafe { producer.request() }).unwrap();
    assert_eq!(read_on(raw, &dd), zeros, "a missing wait must show");
    order_for_consumer(&dd, to_consumer).unwrap();
    assert_eq!(read_on(raw, &dd), sevens);

    // A producer's stream adopted onto the legacy default stream.
    let y = copy_to_device(&bytes(0), cuda0).unwrap();
    enqueue_copy(&y, &src, producer.handle() as CuStream);
    assert_eq!(read_on(LEGACY, &y), zeros, "a missing wait must show");
    // SAFETY: see above.
    adopt_producer_stream(cuda0, unsafe { producer.request() }).unwrap();
    assert_eq!(read_on(LEGACY, &y), sevens);
}

#[test]
#[ignore = "needs the CUDA stand-in (DLBRIDGE_CUDA_DRIVER)"]
fn transfers_between_devices_wait_for_the_source_device() {
    let src = copy_to_device(&bytes(5), cuda(0)).unwrap();
    let x = copy_to_device(&bytes(0), cuda(0)).unwrap();
    enqueue_copy(&x, &src, LEGACY); // pending on cuda:0's legacy stream
    let on1 = to_device(&x, cuda(1), StreamRequest::Default).unwrap(); // cuMemcpyPeerAsync
    let info = pointer_info(on1.data_ptr()).unwrap();
    assert_eq!(info.device(), cuda(1));
    assert_eq!(
        copy_to_host(&on1).unwrap().to_vec::<u8>().unwrap(),
        vec![5u8; 4096]
    );
    let managed = copy_to_device(&on1, Device::new(DeviceType::CUDA_MANAGED, 0)).unwrap();
    assert!(managed.as_slice::<u8>().unwrap().iter().all(|v| *v == 5));
}

#[test]
#[ignore = "needs the CUDA stand-in (DLBRIDGE_CUDA_DRIVER)"]
fn injected_driver_failures_are_typed_errors() {
    let t = bytes(3);
    for (call, code, name) in [
        ("cuMemAlloc_v2", 2, "CUDA_ERROR_OUT_OF_MEMORY"),
        ("cuCtxPushCurrent_v2", 201, "CUDA_ERROR_INVALID_CONTEXT"),
        ("cuMemcpyHtoDAsync_v2", 700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
    ] {
        fail(call, code, 1);
        match copy_to_device(&t, cuda(0)) {
            Err(Error::Cuda {
                call: c,
                code: k,
                name: n,
                ..
            }) => {
                assert_eq!((c, k, n.as_str()), (call, code, name));
            }
            other => panic!("{call}: {other:?}"),
        }
        copy_to_device(&t, cuda(0)).unwrap(); // only the next call failed
    }
    // A failed capture query counts as a capture: the pending copy is waited for on the host,
    // nothing is enqueued on the consumer's stream.
    let d = copy_to_device(&t, cuda(0)).unwrap();
    let dd = to_device(&d, cuda(0), StreamRequest::PerThread).unwrap();
    let consumer = Stream::new(0).unwrap();
    let before = probe(b"dlbridge_standin_pending\0");
    fail("cuStreamIsCapturing", 999, 1);
    // SAFETY: `consumer` outlives the request.
    order_for_consumer(&dd, unsafe { consumer.request() }).unwrap();
    assert!(probe(b"dlbridge_standin_pending\0") < before);
    assert_eq!(read_on(consumer.handle() as CuStream, &dd), vec![3u8; 4096]);
}

#[test]
#[ignore = "needs the CUDA stand-in (DLBRIDGE_CUDA_DRIVER)"]
fn every_allocation_goes_back_to_the_driver() {
    let before = probe(b"dlbridge_standin_allocations\0");
    {
        let t = Tensor::from_vec((0..64u16).collect(), &[8, 8]).unwrap();
        let d = copy_to_device(&t, cuda(0)).unwrap();
        let pending = to_device(&d, cuda(1), StreamRequest::PerThread).unwrap();
        let kinds = [DeviceType::CUDA_HOST, DeviceType::CUDA_MANAGED];
        let others: Vec<Tensor> = kinds
            .iter()
            .map(|k| copy_to_device(&pending, Device::new(*k, 0)).unwrap())
            .collect();
        let shared = super::to_ipc_shared(&d).unwrap();
        let gathered = copy_to_host(&d.transposed()).unwrap();
        assert_eq!(
            gathered.to_vec::<u16>().unwrap(),
            t.transposed().to_vec::<u16>().unwrap()
        );
        assert!(probe(b"dlbridge_standin_allocations\0") >= before + 4);
        drop((d, pending, others, shared));
    }
    assert_eq!(probe(b"dlbridge_standin_allocations\0"), before);
}
