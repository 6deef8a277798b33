//! DLPack importer: a producer hands dlbridge a managed tensor (legacy or versioned) with
//! arbitrary contents — version, flags, ndim, shape, strides, dtype, device, data pointer and
//! byte offset — over a sandboxed allocation, and a deleter that counts its calls and frees
//! everything the producer allocated (so any read after the deleter is a use-after-free that
//! AddressSanitizer reports).
//!
//! Checked for every input:
//! - no crash, panic or sanitizer report;
//! - the deleter runs exactly once, whether the import fails or the tensor (and every clone and
//!   re-export of it) is dropped, and never before;
//! - an unknown major version is refused without reading past the 32-byte header (the struct
//!   is allocated that short);
//! - every rejection is a BufferError-kind error; an accepted tensor matches the struct, and
//!   its reachable bytes are real addresses;
//! - when the accepted layout lies inside the sandbox, copies (C and F order) and typed reads
//!   equal a brute-force gather; re-exports of an accepted tensor re-import identically.
#![no_main]

#[path = "common.rs"]
mod common;

use std::alloc::{alloc_zeroed, dealloc, Layout as AllocLayout};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

use arbitrary::Arbitrary;
use common::*;
use dlbridge::{DType, ErrorKind, Flavor, ManagedTensor, Order, Tensor};
use libfuzzer_sys::fuzz_target;

const SANDBOX: usize = 4096;

static DELETES: AtomicUsize = AtomicUsize::new(0);

#[derive(Arbitrary, Debug)]
enum DataChoice {
    Null,
    /// An offset into the sandbox (0..=SANDBOX).
    Sandbox(u16),
    /// Any address: must never be dereferenced unless the layout is refused... or empty.
    Wild(u64),
}

#[derive(Arbitrary, Debug)]
enum NdimChoice {
    /// ndim = number of extents given.
    Honest,
    /// Any i32 (negative or > 64 must be refused without reading shape).
    Any(i32),
}

#[derive(Arbitrary, Debug)]
struct Input {
    versioned: bool,
    major: u8,
    raw_major: Option<u32>,
    minor: u8,
    flags: u64,
    ndim: NdimChoice,
    shape: Vec<Extent>,
    strides: Option<Vec<Stride>>,
    null_shape: bool,
    dtype: RawDType,
    host_device: bool,
    device_type: i32,
    device_id: i32,
    data: DataChoice,
    byte_offset_small: Option<u16>,
    byte_offset_any: u64,
    null_deleter: bool,
    export_minor: u8,
    fill: u8,
}

/// Everything the producer allocated; freed by the deleter.
struct Producer {
    header: *mut u8,
    header_layout: AllocLayout,
    _shape: Box<[i64]>,
    _strides: Option<Box<[i64]>>,
    _sandbox: Box<[u8]>,
}

impl Drop for Producer {
    fn drop(&mut self) {
        // SAFETY: allocated in `build` with this layout, freed once.
        unsafe { dealloc(self.header, self.header_layout) };
    }
}

unsafe extern "C" fn delete_versioned(p: *mut DLManagedTensorVersioned) {
    DELETES.fetch_add(1, Ordering::SeqCst);
    // SAFETY: manager_ctx is the Producer box made in `build`; this is the single call.
    unsafe { drop(Box::from_raw((*p).manager_ctx.cast::<Producer>())) };
}

unsafe extern "C" fn delete_legacy(p: *mut DLManagedTensor) {
    DELETES.fetch_add(1, Ordering::SeqCst);
    // SAFETY: as above.
    unsafe { drop(Box::from_raw((*p).manager_ctx.cast::<Producer>())) };
}

struct Built {
    ptr: *mut c_void,
    ctx: *mut Producer,
    sandbox: (usize, usize),
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    ndim: i32,
    data: *mut c_void,
    byte_offset: u64,
    major: u32,
    minor: u32,
}

