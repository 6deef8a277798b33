//! arrow-rs interop (feature `arrow-rs`): tensors to and from [`arrow_array`] arrays and
//! record batch columns, and Arrow C Device arrays for Rust programs.
//!
//! Everything crosses the Arrow C Data Interface, with dlbridge's own exporter and importer on
//! one side and arrow-rs's ([`arrow_array::ffi`]) on the other, so the rules are those of
//! [`arrow`](crate::arrow) and no element is copied where Arrow can hold the memory as it is:
//!
//! - [`to_array`] makes an [`ArrayRef`] whose type alone carries the shape: a primitive array
//!   for a 1-d tensor, nested fixed-size lists for an N-d one. [`to_column`] makes a
//!   [`Field`] and an [`ArrayRef`]: the field carries the `arrow.fixed_shape_tensor` extension
//!   (shape, permutation, `dim_names`) or `arrow.bool8`. [`to_record_batch`] puts several
//!   tensors in a [`RecordBatch`].
//! - [`from_array`], [`from_column`] and [`from_record_batch`] read primitive arrays,
//!   fixed-size lists (nested too) and `arrow.fixed_shape_tensor` columns as tensors of shape
//!   `(length, *cell)`, read-only and zero-copy; sliced arrays keep pointing into the
//!   original buffers. Bit-packed booleans are unpacked into a copy.
//! - Nulls are refused unless asked for: [`Nulls::Fill`] writes a value in their place (a
//!   copy), [`Nulls::Report`] returns a validity mask next to the values.
//! - arrow-rs arrays live in host memory. A tensor on another device is refused by the
//!   functions above ([`Error::NotHostAccessible`]) and crosses as a [`DeviceArray`], an
//!   owned Arrow C Device array that a C Device Data consumer can take, and that dlbridge
//!   reads back as a tensor on its device.
//! - Layouts Arrow cannot express (gaps, negative strides, a batch dimension that is not the
//!   outermost) are exported from a C-order copy, as [`export`] does;
//!   on a device such a layout is refused.
//!
//! ```
//! use std::sync::Arc;
//!
//! use arrow_array::{Array, Float32Array};
//! use dlbridge::Tensor;
//! use dlbridge::arrow::Nulls;
//! use dlbridge::arrow::arrow_rs::{from_array, from_column, to_column, to_record_batch};
//!
//! // A tensor of three 2x2 cells as an arrow.fixed_shape_tensor column, zero-copy.
//! let t = Tensor::from_vec((0..12).map(|x| x as f32).collect(), &[3, 2, 2])?;
//! let names = ["row".to_owned(), "col".to_owned()];
//! let (field, array) = to_column(&t, "images", Some(&names))?;
//! assert_eq!(field.extension_type_name(), Some("arrow.fixed_shape_tensor"));
//! assert_eq!(array.len(), 3);
//!
//! // Back again, with the cell shape and names the field carries: the same memory.
//! let back = from_column(&field, array.as_ref(), Nulls::Refuse)?;
//! assert_eq!(back.values.shape(), &[3, 2, 2]);
//! assert_eq!(back.values.data_ptr(), t.data_ptr());
//! assert_eq!(back.dim_names.as_deref(), Some(&names[..]));
//!
//! // A slice of an arrow-rs array is read in place.
//! let values: Arc<dyn Array> = Arc::new(Float32Array::from(vec![1.0, 2.0, 3.0, 4.0]));
//! let tail = from_array(values.slice(1, 3).as_ref())?;
//! assert_eq!(tail.to_vec::<f32>()?, vec![2.0, 3.0, 4.0]);
//!
//! // Several tensors of one length as the columns of a record batch.
//! let ids = Tensor::from_vec(vec![7i64, 8, 9], &[3])?;
//! let batch = to_record_batch(&[("id", &ids), ("images", &t)])?;
//! assert_eq!((batch.num_rows(), batch.num_columns()), (3, 2));
//! # Ok::<(), dlbridge::Error>(())
//! ```

use std::ffi::c_void;
use std::sync::Arc;

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema, from_ffi};
use arrow_array::{Array, ArrayRef, RecordBatch, make_array};
use arrow_schema::{ArrowError, Field, Schema};

use super::export::physical_cell;
use super::{
    ArraySpec, ArrowData, ExportOptions, Imported, Nulls, OwnedArray, OwnedSchema, SchemaSpec,
    export, import_arrow,
};
use crate::copy::Order;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::ffi::arrow::{ArrowArray, ArrowDeviceArray, ArrowSchema, FLAG_NULLABLE};
use crate::tensor::Tensor;

