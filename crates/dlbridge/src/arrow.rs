//! Tensor <-> Arrow C Data / C Device Data.
//!
//! **Import** (an [`ArrowData`] -> [`Tensor`]): primitive numeric arrays, fixed-size lists of
//! them (nested too), the `arrow.fixed_shape_tensor` extension (shape, permutation, dim_names),
//! `arrow.bool8` (zero-copy) and bit-packed booleans (format `b`, unpacked by a copy). Sliced
//! arrays (`offset`) and empty arrays are zero-copy; results are read-only (Arrow data is
//! immutable). Nulls cannot cross into DLPack: they are refused with a message naming the fix.
//! Unknown extension types are read as their storage type.
//!
//! **Export** (a [`Tensor`] -> [`ArrowExport`]): a 1-d tensor becomes a primitive array; an
//! N-d tensor an `arrow.fixed_shape_tensor` array over a `FixedSizeList` (the first dimension is
//! the batch, the others the cell shape), with a `permutation` when the cell is a transposed
//! row-major layout. `bool` becomes the canonical `arrow.bool8` extension (int8 storage,
//! zero-copy) rather than Arrow's bit-packed boolean, which would need a copy; a consumer may
//! still ask for the bit-packed form with a requested schema. Layouts Arrow cannot express
//! (gaps, negative or overlapping strides, a batch dimension that is not the outermost) are
//! exported as a C-order copy (DECISIONS.md). dtypes without an Arrow type (bfloat16, complex,
//! float8...) are refused.
//!
//! Permutations follow the specification (logical dimension `i` is physical dimension
//! `permutation[i]`). Arrow C++ (and so pyarrow) reads and writes the inverse mapping for
//! permutations that are not their own inverse; involutive ones (every 2-d transpose, `[2,1,0]`,
//! `[0,2,1]`...) mean the same in both.

use std::sync::Arc;

use serde_json::Value;

use crate::copy::{HostBuffer, Order};
use crate::device::Device;
use crate::dtype::{DType, TypeCode};
use crate::error::{Error, Result};
use crate::ffi::arrow::{
    host_tensor, ArraySpec, ArrowData, Node, SchemaSpec, SchemaView, FLAG_NULLABLE,
};
use crate::layout::{c_strides, Layout};
use crate::tensor::{Owner, Tensor};

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
pub fn format_of(dtype: DType) -> Option<&'static str> {
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
pub fn dtype_of_format(format: &str) -> Option<DType> {
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

fn bad_extension(reason: impl Into<String>) -> Error {
    Error::InvalidLayout(format!("{FIXED_SHAPE_TENSOR}: {}", reason.into()))
}

// ------------------------------------------------------------------------------------------
// Types
// ------------------------------------------------------------------------------------------

/// How an Arrow field reads as a tensor: the element type and the shape of one item (cell).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorType {
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
    pub fn cell_size(&self) -> Result<i64> {
        self.list_sizes
            .iter()
            .try_fold(1i64, |acc, &n| acc.checked_mul(n))
            .ok_or_else(|| Error::InvalidLayout("the fixed-size list sizes overflow".to_owned()))
    }
}

