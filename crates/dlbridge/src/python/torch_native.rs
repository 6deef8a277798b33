//! torch's own C++ readers of a tensor's negative bit, conjugate bit and `requires_grad`, called
//! on the tensor object directly: the fast way for [`crate::python::torch`] to read them.
//!
//! torch's only Python reader of the negative bit, `is_neg()`, releases and retakes the GIL
//! around a one-instruction test: about 56 ns of the 150 ns tvm-ffi needs for a whole import
//! through torch's exchange table (callgrind: 750 of the 4,400 instructions dlbridge's import
//! spent; `requires_grad` another 290). Here the three states are read by the functions torch
//! itself implements them with, found in torch's libraries by name:
//!
//! - `at::native::is_neg(const at::Tensor&)` and `at::native::is_conj(const at::Tensor&)`
//!   (libtorch_cpu), each a test of one bit of the tensor's dispatch key set;
//! - `c10::TensorImpl::requires_grad() const` (libc10).
//!
//! A C++ reference and a member function's `this` are pointers passed like a C function's
//! first argument (the Itanium C++ ABI of torch's Linux builds); a mangled name encodes the
//! parameter types, so a changed signature is not found. The `at::Tensor` a torch tensor
//! object holds sits right after the object header: torch's `THPVariable` (its public
//! extension header `torch/csrc/autograd/python_variable.h`) is `PyObject_HEAD` followed by
//! `at::Tensor cdata`, a pointer to the `TensorImpl`. Older torch releases laid it out
//! differently (a `c10::MaybeOwned<at::Tensor>`), so all of this is checked once on probe
//! tensors of known state before it is used (the `TensorImpl` address against torch's own
//! `_cdata`, then each reader's answer); when any check fails, or on other platforms, the
//! readers are not used and [`crate::python::torch`] calls torch's Python methods.
//!
//! One read costs about 10 instructions, with the GIL held throughout.

use std::ffi::c_void;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyType};

/// `at::native::is_neg` / `is_conj`: `(const at::Tensor&) -> bool`.
type TensorTest = unsafe extern "C" fn(*const c_void) -> bool;
/// `c10::TensorImpl::requires_grad() const`: `(const TensorImpl* this) -> bool`.
type ImplTest = unsafe extern "C" fn(*const c_void) -> bool;

/// The three states of one tensor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct State {
    pub requires_grad: bool,
    pub conj: bool,
    pub neg: bool,
}

/// torch's C++ readers, checked to work on this torch build.
pub(crate) struct Readers {
    /// `torch._C.TensorBase`, the C type of every torch tensor object (whose layout was
    /// checked).
    base: Py<PyType>,
    is_neg: TensorTest,
    is_conj: TensorTest,
    requires_grad: ImplTest,
}

impl Readers {
    /// The readers, when this torch build has them and they pass the checks on probe tensors;
    /// `None` otherwise (then torch's Python methods are used).
    pub(crate) fn find(py: Python<'_>) -> Option<Readers> {
        let readers = Self::look_up(py)?;
        readers.pass_probes(py).ok()?.then_some(readers)
    }

