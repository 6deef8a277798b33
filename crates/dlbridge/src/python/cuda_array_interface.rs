//! The CUDA Array Interface (`__cuda_array_interface__`, version 3, and the older 0–2): import
//! the dict as a Tensor on a CUDA device, and build it for a CUDA tensor.
//!
//! Import rules:
//! - `shape`, `typestr`, `data = (address, readonly)` are required; `strides` are bytes (or
//!   `None` for C order) and become element strides; a `descr` with fields and a non-`None`
//!   `mask` are refused (BufferError);
//! - the device is what the CUDA driver says about the address (`cuda:N` for device memory,
//!   `cuda_managed:0`, `cuda_host:0`; memory CUDA does not know is refused). Without a driver
//!   the caller's `device_hint` is trusted (e.g. the object's `__dlpack_device__`); with neither,
//!   the import fails with the typed "CUDA is not available" BufferError. A zero-size array
//!   (address 0) takes the hint, or `cuda:0`;
//! - `stream` (v3): `None`/absent = nothing to wait for; `1` = the legacy default stream (what
//!   dlbridge reads on); `2` or a handle = dlbridge makes the legacy default stream wait for the
//!   work enqueued on it so far (an event, no host sync); `0` is disallowed by the interface.
//!   Pinned and managed memory, which the host reads too, waits on the host instead (for `1`
//!   as well).
//!
//! Export: CUDA device, managed and pinned tensors only; `stream` is `1` (dlbridge's CUDA data is
//! ready on the legacy default stream; pending dlbridge copies are ordered before it first)
//! and `None` for pinned host memory.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::cuda::{self, StreamRequest};
use crate::device::{Device, DeviceType};
use crate::dtype::DType;
use crate::error::Error;
use crate::layout::Layout;
use crate::python::errors::buffer_error;
use crate::python::held::HeldObject;
use crate::python::interface_dict::{Fields, InterfaceDict};
use crate::tensor::{Tensor, TensorFlags};

/// The fields of a `__cuda_array_interface__` dict, validated (no driver needed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    /// Element type.
    pub dtype: DType,
    /// Shape and element strides.
    pub layout: Layout,
    /// Address of the first element (0 for zero-size arrays).
    pub address: usize,
    /// The read-only flag of `data`.
    pub readonly: bool,
    /// The producer's stream (`None` when absent or `None`).
    pub stream: Option<StreamRequest>,
}

/// Validate the dict `iface` of `obj` (used in messages) without touching the driver.
pub(crate) fn parse(obj: &Bound<'_, PyAny>, iface: &Bound<'_, PyAny>) -> PyResult<Parsed> {
    let dict = InterfaceDict::new(obj, iface, "__cuda_array_interface__")?;
    dict.version(0..=3, None)?;
    let Fields {
        dtype,
        layout,
        address,
        readonly,
    } = dict.fields()?;
    let stream = match dict.get("stream")? {
        Some(s) if !s.is_none() => {
            let value: i64 = s
                .extract()
                .map_err(|_| dict.malformed("'stream' must be None or an int"))?;
            // SAFETY: the `stream` key is the producer's promise (the interface's contract)
            // that the integer names a live stream its data is ordered on.
            let request =
                unsafe { cuda::parse_stream(Device::new(DeviceType::CUDA, 0), Some(value)) }
                    .map_err(|e| dict.malformed(&e.to_string()))?;
            Some(request)
        }
        _ => None,
    };
    Ok(Parsed {
        dtype,
        layout,
        address,
        readonly,
        stream,
    })
}

/// The device of the memory at `address`: the driver's answer, else `hint` (see the module
/// documentation).
pub(crate) fn resolve_device(address: usize, hint: Option<Device>) -> PyResult<Device> {
    if address == 0 {
        return Ok(hint.unwrap_or(Device::new(DeviceType::CUDA, 0)));
    }
    match cuda::pointer_info(address) {
        Ok(info) if info.kind == cuda::MemoryKind::Unregistered => Err(buffer_error(format!(
            "__cuda_array_interface__ points at {address:#x}, which is not memory CUDA knows (host memory?); export host memory through __array_interface__ or DLPack instead"
        ))),
        Ok(info) => Ok(info.device()),
        Err(Error::CudaUnavailable { reason }) => hint.ok_or_else(|| {
            Error::CudaUnavailable {
                reason: format!("{reason} (needed to find which device a __cuda_array_interface__ pointer is on)"),
            }
            .into()
        }),
        Err(e) => Err(e.into()),
    }
}

