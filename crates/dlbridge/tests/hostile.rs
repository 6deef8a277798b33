//! Hostile input, table-driven: each malformed input is refused with its exact error variant
//! (and so its exact Python exception, BufferError, TypeError or ValueError), and the producer's deleter still runs
//! once. The Python-level table (capsule names, producers that raise...) is
//! tests/test_hostile.py.

mod common;

use common::{Counter, Data, Spec, make};
use dlbridge::arrow::FixedShape;
use dlbridge::{DType, Device, Error, ErrorKind, Tensor};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Want {
    Version,
    Layout,
    DType,
}

fn variant(e: &Error) -> Option<Want> {
    match e {
        Error::UnsupportedVersion { .. } => Some(Want::Version),
        Error::InvalidLayout(_) => Some(Want::Layout),
        Error::UnsupportedDType { .. } => Some(Want::DType),
        _ => None,
    }
}

#[test]
fn dlpack_table() {
    let base = || Spec::f32(&[2, 3]);
    let cases: Vec<(&str, Spec, Want)> = vec![
        ("major 2", base().version(2, 0), Want::Version),
        ("major 0", base().version(0, 0), Want::Version),
        (
            "major 2, garbage tensor",
            Spec {
                garbage_tensor: true,
                ..base().version(2, 7)
            },
            Want::Version,
        ),
        (
            "NULL strides, 1.2",
            base().version(1, 2).strides(None),
            Want::Layout,
        ),
        ("NULL strides, 1.3", base().strides(None), Want::Layout),
        (
            "negative extent",
            Spec {
                shape: Some(vec![2, -3]),
                ..base()
            },
            Want::Layout,
        ),
        (
            "i64::MIN extent",
            Spec {
                shape: Some(vec![i64::MIN, 3]),
                ..base()
            },
            Want::Layout,
        ),
        (
            "element count overflows",
            Spec {
                shape: Some(vec![1 << 40, 1 << 40]),
                ..base()
            },
            Want::Layout,
        ),
        (
            "zero-size, other extents overflow",
            Spec {
                shape: Some(vec![0, 1 << 62, 4]),
                strides: Some(vec![1, 1, 1]),
                ..base()
            },
            Want::Layout,
        ),
        (
            "stride * extent overflows",
            Spec {
                strides: Some(vec![i64::MAX / 2 + 1, 1]),
                ..base()
            },
            Want::Layout,
        ),
        (
            "ndim -5",
            Spec {
                ndim: Some(-5),
                ..base()
            },
            Want::Layout,
        ),
        (
            "ndim 1000",
            Spec {
                ndim: Some(1000),
                ..base()
            },
            Want::Layout,
        ),
        (
            "NULL shape, ndim 2",
            Spec {
                shape: None,
                ndim: Some(2),
                ..base()
            },
            Want::Layout,
        ),
        (
            "NULL data, non-empty",
            base().data(Data::Null),
            Want::Layout,
        ),
        (
            "pointer overflow",
            Spec {
                data: Data::Addr(usize::MAX - 3),
                ..base()
            },
            Want::Layout,
        ),
        (
            "unknown type code",
            Spec {
                dtype: (200, 8, 1),
                ..base()
            },
            Want::DType,
        ),
        (
            "int 7 bits",
            Spec {
                dtype: (0, 7, 1),
                ..base()
            },
            Want::DType,
        ),
        (
            "bool 16 bits",
            Spec {
                dtype: (6, 16, 1),
                ..base()
            },
            Want::DType,
        ),
        (
            "zero lanes",
            Spec {
                dtype: (2, 32, 0),
                ..base()
            },
            Want::DType,
        ),
        (
            "opaque handle",
            Spec {
                dtype: (3, 64, 1),
                ..base()
            },
            Want::DType,
        ),
    ];
    for (name, spec, want) in cases {
        for legacy in [false, true] {
            if legacy && (spec.version.0 != 1 || spec.strides.is_none()) {
                continue; // not expressible (or valid, C6) as a legacy tensor
            }
            let spec = if legacy {
                spec.clone().legacy()
            } else {
                spec.clone()
            };
            let counter = Counter::new();
            let err = Tensor::from_managed(make(&spec, &counter))
                .expect_err(&format!("{name} (legacy {legacy}) accepted"));
            assert_eq!(variant(&err), Some(want), "{name}: {err:?}");
            assert_eq!(err.kind(), ErrorKind::Buffer, "{name}");
            assert_eq!(counter.calls(), 1, "{name}");
            // The message names the offending field or value.
            assert!(!err.to_string().is_empty());
        }
    }
}