    #[cfg(target_os = "linux")]
    fn look_up(py: Python<'_>) -> Option<Readers> {
        // The `abi3t` build does not know the object header's size (see `numpy_api::Api::find`),
        // so it cannot find the `at::Tensor` after it: torch's Python methods answer there.
        if cfg!(all(Py_LIMITED_API, Py_GIL_DISABLED)) {
            return None;
        }
        let base = py
            .import("torch")
            .and_then(|torch| torch.getattr("_C")?.getattr("TensorBase"))
            .ok()?
            .cast_into::<PyType>()
            .ok()?;
        // Every instance holds at least the header and the `at::Tensor` pointer.
        let basic_size: usize = base.getattr("__basicsize__").ok()?.extract().ok()?;
        if basic_size < std::mem::size_of::<ffi::PyObject>() + std::mem::size_of::<usize>() {
            return None;
        }
        let libtorch = library(c"libtorch_cpu.so")?;
        let libc10 = library(c"libc10.so")?;
        let is_neg = symbol(libtorch, c"_ZN2at6native6is_negERKNS_6TensorE")?;
        let is_conj = symbol(libtorch, c"_ZN2at6native7is_conjERKNS_6TensorE")?;
        let requires_grad = symbol(libc10, c"_ZNK3c1010TensorImpl13requires_gradEv")?;
        // Whether the layout these functions read is right is checked on probes before any
        // use (`pass_probes`).
        // SAFETY: the symbols are these functions (their mangled names say so), whose C++
        // signatures are the types' (a reference and `this` are a pointer argument, a bool a C
        // bool).
        unsafe {
            Some(Readers {
                base: base.unbind(),
                is_neg: std::mem::transmute::<*mut c_void, TensorTest>(is_neg),
                is_conj: std::mem::transmute::<*mut c_void, TensorTest>(is_conj),
                requires_grad: std::mem::transmute::<*mut c_void, ImplTest>(requires_grad),
            })
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn look_up(_py: Python<'_>) -> Option<Readers> {
        None
    }

    /// Whether the readers give torch's own answers on tensors of known state: the address of
    /// the `TensorImpl` after the object header must be what torch's `_cdata` says, then each
    /// reader must answer right for a plain tensor and one with each state set.
    fn pass_probes(&self, py: Python<'_>) -> PyResult<bool> {
        let torch = py.import("torch")?;
        let plain = torch.call_method1("zeros", (1,))?;
        let neg = plain.call_method0("_neg_view")?;
        let complex = PyDict::new(py);
        complex.set_item("dtype", torch.getattr("complex64")?)?;
        let conj = torch
            .call_method("zeros", (1,), Some(&complex))?
            .call_method0("conj")?;
        let grad = PyDict::new(py);
        grad.set_item("requires_grad", true)?;
        let requires_grad = torch.call_method("zeros", (1,), Some(&grad))?;
        let probes = [
            (plain, State::default()),
            (
                neg,
                State {
                    neg: true,
                    ..State::default()
                },
            ),
            (
                conj,
                State {
                    conj: true,
                    ..State::default()
                },
            ),
            (
                requires_grad,
                State {
                    requires_grad: true,
                    ..State::default()
                },
            ),
        ];
        let cdata_getter = self.base.bind(py).getattr("_cdata")?;
        for (probe, expected) in probes {
            if !probe.is_instance(self.base.bind(py))? {
                return Ok(false);
            }
            // torch's own getter on the base class, not whatever a subclass calls `_cdata`.
            let cdata: usize = cdata_getter.call_method1("__get__", (&probe,))?.extract()?;
            // SAFETY: `probe` is a live instance of TensorBase, whose basic size holds at least
            // the header and one pointer (checked in `look_up`); the word read is only
            // compared here.
            let held = unsafe { *tensor_field(&probe).cast::<usize>() };
            if held != cdata || cdata == 0 {
                return Ok(false);
            }
            // SAFETY: the field after the header holds the address of the tensor's
            // TensorImpl (checked just above against torch's own answer), so it is the
            // `at::Tensor` the readers take.
            if unsafe { self.read_unchecked(&probe) } != expected {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The three states of `obj`, when it is a torch tensor object (`None` otherwise).
    pub(crate) fn read(&self, obj: &Bound<'_, PyAny>) -> Option<State> {
        // SAFETY: both are live objects; PyObject_TypeCheck only reads their types.
        let is_tensor =
            unsafe { ffi::PyObject_TypeCheck(obj.as_ptr(), self.base.as_ptr().cast()) } != 0;
        // SAFETY: `obj` is an instance of TensorBase, so a THPVariable whose `at::Tensor`
        // follows the header (the layout checked on probes when the readers were found).
        is_tensor.then(|| unsafe { self.read_unchecked(obj) })
    }

    /// # Safety
    /// `obj` is a live THPVariable: the pointer-sized field after its header is its
    /// `at::Tensor` (a `TensorImpl` address, never NULL).
    unsafe fn read_unchecked(&self, obj: &Bound<'_, PyAny>) -> State {
        let tensor = tensor_field(obj);
        // torch's own Python getters take no lock either: a concurrent `requires_grad_()` races
        // with them as it does with this read, which then sees the old or the new flag.
        // SAFETY: caller's contract: `tensor` is a live `at::Tensor`, which the two tests take
        // by reference, and the `TensorImpl` it points to is the `this` of `requires_grad`;
        // all three only read it, on a thread attached to the interpreter.
        unsafe {
            let imp = *tensor.cast::<*const c_void>();
            State {
                requires_grad: (self.requires_grad)(imp),
                conj: (self.is_conj)(tensor),
                neg: (self.is_neg)(tensor),
            }
        }
    }
}

/// The address of the first field after `obj`'s object header.
fn tensor_field(obj: &Bound<'_, PyAny>) -> *const c_void {
    obj.as_ptr()
        .cast::<u8>()
        .wrapping_add(std::mem::size_of::<ffi::PyObject>())
        .cast()
}

/// An already loaded library of torch's, by its file name (not loaded when absent).
#[cfg(target_os = "linux")]
fn library(name: &std::ffi::CStr) -> Option<*mut c_void> {
    // SAFETY: RTLD_NOLOAD only returns a handle to a library already in the process (no
    // initialiser runs); the handle is kept for the rest of the process, as torch keeps the
    // library.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    (!handle.is_null()).then_some(handle)
}

#[cfg(target_os = "linux")]
fn symbol(library: *mut c_void, name: &std::ffi::CStr) -> Option<*mut c_void> {
    // SAFETY: `library` is a live handle and `name` a C string; dlsym only looks the name up.
    let address = unsafe { libc::dlsym(library, name.as_ptr()) };
    (!address.is_null()).then_some(address)
}
