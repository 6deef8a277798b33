//! Tensor <-> Arrow C Data / C Device Data.
//!
//! **Import** (an [`ArrowData`] -> [`Tensor`](crate::Tensor)): primitive numeric arrays, fixed-size lists of
//! them (nested too), the `arrow.fixed_shape_tensor` extension (shape, permutation, dim_names),
//! `arrow.bool8` (zero-copy) and bit-packed booleans (format `b`, unpacked by a copy). Sliced
//! arrays (`offset`) and empty arrays are zero-copy; results are read-only (Arrow data is
//! immutable). Nulls cannot cross into DLPack: they are refused with a message naming the fix.
//! Unknown extension types are read as their storage type.
//!
//! **Export** (a [`Tensor`](crate::Tensor) -> [`ArrowExport`]): a 1-d tensor becomes a primitive array; an
//! N-d tensor an `arrow.fixed_shape_tensor` array over a `FixedSizeList` (the first dimension is
//! the batch, the others the cell shape), with a `permutation` when the cell is a transposed
//! row-major layout. `bool` becomes the canonical `arrow.bool8` extension (int8 storage,
//! zero-copy) rather than Arrow's bit-packed boolean, which would need a copy; a consumer may
//! still ask for the bit-packed form with a requested schema. Layouts Arrow cannot express
//! (gaps, negative or overlapping strides, a batch dimension that is not the outermost) are
//! exported as a C-order copy (Arrow has no `copy` argument, so
//! the copy is documented instead). dtypes without an Arrow type (bfloat16, complex,
//! float8...) are refused.
//!
//! Permutations follow the specification (logical dimension `i` is physical dimension
//! `permutation[i]`). Arrow C++ (and so pyarrow) reads and writes the inverse mapping for
//! permutations that are not their own inverse; involutive ones (every 2-d transpose, `[2,1,0]`,
//! `[0,2,1]`...) mean the same in both.
//!
//! **arrow-rs** (feature `arrow-rs`): the `arrow_rs` module turns tensors into `arrow_array`
//! arrays and record batch columns and back through these same structs, and wraps Arrow C
//! Device arrays for Rust programs.

#[cfg(feature = "arrow-rs")]
pub mod arrow_rs;
mod build;
#[cfg(test)]
mod c_struct_tests;
mod export;
mod fixed_shape_json;
mod import;
mod owned;
mod stream;
mod view;

pub use build::{ArraySpec, SchemaSpec};
pub use export::{ArrowExport, ExportOptions, export, export_schema};
#[cfg(feature = "pyo3")]
pub(crate) use import::all_valid;
pub use import::{
    FillValue, Imported, Nulls, concatenate, concatenate_imported, import_arrow, tensor_from_arrow,
};
pub use owned::{
    ArrowData, ArrowStruct, Owned, OwnedArray, OwnedDeviceStream, OwnedSchema, OwnedStream,
};
pub use stream::{export_device_stream, export_stream};
pub use view::SchemaView;
pub(crate) use view::{Node, host_tensor};

use serde_json::Value;

use crate::dtype::{DType, TypeCode};
use crate::error::{Error, Result};
use crate::layout::c_strides;

/// Metadata key of an extension type's name.
pub const EXTENSION_NAME: &str = "ARROW:extension:name";
/// Metadata key of an extension type's serialized parameters.
pub const EXTENSION_METADATA: &str = "ARROW:extension:metadata";
/// The canonical fixed-shape tensor extension.
pub const FIXED_SHAPE_TENSOR: &str = "arrow.fixed_shape_tensor";
/// The canonical 8-bit boolean extension (int8 storage).
pub const BOOL8: &str = "arrow.bool8";

/// The Arrow format string of `dtype`'s storage (`bool` is stored as int8, `c`), if Arrow has
/// a primitive type for it.
pub(crate) fn format_of(dtype: DType) -> Option<&'static str> {
    if dtype.lanes() != 1 {
        return None;
    }
    Some(match (dtype.code(), dtype.bits()) {
        (TypeCode::BOOL, 8) | (TypeCode::INT, 8) => "c",
        (TypeCode::INT, 16) => "s",
        (TypeCode::INT, 32) => "i",
        (TypeCode::INT, 64) => "l",
        (TypeCode::UINT, 8) => "C",
        (TypeCode::UINT, 16) => "S",
        (TypeCode::UINT, 32) => "I",
        (TypeCode::UINT, 64) => "L",
        (TypeCode::FLOAT, 16) => "e",
        (TypeCode::FLOAT, 32) => "f",
        (TypeCode::FLOAT, 64) => "g",
        _ => return None,
    })
}

