//! A counting DLPack producer for the integration tests.
//!
//! dlbridge keeps the fields of its `DLManagedTensor*` mirrors private, as a foreign producer's
//! struct would be anyway, so the producer here lays out its own `#[repr(C)]` structs (the ABI
//! of `dlpack.h` 1.3) and hands dlbridge a pointer. Every managed tensor owns its shape,
//! strides, data and the struct itself in one heap block; the deleter counts its calls (and the
//! threads they come from) and frees the block, so a use after the deleter is a use-after-free
//! that valgrind reports.
#![allow(dead_code)]

pub(crate) mod arrow;

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use dlbridge::ManagedTensor;

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct DLTensor {
    pub data: *mut c_void,
    pub device: [i32; 2],
    pub ndim: i32,
    pub dtype: (u8, u8, u16),
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

#[repr(C)]
pub(crate) struct Legacy {
    pub dl_tensor: DLTensor,
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut Legacy)>,
}

#[repr(C)]
pub(crate) struct Versioned {
    pub version: [u32; 2],
    pub manager_ctx: *mut c_void,
    pub deleter: Option<unsafe extern "C" fn(*mut Versioned)>,
    pub flags: u64,
    pub dl_tensor: DLTensor,
}

const _: () = {
    assert!(std::mem::size_of::<DLTensor>() == 48);
    assert!(std::mem::size_of::<Legacy>() == 64);
    assert!(std::mem::size_of::<Versioned>() == 80);
};

/// Counts deleter calls and records the threads they run on.
#[derive(Default)]
pub(crate) struct Counter {
    calls: AtomicUsize,
    threads: Mutex<Vec<ThreadId>>,
}

impl Counter {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
    pub(crate) fn threads(&self) -> Vec<ThreadId> {
        self.threads.lock().unwrap().clone()
    }
}

/// Where `data` points.
#[derive(Clone, Debug)]
pub(crate) enum Data {
    Null,
    /// A fresh buffer of this many bytes (filled with 0, 1, 2, ...), owned by the producer.
    Buffer(usize),
    /// A fixed address (never dereferenced by a correct importer of a refused tensor).
    Addr(usize),
}

/// Everything a producer may put in a managed tensor, good or bad.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    pub versioned: bool,
    pub version: (u32, u32),
    pub flags: u64,
    /// `None`: the number of extents.
    pub ndim: Option<i32>,
    /// `None`: a NULL shape pointer.
    pub shape: Option<Vec<i64>>,
    /// `None`: a NULL strides pointer.
    pub strides: Option<Vec<i64>>,
    pub dtype: (u8, u8, u16),
    pub device: (i32, i32),
    pub data: Data,
    pub byte_offset: u64,
    pub deleter: bool,
    /// Fill `dl_tensor` with garbage pointers (for major versions that must not be read).
    pub garbage_tensor: bool,
}

impl Spec {
    /// A valid versioned 1.3 float32 tensor of `shape`, C-contiguous, over its own buffer.
    pub(crate) fn f32(shape: &[i64]) -> Self {
        let n: i64 = shape.iter().product();
        Self {
            versioned: true,
            version: (1, 3),
            flags: 0,
            ndim: None,
            shape: Some(shape.to_vec()),
            strides: Some(c_strides(shape)),
            dtype: (2, 32, 1),
            device: (1, 0),
            data: Data::Buffer(4 * n.max(0) as usize),
            byte_offset: 0,
            deleter: true,
            garbage_tensor: false,
        }
    }
    pub(crate) fn legacy(mut self) -> Self {
        self.versioned = false;
        self
    }
    pub(crate) fn version(mut self, major: u32, minor: u32) -> Self {
        self.version = (major, minor);
        self
    }
    pub(crate) fn strides(mut self, strides: Option<Vec<i64>>) -> Self {
        self.strides = strides;
        self
    }
    pub(crate) fn data(mut self, data: Data) -> Self {
        self.data = data;
        self
    }
}

pub(crate) fn c_strides(shape: &[i64]) -> Vec<i64> {
    let mut out = vec![0; shape.len()];
    let mut acc = 1i64;
    for (s, &n) in out.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.saturating_mul(n.max(1));
    }
    out
}

/// The heap block behind one managed tensor.
struct Block {
    versioned: Option<Box<Versioned>>,
    legacy: Option<Box<Legacy>>,
    _shape: Option<Vec<i64>>,
    _strides: Option<Vec<i64>>,
    _data: Vec<u8>,
    counter: Arc<Counter>,
}

