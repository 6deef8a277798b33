//! The string parsers behind the Python dict protocols: NumPy typestrs (`__array_interface__`
//! and `__cuda_array_interface__` both carry one), buffer-protocol format strings, device
//! strings, dtype names, and the `arrow.fixed_shape_tensor` JSON metadata.
//!
//! Checked: no panic; refusals are the documented error kinds (BufferError for formats and
//! metadata, ValueError for device strings); what parses round-trips through the printer
//! (`typestr`, `buffer_format`, `Display`, `to_json`).
#![no_main]

use arbitrary::Arbitrary;
use dlbridge::arrow::FixedShape;
use dlbridge::{DType, Device, ErrorKind};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Input<'a> {
    Typestr(&'a str),
    BufferFormat(&'a str, u8),
    Device(&'a str),
    Name(&'a str),
    FixedShape(&'a [u8]),
}

fuzz_target!(|input: Input<'_>| match input {
    Input::Typestr(s) => match DType::from_typestr(s) {
        Ok(dt) => {
            assert_eq!(dt.lanes(), 1);
            // Every dtype parsed from a typestr prints one that parses to itself.
            let printed = dt.typestr().expect("a parsed typestr prints");
            assert_eq!(
                DType::from_typestr(&printed).unwrap(),
                dt,
                "{s:?} -> {printed:?}"
            );
            assert_eq!(printed[2..].parse::<usize>().unwrap(), dt.itemsize());
        }
        Err(e) => assert_eq!(e.kind(), ErrorKind::Buffer, "{s:?}: {e}"),
    },
    Input::BufferFormat(s, itemsize) => {
        let itemsize = usize::from(itemsize % 20);
        match DType::from_buffer_format(s, itemsize) {
            Ok(dt) => {
                assert_eq!(dt.itemsize(), itemsize);
                let printed = dt.buffer_format().expect("a parsed format prints");
                assert_eq!(DType::from_buffer_format(printed, itemsize).unwrap(), dt);
            }
            Err(e) => assert_eq!(e.kind(), ErrorKind::Buffer, "{s:?}: {e}"),
        }
    }
    Input::Device(s) => match s.parse::<Device>() {
        Ok(d) => {
            assert!(d.kind.0 > 0 && d.id >= 0);
            let printed = d.to_string();
            assert_eq!(
                printed.parse::<Device>().unwrap(),
                d,
                "{s:?} -> {printed:?}"
            );
        }
        Err(e) => assert_eq!(e.kind(), ErrorKind::Value, "{s:?}: {e}"),
    },
    Input::Name(s) => {
        if let Some(dt) = DType::from_name(s) {
            assert_eq!(dt.name(), s);
        }
    }
    Input::FixedShape(json) => match FixedShape::parse(json) {
        Ok(fs) => {
            assert!(fs.shape.iter().all(|d| *d >= 0));
            if let Some(p) = &fs.permutation {
                let mut sorted = p.clone();
                sorted.sort_unstable();
                assert!(sorted.iter().copied().eq(0..fs.shape.len()), "{p:?}");
            }
            if let Some(n) = &fs.dim_names {
                assert_eq!(n.len(), fs.shape.len());
            }
            let again = FixedShape::parse(fs.to_json().as_bytes()).expect("to_json parses");
            assert_eq!(again.shape, fs.shape);
            assert_eq!(again.dim_names, fs.dim_names);
            match fs.logical() {
                Ok(cell) => {
                    assert_eq!(cell.shape.len(), fs.shape.len());
                    assert_eq!(cell.strides.len(), fs.shape.len());
                }
                Err(e) => assert_eq!(e.kind(), ErrorKind::Buffer),
            }
        }
        Err(e) => assert_eq!(e.kind(), ErrorKind::Buffer),
    },
});
