//! What the producer's library is known to mean where its capsule cannot say it.
//!
//! A legacy DLPack capsule has no read-only flag: whether the consumer may write through it is
//! a fact about the library that made it. Each library's own documentation decides it:
//! - mutable arrays whose legacy `__dlpack__` hands out their own memory: NumPy (it refuses
//!   read-only arrays through a legacy capsule), torch, CuPy, dpnp and dpctl (SYCL USM
//!   arrays), Paddle, Warp, MLX and tvm-ffi tensors. Their legacy capsules import writable, as
//!   each of those consumers' own `from_dlpack` imports them.
//! - immutable memory: JAX and TensorFlow arrays and PyArrow buffers. Their legacy capsules
//!   import read-only (PyArrow's legacy `__dlpack__` hands out its immutable buffers without a
//!   flag).
//! - a bare capsule, or an object of any other library: read-only, since nothing says writes
//!   are allowed.
//!
//! A versioned capsule's flag always wins over this table.

use pyo3::intern;
use pyo3::prelude::*;

/// The top-level packages whose arrays' legacy capsules are writable (see the module docs).
pub(crate) const LEGACY_CAPSULES_WRITABLE: &[&str] = &[
    "numpy", "torch", "cupy", "dpnp", "dpctl", "paddle", "warp", "mlx", "tvm_ffi",
];

/// Whether a legacy capsule from `producer`'s `__dlpack__` may be written through: its type
/// is defined in one of [`LEGACY_CAPSULES_WRITABLE`]'s packages (`type(producer).__module__`,
/// up to the first dot). Anything unreadable counts as not known, so read-only.
pub(crate) fn legacy_capsule_is_writable(producer: &Bound<'_, PyAny>) -> bool {
    let module = producer
        .get_type()
        .getattr(intern!(producer.py(), "__module__"))
        .and_then(|m| m.extract::<String>());
    match module {
        Ok(module) => {
            let package = module.split('.').next().unwrap_or_default();
            LEGACY_CAPSULES_WRITABLE.contains(&package)
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pyo3::types::PyDict;

    /// An instance of a class defined in the module named `module`.
    fn object_of<'py>(py: Python<'py>, module: &str) -> Bound<'py, PyAny> {
        let globals = PyDict::new(py);
        globals.set_item("module_name", module).unwrap();
        py.run(
            c"cls = type('Array', (), {'__module__': module_name})",
            Some(&globals),
            None,
        )
        .unwrap();
        globals.get_item("cls").unwrap().unwrap().call0().unwrap()
    }

    #[test]
    fn the_package_of_the_producers_type_decides() {
        Python::initialize();
        Python::attach(|py| {
            for (module, writable) in [
                ("torch", true),
                ("mlx.core", true),
                ("warp._src.types", true),
                ("dpnp.dpnp_array", true),
                ("tvm_ffi.core", true),
                ("jaxlib._jax", false),
                ("pyarrow.lib", false),
                ("tensorflow.python.framework", false),
                ("torchvision", false),
                ("mylib", false),
                ("", false),
            ] {
                assert_eq!(
                    legacy_capsule_is_writable(&object_of(py, module)),
                    writable,
                    "{module}"
                );
            }
            // a type whose __module__ is not a str: not known, so read-only
            let odd = object_of(py, "x");
            odd.get_type().setattr("__module__", 3).unwrap();
            assert!(!legacy_capsule_is_writable(&odd));
        });
    }
}
