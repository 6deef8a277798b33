//! Exact lifetimes: a producer's deleter (DLPack) or release (Arrow) runs exactly once — on
//! success, on every failure path, for tensors never imported, for NULL-data and zero-size
//! tensors, and when the last user is dropped on another thread — and never while the memory
//! is in use. The producers here free everything in their deleter / release and poison what
//! they free, so a late read crashes or shows under valgrind (docs/reliability.md).

mod common;

use std::sync::{Arc, Barrier};

use common::arrow::{self as ca, Array, Field, Releases, StreamPlan};
use common::{Counter, Data, Spec, make, make_raw};
use dlbridge::arrow::{ArrowData, OwnedArray, OwnedSchema, OwnedStream};
use dlbridge::arrow::{concatenate, tensor_from_arrow};
use dlbridge::{ErrorKind, Flavor, Order, Tensor};

// ------------------------------------------------------------------------------------------
// DLPack
// ------------------------------------------------------------------------------------------

#[test]
fn success_deletes_once_at_the_last_drop() {
    for spec in [Spec::f32(&[3, 4]), Spec::f32(&[3, 4]).legacy()] {
        let counter = Counter::new();
        let t = Tensor::from_managed(make(&spec, &counter)).unwrap();
        assert_eq!(t.shape(), &[3, 4]);
        let clone = t.clone();
        drop(t);
        assert_eq!(counter.calls(), 0);
        assert_eq!(clone.to_vec::<f32>().unwrap().len(), 12);
        drop(clone);
        assert_eq!(counter.calls(), 1);
    }
}

#[test]
fn reexports_keep_the_producer_alive_until_the_last_one_is_gone() {
    let counter = Counter::new();
    let t = Tensor::from_managed(make(&Spec::f32(&[2, 5]), &counter)).unwrap();
    let versioned = t.export(Flavor::Versioned { minor: 3 }).unwrap();
    let copy = t.copy(Order::F).unwrap();
    let back = Tensor::from_managed(t.export(Flavor::Versioned { minor: 0 }).unwrap()).unwrap();
    let again = back.export(Flavor::Versioned { minor: 2 }).unwrap();
    drop(t);
    drop(back);
    assert_eq!(counter.calls(), 0);
    drop(versioned);
    assert_eq!(counter.calls(), 0);
    let last = Tensor::from_managed(again).unwrap();
    assert_eq!(last.to_vec::<f32>().unwrap(), copy.to_vec::<f32>().unwrap());
    drop(last);
    assert_eq!(counter.calls(), 1);
    drop(copy); // a copy does not hold the producer
    assert_eq!(counter.calls(), 1);
}

