//! Paddle tensors: what their DLPack C exchange table does not check.
//!
//! Paddle's own `__dlpack__` refuses a tensor that requires gradients (`stop_gradient=False`),
//! as torch's does: the consumer would get the values without the autograd graph. Its C
//! exchange table exports such a tensor without a word, so dlbridge applies the rule itself
//! after a table export.

use pyo3::exceptions::PyBufferError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// `paddle.Tensor` or a subclass (by its classes' module and name, without importing Paddle).
pub(crate) fn is_tensor_type(ty: &Bound<'_, PyType>) -> bool {
    ty.mro().iter().any(|class| {
        class.cast::<PyType>().is_ok_and(|class| {
            let module = class
                .module()
                .is_ok_and(|m| m.to_cow().is_ok_and(|m| m == "paddle"));
            module
                && class
                    .qualname()
                    .is_ok_and(|n| n.to_cow().is_ok_and(|n| n == "Tensor"))
        })
    })
}

/// BufferError naming `.detach()` when the Paddle tensor `obj` requires gradients.
pub(crate) fn check_exported(obj: &Bound<'_, PyAny>) -> PyResult<()> {
    let stop_gradient = obj
        .getattr(intern!(obj.py(), "stop_gradient"))?
        .is_truthy()?;
    if stop_gradient {
        return Ok(());
    }
    Err(PyBufferError::new_err(
        "the Paddle tensor requires gradients (stop_gradient=False), which DLPack cannot carry; call .detach() (no copy) first",
    ))
}
