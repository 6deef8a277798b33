//! A Rust program that takes arrays from a C library through DLPack, with no Python anywhere.
//!
//! The C library (`c/producer.c`, compiled by `build.rs`) hands out float32 matrices as
//! DLPack 1.x managed tensors: malloc'ed data and shape, and a deleter that frees them. dlbridge
//! takes ownership of such a tensor ([`ManagedTensor`]), validates it ([`Tensor::from_managed`])
//! and reads it without a copy, as a slice or as an `ndarray` view of any strides; the
//! producer's deleter runs exactly once, when the last `Tensor` sharing the memory is dropped.

use std::error::Error;
use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, Ordering};

use dlbridge::ffi::dlpack::DLManagedTensorVersioned;
use dlbridge::{DType, ManagedTensor, Tensor};
use ndarray::{arr1, arr2, Axis};

extern "C" {
    /// `c/producer.c`: a `rows x cols` float32 matrix of `10 * r + c`, column-major when
    /// `transposed` is non-zero; NULL when out of memory or for a negative dimension. Its
    /// deleter adds one to `*deletions` (atomically).
    fn producer_matrix(
        rows: i64,
        cols: i64,
        transposed: c_int,
        deletions: *mut i32,
    ) -> *mut DLManagedTensorVersioned;
}

/// How the C producer lays out the matrix.
#[derive(Clone, Copy, Debug)]
enum Storage {
    /// Row-major (C-contiguous).
    RowMajor,
    /// Column-major: strides `[1, rows]`, not C-contiguous.
    ColumnMajor,
}

/// A matrix from the C producer as a `Tensor` that owns it. The producer's deleter adds one
/// to `deletions` when the memory is released; the counter is `'static` because the deleter
/// may run whenever (and on whichever thread) the last `Tensor` sharing the memory is dropped.
fn matrix_from_c(
    rows: i64,
    cols: i64,
    storage: Storage,
    deletions: &'static AtomicI32,
) -> Result<Tensor, Box<dyn Error>> {
    let transposed = c_int::from(matches!(storage, Storage::ColumnMajor));
    // SAFETY: producer_matrix reads only its arguments; the counter it keeps lives for the
    // whole program, and C's `atomic_int` has the layout of `AtomicI32`.
    let raw = unsafe { producer_matrix(rows, cols, transposed, deletions.as_ptr()) };
    // SAFETY: a non-NULL result is a DLPack 1.x versioned managed tensor that nobody else
    // owns; the duty to call its deleter passes to the ManagedTensor (and from it to the
    // Tensor). NULL gives None.
    let managed = unsafe { ManagedTensor::from_versioned(raw) }
        .ok_or("the C producer returned NULL (out of memory or a negative dimension)")?;
    Ok(Tensor::from_managed(managed)?)
}

