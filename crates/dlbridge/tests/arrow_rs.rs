//! arrow-rs interop (feature `arrow-rs`): tensors to and from arrow-rs arrays, columns and
//! record batches through the C Data Interface, zero-copy; nulls, slices, booleans; Arrow C
//! Device arrays in and out; and a property test of the round trip.

#![cfg(feature = "arrow-rs")]

use std::sync::Arc;

use arrow_array::ffi::FFI_ArrowSchema;
use arrow_array::types::Int32Type;
use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeListArray, Float32Array, Int32Array, Int64Array,
};
use arrow_schema::{DataType, Field};
use dlbridge::arrow::arrow_rs::{
    DeviceArray, from_array, from_column, from_record_batch, to_array, to_column, to_record_batch,
};
use dlbridge::arrow::{FillValue, Nulls};
use dlbridge::ffi::arrow::ArrowDeviceArray;
use dlbridge::{DType, Device, DeviceType, Error, Layout, Order, Tensor, TensorFlags};
use proptest::prelude::*;

fn f32s(shape: &[i64]) -> Tensor {
    let extents: Vec<usize> = shape.iter().map(|&n| n as usize).collect();
    let n: usize = extents.iter().product();
    Tensor::from_vec((0..n).map(|x| x as f32).collect(), &extents).unwrap()
}

/// `t` with its dimensions reordered (`perm[i]` is the source dimension of dimension `i`),
/// the same memory.
fn permuted(t: &Tensor, perm: &[usize]) -> Tensor {
    t.permute_dims(perm).unwrap()
}

/// A tensor over `values` (kept alive by the tensor) with `layout`, labelled as `device`.
///
/// # Safety
/// `layout` must reach only elements of `values`, and memory labelled as another device than
/// the CPU must never be read.
unsafe fn over(values: Vec<f32>, layout: Layout, device: Device) -> Tensor {
    let values = Arc::new(values);
    let data = values.as_ptr().cast_mut().cast();
    // SAFETY: the caller's contract; `values` is the owner and is never written.
    unsafe {
        Tensor::from_raw_parts(
            data,
            0,
            device,
            DType::FLOAT32,
            layout,
            TensorFlags::READONLY,
            values,
        )
    }
    .unwrap()
}