fn record(ctx: *mut c_void) {
    // SAFETY: manager_ctx is the Block made by `make`, freed here exactly once.
    let block = unsafe { Box::from_raw(ctx.cast::<Block>()) };
    block.counter.calls.fetch_add(1, Ordering::SeqCst);
    block
        .counter
        .threads
        .lock()
        .unwrap()
        .push(std::thread::current().id());
    drop(block);
}

unsafe extern "C" fn delete_versioned(m: *mut Versioned) {
    // SAFETY: a struct made by `make`; read before the block (which holds it) is freed.
    record(unsafe { (*m).manager_ctx });
}

unsafe extern "C" fn delete_legacy(m: *mut Legacy) {
    // SAFETY: as above.
    record(unsafe { (*m).manager_ctx });
}

/// A raw managed tensor (`*mut Versioned` or `*mut Legacy`) and its block (for freeing it by
/// hand when there is no deleter).
pub(crate) struct Raw {
    pub ptr: *mut c_void,
    pub versioned: bool,
    ctx: *mut c_void,
}

impl Raw {
    /// Free a tensor whose deleter is NULL (after dlbridge is done with it).
    ///
    /// # Safety
    /// Only for specs with `deleter: false`, once, after every user is gone.
    pub(crate) unsafe fn free_without_deleter(self) {
        // SAFETY: the caller's contract: the block is ours again and freed once.
        drop(unsafe { Box::from_raw(self.ctx.cast::<Block>()) });
    }
    /// Hand it to dlbridge.
    pub(crate) fn to_managed(&self) -> ManagedTensor {
        // SAFETY: made by `make_raw`; ownership passes (the caller uses it once).
        unsafe {
            if self.versioned {
                ManagedTensor::from_versioned(self.ptr.cast())
            } else {
                ManagedTensor::from_legacy(self.ptr.cast())
            }
        }
        .unwrap()
    }
}

pub(crate) fn make_raw(spec: &Spec, counter: &Arc<Counter>) -> Raw {
    let mut shape = spec.shape.clone();
    let mut strides = spec.strides.clone();
    let mut data: Vec<u8> = match spec.data {
        Data::Buffer(n) => (0..n).map(|i| i as u8).collect(),
        _ => vec![],
    };
    let data_ptr: *mut c_void = match spec.data {
        Data::Null => std::ptr::null_mut(),
        Data::Buffer(_) => data.as_mut_ptr().cast(),
        Data::Addr(a) => a as *mut c_void,
    };
    let ndim = spec
        .ndim
        .unwrap_or(shape.as_ref().map_or(0, |s| s.len() as i32));
    let mut dl = DLTensor {
        data: data_ptr,
        device: [spec.device.0, spec.device.1],
        ndim,
        dtype: spec.dtype,
        shape: shape
            .as_mut()
            .map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        strides: strides
            .as_mut()
            .map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: spec.byte_offset,
    };
    if spec.garbage_tensor {
        dl.shape = std::ptr::without_provenance_mut::<i64>(0x8);
        dl.strides = std::ptr::without_provenance_mut::<i64>(0x10);
        dl.ndim = 3;
        dl.data = std::ptr::without_provenance_mut::<c_void>(0x18);
    }
    let block = Box::into_raw(Box::new(Block {
        versioned: None,
        legacy: None,
        _shape: shape,
        _strides: strides,
        _data: data,
        counter: counter.clone(),
    }));
    let ctx: *mut c_void = block.cast();
    // SAFETY: `block` is live and uniquely ours until handed over.
    let ptr: *mut c_void = unsafe {
        if spec.versioned {
            let mut m = Box::new(Versioned {
                version: [spec.version.0, spec.version.1],
                manager_ctx: ctx,
                deleter: spec.deleter.then_some(delete_versioned as _),
                flags: spec.flags,
                dl_tensor: dl,
            });
            let p: *mut Versioned = &mut *m;
            (*block).versioned = Some(m);
            p.cast()
        } else {
            let mut m = Box::new(Legacy {
                dl_tensor: dl,
                manager_ctx: ctx,
                deleter: spec.deleter.then_some(delete_legacy as _),
            });
            let p: *mut Legacy = &mut *m;
            (*block).legacy = Some(m);
            p.cast()
        }
    };
    Raw {
        ptr,
        versioned: spec.versioned,
        ctx,
    }
}

/// A managed tensor for `spec` whose deleter reports to `counter`.
pub(crate) fn make(spec: &Spec, counter: &Arc<Counter>) -> ManagedTensor {
    assert!(spec.deleter, "use make_raw for a NULL deleter");
    make_raw(spec, counter).to_managed()
}