fn build(input: &Input) -> Built {
    let major = input.raw_major.unwrap_or(if input.major % 4 == 0 {
        0
    } else {
        1 + u32::from(input.major % 4 == 3)
    });
    let major = if input.versioned { major } else { 1 };
    let minor = u32::from(input.minor % 6);
    let given: Vec<i64> = input.shape.iter().take(70).map(|e| e.0).collect();
    let ndim = match input.ndim {
        NdimChoice::Honest => given.len() as i32,
        NdimChoice::Any(n) => n,
    };
    // An ndim the importer may read (0..=64) gets exactly that many entries; any other value
    // gets what was given: the importer must refuse it before reading any.
    let readable = usize::try_from(ndim).ok().filter(|n| *n <= 64);
    let n_alloc = readable.unwrap_or(given.len());
    let mut shape: Vec<i64> = given.clone();
    shape.resize(n_alloc, 1);
    let strides: Option<Vec<i64>> = input.strides.as_ref().map(|s| {
        let mut v: Vec<i64> = s.iter().take(70).map(|x| x.0).collect();
        v.resize(n_alloc, 1);
        v
    });
    let mut shape_box = shape.clone().into_boxed_slice();
    let mut strides_box = strides.clone().map(Vec::into_boxed_slice);

    let mut sandbox: Box<[u8]> = (0..SANDBOX)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(input.fill))
        .collect();
    let sb = sandbox.as_mut_ptr();
    let sandbox_range = (sb as usize, sb as usize + SANDBOX);
    let data: *mut c_void = match input.data {
        DataChoice::Null => std::ptr::null_mut(),
        // SAFETY: at most one past the end of the sandbox.
        DataChoice::Sandbox(off) => unsafe { sb.add(usize::from(off) % (SANDBOX + 1)) }.cast(),
        DataChoice::Wild(a) => a as usize as *mut c_void,
    };
    let byte_offset = match input.byte_offset_small {
        Some(o) => u64::from(o % 512),
        None => input.byte_offset_any,
    };
    let host = input.host_device;
    let device = if host {
        DLDevice {
            device_type: 1,
            device_id: 0,
        }
    } else {
        DLDevice {
            device_type: input.device_type,
            device_id: input.device_id,
        }
    };
    let dl_tensor = DLTensor {
        data,
        device,
        ndim,
        dtype: input.dtype.0,
        shape: if input.null_shape {
            std::ptr::null_mut()
        } else {
            shape_box.as_mut_ptr()
        },
        strides: strides_box
            .as_mut()
            .map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset,
    };

    // An unknown major version gets only the header every major version shares: reading
    // dl_tensor would overflow the allocation.
    let size = if !input.versioned {
        std::mem::size_of::<DLManagedTensor>()
    } else if major == 1 {
        std::mem::size_of::<DLManagedTensorVersioned>()
    } else {
        VERSIONED_HEADER
    };
    let header_layout = AllocLayout::from_size_align(size, 8).unwrap();
    // SAFETY: non-zero size.
    let header = unsafe { alloc_zeroed(header_layout) };
    assert!(!header.is_null());
    let ctx = Box::into_raw(Box::new(Producer {
        header,
        header_layout,
        _shape: shape_box,
        _strides: strides_box,
        _sandbox: sandbox,
    }));
    // SAFETY: `header` is a fresh allocation of `size` bytes, 8-aligned; only fields inside
    // it are written.
    unsafe {
        if input.versioned {
            let m = header.cast::<DLManagedTensorVersioned>();
            std::ptr::addr_of_mut!((*m).version).write(DLPackVersion { major, minor });
            std::ptr::addr_of_mut!((*m).manager_ctx).write(ctx.cast());
            std::ptr::addr_of_mut!((*m).deleter)
                .write((!input.null_deleter).then_some(delete_versioned as _));
            std::ptr::addr_of_mut!((*m).flags).write(input.flags);
            if major == 1 {
                std::ptr::addr_of_mut!((*m).dl_tensor).write(dl_tensor);
            }
        } else {
            let m = header.cast::<DLManagedTensor>();
            std::ptr::addr_of_mut!((*m).dl_tensor).write(dl_tensor);
            std::ptr::addr_of_mut!((*m).manager_ctx).write(ctx.cast());
            std::ptr::addr_of_mut!((*m).deleter)
                .write((!input.null_deleter).then_some(delete_legacy as _));
        }
    }
    Built {
        ptr: header.cast(),
        ctx,
        sandbox: sandbox_range,
        shape,
        strides,
        ndim,
        data,
        byte_offset,
        major,
        minor,
    }
}

