//! A counting Arrow C Data producer for the integration tests: schema, array and stream structs
//! laid out by the producer (a mirror of `abi.h`), whose release callbacks count calls, free
//! everything, and then poison what they freed, so a read after release crashes (or is a
//! use-after-free under valgrind).
#![allow(dead_code)]

use std::collections::VecDeque;
use std::ffi::{CString, c_char, c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

#[repr(C)]
pub(crate) struct CSchema {
    pub format: *const c_char,
    pub name: *const c_char,
    pub metadata: *const c_char,
    pub flags: i64,
    pub n_children: i64,
    pub children: *mut *mut CSchema,
    pub dictionary: *mut CSchema,
    pub release: Option<unsafe extern "C" fn(*mut CSchema)>,
    pub private_data: *mut c_void,
}

#[repr(C)]
pub(crate) struct CArray {
    pub length: i64,
    pub null_count: i64,
    pub offset: i64,
    pub n_buffers: i64,
    pub n_children: i64,
    pub buffers: *mut *const c_void,
    pub children: *mut *mut CArray,
    pub dictionary: *mut CArray,
    pub release: Option<unsafe extern "C" fn(*mut CArray)>,
    pub private_data: *mut c_void,
}

#[repr(C)]
pub(crate) struct CStream {
    pub get_schema: Option<unsafe extern "C" fn(*mut CStream, *mut CSchema) -> c_int>,
    pub get_next: Option<unsafe extern "C" fn(*mut CStream, *mut CArray) -> c_int>,
    pub get_last_error: Option<unsafe extern "C" fn(*mut CStream) -> *const c_char>,
    pub release: Option<unsafe extern "C" fn(*mut CStream)>,
    pub private_data: *mut c_void,
}

const _: () = {
    assert!(std::mem::size_of::<CSchema>() == 72);
    assert!(std::mem::size_of::<CArray>() == 80);
    assert!(std::mem::size_of::<CStream>() == 40);
};

/// Release calls of the base structs, and where they ran.
#[derive(Default)]
pub(crate) struct Releases {
    pub schema: AtomicUsize,
    pub array: AtomicUsize,
    pub stream: AtomicUsize,
    /// Calls of a release pointer a failing callback left in its output (must stay 0).
    pub poison: AtomicUsize,
    pub threads: Mutex<Vec<ThreadId>>,
}

impl Releases {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }
    pub(crate) fn schema(&self) -> usize {
        self.schema.load(Ordering::SeqCst)
    }
    pub(crate) fn array(&self) -> usize {
        self.array.load(Ordering::SeqCst)
    }
    pub(crate) fn stream(&self) -> usize {
        self.stream.load(Ordering::SeqCst)
    }
    pub(crate) fn poison(&self) -> usize {
        self.poison.load(Ordering::SeqCst)
    }
}

/// A field: format, metadata pairs, children.
#[derive(Clone, Debug)]
pub(crate) struct Field {
    pub format: String,
    pub metadata: Vec<(String, String)>,
    pub children: Vec<Field>,
    pub dictionary: bool,
}

impl Field {
    pub(crate) fn new(format: &str) -> Self {
        Self {
            format: format.to_owned(),
            metadata: vec![],
            children: vec![],
            dictionary: false,
        }
    }
    pub(crate) fn child(mut self, c: Field) -> Self {
        self.children.push(c);
        self
    }
}

/// An array: lengths, buffers (None = NULL), children.
#[derive(Clone, Debug, Default)]
pub(crate) struct Array {
    pub length: i64,
    pub offset: i64,
    pub null_count: i64,
    pub buffers: Vec<Option<Vec<u8>>>,
    pub children: Vec<Array>,
}

impl Array {
    /// A primitive array over `values` (no validity bitmap).
    pub(crate) fn primitive(length: i64, values: Vec<u8>) -> Self {
        Self {
            length,
            buffers: vec![None, Some(values)],
            ..Self::default()
        }
    }
}

struct SchemaPrivate {
    _format: CString,
    _metadata: Option<Vec<u8>>,
    children: Vec<*mut CSchema>,
    dictionary: *mut CSchema,
    counts: Option<Arc<Releases>>,
}