/// The dtype of a primitive Arrow format (`b`, bit-packed boolean, gives `bool`).
pub(crate) fn dtype_of_format(format: &str) -> Option<DType> {
    Some(match format {
        "b" => DType::BOOL,
        "c" => DType::INT8,
        "s" => DType::INT16,
        "i" => DType::INT32,
        "l" => DType::INT64,
        "C" => DType::UINT8,
        "S" => DType::UINT16,
        "I" => DType::UINT32,
        "L" => DType::UINT64,
        "e" => DType::FLOAT16,
        "f" => DType::FLOAT32,
        "g" => DType::FLOAT64,
        _ => return None,
    })
}

fn unsupported(format: &str, reason: impl Into<String>) -> Error {
    Error::UnsupportedFormat {
        format: format.to_owned(),
        reason: reason.into(),
    }
}

/// A malformed Arrow struct: the error of the readers of producer structs (`owned`, `view`),
/// kept here, below both, so that neither names the other for it.
fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidLayout(msg.into())
}

/// A struct used after its release (a consumed capsule, a second read of a stream's schema).
fn released_error(what: &str) -> Error {
    invalid(format!(
        "the {what} is already released (consumed); ask the producer for a new one"
    ))
}

fn bad_extension(reason: impl Into<String>) -> Error {
    Error::InvalidLayout(format!("{FIXED_SHAPE_TENSOR}: {}", reason.into()))
}

// ------------------------------------------------------------------------------------------
// Types
// ------------------------------------------------------------------------------------------

/// How an Arrow field reads as a tensor: the element type and the shape of one item (cell).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// True when the values are bit-packed booleans (format `b`): reading them copies.
    pub packed_bool: bool,
    /// Logical shape of one item (empty for a primitive array).
    pub cell_shape: Vec<i64>,
    /// Strides (elements) of one item within its `cell_size` values.
    pub cell_strides: Vec<i64>,
    /// Sizes of the nested fixed-size lists, outermost first.
    pub list_sizes: Vec<i64>,
    /// Logical dimension names of the cell (`arrow.fixed_shape_tensor` `dim_names`).
    pub dim_names: Option<Vec<String>>,
}

impl TensorType {
    /// Values per item: the product of the list sizes.
    pub(crate) fn cell_size(&self) -> Result<i64> {
        self.list_sizes
            .iter()
            .try_fold(1i64, |acc, &n| acc.checked_mul(n))
            .ok_or_else(|| Error::InvalidLayout("the fixed-size list sizes overflow".to_owned()))
    }
}

/// Read an Arrow field as a tensor type.
pub(crate) fn tensor_type(field: SchemaView<'_>) -> Result<TensorType> {
    let format = field.format()?;
    if field.has_dictionary() {
        return Err(unsupported(
            format,
            "dictionary-encoded arrays are not tensors; decode them first (e.g. arr.dictionary_decode())",
        ));
    }
    let extension = field.metadata_value(EXTENSION_NAME)?;
    match extension {
        Some(name) if name == FIXED_SHAPE_TENSOR.as_bytes() => {
            return fixed_shape_tensor(field, format);
        }
        Some(name) if name == BOOL8.as_bytes() && format == "c" => {
            return Ok(leaf(DType::BOOL, false));
        }
        _ => {} // unknown extensions are read as their storage type
    }
    if let Some(dtype) = dtype_of_format(format) {
        return Ok(leaf(dtype, format == "b"));
    }
    if let Some(n) = list_size(format)? {
        let mut ty = tensor_type(single_child(field)?)?;
        let inner_size = ty.cell_size()?;
        ty.cell_shape.insert(0, n);
        ty.cell_strides.insert(0, inner_size);
        ty.list_sizes.insert(0, n);
        ty.dim_names = None;
        return Ok(ty);
    }
    Err(unsupported(format, format_hint(format)))
}

fn leaf(dtype: DType, packed_bool: bool) -> TensorType {
    TensorType {
        dtype,
        packed_bool,
        cell_shape: vec![],
        cell_strides: vec![],
        list_sizes: vec![],
        dim_names: None,
    }
}