/// Every way an import can fail; each must call the deleter exactly once, before returning.
fn hostile_specs() -> Vec<(&'static str, Spec)> {
    let base = Spec::f32(&[2, 3]);
    let mut v = vec![
        ("major 2 (C17)", base.clone().version(2, 0)),
        ("major 0", base.clone().version(0, 9)),
        ("major u32::MAX", base.clone().version(u32::MAX, 0)),
        (
            "NULL strides on 1.2 (C7)",
            base.clone().version(1, 2).strides(None),
        ),
        ("NULL strides on 1.3", base.clone().strides(None)),
        (
            "negative extent",
            Spec {
                shape: Some(vec![-1, 3]),
                ..base.clone()
            },
        ),
        (
            "overflowing shape",
            Spec {
                shape: Some(vec![1 << 62, 1 << 3]),
                ..base.clone()
            },
        ),
        (
            "overflowing zero-size shape",
            Spec {
                shape: Some(vec![0, i64::MAX, 2]),
                strides: Some(vec![1, 1, 1]),
                ..base.clone()
            },
        ),
        (
            "overflowing strides",
            Spec {
                strides: Some(vec![i64::MAX, 1]),
                ..base.clone()
            },
        ),
        (
            "span beyond isize",
            Spec {
                strides: Some(vec![1 << 61, 1]),
                ..base.clone()
            },
        ),
        (
            "ndim -1",
            Spec {
                ndim: Some(-1),
                ..base.clone()
            },
        ),
        (
            "ndim 65",
            Spec {
                ndim: Some(65),
                shape: Some(vec![1; 65]),
                strides: Some(vec![1; 65]),
                ..base.clone()
            },
        ),
        (
            "NULL shape",
            Spec {
                shape: None,
                ndim: Some(2),
                ..base.clone()
            },
        ),
        ("NULL data, 6 elements", base.clone().data(Data::Null)),
        (
            "unknown dtype code",
            Spec {
                dtype: (99, 32, 1),
                ..base.clone()
            },
        ),
        (
            "bad bit width",
            Spec {
                dtype: (2, 24, 1),
                ..base.clone()
            },
        ),
        (
            "zero lanes",
            Spec {
                dtype: (2, 32, 0),
                ..base.clone()
            },
        ),
        (
            "opaque handle",
            Spec {
                dtype: (3, 64, 1),
                ..base.clone()
            },
        ),
        (
            "data + byte_offset overflows",
            Spec {
                data: Data::Addr(usize::MAX - 8),
                byte_offset: 64,
                ..base.clone()
            },
        ),
        (
            "negative stride reaches below address 0",
            Spec {
                data: Data::Addr(8),
                strides: Some(vec![-3, 1]),
                ..base.clone()
            },
        ),
        (
            "huge byte_offset",
            Spec {
                byte_offset: u64::MAX,
                ..base.clone()
            },
        ),
    ];
    // A major version the importer must refuse without reading dl_tensor (garbage pointers).
    v.push((
        "major 2 with garbage dl_tensor",
        Spec {
            garbage_tensor: true,
            ..base.clone().version(2, 1)
        },
    ));
    for (name, spec) in v.clone() {
        if spec.versioned && spec.version.0 == 1 && spec.strides.is_some() {
            v.push((name, spec.legacy()));
        }
    }
    v
}

#[test]
fn every_failure_path_deletes_exactly_once() {
    for (name, spec) in hostile_specs() {
        let counter = Counter::new();
        let err = Tensor::from_managed(make(&spec, &counter)).expect_err(&format!(
            "{name} (legacy: {}) was accepted",
            !spec.versioned
        ));
        assert_eq!(err.kind(), ErrorKind::Buffer, "{name}: {err}");
        assert_eq!(counter.calls(), 1, "{name}: deleter calls");
    }
}

#[test]
fn a_managed_tensor_never_imported_is_deleted_once() {
    let counter = Counter::new();
    drop(make(&Spec::f32(&[4]), &counter));
    assert_eq!(counter.calls(), 1);
    // into_raw hands ownership back: no call until it is taken again.
    let counter = Counter::new();
    let raw = make(&Spec::f32(&[4]), &counter).into_raw();
    assert_eq!(counter.calls(), 0);
    // SAFETY: `raw` is the versioned tensor just given back.
    let again = unsafe { dlbridge::ManagedTensor::from_versioned(raw.cast()) }.unwrap();
    drop(again);
    assert_eq!(counter.calls(), 1);
}

#[test]
fn null_deleter_is_never_called() {
    for spec in [Spec::f32(&[2]), Spec::f32(&[2]).version(2, 0)] {
        let counter = Counter::new();
        let spec = Spec {
            deleter: false,
            ..spec
        };
        let raw = make_raw(&spec, &counter);
        let result = Tensor::from_managed(raw.to_managed());
        assert_eq!(result.is_ok(), spec.version.0 == 1);
        drop(result);
        assert_eq!(counter.calls(), 0);
        // SAFETY: no deleter; dlbridge is done with it.
        unsafe { raw.free_without_deleter() };
    }
}