unsafe extern "C" fn release_schema(s: *mut CSchema) {
    // SAFETY: a schema built by `schema` (or a consumer's moved copy), released once.
    unsafe {
        assert!((*s).release.is_some(), "release of a released schema");
        let private = Box::from_raw((*s).private_data.cast::<SchemaPrivate>());
        if let Some(c) = &private.counts {
            c.schema.fetch_add(1, Ordering::SeqCst);
            c.threads.lock().unwrap().push(std::thread::current().id());
        }
        for &child in &private.children {
            if let Some(r) = (*child).release {
                r(child);
            }
            drop(Box::from_raw(child));
        }
        if !private.dictionary.is_null() {
            if let Some(r) = (*private.dictionary).release {
                r(private.dictionary);
            }
            drop(Box::from_raw(private.dictionary));
        }
        drop(private);
        // Poison what a careless consumer might still read (arrow#47296).
        (*s).format = std::ptr::without_provenance::<c_char>(0x8);
        (*s).children = std::ptr::without_provenance_mut::<*mut CSchema>(0x10);
        (*s).n_children = 1 << 30;
        (*s).private_data = std::ptr::without_provenance_mut::<c_void>(0x18);
        (*s).release = None;
    }
}

fn encode(pairs: &[(String, String)]) -> Option<Vec<u8>> {
    if pairs.is_empty() {
        return None;
    }
    let mut out = (pairs.len() as i32).to_ne_bytes().to_vec();
    for (k, v) in pairs {
        for s in [k, v] {
            out.extend_from_slice(&(s.len() as i32).to_ne_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
    Some(out)
}

fn schema_inner(f: &Field, counts: Option<Arc<Releases>>) -> CSchema {
    let format = CString::new(f.format.clone()).unwrap();
    let metadata = encode(&f.metadata);
    let mut children: Vec<*mut CSchema> = f
        .children
        .iter()
        .map(|c| Box::into_raw(Box::new(schema_inner(c, None))))
        .collect();
    let dictionary = if f.dictionary {
        Box::into_raw(Box::new(schema_inner(&Field::new("u"), None)))
    } else {
        std::ptr::null_mut()
    };
    let s = CSchema {
        format: format.as_ptr(),
        name: std::ptr::null(),
        metadata: metadata
            .as_ref()
            .map_or(std::ptr::null(), |m| m.as_ptr().cast()),
        flags: 2,
        n_children: children.len() as i64,
        children: if children.is_empty() {
            std::ptr::null_mut()
        } else {
            children.as_mut_ptr()
        },
        dictionary,
        release: Some(release_schema),
        private_data: std::ptr::null_mut(),
    };
    let private = Box::new(SchemaPrivate {
        _format: format,
        _metadata: metadata,
        children,
        dictionary,
        counts,
    });
    CSchema {
        private_data: Box::into_raw(private).cast(),
        ..s
    }
}

/// A base schema whose release reports to `counts`.
pub(crate) fn schema(f: &Field, counts: &Arc<Releases>) -> Box<CSchema> {
    Box::new(schema_inner(f, Some(counts.clone())))
}

struct ArrayPrivate {
    _buffers: Vec<Option<Vec<u8>>>,
    _pointers: Vec<*const c_void>,
    children: Vec<*mut CArray>,
    counts: Option<Arc<Releases>>,
}

unsafe extern "C" fn release_array(a: *mut CArray) {
    // SAFETY: an array built by `array` (or a consumer's moved copy), released once.
    unsafe {
        assert!((*a).release.is_some(), "release of a released array");
        let private = Box::from_raw((*a).private_data.cast::<ArrayPrivate>());
        if let Some(c) = &private.counts {
            c.array.fetch_add(1, Ordering::SeqCst);
            c.threads.lock().unwrap().push(std::thread::current().id());
        }
        for &child in &private.children {
            if let Some(r) = (*child).release {
                r(child);
            }
            drop(Box::from_raw(child));
        }
        drop(private);
        (*a).buffers = std::ptr::without_provenance_mut::<*const c_void>(0x8);
        (*a).children = std::ptr::without_provenance_mut::<*mut CArray>(0x10);
        (*a).length = i64::MAX;
        (*a).private_data = std::ptr::without_provenance_mut::<c_void>(0x18);
        (*a).release = None;
    }
}

fn array_inner(a: &Array, counts: Option<Arc<Releases>>) -> CArray {
    let buffers = a.buffers.clone();
    let mut pointers: Vec<*const c_void> = buffers
        .iter()
        .map(|b| b.as_ref().map_or(std::ptr::null(), |b| b.as_ptr().cast()))
        .collect();
    let mut children: Vec<*mut CArray> = a
        .children
        .iter()
        .map(|c| Box::into_raw(Box::new(array_inner(c, None))))
        .collect();
    let out = CArray {
        length: a.length,
        null_count: a.null_count,
        offset: a.offset,
        n_buffers: pointers.len() as i64,
        n_children: children.len() as i64,
        buffers: if pointers.is_empty() {
            std::ptr::null_mut()
        } else {
            pointers.as_mut_ptr()
        },
        children: if children.is_empty() {
            std::ptr::null_mut()
        } else {
            children.as_mut_ptr()
        },
        dictionary: std::ptr::null_mut(),
        release: Some(release_array),
        private_data: std::ptr::null_mut(),
    };
    let private = Box::new(ArrayPrivate {
        _buffers: buffers,
        _pointers: pointers,
        children,
        counts,
    });
    CArray {
        private_data: Box::into_raw(private).cast(),
        ..out
    }
}

/// A base array whose release reports to `counts`.
pub(crate) fn array(a: &Array, counts: &Arc<Releases>) -> Box<CArray> {
    Box::new(array_inner(a, Some(counts.clone())))
}

// ------------------------------------------------------------------------------------------
// Streams
// ------------------------------------------------------------------------------------------

/// What a stream does.
pub(crate) struct StreamPlan {
    pub field: Field,
    /// Non-zero: get_schema fails with this code and leaves garbage in its output.
    pub schema_rc: c_int,
    pub chunks: VecDeque<Array>,
    /// After the chunks: fail get_next with this code (garbage output) instead of ending.
    pub fail_next: Option<c_int>,
}

struct StreamPrivate {
    plan: StreamPlan,
    counts: Arc<Releases>,
    error: CString,
}

unsafe extern "C" fn poison_schema(_: *mut CSchema) {
    panic!("a failed get_schema's output was released");
}

unsafe extern "C" fn poison_array(_: *mut CArray) {
    panic!("a failed get_next's output was released");
}

unsafe extern "C" fn get_schema(s: *mut CStream, out: *mut CSchema) -> c_int {
    // SAFETY: our stream, consumer storage.
    unsafe {
        let p = &mut *(*s).private_data.cast::<StreamPrivate>();
        if p.plan.schema_rc != 0 {
            (*out).release = Some(poison_schema);
            (*out).format = std::ptr::without_provenance::<c_char>(0x8);
            return p.plan.schema_rc;
        }
        out.write(schema_inner(&p.plan.field, Some(p.counts.clone())));
        0
    }
}

unsafe extern "C" fn get_next(s: *mut CStream, out: *mut CArray) -> c_int {
    // SAFETY: our stream, consumer storage.
    unsafe {
        let p = &mut *(*s).private_data.cast::<StreamPrivate>();
        match p.plan.chunks.pop_front() {
            Some(a) => {
                out.write(array_inner(&a, Some(p.counts.clone())));
                0
            }
            None => match p.plan.fail_next {
                Some(rc) => {
                    (*out).release = Some(poison_array);
                    rc
                }
                None => {
                    (*out).release = None;
                    0
                }
            },
        }
    }
}

unsafe extern "C" fn last_error(s: *mut CStream) -> *const c_char {
    // SAFETY: our stream.
    unsafe { (*(*s).private_data.cast::<StreamPrivate>()).error.as_ptr() }
}

unsafe extern "C" fn release_stream(s: *mut CStream) {
    // SAFETY: our stream, released once.
    unsafe {
        assert!((*s).release.is_some(), "release of a released stream");
        let p = Box::from_raw((*s).private_data.cast::<StreamPrivate>());
        p.counts.stream.fetch_add(1, Ordering::SeqCst);
        drop(p);
        (*s).private_data = std::ptr::without_provenance_mut::<c_void>(0x8);
        (*s).release = None;
    }
}

/// A stream following `plan`, reporting to `counts`.
pub(crate) fn stream(plan: StreamPlan, counts: &Arc<Releases>) -> Box<CStream> {
    let private = Box::new(StreamPrivate {
        plan,
        counts: counts.clone(),
        error: CString::new("the producer failed on purpose").unwrap(),
    });
    Box::new(CStream {
        get_schema: Some(get_schema),
        get_next: Some(get_next),
        get_last_error: Some(last_error),
        release: Some(release_stream),
        private_data: Box::into_raw(private).cast(),
    })
}