fn main() -> Result<(), Box<dyn Error>> {
    static DELETIONS: AtomicI32 = AtomicI32::new(0);

    let matrix = matrix_from_c(3, 4, Storage::RowMajor, &DELETIONS)?;
    assert_eq!(matrix.dtype(), DType::FLOAT32);
    assert_eq!(matrix.shape(), &[3, 4]);
    let values = matrix.as_slice::<f32>()?; // borrows `matrix`: no copy
    println!("a 3 x 4 float32 matrix from C, read in place:");
    for row in values.chunks(4) {
        println!("  {row:?}");
    }
    let total: f32 = values.iter().sum();
    assert_eq!(total, 138.0);
    assert_eq!(
        DELETIONS.load(Ordering::SeqCst),
        0,
        "alive: not deleted yet"
    );
    drop(matrix);
    assert_eq!(
        DELETIONS.load(Ordering::SeqCst),
        1,
        "deleted once, when dropped"
    );

    let columns = matrix_from_c(2, 3, Storage::ColumnMajor, &DELETIONS)?;
    assert_eq!(columns.strides(), &[1, 2]);
    assert!(
        columns.as_slice::<f32>().is_err(),
        "a slice needs C-contiguous data"
    );
    let view = columns.as_array::<f32>()?; // any strides, in place
    println!("a 2 x 3 column-major matrix, viewed in place:\n{view}");
    assert_eq!(
        view,
        arr2(&[[0.0, 1.0, 2.0], [10.0, 11.0, 12.0]]).into_dyn()
    );
    assert_eq!(view.sum_axis(Axis(1)), arr1(&[3.0, 33.0]).into_dyn());
    drop(columns);
    assert_eq!(DELETIONS.load(Ordering::SeqCst), 2);

    println!("the C producer's deleter ran once per tensor");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deleter_runs_once_after_the_last_shared_tensor() {
        static DELETIONS: AtomicI32 = AtomicI32::new(0);
        let matrix = matrix_from_c(2, 2, Storage::RowMajor, &DELETIONS).unwrap();
        let same_memory = matrix.clone();
        assert_eq!(same_memory.data_ptr(), matrix.data_ptr());
        drop(matrix);
        assert_eq!(
            DELETIONS.load(Ordering::SeqCst),
            0,
            "a clone still holds it"
        );
        assert_eq!(
            same_memory.as_slice::<f32>().unwrap(),
            [0.0, 1.0, 10.0, 11.0]
        );
        drop(same_memory);
        assert_eq!(DELETIONS.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_ndarray_view_reads_the_producer_memory_in_place() {
        static DELETIONS: AtomicI32 = AtomicI32::new(0);
        let columns = matrix_from_c(3, 2, Storage::ColumnMajor, &DELETIONS).unwrap();
        let view = columns.as_array::<f32>().unwrap();
        assert_eq!(view.as_ptr() as usize, columns.data_ptr());
        assert_eq!(view.strides(), [1, 3]);
        assert_eq!(view[[2, 1]], 21.0);
        assert_eq!(
            view.t(),
            arr2(&[[0.0, 10.0, 20.0], [1.0, 11.0, 21.0]])
                .into_dyn()
                .view()
        );
        drop(columns);
        assert_eq!(DELETIONS.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_contiguous_copy_outlives_the_producer_memory() {
        static DELETIONS: AtomicI32 = AtomicI32::new(0);
        let columns = matrix_from_c(3, 2, Storage::ColumnMajor, &DELETIONS).unwrap();
        let copy = columns.contiguous().unwrap();
        assert_ne!(
            copy.data_ptr(),
            columns.data_ptr(),
            "column-major data is copied"
        );
        drop(columns);
        assert_eq!(
            DELETIONS.load(Ordering::SeqCst),
            1,
            "the copy does not hold it"
        );
        assert_eq!(
            copy.as_slice::<f32>().unwrap(),
            [0.0, 1.0, 10.0, 11.0, 20.0, 21.0]
        );
    }

    #[test]
    fn a_wrong_element_type_is_an_error_and_the_memory_is_still_released() {
        static DELETIONS: AtomicI32 = AtomicI32::new(0);
        let matrix = matrix_from_c(2, 2, Storage::RowMajor, &DELETIONS).unwrap();
        let err = matrix.as_slice::<f64>().unwrap_err();
        assert!(err.to_string().contains("float32"), "{err}");
        drop(matrix);
        assert_eq!(DELETIONS.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_empty_matrix_is_an_empty_slice() {
        static DELETIONS: AtomicI32 = AtomicI32::new(0);
        let empty = matrix_from_c(0, 3, Storage::RowMajor, &DELETIONS).unwrap();
        assert_eq!(empty.shape(), &[0, 3]);
        assert!(empty.as_slice::<f32>().unwrap().is_empty());
        drop(empty);
        assert_eq!(DELETIONS.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_null_from_the_producer_is_an_error() {
        static DELETIONS: AtomicI32 = AtomicI32::new(0);
        let err = matrix_from_c(-1, 3, Storage::RowMajor, &DELETIONS).unwrap_err();
        assert!(err.to_string().contains("NULL"), "{err}");
        assert_eq!(DELETIONS.load(Ordering::SeqCst), 0);
    }
}
