//! Arrow C Data / C Device Data / C Stream importer.
//!
//! A producer builds a schema tree and an array tree from the fuzz input: formats (the ones
//! dlbridge reads, fixed-size lists with any size, others, non-UTF-8), names, metadata
//! (extension names, `arrow.fixed_shape_tensor` JSON — generated or raw — and blobs cut short
//! by a negative length), flags, children (counts that disagree between schema and array, NULL
//! children), dictionaries, lengths / offsets / null counts (small, negative, huge), buffer
//! counts, NULL buffers and validity bitmaps, device types. Every buffer a node has is
//! allocated to exactly the size its own format, offset and length imply (the producer's side
//! of the contract); non-host devices get unmapped addresses, so any host read of them
//! crashes. Release callbacks count their calls and free everything (private data, strings,
//! children, buffers), so any read after release is a use-after-free.
//!
//! Checked: no crash, panic or sanitizer report; each base struct (schema, array, stream) is
//! released exactly once, the array not before the zero-copy tensor over it is dropped;
//! refusals are BufferError-kind errors; an accepted tensor is read whole (a copy) without
//! leaving the producer's buffers; a stream whose callback fails has its garbage output
//! ignored (never released: C48/C49); requested-schema parsing and export re-import work.
#![no_main]

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arbitrary::{Arbitrary, Result as ArbResult, Unstructured};
use dlbridge::arrow::{
    concatenate, export as arrow_export, tensor_from_arrow, ExportOptions,
};
use dlbridge::arrow::{ArrowData, OwnedArray, OwnedSchema, OwnedStream, SchemaView};
use dlbridge::ffi::arrow::{ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowSchema};
use dlbridge::{DType, DeviceType, ErrorKind, Order, Tensor};
use libfuzzer_sys::fuzz_target;

// ------------------------------------------------------------------------------------------
// Producer-side mirrors of the C structs (a foreign producer's view of abi.h).
// ------------------------------------------------------------------------------------------

#[repr(C)]
struct CSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut CSchema,
    dictionary: *mut CSchema,
    release: Option<unsafe extern "C" fn(*mut CSchema)>,
    private_data: *mut c_void,
}

#[repr(C)]
struct CArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut CArray,
    dictionary: *mut CArray,
    release: Option<unsafe extern "C" fn(*mut CArray)>,
    private_data: *mut c_void,
}

#[repr(C)]
struct CDeviceArray {
    array: CArray,
    device_id: i64,
    device_type: i32,
    sync_event: *mut c_void,
    reserved: [i64; 3],
}

#[repr(C)]
struct CStream {
    get_schema: Option<unsafe extern "C" fn(*mut CStream, *mut CSchema) -> c_int>,
    get_next: Option<unsafe extern "C" fn(*mut CStream, *mut CArray) -> c_int>,
    get_last_error: Option<unsafe extern "C" fn(*mut CStream) -> *const c_char>,
    release: Option<unsafe extern "C" fn(*mut CStream)>,
    private_data: *mut c_void,
}

const _: () = {
    use std::mem::size_of;
    assert!(size_of::<CSchema>() == size_of::<ArrowSchema>());
    assert!(size_of::<CArray>() == size_of::<ArrowArray>());
    assert!(size_of::<CDeviceArray>() == size_of::<ArrowDeviceArray>());
    assert!(size_of::<CStream>() == size_of::<ArrowArrayStream>());
};

static SCHEMA_BASE_RELEASES: AtomicUsize = AtomicUsize::new(0);
static ARRAY_BASE_RELEASES: AtomicUsize = AtomicUsize::new(0);
static ARRAYS_MADE: AtomicUsize = AtomicUsize::new(0);
static STREAM_RELEASES: AtomicUsize = AtomicUsize::new(0);
static POISON_CALLS: AtomicUsize = AtomicUsize::new(0);
static CHUNKS_HANDED: AtomicUsize = AtomicUsize::new(0);

// ------------------------------------------------------------------------------------------
// The fuzz input: a field tree and a matching (or not) array tree.
// ------------------------------------------------------------------------------------------

