//! The `dlbridge._native` extension module. Everything it holds is defined in the `dlbridge`
//! crate ([`dlbridge::python::module`]); this crate only builds the module.

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    dlbridge::python::module::register(m)
}
