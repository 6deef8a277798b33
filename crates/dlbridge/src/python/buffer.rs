//! The Python buffer protocol: import any exporter as a Tensor, and fill a `Py_buffer` from a
//! Tensor for `memoryview(t)`.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use pyo3::ffi;
use pyo3::prelude::*;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::Error;
use crate::layout::{Layout, MAX_NDIM};
use crate::python::errors::buffer_error;
use crate::python::held::with_gil;
use crate::tensor::{Owner, Tensor, TensorFlags};

/// A `Py_buffer` obtained with `PyObject_GetBuffer`, released (under the GIL) on drop.
struct HeldBuffer(Box<ffi::Py_buffer>);

// SAFETY: the view is only read, and released exactly once in Drop while attached
// to the interpreter (or deliberately leaked once the interpreter is gone).
unsafe impl Send for HeldBuffer {}
// SAFETY: see above.
unsafe impl Sync for HeldBuffer {}

impl Drop for HeldBuffer {
    fn drop(&mut self) {
        let view: *mut ffi::Py_buffer = &mut *self.0;
        // SAFETY: the view was filled by a successful PyObject_GetBuffer and is released once,
        // holding the GIL (see `held`); after finalisation it is leaked on purpose.
        with_gil(|| unsafe { ffi::PyBuffer_Release(view) });
    }
}

/// True when `obj`'s type implements the buffer protocol.
pub(crate) fn has_buffer(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: a read of the type slots of a live object.
    unsafe { ffi::PyObject_CheckBuffer(obj.as_ptr()) == 1 }
}

/// Import a buffer-protocol exporter (N-d, strided, read-only kept).
pub(crate) fn import(obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let mut view = Box::new(ffi::Py_buffer::new());
    // SAFETY: `view` is a zeroed Py_buffer we own; on success it must be released (HeldBuffer).
    if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut *view, ffi::PyBUF_RECORDS_RO) } != 0 {
        return Err(PyErr::fetch(obj.py()));
    }
    let held = HeldBuffer(view);
    let v = &*held.0;
    let itemsize = usize::try_from(v.itemsize).map_err(|_| buffer_error("negative itemsize"))?;
    let format = if v.format.is_null() {
        "B"
    } else {
        // SAFETY: a non-NULL format of a filled view is a NUL-terminated string.
        unsafe { std::ffi::CStr::from_ptr(v.format) }
            .to_str()
            .map_err(|_| buffer_error("the buffer format is not ASCII"))?
    };
    let dtype = DType::from_buffer_format(format, itemsize)?;
    if !v.suboffsets.is_null() {
        return Err(buffer_error(
            "buffers with suboffsets (PIL-style indirect arrays) cannot be exchanged",
        ));
    }
    let ndim = usize::try_from(v.ndim)
        .ok()
        .filter(|n| *n <= MAX_NDIM)
        .ok_or_else(|| buffer_error("invalid ndim"))?;
    // Shape and element strides on the stack: no allocation for the description. A view
    // without shape (only when ND was not requested) is one flat dimension of `len` bytes.
    let (mut extents, mut strides) = ([0i64; MAX_NDIM], [0i64; MAX_NDIM]);
    let ndim = if ndim > 0 && v.shape.is_null() {
        extents[0] = (v.len as i64) / (itemsize.max(1) as i64);
        1
    } else {
        let given = if ndim == 0 {
            &[][..]
        } else {
            // SAFETY: a filled view has `ndim` shape entries when shape is non-NULL.
            unsafe { std::slice::from_raw_parts(v.shape, ndim) }
        };
        for (d, &n) in extents.iter_mut().zip(given) {
            *d = n as i64;
        }
        ndim
    };
    let shape = &extents[..ndim];
    let strides = if v.strides.is_null() {
        None
    } else {
        // SAFETY: as for shape.
        let bytes = unsafe { std::slice::from_raw_parts(v.strides, ndim) };
        let out = &mut strides[..ndim];
        element_strides_into(shape, bytes.iter().map(|&s| s as i64), itemsize, out)?;
        Some(&*out)
    };
    let layout = Layout::new(shape, strides, itemsize)?;
    let (data, readonly) = (v.buf, v.readonly != 0);
    let data = if data.is_null() && layout.size() == 0 {
        std::ptr::null_mut()
    } else {
        data
    };
    // SAFETY: the exporter guarantees the memory described by the view stays valid until the
    // view is released, which happens when `held` (the owner) is dropped.
    Ok(unsafe {
        Tensor::from_raw_parts(
            data,
            0,
            Device::CPU,
            dtype,
            layout,
            TensorFlags {
                readonly,
                copied: false,
            },
            Arc::new(held),
        )
    }?)
}

/// The bytes of a contiguous buffer-protocol exporter (any format, read as plain bytes): their
/// address, length and read-only flag, and an owner that keeps them valid until it is dropped.
pub(crate) fn contiguous_bytes(obj: &Bound<'_, PyAny>) -> PyResult<(*mut u8, usize, bool, Owner)> {
    let mut view = Box::new(ffi::Py_buffer::new());
    // SAFETY: `view` is a zeroed Py_buffer we own; on success it must be released (HeldBuffer).
    if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut *view, ffi::PyBUF_SIMPLE) } != 0 {
        return Err(PyErr::fetch(obj.py()));
    }
    let held = HeldBuffer(view);
    let len = usize::try_from(held.0.len).map_err(|_| buffer_error("negative buffer length"))?;
    let (data, readonly) = (held.0.buf.cast::<u8>(), held.0.readonly != 0);
    Ok((data, len, readonly, Arc::new(held)))
}

