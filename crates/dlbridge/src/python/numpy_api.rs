//! NumPy arrays read and built through NumPy's own C API, without a DLPack capsule.
//!
//! The table is NumPy's documented `_ARRAY_API` capsule of its `_multiarray_umath` module,
//! found in `sys.modules` (dlbridge never imports NumPy) and accepted only for the two ABIs
//! whose layouts this module knows: 1.x (`0x01000009`) and 2.x (`0x02000000`). The slots used
//! (0 `PyArray_GetNDArrayCVersion`, 2 `PyArray_Type`, 45 `PyArray_DescrFromType`, 94
//! `PyArray_NewFromDescr`, 282 `PyArray_SetBaseObject`) and the fields read (`PyArrayObject`:
//! data, nd, dimensions, strides, base, descr, flags; `PyArray_Descr`: byteorder, type_num)
//! are the same in both ABIs. `elsize` moved between them, so item sizes come from the type
//! number, and only NumPy's builtin numeric types are handled here, plus the types ml_dtypes
//! registers (bfloat16, float8, float6, float4), which NumPy's `__dlpack__` refuses although
//! DLPack has them: those are recognised by their scalar type (`descr.typeobj`, the field after
//! the object header in both ABIs) and their item size asked of the descriptor in Python.
//!
//! Import mirrors what NumPy's `__dlpack__` exports, field for field (strides divided by the
//! item size, read-only iff not WRITEABLE, CPU), and declines (`None`) everything NumPy's
//! `__dlpack__` could refuse or describe differently, which then takes the DLPack path.

use std::ffi::{c_char, c_int, c_long, c_uint, c_void};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::device::Device;
use crate::dtype::{DType, TypeCode};
use crate::layout::Layout;
use crate::python::held::HeldObject;
use crate::tensor::{Owner, Tensor, TensorFlags};

/// `NPY_ABI_VERSION` of NumPy 1.x and 2.x.
const ABI_1: c_uint = 0x0100_0009;
const ABI_2: c_uint = 0x0200_0000;

/// Table slots (identical in both ABIs).
const GET_NDARRAY_C_VERSION: usize = 0;
const ARRAY_TYPE: usize = 2;
const DESCR_TYPE: usize = 3;
const DESCR_FROM_TYPE: usize = 45;
const NEW_FROM_DESCR: usize = 94;
const SET_BASE_OBJECT: usize = 282;

/// `NPY_ARRAY_*` flags.
const C_CONTIGUOUS: c_int = 0x0001;
const WRITEABLE: c_int = 0x0400;

/// The leading fields of `PyArrayObject_fields` (same in 1.x and 2.x).
#[repr(C)]
struct ArrayObject {
    _ob_base: ffi::PyObject,
    data: *mut c_char,
    nd: c_int,
    dimensions: *const isize,
    strides: *const isize,
    base: *mut ffi::PyObject,
    descr: *const Descr,
    flags: c_int,
}

/// The leading fields of `PyArray_Descr` shared by 1.x and 2.x.
#[repr(C)]
struct Descr {
    _ob_base: ffi::PyObject,
    typeobj: *mut ffi::PyTypeObject,
    _kind: c_char,
    _type: c_char,
    byteorder: c_char,
    _former_flags: c_char,
    type_num: c_int,
}