#[test]
fn primitive_arrays_round_trip_zero_copy() {
    let t = f32s(&[5]);
    let array = to_array(&t).unwrap();
    assert_eq!(array.data_type(), &DataType::Float32);
    let values = array.as_any().downcast_ref::<Float32Array>().unwrap();
    assert_eq!(values.values().as_ptr() as usize, t.data_ptr());
    assert_eq!(values.values().to_vec(), vec![0.0, 1.0, 2.0, 3.0, 4.0]);
    let back = from_array(array.as_ref()).unwrap();
    assert_eq!(back.data_ptr(), t.data_ptr());
    assert!(back.is_readonly());
    drop(array);
    drop(t);
    // The round trip keeps the memory alive on its own.
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn n_d_tensors_are_nested_fixed_size_lists() {
    let t = f32s(&[4, 3, 2]);
    let array = to_array(&t).unwrap();
    let inner = Field::new_list_field(DataType::Float32, true);
    let middle = Field::new_list_field(DataType::FixedSizeList(Arc::new(inner), 2), true);
    assert_eq!(
        array.data_type(),
        &DataType::FixedSizeList(Arc::new(middle), 3)
    );
    assert_eq!(array.len(), 4);
    let back = from_array(array.as_ref()).unwrap();
    assert_eq!(back.shape(), &[4, 3, 2]);
    assert_eq!(back.data_ptr(), t.data_ptr());
    // Transposed cells cannot be nested lists in place: a copy, with the same values.
    let transposed = permuted(&t, &[0, 2, 1]);
    let back = from_array(to_array(&transposed).unwrap().as_ref()).unwrap();
    assert_eq!(back.shape(), &[4, 2, 3]);
    assert_ne!(back.data_ptr(), t.data_ptr());
    assert_eq!(
        back.to_vec::<f32>().unwrap(),
        transposed.to_vec::<f32>().unwrap()
    );
}

#[test]
fn fixed_size_lists_from_arrow_rs_are_read_in_place() {
    let values = Arc::new(Int32Array::from((0..12).collect::<Vec<i32>>()));
    let field = Arc::new(Field::new_list_field(DataType::Int32, true));
    let lists = FixedSizeListArray::try_new(field, 4, values.clone(), None).unwrap();
    let t = from_array(&lists).unwrap();
    assert_eq!(t.shape(), &[3, 4]);
    assert_eq!(t.data_ptr(), values.values().as_ptr() as usize);
    let tail = from_array(&lists.slice(1, 2)).unwrap();
    assert_eq!(tail.shape(), &[2, 4]);
    assert_eq!(tail.to_vec::<i32>().unwrap(), (4..12).collect::<Vec<_>>());
    assert_eq!(tail.data_ptr(), t.data_ptr() + 16);
}

#[test]
fn fixed_shape_tensor_columns_keep_shape_permutation_and_names() {
    let base = f32s(&[2, 3, 4, 5]);
    let names: Vec<String> = ["c", "h", "w"].map(str::to_owned).to_vec();
    for perm in [[0, 1, 2, 3], [0, 3, 1, 2], [0, 2, 3, 1]] {
        let t = permuted(&base, &perm);
        let (field, array) = to_column(&t, "x", Some(&names)).unwrap();
        assert_eq!(field.name(), "x");
        assert_eq!(
            field.extension_type_name(),
            Some("arrow.fixed_shape_tensor")
        );
        let back = from_column(&field, array.as_ref(), Nulls::Refuse).unwrap();
        assert_eq!(back.values.shape(), t.shape(), "{perm:?}");
        assert_eq!(
            back.values.data_ptr(),
            base.data_ptr(),
            "{perm:?}: zero-copy"
        );
        assert_eq!(back.dim_names.as_ref(), Some(&names));
        assert_eq!(
            back.values.to_vec::<f32>().unwrap(),
            t.to_vec::<f32>().unwrap()
        );
    }
    // Without the field, the array is the extension's storage: one flat list per cell.
    let (_, array) = to_column(&base, "x", None).unwrap();
    assert_eq!(from_array(array.as_ref()).unwrap().shape(), &[2, 60]);
}

#[test]
fn record_batches_carry_tensor_columns() {
    let images = f32s(&[3, 2, 2]);
    let ids = Tensor::from_vec(vec![10i64, 11, 12], &[3]).unwrap();
    let batch = to_record_batch(&[("id", &ids), ("image", &images)]).unwrap();
    assert_eq!(batch.num_rows(), 3);
    let id_column = batch.column(0).as_any().downcast_ref::<Int64Array>();
    assert_eq!(id_column.unwrap().values().to_vec(), vec![10, 11, 12]);
    let back = from_record_batch(&batch, "image", Nulls::Refuse).unwrap();
    assert_eq!(back.values.shape(), &[3, 2, 2]);
    assert_eq!(back.values.data_ptr(), images.data_ptr());
    let sliced = batch.slice(1, 2);
    let tail = from_record_batch(&sliced, "image", Nulls::Refuse).unwrap();
    assert_eq!(tail.values.data_ptr(), images.data_ptr() + 16);
    assert!(from_record_batch(&batch, "missing", Nulls::Refuse).is_err());
    let short = Tensor::from_vec(vec![1i64], &[1]).unwrap();
    assert!(to_record_batch(&[("id", &ids), ("short", &short)]).is_err());
}

#[test]
fn nulls_are_refused_naming_the_fill_or_filled_or_reported() {
    let array = Int32Array::from(vec![Some(1), None, Some(3), Some(4)]);
    let err = from_array(&array).unwrap_err().to_string();
    assert!(err.contains("1 null value"), "{err}");
    assert!(err.contains("Nulls::Fill"), "{err}");
    let field = Field::new("v", DataType::Int32, true);
    let filled = from_column(&field, &array, Nulls::Fill(FillValue::Int(-1))).unwrap();
    assert_eq!(filled.values.to_vec::<i32>().unwrap(), vec![1, -1, 3, 4]);
    let reported = from_column(&field, &array, Nulls::Report).unwrap();
    assert_eq!(reported.values.data_ptr(), array.values().as_ptr() as usize);
    let validity = reported.validity.unwrap();
    assert_eq!(validity.host_bytes().unwrap(), &[1, 0, 1, 1]);
    // A slice that leaves the null out is read in place.
    let tail = from_array(&array.slice(2, 2)).unwrap();
    assert_eq!(tail.to_vec::<i32>().unwrap(), vec![3, 4]);
    assert_eq!(tail.data_ptr(), array.values().as_ptr() as usize + 8);
    // A field of another type than the array is refused.
    let wrong = Field::new("v", DataType::Int64, true);
    assert!(from_column(&wrong, &array, Nulls::Refuse).is_err());
}

#[test]
fn booleans_cross_as_bool8_or_unpacked() {
    let bytes = Tensor::from_vec(vec![1u8, 0, 1], &[3]).unwrap();
    let bools = bytes.view_as(DType::BOOL).unwrap();
    let (field, array) = to_column(&bools, "flag", None).unwrap();
    assert_eq!(field.extension_type_name(), Some("arrow.bool8"));
    assert_eq!(array.data_type(), &DataType::Int8);
    let back = from_column(&field, array.as_ref(), Nulls::Refuse).unwrap();
    assert_eq!(back.values.dtype(), DType::BOOL);
    assert_eq!(back.values.data_ptr(), bools.data_ptr());
    let packed = BooleanArray::from(vec![true, false, true, true]);
    let unpacked = from_array(&packed).unwrap();
    assert_eq!(unpacked.dtype(), DType::BOOL);
    assert_eq!(unpacked.host_bytes().unwrap(), &[1, 0, 1, 1]);
}

#[test]
fn empty_and_strided_tensors() {
    for shape in [&[0][..], &[0, 3], &[2, 0]] {
        let t = f32s(shape);
        let back = from_array(to_array(&t).unwrap().as_ref()).unwrap();
        assert_eq!(back.shape(), shape);
        let (field, array) = to_column(&t, "e", None).unwrap();
        let back = from_column(&field, array.as_ref(), Nulls::Refuse).unwrap();
        assert_eq!(back.values.shape(), shape);
    }
    // Every other element: Arrow has no strides, so a C-order copy.
    let layout = Layout::new(&[4], Some(&[2]), 4).unwrap();
    // SAFETY: elements 0, 2, 4, 6 of the 8 values.
    let gaps = unsafe { over((0..8).map(|x| x as f32).collect(), layout, Device::CPU) };
    let back = from_array(to_array(&gaps).unwrap().as_ref()).unwrap();
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![0.0, 2.0, 4.0, 6.0]);
    assert_ne!(back.data_ptr(), gaps.data_ptr());
    let err = to_array(&Tensor::from_vec(vec![half::bf16::ZERO], &[1]).unwrap());
    assert!(matches!(err, Err(Error::UnsupportedFormat { .. })));
}

