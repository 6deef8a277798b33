//! `dlbridge_example`: a PyO3 extension that takes any array as a `dlbridge::Tensor`.
//!
//! Each function below takes NumPy, PyTorch, JAX, PyArrow, Polars and every other array that
//! dlbridge can import (DLPack, buffer protocol, array interfaces, Arrow) through one argument
//! type, zero-copy, and returns a `Tensor` that every consumer imports zero-copy. The module
//! works on its own: it does not need the `dlbridge` Python package.

use dlbridge::Tensor;
use numpy::PyReadonlyArray1;
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

/// A new float32 array `[0, 1, ..., n - 1]`, owned by Rust and lent to whichever library
/// imports it.
#[pyfunction]
fn ramp(n: usize) -> PyResult<Tensor> {
    let len = i64::try_from(n).map_err(|_| {
        pyo3::exceptions::PyValueError::new_err(format!("ramp: {n} elements is too many"))
    })?;
    Ok(Tensor::from_vec(
        (0..n).map(|i| i as f32).collect(),
        &[len],
    )?)
}

/// The argument itself, imported and handed back: the result views the caller's memory
/// (its `data_ptr` is the source's), which shows that nothing was copied either way.
#[pyfunction]
fn passthrough(x: Tensor) -> Tensor {
    x
}

/// The `dlbridge_example` module: the functions above. It does not call
/// `dlbridge::python::module::register` (which would add dlbridge's classes and functions):
/// a returned `Tensor` works without it.
#[pymodule]
fn dlbridge_example(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(total, m)?)?;
    m.add_function(wrap_pyfunction!(total_numpy, m)?)?;
    m.add_function(wrap_pyfunction!(ramp, m)?)?;
    m.add_function(wrap_pyfunction!(passthrough, m)?)?;
    Ok(())
}