/// Read an Arrow field as a tensor type.
pub fn tensor_type(field: SchemaView<'_>) -> Result<TensorType> {
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
        Some(b't') => "temporal types have no DLPack dtype; cast to their integer storage first (e.g. arr.cast(pyarrow.int64()))",
        Some(b'd') => "decimals have no DLPack dtype; cast to float64 first",
        Some(b'+') => "only fixed-size lists (and the fixed_shape_tensor extension) of numbers map to tensors",
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
    /// read directly (see [`crate::fixed_shape_json`]), anything else by a general JSON parser.
    pub fn parse(json: &[u8]) -> Result<Self> {
        match crate::fixed_shape_json::parse(json) {
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

fn nulls_error(format: &str, nulls: i64, cells: bool) -> Error {
    let what = match (cells, nulls) {
        (true, 1) => "null cell",
        (true, _) => "null cells",
        (false, 1) => "null value",
        (false, _) => "null values",
    };
    Error::Nulls {
        format: format.to_owned(),
        count: nulls,
        what,
    }
}

/// What an import does with nulls (DLPack has no validity bitmap).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Nulls {
    /// Refuse them: the data cannot be exchanged faithfully.
    #[default]
    Refuse,
    /// Keep the values in place (those under nulls are unspecified) and report the validity.
    Report,
    /// Replace them by a value in a fresh copy, and report the validity.
    Fill(FillValue),
}

/// A value to put in place of nulls, checked against the dtype when it is used.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FillValue {
    /// A boolean (also 0/1 for numbers).
    Bool(bool),
    /// An integer.
    Int(i128),
    /// A floating-point number (integer dtypes refuse it).
    Float(f64),
}

impl FillValue {
    /// The value's bytes as an element of `dtype` (native-endian); an error when `dtype`
    /// cannot hold it exactly (a fraction or out-of-range integer, a finite float that
    /// overflows, anything but 0/1 for `bool`).
    pub fn to_bytes(self, dtype: DType) -> Result<Vec<u8>> {
        let refuse = || {
            Error::InvalidArgument(format!(
                "fill_null={} cannot be stored as {dtype}",
                match self {
                    Self::Bool(b) =>
                        if b {
                            "True".to_owned()
                        } else {
                            "False".to_owned()
                        },
                    Self::Int(i) => i.to_string(),
                    Self::Float(f) => format!("{f:?}"),
                }
            ))
        };
        let int = match self {
            Self::Bool(b) => Some(i128::from(b)),
            Self::Int(i) => Some(i),
            Self::Float(_) => None,
        };
        macro_rules! int_bytes {
            ($t:ty) => {
                int.and_then(|i| <$t>::try_from(i).ok())
                    .map(|v| v.to_ne_bytes().to_vec())
                    .ok_or_else(refuse)
            };
        }
        let float = match self {
            Self::Float(f) => f,
            Self::Bool(_) | Self::Int(_) => int.unwrap_or_default() as f64,
        };
        let finite = |ok: bool| {
            if ok || !float.is_finite() {
                Ok(())
            } else {
                Err(refuse())
            }
        };
        match (dtype.code(), dtype.bits(), dtype.lanes()) {
            (TypeCode::BOOL, 8, 1) => match int {
                Some(i @ (0 | 1)) => Ok(vec![i as u8]),
                _ => Err(refuse()),
            },
            (TypeCode::INT, 8, 1) => int_bytes!(i8),
            (TypeCode::INT, 16, 1) => int_bytes!(i16),
            (TypeCode::INT, 32, 1) => int_bytes!(i32),
            (TypeCode::INT, 64, 1) => int_bytes!(i64),
            (TypeCode::UINT, 8, 1) => int_bytes!(u8),
            (TypeCode::UINT, 16, 1) => int_bytes!(u16),
            (TypeCode::UINT, 32, 1) => int_bytes!(u32),
            (TypeCode::UINT, 64, 1) => int_bytes!(u64),
            (TypeCode::FLOAT, 16, 1) => {
                let v = half::f16::from_f64(float);
                finite(v.is_finite())?;
                Ok(v.to_ne_bytes().to_vec())
            }
            (TypeCode::FLOAT, 32, 1) => {
                let v = float as f32;
                finite(v.is_finite())?;
                Ok(v.to_ne_bytes().to_vec())
            }
            (TypeCode::FLOAT, 64, 1) => Ok(float.to_ne_bytes().to_vec()),
            _ => Err(refuse()),
        }
    }
}

/// An Arrow array read as a tensor, with what DLPack cannot carry alongside.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The values, shape `(length, *cell_shape)`.
    pub values: Tensor,
    /// With [`Nulls::Report`] or [`Nulls::Fill`] and nulls present: a C-contiguous `bool`
    /// tensor of the values' shape, true where the value is present (a null cell is false
    /// over all its elements). `None` when every value is present.
    pub validity: Option<Tensor>,
    /// Logical names of the cell's dimensions (`arrow.fixed_shape_tensor` `dim_names`).
    pub dim_names: Option<Vec<String>>,
}

