//! PyTorch tensors carry state that DLPack cannot express and that torch's exporters drop:
//! the conjugate and negative bits (lazy views whose bytes do not hold the logical values;
//! torch's C exchange API ignores both, and its `__dlpack__` ignores the negative bit, so the
//! consumer silently gets wrong values) and `requires_grad` (the exchange API exports such
//! tensors, cutting them out of autograd without a word). dlbridge refuses all three with the
//! call that resolves them.

use pyo3::exceptions::PyBufferError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::python::call;

/// True for `torch.Tensor` and its subclasses (e.g. `torch.nn.Parameter`).
pub fn is_tensor_type(ty: &Bound<'_, PyType>) -> bool {
    let is_torch_tensor = |t: &Bound<'_, PyAny>| {
        t.getattr("__module__")
            .is_ok_and(|m| m.eq("torch").unwrap_or(false))
            && t.getattr("__name__")
                .is_ok_and(|n| n.eq("Tensor").unwrap_or(false))
    };
    ty.getattr("__mro__")
        .and_then(|mro| mro.try_iter())
        .is_ok_and(|mut classes| classes.any(|c| c.is_ok_and(|c| is_torch_tensor(&c))))
}

/// BufferError when the torch tensor `obj` cannot be exported faithfully as it is.
pub fn check_exportable(obj: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = obj.py();
    let refuse = |what: &str, fix: &str| {
        Err(PyBufferError::new_err(format!(
            "the torch tensor {what}, which DLPack cannot carry; call {fix} first"
        )))
    };
    if obj.getattr(intern!(py, "requires_grad"))?.is_truthy()? {
        return refuse("requires grad", ".detach() (no copy)");
    }
    if call::method0(obj, intern!(py, "is_conj"))?.is_truthy()? {
        return refuse(
            "has its conjugate bit set (a lazy conjugate view)",
            ".resolve_conj() (a copy)",
        );
    }
    if call::method0(obj, intern!(py, "is_neg"))?.is_truthy()? {
        return refuse(
            "has its negative bit set (a lazy negated view)",
            ".resolve_neg() (a copy)",
        );
    }
    Ok(())
}