/// Import `obj` through its `__cuda_array_interface__` dict `iface`; `obj` is kept alive as the
/// owner of the memory. `device_hint` is used only when the driver cannot be asked.
pub(crate) fn import(
    obj: &Bound<'_, PyAny>,
    iface: &Bound<'_, PyAny>,
    device_hint: Option<Device>,
) -> PyResult<Tensor> {
    let parsed = parse(obj, iface)?;
    let device = resolve_device(parsed.address, device_hint)?;
    if let Some(stream) = parsed.stream {
        if parsed.address != 0 {
            cuda::adopt_producer_stream(device, stream)?;
        }
    }
    let owner = HeldObject::new(obj);
    // SAFETY: the interface promises that the memory at `address` with this layout stays valid
    // on `device` while `obj` lives; `obj` is the owner.
    Ok(unsafe {
        Tensor::from_raw_parts(
            parsed.address as *mut std::ffi::c_void,
            0,
            device,
            parsed.dtype,
            parsed.layout,
            TensorFlags {
                readonly: parsed.readonly,
                copied: false,
            },
            Arc::new(owner),
        )
    }?)
}

/// The `__cuda_array_interface__` (version 3) dict of a CUDA device, managed or pinned tensor.
pub(crate) fn export<'py>(py: Python<'py>, tensor: &Tensor) -> PyResult<Bound<'py, PyDict>> {
    let device = tensor.device();
    let stream: Option<i64> = match device.kind {
        DeviceType::CUDA | DeviceType::CUDA_MANAGED => Some(1),
        DeviceType::CUDA_HOST => None,
        _ => {
            return Err(buffer_error(format!(
                "__cuda_array_interface__ describes CUDA memory only, and this tensor is on {device}; use DLPack, the buffer protocol or __array_interface__, or move it with to_device(\"cuda\")"
            )));
        }
    };
    let dtype = tensor.dtype();
    let typestr = dtype.typestr().ok_or_else(|| {
        buffer_error(format!(
            "dtype {dtype} has no NumPy typestr, so __cuda_array_interface__ cannot describe it; exchange it through DLPack"
        ))
    })?;
    // Pending dlbridge copies into this memory are ordered before the legacy default stream.
    cuda::order_for_consumer(tensor, StreamRequest::Default)?;
    let dict = PyDict::new(py);
    dict.set_item("version", 3)?;
    dict.set_item("shape", PyTuple::new(py, tensor.shape())?)?;
    dict.set_item("typestr", &typestr)?;
    dict.set_item("descr", vec![("", typestr.as_str())])?;
    let address = if tensor.size() == 0 {
        0
    } else {
        tensor.data_ptr()
    };
    dict.set_item("data", (address, tensor.is_readonly()))?;
    if tensor.is_c_contiguous() {
        dict.set_item("strides", py.None())?;
    } else {
        let item = tensor.itemsize() as i64;
        let bytes: Vec<i64> = tensor.strides().iter().map(|s| s * item).collect();
        dict.set_item("strides", PyTuple::new(py, bytes)?)?;
    }
    dict.set_item("mask", py.None())?;
    dict.set_item("stream", stream)?;
    Ok(dict)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pyo3::types::PyList;

    const CUDA1: Device = Device::new(DeviceType::CUDA, 1);

    /// Run `f` with a fresh dict and an object (a list) standing for the producer.
    fn with_dict(f: impl FnOnce(&Bound<'_, PyAny>, &Bound<'_, PyDict>)) {
        Python::initialize();
        Python::attach(|py| {
            let obj = PyList::empty(py).into_any();
            let dict = PyDict::new(py);
            dict.set_item("version", 3).unwrap();
            dict.set_item("shape", (3, 4)).unwrap();
            dict.set_item("typestr", "<f4").unwrap();
            dict.set_item("data", (0x7000_0000usize, false)).unwrap();
            f(&obj, &dict);
        });
    }

    #[test]
    fn parses_layout_readonly_and_stream() {
        with_dict(|obj, d| {
            d.set_item("strides", (4, 12)).unwrap(); // bytes: F order
            d.set_item("data", (0x7000_0000usize, true)).unwrap();
            d.set_item("stream", 2).unwrap();
            let p = parse(obj, d).unwrap();
            assert_eq!(p.layout.shape(), &[3, 4]);
            assert_eq!(p.layout.strides(), &[1, 3]);
            assert!(p.readonly);
            assert_eq!(p.dtype, DType::FLOAT32);
            assert_eq!(p.address, 0x7000_0000);
            assert_eq!(p.stream, Some(StreamRequest::PerThread));
            d.set_item("stream", py_none(d)).unwrap();
            assert_eq!(parse(obj, d).unwrap().stream, None);
            d.set_item("stream", 1).unwrap();
            assert_eq!(parse(obj, d).unwrap().stream, Some(StreamRequest::Default));
        });
    }

    fn py_none<'py>(d: &Bound<'py, PyDict>) -> Bound<'py, PyAny> {
        d.py().None().into_bound(d.py())
    }

    #[test]
    fn refuses_malformed_dicts() {
        type Mutation = Box<dyn Fn(&Bound<'_, PyDict>)>;
        let cases: Vec<(&str, Mutation)> = vec![
            ("stream", Box::new(|d| d.set_item("stream", 0).unwrap())),
            ("mask", Box::new(|d| d.set_item("mask", (1, 2)).unwrap())),
            ("version", Box::new(|d| d.set_item("version", 4).unwrap())),
            ("version", Box::new(|d| d.del_item("version").unwrap())),
            ("data", Box::new(|d| d.set_item("data", 5).unwrap())),
            (
                "NULL",
                Box::new(|d| d.set_item("data", (0, false)).unwrap()),
            ),
            (
                "strides",
                Box::new(|d| d.set_item("strides", (4,)).unwrap()),
            ),
            (
                "multiple",
                Box::new(|d| d.set_item("strides", (6, 4)).unwrap()),
            ),
            ("typestr", Box::new(|d| d.set_item("typestr", 3).unwrap())),
        ];
        for (what, mutate) in cases {
            with_dict(|obj, d| {
                mutate(d);
                let e = parse(obj, d).unwrap_err();
                Python::attach(|py| {
                    assert!(
                        e.is_instance_of::<pyo3::exceptions::PyBufferError>(py),
                        "{what}: {e}"
                    );
                    let text = e.to_string();
                    assert!(
                        text.to_lowercase().contains(&what.to_lowercase()),
                        "{what}: {text}"
                    );
                });
            });
        }
    }

    #[test]
    fn import_uses_the_hint_only_without_a_driver() {
        if cuda::is_available() {
            return; // the driver decides there (GPU tests)
        }
        with_dict(|obj, d| {
            // No driver, no hint: the typed error (BufferError).
            let e = import(obj, d, None).unwrap_err();
            assert!(e.to_string().contains("CUDA is not available"), "{e}");
            // With a hint: a CUDA tensor on that device, not host-accessible.
            let t = import(obj, d, Some(CUDA1)).unwrap();
            assert_eq!(t.device(), CUDA1);
            assert_eq!(t.data_ptr(), 0x7000_0000);
            assert!(t.copy(crate::Order::C).is_err());
            // A producer stream needs the driver to be waited for.
            d.set_item("stream", 77).unwrap();
            assert!(import(obj, d, Some(CUDA1)).is_err());
            // Zero-size arrays need nothing.
            d.set_item("shape", (0, 4)).unwrap();
            d.set_item("data", (0usize, false)).unwrap();
            let z = import(obj, d, None).unwrap();
            assert_eq!(z.device(), Device::new(DeviceType::CUDA, 0));
        });
    }

    #[test]
    fn export_round_trips_through_parse() {
        if cuda::is_available() {
            return;
        }
        with_dict(|obj, d| {
            let t = import(obj, d, Some(CUDA1)).unwrap().transposed();
            let py = obj.py();
            let out = export(py, &t).unwrap();
            assert_eq!(
                out.get_item("version")
                    .unwrap()
                    .unwrap()
                    .extract::<i64>()
                    .unwrap(),
                3
            );
            assert_eq!(
                out.get_item("stream")
                    .unwrap()
                    .unwrap()
                    .extract::<i64>()
                    .unwrap(),
                1
            );
            let back = parse(obj, out.as_any()).unwrap();
            assert_eq!(back.layout.shape(), &[4, 3]);
            assert_eq!(back.layout.strides(), &[1, 4]);
            assert_eq!(back.address, 0x7000_0000);
            assert_eq!(back.stream, Some(StreamRequest::Default));
            // Host tensors are refused.
            let host = Tensor::from_vec(vec![1u8], &[1]).unwrap();
            assert!(export(py, &host).is_err());
        });
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn import_of_device_memory_asks_the_driver() {
        let host = Tensor::from_vec((0..12).map(|x| x as f32).collect(), &[3, 4]).unwrap();
        let dev = cuda::copy_to_device(&host, Device::new(DeviceType::CUDA, 0)).unwrap();
        Python::initialize();
        Python::attach(|py| {
            let d = export(py, &dev).unwrap();
            let obj = PyList::empty(py).into_any();
            let t = import(&obj, d.as_any(), Some(CUDA1)).unwrap();
            assert_eq!(t.device(), Device::new(DeviceType::CUDA, 0)); // the pointer wins
            let back = cuda::copy_to_host(&t).unwrap();
            assert_eq!(back.to_vec::<f32>().unwrap(), host.to_vec::<f32>().unwrap());
            // A device-to-device copy still in flight: exported with its event ordered before
            // the legacy stream (no context is current here).
            let pending = cuda::to_device(&dev, dev.device(), StreamRequest::PerThread).unwrap();
            let d = export(py, &pending).unwrap();
            let t = import(&obj, d.as_any(), None).unwrap();
            let back = cuda::copy_to_host(&t).unwrap();
            assert_eq!(back.to_vec::<f32>().unwrap(), host.to_vec::<f32>().unwrap());
            // Pinned and managed memory: the driver names the kind.
            for kind in [DeviceType::CUDA_HOST, DeviceType::CUDA_MANAGED] {
                let m = cuda::copy_to_device(&host, Device::new(kind, 0)).unwrap();
                let d = export(py, &m).unwrap();
                let t = import(&obj, d.as_any(), None).unwrap();
                assert_eq!(t.device(), Device::new(kind, 0));
                assert_eq!(t.to_vec::<f32>().unwrap(), host.to_vec::<f32>().unwrap());
            }
        });
    }
}