/// Import an array (with its schema) as a tensor of shape `(length, *cell_shape)`.
///
/// Zero-copy and read-only, except for bit-packed booleans, which are unpacked into a new
/// writable tensor (refused with `copy=Some(false)`). `data` becomes the tensor's owner, so
/// the array is released when the last user of its memory is gone; wrap it in a type that
/// implements `AsRef<ArrowData>` to control where that release runs. `copy=Some(true)` is left
/// to the caller (the copy policy of `from_dlpack`). Nulls are refused: see [`import_arrow`].
pub fn tensor_from_arrow<D>(data: D, copy: Option<bool>) -> Result<Tensor>
where
    D: AsRef<ArrowData> + Send + Sync + 'static,
{
    Ok(import_arrow(data, copy, Nulls::Refuse)?.values)
}

/// [`tensor_from_arrow`] with a choice of what to do with nulls, and the dimension names.
/// Filling nulls copies (refused with `copy=Some(false)`); reporting them does not.
pub fn import_arrow<D>(data: D, copy: Option<bool>, nulls: Nulls) -> Result<Imported>
where
    D: AsRef<ArrowData> + Send + Sync + 'static,
{
    let data = Arc::new(data);
    let root = (*data).as_ref().root()?;
    let ty = tensor_type(root.schema())?;
    if ty.packed_bool && copy == Some(false) {
        return Err(Error::CopyRequired {
            reason: "Arrow booleans are bit-packed and DLPack's are one byte each".to_owned(),
        });
    }
    let fill = match nulls {
        Nulls::Fill(value) => Some(value.to_bytes(ty.dtype)?),
        Nulls::Refuse | Nulls::Report => None,
    };
    let owner: Owner = data.clone();
    let (values, validity) = read(root, &ty, owner, nulls == Nulls::Refuse)?;
    let values = match (&validity, fill) {
        (Some(valid), Some(value)) => {
            if copy == Some(false) {
                return Err(Error::CopyRequired {
                    reason: "filling the nulls writes a new array".to_owned(),
                });
            }
            fill_nulls(&values, valid.host_bytes()?, &value)?
        }
        _ => values,
    };
    Ok(Imported {
        values,
        validity,
        dim_names: ty.dim_names,
    })
}

/// Walk the fixed-size-list levels down to the values and build the tensor over the values
/// buffer; nulls in the items used are refused (`refuse`) or returned as a validity mask.
fn read(
    root: Node<'_>,
    ty: &TensorType,
    owner: Owner,
    refuse: bool,
) -> Result<(Tensor, Option<Tensor>)> {
    let length = root.length();
    if length < 0 {
        return Err(Error::InvalidLayout(format!(
            "negative Arrow length {length}"
        )));
    }
    let overflow = || Error::InvalidLayout("fixed-size list extents overflow".to_owned());
    let cell_size = ty.cell_size()?;
    let values = length.checked_mul(cell_size).ok_or_else(overflow)?;
    // Physical-order validity of the values read (1 = present), made at the first null.
    let mut mask: Option<HostBuffer> = None;
    let mut node = root;
    // Logical range of items used at the current level, and the values one item spans.
    let (mut start, mut count, mut span) = (0i64, length, cell_size);
    for (level, &n) in ty.list_sizes.iter().enumerate() {
        check_plain(node)?;
        let items = Level {
            node,
            start,
            count,
            n_buffers: 1,
            span,
        };
        items.record(refuse, values, &mut mask, node.schema(), level == 0)?;
        let physical = node.offset().checked_add(start);
        let Some(child) = node.single_child()? else {
            return Err(Error::InvalidLayout(format!(
                "a fixed-size list array must have one child, not {}",
                node.children()?.len()
            )));
        };
        start = physical
            .and_then(|p| p.checked_mul(n))
            .ok_or_else(overflow)?;
        count = count.checked_mul(n).ok_or_else(overflow)?;
        span = if n == 0 { 0 } else { span / n };
        node = child;
    }
    check_plain(node)?;
    let leaf = Level {
        node,
        start,
        count,
        n_buffers: 2,
        span: 1,
    };
    leaf.record(refuse, values, &mut mask, root.schema(), false)?;
    let physical = node
        .offset()
        .checked_add(start)
        .ok_or_else(|| Error::InvalidLayout("Arrow offsets overflow".to_owned()))?;
    // Shape and strides on the stack for the usual few dimensions.
    let ndim = 1 + ty.cell_shape.len();
    let mut inline = [0i64; 16];
    let mut heap = vec![];
    let dims: &mut [i64] = if 2 * ndim <= inline.len() {
        &mut inline[..2 * ndim]
    } else {
        heap.resize(2 * ndim, 0);
        &mut heap
    };
    let (shape, strides) = dims.split_at_mut(ndim);
    shape[0] = length;
    shape[1..].copy_from_slice(&ty.cell_shape);
    strides[0] = cell_size;
    strides[1..].copy_from_slice(&ty.cell_strides);
    let (shape, strides) = (&*shape, &*strides);
    let layout = Layout::new(shape, Some(strides), ty.dtype.itemsize())?;
    let tensor = if ty.packed_bool {
        node.unpack_bools(physical, layout)?
    } else {
        // SAFETY: `owner` holds the array `node` belongs to (see `import_arrow`).
        unsafe { node.values_tensor(physical, layout, ty.dtype, owner) }?
    };
    let validity = match mask {
        None => None,
        Some(mask) => {
            // The mask is in the values' physical order: view it through their layout.
            let physical =
                host_tensor(mask, 0, DType::BOOL, Layout::new(shape, Some(strides), 1)?)?;
            Some(if physical.is_c_contiguous() {
                physical
            } else {
                physical.copy(Order::C)?
            })
        }
    };
    Ok((tensor, validity))
}

