//! PyTorch tensors carry state that DLPack cannot express and that torch's exporters drop:
//! the conjugate and negative bits (lazy views whose bytes do not hold the logical values;
//! torch's C exchange API ignores both, and its `__dlpack__` ignores the negative bit, so the
//! consumer silently gets wrong values) and `requires_grad` (the exchange API exports such
//! tensors, cutting them out of autograd without a word). dlbridge refuses all three with the
//! call that resolves them.
//!
//! The three are read by torch's own C++ functions where they could be checked to work
//! ([`crate::python::torch_native`]: about 10 instructions for all three, GIL held). Otherwise
//! they are read with the C functions of torch's tensor base class (`TensorBase`), found once:
//! the getter behind `requires_grad` and the methods `is_conj` and `is_neg`, called on the
//! object directly. That skips the attribute lookups (about 130 of the 420 instructions a
//! `getattr(t, "requires_grad")` costs; `is_neg` and `is_conj` cost about 930 each, most of it
//! torch releasing and retaking the GIL around the call). Both ways read the tensor's real
//! state even when a Python subclass overrides one of the three names.

use std::ffi::c_void;

use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyType};

use crate::dtype::{DType, TypeCode};
use crate::python::call;
use crate::python::torch_native::{Readers, State};

/// True for `torch.Tensor` and its subclasses (e.g. `torch.nn.Parameter`).
pub(crate) fn is_tensor_type(ty: &Bound<'_, PyType>) -> bool {
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

/// BufferError when the torch tensor `obj` cannot be exported faithfully as it is (its dtype
/// not known yet: all three states are read).
pub(crate) fn check_exportable(obj: &Bound<'_, PyAny>) -> PyResult<()> {
    check(obj, None)
}

/// [`check_exportable`] for a tensor already exported with `dtype`: only the states a tensor of
/// that dtype can have are read. torch sets the conjugate bit on complex tensors only (its
/// `_set_conj` asserts it) and lets only floating-point and complex tensors require grad
/// (anything else raises); the negative bit can be set on any dtype, so it is always read.
pub(crate) fn check_exported(obj: &Bound<'_, PyAny>, dtype: DType) -> PyResult<()> {
    check(obj, Some(dtype))
}

fn check(obj: &Bound<'_, PyAny>, dtype: Option<DType>) -> PyResult<()> {
    let refuse = |what: &str, fix: &str| {
        Err(PyBufferError::new_err(format!(
            "the torch tensor {what}, which DLPack cannot carry; call {fix} first"
        )))
    };
    let readers = StateReaders::of(obj)?;
    let state = match readers.native.as_ref().and_then(|native| native.read(obj)) {
        Some(state) => state,
        None => readers.read_by_methods(obj, dtype)?,
    };
    if state.requires_grad {
        refuse("requires grad", ".detach() (no copy)")
    } else if state.conj {
        refuse(
            "has its conjugate bit set (a lazy conjugate view)",
            ".resolve_conj() (a copy)",
        )
    } else if state.neg {
        refuse(
            "has its negative bit set (a lazy negated view)",
            ".resolve_neg() (a copy)",
        )
    } else {
        Ok(())
    }
}

/// BufferError when the torch tensor `obj` is one that DLPack cannot describe at all: a layout
/// other than strided (sparse, mkldnn), a nested tensor, a quantized dtype, or the meta
/// device (no data). torch's exports refuse these with errors of their own (a RuntimeError
/// with a C++ backtrace from the exchange table); this names what is wrong and the call that
/// makes an exportable tensor. Read with torch's Python attributes, which cost more than an
/// import itself: called on the general path before any export, and on the fast path only
/// after torch's exchange table refused the tensor.
pub(crate) fn check_describable(obj: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = obj.py();
    let refuse = |what: String, fix: &str| {
        Err(PyBufferError::new_err(format!(
            "the torch tensor {what}, which DLPack cannot describe; {fix}"
        )))
    };
    let layout = obj.getattr(intern!(py, "layout"))?.str()?.to_string();
    if obj.getattr(intern!(py, "is_nested"))?.is_truthy()? {
        return refuse(
            "is nested (its rows have different lengths)".to_owned(),
            "call .to_padded_tensor(0) or .unbind() first",
        );
    }
    if layout != "torch.strided" {
        let layout = layout.trim_start_matches("torch.").trim_start_matches('_');
        return refuse(format!("is {layout}"), "call .to_dense() first");
    }
    if obj.getattr(intern!(py, "is_quantized"))?.is_truthy()? {
        let dtype = obj.getattr(intern!(py, "dtype"))?.str()?.to_string();
        return refuse(
            format!("is quantized ({dtype})"),
            "call .dequantize() first (or .int_repr() for the stored integers)",
        );
    }
    if obj.getattr(intern!(py, "is_meta"))?.is_truthy()? {
        return refuse(
            "is on the meta device (it has no data)".to_owned(),
            "call torch.empty_like(t, device=\"cpu\") first (a tensor with data)",
        );
    }
    Ok(())
}

/// The error for a torch tensor whose export through torch's exchange table failed with
/// `err`: the BufferError of [`check_describable`] when the tensor is one DLPack cannot
/// describe, else `err` as a BufferError (the producer refused the export), `err` its cause.
pub(crate) fn export_refused(obj: &Bound<'_, PyAny>, err: PyErr) -> PyErr {
    let py = obj.py();
    if let Err(undescribable) = check_describable(obj) {
        undescribable.set_cause(py, Some(err));
        return undescribable;
    }
    if err.is_instance_of::<PyBufferError>(py) {
        return err;
    }
    let refused = PyBufferError::new_err(format!(
        "torch could not export the tensor through DLPack: {}",
        err.value(py)
    ));
    refused.set_cause(py, Some(err));
    refused
}

/// The C functions that read the three states, taken from the first torch tensor type seen
/// (every torch tensor type derives from the one base class that defines them).
struct StateReaders {
    /// `TensorBase.requires_grad`, a getset descriptor, and its type's `__get__` slot.
    requires_grad: Py<PyAny>,
    descr_get: ffi::descrgetfunc,
    /// `TensorBase.is_conj` and `TensorBase.is_neg`, method descriptors.
    is_conj: Py<PyAny>,
    is_neg: Py<PyAny>,
    /// torch's C++ readers, when they work on this build (used first).
    native: Option<Readers>,
}

impl StateReaders {
    fn of(obj: &Bound<'_, PyAny>) -> PyResult<&'static StateReaders> {
        static READERS: PyOnceLock<StateReaders> = PyOnceLock::new();
        READERS.get_or_try_init(obj.py(), || Self::find(&obj.get_type()))
    }

    /// Walk `ty`'s MRO for the C descriptors of the three names (a Python override in a
    /// subclass is passed over: it is not what the tensor's memory holds).
    fn find(ty: &Bound<'_, PyType>) -> PyResult<StateReaders> {
        let py = ty.py();
        let c_descriptor = |name: &Bound<'_, PyString>, kind: &str| -> PyResult<Py<PyAny>> {
            for class in ty.mro().iter() {
                let namespace = class.getattr(intern!(py, "__dict__"))?;
                if !namespace.contains(name)? {
                    continue;
                }
                let attr = namespace.get_item(name)?;
                if attr.get_type().name()?.to_cow()? == kind {
                    return Ok(attr.unbind());
                }
            }
            Err(PyTypeError::new_err(format!(
                "this torch tensor type has no {kind} {name} on its base class; dlbridge cannot read its state"
            )))
        };
        let requires_grad = c_descriptor(intern!(py, "requires_grad"), "getset_descriptor")?;
        // SAFETY: `requires_grad` is a live object; PyType_GetSlot reads a slot of its type (a
        // static type, readable this way since Python 3.10) and returns NULL when it is empty.
        let slot = unsafe {
            ffi::PyType_GetSlot(ffi::Py_TYPE(requires_grad.as_ptr()), ffi::Py_tp_descr_get)
        };
        if slot.is_null() {
            return Err(PyTypeError::new_err(
                "torch's requires_grad descriptor has no __get__",
            ));
        }
        // SAFETY: the Py_tp_descr_get slot holds a descrgetfunc.
        let descr_get = unsafe { std::mem::transmute::<*mut c_void, ffi::descrgetfunc>(slot) };
        Ok(StateReaders {
            requires_grad,
            descr_get,
            is_conj: c_descriptor(intern!(py, "is_conj"), "method_descriptor")?,
            is_neg: c_descriptor(intern!(py, "is_neg"), "method_descriptor")?,
            native: Readers::find(py),
        })
    }

    /// The states a tensor of `dtype` (`None`: not known) can have, read with torch's Python
    /// methods; the others are `false`.
    fn read_by_methods(&self, obj: &Bound<'_, PyAny>, dtype: Option<DType>) -> PyResult<State> {
        let code = dtype.map(DType::code);
        let may_require_grad =
            !matches!(code, Some(TypeCode::INT | TypeCode::UINT | TypeCode::BOOL));
        let may_be_conj = code.is_none_or(|c| matches!(c, TypeCode::COMPLEX | TypeCode::BCOMPLEX));
        Ok(State {
            requires_grad: may_require_grad && self.requires_grad(obj)?,
            conj: may_be_conj && self.is_conj(obj)?,
            neg: self.is_neg(obj)?,
        })
    }

    fn requires_grad(&self, obj: &Bound<'_, PyAny>) -> PyResult<bool> {
        // SAFETY: the thread is attached; `descr_get` is the `__get__` of `requires_grad`'s type,
        // called with the descriptor, a live instance and its type; it returns a new
        // reference or NULL with an exception set.
        let value = unsafe {
            Bound::from_owned_ptr_or_err(
                obj.py(),
                (self.descr_get)(
                    self.requires_grad.as_ptr(),
                    obj.as_ptr(),
                    ffi::Py_TYPE(obj.as_ptr()).cast(),
                ),
            )
        }?;
        value.is_truthy()
    }

    fn is_conj(&self, obj: &Bound<'_, PyAny>) -> PyResult<bool> {
        call::function1(self.is_conj.bind(obj.py()), obj)?.is_truthy()
    }

    fn is_neg(&self, obj: &Bound<'_, PyAny>) -> PyResult<bool> {
        call::function1(self.is_neg.bind(obj.py()), obj)?.is_truthy()
    }
}
