//! The `dlbridge._native` extension module. Everything it holds is defined in the `dlbridge`
//! crate ([`dlbridge::python::register`]); this crate only builds the module.

use pyo3::prelude::*;

// `gil_used = true`: the module says it needs the GIL, so a free-threaded interpreter re-enables
// the GIL when importing it. PyO3 would otherwise declare free-threading support, and nothing
// has tested Tensor (its exports, owners and copies) without the GIL yet.
#[pymodule(gil_used = true)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    dlbridge::python::register(m)
}