/// The items `[start, start + count)` of one level, each spanning `span` values.
struct Level<'a> {
    node: Node<'a>,
    start: i64,
    count: i64,
    n_buffers: usize,
    span: i64,
}

impl Level<'_> {
    /// Refuse nulls among the items (`refuse`; the error names the format of `field` and says
    /// whether the items are `cells`), or clear the values they span in `mask` (made on first
    /// use, `values` long).
    fn record(
        &self,
        refuse: bool,
        values: i64,
        mask: &mut Option<HostBuffer>,
        field: SchemaView<'_>,
        cells: bool,
    ) -> Result<()> {
        let nulls = self
            .node
            .count_nulls(self.start, self.count, self.n_buffers)?;
        if nulls == 0 {
            return Ok(());
        }
        if refuse {
            return Err(nulls_error(field.format()?, nulls, cells));
        }
        let mask = match mask {
            Some(mask) => mask,
            None => {
                let mut ones = HostBuffer::new(values as usize)?;
                ones.as_mut_slice().fill(1);
                mask.insert(ones)
            }
        };
        let span = self.span as usize;
        let bytes = mask.as_mut_slice();
        for j in self
            .node
            .null_positions(self.start, self.count, self.n_buffers)?
        {
            bytes[j * span..(j + 1) * span].fill(0);
        }
        Ok(())
    }
}

/// A C-contiguous, writable copy of `values` with `value` (one element's bytes) wherever
/// `valid` (C-order, one byte per element) is 0.
fn fill_nulls(values: &Tensor, valid: &[u8], value: &[u8]) -> Result<Tensor> {
    let contiguous = if values.is_c_contiguous() {
        values.clone()
    } else {
        values.copy(Order::C)?
    };
    let bytes = contiguous.host_bytes()?;
    let mut out = HostBuffer::new(bytes.len())?;
    let filled = out.as_mut_slice();
    filled.copy_from_slice(bytes);
    let size = value.len();
    for (i, _) in valid.iter().enumerate().filter(|(_, v)| **v == 0) {
        filled[i * size..(i + 1) * size].copy_from_slice(value);
    }
    host_tensor(
        out,
        0,
        values.dtype(),
        Layout::contiguous(values.shape(), size)?,
    )
}

fn check_plain(node: Node<'_>) -> Result<()> {
    if node.has_dictionary() {
        return Err(unsupported(
            node.schema().format()?,
            "the array has a dictionary",
        ));
    }
    Ok(())
}

