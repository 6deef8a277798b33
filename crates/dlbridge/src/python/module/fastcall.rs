//! `Tensor.__dlpack__` and `dlbridge.from_dlpack` as raw `METH_FASTCALL | METH_KEYWORDS`
//! callables.
//!
//! Both run on every exchange, and pyo3's generic argument extraction (each keyword name
//! decoded to UTF-8 and searched as a string, then generic tuple extraction) cost as much as
//! the export itself. Here keyword names are matched by identity against interned strings (the
//! names callers pass are interned: NumPy's, torch's and CPython's own call sites), with an
//! equality fallback for the rare caller whose names are not, and a call site's constant tuple
//! of keyword names is matched once. The callables are installed when the module is
//! initialised; their behaviour is [`PyTensor::dlpack`]'s and [`crate::from_dlpack`]'s.

use std::ffi::CStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyModule, PyString, PyTuple};

use crate::export::Flavor;
use crate::python::capsule;

use super::tensor::PyTensor;
use super::types::parse_device;

const NAME: &CStr = c"__dlpack__";
const DOC: &CStr =
    c"__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)
--

Export as a DLPack capsule (versioned when max_version allows, else legacy).";

const FROM_DLPACK_NAME: &CStr = c"from_dlpack";
const FROM_DLPACK_DOC: &CStr = c"from_dlpack(x, /, *, device=None, copy=None)
--

Import any array-like as a Tensor, zero-copy when possible.

