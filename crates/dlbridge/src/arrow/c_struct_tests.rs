//! Round trips through the Arrow C structs: what dlbridge builds, it reads back.

use std::ffi::{c_char, c_int};
use std::ptr;
use std::sync::Arc;

use super::build::encode_metadata;
use super::stream::EINVAL;
use super::*;
use crate::device::{Device, DeviceType};
use crate::ffi::arrow::*;
use crate::layout::Layout;
use crate::tensor::Owner;
use std::sync::atomic::{AtomicUsize, Ordering};

fn spec_f32() -> SchemaSpec {
    SchemaSpec {
        format: "+w:2".into(),
        name: "".into(),
        metadata: vec![
            ("ARROW:extension:name".into(), "x.y".into()),
            ("k".into(), "".into()),
        ],
        flags: FLAG_NULLABLE,
        children: vec![SchemaSpec::new("f", "item", FLAG_NULLABLE)],
    }
}

#[test]
fn schema_round_trip_reads_everything_back() {
    let schema = spec_f32().export().unwrap();
    let v = schema.view();
    assert_eq!(v.format().unwrap(), "+w:2");
    assert_eq!(v.name(), Some(""));
    assert_eq!(v.flags(), FLAG_NULLABLE);
    assert_eq!(
        v.metadata().unwrap(),
        vec![
            (&b"ARROW:extension:name"[..], &b"x.y"[..]),
            (&b"k"[..], &b""[..])
        ]
    );
    assert_eq!(v.metadata_value("k").unwrap(), Some(&b""[..]));
    assert_eq!(v.metadata_value("zz").unwrap(), None);
    let children = v.children().unwrap();
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].format().unwrap(), "f");
    assert_eq!(children[0].name(), Some("item"));
    assert!(children[0].metadata().unwrap().is_empty());
    assert!(!v.has_dictionary());
}

#[test]
fn single_child_and_metadata_value_agree_with_the_full_readers() {
    let leaf = || SchemaSpec::new("f", "item", 0);
    for n in 0..3 {
        let spec = SchemaSpec {
            children: (0..n).map(|_| leaf()).collect(),
            metadata: vec![
                ("a".into(), "1".into()),
                ("b".into(), "2".into()),
                ("a".into(), "3".into()),
            ],
            ..SchemaSpec::new("+w:1", "", 0)
        };
        let schema = spec.export().unwrap();
        let v = schema.view();
        let all = v.children().unwrap();
        let single = v.single_child().unwrap();
        assert_eq!(single.is_some(), all.len() == 1);
        if let Some(child) = single {
            assert!(ptr::eq(child.0, all[0].0));
        }
        for key in ["a", "b", "c"] {
            let first = v
                .metadata()
                .unwrap()
                .into_iter()
                .find(|(k, _)| *k == key.as_bytes());
            assert_eq!(v.metadata_value(key).unwrap(), first.map(|(_, v)| v));
        }
        let values = ArraySpec {
            length: 1,
            buffers: vec![ptr::null()],
            children: (0..n)
                .map(|_| ArraySpec {
                    length: 1,
                    buffers: vec![ptr::null(), VALUES.as_ptr().cast()],
                    ..ArraySpec::default()
                })
                .collect(),
            ..ArraySpec::default()
        };
        let schema = Arc::new(schema);
        // SAFETY: the schema describes the array, whose buffers are NULL or `VALUES`.
        let data = unsafe { ArrowData::new(schema, values.export(Device::CPU)) };
        let root = data.root().unwrap();
        let nodes = root.children().unwrap();
        let single = root.single_child().unwrap();
        assert_eq!(single.is_some(), nodes.len() == 1);
        if let Some(child) = single {
            assert!(ptr::eq(child.array, nodes[0].array));
        }
    }
}

#[test]
fn metadata_encoding_is_the_spec_example() {
    let m = encode_metadata(&[("key1".into(), "value1".into())])
        .unwrap()
        .unwrap();
    let mut want = vec![];
    want.extend_from_slice(&1i32.to_ne_bytes());
    want.extend_from_slice(&4i32.to_ne_bytes());
    want.extend_from_slice(b"key1");
    want.extend_from_slice(&6i32.to_ne_bytes());
    want.extend_from_slice(b"value1");
    assert_eq!(&*m, &want[..]);
    assert!(encode_metadata(&[]).unwrap().is_none());
}