// arrow-rs's FFI structs are `#[repr(C)]` mirrors of the same C structs as dlbridge's: one is
// read through a pointer to the other.
const _: () = {
    use std::mem::{align_of, size_of};
    assert!(size_of::<FFI_ArrowSchema>() == size_of::<ArrowSchema>());
    assert!(align_of::<FFI_ArrowSchema>() == align_of::<ArrowSchema>());
    assert!(size_of::<FFI_ArrowArray>() == size_of::<ArrowArray>());
    assert!(align_of::<FFI_ArrowArray>() == align_of::<ArrowArray>());
};

fn arrow_error(e: ArrowError) -> Error {
    Error::InvalidArgument(format!("arrow-rs: {e}"))
}

/// The nulls error with the Rust way out in it.
fn name_the_fill(e: Error) -> Error {
    match e {
        Error::Nulls { .. } => Error::InvalidArgument(format!(
            "{e}; fill them with Nulls::Fill(FillValue::Int(0)) (a copy), or read the values \
             with a validity mask with Nulls::Report"
        )),
        e => e,
    }
}

// ------------------------------------------------------------------------------------------
// Tensor -> arrow-rs
// ------------------------------------------------------------------------------------------

/// A tensor as an arrow-rs array, without extension metadata: a primitive array for a 1-d
/// tensor, nested fixed-size lists (one level per cell dimension) for an N-d one, so that
/// the array's type alone carries the shape. `bool` becomes `Int8` (the storage of
/// `arrow.bool8`).
///
/// Zero-copy when each cell is a row-major block and the cells follow one another; other
/// layouts (transposed cells included: nested lists cannot say so, [`to_column`] can) are
/// exported from a C-order copy. Refused for tensors that are not in host memory (see
/// [`DeviceArray`]) and for dtypes without an Arrow type.
pub fn to_array(tensor: &Tensor) -> Result<ArrayRef> {
    tensor.device().require_host()?;
    let row_major = (0..tensor.ndim().saturating_sub(1)).collect::<Vec<_>>();
    if tensor.ndim() > 2 && physical_cell(tensor).is_some_and(|order| order != row_major) {
        return to_array(&tensor.copy(Order::C)?);
    }
    let mut exported = export(tensor, &ExportOptions::default())?;
    if tensor.ndim() > 1 {
        let values_field = exported.schema.children.remove(0);
        let values = exported.array.children.remove(0);
        (exported.schema, exported.array) = nested_lists(tensor, values_field, values);
    }
    let data = exported_data(exported.schema, exported.array, exported.device)?;
    Ok(into_arrow_rs(data)?.1)
}

/// The field and array of nested fixed-size lists over the values of a C-order tensor: level
/// `k` (0 = the root) holds `shape[0] * shape[1..=k]` items of `shape[k + 1]` values each.
fn nested_lists(
    tensor: &Tensor,
    mut field: SchemaSpec,
    mut array: ArraySpec,
) -> (SchemaSpec, ArraySpec) {
    let shape = tensor.shape();
    for k in (0..shape.len() - 1).rev() {
        let name = if k == 0 { "" } else { "item" };
        field = SchemaSpec {
            children: vec![field],
            ..SchemaSpec::new(format!("+w:{}", shape[k + 1]), name, FLAG_NULLABLE)
        };
        let owner = array.owner.clone();
        array = ArraySpec {
            length: shape[..=k].iter().product(),
            buffers: vec![std::ptr::null()],
            children: vec![array],
            owner,
            ..ArraySpec::default()
        };
    }
    (field, array)
}

/// A tensor as an arrow-rs column named `name`: the field, with the `arrow.fixed_shape_tensor`
/// extension for an N-d tensor (its cell shape, the permutation of transposed cells, and
/// `dim_names`, logical names of dimensions 1.., when given one per cell dimension) or
/// `arrow.bool8` for `bool`; and the array, a primitive array or a fixed-size list.
///
/// Zero-copy whenever Arrow can hold the layout (transposed cells included); otherwise from a
/// C-order copy. Refused for tensors that are not in host memory (see [`DeviceArray`]).
pub fn to_column(
    tensor: &Tensor,
    name: &str,
    dim_names: Option<&[String]>,
) -> Result<(Field, ArrayRef)> {
    tensor.device().require_host()?;
    into_arrow_rs(export_data(tensor, name, dim_names)?)
}