#[test]
fn null_data_and_zero_size_tensors() {
    // C9: shape (0, 3), data NULL.
    for spec in [
        Spec::f32(&[0, 3]).data(Data::Null),
        Spec::f32(&[0, 3]).data(Data::Null).legacy(),
        Spec::f32(&[0, 3])
            .data(Data::Null)
            .strides(Some(vec![0, 0])),
        Spec::f32(&[3, 0, 1 << 40]).data(Data::Null),
        Spec::f32(&[0]).data(Data::Addr(0x1)),
    ] {
        let counter = Counter::new();
        let t = Tensor::from_managed(make(&spec, &counter)).unwrap();
        assert_eq!(t.size(), 0);
        assert_eq!(t.to_vec::<f32>().unwrap(), Vec::<f32>::new());
        assert_eq!(t.copy(Order::C).unwrap().size(), 0);
        if !t.is_readonly() {
            let m = t.export(Flavor::Versioned { minor: 3 }).unwrap();
            drop(Tensor::from_managed(m).unwrap());
        }
        assert_eq!(counter.calls(), 0);
        drop(t);
        assert_eq!(counter.calls(), 1, "{spec:?}");
    }
    // 0-d: shape and strides NULL, one element.
    let counter = Counter::new();
    let spec = Spec {
        shape: None,
        strides: None,
        ndim: Some(0),
        data: Data::Buffer(4),
        ..Spec::f32(&[])
    };
    let t = Tensor::from_managed(make(&spec, &counter)).unwrap();
    assert_eq!((t.ndim(), t.size()), (0, 1));
    drop(t);
    assert_eq!(counter.calls(), 1);
}

#[test]
fn dropped_on_another_thread_deletes_there_once() {
    let counter = Counter::new();
    let t = Tensor::from_managed(make(&Spec::f32(&[8]), &counter)).unwrap();
    let handle = std::thread::spawn(move || {
        let id = std::thread::current().id();
        drop(t);
        id
    });
    let id = handle.join().unwrap();
    assert_eq!(counter.calls(), 1);
    assert_eq!(counter.threads(), vec![id]);
}

#[test]
fn clones_dropped_concurrently_delete_once() {
    for _ in 0..20 {
        let counter = Counter::new();
        let t = Tensor::from_managed(make(&Spec::f32(&[16]), &counter)).unwrap();
        let barrier = Arc::new(Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let t = t.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    let m = t.export(Flavor::Versioned { minor: 3 }).unwrap();
                    barrier.wait();
                    if i % 2 == 0 {
                        drop(Tensor::from_managed(m).unwrap());
                    } else {
                        drop(m);
                    }
                    drop(t);
                })
            })
            .collect();
        drop(t);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(counter.calls(), 1);
    }
}

// ------------------------------------------------------------------------------------------
// Arrow
// ------------------------------------------------------------------------------------------

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

/// Take a schema and an array as a consumer does, and pair them.
fn take(schema: &mut ca::CSchema, array: &mut ca::CArray) -> ArrowData {
    // SAFETY: valid producer structs we may move.
    let s = unsafe { OwnedSchema::take((schema as *mut ca::CSchema).cast()) }.unwrap();
    assert!(
        schema.release.is_none(),
        "the move marks the source released"
    );
    // SAFETY: as above.
    let a = unsafe { OwnedArray::take((array as *mut ca::CArray).cast()) }.unwrap();
    assert!(array.release.is_none());
    // SAFETY: exported together.
    unsafe { ArrowData::new(Arc::new(s), a) }
}

#[test]
fn arrow_success_releases_once_after_the_tensor() {
    let counts = Releases::new();
    let mut s = ca::schema(&Field::new("f"), &counts);
    let mut a = ca::array(
        &Array::primitive(4, f32_bytes(&[1.0, 2.0, 3.0, 4.0])),
        &counts,
    );
    let t = tensor_from_arrow(take(&mut s, &mut a), None).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(
        (counts.schema(), counts.array()),
        (0, 0),
        "released while in use"
    );
    let exported = t.export(Flavor::Versioned { minor: 3 }).unwrap();
    drop(t);
    assert_eq!(counts.array(), 0);
    let handle = std::thread::spawn(move || drop(exported));
    handle.join().unwrap();
    assert_eq!((counts.schema(), counts.array()), (1, 1));
}