#[test]
fn move_marks_source_released_and_release_runs_once() {
    let mut storage = ArrowSchema::released();
    // SAFETY: `storage` is writable and holds no live schema.
    unsafe { spec_f32().export().unwrap().move_into(&mut storage) };
    assert!(!storage.is_released());
    // SAFETY: `storage` holds a live schema we may move.
    let owned = unsafe { OwnedSchema::take(&mut storage) }.unwrap();
    assert!(storage.is_released());
    // SAFETY: a released struct is refused, never read further.
    assert!(unsafe { OwnedSchema::take(&mut storage) }.is_err());
    // SAFETY: NULL is refused.
    assert!(unsafe { OwnedSchema::take(ptr::null_mut()) }.is_err());
    drop(owned);
}

#[test]
fn moved_out_child_outlives_its_parent() {
    // R7: a consumer moves a child out, then releases the parent at once.
    let parent = spec_f32().export().unwrap();
    let child_ptr = {
        // SAFETY: the parent is live and has one child.
        unsafe { *parent.0.children }
    };
    // SAFETY: the child is live; moving it out is allowed by R7.
    let child = unsafe { OwnedSchema::take(child_ptr) }.unwrap();
    drop(parent);
    assert_eq!(child.view().format().unwrap(), "f");
}

struct Counter(Arc<AtomicUsize>);
impl Drop for Counter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counted_array(drops: &Arc<AtomicUsize>, values: &'static [f32]) -> ArraySpec {
    let owner: Owner = Arc::new(Counter(drops.clone()));
    ArraySpec {
        length: values.len() as i64,
        buffers: vec![ptr::null(), values.as_ptr().cast()],
        owner: Some(owner),
        ..ArraySpec::default()
    }
}

static VALUES: [f32; 4] = [1.0, 2.0, 3.0, 4.0];

#[test]
fn array_release_drops_owner_once_and_device_move_zeroes_reserved() {
    let drops = Arc::new(AtomicUsize::new(0));
    // SAFETY: the buffers are NULL or the static `VALUES` (4 floats).
    let array = unsafe { counted_array(&drops, &VALUES).export(Device::CPU) };
    assert_eq!(array.device().unwrap(), Device::CPU);
    let mut storage = ArrowDeviceArray::released();
    storage.reserved = [7; 3];
    // SAFETY: `storage` is writable and holds no live array.
    unsafe { array.move_into_device(&mut storage) };
    assert_eq!((storage.device_type, storage.device_id), (1, -1));
    assert_eq!(storage.reserved, [0; 3]);
    assert!(storage.sync_event.is_null());
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    // SAFETY: `storage` holds a live device array.
    let owned = unsafe { OwnedArray::take_device(&mut storage) }.unwrap();
    assert!(storage.is_released());
    drop(owned);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn values_tensor_checks_every_reached_item() {
    let drops = Arc::new(AtomicUsize::new(0));
    let schema = Arc::new(SchemaSpec::new("f", "", 0).export().unwrap());
    let mut spec = counted_array(&drops, &VALUES);
    spec.offset = 1;
    spec.length = 3;
    // SAFETY: the schema describes the array, whose values are the static `VALUES`.
    let data = Arc::new(unsafe { ArrowData::new(schema, spec.export(Device::CPU)) });
    let root = data.root().unwrap();
    let owner: Owner = data.clone();
    // SAFETY: `owner` is the Arc holding the array (the same below).
    let t = unsafe {
        root.values_tensor(
            1,
            Layout::contiguous(&[3], 4).unwrap(),
            DType::FLOAT32,
            owner.clone(),
        )
    }
    .unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0]);
    assert!(t.is_readonly());
    let too_far = Layout::contiguous(&[4], 4).unwrap();
    // SAFETY: as above.
    assert!(unsafe { root.values_tensor(1, too_far, DType::FLOAT32, owner.clone()) }.is_err());
    let wrong_type = Layout::contiguous(&[2], 8).unwrap();
    // SAFETY: as above.
    assert!(unsafe { root.values_tensor(0, wrong_type, DType::FLOAT64, owner) }.is_err());
    assert_eq!(root.count_nulls(0, 3, 2).unwrap(), 0);
    drop(t);

    drop(data);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

static BITS: [u8; 2] = [0b1011_0101, 0b0000_0010];