/// Tensors of one length (their first dimension) as the columns of a record batch, each as
/// [`to_column`] makes it (without `dim_names`: build the batch from [`to_column`]'s fields
/// and arrays for those).
pub fn to_record_batch(columns: &[(&str, &Tensor)]) -> Result<RecordBatch> {
    let mut fields = Vec::with_capacity(columns.len());
    let mut arrays = Vec::with_capacity(columns.len());
    for (name, tensor) in columns {
        let (field, array) = to_column(tensor, name, None)?;
        fields.push(field);
        arrays.push(array);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).map_err(arrow_error)
}

/// dlbridge's export of `tensor` (any device) as C structs, the root field named `name`.
fn export_data(tensor: &Tensor, name: &str, dim_names: Option<&[String]>) -> Result<ArrowData> {
    let options = ExportOptions {
        dim_names: dim_names.map(<[String]>::to_vec),
        ..ExportOptions::default()
    };
    let mut exported = export(tensor, &options)?;
    exported.schema.name = name.to_owned();
    exported_data(exported.schema, exported.array, exported.device)
}

/// The C structs of an export's field and array, the array's buffers on `device`.
fn exported_data(field: SchemaSpec, array: ArraySpec, device: Device) -> Result<ArrowData> {
    let schema = Arc::new(field.export()?);
    // SAFETY: the array was built by `export` (and maybe nested by `nested_lists`,
    // which adds levels without buffers): its values buffer is the tensor's memory on
    // `device` (or a copy), as long as the field implies, and the array holds its owner.
    let array = unsafe { array.export(device) };
    // SAFETY: the field describes the array: they come from one export.
    Ok(unsafe { ArrowData::new(schema, array) })
}

/// The schema as arrow-rs's struct, borrowed.
fn ffi_schema(schema: &OwnedSchema) -> &FFI_ArrowSchema {
    let raw: *const ArrowSchema = &*schema.0;
    // SAFETY: `FFI_ArrowSchema` is a `#[repr(C)]` mirror of the same C struct (size and
    // alignment checked above), and the schema stays live and unmoved while borrowed.
    unsafe { &*raw.cast::<FFI_ArrowSchema>() }
}

/// Hand C structs over to arrow-rs: its field and array. Refused for device memory.
fn into_arrow_rs(data: ArrowData) -> Result<(Field, ArrayRef)> {
    let (schema, array) = data.into_parts();
    let schema = ffi_schema(&schema);
    let field = Field::try_from(schema).map_err(arrow_error)?;
    let mut ffi_array = FFI_ArrowArray::empty();
    // SAFETY: `ffi_array` is released storage with the C layout of `ArrowArray`; the array
    // moves into it (refused unless its buffers are host memory).
    unsafe { array.move_into((&raw mut ffi_array).cast::<ArrowArray>()) }?;
    // SAFETY: a valid C Data array, host memory, described by `schema`.
    let data = unsafe { from_ffi(ffi_array, schema) }.map_err(arrow_error)?;
    Ok((field, make_array(data)))
}

// ------------------------------------------------------------------------------------------
// arrow-rs -> Tensor
// ------------------------------------------------------------------------------------------

/// An arrow-rs array as a tensor of shape `(length, *cell)`: primitive arrays and fixed-size
/// lists of them (nested lists give one dimension each), zero-copy and read-only; a sliced
/// array is read where its slice starts. Bit-packed booleans are unpacked into a copy. Nulls
/// are refused (the error names [`Nulls::Fill`]; see [`from_column`]). Extension metadata
/// lives in a [`Field`], not in the array: read `arrow.fixed_shape_tensor` columns with
/// [`from_column`].
pub fn from_array(array: &dyn Array) -> Result<Tensor> {
    Ok(import_data(arrow_rs_data(None, array)?, Nulls::Refuse)?.values)
}

/// An arrow-rs column (its field and array) as a tensor, as [`from_array`] reads it, with the
/// extensions the field carries: `arrow.fixed_shape_tensor` gives the cell's shape (its
/// permutation as strides, zero-copy) and [`Imported::dim_names`]; `arrow.bool8` gives
/// `bool`. `nulls` says what to do with nulls: refuse them (the error names the fill
/// option), fill them (a copy), or report them in [`Imported::validity`].
pub fn from_column(field: &Field, array: &dyn Array, nulls: Nulls) -> Result<Imported> {
    import_data(arrow_rs_data(Some(field), array)?, nulls)
}

/// The column `name` of a record batch as a tensor (see [`from_column`]).
pub fn from_record_batch(batch: &RecordBatch, name: &str, nulls: Nulls) -> Result<Imported> {
    let schema = batch.schema_ref();
    let index = schema.index_of(name).map_err(arrow_error)?;
    from_column(schema.field(index), batch.column(index).as_ref(), nulls)
}