/// A 4x2 tensor labelled as CUDA memory over host memory that nothing here reads: what the
/// device paths see (they describe buffers, they never touch them).
fn cuda_labelled() -> Tensor {
    let layout = Layout::contiguous(&[4, 2], 4).unwrap();
    // SAFETY: the layout reaches the 8 values; no code path below reads them (the tests
    // assert that host access is refused, or compare addresses).
    unsafe { over(vec![0.0; 8], layout, Device::new(DeviceType::CUDA, 1)) }
}

#[test]
fn device_arrays_cross_in_and_out() {
    let t = cuda_labelled();
    assert!(matches!(to_array(&t), Err(Error::NotHostAccessible { .. })));
    assert!(matches!(
        to_column(&t, "x", None),
        Err(Error::NotHostAccessible { .. })
    ));
    let names = ["k".to_owned()];
    let exported = DeviceArray::from_tensor(&t, Some(&names)).unwrap();
    assert_eq!(exported.device(), Device::new(DeviceType::CUDA, 1));
    assert_eq!(exported.len(), 4);
    assert!(exported.sync_event().is_null());
    let field = exported.field().unwrap();
    assert_eq!(
        field.extension_type_name(),
        Some("arrow.fixed_shape_tensor")
    );
    assert!(matches!(
        DeviceArray::from_tensor(&t, None).unwrap().into_column(),
        Err(Error::NotHostAccessible { .. })
    ));

    // Out to a consumer's storage, and taken in again from it.
    let (mut schema, mut array) = (FFI_ArrowSchema::empty(), ArrowDeviceArray::released());
    exported.into_raw(&mut schema, &mut array).unwrap();
    assert!(!array.is_released());
    let live = DeviceArray::from_tensor(&t, None).unwrap();
    let mut scratch = FFI_ArrowSchema::empty();
    assert!(
        live.into_raw(&mut scratch, &mut array).is_err(),
        "a live array is not overwritten"
    );
    // SAFETY: `array` is the live device array `schema` describes, moved to us.
    let taken = unsafe { DeviceArray::from_raw(schema, &mut array) }.unwrap();
    assert!(array.is_released());
    let back = taken.into_tensor(Nulls::Refuse).unwrap();
    assert_eq!(back.values.device(), Device::new(DeviceType::CUDA, 1));
    assert_eq!(back.values.shape(), &[4, 2]);
    assert_eq!(back.values.data_ptr(), t.data_ptr());
    assert_eq!(back.dim_names.as_deref(), Some(&names[..]));
    assert!(matches!(
        back.values.host_bytes(),
        Err(Error::NotHostAccessible { .. })
    ));
    // A released array is refused.
    // SAFETY: a released struct is read, not used.
    let again = unsafe { DeviceArray::from_raw(FFI_ArrowSchema::empty(), &mut array) };
    assert!(again.is_err());
}