/// Byte strides -> element strides. A byte stride that is not a multiple of the item size is a
/// BufferError, except on dims of extent <= 1, where strides are meaningless.
pub(crate) fn element_strides(
    shape: &[i64],
    byte_strides: impl Iterator<Item = i64>,
    itemsize: usize,
) -> Result<Vec<i64>, Error> {
    let mut out = vec![0; shape.len()];
    element_strides_into(shape, byte_strides, itemsize, &mut out)?;
    Ok(out)
}

/// [`element_strides`] into `out` (one entry per dimension).
fn element_strides_into(
    shape: &[i64],
    byte_strides: impl Iterator<Item = i64>,
    itemsize: usize,
    out: &mut [i64],
) -> Result<(), Error> {
    let item = itemsize.max(1) as i64;
    for ((o, &n), s) in out.iter_mut().zip(shape).zip(byte_strides) {
        *o = if s % item == 0 {
            s / item
        } else if n <= 1 {
            0
        } else {
            return Err(Error::InvalidLayout(format!(
                "byte stride {s} is not a multiple of the item size {itemsize}; DLPack strides are in elements"
            )));
        };
    }
    Ok(())
}

/// Per-view storage kept in `Py_buffer.internal`: shape and byte strides.
struct ViewDims {
    shape: Vec<ffi::Py_ssize_t>,
    strides: Vec<ffi::Py_ssize_t>,
}

static EMPTY: u64 = 0;

/// Fill `view` for `tensor`, exported by `owner` (the Python object `memoryview` keeps alive).
///
/// # Safety
/// `view` must point to a `Py_buffer` that the caller owns (as in a `bf_getbuffer` slot); on
/// success it must later be passed to [`release`].
pub(crate) unsafe fn fill(
    view: *mut ffi::Py_buffer,
    flags: c_int,
    tensor: &Tensor,
    owner: Bound<'_, PyAny>,
) -> PyResult<()> {
    tensor.device().require_host()?;
    if flags & ffi::PyBUF_WRITABLE != 0 && tensor.is_readonly() {
        return Err(buffer_error(
            "the tensor is read-only; a writable buffer cannot be exported (request a read-only buffer, or copy it first)",
        ));
    }
    let dtype = tensor.dtype();
    let format = dtype.buffer_format_cstr().ok_or_else(|| {
        buffer_error(format!(
            "dtype {dtype} has no buffer-protocol format; use DLPack with a consumer that has {dtype}, or dlbridge.to_numpy(t) for an ml_dtypes NumPy view"
        ))
    })?;
    let contiguous_request = |mask: c_int| flags & mask == mask;
    if contiguous_request(ffi::PyBUF_C_CONTIGUOUS) && !tensor.is_c_contiguous()
        || contiguous_request(ffi::PyBUF_F_CONTIGUOUS) && !tensor.is_f_contiguous()
        || contiguous_request(ffi::PyBUF_ANY_CONTIGUOUS)
            && !(tensor.is_c_contiguous() || tensor.is_f_contiguous())
        || flags & ffi::PyBUF_STRIDES != ffi::PyBUF_STRIDES && !tensor.is_c_contiguous()
    {
        return Err(buffer_error(
            "the tensor is not laid out as the buffer request needs; copy it first (Tensor.copy())",
        ));
    }
    let itemsize = tensor.itemsize() as ffi::Py_ssize_t;
    let dims = Box::new(ViewDims {
        shape: tensor
            .shape()
            .iter()
            .map(|&n| n as ffi::Py_ssize_t)
            .collect(),
        strides: tensor
            .layout()
            .export_strides()
            .iter()
            .map(|&s| s as ffi::Py_ssize_t * itemsize)
            .collect(),
    });
    let buf = if tensor.data_ptr() == 0 {
        &EMPTY as *const u64 as usize
    } else {
        tensor.data_ptr()
    };
    // SAFETY: the caller owns `view`; every pointer stored in it stays valid until `release`
    // (dims is leaked into `internal`, the format is static, `obj` is a new reference).
    unsafe {
        let v = &mut *view;
        v.buf = buf as *mut c_void;
        v.len = tensor.nbytes() as ffi::Py_ssize_t;
        v.itemsize = itemsize;
        v.readonly = c_int::from(tensor.is_readonly());
        v.ndim = tensor.ndim() as c_int;
        v.format = if flags & ffi::PyBUF_FORMAT != 0 {
            format.as_ptr().cast_mut()
        } else {
            std::ptr::null_mut()
        };
        let dims = Box::into_raw(dims);
        v.shape = if flags & ffi::PyBUF_ND != 0 {
            (*dims).shape.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        };
        v.strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
            (*dims).strides.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        };
        v.suboffsets = std::ptr::null_mut();
        v.internal = dims.cast();
        v.obj = owner.into_ptr();
    }
    Ok(())
}

/// Free what [`fill`] stored in `view`.
///
/// # Safety
/// `view` must have been filled by [`fill`] and not released before.
pub(crate) unsafe fn release(view: *mut ffi::Py_buffer) {
    // SAFETY: `internal` holds the ViewDims leaked by `fill`, freed exactly once here.
    unsafe {
        let internal = (*view).internal;
        if !internal.is_null() {
            drop(Box::from_raw(internal.cast::<ViewDims>()));
            (*view).internal = std::ptr::null_mut();
        }
    }
}