fn import_data(data: ArrowData, nulls: Nulls) -> Result<Imported> {
    import_arrow(data, None, nulls).map_err(name_the_fill)
}

/// arrow-rs's export of `array` (described by `field`, or by its data type) as owned C
/// structs: its buffers are shared, not copied.
fn arrow_rs_data(field: Option<&Field>, array: &dyn Array) -> Result<ArrowData> {
    let mut schema = match field {
        Some(field) if field.data_type() != array.data_type() => {
            return Err(Error::InvalidArgument(format!(
                "the field {:?} is of type {}, the array of type {}",
                field.name(),
                field.data_type(),
                array.data_type()
            )));
        }
        Some(field) => FFI_ArrowSchema::try_from(field),
        None => FFI_ArrowSchema::try_from(array.data_type()),
    }
    .map_err(arrow_error)?;
    let mut ffi_array = FFI_ArrowArray::new(&array.to_data());
    // SAFETY: `FFI_ArrowSchema` has the C layout of `ArrowSchema`, and `schema` is a live
    // struct we own; the move marks it released, so dropping it afterwards does nothing.
    let schema = unsafe { OwnedSchema::take((&raw mut schema).cast::<ArrowSchema>()) }?;
    // SAFETY: likewise for the array, whose buffers are host memory.
    let array = unsafe { OwnedArray::take((&raw mut ffi_array).cast::<ArrowArray>()) }?;
    // SAFETY: the schema describes the array: it is the array's own data type, or a field of
    // that data type (checked above).
    Ok(unsafe { ArrowData::new(Arc::new(schema), array) })
}

// ------------------------------------------------------------------------------------------
// Arrow C Device arrays
// ------------------------------------------------------------------------------------------

/// An Arrow C Device array and its schema, owned: the form in which a tensor on any device
/// crosses to or from a C Device Data consumer or producer (arrow-rs itself has no device
/// arrays). Dropping it releases both structs once.
///
/// - In: [`DeviceArray::from_tensor`] (zero-copy, on the tensor's device) or
///   [`DeviceArray::from_column`] (an arrow-rs column, on the CPU); from a C producer,
///   [`DeviceArray::from_raw`].
/// - Out: [`DeviceArray::into_raw`] moves the structs into a consumer's storage;
///   [`DeviceArray::into_tensor`] reads it as a tensor on its device;
///   [`DeviceArray::into_column`] gives it to arrow-rs, for host memory only.
///
/// ```
/// use dlbridge::Tensor;
/// use dlbridge::arrow::Nulls;
/// use dlbridge::arrow::arrow_rs::DeviceArray;
/// use dlbridge::arrow_array::ffi::FFI_ArrowSchema;
/// use dlbridge::ffi::arrow::ArrowDeviceArray;
///
/// let t = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], &[3])?;
/// // The storage a C Device Data consumer hands over, filled by the producer.
/// let (mut schema, mut array) = (FFI_ArrowSchema::empty(), ArrowDeviceArray::released());
/// DeviceArray::from_tensor(&t, None)?.into_raw(&mut schema, &mut array)?;
/// // The consumer side: take the structs over and read them as a tensor.
/// // SAFETY: `array` is a live device array that `schema` describes, and nothing else owns it.
/// let taken = unsafe { DeviceArray::from_raw(schema, &mut array) }?;
/// assert!(array.is_released());
/// let back = taken.into_tensor(Nulls::Refuse)?.values;
/// assert_eq!((back.device(), back.data_ptr()), (t.device(), t.data_ptr()));
/// # Ok::<(), dlbridge::Error>(())
/// ```
#[derive(Debug)]
pub struct DeviceArray {
    schema: OwnedSchema,
    array: OwnedArray,
    device: Device,
}

impl DeviceArray {
    /// A tensor on any device as a device array, zero-copy (see [`to_column`] for the
    /// field: `dim_names` names dimensions 1..). The buffers stay where the tensor is; no
    /// sync event is attached, so the tensor's data must be ready (its producer's work done
    /// or ordered before the consumer's) when it is handed over. A host tensor whose layout
    /// Arrow cannot express is exported from a C-order copy; on a device it is refused.
    pub fn from_tensor(tensor: &Tensor, dim_names: Option<&[String]>) -> Result<Self> {
        let (schema, array) = export_data(tensor, "", dim_names)?.into_parts();
        Self::new(schema, array)
    }

    /// An arrow-rs column as a device array on the CPU, sharing its buffers.
    pub fn from_column(field: &Field, array: &dyn Array) -> Result<Self> {
        let (schema, array) = arrow_rs_data(Some(field), array)?.into_parts();
        Self::new(schema, array)
    }