#[test]
fn arrow_failures_release_once() {
    let fixed = |json: &str| Field {
        metadata: vec![
            (
                "ARROW:extension:name".into(),
                "arrow.fixed_shape_tensor".into(),
            ),
            ("ARROW:extension:metadata".into(), json.into()),
        ],
        ..Field::new("+w:4").child(Field::new("f"))
    };
    let list = |len: i64, child: Array| Array {
        length: len,
        buffers: vec![None],
        children: vec![child],
        ..Array::default()
    };
    let cases: Vec<(&str, Field, Array)> = vec![
        (
            "string type",
            Field::new("u"),
            Array::primitive(1, vec![0; 8]),
        ),
        (
            "dictionary",
            Field {
                dictionary: true,
                ..Field::new("i")
            },
            Array::primitive(1, vec![0; 4]),
        ),
        (
            "nulls",
            Field::new("f"),
            Array {
                null_count: 1,
                buffers: vec![Some(vec![0b1110]), Some(f32_bytes(&[1.0; 4]))],
                length: 4,
                ..Array::default()
            },
        ),
        (
            "negative length",
            Field::new("f"),
            Array::primitive(-1, vec![0; 4]),
        ),
        (
            "too many buffers",
            Field::new("f"),
            Array {
                buffers: vec![None, None, None],
                length: 0,
                ..Array::default()
            },
        ),
        (
            "NULL values",
            Field::new("f"),
            Array {
                buffers: vec![None, None],
                length: 2,
                ..Array::default()
            },
        ),
        (
            "list child too short",
            Field::new("+w:3").child(Field::new("f")),
            list(2, Array::primitive(5, f32_bytes(&[0.0; 5]))),
        ),
        (
            "list without child array",
            Field::new("+w:3").child(Field::new("f")),
            Array {
                length: 1,
                buffers: vec![None],
                ..Array::default()
            },
        ),
        (
            "bad fixed_shape json",
            fixed("{\"shape\": [2, -2]}"),
            list(1, Array::primitive(4, f32_bytes(&[0.0; 4]))),
        ),
        (
            "bad permutation",
            fixed("{\"shape\": [2, 2], \"permutation\": [0, 0]}"),
            list(1, Array::primitive(4, f32_bytes(&[0.0; 4]))),
        ),
        (
            "shape/list size mismatch",
            fixed("{\"shape\": [3, 2]}"),
            list(1, Array::primitive(4, f32_bytes(&[0.0; 4]))),
        ),
        (
            "unsupported list size",
            Field::new("+w:-1").child(Field::new("f")),
            list(1, Array::primitive(0, vec![])),
        ),
    ];
    for (name, field, array) in cases {
        let counts = Releases::new();
        let mut s = ca::schema(&field, &counts);
        let mut a = ca::array(&array, &counts);
        let err = tensor_from_arrow(take(&mut s, &mut a), None)
            .expect_err(&format!("{name} was accepted"));
        assert_eq!(err.kind(), ErrorKind::Buffer, "{name}: {err}");
        assert_eq!((counts.schema(), counts.array()), (1, 1), "{name}");
    }
    // copy=False with bit-packed booleans: refused, released.
    let counts = Releases::new();
    let mut s = ca::schema(&Field::new("b"), &counts);
    let mut a = ca::array(&Array::primitive(3, vec![0b101]), &counts);
    let err = tensor_from_arrow(take(&mut s, &mut a), Some(false)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Buffer);
    assert_eq!((counts.schema(), counts.array()), (1, 1));
}

#[test]
fn arrow_released_structs_are_refused_without_a_call() {
    let counts = Releases::new();
    let mut s = ca::schema(&Field::new("f"), &counts);
    // SAFETY: valid struct; moved out once, then the source is released.
    let owned = unsafe { OwnedSchema::take((&mut *s as *mut ca::CSchema).cast()) }.unwrap();
    // SAFETY: the source struct is still valid memory, now marked released.
    let again = unsafe { OwnedSchema::take((&mut *s as *mut ca::CSchema).cast()) };
    assert!(again.is_err(), "a consumed schema was taken twice");
    drop(owned);
    assert_eq!(counts.schema(), 1);
    let mut a = ca::array(&Array::primitive(0, vec![]), &counts);
    // SAFETY: a valid array, moved out once; then the released source.
    let owned = unsafe { OwnedArray::take((&mut *a as *mut ca::CArray).cast()) }.unwrap();
    // SAFETY: as above.
    assert!(unsafe { OwnedArray::take((&mut *a as *mut ca::CArray).cast()) }.is_err());
    drop(owned);
    assert_eq!(counts.array(), 1);
}

