//! Pickling a Tensor: `__reduce_ex__` and the reconstructor it names.
//!
//! The data travels as one contiguous run of bytes: out of band as a `pickle.PickleBuffer`
//! (protocol 5 with a `buffer_callback`, zero-copy both ways), in band otherwise. A layout that
//! is neither C- nor F-contiguous is sent as a compact C-order copy (the span covering a
//! strided view can be far larger than its elements). CUDA data is staged through the host and
//! restored on the same device; other devices are refused at dump time.
//!
//! Loading is an import of untrusted input: the [`Metadata`] carries no address, and the
//! bytes received must hold the described elements exactly (see [`wire::Description::check`]).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyTuple};

use crate::copy::Order;
use crate::cuda;
use crate::device::{Device, DeviceType};
use crate::error::Error;
use crate::python::buffer::contiguous_bytes;
use crate::python::errors::buffer_error;
use crate::tensor::Tensor;
use crate::wire::{self, Description};

/// Version of the metadata tuple; a reconstructor refuses others.
const FORMAT: u32 = 1;

/// What travels beside the bytes: the [`Description`] plus the flags, names and device that
/// are not about the bytes themselves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Metadata {
    /// Layout and element type of the bytes.
    pub description: Description,
    /// The source was read-only.
    pub readonly: bool,
    /// One name per dimension, or none.
    pub dim_names: Option<Vec<String>>,
    /// Where the tensor is restored.
    pub device: Device,
}

impl Metadata {
    /// The metadata as a tuple of plain Python values (what a pickle stores).
    pub(crate) fn to_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let d = &self.description;
        (
            FORMAT,
            d.dtype,
            d.shape.clone(),
            d.strides.clone(),
            d.byte_offset,
            d.subbyte_padded,
            self.readonly,
            self.dim_names.clone(),
            (self.device.kind.0, self.device.id),
        )
            .into_pyobject(py)
    }

    /// Read a tuple made by [`Metadata::to_tuple`]; anything else is a ValueError.
    pub(crate) fn from_tuple(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        type Fields = (
            u32,
            (u8, u8, u16),
            Vec<i64>,
            Vec<i64>,
            u64,
            bool,
            bool,
            Option<Vec<String>>,
            (i32, i32),
        );
        let fields: Fields = obj.extract().map_err(|e| {
            PyValueError::new_err(format!(
                "not the metadata of a pickled dlbridge.Tensor: {e}"
            ))
        })?;
        let (format, dtype, shape, strides, byte_offset, subbyte_padded, readonly, names, device) =
            fields;
        if format != FORMAT {
            return Err(PyValueError::new_err(format!(
                "pickled dlbridge.Tensor format {format} is not supported (this dlbridge reads {FORMAT}); \
                 load it with the dlbridge version that wrote it"
            )));
        }
        if names.as_ref().is_some_and(|n| n.len() != shape.len()) {
            return Err(PyValueError::new_err(format!(
                "the pickled dim_names do not match the {} dimensions",
                shape.len()
            )));
        }
        Ok(Self {
            description: Description {
                dtype,
                shape,
                strides,
                byte_offset,
                subbyte_padded,
            },
            readonly,
            dim_names: names,
            device: Device::new(DeviceType(device.0), device.1),
        })
    }
}

/// The host tensor whose bytes a pickle of `tensor` carries, and the device to restore it on.
/// CUDA data is copied to the host; memory dlbridge cannot allocate again is refused.
fn staged(tensor: &Tensor) -> PyResult<(Tensor, Device)> {
    let device = tensor.device();
    let host = if device.is_host_accessible() {
        tensor.clone()
    } else if device.kind == DeviceType::CUDA {
        cuda::copy_to_host(tensor)?
    } else {
        return Err(buffer_error(format!(
            "a tensor on {device} cannot be pickled: dlbridge cannot allocate memory on {device} \
             to restore it; move it to the host first (t.to_device(\"cpu\"), or \
             dlbridge.from_dlpack(x, device=\"cpu\") on the array it came from)"
        )));
    };
    let dense = host.is_c_contiguous() || host.is_f_contiguous();
    let host = if dense { host } else { host.copy(Order::C)? };
    let restore = if device.kind == DeviceType::CUDA {
        device
    } else {
        Device::CPU
    };
    Ok((host, restore))
}