#[test]
fn host_device_arrays_reach_arrow_rs() {
    let t = f32s(&[3, 2]);
    let column = DeviceArray::from_tensor(&t, None).unwrap();
    assert_eq!(column.device(), Device::CPU);
    let (field, array) = column.into_column().unwrap();
    let back = from_column(&field, array.as_ref(), Nulls::Refuse).unwrap();
    assert_eq!(back.values.data_ptr(), t.data_ptr());
    // And an arrow-rs column out through the device interface, on the CPU.
    let ints: ArrayRef = Arc::new(arrow_array::PrimitiveArray::<Int32Type>::from(vec![5, 6]));
    let field = Field::new("i", DataType::Int32, false);
    let device = DeviceArray::from_column(&field, ints.as_ref()).unwrap();
    assert_eq!(device.device(), Device::CPU);
    let (mut schema, mut array) = (FFI_ArrowSchema::empty(), ArrowDeviceArray::released());
    device.into_raw(&mut schema, &mut array).unwrap();
    assert_eq!(schema.format(), "i");
    // SAFETY: as above.
    let taken = unsafe { DeviceArray::from_raw(schema, &mut array) }.unwrap();
    let values = taken.into_tensor(Nulls::Refuse).unwrap().values;
    assert_eq!(values.to_vec::<i32>().unwrap(), vec![5, 6]);
}

// ------------------------------------------------------------------------------------------
// Property test
// ------------------------------------------------------------------------------------------

/// The primitive dtypes Arrow and DLPack share.
const DTYPES: [DType; 12] = [
    DType::BOOL,
    DType::INT8,
    DType::INT16,
    DType::INT32,
    DType::INT64,
    DType::UINT8,
    DType::UINT16,
    DType::UINT32,
    DType::UINT64,
    DType::FLOAT16,
    DType::FLOAT32,
    DType::FLOAT64,
];