type GetVersionFn = unsafe extern "C" fn() -> c_uint;
type DescrFromTypeFn = unsafe extern "C" fn(c_int) -> *mut ffi::PyObject;
type NewFromDescrFn = unsafe extern "C" fn(
    *mut ffi::PyTypeObject,
    *mut ffi::PyObject,
    c_int,
    *const isize,
    *const isize,
    *mut c_void,
    c_int,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;
type SetBaseObjectFn = unsafe extern "C" fn(*mut ffi::PyObject, *mut ffi::PyObject) -> c_int;

/// NumPy's C-API table, of a supported ABI (it lives as long as the process: extension
/// modules are never unloaded).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Api(NonNull<*const c_void>);

// SAFETY: the table is immutable, process-lifetime data, so sharing its address between
// threads is sound; every call through it is made by a thread attached to the interpreter
// (each method takes a `Python`-bound argument), which NumPy's C API requires, and NumPy's
// functions do their own locking where free-threaded builds need it.
unsafe impl Send for Api {}
// SAFETY: see above.
unsafe impl Sync for Api {}

/// The table, once found.
static TABLE: AtomicPtr<*const c_void> = AtomicPtr::new(std::ptr::null_mut());

impl Api {
    /// The table of the NumPy already imported in this process, or `None` (not imported, or an
    /// ABI this module does not know). Found once; not-found is asked again next time.
    pub(crate) fn get(py: Python<'_>) -> Option<Self> {
        if let Some(table) = NonNull::new(TABLE.load(Ordering::Acquire)) {
            return Some(Self(table));
        }
        let api = Self::find(py)?;
        TABLE.store(api.0.as_ptr(), Ordering::Release);
        Some(api)
    }

    /// The table when `ty` is exactly `numpy.ndarray` (subclasses: `None`).
    pub(crate) fn for_exact_ndarray(ty: &Bound<'_, PyType>) -> Option<Self> {
        if !ty.name().is_ok_and(|n| n == "ndarray") {
            return None;
        }
        Self::get(ty.py()).filter(|api| api.array_type() == ty.as_type_ptr())
    }

    fn find(py: Python<'_>) -> Option<Self> {
        // The `abi3t` build cannot read NumPy's structs: its object header has no size when it
        // is compiled (`ffi::PyObject` is opaque there, and the GIL and free-threaded builds of
        // CPython 3.15, which both load it, lay the header out differently), so the field
        // offsets of `ArrayObject` and `Descr` would be wrong. NumPy arrays take the DLPack path.
        if cfg!(all(Py_LIMITED_API, Py_GIL_DISABLED)) {
            return None;
        }
        let modules = py
            .import(intern!(py, "sys"))
            .ok()?
            .getattr("modules")
            .ok()?;
        let module = [
            "numpy._core._multiarray_umath",
            "numpy.core._multiarray_umath",
        ]
        .into_iter()
        .find_map(|name| modules.get_item(name).ok())?;
        let capsule = module.getattr(intern!(py, "_ARRAY_API")).ok()?;
        if !super::capsule::is_capsule(&capsule) {
            return None;
        }
        // SAFETY: `capsule` is a capsule; NumPy creates `_ARRAY_API` without a name, and a
        // NULL result (a named capsule) sets an error that is cleared at once.
        let table = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), std::ptr::null()) };
        let Some(table) = NonNull::new(table.cast::<*const c_void>()) else {
            // SAFETY: clear the error PyCapsule_GetPointer just set.
            unsafe { ffi::PyErr_Clear() };
            return None;
        };
        let api = Self(table);
        // SAFETY: slot 0 of every NumPy C-API table is PyArray_GetNDArrayCVersion, which takes
        // nothing and only returns a constant.
        let abi = unsafe {
            let f: Option<GetVersionFn> = std::mem::transmute(api.slot(GET_NDARRAY_C_VERSION));
            f.map(|f| f())
        };
        matches!(abi, Some(ABI_1 | ABI_2)).then_some(api)
    }

    /// The table when it was already found (by [`Api::get`]), without searching for it.
    pub(crate) fn found() -> Option<Self> {
        NonNull::new(TABLE.load(Ordering::Acquire)).map(Self)
    }

    /// True when `obj` is exactly a `numpy.ndarray` (not a subclass).
    pub(crate) fn is_exact_ndarray(self, obj: &Bound<'_, PyAny>) -> bool {
        // SAFETY: reading the type of a live object.
        unsafe { ffi::Py_TYPE(obj.as_ptr()) == self.array_type() }
    }

    /// True when `obj` is a `numpy.ndarray` or an instance of a subclass.
    pub(crate) fn is_ndarray(self, obj: &Bound<'_, PyAny>) -> bool {
        // SAFETY: a type check of a live object against NumPy's (immortal) array type.
        unsafe { ffi::PyObject_TypeCheck(obj.as_ptr(), self.array_type()) != 0 }
    }

    fn slot(self, index: usize) -> *const c_void {
        // SAFETY: the table of a known ABI has more than SET_BASE_OBJECT entries; it is never
        // written after NumPy's import.
        unsafe { *self.0.as_ptr().add(index) }
    }

    fn array_type(self) -> *mut ffi::PyTypeObject {
        self.slot(ARRAY_TYPE).cast_mut().cast()
    }

    /// Import an exact `numpy.ndarray` (the caller checked its type against this table) the way
    /// its `__dlpack__` would describe it, kept alive by a reference to the array. `None` for
    /// anything else NumPy's `__dlpack__` must decide: non-numeric or user-defined dtypes other
    /// than ml_dtypes', byte-swapped data, strides that are not whole items, arrays that came
    /// from DLPack (their device is their capsule's).
    ///
    /// ml_dtypes arrays, which NumPy's `__dlpack__` refuses, are imported here with their
    /// DLPack dtype (float4 and float6, one element per byte, as padded sub-byte tensors);
    /// ml_dtypes types dlbridge has no dtype for (int4, int2...) are a BufferError naming the
    /// conversion to make first.
    #[inline]
    pub(crate) fn import(self, obj: &Bound<'_, PyAny>) -> PyResult<Option<Tensor>> {
        // NumPy does not lock arrays: `a.shape = ...` in another thread races with every reader,
        // NumPy's own C functions included.
        // SAFETY: `obj` is an exact ndarray of this table's ABI (caller's contract, by its
        // type), kept alive by the reference this borrow holds; only the shared leading fields
        // are read, by an attached thread.
        let array = unsafe { &*obj.as_ptr().cast::<ArrayObject>() };
        // SAFETY: a live array always has a live descriptor.
        let descr = unsafe { &*array.descr };
        let dtype = match builtin_dtype(descr.type_num) {
            Some(dtype) => dtype,
            // Out of line: builtin dtypes pay nothing for it.
            None => match user_dtype(obj.py(), descr)? {
                Some(dtype) => dtype,
                None => return Ok(None),
            },
        };
        if !native_order(descr.byteorder) || self.base_is_capsule(array.base) {
            return Ok(None);
        }
        let nd = usize::try_from(array.nd).unwrap_or(usize::MAX);
        if nd > crate::layout::MAX_NDIM {
            return Ok(None);
        }
        let (shape, strides): (&[isize], &[isize]) = if nd == 0 {
            (&[], &[])
        } else {
            // SAFETY: a live array has `nd` readable extents and strides.
            unsafe {
                (
                    std::slice::from_raw_parts(array.dimensions, nd),
                    std::slice::from_raw_parts(array.strides, nd),
                )
            }
        };
        let itemsize = dtype.itemsize() as isize;
        // NumPy's own rule: strides are checked unless the array is C-contiguous or has one
        // element, and then divided by the item size (truncating, as C does).
        let one = || shape.iter().try_fold(1isize, |acc, &n| acc.checked_mul(n)) == Some(1);
        if array.flags & C_CONTIGUOUS == 0
            && !one()
            && shape
                .iter()
                .zip(strides)
                .any(|(&n, &s)| n != 1 && s % itemsize != 0)
        {
            return Ok(None);
        }
        let (layout, reach) = Layout::from_byte_strides(shape, strides, dtype.itemsize())?;
        let owner: Owner = Arc::new(HeldObject::new(obj));
        // SAFETY: NumPy guarantees the array's memory spans its layout for as long as the array
        // lives; `owner` keeps it alive, and writable only when NumPy says WRITEABLE. `reach`
        // is the layout's.
        let tensor = unsafe {
            Tensor::with_reach(
                array.data.cast(),
                0,
                Device::CPU,
                dtype,
                layout,
                reach,
                TensorFlags {
                    readonly: array.flags & WRITEABLE == 0,
                    copied: false,
                },
                owner,
            )
        }?;
        if dtype.is_subbyte() {
            // Only ml_dtypes' float4 / float6 get here: one element per byte.
            return Ok(Some(tensor.into_subbyte_padded()));
        }
        Ok(Some(tensor))
    }

    /// True when the array's base chain ends in a capsule (an array NumPy imported from
    /// DLPack, whose device its `__dlpack__` reports from that capsule).
    fn base_is_capsule(self, mut base: *mut ffi::PyObject) -> bool {
        // SAFETY: each base is a live object owned by the array before it; the type check
        // guarantees the cast to an array before its base is read.
        unsafe {
            while !base.is_null() && ffi::PyObject_TypeCheck(base, self.array_type()) != 0 {
                base = (*base.cast::<ArrayObject>()).base;
            }
            !base.is_null() && ffi::PyCapsule_CheckExact(base) != 0
        }
    }

    /// True when NumPy has `dtype` built in (so [`Api::to_ndarray`] can make the array).
    pub(crate) fn supports(self, dtype: DType) -> bool {
        type_num_of(dtype).is_some()
    }

    /// A `numpy.ndarray` viewing `tensor`'s host memory, with `base` (which must keep that
    /// memory alive) as its base object: what `numpy.from_dlpack` builds, without a capsule.
    /// Read-only unless the tensor is writable. `None` for dtypes NumPy has no builtin type
    /// for and for memory that is not plain CPU memory.
    pub(crate) fn to_ndarray<'py>(
        self,
        tensor: &Tensor,
        base: Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = base.py();
        let Some(type_num) = type_num_of(tensor.dtype()) else {
            return Ok(None);
        };
        if tensor.device() != Device::CPU {
            return Ok(None);
        }
        // SAFETY: slot 45 has this signature in both known ABIs; the thread is attached. The
        // result is a new reference (NULL with an error set on failure).
        let descr = unsafe {
            let descr_from_type: DescrFromTypeFn = std::mem::transmute(self.slot(DESCR_FROM_TYPE));
            Bound::from_owned_ptr_or_err(py, descr_from_type(type_num))?
        };
        self.new_array(tensor, descr, base).map(Some)
    }

    /// [`Api::to_ndarray`] with the NumPy dtype `descr` (an ml_dtypes dtype, for the tensors
    /// whose dtype NumPy has no builtin type for). `None` when `descr` is not a NumPy dtype of
    /// the tensor's item size (one byte per element for sub-byte tensors, which must be
    /// padded) or the memory is not plain CPU memory.
    pub(crate) fn to_ndarray_as<'py>(
        self,
        tensor: &Tensor,
        descr: Bound<'py, PyAny>,
        base: Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = base.py();
        // SAFETY: a type check of a live object against NumPy's (immortal) dtype type.
        let is_descr = unsafe {
            ffi::PyObject_TypeCheck(descr.as_ptr(), self.slot(DESCR_TYPE).cast_mut().cast()) != 0
        };
        if !is_descr
            || tensor.device() != Device::CPU
            || (tensor.dtype().is_subbyte() && !tensor.is_subbyte_padded())
            || descr.getattr(intern!(py, "itemsize"))?.extract::<usize>()? != tensor.itemsize()
        {
            return Ok(None);
        }
        self.new_array(tensor, descr, base).map(Some)
    }

    /// The array of [`Api::to_ndarray`]: `descr` must be a NumPy dtype whose item size is the
    /// tensor's, and the tensor in plain CPU memory.
    fn new_array<'py>(
        self,
        tensor: &Tensor,
        descr: Bound<'py, PyAny>,
        base: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = base.py();
        let nd = tensor.ndim();
        let item = tensor.itemsize() as isize;
        let mut small = [0isize; 16];
        let mut large = Vec::new();
        let dims: &mut [isize] = if nd <= 8 {
            &mut small[..2 * nd]
        } else {
            large.resize(2 * nd, 0);
            &mut large
        };
        // The strides a DLPack export publishes (row-major for zero-size tensors).
        let strides = tensor.layout().export_strides();
        for (i, (&n, &s)) in tensor.shape().iter().zip(strides.iter()).enumerate() {
            // Layout bounded every byte offset by isize::MAX, so neither cast nor product
            // overflows.
            dims[i] = n as isize;
            dims[nd + i] = s as isize * item;
        }
        let flags = if tensor.is_readonly() { 0 } else { WRITEABLE };
        // The memory at `data_ptr` spans the layout (a validated tensor) while `base` lives, and
        // is writable through the array only when the tensor is.
        // SAFETY: slot 94 has this signature in both known ABIs; the thread is attached;
        // `descr` is a dtype of the tensor's item size (caller's contract). NewFromDescr steals
        // the descriptor (also on failure) and copies the shape and strides.
        let array = unsafe {
            let new_from_descr: NewFromDescrFn = std::mem::transmute(self.slot(NEW_FROM_DESCR));
            let array = new_from_descr(
                self.array_type(),
                descr.into_ptr(),
                nd as c_int,
                dims.as_ptr(),
                dims.as_ptr().add(nd),
                tensor.data_ptr() as *mut c_void,
                flags,
                std::ptr::null_mut(),
            );
            Bound::from_owned_ptr_or_err(py, array)?
        };
        // SAFETY: slot 282 has this signature in both known ABIs; it steals the reference to
        // `base` (also on failure, where the array is released with it).
        let status = unsafe {
            let set_base: SetBaseObjectFn = std::mem::transmute(self.slot(SET_BASE_OBJECT));
            set_base(array.as_ptr(), base.into_ptr())
        };
        if status < 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(array)
    }
}