/// Join the tensors of a stream's chunks along the first dimension: the single chunk itself
/// (zero-copy), an empty tensor for no chunk, or a new C-contiguous copy for several (refused
/// with `copy=Some(false)`).
pub fn concatenate(
    field: SchemaView<'_>,
    mut chunks: Vec<Tensor>,
    copy: Option<bool>,
) -> Result<Tensor> {
    if chunks.len() == 1 {
        return Ok(chunks.remove(0));
    }
    if chunks.len() > 1 && copy == Some(false) {
        return Err(Error::CopyRequired {
            reason: format!(
                "the data comes in {} chunks; joining them copies (combine_chunks() would too)",
                chunks.len()
            ),
        });
    }
    let ty = tensor_type(field)?;
    for chunk in &chunks {
        if chunk.dtype() != ty.dtype || chunk.shape()[1..] != ty.cell_shape[..] {
            return Err(Error::InvalidLayout(
                "a stream chunk does not match the stream's schema".to_owned(),
            ));
        }
    }
    join(&chunks, ty.dtype, &ty.cell_shape)
}

/// [`concatenate`] for chunks imported with their validity: the masks are joined too (all
/// present for chunks without nulls), and the stream's dimension names kept.
pub fn concatenate_imported(
    field: SchemaView<'_>,
    mut chunks: Vec<Imported>,
    copy: Option<bool>,
) -> Result<Imported> {
    if chunks.len() == 1 {
        return Ok(chunks.remove(0));
    }
    let with_nulls = chunks.iter().any(|c| c.validity.is_some());
    let mut values = Vec::with_capacity(chunks.len());
    let mut masks = Vec::with_capacity(chunks.len());
    for chunk in chunks {
        if with_nulls {
            masks.push(match chunk.validity {
                Some(mask) => mask,
                None => all_valid(chunk.values.shape())?,
            });
        }
        values.push(chunk.values);
    }
    let values = concatenate(field, values, copy)?;
    let validity = if with_nulls {
        Some(join(&masks, DType::BOOL, &values.shape()[1..])?)
    } else {
        None
    };
    Ok(Imported {
        values,
        validity,
        dim_names: tensor_type(field)?.dim_names,
    })
}

/// A C-contiguous `bool` tensor of `shape`, all true.
pub fn all_valid(shape: &[i64]) -> Result<Tensor> {
    let layout = Layout::contiguous(shape, 1)?;
    let mut ones = HostBuffer::new(layout.size())?;
    ones.as_mut_slice().fill(1);
    host_tensor(ones, 0, DType::BOOL, layout)
}

/// Join tensors of `dtype` and `cell_shape` along the first dimension into a new
/// C-contiguous tensor.
fn join(chunks: &[Tensor], dtype: DType, cell_shape: &[i64]) -> Result<Tensor> {
    let mut length = 0i64;
    let mut nbytes = 0usize;
    for chunk in chunks {
        length = length.checked_add(chunk.shape()[0]).ok_or_else(|| {
            Error::InvalidLayout("the stream's chunk lengths overflow".to_owned())
        })?;
        nbytes += chunk.nbytes();
    }
    let mut buffer = HostBuffer::new(nbytes)?;
    let mut pos = 0;
    for chunk in chunks {
        let contiguous = if chunk.is_c_contiguous() {
            chunk.clone()
        } else {
            chunk.copy(Order::C)?
        };
        let bytes = contiguous.host_bytes()?;
        buffer.as_mut_slice()[pos..pos + bytes.len()].copy_from_slice(bytes);
        pos += bytes.len();
    }
    let shape: Vec<i64> = std::iter::once(length)
        .chain(cell_shape.iter().copied())
        .collect();
    host_tensor(
        buffer,
        0,
        dtype,
        Layout::contiguous(&shape, dtype.itemsize())?,
    )
}

// ------------------------------------------------------------------------------------------
// Export
// ------------------------------------------------------------------------------------------

/// Choices a consumer can make through a requested schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportOptions {
    /// Annotate with extension types (`arrow.fixed_shape_tensor`, `arrow.bool8`); without,
    /// only the storage types are exported.
    pub extensions: bool,
    /// Export `bool` as Arrow's bit-packed boolean (a copy) instead of `arrow.bool8`.
    pub packed_bool: bool,
}

impl Default for ExportOptions {
    fn default() -> Self {
        Self {
            extensions: true,
            packed_bool: false,
        }
    }
}