#[derive(Debug)]
enum Format {
    Known(&'static str),
    List(i64),
    Raw(String),
    NonUtf8,
}

#[derive(Debug)]
enum Value {
    Text(&'static str),
    Json(String),
    Raw(Vec<u8>),
}

#[derive(Debug)]
struct Field {
    format: Format,
    name: Option<String>,
    metadata: Vec<(String, Value)>,
    metadata_cut: Option<usize>,
    flags: i64,
    children: Vec<Field>,
    dictionary: bool,
    null_children_ptr: bool,
}

#[derive(Debug)]
struct Array {
    length: i64,
    offset: i64,
    null_count: i64,
    n_buffers: Option<i64>,
    null_buffers: u8,
    buffers_ptr_null: bool,
    fill: u8,
    children: Vec<Array>,
    null_child: bool,
    n_children_bogus: Option<i64>,
    dictionary: bool,
}

const FORMATS: &[&str] = &[
    "b", "c", "C", "s", "S", "i", "I", "l", "L", "e", "f", "g", "f", "g", "i", "+l", "+L", "+s",
    "u", "z", "n", "tsu:", "d:10,2", "", "w:4", "+w:", "+w:x", "+w:-3",
];

fn small_len(u: &mut Unstructured<'_>) -> ArbResult<i64> {
    Ok(match u.int_in_range(0u8..=31)? {
        0 => *u.choose(&[
            -1i64,
            i64::MIN,
            i64::MAX,
            1 << 40,
            1 << 62,
            i64::MAX - 3,
            1 << 31,
        ])?,
        1 => i64::arbitrary(u)?,
        _ => i64::from(u.int_in_range(0u8..=12)?),
    })
}

fn json(u: &mut Unstructured<'_>) -> ArbResult<String> {
    let ndim = u.int_in_range(0usize..=4)?;
    let mut shape = vec![];
    for _ in 0..ndim {
        shape.push(if u.ratio(1u8, 16)? {
            i64::arbitrary(u)?
        } else {
            i64::from(u.int_in_range(0u8..=4)?)
        });
    }
    let mut s = format!("{{\"shape\":{shape:?}");
    if u.arbitrary()? {
        let mut perm: Vec<usize> = (0..ndim).collect();
        if u.ratio(1u8, 4)? && ndim > 0 {
            perm[0] = u.int_in_range(0usize..=ndim)?; // maybe invalid
        } else {
            for i in (1..ndim).rev() {
                let j = u.int_in_range(0..=i)?;
                perm.swap(i, j);
            }
        }
        s.push_str(&format!(",\"permutation\":{perm:?}"));
    }
    if u.arbitrary()? {
        let n = if u.ratio(1u8, 4)? { ndim + 1 } else { ndim };
        let names: Vec<String> = (0..n).map(|i| format!("d{i}")).collect();
        s.push_str(&format!(",\"dim_names\":{names:?}"));
    }
    if u.ratio(1u8, 8)? {
        s.push_str(",\"shape\":\"oops\"");
    }
    s.push('}');
    Ok(s)
}

/// A field and an array for it (children of both generated together, counts occasionally
/// disagreeing).
fn node(u: &mut Unstructured<'_>, depth: usize) -> ArbResult<(Field, Array)> {
    let format = match u.int_in_range(0u8..=15)? {
        0..=6 => Format::Known(u.choose(FORMATS)?),
        7..=11 if depth < 4 => Format::List(if u.ratio(1u8, 10)? {
            // Any size, products overflowing i64 included (finding F5, fixed).
            i64::arbitrary(u)?
        } else {
            i64::from(u.int_in_range(0u8..=6)?)
        }),
        12 => Format::Raw(String::arbitrary(u)?),
        13 => Format::NonUtf8,
        _ => Format::Known(u.choose(&["f", "i", "g", "c", "b"])?),
    };
    let is_list = matches!(format, Format::List(_));
    let mut metadata = vec![];
    let n_meta = if u.ratio(1u8, 3)? {
        u.int_in_range(0usize..=3)?
    } else {
        0
    };
    for _ in 0..n_meta {
        let key = match u.int_in_range(0u8..=3)? {
            0 | 1 => "ARROW:extension:name".to_owned(),
            2 => "ARROW:extension:metadata".to_owned(),
            _ => String::arbitrary(u)?,
        };
        let value = match u.int_in_range(0u8..=5)? {
            0 => Value::Text("arrow.fixed_shape_tensor"),
            1 => Value::Text("arrow.bool8"),
            2 | 3 => Value::Json(json(u)?),
            4 => Value::Text("some.other.extension"),
            _ => Value::Raw(Vec::arbitrary(u)?),
        };
        metadata.push((key, value));
    }
    let metadata_cut = if u.ratio(1u8, 16)? {
        Some(u.int_in_range(0usize..=n_meta)?)
    } else {
        None
    };
    let n_children = if is_list && !u.ratio(1u8, 10)? {
        1
    } else if depth < 4 && u.ratio(1u8, 12)? {
        u.int_in_range(0usize..=2)?
    } else {
        0
    };
    let mut fields = vec![];
    let mut arrays = vec![];
    for _ in 0..n_children {
        let (f, a) = node(u, depth + 1)?;
        fields.push(f);
        arrays.push(a);
    }
    // Occasionally an array with a different number of children than its field.
    if depth < 4 && u.ratio(1u8, 16)? {
        if arrays.is_empty() || u.arbitrary()? {
            arrays.push(node(u, 4)?.1);
        } else {
            arrays.pop();
        }
    }
    let field = Field {
        format,
        name: if u.arbitrary()? {
            Some(String::arbitrary(u)?)
        } else {
            None
        },
        metadata,
        metadata_cut,
        flags: if u.ratio(1u8, 8)? {
            i64::arbitrary(u)?
        } else {
            2
        },
        children: fields,
        dictionary: u.ratio(1u8, 24)?,
        null_children_ptr: u.ratio(1u8, 32)?,
    };
    let array = Array {
        length: small_len(u)?,
        offset: if u.ratio(1u8, 3)? { small_len(u)? } else { 0 },
        null_count: match u.int_in_range(0u8..=7)? {
            0 => -1,
            1 => i64::from(u.int_in_range(1u8..=5)?),
            2 => i64::arbitrary(u)?,
            _ => 0,
        },
        n_buffers: if u.ratio(1u8, 12)? {
            Some(if u.arbitrary()? {
                i64::from(u.int_in_range(0u8..=4)?)
            } else {
                *u.choose(&[-1i64, i64::MIN, (1 << 20) + 1, i64::MAX])?
            })
        } else {
            None
        },
        null_buffers: if u.ratio(1u8, 6)? { u.arbitrary()? } else { 0 },
        buffers_ptr_null: u.ratio(1u8, 32)?,
        fill: u.arbitrary()?,
        children: arrays,
        null_child: u.ratio(1u8, 32)?,
        n_children_bogus: if u.ratio(1u8, 32)? {
            Some(*u.choose(&[-1i64, i64::MIN, (1 << 20) + 1])?)
        } else {
            None
        },
        dictionary: u.ratio(1u8, 24)?,
    };
    Ok((field, array))
}

#[derive(Debug)]
enum Mode {
    Array { device_type: i32, device_id: i64 },
    Stream(StreamPlan),
}

#[derive(Debug)]
struct StreamPlan {
    schema_rc: c_int,
    /// Chunks before the end (or before a failing get_next).
    chunks: Vec<Array>,
    fail_next: Option<c_int>,
    last_error: bool,
}

#[derive(Debug)]
struct Input {
    field: Field,
    array: Array,
    mode: Mode,
    copy: Option<bool>,
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> ArbResult<Self> {
        let (field, array) = node(u, 0)?;
        let mode = if u.ratio(1u8, 4)? {
            let mut chunks = vec![];
            for _ in 0..u.int_in_range(0usize..=3)? {
                chunks.push(reshape_like(u, &array)?);
            }
            Mode::Stream(StreamPlan {
                schema_rc: if u.ratio(1u8, 8)? {
                    *u.choose(&[5, 22, -1])?
                } else {
                    0
                },
                chunks,
                fail_next: if u.ratio(1u8, 8)? {
                    Some(*u.choose(&[5, 22, 12])?)
                } else {
                    None
                },
                last_error: u.arbitrary()?,
            })
        } else {
            let device_type = match u.int_in_range(0u8..=9)? {
                0 => 2,
                1 => 14,
                2 => 13,
                3 => 3,
                4 => i32::arbitrary(u)?,
                _ => 1,
            };
            let device_id = match u.int_in_range(0u8..=5)? {
                0 => i64::arbitrary(u)?,
                1 => 0,
                2 => 1,
                _ => -1,
            };
            Mode::Array {
                device_type,
                device_id,
            }
        };
        let copy = match u.int_in_range(0u8..=3)? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        };
        Ok(Input {
            field,
            array,
            mode,
            copy,
        })
    }
}

/// Another chunk for the same field: same tree, new lengths / offsets / nulls.
fn reshape_like(u: &mut Unstructured<'_>, a: &Array) -> ArbResult<Array> {
    let mut children = vec![];
    for c in &a.children {
        children.push(reshape_like(u, c)?);
    }
    // Chunk lengths whose sum overflows i64 included (finding F6, fixed).
    let length = small_len(u)?;
    Ok(Array {
        length,
        offset: if u.ratio(1u8, 3)? { small_len(u)? } else { 0 },
        null_count: if u.ratio(1u8, 6)? { -1 } else { 0 },
        n_buffers: a.n_buffers,
        null_buffers: a.null_buffers,
        buffers_ptr_null: a.buffers_ptr_null,
        fill: u.arbitrary()?,
        children,
        null_child: a.null_child,
        n_children_bogus: a.n_children_bogus,
        dictionary: a.dictionary,
    })
}

// ------------------------------------------------------------------------------------------
// Building the C structs.
// ------------------------------------------------------------------------------------------

struct SchemaPrivate {
    _format: Vec<u8>,
    _name: Option<CString>,
    _metadata: Option<Box<[u8]>>,
    children: Box<[*mut CSchema]>,
    dictionary: *mut CSchema,
    base: bool,
}

unsafe extern "C" fn release_schema(s: *mut CSchema) {
    // SAFETY: called on a schema built by `build_schema` (or dlbridge's moved copy of one).
    unsafe {
        let private = (*s).private_data.cast::<SchemaPrivate>();
        if (*private).base {
            SCHEMA_BASE_RELEASES.fetch_add(1, Ordering::SeqCst);
        }
        assert!(
            (*s).release.is_some(),
            "release called on a released schema"
        );
        let private = Box::from_raw(private);
        for &child in private.children.iter() {
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
        (*s).release = None;
        (*s).private_data = std::ptr::null_mut();
    }
}

fn format_bytes(f: &Format) -> Vec<u8> {
    let mut v = match f {
        Format::Known(s) => s.as_bytes().to_vec(),
        Format::List(n) => format!("+w:{n}").into_bytes(),
        Format::Raw(s) => s.replace('\0', "").into_bytes(),
        Format::NonUtf8 => vec![0xff, b'f', 0xc0],
    };
    v.push(0);
    v
}

fn encode_metadata(pairs: &[(String, Value)], cut: Option<usize>) -> Option<Box<[u8]>> {
    if pairs.is_empty() && cut.is_none() {
        return None;
    }
    let mut out = Vec::new();
    out.extend_from_slice(&(pairs.len() as i32).to_ne_bytes());
    for (i, (k, v)) in pairs.iter().enumerate() {
        if cut == Some(i) {
            out.extend_from_slice(&(-7i32).to_ne_bytes());
            return Some(out.into_boxed_slice());
        }
        let v: &[u8] = match v {
            Value::Text(t) => t.as_bytes(),
            Value::Json(j) => j.as_bytes(),
            Value::Raw(r) => r,
        };
        for s in [k.as_bytes(), v] {
            out.extend_from_slice(&(s.len() as i32).to_ne_bytes());
            out.extend_from_slice(s);
        }
    }
    if cut == Some(pairs.len()) {
        // A blob that promises one more pair than it has, cut by a negative length.
        let n = pairs.len() as i32 + 1;
        out[..4].copy_from_slice(&n.to_ne_bytes());
        out.extend_from_slice(&(-1i32).to_ne_bytes());
    }
    Some(out.into_boxed_slice())
}

fn build_schema(f: &Field, base: bool) -> CSchema {
    let format = format_bytes(&f.format);
    let name = f
        .name
        .as_ref()
        .map(|n| CString::new(n.replace('\0', "")).unwrap());
    let metadata = encode_metadata(&f.metadata, f.metadata_cut);
    let mut children: Box<[*mut CSchema]> = f
        .children
        .iter()
        .map(|c| Box::into_raw(Box::new(build_schema(c, false))))
        .collect();
    let dictionary = if f.dictionary {
        Box::into_raw(Box::new(build_schema(
            &Field {
                format: Format::Known("u"),
                name: None,
                metadata: vec![],
                metadata_cut: None,
                flags: 0,
                children: vec![],
                dictionary: false,
                null_children_ptr: false,
            },
            false,
        )))
    } else {
        std::ptr::null_mut()
    };
    let children_ptr = if children.is_empty() || f.null_children_ptr {
        std::ptr::null_mut()
    } else {
        children.as_mut_ptr()
    };
    let n_children = children.len() as i64;
    let private = Box::new(SchemaPrivate {
        _format: format,
        _name: name,
        _metadata: metadata,
        children,
        dictionary,
        base,
    });
    CSchema {
        format: private._format.as_ptr().cast(),
        name: private
            ._name
            .as_ref()
            .map_or(std::ptr::null(), |n| n.as_ptr()),
        metadata: private
            ._metadata
            .as_ref()
            .map_or(std::ptr::null(), |m| m.as_ptr().cast()),
        flags: f.flags,
        n_children,
        children: children_ptr,
        dictionary,
        release: Some(release_schema),
        private_data: Box::into_raw(private).cast(),
    }
}

struct ArrayPrivate {
    _pointers: Box<[*const c_void]>,
    _storage: Vec<Box<[u8]>>,
    children: Box<[*mut CArray]>,
    dictionary: *mut CArray,
    base: bool,
}

unsafe extern "C" fn release_array(a: *mut CArray) {
    // SAFETY: called on an array built by `build_array` (or dlbridge's moved copy of one).
    unsafe {
        let private = (*a).private_data.cast::<ArrayPrivate>();
        if (*private).base {
            ARRAY_BASE_RELEASES.fetch_add(1, Ordering::SeqCst);
        }
        assert!((*a).release.is_some(), "release called on a released array");
        let private = Box::from_raw(private);
        for &child in private.children.iter() {
            if child.is_null() {
                continue;
            }
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
        (*a).release = None;
        (*a).private_data = std::ptr::null_mut();
    }
}

/// Bits per item of the formats dlbridge reads in place (others: none), from the format
/// string exactly as the schema carries it.
fn bits_of(f: &Format) -> Option<usize> {
    let bytes = format_bytes(f);
    Some(match &bytes[..bytes.len() - 1] {
        b"b" => 1,
        b"c" | b"C" => 8,
        b"s" | b"S" | b"e" => 16,
        b"i" | b"I" | b"f" => 32,
        b"l" | b"L" | b"g" => 64,
        _ => return None,
    })
}

/// Address of the `k`-th fake device buffer: unmapped, so a host read faults.
fn device_address(k: usize) -> *const c_void {
    (0x7e00_0000_0000usize + k * 0x10_0000) as *const c_void
}

/// `field` is the schema node the array is paired with (None where the trees disagree).
fn build_array(a: &Array, field: Option<&Field>, host: bool, base: bool) -> CArray {
    ARRAYS_MADE.fetch_add(1, Ordering::SeqCst);
    let is_list = field.is_some_and(|f| format_bytes(&f.format).starts_with(b"+w:"));
    let natural = if is_list { 1 } else { 2 };
    let n_buffers = a.n_buffers.unwrap_or(natural);
    let bits = field.and_then(|f| bits_of(&f.format));
    // A huge but well-formed bit-packed boolean array is a legitimate (huge) copy for the
    // importer, which a real producer would back with a real buffer: keep those small. (With
    // a NULL values buffer, dlbridge allocates the copy before noticing: see
    // docs/reliability.md, finding F2.)
    let (length, offset) = match (a.length, a.offset) {
        (l, o) if bits == Some(1) && l >= 0 && o >= 0 && l.checked_add(o).is_some() => {
            (l % 4096, o % 4096)
        }
        other => other,
    };
    // Items the buffers must hold: offset + length, when both are sane and small.
    let units = (offset >= 0 && length >= 0)
        .then(|| offset.checked_add(length))
        .flatten()
        .filter(|u| *u <= 1 << 16)
        .map(|u| u as usize);
    let mut storage = vec![];
    let mut pointers = vec![];
    let allocatable = usize::try_from(n_buffers).ok().filter(|n| *n <= 8);
    for i in 0..allocatable.unwrap_or(0) {
        let null = a.null_buffers & (1 << i) != 0;
        let bytes = match (i, units) {
            (_, None) => None,
            (0, Some(u)) => Some(u.div_ceil(8)),
            (1, Some(u)) => Some(bits.map_or(8, |b| (u * b).div_ceil(8))),
            _ => Some(8),
        };
        match bytes {
            Some(n) if !null => {
                if host {
                    let buf: Box<[u8]> = (0..n.max(1))
                        .map(|j| (j as u8).wrapping_mul(a.fill).wrapping_add(a.fill >> 3))
                        .collect();
                    pointers.push(buf.as_ptr().cast());
                    storage.push(buf);
                } else {
                    pointers.push(device_address(i));
                }
            }
            _ => pointers.push(std::ptr::null()),
        }
    }
    let mut pointers = pointers.into_boxed_slice();
    let field_children: &[Field] = field.map_or(&[], |f| &f.children);
    let mut children: Box<[*mut CArray]> = a
        .children
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if a.null_child && i == 0 {
                std::ptr::null_mut()
            } else {
                Box::into_raw(Box::new(build_array(c, field_children.get(i), host, false)))
            }
        })
        .collect();
    let dictionary = if a.dictionary {
        Box::into_raw(Box::new(build_array(
            &Array {
                length: 0,
                offset: 0,
                null_count: 0,
                n_buffers: Some(3),
                null_buffers: 0,
                buffers_ptr_null: false,
                fill: 0,
                children: vec![],
                null_child: false,
                n_children_bogus: None,
                dictionary: false,
            },
            None,
            host,
            false,
        )))
    } else {
        std::ptr::null_mut()
    };
    let n_children = a.n_children_bogus.unwrap_or(children.len() as i64);
    let private = Box::new(ArrayPrivate {
        _pointers: Box::new([]),
        _storage: storage,
        children: Box::new([]),
        dictionary,
        base,
    });
    let buffers_ptr = if pointers.is_empty() || a.buffers_ptr_null || allocatable.is_none() {
        std::ptr::null_mut()
    } else {
        pointers.as_mut_ptr()
    };
    let children_ptr = if children.is_empty() || a.n_children_bogus.is_some() {
        std::ptr::null_mut()
    } else {
        children.as_mut_ptr()
    };
    let mut private = private;
    private._pointers = pointers;
    private.children = children;
    CArray {
        length,
        null_count: a.null_count,
        offset,
        n_buffers,
        n_children,
        buffers: buffers_ptr,
        children: children_ptr,
        dictionary,
        release: Some(release_array),
        private_data: Box::into_raw(private).cast(),
    }
}

// ------------------------------------------------------------------------------------------
// A stream producer.
// ------------------------------------------------------------------------------------------

struct StreamPrivate {
    field: *const Field,
    schema_rc: c_int,
    chunks: VecDeque<*const Array>,
    fail_next: Option<c_int>,
    last_error: Option<CString>,
}

unsafe extern "C" fn poison_schema_release(_: *mut CSchema) {
    POISON_CALLS.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn poison_array_release(_: *mut CArray) {
    POISON_CALLS.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn stream_get_schema(s: *mut CStream, out: *mut CSchema) -> c_int {
    // SAFETY: our own stream; `out` is consumer storage.
    unsafe {
        let p = &mut *(*s).private_data.cast::<StreamPrivate>();
        if p.schema_rc != 0 {
            // Garbage in the output on failure: the consumer must not touch it (C49).
            (*out).release = Some(poison_schema_release);
            (*out).format = 0x10 as *const c_char;
            return p.schema_rc;
        }
        out.write(build_schema(&*p.field, true));
        0
    }
}

unsafe extern "C" fn stream_get_next(s: *mut CStream, out: *mut CArray) -> c_int {
    // SAFETY: our own stream; `out` is consumer storage.
    unsafe {
        let p = &mut *(*s).private_data.cast::<StreamPrivate>();
        match p.chunks.pop_front() {
            Some(a) => {
                out.write(build_array(&*a, Some(&*p.field), true, true));
                CHUNKS_HANDED.fetch_add(1, Ordering::SeqCst);
                0
            }
            None => match p.fail_next {
                Some(rc) => {
                    (*out).release = Some(poison_array_release);
                    (*out).length = 99;
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

unsafe extern "C" fn stream_last_error(s: *mut CStream) -> *const c_char {
    // SAFETY: our own stream.
    unsafe {
        let p = &*(*s).private_data.cast::<StreamPrivate>();
        p.last_error
            .as_ref()
            .map_or(std::ptr::null(), |e| e.as_ptr())
    }
}

unsafe extern "C" fn stream_release(s: *mut CStream) {
    STREAM_RELEASES.fetch_add(1, Ordering::SeqCst);
    // SAFETY: our own stream, released once.
    unsafe {
        assert!(
            (*s).release.is_some(),
            "release called on a released stream"
        );
        drop(Box::from_raw((*s).private_data.cast::<StreamPrivate>()));
        (*s).release = None;
    }
}

// ------------------------------------------------------------------------------------------
// The target.
// ------------------------------------------------------------------------------------------

fn reset() {
    for c in [
        &SCHEMA_BASE_RELEASES,
        &ARRAY_BASE_RELEASES,
        &ARRAYS_MADE,
        &STREAM_RELEASES,
        &POISON_CALLS,
        &CHUNKS_HANDED,
    ] {
        c.store(0, Ordering::SeqCst);
    }
}

fn check_tensor(t: &Tensor) {
    assert!(t.shape().iter().all(|n| *n >= 0));
    let _ = format!("{t:?}");
    if t.device().is_host_accessible() {
        // Reads every element: must stay inside the producer's buffers (ASan).
        let c = t.copy(Order::C).expect("copy of an imported host tensor");
        assert_eq!(c.host_bytes().unwrap().len(), t.nbytes());
        if t.dtype() == DType::FLOAT64 {
            let _ = t.to_vec::<f64>();
        }
    }
}

fn check_err(e: &dlbridge::Error) {
    assert_eq!(e.kind(), ErrorKind::Buffer, "{e}");
    let _ = e.to_string();
}

fn requested_schema_paths(view: SchemaView<'_>) {
    let _ = view.metadata();
    let _ = view.children();
    let _ = view.name();
    for tensor in [
        Tensor::zeros(DType::BOOL, &[2, 3]).unwrap(),
        Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap(),
    ] {
        if let Ok(options) = ExportOptions::for_request(&tensor, view) {
            let exported = arrow_export(&tensor, &options).expect("export with options");
            let schema = Arc::new(exported.schema.export().unwrap());
            // SAFETY: `arrow_export` built the array over the tensor's memory on `exported.device`,
            // as its schema describes, kept alive by the owner the array carries.
            let array = unsafe { exported.array.export(exported.device) };
            // SAFETY: exported together.
            let data = unsafe { ArrowData::new(schema, array) };
            let back = tensor_from_arrow(data, None).expect("re-import");
            assert_eq!(back.shape(), tensor.shape());
        }
    }
}

fuzz_target!(|input: Input| {
    reset();
    match &input.mode {
        Mode::Array {
            device_type,
            device_id,
        } => run_array(&input, *device_type, *device_id),
        Mode::Stream(plan) => run_stream(&input, plan),
    }
    assert_eq!(
        POISON_CALLS.load(Ordering::SeqCst),
        0,
        "released a failed callback's output"
    );
});

fn run_array(input: &Input, device_type: i32, device_id: i64) {
    let host = device_type > 0 && DeviceType(device_type).is_host_accessible();
    let mut schema = Box::new(build_schema(&input.field, true));
    // The requested-schema path borrows a live schema without taking it.
    // SAFETY: `schema` is live and unreleased for this call.
    requested_schema_paths(
        unsafe { SchemaView::borrow((&*schema as *const CSchema).cast()) }.expect("live schema"),
    );
    let device = device_type != 1 || device_id != -1;
    let mut array = Box::new(CDeviceArray {
        array: build_array(&input.array, Some(&input.field), host, true),
        device_id,
        device_type,
        sync_event: std::ptr::null_mut(),
        reserved: [0; 3],
    });
    // SAFETY: both are valid, movable structs (mirrors of the dlbridge ones).
    let owned_schema =
        unsafe { OwnedSchema::take((&mut *schema as *mut CSchema).cast()) }.expect("take");
    assert!(
        schema.release.is_none(),
        "move did not mark the source released"
    );
    let owned_array = unsafe {
        if device {
            OwnedArray::take_device((&mut *array as *mut CDeviceArray).cast())
        } else {
            OwnedArray::take((&mut array.array as *mut CArray).cast())
        }
    }
    .expect("take");
    assert!(array.array.release.is_none());
    // SAFETY: the schema describes the array (the producer built them together).
    let data = unsafe { ArrowData::new(Arc::new(owned_schema), owned_array) };
    match tensor_from_arrow(data, input.copy) {
        Ok(t) => {
            if !t.is_copied() {
                assert_eq!(t.device().kind.0, device_type);
                assert!(t.is_readonly(), "Arrow data is immutable");
                assert_eq!(
                    ARRAY_BASE_RELEASES.load(Ordering::SeqCst),
                    0,
                    "released in use"
                );
            } else {
                assert_ne!(input.copy, Some(false), "copied under copy=False");
            }
            check_tensor(&t);
            let again = t.clone();
            drop(t);
            check_tensor(&again);
        }
        Err(e) => check_err(&e),
    }
    assert_eq!(
        SCHEMA_BASE_RELEASES.load(Ordering::SeqCst),
        1,
        "schema releases"
    );
    assert_eq!(
        ARRAY_BASE_RELEASES.load(Ordering::SeqCst),
        1,
        "array releases"
    );
}

fn run_stream(input: &Input, plan: &StreamPlan) {
    let mut chunks: VecDeque<*const Array> = VecDeque::new();
    chunks.push_back(&input.array);
    chunks.extend(plan.chunks.iter().map(|c| c as *const Array));
    let n_chunks = chunks.len();
    let private = Box::new(StreamPrivate {
        field: &input.field,
        schema_rc: plan.schema_rc,
        chunks,
        fail_next: plan.fail_next,
        last_error: plan
            .last_error
            .then(|| CString::new("producer says no").unwrap()),
    });
    let mut raw = Box::new(CStream {
        get_schema: Some(stream_get_schema),
        get_next: Some(stream_get_next),
        get_last_error: Some(stream_last_error),
        release: Some(stream_release),
        private_data: Box::into_raw(private).cast(),
    });
    // SAFETY: a valid stream we may move.
    let mut stream =
        unsafe { OwnedStream::take((&mut *raw as *mut CStream).cast()) }.expect("take");
    assert!(raw.release.is_none());
    // What dlbridge's Python stream import does.
    let result = (|| -> dlbridge::Result<Tensor> {
        let schema = Arc::new(stream.schema()?);
        let mut tensors = vec![];
        while let Some(array) = stream.next_array()? {
            // SAFETY: every chunk of the stream is described by its schema.
            let data = unsafe { ArrowData::new(schema.clone(), array) };
            tensors.push(tensor_from_arrow(data, input.copy)?);
        }
        concatenate(schema.view(), tensors, input.copy)
    })();
    drop(stream);
    assert_eq!(STREAM_RELEASES.load(Ordering::SeqCst), 1, "stream releases");
    match result {
        Ok(t) => {
            assert_eq!(plan.schema_rc, 0);
            assert!(plan.fail_next.is_none(), "a failed get_next was ignored");
            check_tensor(&t);
            let _ = n_chunks;
            drop(t);
        }
        Err(e) => check_err(&e),
    }
    assert_eq!(
        ARRAY_BASE_RELEASES.load(Ordering::SeqCst),
        CHUNKS_HANDED.load(Ordering::SeqCst),
        "chunk releases"
    );
    assert_eq!(
        SCHEMA_BASE_RELEASES.load(Ordering::SeqCst),
        usize::from(plan.schema_rc == 0),
        "schema releases"
    );
}