/// `true` for NumPy's byte-order characters that mean "as the machine stores it".
fn native_order(byteorder: c_char) -> bool {
    let native = if cfg!(target_endian = "little") {
        b'<'
    } else {
        b'>'
    };
    // `c_char` is `i8` on x86-64 and `u8` on aarch64 Linux, where the cast changes nothing.
    #[allow(clippy::unnecessary_cast)]
    let byte = byteorder as u8;
    matches!(byte, b'=' | b'|') || byte == native
}

/// `NPY_TYPES` numbers of the builtin numeric types.
mod npy {
    use std::ffi::c_int;
    pub(super) const BOOL: c_int = 0;
    pub(super) const BYTE: c_int = 1;
    pub(super) const UBYTE: c_int = 2;
    pub(super) const SHORT: c_int = 3;
    pub(super) const USHORT: c_int = 4;
    pub(super) const INT: c_int = 5;
    pub(super) const UINT: c_int = 6;
    pub(super) const LONG: c_int = 7;
    pub(super) const ULONG: c_int = 8;
    pub(super) const LONGLONG: c_int = 9;
    pub(super) const ULONGLONG: c_int = 10;
    pub(super) const FLOAT: c_int = 11;
    pub(super) const DOUBLE: c_int = 12;
    pub(super) const CFLOAT: c_int = 14;
    pub(super) const CDOUBLE: c_int = 15;
    pub(super) const HALF: c_int = 23;
}