impl ExportOptions {
    /// Best effort at a consumer's `requested_schema`: the bit-packed boolean and the bare
    /// storage type (no extension) can be produced; any other request gets the default
    /// schema, which the consumer must inspect (and cast) anyway.
    pub fn for_request(tensor: &Tensor, requested: SchemaView<'_>) -> Result<Self> {
        let default = export_schema(tensor, &Self::default())?;
        let mut options = Self::default();
        let mut leaf = requested;
        while list_size(leaf.format()?)?.is_some() {
            leaf = single_child(leaf)?;
        }
        let depth = |s: &SchemaSpec| if s.children.is_empty() { 0 } else { 1 };
        let requested_depth = usize::from(leaf.format()? != requested.format()?);
        if tensor.dtype() == DType::BOOL
            && leaf.format()? == "b"
            && requested_depth == depth(&default)
        {
            options.packed_bool = true;
        }
        let without_extension = requested.metadata_value(EXTENSION_NAME)?.is_none();
        let same_storage =
            requested.format()? == default.format || options.packed_bool && requested_depth == 0;
        if without_extension && same_storage {
            options.extensions = false;
        }
        Ok(options)
    }
}

/// A tensor as Arrow: the field, the array (which keeps the memory alive), and the device.
#[derive(Debug)]
pub struct ArrowExport {
    /// The field.
    pub schema: SchemaSpec,
    /// The array.
    pub array: ArraySpec,
    /// Where the buffers live.
    pub device: Device,
    /// True when the buffers are a copy made for this export.
    pub copied: bool,
}

/// The Arrow field a tensor exports as (what [`export`] would produce).
pub fn export_schema(tensor: &Tensor, options: &ExportOptions) -> Result<SchemaSpec> {
    export_schema_named(tensor, options, None)
}

/// [`export_schema`] with logical names for the cell's dimensions (see [`export_named`]).
pub fn export_schema_named(
    tensor: &Tensor,
    options: &ExportOptions,
    dim_names: Option<&[String]>,
) -> Result<SchemaSpec> {
    check_exportable(tensor)?;
    let cell: Vec<i64> = tensor.shape()[1..].to_vec();
    let identity: Vec<usize> = (0..cell.len()).collect();
    let order = if options.packed_bool && tensor.dtype() == DType::BOOL {
        identity
    } else {
        physical_cell(tensor).unwrap_or(identity) // else exported as a C-order copy
    };
    let (shape, permutation) = physical_shape(&cell, &order);
    let names = physical_names(dim_names, &order);
    field(tensor, options, &shape, permutation, names)
}

/// Export a tensor: zero-copy when Arrow can express its layout, otherwise (and for
/// bit-packed booleans) from a host copy. Device memory is never copied: a layout that needs
/// a copy is refused there.
pub fn export(tensor: &Tensor, options: &ExportOptions) -> Result<ArrowExport> {
    export_named(tensor, options, None)
}

/// [`export`] with logical names for the cell's dimensions (dimensions 1.. of the tensor),
/// written to the `arrow.fixed_shape_tensor` metadata in physical order. Names of the wrong
/// count are left out.
pub fn export_named(
    tensor: &Tensor,
    options: &ExportOptions,
    dim_names: Option<&[String]>,
) -> Result<ArrowExport> {
    check_exportable(tensor)?;
    let packed = options.packed_bool && tensor.dtype() == DType::BOOL;
    let order = if packed { None } else { physical_cell(tensor) };
    let Some(order) = order else {
        if !tensor.device().is_host_accessible() {
            return Err(Error::NotHostAccessible {
                device: tensor.device(),
            });
        }
        let copy = tensor.copy(Order::C)?;
        let mut exported = if packed {
            export_packed(&copy, options, dim_names)?
        } else {
            export_named(&copy, options, dim_names)?
        };
        exported.copied = true;
        return Ok(exported);
    };
    let cell: Vec<i64> = tensor.shape()[1..].to_vec();
    let (shape, permutation) = physical_shape(&cell, &order);
    let names = physical_names(dim_names, &order);
    let schema = field(tensor, options, &shape, permutation, names)?;
    let data = if tensor.size() == 0 && tensor.data_ptr() == 0 {
        std::ptr::null()
    } else {
        tensor.data_ptr() as *const std::ffi::c_void
    };
    let values = ArraySpec {
        length: tensor.size() as i64,
        buffers: vec![std::ptr::null(), data],
        owner: Some(tensor.owner().clone()),
        ..ArraySpec::default()
    };
    Ok(ArrowExport {
        schema,
        array: batch(tensor, values),
        device: tensor.device(),
        copied: false,
    })
}