fn format_hint(format: &str) -> String {
    let what = match format.as_bytes().first() {
        Some(b'u' | b'U' | b'z' | b'Z' | b'v') => "strings and binary data are not fixed-width",
        Some(b't') => {
            "temporal types have no DLPack dtype; cast to their integer storage first (e.g. arr.cast(pyarrow.int64()))"
        }
        Some(b'd') => "decimals have no DLPack dtype; cast to float64 first",
        Some(b'+') => {
            "only fixed-size lists (and the fixed_shape_tensor extension) of numbers map to tensors"
        }
        Some(b'n') => "a null-type array has no values",
        _ => "no DLPack equivalent",
    };
    format!("this Arrow type cannot be a DLPack tensor: {what}")
}

/// The size of a fixed-size list format `+w:N`, or `None` for other formats.
fn list_size(format: &str) -> Result<Option<i64>> {
    let Some(n) = format.strip_prefix("+w:") else {
        return Ok(None);
    };
    n.parse::<i64>()
        .ok()
        .filter(|n| *n >= 0)
        .map(Some)
        .ok_or_else(|| unsupported(format, "invalid fixed-size list size"))
}

fn single_child(field: SchemaView<'_>) -> Result<SchemaView<'_>> {
    if let Some(child) = field.single_child()? {
        return Ok(child);
    }
    Err(Error::InvalidLayout(format!(
        "a fixed-size list must have one child field, not {}",
        field.children()?.len()
    )))
}

/// The parameters of an `arrow.fixed_shape_tensor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixedShape {
    /// Physical (row-major) shape of a cell.
    pub shape: Vec<i64>,
    /// Logical dimension `i` is physical dimension `permutation[i]` (`None` = identity).
    pub permutation: Option<Vec<usize>>,
    /// Names of the physical dimensions.
    pub dim_names: Option<Vec<String>>,
}

impl FixedShape {
    /// Parse the JSON metadata (keys in any order; extra keys ignored). The common form is
    /// read directly (see the private `fixed_shape_json` module), anything else by a general JSON parser.
    pub fn parse(json: &[u8]) -> Result<Self> {
        match fixed_shape_json::parse(json) {
            Some(params) => Ok(params),
            None => Self::parse_general(json),
        }
    }

    /// [`FixedShape::parse`] through a general JSON parser, for any input.
    pub(crate) fn parse_general(json: &[u8]) -> Result<Self> {
        let value: Value = serde_json::from_slice(json)
            .map_err(|e| bad_extension(format!("metadata is not JSON: {e}")))?;
        let object = value
            .as_object()
            .ok_or_else(|| bad_extension("metadata is not a JSON object"))?;
        let shape: Vec<i64> = object
            .get("shape")
            .and_then(Value::as_array)
            .ok_or_else(|| bad_extension("metadata has no \"shape\" array"))?
            .iter()
            .map(|d| d.as_i64().filter(|d| *d >= 0))
            .collect::<Option<_>>()
            .ok_or_else(|| bad_extension("\"shape\" must hold non-negative integers"))?;
        let ndim = shape.len();
        let permutation = match object.get("permutation") {
            None | Some(Value::Null) => None,
            Some(p) => {
                let perm: Vec<usize> = p
                    .as_array()
                    .and_then(|p| p.iter().map(|i| i.as_u64().map(|i| i as usize)).collect())
                    .ok_or_else(|| bad_extension("\"permutation\" must be an array of integers"))?;
                let mut seen = vec![false; ndim];
                let valid = perm.len() == ndim
                    && perm
                        .iter()
                        .all(|&i| i < ndim && !std::mem::replace(&mut seen[i], true));
                if !valid {
                    return Err(bad_extension(format!(
                        "{perm:?} is not a permutation of 0..{ndim}"
                    )));
                }
                Some(perm)
            }
        };
        let dim_names = match object.get("dim_names") {
            None | Some(Value::Null) => None,
            Some(names) => {
                let names: Vec<String> = names
                    .as_array()
                    .and_then(|n| n.iter().map(|s| s.as_str().map(str::to_owned)).collect())
                    .ok_or_else(|| bad_extension("\"dim_names\" must be an array of strings"))?;
                if names.len() != ndim {
                    return Err(bad_extension(format!(
                        "{} dim_names for {ndim} dimensions",
                        names.len()
                    )));
                }
                Some(names)
            }
        };
        Ok(Self {
            shape,
            permutation,
            dim_names,
        })
    }