const LONG_IS_64: bool = std::mem::size_of::<c_long>() == 8;

/// The dtype of a builtin NumPy type number (C `long` is 4 or 8 bytes per platform), `None`
/// for the rest (long double, datetimes, objects, strings, structured, user types).
fn builtin_dtype(type_num: c_int) -> Option<DType> {
    Some(match type_num {
        npy::BOOL => DType::BOOL,
        npy::BYTE => DType::INT8,
        npy::UBYTE => DType::UINT8,
        npy::SHORT => DType::INT16,
        npy::USHORT => DType::UINT16,
        npy::INT => DType::INT32,
        npy::UINT => DType::UINT32,
        npy::LONG if LONG_IS_64 => DType::INT64,
        npy::LONG => DType::INT32,
        npy::ULONG if LONG_IS_64 => DType::UINT64,
        npy::ULONG => DType::UINT32,
        npy::LONGLONG => DType::INT64,
        npy::ULONGLONG => DType::UINT64,
        npy::HALF => DType::FLOAT16,
        npy::FLOAT => DType::FLOAT32,
        npy::DOUBLE => DType::FLOAT64,
        npy::CFLOAT => DType::COMPLEX64,
        npy::CDOUBLE => DType::COMPLEX128,
        _ => return None,
    })
}

/// The type number `numpy.from_dlpack` picks for `dtype` (NumPy's `NPY_INT32` / `NPY_INT64`
/// are C `long` where it has that size).
fn type_num_of(dtype: DType) -> Option<c_int> {
    Some(match dtype {
        DType::BOOL => npy::BOOL,
        DType::INT8 => npy::BYTE,
        DType::UINT8 => npy::UBYTE,
        DType::INT16 => npy::SHORT,
        DType::UINT16 => npy::USHORT,
        DType::INT32 if !LONG_IS_64 => npy::LONG,
        DType::INT32 => npy::INT,
        DType::UINT32 if !LONG_IS_64 => npy::ULONG,
        DType::UINT32 => npy::UINT,
        DType::INT64 if LONG_IS_64 => npy::LONG,
        DType::INT64 => npy::LONGLONG,
        DType::UINT64 if LONG_IS_64 => npy::ULONG,
        DType::UINT64 => npy::ULONGLONG,
        DType::FLOAT16 => npy::HALF,
        DType::FLOAT32 => npy::FLOAT,
        DType::FLOAT64 => npy::DOUBLE,
        DType::COMPLEX64 => npy::CFLOAT,
        DType::COMPLEX128 => npy::CDOUBLE,
        _ => return None,
    })
}