/// A C-contiguous host tensor of `dtype` and `shape` holding `bytes` (booleans as 0/1).
fn tensor_of(dtype: DType, bytes: &[u8], shape: &[i64]) -> Tensor {
    let shape: &[usize] = &shape.iter().map(|&n| n as usize).collect::<Vec<_>>();
    macro_rules! typed {
        ($t:ty) => {
            Tensor::from_vec(
                bytes
                    .chunks_exact(size_of::<$t>())
                    .map(|c| <$t>::from_ne_bytes(c.try_into().unwrap()))
                    .collect::<Vec<$t>>(),
                shape,
            )
            .unwrap()
        };
    }
    match dtype {
        DType::BOOL => {
            let bits = bytes.iter().map(|b| b & 1).collect::<Vec<u8>>();
            Tensor::from_vec(bits, shape)
                .unwrap()
                .view_as(DType::BOOL)
                .unwrap()
        }
        DType::INT8 => typed!(i8),
        DType::INT16 => typed!(i16),
        DType::INT32 => typed!(i32),
        DType::INT64 => typed!(i64),
        DType::UINT8 => typed!(u8),
        DType::UINT16 => typed!(u16),
        DType::UINT32 => typed!(u32),
        DType::UINT64 => typed!(u64),
        DType::FLOAT16 => typed!(half::f16),
        DType::FLOAT32 => typed!(f32),
        DType::FLOAT64 => typed!(f64),
        _ => unreachable!(),
    }
}

/// A dtype, a shape (a batch of 0..8 cells of up to two dimensions), the tensor's bytes, and
/// a slice of the batch (start, length).
fn case() -> impl Strategy<Value = (DType, Vec<i64>, Vec<u8>, usize, usize)> {
    (
        0..DTYPES.len(),
        0i64..8,
        proptest::collection::vec(0i64..4, 0..=2),
    )
        .prop_flat_map(|(d, n, cell)| {
            let dtype = DTYPES[d];
            let mut shape = vec![n];
            shape.extend(cell);
            let bytes = shape.iter().product::<i64>() as usize * dtype.itemsize();
            (
                Just(dtype),
                Just(shape),
                proptest::collection::vec(any::<u8>(), bytes),
                0..=n as usize,
            )
        })
        .prop_flat_map(|(dtype, shape, bytes, start)| {
            let rest = shape[0] as usize - start;
            (Just(dtype), Just(shape), Just(bytes), Just(start), 0..=rest)
        })
}

proptest! {
    /// Tensor -> arrow-rs (an array, or a column with its extension) -> a slice -> Tensor ->
    /// arrow-rs -> Tensor: the same bytes where the slice starts, never copied.
    #[test]
    fn round_trips_through_arrow_rs_zero_copy(
        (dtype, shape, bytes, start, len) in case(),
        as_column in any::<bool>(),
    ) {
        let t = tensor_of(dtype, &bytes, &shape);
        let row_bytes = shape[1..].iter().product::<i64>() as usize * dtype.itemsize();
        let (field, array) = if as_column {
            to_column(&t, "t", None).unwrap()
        } else {
            let array = to_array(&t).unwrap();
            (Field::new("t", array.data_type().clone(), true), array)
        };
        let sliced = array.slice(start, len);
        let back = from_column(&field, sliced.as_ref(), Nulls::Refuse).unwrap().values;
        let mut want_shape = shape.clone();
        want_shape[0] = len as i64;
        prop_assert_eq!(back.shape(), &want_shape[..]);
        // A 1-d bool array alone has no field to carry arrow.bool8: its storage, int8.
        let bare_bool = dtype == DType::BOOL && !as_column && shape.len() == 1;
        prop_assert_eq!(back.dtype(), if bare_bool { DType::INT8 } else { dtype });
        let want = &bytes[start * row_bytes..(start + len) * row_bytes];
        let want: Vec<u8> = if dtype == DType::BOOL {
            want.iter().map(|b| b & 1).collect()
        } else {
            want.to_vec()
        };
        let contiguous = back.copy(Order::C).unwrap();
        prop_assert_eq!(contiguous.host_bytes().unwrap(), &want[..]);
        if back.size() > 0 {
            prop_assert_eq!(back.data_ptr(), t.data_ptr() + start * row_bytes);
        }
        // And once more through arrow-rs, from the sliced tensor.
        let (field, again) = to_column(&back, "t", None).unwrap();
        let again = from_column(&field, again.as_ref(), Nulls::Refuse).unwrap().values;
        prop_assert_eq!(again.shape(), back.shape());
        if back.size() > 0 {
            prop_assert_eq!(again.data_ptr(), back.data_ptr());
        }
    }
}
