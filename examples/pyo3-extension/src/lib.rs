//! `dlbridge_example`: a PyO3 extension that takes any array as a `dlbridge::Tensor`.
//!
//! Each function below takes NumPy, PyTorch, JAX, PyArrow, Polars and every other array that
//! dlbridge can import (DLPack, buffer protocol, array interfaces, Arrow) through one argument
//! type, zero-copy, and returns a `Tensor` that every consumer imports zero-copy. The module
//! works on its own: it does not need the `dlbridge` Python package.

use dlbridge::python::{HostTensor, Import, WritableTensor};
use dlbridge::{Device, Tensor};
use ndarray::Axis;
use numpy::PyReadonlyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The sum of a float32 array, as a float (any producer; a dtype other than float32, memory
/// off the host or a strided array is refused with the matching Python exception).
#[pyfunction]
fn total(x: Tensor) -> PyResult<f64> {
    Ok(x.as_slice::<f32>()?.iter().map(|&v| f64::from(v)).sum())
}

/// The same sum written with rust-numpy's `PyReadonlyArray1`: NumPy arrays only. The
/// benchmark's baseline.
#[pyfunction]
fn total_numpy(x: PyReadonlyArray1<'_, f32>) -> PyResult<f64> {
    Ok(x.as_slice()?.iter().map(|&v| f64::from(v)).sum())
}

/// The sum of a float32 array of any strides on any device: `HostTensor` imports it as
/// `from_dlpack(x, device="cpu")` does (device memory is copied to the host), and `iter`
/// walks any strides.
#[pyfunction]
fn host_total(x: HostTensor) -> PyResult<f64> {
    Ok(x.iter::<f32>()?.map(f64::from).sum())
}

/// The sum of a float32 array, imported with the caller's `copy=` (as in `from_dlpack`):
/// `copy=False` refuses data that would need a copy (e.g. on another device) with a
/// BufferError.
#[pyfunction]
#[pyo3(signature = (x, *, copy = None))]
fn total_with(x: &Bound<'_, PyAny>, copy: Option<bool>) -> PyResult<f64> {
    let import = Import {
        device: Some(Device::CPU),
        copy,
        ..Import::default()
    };
    Ok(import.extract(x)?.iter::<f32>()?.map(f64::from).sum())
}

/// Multiply a float32 array by `factor` in place: the caller's own memory is written (a
/// read-only array, or one that could only be taken as a copy, is a BufferError). As with
/// NumPy's in-place operations, no other thread may read or write the array meanwhile.
#[pyfunction]
fn scale(mut x: WritableTensor, factor: f32) -> PyResult<()> {
    // SAFETY: the caller lends the array to be written for the duration of the call, with no
    // other thread reading or writing it meanwhile (the function's documented contract: Python
    // gives arrays no lock, and NumPy's in-place operations ask the same); the loop itself
    // makes no other view of the array and runs no Python code.
    for v in unsafe { x.as_slice_mut_unchecked::<f32>() }? {
        *v *= factor;
    }
    Ok(())
}

/// The sums of the rows of a float32 array of two or more dimensions (any strides), through
/// an ndarray view; the result is an ndarray array handed to Python without a copy.
#[pyfunction]
fn row_sums(x: Tensor) -> PyResult<Tensor> {
    let view = x.as_array::<f32>()?;
    if view.ndim() < 2 {
        return Err(PyValueError::new_err(format!(
            "row_sums needs 2 or more dimensions, not {}",
            view.ndim()
        )));
    }
    Ok(Tensor::from(view.sum_axis(Axis(view.ndim() - 1))))
}

/// A new float32 array `[0, 1, ..., n - 1]`, owned by Rust and lent to whichever library
/// imports it.
#[pyfunction]
fn ramp(n: usize) -> PyResult<Tensor> {
    Ok(Tensor::from_vec((0..n).map(|i| i as f32).collect(), &[n])?)
}

/// The argument itself, imported and handed back: the result views the caller's memory
/// (its `data_ptr` is the source's), which shows that nothing was copied either way.
#[pyfunction]
fn passthrough(x: Tensor) -> Tensor {
    x
}

/// The `dlbridge_example` module: the functions above. It does not call
/// `dlbridge::python::register` (which would add dlbridge's classes and functions): a
/// returned `Tensor` works without it.
// `gil_used = false`: the module runs without the GIL on a free-threaded interpreter. The only
// shared memory its functions write (in `scale`) is lent under the contract stated there, and
// the `Tensor` arguments and results are safe to share between threads (dlbridge's own module
// makes the same declaration).
#[pymodule(gil_used = false)]
fn dlbridge_example(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(total, m)?)?;
    m.add_function(wrap_pyfunction!(total_numpy, m)?)?;
    m.add_function(wrap_pyfunction!(host_total, m)?)?;
    m.add_function(wrap_pyfunction!(total_with, m)?)?;
    m.add_function(wrap_pyfunction!(scale, m)?)?;
    m.add_function(wrap_pyfunction!(row_sums, m)?)?;
    m.add_function(wrap_pyfunction!(ramp, m)?)?;
    m.add_function(wrap_pyfunction!(passthrough, m)?)?;
    Ok(())
}
