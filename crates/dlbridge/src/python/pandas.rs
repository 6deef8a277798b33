//! pandas Series and DataFrames, which offer the Arrow C stream and no array protocol.
//!
//! pandas' Arrow export turns NaN in a float column into a null, which DLPack cannot carry, so
//! a Series of a NumPy number or bool dtype is read through `to_numpy()` instead: pandas' own
//! view of the column (read-only under copy-on-write, NaN kept), zero-copy. A Series of another
//! dtype (nullable, Arrow-backed, strings...) takes the Arrow route like any Arrow producer. A
//! DataFrame is a table, not an array: making one array of its columns is a copy unless they
//! share one block, which pandas decides, so the import refuses it and names the calls that
//! make one.

use pyo3::exceptions::PyBufferError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// The pandas types dlbridge knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `pandas.Series` or a subclass.
    Series,
    /// `pandas.DataFrame` or a subclass.
    DataFrame,
}

/// Which pandas type `ty` is (by its classes' module and name, without importing pandas).
pub(crate) fn kind_of(ty: &Bound<'_, PyType>) -> Option<Kind> {
    ty.mro().iter().find_map(|class| {
        let class = class.cast::<PyType>().ok()?;
        let (module, name) = (class.module().ok()?, class.qualname().ok()?);
        let (module, name) = (module.to_cow().ok()?, name.to_cow().ok()?);
        // pandas names its public classes' module `pandas` (older releases: where they live).
        match (&*module, &*name) {
            ("pandas" | "pandas.core.series", "Series") => Some(Kind::Series),
            ("pandas" | "pandas.core.frame", "DataFrame") => Some(Kind::DataFrame),
            _ => None,
        }
    })
}

/// The NumPy view a Series of a NumPy number or bool dtype gives (`series.to_numpy()`);
/// `None` for a Series of another dtype.
pub(crate) fn numpy_view<'py>(series: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = series.py();
    let dtype = series.getattr(intern!(py, "dtype"))?;
    let numpy_dtype = dtype
        .get_type()
        .module()?
        .to_cow()
        .is_ok_and(|m| m == "numpy" || m.starts_with("numpy."));
    let kind: String = dtype.getattr(intern!(py, "kind"))?.extract()?;
    if !numpy_dtype || !matches!(kind.as_str(), "b" | "i" | "u" | "f" | "c") {
        return Ok(None);
    }
    series.call_method0(intern!(py, "to_numpy")).map(Some)
}

/// The refusal of a DataFrame, naming the ways to one array.
pub(crate) fn dataframe_refused() -> PyErr {
    PyBufferError::new_err(
        "a pandas DataFrame is a table of columns, not an array: make one array of it with dlbridge.convert(df, \"numpy\") or df.to_numpy() (a copy unless pandas holds the columns in one block), or import one column, dlbridge.from_dlpack(df[\"name\"])",
    )
}
