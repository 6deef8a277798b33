//! Tensor -> Arrow: the schema and array that describe a tensor (primitive arrays, fixed-size
//! lists, the fixed-shape tensor extension), copying only layouts Arrow cannot express.

use std::sync::Arc;

use super::*;
use crate::copy::{HostBuffer, Order};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ffi::arrow::FLAG_NULLABLE;
use crate::tensor::{Owner, Tensor};

/// How a tensor is exported: the choices a consumer can make through a requested schema
/// ([`for_request`](ExportOptions::for_request)), and the names of the cell's dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportOptions {
    /// Annotate with extension types (`arrow.fixed_shape_tensor`, `arrow.bool8`); without,
    /// only the storage types are exported.
    pub extensions: bool,
    /// Export `bool` as Arrow's bit-packed boolean (a copy) instead of `arrow.bool8`.
    pub packed_bool: bool,
    /// Logical names of the cell's dimensions (dimensions 1.. of the tensor), written to the
    /// `arrow.fixed_shape_tensor` metadata in physical order. Names of the wrong count, and
    /// names without `extensions`, are left out.
    pub dim_names: Option<Vec<String>>,
}

impl Default for ExportOptions {
    /// Extension types on, booleans as `arrow.bool8`, no dimension names.
    fn default() -> Self {
        Self {
            extensions: true,
            packed_bool: false,
            dim_names: None,
        }
    }
}

impl ExportOptions {
    /// Best effort at a consumer's `requested_schema`: the bit-packed boolean and the bare
    /// storage type (no extension) can be produced; any other request gets the default
    /// schema, which the consumer must inspect (and cast) anyway. No dimension names.
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
    check_exportable(tensor)?;
    let cell: Vec<i64> = tensor.shape()[1..].to_vec();
    let identity: Vec<usize> = (0..cell.len()).collect();
    let order = if options.packed_bool && tensor.dtype() == DType::BOOL {
        identity
    } else {
        physical_cell(tensor).unwrap_or(identity) // else exported as a C-order copy
    };
    let (shape, permutation) = physical_shape(&cell, &order);
    let names = physical_names(options, &order);
    field(tensor, options, &shape, permutation, names)
}

/// Export a tensor: zero-copy when Arrow can express its layout, otherwise (and for
/// bit-packed booleans) from a host copy. Device memory is never copied: a layout that needs
/// a copy is refused there.
pub fn export(tensor: &Tensor, options: &ExportOptions) -> Result<ArrowExport> {
    check_exportable(tensor)?;
    let packed = options.packed_bool && tensor.dtype() == DType::BOOL;
    let order = if packed { None } else { physical_cell(tensor) };
    let Some(order) = order else {
        tensor.device().require_host()?;
        let copy = tensor.copy(Order::C)?;
        let mut exported = if packed {
            export_packed(&copy, options)?
        } else {
            export(&copy, options)?
        };
        exported.copied = true;
        return Ok(exported);
    };
    let cell: Vec<i64> = tensor.shape()[1..].to_vec();
    let (shape, permutation) = physical_shape(&cell, &order);
    let names = physical_names(options, &order);
    let schema = field(tensor, options, &shape, permutation, names)?;
    let data = if tensor.size() == 0 && tensor.data_ptr() == 0 {
        std::ptr::null()
    } else {
        tensor
            .first_element()
            .cast_const()
            .cast::<std::ffi::c_void>()
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
fn export_packed(tensor: &Tensor, options: &ExportOptions) -> Result<ArrowExport> {
    let bytes = tensor.host_bytes()?;
    let mut bits = HostBuffer::new(bytes.len().div_ceil(8))?;
    for (j, &b) in bytes.iter().enumerate() {
        bits.as_mut_slice()[j / 8] |= u8::from(b != 0) << (j % 8);
    }
    let identity: Vec<usize> = (0..tensor.ndim() - 1).collect();
    let names = physical_names(options, &identity);
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
pub(super) fn physical_shape(cell: &[i64], order: &[usize]) -> (Vec<i64>, Option<Vec<usize>>) {
    let shape = order.iter().map(|&d| cell[d]).collect();
    let mut permutation = vec![0; order.len()];
    for (k, &d) in order.iter().enumerate() {
        permutation[d] = k;
    }
    let permutation = (!is_identity(&permutation)).then_some(permutation);
    (shape, permutation)
}

/// The names of the physical dimensions of a cell stored in `order` (see [`physical_shape`]),
/// from the logical `dim_names` of `options` (`None` unless there is one per cell dimension).
fn physical_names(options: &ExportOptions, order: &[usize]) -> Option<Vec<String>> {
    options
        .dim_names
        .as_deref()
        .filter(|n| n.len() == order.len())
        .map(|n| order.iter().map(|&d| n[d].clone()).collect())
}

/// If Arrow can hold the tensor in place, the storage order of its cell dimensions (logical
/// dimension at each physical position); `None` when it needs a copy. The tensor must be a
/// dense block whose first dimension is the outermost (cells one after the other) and whose
/// cell is a permuted row-major layout.
pub(super) fn physical_cell(tensor: &Tensor) -> Option<Vec<usize>> {
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