Tries, in order: dlbridge Tensor, a raw DLPack capsule, a NumPy array (read through NumPy's
C API), the producer's DLPack C exchange API (e.g. torch), the Arrow PyCapsule interface
(``__arrow_c_device_array__``, ``__arrow_c_array__``, ``__arrow_c_device_stream__``,
``__arrow_c_stream__``; taken before ``__dlpack__`` for objects that offer both, like pyarrow
arrays, except pyarrow's integer and float arrays, whose own ``__dlpack__`` is faster),
``__dlpack__`` (versioned, legacy fallback), ``__cuda_array_interface__``, the buffer
protocol and ``__array_interface__``. A protocol whose method raises NotImplementedError is
passed over for the next one the object offers (BufferError naming each refusal when all do);
any other error from the producer is raised as it is. An object that offers no protocol at all
raises NoProtocolError, a TypeError and an AttributeError. A torch tensor DLPack cannot
describe (sparse, mkldnn, nested, quantized, on the meta device) is a BufferError naming the
call that makes an exportable one. Arrow imports are read-only and keep a
``fixed_shape_tensor``'s ``dim_names``; nulls are a BufferError (see :func:`from_arrow`);
bit-packed booleans and several stream chunks need a copy (several chunks on a device the host
cannot read are a BufferError). ``device`` asks the producer first, then dlbridge's own
transfer. ``copy=True`` always copies, ``copy=False`` never does (BufferError if it must),
``copy=None`` copies only when needed.";

/// `PY_VECTORCALL_ARGUMENTS_OFFSET`, the flag bit a caller may set in the argument count
/// (not in the 3.11 limited-API headers).
const ARGUMENTS_OFFSET: usize = 1 << (usize::BITS - 1);

/// `__dlpack__`'s keywords, in the order of [`PyTensor::dlpack`]'s parameters.
static DLPACK_KEYWORDS: Keywords<4> =
    Keywords::new("__dlpack__", ["stream", "max_version", "dl_device", "copy"]);

/// `from_dlpack`'s keywords.
static FROM_DLPACK_KEYWORDS: Keywords<2> = Keywords::new("from_dlpack", ["device", "copy"]);

/// The keyword-only parameters of a function, matched to a call's keyword names.
struct Keywords<const K: usize> {
    function: &'static str,
    names: [&'static str; K],
    interned: PyOnceLock<[Py<PyString>; K]>,
    /// Keyword-name tuples seen before and their [`Keywords::slots`].
    seen: IdentityCache,
}

impl<const K: usize> Keywords<K> {
    const fn new(function: &'static str, names: [&'static str; K]) -> Self {
        Self {
            function,
            names,
            interned: PyOnceLock::new(),
            seen: IdentityCache::new(),
        }
    }

    /// The value of each parameter (`None` when not passed, or passed as `None`).
    ///
    /// # Safety
    /// `kwnames` is NULL or a live tuple of str, and `values` points at one live value per
    /// keyword name (the calling convention's layout after the positionals).
    unsafe fn values<'a, 'py>(
        &self,
        py: Python<'py>,
        values: *const *mut ffi::PyObject,
        kwnames: *mut ffi::PyObject,
    ) -> PyResult<[Option<Borrowed<'a, 'py, PyAny>>; K]> {
        let mut found = [None; K];
        // SAFETY: caller's contract.
        let Some(kwnames) = (unsafe { Borrowed::from_ptr_or_opt(py, kwnames) }) else {
            return Ok(found);
        };
        let slots = match self.seen.get(kwnames.as_ptr()) {
            Some(packed) => packed,
            None => {
                let kwnames = kwnames.cast::<PyTuple>()?;
                let packed = self.slots(&kwnames)?;
                self.seen.insert(&kwnames, packed);
                packed
            }
        };
        for i in 0..(slots >> 56) as usize {
            let slot = ((slots >> (8 * i)) & 0xff) as usize;
            // SAFETY: caller's contract: the i-th keyword's value.
            let value = unsafe { Borrowed::from_ptr(py, *values.add(i)) };
            found[slot] = Some(value).filter(|v| !v.is_none());
        }
        Ok(found)
    }

    /// For each keyword name of a call, the parameter it sets, packed one byte per keyword
    /// with the keyword count in the top byte. Names are matched by identity with our interned
    /// names first, by equality otherwise.
    fn slots(&self, kwnames: &Borrowed<'_, '_, PyTuple>) -> PyResult<u64> {
        let py = kwnames.py();
        let interned = self
            .interned
            .get_or_init(py, || self.names.map(|n| PyString::intern(py, n).unbind()));
        let mut packed = (kwnames.len() as u64) << 56;
        for (i, name) in kwnames.iter_borrowed().enumerate() {
            let mut slot = interned.iter().position(|n| n.as_ptr() == name.as_ptr());
            if slot.is_none() {
                for (j, n) in interned.iter().enumerate() {
                    if n.bind(py).as_any().eq(name)? {
                        slot = Some(j);
                    }
                }
            }
            let Some(slot) = slot else {
                return Err(PyTypeError::new_err(format!(
                    "{}() got an unexpected keyword argument {}",
                    self.function,
                    name.repr()?
                )));
            };
            if i >= K || (0..i).any(|k| (packed >> (8 * k)) & 0xff == slot as u64) {
                return Err(PyTypeError::new_err(format!(
                    "{}() got multiple values for argument {}",
                    self.function,
                    name.repr()?
                )));
            }
            packed |= (slot as u64) << (8 * i);
        }
        Ok(packed)
    }
}

/// `max_version` tuples seen before and their value, `major << 32 | minor`.
static MAX_VERSIONS_SEEN: IdentityCache = IdentityCache::new();

/// Values computed from immutable tuples, remembered by the tuple's identity: callers pass the
/// same constant tuples on every call (NumPy's static keyword-name and `max_version` tuples, a
/// call site's constant keyword names), so each is parsed once. A remembered tuple is kept
/// alive for the rest of the process (a strong reference never released), so its address
/// cannot be reused by another object; at most [`IdentityCache::SLOTS`] are remembered.
struct IdentityCache {
    keys: [AtomicPtr<ffi::PyObject>; IdentityCache::SLOTS],
    values: [AtomicU64; IdentityCache::SLOTS],
    insert_lock: Mutex<()>,
}

impl IdentityCache {
    const SLOTS: usize = 8;

    const fn new() -> Self {
        Self {
            keys: [const { AtomicPtr::new(std::ptr::null_mut()) }; Self::SLOTS],
            values: [const { AtomicU64::new(0) }; Self::SLOTS],
            insert_lock: Mutex::new(()),
        }
    }

    /// The value remembered for `obj`, if any.
    fn get(&self, obj: *mut ffi::PyObject) -> Option<u64> {
        for (key, value) in self.keys.iter().zip(&self.values) {
            let k = key.load(Ordering::Acquire);
            if k.is_null() {
                return None;
            }
            if k == obj {
                return Some(value.load(Ordering::Relaxed));
            }
        }
        None
    }

    /// Remember `value` for `tuple` if a slot is free (the value is published before the key).
    fn insert(&self, tuple: &Borrowed<'_, '_, PyTuple>, value: u64) {
        let _guard = self.insert_lock.lock().unwrap_or_else(|e| e.into_inner());
        let free = self
            .keys
            .iter()
            .position(|k| k.load(Ordering::Acquire).is_null());
        if let Some(i) = free {
            self.values[i].store(value, Ordering::Relaxed);
            // The strong reference the slot keeps for the rest of the process.
            let kept = Borrowed::to_owned(*tuple).into_ptr();
            self.keys[i].store(kept, Ordering::Release);
        }
    }
}

/// A method definition for the rest of the process (callables keep the pointer).
fn definition(
    name: &'static CStr,
    doc: &'static CStr,
    function: ffi::PyCFunctionFastWithKeywords,
) -> &'static mut ffi::PyMethodDef {
    Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth: ffi::PyMethodDefPointer {
            PyCFunctionFastWithKeywords: function,
        },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: doc.as_ptr(),
    }))
}

