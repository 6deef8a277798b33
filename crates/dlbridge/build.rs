//! With the `pyo3` feature, the same `Py_3_*`, `Py_LIMITED_API` and `Py_GIL_DISABLED` cfgs as
//! pyo3 itself, so that code can pick the C API the target interpreter has (the stable ABI for
//! 3.11 lacks `PyErr_GetRaisedException`; newer and free-threaded builds deprecate
//! `PyErr_Fetch`). Without the feature there is nothing to configure.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "pyo3")]
    pyo3_build_config::use_pyo3_cfgs();
}