/// `NPY_USERDEF`: the first type number of a user-defined (registered) type.
const USERDEF: c_int = 256;

/// The user type numbers (from `USERDEF`) whose answer [`user_dtype`] remembers; ml_dtypes
/// registers about twenty. NumPy never unregisters a type, so a number keeps its type for the
/// life of the process.
const REMEMBERED: usize = 64;

/// [`user_dtype`]'s answer for type number `USERDEF + i`: [`UNKNOWN`], [`NOT_ML_DTYPES`], or a
/// dtype as [`encode`] writes it. Refusals are not remembered (they raise, and are rare).
static USER_DTYPES: [AtomicU32; REMEMBERED] = [const { AtomicU32::new(UNKNOWN) }; REMEMBERED];
const UNKNOWN: u32 = 0;
const NOT_ML_DTYPES: u32 = 1;

fn encode(dtype: DType) -> u32 {
    1 << 24 | u32::from(dtype.code().0) << 8 | u32::from(dtype.bits())
}

fn decode(value: u32) -> Option<DType> {
    DType::new(TypeCode((value >> 8) as u8), value as u8, 1).ok()
}

/// The DLPack dtype of a user-defined NumPy type that ml_dtypes registered (bfloat16, float8,
/// float6, float4: found by the scalar type's module and name, with the item size checked),
/// `None` for other types, which take the general path. A BufferError for ml_dtypes types
/// dlbridge has no dtype for (int4, uint4, int2, uint2, and any newer one), naming the
/// conversion to make first: NumPy's own `__dlpack__` refusal would not say.
#[cold]
#[inline(never)]
fn user_dtype(py: Python<'_>, descr: &Descr) -> PyResult<Option<DType>> {
    let slot = descr
        .type_num
        .checked_sub(USERDEF)
        .and_then(|i| usize::try_from(i).ok())
        .filter(|&i| i < REMEMBERED);
    if let Some(i) = slot {
        match USER_DTYPES[i].load(Ordering::Relaxed) {
            UNKNOWN => {}
            NOT_ML_DTYPES => return Ok(None),
            value => return Ok(decode(value)),
        }
    }
    let found = ml_dtypes_dtype(py, descr)?;
    if let Some(i) = slot {
        let value = found.map_or(NOT_ML_DTYPES, encode);
        USER_DTYPES[i].store(value, Ordering::Relaxed);
    }
    Ok(found)
}