/// Install `Tensor.__dlpack__` and `from_dlpack` in the module `m`.
pub(super) fn install(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    install_dlpack_method(py)?;
    let def = definition(FROM_DLPACK_NAME, FROM_DLPACK_DOC, FROM_DLPACK_FASTCALL);
    // SAFETY: `def` lives for the rest of the process; `m` is a live module, passed as the
    // function's `self` and `__module__`; the result is a new reference or NULL with an
    // exception set.
    let function = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            ffi::PyCFunction_NewEx(def, m.as_ptr(), m.name()?.as_ptr()),
        )?
    };
    super::contention::defer(&function);
    m.add("from_dlpack", function)
}

/// Install `Tensor.__dlpack__` on this binary's `Tensor` type, once: by [`install`], or by the
/// first `Tensor` made for Python outside a registered module (`IntoPyObject`).
pub(super) fn install_dlpack_method(py: Python<'_>) -> PyResult<()> {
    static INSTALLED: PyOnceLock<()> = PyOnceLock::new();
    INSTALLED
        .get_or_try_init(py, || {
            let ty = py.get_type::<PyTensor>();
            TENSOR_TYPE.store(ty.as_ptr().cast(), Ordering::Release);
            let def = definition(NAME, DOC, dlpack_fastcall);
            // SAFETY: `ty` is a live type object and `def` a method definition that lives for
            // the rest of the process; the result is a new reference or NULL with an exception
            // set.
            let descr = unsafe {
                Bound::from_owned_ptr_or_err(
                    py,
                    ffi::PyDescr_NewMethod(ty.as_ptr().cast::<ffi::PyTypeObject>(), def),
                )?
            };
            ty.setattr(intern!(py, "__dlpack__"), descr)?;
            Ok::<(), PyErr>(())
        })
        .map(|_| ())
}

/// The Tensor type, for the exact type check of [`common_call`].
static TENSOR_TYPE: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(std::ptr::null_mut());