/// `tensor.__reduce_ex__(protocol)`: `(rebuild, (payload, metadata))`. `exporter` turns the
/// byte tensor into a Python object with the buffer protocol (for the `PickleBuffer`).
pub(crate) fn reduce_ex<'py>(
    py: Python<'py>,
    tensor: &Tensor,
    dim_names: Option<&[String]>,
    protocol: i64,
    rebuild: Bound<'py, PyAny>,
    exporter: impl FnOnce(Tensor) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let (host, device) = staged(tensor)?;
    let bytes = wire::bytes_of(&host)?;
    let payload = if protocol >= 5 {
        let pickle_buffer = py.import("pickle")?.getattr("PickleBuffer")?;
        pickle_buffer.call1((exporter(bytes)?,))?
    } else {
        let data = bytes.host_bytes()?;
        if tensor.is_readonly() {
            PyBytes::new(py, data).into_any()
        } else {
            PyByteArray::new(py, data).into_any()
        }
    };
    let metadata = Metadata {
        description: Description::of(&host),
        readonly: tensor.is_readonly(),
        dim_names: dim_names.map(<[String]>::to_vec),
        device,
    };
    (rebuild, (payload, metadata.to_tuple(py)?)).into_pyobject(py)
}

/// The reconstructor: a tensor viewing `payload` (any contiguous buffer-protocol object; kept
/// alive by the tensor) as `metadata` says, read-only when the payload or the source was.
/// Data that is not aligned to its item size is copied; a CUDA tensor is copied to its device.
pub(crate) fn rebuild(
    payload: &Bound<'_, PyAny>,
    metadata: &Bound<'_, PyAny>,
) -> PyResult<(Tensor, Option<Vec<String>>)> {
    let metadata = Metadata::from_tuple(metadata)?;
    let (data, len, payload_readonly, owner) = contiguous_bytes(payload).map_err(|e| {
        buffer_error(format!(
            "the data of a pickled dlbridge.Tensor must be one contiguous buffer: {e}"
        ))
    })?;
    // SAFETY: `contiguous_bytes` returns `len` bytes that stay valid (writable unless
    // `payload_readonly`) while `owner` holds the buffer view.
    let tensor = unsafe {
        wire::from_bytes(
            data,
            len,
            payload_readonly || metadata.readonly,
            owner,
            &metadata.description,
            true,
        )
    }?;
    let tensor = if tensor.is_aligned() {
        tensor
    } else {
        let order = if tensor.is_c_contiguous() {
            Order::C
        } else {
            Order::F
        };
        let copy = tensor.copy(order)?;
        if metadata.readonly {
            copy.into_readonly()
        } else {
            copy
        }
    };
    let tensor = match metadata.device {
        Device::CPU => tensor,
        device if device.kind == DeviceType::CUDA => {
            restore_on(&tensor, device, metadata.readonly)?
        }
        device => {
            return Err(PyValueError::new_err(format!(
                "the pickled tensor names device {device}, which a pickle never restores to"
            )));
        }
    };
    Ok((tensor, metadata.dim_names))
}

/// `tensor` copied to the CUDA `device`, or a BufferError naming the device.
fn restore_on(tensor: &Tensor, device: Device, readonly: bool) -> PyResult<Tensor> {
    let moved = cuda::copy_to_device(tensor, device).map_err(|e: Error| {
        buffer_error(format!(
            "the pickled tensor lived on {device}, where this process cannot restore it ({e}); \
             load it where {device} exists, or pickle t.to_device(\"cpu\") instead"
        ))
    })?;
    Ok(if readonly {
        moved.into_readonly()
    } else {
        moved
    })
}
