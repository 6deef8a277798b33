//! Arrow -> Tensor: reading an Arrow array (or chunks of one) as a tensor, with the rules for
//! nulls, bit-packed booleans and fixed-shape tensors.

use std::sync::Arc;

use super::*;
use crate::copy::{HostBuffer, Order};
use crate::dtype::{DType, TypeCode};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::tensor::{Owner, Tensor};

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
    pub(crate) fn to_bytes(self, dtype: DType) -> Result<Vec<u8>> {
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
pub(crate) fn all_valid(shape: &[i64]) -> Result<Tensor> {
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