/// `__dlpack__`'s C entry point. The common call (host data; keyword names and `max_version`
/// seen before; no stream, `dl_device` or `copy`) is served by [`common_call`]; everything else,
/// errors included, by the full path through PyO3's trampoline.
unsafe extern "C" fn dlpack_fastcall(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython's calling convention is `common_call`'s contract. A panic (none is
    // expected) falls back to the full path, which reports it as PanicException.
    let common = std::panic::catch_unwind(|| unsafe { common_call(slf, args, nargsf, kwnames) });
    match common {
        Ok(Some(capsule)) => capsule,
        // SAFETY: the same arguments, as CPython passed them.
        _ => unsafe { DLPACK_FASTCALL(slf, args, nargsf, kwnames) },
    }
}

/// The capsule for the common call, or `None` to take the full path. Nothing here creates or
/// drops a Python reference other than the capsule (so PyO3's trampoline, which would account
/// for such drops, is not needed): keyword names and `max_version` are only looked up in the
/// identity caches, the type is compared by address, and an export refused for any reason
/// goes to the full path, which reports it.
///
/// # Safety
/// CPython's METH_FASTCALL | METH_KEYWORDS convention, with the GIL held.
unsafe fn common_call(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> Option<*mut ffi::PyObject> {
    if nargsf as usize & !ARGUMENTS_OFFSET != 0 {
        return None;
    }
    let mut max_version = None;
    if !kwnames.is_null() {
        let slots = DLPACK_KEYWORDS.seen.get(kwnames)?;
        for i in 0..(slots >> 56) as usize {
            // SAFETY: the i-th keyword value, alive for the call.
            let value = unsafe { *args.add(i) };
            // SAFETY: Py_None is a static object.
            if value == unsafe { ffi::Py_None() } {
                continue;
            }
            if (slots >> (8 * i)) & 0xff != 1 {
                return None; // stream, dl_device or copy was given
            }
            let packed = MAX_VERSIONS_SEEN.get(value)?;
            max_version = Some(((packed >> 32) as u32, packed as u32));
        }
    }
    // SAFETY: `slf` is a live object; reading its type is always valid.
    if unsafe { ffi::Py_TYPE(slf) } != TENSOR_TYPE.load(Ordering::Acquire) {
        return None;
    }
    // SAFETY: the thread is attached (CPython called a method); `slf` is exactly a Tensor (checked
    // above), alive for the call.
    let (py, slf) = unsafe {
        let py = Python::assume_attached();
        (py, Borrowed::from_ptr(py, slf).cast_unchecked::<PyTensor>())
    };
    let tensor = &slf.get().0;
    if tensor.device().kind != crate::DeviceType::CPU {
        return None;
    }
    let managed = tensor.export(Flavor::for_max_version(max_version)).ok()?;
    capsule::export(py, managed).ok().map(Bound::into_ptr)
}

/// The full path's C entry point, made by pyo3's own trampoline (the one its `#[pymethods]`
/// use, public though undocumented): it marks the thread attached for pyo3 (Python references
/// dropped during the call are released at once), turns a panic into `PanicException` and an
/// error into a raised exception.
const DLPACK_FASTCALL: ffi::PyCFunctionFastWithKeywords = pyo3::impl_::trampoline::get_trampoline_function!(
    fastcall_cfunction_with_keywords,
    dlpack_entry
);

/// CPython passes `self`, the positional arguments followed by the keyword values, their
/// count (with perhaps the `ARGUMENTS_OFFSET` bit), and the tuple of keyword names (or NULL).
///
/// # Safety
/// Called only by CPython through the method descriptor, with the METH_FASTCALL |
/// METH_KEYWORDS convention.
unsafe fn dlpack_entry(
    py: Python<'_>,
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<*mut ffi::PyObject> {
    let nargs = nargsf as usize & !ARGUMENTS_OFFSET;
    // SAFETY: the arguments are exactly what the calling convention passes, which is
    // `parse_and_export`'s contract.
    unsafe { parse_and_export(py, slf, args, nargs, kwnames) }.map(Bound::into_ptr)
}

/// `from_dlpack`'s C entry point (see [`DLPACK_FASTCALL`]).
const FROM_DLPACK_FASTCALL: ffi::PyCFunctionFastWithKeywords = pyo3::impl_::trampoline::get_trampoline_function!(
    fastcall_cfunction_with_keywords,
    from_dlpack_entry
);

/// `from_dlpack(x, /, *, device=None, copy=None)`.
///
/// # Safety
/// Called only by CPython through the function object, with the METH_FASTCALL |
/// METH_KEYWORDS convention.
unsafe fn from_dlpack_entry(
    py: Python<'_>,
    _module: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<*mut ffi::PyObject> {
    let nargs = nargsf as usize & !ARGUMENTS_OFFSET;
    if nargs != 1 {
        return Err(PyTypeError::new_err(format!(
            "from_dlpack() takes exactly one positional argument, the array ({nargs} given)"
        )));
    }
    // SAFETY: the calling convention: one positional value, then one value per keyword name,
    // all alive for the call.
    let (x, [device, copy]) = unsafe {
        (
            Borrowed::from_ptr(py, *args),
            FROM_DLPACK_KEYWORDS.values(py, args.wrapping_add(1), kwnames)?,
        )
    };
    let device = device.map(|d| parse_device(&d)).transpose()?;
    let copy = copy.map(|c| parse_copy(&c)).transpose()?;
    super::from_dlpack(&x, device, copy).map(Bound::into_ptr)
}

/// Match the keywords and export.
///
/// # Safety
/// `slf` is a live object; `kwnames` is NULL or a live tuple of str; `args` points at `nargs`
/// positional values followed by one value per keyword name, all alive for the call.
unsafe fn parse_and_export<'py>(
    py: Python<'py>,
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: usize,
    kwnames: *mut ffi::PyObject,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: caller's contract.
    let slf = unsafe { Borrowed::from_ptr(py, slf) };
    let tensor = slf.cast::<PyTensor>()?;
    if nargs != 0 {
        return Err(PyTypeError::new_err(format!(
            "__dlpack__() takes no positional arguments ({nargs} given): stream, max_version, dl_device and copy are keyword-only"
        )));
    }
    // SAFETY: caller's contract: the keyword values follow the `nargs` positionals.
    let [stream, max_version, dl_device, copy] =
        unsafe { DLPACK_KEYWORDS.values(py, args.wrapping_add(nargs), kwnames) }?;
    let copy = copy.map(|c| parse_copy(&c)).transpose()?;
    let max_version = max_version.map(|v| cached_max_version(&v)).transpose()?;
    PyTensor::dlpack(
        &tensor,
        stream.as_deref(),
        max_version,
        dl_device.as_deref(),
        copy,
    )
}

/// [`parse_max_version`], remembered for exact tuples (callers pass constant ones).
fn cached_max_version(v: &Borrowed<'_, '_, PyAny>) -> PyResult<(u32, u32)> {
    if let Some(packed) = MAX_VERSIONS_SEEN.get(v.as_ptr()) {
        return Ok(((packed >> 32) as u32, packed as u32));
    }
    let version = parse_max_version(v)?;
    if let Ok(tuple) = v.cast_exact::<PyTuple>() {
        MAX_VERSIONS_SEEN.insert(&tuple, (u64::from(version.0) << 32) | u64::from(version.1));
    }
    Ok(version)
}

/// `max_version`: a `(major, minor)` tuple of non-negative ints.
fn parse_max_version(v: &Borrowed<'_, '_, PyAny>) -> PyResult<(u32, u32)> {
    let item = |t: &Borrowed<'_, '_, PyTuple>, i: usize| {
        t.get_borrowed_item(i).ok()?.extract::<u32>().ok()
    };
    let exact_pair = v.cast_exact::<PyTuple>().ok().filter(|t| t.len() == 2);
    match exact_pair.and_then(|t| Some((item(&t, 0)?, item(&t, 1)?))) {
        Some(version) => Ok(version),
        // Another sequence of two ints (a tuple subclass, a list): the generic extraction.
        None => v.extract::<(u32, u32)>().map_err(|_| {
            PyValueError::new_err(format!(
                "max_version must be a (major, minor) tuple of non-negative ints, not {}",
                v.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        }),
    }
}

/// `copy`: a bool (NumPy's bool included).
fn parse_copy(value: &Borrowed<'_, '_, PyAny>) -> PyResult<bool> {
    value.extract::<bool>().map_err(|_| {
        PyTypeError::new_err(format!(
            "copy must be None, True or False, not {}",
            value.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })
}