/// Read a stream the way dlbridge's Python stream import does.
fn read_stream(raw: &mut ca::CStream, copy: Option<bool>) -> dlbridge::Result<Tensor> {
    // SAFETY: a valid stream we may move.
    let mut stream = unsafe { OwnedStream::take((raw as *mut ca::CStream).cast()) }.unwrap();
    let schema = Arc::new(stream.schema()?);
    let mut chunks = vec![];
    while let Some(array) = stream.next_array()? {
        // SAFETY: chunks of a stream are described by its schema.
        let data = unsafe { ArrowData::new(schema.clone(), array) };
        chunks.push(tensor_from_arrow(data, copy)?);
    }
    drop(stream);
    concatenate(schema.view(), chunks, copy)
}

#[test]
fn arrow_streams_release_everything_once_on_every_path() {
    let chunk = |vals: &[f32]| Array::primitive(vals.len() as i64, f32_bytes(vals));
    // (name, plan, copy, ok, chunks handed out)
    let cases: Vec<(&str, StreamPlan, Option<bool>, bool, usize)> = vec![
        (
            "two chunks concatenated",
            StreamPlan {
                field: Field::new("f"),
                schema_rc: 0,
                chunks: [chunk(&[1.0, 2.0]), chunk(&[3.0])].into(),
                fail_next: None,
            },
            None,
            true,
            2,
        ),
        (
            "two chunks with copy=False (C48-like refusal)",
            StreamPlan {
                field: Field::new("f"),
                schema_rc: 0,
                chunks: [chunk(&[1.0]), chunk(&[3.0])].into(),
                fail_next: None,
            },
            Some(false),
            false,
            2,
        ),
        (
            "unsupported format (C48)",
            StreamPlan {
                field: Field::new("u"),
                schema_rc: 0,
                chunks: [
                    Array::primitive(1, vec![0; 8]),
                    Array::primitive(1, vec![0; 8]),
                ]
                .into(),
                fail_next: None,
            },
            None,
            false,
            1,
        ),
        (
            "get_schema fails, garbage output (C49)",
            StreamPlan {
                field: Field::new("f"),
                schema_rc: 22,
                chunks: [chunk(&[1.0])].into(),
                fail_next: None,
            },
            None,
            false,
            0,
        ),
        (
            "get_next fails after a chunk, garbage output",
            StreamPlan {
                field: Field::new("f"),
                schema_rc: 0,
                chunks: [chunk(&[1.0])].into(),
                fail_next: Some(5),
            },
            None,
            false,
            1,
        ),
        (
            "empty stream",
            StreamPlan {
                field: Field::new("f"),
                schema_rc: 0,
                chunks: std::collections::VecDeque::new(),
                fail_next: None,
            },
            None,
            true,
            0,
        ),
    ];
    for (name, plan, copy, ok, handed) in cases {
        let counts = Releases::new();
        let schema_ok = plan.schema_rc == 0;
        let mut raw = ca::stream(plan, &counts);
        let result = read_stream(&mut raw, copy);
        assert_eq!(result.is_ok(), ok, "{name}: {:?}", result.as_ref().err());
        if let Err(e) = &result {
            assert_eq!(e.kind(), ErrorKind::Buffer, "{name}: {e}");
        }
        if let Ok(t) = &result {
            let _ = t.to_vec::<f32>().unwrap();
        }
        drop(result);
        assert_eq!(counts.stream(), 1, "{name}: stream releases");
        assert_eq!(
            counts.schema(),
            usize::from(schema_ok),
            "{name}: schema releases"
        );
        assert_eq!(counts.array(), handed, "{name}: chunk releases");
        assert_eq!(counts.poison(), 0, "{name}");
    }
}