/// [`user_dtype`] asked of Python: the descriptor's scalar type and item size.
fn ml_dtypes_dtype(py: Python<'_>, descr: &Descr) -> PyResult<Option<DType>> {
    // SAFETY: a live descriptor is a Python object (a `numpy.dtype`), and its scalar type is a
    // live type it holds a reference to; both are borrowed for this call only.
    let (descr_obj, scalar) = unsafe {
        (
            Bound::from_borrowed_ptr(py, (descr as *const Descr).cast_mut().cast()),
            Bound::from_borrowed_ptr(py, descr.typeobj.cast()),
        )
    };
    let Ok(scalar) = scalar.cast_into::<PyType>() else {
        return Ok(None);
    };
    let from_ml_dtypes = scalar.module().is_ok_and(|m| {
        m.to_cow()
            .is_ok_and(|m| m == "ml_dtypes" || m.starts_with("ml_dtypes."))
    });
    if !from_ml_dtypes {
        return Ok(None);
    }
    let name = scalar.name()?.to_string();
    let itemsize: usize = descr_obj.getattr(intern!(py, "itemsize"))?.extract()?;
    match DType::from_name(&name) {
        // float4 and float6 are stored one element per byte: padded sub-byte tensors.
        Some(dtype) if dtype.lanes() == 1 && dtype.itemsize() == itemsize => Ok(Some(dtype)),
        _ => {
            let instead = if name.starts_with("uint") {
                "numpy.uint8"
            } else if name.starts_with("int") {
                "numpy.int8"
            } else {
                "numpy.float32"
            };
            Err(PyBufferError::new_err(format!(
                "cannot import a NumPy array of ml_dtypes.{name}: dlbridge has no DLPack dtype for it (it has bfloat16, float8, float6 and float4); convert it first, e.g. a.astype({instead})"
            )))
        }
    }
}