    /// Take over the structs a C Device Data producer filled: `schema` is moved in, and the
    /// array is moved out of `array` (which is left released, as the C Device Data
    /// Interface's moves do).
    ///
    /// # Safety
    /// `array` must be NULL or point to a writable `ArrowDeviceArray` that is either released
    /// or valid per the C Device Data Interface and movable by the caller, and `schema` must
    /// describe it: its buffers, on the device it names, are read as the schema's formats
    /// imply.
    pub unsafe fn from_raw(schema: FFI_ArrowSchema, array: *mut ArrowDeviceArray) -> Result<Self> {
        let mut schema = schema;
        // SAFETY: `FFI_ArrowSchema` has the C layout of `ArrowSchema` and `schema` is a
        // struct we own, live or released (a released one is refused); the move marks it
        // released, so dropping it afterwards does nothing.
        let schema = unsafe { OwnedSchema::take((&raw mut schema).cast::<ArrowSchema>()) }?;
        // SAFETY: the caller's contract is `take_device`'s.
        let array = unsafe { OwnedArray::take_device(array) }?;
        Self::new(Arc::new(schema), array)
    }

    fn new(schema: Arc<OwnedSchema>, array: OwnedArray) -> Result<Self> {
        let schema = Arc::into_inner(schema)
            .ok_or_else(|| Error::InvalidArgument("the schema is shared".to_owned()))?;
        let device = array.device()?;
        Ok(Self {
            schema,
            array,
            device,
        })
    }

    /// Where the buffers are (Arrow's CPU device id -1 reads as 0).
    pub fn device(&self) -> Device {
        self.device
    }

    /// The number of items (the tensor's first dimension).
    pub fn len(&self) -> i64 {
        self.array.length()
    }

    /// True when the array has no items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The producer's sync event (a pointer to a `cudaEvent_t` or similar handle), or NULL:
    /// a consumer waits on it before it touches the buffers (for CUDA,
    /// [`wait_raw_event`](crate::cuda::wait_raw_event) makes the default stream wait).
    /// [`DeviceArray::into_tensor`] does not wait.
    pub fn sync_event(&self) -> *mut c_void {
        self.array.sync_event()
    }

    /// The schema, as arrow-rs's struct (e.g. for `DataType::try_from`).
    pub fn schema(&self) -> &FFI_ArrowSchema {
        ffi_schema(&self.schema)
    }

    /// The field the schema describes, extension metadata included.
    pub fn field(&self) -> Result<Field> {
        Field::try_from(self.schema()).map_err(arrow_error)
    }

    /// Move both structs into a consumer's storage: `schema` is overwritten (a live schema
    /// there is released first); `array` must be released storage (a live array there is
    /// refused, not overwritten). The consumer now owns them and releases them.
    pub fn into_raw(
        self,
        schema: &mut FFI_ArrowSchema,
        array: &mut ArrowDeviceArray,
    ) -> Result<()> {
        if !array.is_released() {
            return Err(Error::InvalidArgument(
                "the ArrowDeviceArray storage holds a live array; release it first".to_owned(),
            ));
        }
        let mut moved = FFI_ArrowSchema::empty();
        // SAFETY: `moved` is released storage with the C layout of `ArrowSchema`.
        unsafe {
            self.schema
                .move_into((&raw mut moved).cast::<ArrowSchema>())
        };
        *schema = moved;
        // SAFETY: `array` is writable and holds no live struct (checked above).
        unsafe { self.array.move_into_device(array) };
        Ok(())
    }

    /// Read the array as a tensor on its device, zero-copy (see [`from_column`] for the
    /// types and `nulls`; bit-packed booleans and filled nulls need host memory, as any
    /// copy does). The tensor keeps the array alive and releases it when its last user is
    /// gone. The sync event is not waited on (see [`DeviceArray::sync_event`]).
    pub fn into_tensor(self, nulls: Nulls) -> Result<Imported> {
        // SAFETY: the schema describes the array (the invariant of every constructor).
        let data = unsafe { ArrowData::new(Arc::new(self.schema), self.array) };
        import_data(data, nulls)
    }

    /// Hand the array to arrow-rs: its field and array. Refused (with
    /// [`Error::NotHostAccessible`]) unless the buffers are host memory.
    pub fn into_column(self) -> Result<(Field, ArrayRef)> {
        self.device.require_host()?;
        // SAFETY: the schema describes the array (the invariant of every constructor).
        into_arrow_rs(unsafe { ArrowData::new(Arc::new(self.schema), self.array) })
    }
}