    /// JSON as Arrow C++ writes it: compact, keys `shape`, `permutation`, `dim_names`, absent
    /// ones omitted, a trivial permutation left out.
    pub fn to_json(&self) -> String {
        let mut json = format!("{{\"shape\":{}", Value::from(self.shape.clone()));
        if let Some(p) = self.permutation.as_ref().filter(|p| !is_identity(p)) {
            json.push_str(&format!(",\"permutation\":{}", Value::from(p.clone())));
        }
        if let Some(names) = &self.dim_names {
            json.push_str(&format!(",\"dim_names\":{}", Value::from(names.clone())));
        }
        json.push('}');
        json
    }

    /// The logical cell: `L[i] = P[perm[i]]`, `S[i] = rowmajor(P)[perm[i]]`,
    /// `names[i] = dim_names[perm[i]]`.
    pub fn logical(&self) -> Result<LogicalCell> {
        self.clone().into_logical()
    }

    /// [`FixedShape::logical`], reusing the parameters' vectors (no permutation, or the
    /// identity: nothing to reorder, the physical cell is the logical one).
    pub fn into_logical(self) -> Result<LogicalCell> {
        let physical_strides = c_strides(&self.shape)
            .ok_or_else(|| bad_extension(format!("shape {:?} overflows", self.shape)))?;
        let Some(perm) = self.permutation.filter(|p| !is_identity(p)) else {
            return Ok(LogicalCell {
                shape: self.shape,
                strides: physical_strides,
                dim_names: self.dim_names,
            });
        };
        Ok(LogicalCell {
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| physical_strides[p]).collect(),
            dim_names: self
                .dim_names
                .map(|n| perm.iter().map(|&p| n[p].clone()).collect()),
        })
    }
}

/// One cell of a fixed-shape tensor as the user sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogicalCell {
    /// Logical shape.
    pub shape: Vec<i64>,
    /// Strides in elements within the cell's values.
    pub strides: Vec<i64>,
    /// Logical dimension names.
    pub dim_names: Option<Vec<String>>,
}

fn is_identity(perm: &[usize]) -> bool {
    perm.iter().enumerate().all(|(i, &p)| i == p)
}

fn fixed_shape_tensor(field: SchemaView<'_>, format: &str) -> Result<TensorType> {
    let n = list_size(format)?.ok_or_else(|| {
        bad_extension(format!("storage must be a fixed-size list, not {format:?}"))
    })?;
    let json = field
        .metadata_value(EXTENSION_METADATA)?
        .ok_or_else(|| bad_extension("no ARROW:extension:metadata"))?;
    let params = FixedShape::parse(json)?;
    let size = params
        .shape
        .iter()
        .try_fold(1i64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| bad_extension(format!("shape {:?} overflows", params.shape)))?;
    if size != n {
        return Err(bad_extension(format!(
            "shape {:?} holds {size} values but the list size is {n}",
            params.shape
        )));
    }
    let value = tensor_type(single_child(field)?)?;
    if !value.list_sizes.is_empty() {
        return Err(bad_extension("the value type must be a primitive type"));
    }
    let cell = params.into_logical()?;
    Ok(TensorType {
        dtype: value.dtype,
        packed_bool: value.packed_bool,
        cell_shape: cell.shape,
        cell_strides: cell.strides,
        list_sizes: vec![n],
        dim_names: cell.dim_names,
    })
}