#[test]
fn arrow_tensor_dropped_on_another_thread_releases_there() {
    let counts = Releases::new();
    let mut s = ca::schema(&Field::new("f"), &counts);
    let mut a = ca::array(&Array::primitive(2, f32_bytes(&[5.0, 6.0])), &counts);
    let t = tensor_from_arrow(take(&mut s, &mut a), None).unwrap();
    let id = std::thread::spawn(move || {
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![5.0, 6.0]);
        drop(t);
        std::thread::current().id()
    })
    .join()
    .unwrap();
    assert_eq!((counts.schema(), counts.array()), (1, 1));
    assert!(counts.threads.lock().unwrap().iter().all(|t| *t == id));
}

// ------------------------------------------------------------------------------------------
// Capsules (feature "pyo3"): never consumed, consumed twice, failed consumption, and a tensor
// owning a Python object dropped on a thread that does not hold the GIL.
// ------------------------------------------------------------------------------------------

#[cfg(feature = "pyo3")]
mod capsules {
    use super::*;
    use dlbridge::python::capsule;
    use pyo3::prelude::*;

    #[test]
    fn capsule_never_consumed_deletes_once() {
        Python::initialize();
        let counter = Counter::new();
        Python::attach(|py| {
            let cap = capsule::export(py, make(&Spec::f32(&[3]), &counter)).unwrap();
            assert_eq!(counter.calls(), 0);
            drop(cap);
        });
        assert_eq!(counter.calls(), 1);
    }

    #[test]
    fn capsule_consumed_twice_raises_and_deletes_once() {
        Python::initialize();
        let counter = Counter::new();
        Python::attach(|py| {
            let cap = capsule::export(py, make(&Spec::f32(&[3]), &counter)).unwrap();
            let t = capsule::consume(&cap).unwrap();
            let err = capsule::consume(&cap).unwrap_err();
            assert!(
                err.is_instance_of::<pyo3::exceptions::PyBufferError>(py),
                "{err}"
            );
            drop(cap);
            assert_eq!(
                counter.calls(),
                0,
                "the used capsule's destructor deleted it"
            );
            drop(t);
        });
        assert_eq!(counter.calls(), 1);
    }

    #[test]
    fn failed_consumption_leaves_the_capsule_to_its_destructor() {
        Python::initialize();
        for (name, spec) in hostile_specs() {
            let counter = Counter::new();
            Python::attach(|py| {
                let cap = capsule::export(py, make(&spec, &counter)).unwrap();
                let err = capsule::consume(&cap).unwrap_err();
                assert!(
                    err.is_instance_of::<pyo3::exceptions::PyBufferError>(py),
                    "{name}: {err}"
                );
                assert_eq!(
                    counter.calls(),
                    0,
                    "{name}: deleted while the capsule owns it"
                );
                // Still fresh: a second attempt fails the same way, no double free.
                assert!(capsule::consume(&cap).is_err());
                drop(cap);
            });
            assert_eq!(counter.calls(), 1, "{name}");
        }
    }

    fn refcnt(obj: &Bound<'_, PyAny>) -> isize {
        // SAFETY: reading the reference count of a live object while attached.
        unsafe { pyo3::ffi::Py_REFCNT(obj.as_ptr()) }
    }

    #[test]
    fn python_owner_dropped_without_the_gil() {
        Python::initialize();
        let (tensor, obj, base) = Python::attach(|py| {
            let obj = pyo3::types::PyByteArray::new(py, &[1, 2, 3, 4]).into_any();
            let base = refcnt(&obj);
            let t = dlbridge::python::Import::default().extract(&obj).unwrap();
            assert!(refcnt(&obj) > base, "the tensor holds the bytearray");
            (t, obj.unbind(), base)
        });
        // The last reference to the owner goes away on a thread that does not hold the GIL.
        std::thread::spawn(move || drop(tensor)).join().unwrap();
        Python::attach(|py| {
            let obj = obj.bind(py);
            // Deferred decrefs are applied once a thread holds the GIL again.
            assert_eq!(refcnt(obj), base);
            // The buffer export was released: the bytearray may be resized again.
            obj.call_method1("extend", (b"xyz".as_slice(),)).unwrap();
        });
    }
}