/// Bit-pack a C-contiguous host bool tensor.
fn export_packed(
    tensor: &Tensor,
    options: &ExportOptions,
    dim_names: Option<&[String]>,
) -> Result<ArrowExport> {
    let bytes = tensor.host_bytes()?;
    let mut bits = HostBuffer::new(bytes.len().div_ceil(8))?;
    for (j, &b) in bytes.iter().enumerate() {
        bits.as_mut_slice()[j / 8] |= u8::from(b != 0) << (j % 8);
    }
    let identity: Vec<usize> = (0..tensor.ndim() - 1).collect();
    let names = physical_names(dim_names, &identity);
    let schema = field(tensor, options, &tensor.shape()[1..], None, names)?;
    let data = bits.as_slice().as_ptr().cast();
    let owner: Owner = Arc::new(bits);
    let values = ArraySpec {
        length: tensor.size() as i64,
        buffers: vec![std::ptr::null(), data],
        owner: Some(owner),
        ..ArraySpec::default()
    };
    Ok(ArrowExport {
        schema,
        array: batch(tensor, values),
        device: Device::CPU,
        copied: true,
    })
}

/// Wrap the values in a fixed-size list of the batch length for N-d tensors.
fn batch(tensor: &Tensor, values: ArraySpec) -> ArraySpec {
    if tensor.ndim() == 1 {
        return values;
    }
    let owner = values.owner.clone();
    ArraySpec {
        length: tensor.shape()[0],
        buffers: vec![std::ptr::null()],
        children: vec![values],
        owner,
        ..ArraySpec::default()
    }
}

fn check_exportable(tensor: &Tensor) -> Result<()> {
    let dtype = tensor.dtype();
    if format_of(dtype).is_none() {
        return Err(Error::UnsupportedFormat {
            format: dtype.name(),
            reason: "Arrow has no primitive type for this dtype; cast it first (e.g. to float32), or exchange it through DLPack".to_owned(),
        });
    }
    if tensor.ndim() == 0 {
        return Err(Error::InvalidLayout(
            "a 0-d tensor has no Arrow array form; reshape it to (1,) first".to_owned(),
        ));
    }
    Ok(())
}

/// The field for a tensor whose cell has physical `shape` (and `permutation`, and names of
/// the physical dimensions).
fn field(
    tensor: &Tensor,
    options: &ExportOptions,
    shape: &[i64],
    permutation: Option<Vec<usize>>,
    dim_names: Option<Vec<String>>,
) -> Result<SchemaSpec> {
    let is_bool = tensor.dtype() == DType::BOOL;
    let packed = options.packed_bool && is_bool;
    let name = if tensor.ndim() == 1 { "" } else { "item" };
    let mut values = SchemaSpec::new(
        if packed {
            "b"
        } else {
            format_of(tensor.dtype()).unwrap_or("?")
        },
        name,
        FLAG_NULLABLE,
    );
    if is_bool && !packed && options.extensions {
        values.metadata = vec![
            (EXTENSION_NAME.to_owned(), BOOL8.to_owned()),
            (EXTENSION_METADATA.to_owned(), String::new()),
        ];
    }
    if tensor.ndim() == 1 {
        return Ok(values);
    }
    let list_size: i64 = shape.iter().product();
    if list_size > i64::from(i32::MAX) {
        return Err(Error::InvalidLayout(format!(
            "a cell of {list_size} values exceeds Arrow's fixed-size list limit of 2^31 - 1"
        )));
    }
    let mut list = SchemaSpec::new(format!("+w:{list_size}"), "", FLAG_NULLABLE);
    if options.extensions {
        let params = FixedShape {
            shape: shape.to_vec(),
            permutation,
            dim_names,
        };
        list.metadata = vec![
            (EXTENSION_NAME.to_owned(), FIXED_SHAPE_TENSOR.to_owned()),
            (EXTENSION_METADATA.to_owned(), params.to_json()),
        ];
    }
    list.children = vec![values];
    Ok(list)
}