fn expected_deletes(input: &Input) -> usize {
    usize::from(!input.null_deleter)
}

fuzz_target!(|input: Input| {
    DELETES.store(0, Ordering::SeqCst);
    let b = build(&input);
    // SAFETY: `b.ptr` is a managed tensor whose ownership passes to dlbridge.
    let managed = unsafe {
        if input.versioned {
            ManagedTensor::from_versioned(b.ptr.cast())
        } else {
            ManagedTensor::from_legacy(b.ptr.cast())
        }
    }
    .expect("non-NULL");
    match Tensor::from_managed(managed) {
        Err(e) => {
            assert_eq!(
                e.kind(),
                ErrorKind::Buffer,
                "import errors are BufferErrors: {e}"
            );
            let _ = e.to_string();
            assert_eq!(DELETES.load(Ordering::SeqCst), expected_deletes(&input));
        }
        Ok(t) => {
            assert_eq!(
                DELETES.load(Ordering::SeqCst),
                0,
                "deleter ran while in use"
            );
            check_accepted(&input, &b, &t);
            let clone = t.clone();
            drop(t);
            assert_eq!(
                DELETES.load(Ordering::SeqCst),
                0,
                "deleter ran while a clone lives"
            );
            drop(clone);
            assert_eq!(DELETES.load(Ordering::SeqCst), expected_deletes(&input));
        }
    }
    if input.null_deleter {
        // Nobody else frees a producer without a deleter.
        // SAFETY: made in `build`, not freed (no deleter).
        drop(unsafe { Box::from_raw(b.ctx) });
    }
});

fn check_accepted(input: &Input, b: &Built, t: &Tensor) {
    assert_eq!(b.major, 1, "an unknown major version was accepted");
    let ndim = usize::try_from(b.ndim).expect("negative ndim accepted");
    assert!(ndim <= 64);
    assert_eq!(t.ndim(), ndim);
    if ndim > 0 {
        assert!(!input.null_shape, "NULL shape accepted");
        assert_eq!(t.shape(), &b.shape[..ndim]);
        match &b.strides {
            Some(s) => {
                if t.size() > 0 {
                    assert_eq!(t.strides(), &s[..ndim]);
                }
            }
            None => {
                assert!(
                    !(input.versioned && b.minor >= 2),
                    "NULL strides accepted from a DLPack 1.2+ producer"
                );
                assert!(t.is_c_contiguous());
            }
        }
    }
    assert!(t.shape().iter().all(|n| *n >= 0));
    let readonly = !input.versioned || input.flags & 1 != 0;
    assert_eq!(t.is_readonly(), readonly);
    assert_eq!(t.is_copied(), input.versioned && input.flags & 2 != 0);
    assert_eq!(t.raw_data(), b.data);
    assert_eq!(t.byte_offset(), b.byte_offset);
    let _ = format!("{t:?} {} {}", t.dtype(), t.device());
    let itemsize = t.itemsize();
    assert_eq!(itemsize, t.dtype().itemsize());
    if t.size() > 0 {
        assert!(
            !b.data.is_null(),
            "NULL data accepted for a non-empty tensor"
        );
    }

    let host = t.device().is_host_accessible();
    let mut inside = false;
    if t.size() > 0 && host {
        let first = b.data as usize as i128 + i128::from(b.byte_offset);
        let (lo, hi) = reach(first, t.shape(), t.strides(), itemsize);
        assert!(
            lo >= 0 && hi <= isize::MAX as i128,
            "accepted a layout reaching outside the address space: [{lo}, {hi})"
        );
        inside = lo >= b.sandbox.0 as i128 && hi <= b.sandbox.1 as i128;
    }
    if inside && t.size() <= 1 << 14 {
        check_reads(t);
    }
    check_reexport(input, t, host);
}