#[test]
fn dlpack_accepts_what_it_should() {
    // C6: a legacy tensor (or a 1.0/1.1 one) without strides is C-contiguous.
    for spec in [
        Spec::f32(&[2, 3]).strides(None).legacy(),
        Spec::f32(&[2, 3]).strides(None).version(1, 1),
        Spec::f32(&[2, 3]).strides(None).version(1, 0),
        // Unknown minor versions of major 1 are fine (additions only).
        Spec::f32(&[2, 3]).version(1, 99),
        // Unknown flag bits are ignored.
        Spec {
            flags: !0b111,
            ..Spec::f32(&[2, 3])
        },
        // Negative strides within the buffer.
        Spec {
            strides: Some(vec![-3, 1]),
            byte_offset: 12,
            ..Spec::f32(&[2, 3])
        },
    ] {
        let counter = Counter::new();
        let t = Tensor::from_managed(make(&spec, &counter)).unwrap();
        assert_eq!(t.shape(), &[2, 3]);
        drop(t);
        assert_eq!(counter.calls(), 1);
    }
}

#[test]
fn typestr_table() {
    let ok = [
        ("<f4", DType::FLOAT32),
        ("|u1", DType::UINT8),
        ("|b1", DType::BOOL),
        ("<c16", DType::COMPLEX128),
        ("=i8", DType::INT64),
        ("<f2", DType::FLOAT16),
        ("|i1", DType::INT8),
        (">u1", DType::UINT8), // byte order is meaningless for one byte
    ];
    for (s, dt) in ok {
        assert_eq!(DType::from_typestr(s).unwrap(), dt, "{s}");
    }
    let bad = [
        ("", false),
        ("<", false),
        ("<f", false),
        ("<fx", false),
        ("<f-4", false),
        ("<f16", false), // long double
        ("<c32", false),
        ("<f3", false),
        ("<V8", false),
        ("<M8", false),
        ("<O8", false),
        ("<U4", false),
        ("#f4", false),
        ("<i99999999999999999999", false),
        ("<i256", false),
        (">f4", true), // non-native byte order
        (">i8", true),
    ];
    for (s, byte_order) in bad {
        let e = DType::from_typestr(s).expect_err(s);
        assert_eq!(e.kind(), ErrorKind::Buffer, "{s}");
        assert_eq!(
            matches!(e, Error::NonNativeByteOrder { .. }),
            byte_order,
            "{s}: {e}"
        );
    }
}

#[test]
fn buffer_format_table() {
    assert_eq!(DType::from_buffer_format("f", 4).unwrap(), DType::FLOAT32);
    assert_eq!(DType::from_buffer_format("<d", 8).unwrap(), DType::FLOAT64);
    assert_eq!(DType::from_buffer_format("=q", 8).unwrap(), DType::INT64);
    assert_eq!(
        DType::from_buffer_format("Zf", 8).unwrap(),
        DType::COMPLEX64
    );
    assert_eq!(DType::from_buffer_format("?", 1).unwrap(), DType::BOOL);
    for (s, size) in [
        ("f", 8),  // item size disagrees
        ("g", 16), // long double
        ("Zg", 32),
        ("", 1),
        ("@", 1),
        ("2f", 8),
        ("T{f:x:}", 4),
        ("x", 1),
        ("=n", 8), // ssize_t has no standard size
        (">f", 4),
        ("!i", 4),
        ("ff", 8),
        ("O", 8),
    ] {
        let e = DType::from_buffer_format(s, size).expect_err(s);
        assert_eq!(e.kind(), ErrorKind::Buffer, "{s}");
    }
}

#[test]
fn device_string_table() {
    for bad in [
        "", "gpu", "cuda:", "cuda:-1", "cuda:1:2", "device0", "device-3", "cpu:x", "::",
    ] {
        let e = bad.parse::<Device>().expect_err(bad);
        assert_eq!(
            e.kind(),
            ErrorKind::Value,
            "{bad}: a caller's bad argument is a ValueError"
        );
    }
}

#[test]
fn fixed_shape_metadata_table() {
    for bad in [
        &b""[..],
        b"null",
        b"[]",
        b"{}",
        b"{\"shape\": 3}",
        b"{\"shape\": [-1]}",
        b"{\"shape\": [1.5]}",
        b"{\"shape\": [2, 2], \"permutation\": [0]}",
        b"{\"shape\": [2, 2], \"permutation\": [1, 1]}",
        b"{\"shape\": [2, 2], \"permutation\": [0, 2]}",
        b"{\"shape\": [2, 2], \"permutation\": [0, -1]}",
        b"{\"shape\": [2], \"dim_names\": [\"a\", \"b\"]}",
        b"{\"shape\": [2], \"dim_names\": [1]}",
        b"\xff\xfe",
    ] {
        let e = FixedShape::parse(bad).expect_err(&String::from_utf8_lossy(bad));
        assert_eq!(e.kind(), ErrorKind::Buffer);
    }
    let big = FixedShape::parse(b"{\"shape\": [9223372036854775807, 2]}").unwrap();
    assert!(big.logical().is_err(), "overflowing cell shape");
}
