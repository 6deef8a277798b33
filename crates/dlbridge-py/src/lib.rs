//! The `dlbridge._native` extension module. Everything it holds is defined in the `dlbridge`
//! crate ([`dlbridge::python::register`]); this crate only builds the module.

use pyo3::prelude::*;

// `gil_used = false`: nothing in dlbridge uses the GIL as a lock (docs/ARCHITECTURE.md,
// "Threads without the GIL", lists each piece of shared state and what guards it), so a
// free-threaded interpreter keeps the GIL off when it imports this module.
#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    dlbridge::python::register(m)
}