/// The tensor's reachable bytes are inside the sandbox: every read must equal a brute-force
/// gather.
fn check_reads(t: &Tensor) {
    let itemsize = t.itemsize();
    let base = t.data_ptr() as *const u8;
    let subbyte = t.dtype().is_subbyte() && !t.is_subbyte_padded();
    // SAFETY: the caller checked that every reached byte is in the live sandbox.
    let c_ref = unsafe { gather(base, t.shape(), t.strides(), itemsize, false) };
    let f_ref = unsafe { gather(base, t.shape(), t.strides(), itemsize, true) };
    match t.copy(Order::C) {
        Ok(c) => {
            assert!(c.is_c_contiguous() && c.is_copied() && !c.is_readonly());
            if !subbyte {
                assert_eq!(c.host_bytes().unwrap(), &c_ref[..], "C copy differs");
            }
        }
        Err(e) => assert!(subbyte, "copy(C) failed: {e}"),
    }
    match t.copy(Order::F) {
        Ok(f) => {
            assert!(f.is_f_contiguous());
            if !subbyte {
                // SAFETY: a fresh dense copy of exactly nbytes.
                let bytes =
                    unsafe { std::slice::from_raw_parts(f.data_ptr() as *const u8, f.nbytes()) };
                assert_eq!(bytes, &f_ref[..], "F copy differs");
            }
        }
        Err(e) => assert!(subbyte, "copy(F) failed: {e}"),
    }
    macro_rules! typed {
        ($($ty:ty => $dt:ident),*) => {$(
            if t.dtype() == DType::$dt {
                match t.to_vec::<$ty>() {
                    Ok(v) => {
                        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
                        assert_eq!(bytes, c_ref, "to_vec differs");
                    }
                    Err(_) => assert!(!t.is_aligned()),
                }
                if let Ok(s) = t.as_slice::<$ty>() {
                    assert_eq!(s.len(), t.size());
                }
            }
        )*};
    }
    typed!(u8 => UINT8, i8 => INT8, u16 => UINT16, i16 => INT16, u32 => UINT32,
           i32 => INT32, u64 => UINT64, i64 => INT64, f32 => FLOAT32, f64 => FLOAT64);
    let _ = t.contiguous();
}

/// Exports of an accepted tensor re-import to the same description.
fn check_reexport(input: &Input, t: &Tensor, host: bool) {
    let flavors = [
        Flavor::Versioned {
            minor: u32::from(input.export_minor % 5),
        },
        Flavor::Legacy,
    ];
    for flavor in flavors {
        match t.export(flavor) {
            Ok(m) => {
                let back = Tensor::from_managed(m).expect("our own export re-imports");
                assert_eq!(back.shape(), t.shape());
                assert_eq!(back.strides(), &*t.layout().export_strides());
                assert_eq!(back.dtype(), t.dtype());
                assert_eq!(back.device(), t.device());
                if host {
                    assert_eq!(back.data_ptr(), t.data_ptr());
                } else {
                    assert_eq!(back.raw_data(), t.raw_data());
                    assert_eq!(back.byte_offset(), t.byte_offset());
                }
                assert_eq!(back.is_readonly(), t.is_readonly() || flavor == Flavor::Legacy);
                assert_eq!(DELETES.load(Ordering::SeqCst), 0);
            }
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Buffer);
                let needs_newer = t.dtype().min_dlpack_minor() > 0 || t.is_subbyte_padded();
                assert!(
                    needs_newer || (flavor == Flavor::Legacy && t.is_readonly()),
                    "unexpected export refusal: {e}"
                );
            }
        }
    }
}