/// Physical cell shape and the spec's permutation for a cell whose dimensions are stored in
/// `order` (physical position `k` holds logical dimension `order[k]`): `P[k] = L[order[k]]`,
/// `permutation[order[k]] = k`.
fn physical_shape(cell: &[i64], order: &[usize]) -> (Vec<i64>, Option<Vec<usize>>) {
    let shape = order.iter().map(|&d| cell[d]).collect();
    let mut permutation = vec![0; order.len()];
    for (k, &d) in order.iter().enumerate() {
        permutation[d] = k;
    }
    let permutation = (!is_identity(&permutation)).then_some(permutation);
    (shape, permutation)
}

/// The names of the physical dimensions of a cell stored in `order` (see [`physical_shape`]),
/// from logical `names` (`None` unless there is one per cell dimension).
fn physical_names(names: Option<&[String]>, order: &[usize]) -> Option<Vec<String>> {
    names
        .filter(|n| n.len() == order.len())
        .map(|n| order.iter().map(|&d| n[d].clone()).collect())
}

/// If Arrow can hold the tensor in place, the storage order of its cell dimensions (logical
/// dimension at each physical position); `None` when it needs a copy. The tensor must be a
/// dense block whose first dimension is the outermost (cells one after the other) and whose
/// cell is a permuted row-major layout.
fn physical_cell(tensor: &Tensor) -> Option<Vec<usize>> {
    let shape = tensor.shape();
    let strides = tensor.strides();
    let cell = &shape[1..];
    let identity: Vec<usize> = (0..cell.len()).collect();
    if tensor.size() == 0 {
        return Some(identity);
    }
    let cell_size: i64 = cell.iter().product();
    if shape[0] > 1 && strides[0] != cell_size {
        return None;
    }
    let cell_strides = &strides[1..];
    // Dimensions of extent 1 have meaningless strides: they keep their place, the others are
    // ordered by decreasing stride.
    let mut moving: Vec<usize> = identity.iter().copied().filter(|&d| cell[d] > 1).collect();
    moving.sort_by_key(|&d| std::cmp::Reverse(cell_strides[d]));
    let mut sorted = moving.into_iter();
    let order: Vec<usize> = identity
        .iter()
        .map(|&d| {
            if cell[d] > 1 {
                sorted.next().unwrap_or(d)
            } else {
                d
            }
        })
        .collect();
    let mut expected = 1i64;
    for &d in order.iter().rev() {
        if cell[d] > 1 && cell_strides[d] != expected {
            return None;
        }
        expected *= cell[d];
    }
    Some(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(shape: &[i64], strides: &[i64]) -> Tensor {
        let n: i64 = shape
            .iter()
            .zip(strides)
            .map(|(n, s)| (n - 1) * s)
            .sum::<i64>()
            + 1;
        let base = Tensor::from_vec((0..n).map(|x| x as f32).collect(), &[n]).unwrap();
        let layout = Layout::new(shape, Some(strides), 4).unwrap();
        // SAFETY: the layout reaches offsets 0..n of the base's n elements.
        unsafe {
            Tensor::from_raw_parts(
                base.raw_data(),
                0,
                Device::CPU,
                DType::FLOAT32,
                layout,
                false,
                false,
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
            assert!(back.readonly());
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
                false,
                false,
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
            extensions: true,
            packed_bool: true,
        };
        let (back, copied, field) = round_trip(&t, &packed);
        assert!(copied);
        assert_eq!(field.format, "b");
        assert_eq!(back.host_bytes().unwrap(), &[1, 0, 1, 1, 0]);
        assert!(back.is_copied());
        let plain = ExportOptions {
            extensions: false,
            packed_bool: false,
        };
        let (back, _, _) = round_trip(&t, &plain);
        assert_eq!(back.dtype(), DType::INT8);
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
            packed_bool: false,
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
        let data = |schema: &Arc<crate::ffi::arrow::OwnedSchema>| {
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
        assert!(tensor_from_arrow(data(&schema), None)
            .unwrap_err()
            .to_string()
            .contains("1 null cell"));
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
        assert!(filled.values.is_copied() && !filled.values.readonly());
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