// ------------------------------------------------------------------------------------------
// Import
// ------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use super::export::{physical_cell, physical_shape};
    use crate::device::Device;
    use crate::layout::Layout;
    use crate::tensor::{Tensor, TensorFlags};

    fn tensor(shape: &[i64], strides: &[i64]) -> Tensor {
        let n: i64 = shape
            .iter()
            .zip(strides)
            .map(|(n, s)| (n - 1) * s)
            .sum::<i64>()
            + 1;
        let base = Tensor::from_vec((0..n).map(|x| x as f32).collect(), &[n as usize]).unwrap();
        let layout = Layout::new(shape, Some(strides), 4).unwrap();
        // SAFETY: the layout reaches offsets 0..n of the base's n elements.
        unsafe {
            Tensor::from_raw_parts(
                base.raw_data(),
                0,
                Device::CPU,
                DType::FLOAT32,
                layout,
                TensorFlags::WRITABLE,
                base.owner().clone(),
            )
        }
        .unwrap()
    }

    /// Export, then import through the C structs: what a consumer sees. Returns the import,
    /// whether the export copied, and the exported field.
    fn round_trip(t: &Tensor, options: &ExportOptions) -> (Tensor, bool, SchemaSpec) {
        let exported = export(t, options).unwrap();
        let (copied, field) = (exported.copied, exported.schema.clone());
        let schema = Arc::new(exported.schema.export().unwrap());
        // SAFETY: the export's schema describes its array, whose buffers are the tensor's
        // memory (or a copy) kept alive by the owner it carries.
        let data = unsafe { ArrowData::new(schema, exported.array.export(exported.device)) };
        (tensor_from_arrow(data, None).unwrap(), copied, field)
    }

    #[test]
    fn formats_round_trip() {
        for dt in crate::dtype::all_dtypes() {
            if let Some(f) = format_of(dt) {
                let back = dtype_of_format(f).unwrap();
                assert!(back == dt || dt == DType::BOOL && back == DType::INT8);
            }
        }
        assert_eq!(format_of(DType::BFLOAT16), None);
        assert_eq!(format_of(DType::COMPLEX64), None);
        assert_eq!(format_of(DType::FLOAT16), Some("e"));
    }

    #[test]
    fn fixed_shape_metadata() {
        let p = FixedShape::parse(br#"{ "dim_names": ["C","H","W"], "shape": [100, 200, 500] }"#)
            .unwrap();
        assert_eq!(p.shape, vec![100, 200, 500]);
        assert_eq!(
            p.to_json(),
            r#"{"shape":[100,200,500],"dim_names":["C","H","W"]}"#
        );
        // The spec's example: permutation [2, 0, 1] => logical shape [500, 100, 200].
        let p = FixedShape::parse(br#"{"shape":[100,200,500],"permutation":[2,0,1]}"#).unwrap();
        let cell = p.logical().unwrap();
        assert_eq!(cell.shape, vec![500, 100, 200]);
        assert_eq!(cell.strides, vec![1, 100_000, 500]);
        assert_eq!(
            p.to_json(),
            r#"{"shape":[100,200,500],"permutation":[2,0,1]}"#
        );
        for bad in [
            &br#"{"shape":[2,-1]}"#[..],
            br#"{"shape":[2,2],"permutation":[0,0]}"#,
            br#"{"shape":[2,2],"permutation":[0]}"#,
            br#"{"shape":[2,2],"dim_names":["x"]}"#,
            br#"{"permutation":[0]}"#,
            br#"[1,2]"#,
            b"",
        ] {
            assert!(
                FixedShape::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn export_orders_follow_the_spec_example() {
        // Logical cell [500, 100, 200] stored as physical [100, 200, 500] (spec §8.1 check).
        let cell = [500i64, 100, 200];
        let strides = [1i64, 100_000, 500];
        let t = tensor(&[1, 5, 4, 3], &[60, 1, 15, 5]);
        assert_eq!(physical_cell(&t), Some(vec![1, 2, 0]));
        let (shape, perm) = physical_shape(&cell, &[1, 2, 0]);
        assert_eq!(shape, vec![100, 200, 500]);
        assert_eq!(perm, Some(vec![2, 0, 1]));
        let p = FixedShape {
            shape,
            permutation: perm,
            dim_names: None,
        };
        assert_eq!(p.logical().unwrap().strides, strides.to_vec());
    }

    #[test]
    fn layouts_round_trip_zero_copy_or_copied() {
        let cases: &[(&[i64], &[i64], bool)] = &[
            (&[6], &[1], true),
            (&[4, 3, 2], &[6, 2, 1], true),
            (&[4, 3, 2], &[6, 1, 3], true),         // transposed cells
            (&[2, 3, 4, 5], &[60, 1, 3, 12], true), // non-involutive permutation
            (&[4, 1, 3], &[3, 99, 1], true),        // unit dim with a junk stride
            (&[3, 4], &[1, 3], false),              // F-order: batch not outermost
            (&[6], &[2], false),                    // gaps
            (&[4, 3], &[6, 2], false),
            (&[0, 3], &[3, 1], true),
        ];
        for &(shape, strides, zero_copy) in cases {
            let t = tensor(shape, strides);
            let (back, copied, _) = round_trip(&t, &ExportOptions::default());
            assert_eq!(back.shape(), shape, "{shape:?} {strides:?}");
            assert_eq!(back.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
            assert_eq!(!copied, zero_copy, "{shape:?} {strides:?}");
            if zero_copy && t.size() > 0 {
                assert_eq!(back.data_ptr(), t.data_ptr());
                for ((n, got), want) in shape.iter().zip(back.strides()).zip(t.strides()) {
                    assert!(*n == 1 || got == want, "{shape:?}");
                }
            }
            assert!(back.is_readonly());
        }
    }

    #[test]
    fn bools_export_as_bool8_or_packed() {
        let t = Tensor::from_vec(vec![1u8, 0, 1, 1, 0], &[5]).unwrap();
        // SAFETY: same bytes as bools (0/1), same owner.
        let t = unsafe {
            Tensor::from_raw_parts(
                t.raw_data(),
                0,
                Device::CPU,
                DType::BOOL,
                t.layout().clone(),
                TensorFlags::WRITABLE,
                t.owner().clone(),
            )
        }
        .unwrap();
        let schema = export_schema(&t, &ExportOptions::default()).unwrap();
        assert_eq!(schema.format, "c");
        assert_eq!(schema.metadata[0].1, BOOL8);
        let (back, copied, _) = round_trip(&t, &ExportOptions::default());
        assert!(!copied);
        assert_eq!(back.dtype(), DType::BOOL);
        assert_eq!(back.data_ptr(), t.data_ptr());
        let packed = ExportOptions {
            packed_bool: true,
            ..ExportOptions::default()
        };
        let (back, copied, field) = round_trip(&t, &packed);
        assert!(copied);
        assert_eq!(field.format, "b");
        assert_eq!(back.host_bytes().unwrap(), &[1, 0, 1, 1, 0]);
        assert!(back.is_copied());
        let plain = ExportOptions {
            extensions: false,
            ..ExportOptions::default()
        };
        let (back, _, _) = round_trip(&t, &plain);
        assert_eq!(back.dtype(), DType::INT8);
    }

    #[test]
    fn dim_names_are_written_in_physical_order() {
        let names_of = |options: &ExportOptions| {
            let field = export_schema(&tensor(&[2, 3, 4], &[12, 1, 3]), options).unwrap();
            assert_eq!(
                field,
                export(&tensor(&[2, 3, 4], &[12, 1, 3]), options)
                    .unwrap()
                    .schema
            );
            FixedShape::parse(field.metadata[1].1.as_bytes())
                .unwrap()
                .dim_names
        };
        // Cells of logical shape (3, 4) stored transposed: physically (4, 3).
        let named = ExportOptions {
            dim_names: Some(vec!["H".into(), "W".into()]),
            ..ExportOptions::default()
        };
        assert_eq!(names_of(&named), Some(vec!["W".into(), "H".into()]));
        // Names of the wrong count are left out.
        let one_name = ExportOptions {
            dim_names: Some(vec!["H".into()]),
            ..ExportOptions::default()
        };
        assert_eq!(names_of(&one_name), None);
    }

    #[test]
    fn unexportable_tensors_are_refused() {
        let t = Tensor::from_vec(vec![half::bf16::ZERO; 2], &[2]).unwrap();
        assert!(matches!(
            export(&t, &ExportOptions::default()),
            Err(Error::UnsupportedFormat { .. })
        ));
        let s = Tensor::from_vec(vec![1.0f32], &[]).unwrap();
        assert!(export(&s, &ExportOptions::default()).is_err());
    }

    #[test]
    fn nested_lists_read_as_dimensions() {
        let t = tensor(&[2, 3, 4], &[12, 4, 1]);
        let plain = ExportOptions {
            extensions: false,
            ..ExportOptions::default()
        };
        let (back, _, field) = round_trip(&t, &plain);
        assert_eq!(field.format, "+w:12");
        assert!(field.metadata.is_empty());
        // Without the extension, the cell is a flat list of 12 values.
        assert_eq!(back.shape(), &[2, 12]);
        let nested = SchemaSpec {
            children: vec![SchemaSpec {
                children: vec![SchemaSpec::new("f", "", 0)],
                ..SchemaSpec::new("+w:4", "", 0)
            }],
            ..SchemaSpec::new("+w:3", "", 0)
        }
        .export()
        .unwrap();
        let ty = tensor_type(nested.view()).unwrap();
        assert_eq!(ty.cell_shape, vec![3, 4]);
        assert_eq!(ty.cell_strides, vec![4, 1]);
        assert_eq!(ty.list_sizes, vec![3, 4]);
    }

    #[test]
    fn fill_values_must_fit_the_dtype() {
        let int = FillValue::Int(-1);
        assert_eq!(int.to_bytes(DType::INT8).unwrap(), vec![0xff]);
        assert!(int.to_bytes(DType::UINT32).is_err());
        assert!(FillValue::Int(300).to_bytes(DType::UINT8).is_err());
        assert!(FillValue::Float(1.5).to_bytes(DType::INT32).is_err());
        assert!(FillValue::Float(1e300).to_bytes(DType::FLOAT32).is_err());
        assert!(FillValue::Float(f64::NAN).to_bytes(DType::FLOAT16).is_ok());
        assert_eq!(FillValue::Int(1).to_bytes(DType::BOOL).unwrap(), vec![1]);
        assert!(FillValue::Int(2).to_bytes(DType::BOOL).is_err());
        assert_eq!(
            FillValue::Bool(true).to_bytes(DType::FLOAT64).unwrap(),
            1.0f64.to_ne_bytes().to_vec()
        );
        assert!(FillValue::Int(0).to_bytes(DType::BFLOAT16).is_err());
    }

    static CELLS: [f32; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    static ONE_NULL_CELL: [u8; 1] = [0b101];

    #[test]
    fn null_cells_are_filled_or_reported_over_the_whole_cell() {
        let list = SchemaSpec {
            children: vec![SchemaSpec::new("f", "", 0)],
            ..SchemaSpec::new("+w:2", "", 0)
        };
        let schema = Arc::new(list.export().unwrap());
        let data = |schema: &Arc<crate::arrow::OwnedSchema>| {
            let array = ArraySpec {
                length: 3,
                null_count: 1,
                buffers: vec![ONE_NULL_CELL.as_ptr().cast()],
                children: vec![ArraySpec {
                    length: 6,
                    buffers: vec![std::ptr::null(), CELLS.as_ptr().cast()],
                    ..ArraySpec::default()
                }],
                ..ArraySpec::default()
            };
            // SAFETY: the schema describes the array, whose buffers are static data.
            unsafe { ArrowData::new(schema.clone(), array.export(Device::CPU)) }
        };
        assert!(
            tensor_from_arrow(data(&schema), None)
                .unwrap_err()
                .to_string()
                .contains("1 null cell")
        );
        let report = import_arrow(data(&schema), Some(false), Nulls::Report).unwrap();
        assert_eq!(report.values.data_ptr(), CELLS.as_ptr() as usize);
        let valid = report.validity.unwrap();
        assert_eq!(valid.host_bytes().unwrap(), &[1, 1, 0, 0, 1, 1]);
        let fill = Nulls::Fill(FillValue::Int(-1));
        let filled = import_arrow(data(&schema), None, fill).unwrap();
        assert_eq!(
            filled.values.to_vec::<f32>().unwrap(),
            vec![1.0, 2.0, -1.0, -1.0, 5.0, 6.0]
        );
        assert!(filled.values.is_copied() && !filled.values.is_readonly());
        assert!(matches!(
            import_arrow(data(&schema), Some(false), fill),
            Err(Error::CopyRequired { .. })
        ));
    }

    #[test]
    fn unsupported_formats_name_the_way_out() {
        for (format, needle) in [
            ("u", "strings"),
            ("tsu:", "cast"),
            ("+s", "fixed-size"),
            ("d:10,2", "float64"),
        ] {
            let schema = SchemaSpec::new(format, "", 0).export().unwrap();
            let err = tensor_type(schema.view()).unwrap_err().to_string();
            assert!(err.contains(needle), "{format}: {err}");
        }
        let unknown_extension = SchemaSpec {
            metadata: vec![(EXTENSION_NAME.into(), "my.ext".into())],
            ..SchemaSpec::new("f", "", 0)
        }
        .export()
        .unwrap();
        assert_eq!(
            tensor_type(unknown_extension.view()).unwrap().dtype,
            DType::FLOAT32
        );
    }
}