#[test]
fn bools_unpack_and_nulls_count_from_bitmaps() {
    let schema = Arc::new(SchemaSpec::new("b", "", 0).export().unwrap());
    let spec = ArraySpec {
        length: 9,
        null_count: -1,
        offset: 1,
        buffers: vec![BITS.as_ptr().cast(), BITS.as_ptr().cast()],
        ..ArraySpec::default()
    };
    // SAFETY: the schema describes the array, whose buffers are the static `BITS` (bitmaps
    // of 10 bits).
    let data = unsafe { ArrowData::new(schema, spec.export(Device::CPU)) };
    let root = data.root().unwrap();
    let t = root
        .unpack_bools(1, Layout::contiguous(&[9], 1).unwrap())
        .unwrap();
    assert_eq!(t.dtype(), DType::BOOL);
    assert!(t.is_copied() && !t.is_readonly());
    assert_eq!(t.host_bytes().unwrap(), &[0, 1, 0, 1, 1, 0, 1, 0, 1]);
    // validity bits 1..10 of BITS: 0,1,0,1,1,0,1,0,1 -> 4 nulls
    assert_eq!(root.count_nulls(0, 9, 2).unwrap(), 4);
    assert_eq!(root.count_nulls(1, 1, 2).unwrap(), 0);
    assert!(root.count_nulls(5, 5, 2).is_err());
}

#[test]
fn stream_yields_schema_chunks_then_end() {
    let drops = Arc::new(AtomicUsize::new(0));
    let chunks = vec![
        counted_array(&drops, &VALUES),
        counted_array(&drops, &VALUES),
    ];
    let mut storage = ArrowArrayStream::released();
    // SAFETY: `storage` is writable; the chunks' buffers are the static `VALUES`.
    unsafe { export_stream(SchemaSpec::new("f", "", 0), chunks).move_into(&mut storage) };
    // SAFETY: a live stream.
    let mut stream = unsafe { OwnedStream::take(&mut storage) }.unwrap();
    assert_eq!(stream.schema().unwrap().view().format().unwrap(), "f");
    let first = stream.next_array().unwrap().unwrap();
    assert_eq!(first.length(), 4);
    drop(stream); // the unread chunk is released with the stream
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    drop(first); // results outlive the stream
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

#[test]
fn device_stream_yields_device_arrays_then_released_ones() {
    let drops = Arc::new(AtomicUsize::new(0));
    let device = Device::new(DeviceType::CUDA, 1);
    let chunks = vec![counted_array(&drops, &VALUES)];
    let mut storage = ArrowDeviceArrayStream::released();
    // SAFETY: `storage` is writable; the chunk's buffers are the static `VALUES` (never read:
    // the test only moves the array).
    unsafe {
        export_device_stream(SchemaSpec::new("f", "", 0), chunks, device).move_into(&mut storage)
    };
    // SAFETY: a live stream.
    let mut stream = unsafe { OwnedDeviceStream::take(&mut storage) }.unwrap();
    assert_eq!(stream.device_type(), DeviceType::CUDA);
    assert_eq!(stream.schema().unwrap().view().format().unwrap(), "f");
    let first = stream.next_array().unwrap().unwrap();
    assert_eq!(first.device().unwrap(), device);
    assert!(stream.next_array().unwrap().is_none());
    assert!(stream.next_array().unwrap().is_none());
    drop(stream);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(first);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

unsafe extern "C" fn failing_get_schema(_: *mut ArrowArrayStream, out: *mut ArrowSchema) -> c_int {
    // Leave garbage in `out` to prove the consumer never calls through it (C49).
    // SAFETY: `out` is the consumer's writable storage.
    unsafe {
        (*out).release = Some(panicking_release);
    }
    EINVAL
}
unsafe extern "C" fn panicking_release(_: *mut ArrowSchema) {
    std::process::abort();
}
unsafe extern "C" fn last_error(_: *mut ArrowArrayStream) -> *const c_char {
    c"unsupported format".as_ptr()
}
unsafe extern "C" fn count_release(stream: *mut ArrowArrayStream) {
    // SAFETY: the test's private data is a leaked AtomicUsize.
    unsafe {
        (*(*stream).private_data.cast::<AtomicUsize>()).fetch_add(1, Ordering::SeqCst);
        (*stream).release = None;
    }
}

#[test]
fn failed_callbacks_never_touch_the_output_and_report_the_error() {
    static RELEASES: AtomicUsize = AtomicUsize::new(0);
    let releases = &RELEASES;
    let mut raw = ArrowArrayStream {
        get_schema: Some(failing_get_schema),
        get_next: None,
        get_last_error: Some(last_error),
        release: Some(count_release),
        private_data: (releases as *const AtomicUsize).cast_mut().cast(),
    };
    // SAFETY: a live stream.
    let mut stream = unsafe { OwnedStream::take(&mut raw) }.unwrap();
    let err = stream.schema().unwrap_err().to_string();
    assert!(
        err.contains("unsupported format") && err.contains("22"),
        "{err}"
    );
    assert!(stream.next_array().is_err());
    drop(stream);
    assert_eq!(releases.load(Ordering::SeqCst), 1);
}
