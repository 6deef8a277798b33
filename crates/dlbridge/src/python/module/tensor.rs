//! `dlbridge.Tensor`: attributes, DLPack export, buffer protocol, array interface.

use std::ffi::c_int;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use pyo3::exceptions::{PyAttributeError, PyBufferError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyComplex, PyDict, PyInt, PyList, PyTuple};

use crate::export::Flavor;
use crate::python::raised::SavedException;
use crate::python::{
    array_interface, arrow, buffer, capsule, cuda_array_interface, import, pickle,
};
use crate::{DType, Device, DeviceType, Order, Tensor, TypeCode, cuda};

use super::exchange::API;
use super::fallbacks;
use super::pyarrow::{CapsuleImport, dlpack_route, pyarrow};
use super::types::{PyDType, PyDevice, parse_device, parse_dtype};

/// An owned, validated view of array memory, and the names of its dimensions when an Arrow
/// `fixed_shape_tensor` gave them (kept here, not in the Rust tensor, so that no other import
/// or export does any work for them). Tensors pickle (zero-copy out of band with protocol 5 and
/// a `buffer_callback`); `dlbridge.to_shared` makes one that `multiprocessing` sends as a handle.
#[pyclass(name = "Tensor", module = "dlbridge", frozen)]
pub struct PyTensor(pub(crate) ManuallyDrop<Tensor>, pub(crate) DimNames);

impl PyTensor {
    /// The Python face of `tensor`, with its dimensions' names.
    pub(crate) fn of(tensor: Tensor, names: DimNames) -> Self {
        Self(ManuallyDrop::new(tensor), names)
    }

    /// The tensor (a clone of it is a new owner of the same memory).
    pub(crate) fn tensor(&self) -> &Tensor {
        &self.0
    }
}

/// Dropping the last owner of imported memory runs its producer's deleter, which may run Python
/// code (a ctypes callback, an object's `__del__`), and a Tensor is often deallocated while an
/// exception is in flight (a consumer that refused it): that code must neither see nor clear
/// the exception, or the interpreter raises SystemError ("error return without exception set")
/// in its place.
impl Drop for PyTensor {
    fn drop(&mut self) {
        // A PyTensor is only dropped on a thread attached to the interpreter: its deallocation,
        // or a failed `Py::new` inside a call from Python.
        // SAFETY: attached (above), so the exception in flight may be set aside and put back;
        // the tensor is dropped exactly once, here, and never used again.
        unsafe {
            let saved = SavedException::take();
            ManuallyDrop::drop(&mut self.0);
            saved.restore();
        }
    }
}

/// One name per dimension (the first, Arrow's row dimension, is ""), or `None`.
pub(super) type DimNames = Option<Arc<[String]>>;

/// The names of a tensor of shape `(length, *cell)` whose cell dimensions are named `cell`.
pub(super) fn row_and_cell_names(cell: Option<Vec<String>>) -> DimNames {
    cell.map(|names| std::iter::once(String::new()).chain(names).collect())
}

/// The cell dimensions' names (all but the first), as the Arrow export writes them.
pub(super) fn cell_names(names: &DimNames) -> Option<&[String]> {
    names.as_deref().and_then(|n| n.get(1..))
}

/// Import `x` like `from_dlpack` ([`import::import_object`]), as this class, with an Arrow
/// `fixed_shape_tensor`'s dimension names.
pub(super) fn import_object(
    x: &Bound<'_, PyAny>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<PyTensor> {
    let (tensor, cell_names) = import::import_object(x, device, copy)?;
    Ok(PyTensor::of(tensor, row_and_cell_names(cell_names)))
}

/// `from_dlpack(t, device=..., copy=...)` of a dlbridge Tensor `t`: [`exchanged`] (moved as
/// `to_device` moves it, copied as `t.copy()` copies it), then `t` as the import policy leaves
/// it (its refusals, realignment).
pub(super) fn reimported<'py>(
    t: &Bound<'py, PyTensor>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<Bound<'py, PyTensor>> {
    let t = exchanged(t, device, copy, Order::C, None)?;
    match import::apply_policy(&t.get().0, device, copy)? {
        None => Ok(t),
        Some(copied) => Bound::new(t.py(), PyTensor::of(copied, t.get().1.clone())),
    }
}

/// What `t` becomes when asked for `device` and `copy`: what [`import::decide`] decides, for a
/// tensor the caller holds (so never fresh: even a fresh copy it holds is aliased, as
/// `IS_COPIED` speaks of the import that made it), carried out: moved on `stream` (None: the
/// transfer's default stream), copied in `order` where it is, or `t` itself. `t.copy()`,
/// `t.to_device()` and `from_dlpack(t)` all ask it; a refusal is left to
/// [`import::apply_policy`], which words it.
// Inlined: `from_dlpack(t)` keeps `t` in one frame, as before this function (measured: 10%
// slower through a call with the release profile).
#[inline(always)]
fn exchanged<'py>(
    t: &Bound<'py, PyTensor>,
    device: Option<Device>,
    copy: Option<bool>,
    order: Order,
    stream: Option<cuda::StreamRequest>,
) -> PyResult<Bound<'py, PyTensor>> {
    let here = t.get().0.device();
    match import::decide(here, device, copy, false, false) {
        import::Decision::Move(target) => {
            // SAFETY: no stream is named (None), so no handle reaches the driver.
            let default = || unsafe { cuda::transfer_stream(here, target, None) };
            moved_to(t, target, stream.map_or_else(default, Ok)?)
        }
        import::Decision::Copy => copy_of(t, order),
        import::Decision::Keep | import::Decision::Refuse(_) => Ok(t.clone()),
    }
}

/// `t.copy(order)`: [`copied`], as a Tensor object.
fn copy_of<'py>(slf: &Bound<'py, PyTensor>, order: Order) -> PyResult<Bound<'py, PyTensor>> {
    let (copy, names) = copied(slf, order)?;
    Bound::new(slf.py(), PyTensor::of(copy, names))
}

/// A copy of `slf`'s tensor: [`copied_where_it_is`]; memory dlbridge cannot copy itself
/// (oneAPI...) is copied in C order by the library that owns it, as [`moved_to`] moves such
/// memory.
fn copied(slf: &Bound<'_, PyTensor>, order: Order) -> PyResult<(Tensor, DimNames)> {
    let (tensor, names) = (&slf.get().0, &slf.get().1);
    match copied_where_it_is(tensor, order, cuda::StreamRequest::Default) {
        Ok(copy) => Ok((copy, names.clone())),
        Err(err) if order == Order::C && !cuda::copies_from(tensor.device()) => {
            let kwargs = PyDict::new(slf.py());
            kwargs.set_item(intern!(slf.py(), "copy"), true)?;
            // The libraries' device copies are C-contiguous (`Namespace.copy_on_device`).
            made_by_library(slf, &kwargs, err.into())
        }
        Err(err) => Err(err.into()),
    }
}

/// A fresh C- or F-contiguous copy of `tensor` on its own device: the host copy kernels for
/// memory the host can read, a CUDA copy on the device for CUDA memory (enqueued on `stream`;
/// an F-order copy is the C-order copy of the reversed axes, reversed back). Other memory
/// (oneAPI...) gets the host copy's error, which names the way to the host.
fn copied_where_it_is(
    tensor: &Tensor,
    order: Order,
    stream: cuda::StreamRequest,
) -> crate::Result<Tensor> {
    let device = tensor.device();
    if device.is_host_accessible() || !cuda::copies_from(device) {
        return tensor.copy(order);
    }
    match order {
        Order::C => cuda::to_device(tensor, device, stream),
        Order::F => Ok(cuda::to_device(&tensor.transposed(), device, stream)?.transposed()),
    }
}

/// `slf` copied to `target` (another device) on `stream`; memory dlbridge cannot move itself
/// is moved by the library that owns it ([`made_by_library`]).
fn moved_to<'py>(
    slf: &Bound<'py, PyTensor>,
    target: Device,
    stream: cuda::StreamRequest,
) -> PyResult<Bound<'py, PyTensor>> {
    let moved = match cuda::to_device(&slf.get().0, target, stream) {
        Ok(moved) => moved,
        Err(err @ crate::Error::UnsupportedDevice { .. }) => {
            let kwargs = PyDict::new(slf.py());
            kwargs.set_item(intern!(slf.py(), "device"), PyDevice(target))?;
            let (moved, names) = made_by_library(slf, &kwargs, err.into())?;
            return Bound::new(slf.py(), PyTensor::of(moved, names));
        }
        Err(err) => return Err(err.into()),
    };
    Bound::new(slf.py(), PyTensor::of(moved, slf.get().1.clone()))
}

/// `t.to_device(target)` and `t.copy()` for memory dlbridge cannot move or copy itself
/// (oneAPI, ...): the dlbridge package's registered copy ([`fallbacks::by_library`]), so that
/// the array library that owns such memory makes the copy (dpnp for oneAPI memory).
/// `refused` (dlbridge's own error) is raised when the dlbridge package registered nothing (a
/// user's extension on its own) or no installed library can, with the reason as its cause.
fn made_by_library<'py>(
    slf: &Bound<'py, PyTensor>,
    kwargs: &Bound<'py, PyDict>,
    refused: PyErr,
) -> PyResult<(Tensor, DimNames)> {
    let py = slf.py();
    let Some(copy) = fallbacks::by_library(py) else {
        return Err(refused);
    };
    match copy.call((slf,), Some(kwargs)) {
        Ok(made) => {
            // The package's own Tensor type; another extension's Tensor is imported like any
            // array.
            let (tensor, names) = match made.cast_into_exact::<PyTensor>() {
                Ok(made) => (Tensor::clone(&made.get().0), made.get().1.clone()),
                Err(other) => {
                    let made = import_object(other.into_inner().as_any(), None, None)?;
                    (Tensor::clone(&made.0), made.1.clone())
                }
            };
            // The library made fresh memory for this call alone: a copy, as dlbridge's are
            // (the object that held it is gone, so an export can claim `IS_COPIED`).
            Ok((tensor.into_copied(), names))
        }
        Err(why) => {
            refused.set_cause(py, Some(why));
            Err(refused)
        }
    }
}

/// A `stream` argument as an integer (`None` for none): TypeError for an argument that is not
/// an int, ValueError for an int no stream handle can have.
fn stream_value(stream: Option<&Bound<'_, PyAny>>) -> PyResult<Option<i64>> {
    match stream.filter(|s| !s.is_none()) {
        None => Ok(None),
        Some(s) if !s.is_instance_of::<PyInt>() => Err(PyTypeError::new_err(format!(
            "stream must be None or an int, not {}",
            s.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))),
        Some(s) => s.extract::<i64>().map(Some).map_err(|_| {
            PyValueError::new_err(format!("stream {s} is out of range for a stream handle"))
        }),
    }
}

/// The consumer's `stream` for data on `device`, validated ([`stream_value`]; ValueError for a
/// value not valid for the device).
fn parse_stream(
    device: Device,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<cuda::StreamRequest> {
    let value = stream_value(stream)?;
    // SAFETY: as DLPack specifies, a `stream` integer passed to `__dlpack__` (or `to_device`)
    // is the caller's promise that it names a live stream of the device; dlbridge cannot check
    // it and hands it to the driver as is.
    Ok(unsafe { cuda::parse_stream(device, value) }?)
}

fn scalar<'py>(py: Python<'py>, dtype: DType, b: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
        b.try_into().expect("element width checked by dtype")
    }
    let value = match (dtype.code(), dtype.bits()) {
        (TypeCode::BOOL, 8) => (b[0] != 0).into_pyobject(py)?.to_owned().into_any(),
        (TypeCode::INT, 8) => (b[0] as i8).into_pyobject(py)?.into_any(),
        (TypeCode::INT, 16) => i16::from_ne_bytes(arr(b)).into_pyobject(py)?.into_any(),
        (TypeCode::INT, 32) => i32::from_ne_bytes(arr(b)).into_pyobject(py)?.into_any(),
        (TypeCode::INT, 64) => i64::from_ne_bytes(arr(b)).into_pyobject(py)?.into_any(),
        (TypeCode::UINT, 8) => b[0].into_pyobject(py)?.into_any(),
        (TypeCode::UINT, 16) => u16::from_ne_bytes(arr(b)).into_pyobject(py)?.into_any(),
        (TypeCode::UINT, 32) => u32::from_ne_bytes(arr(b)).into_pyobject(py)?.into_any(),
        (TypeCode::UINT, 64) => u64::from_ne_bytes(arr(b)).into_pyobject(py)?.into_any(),
        (TypeCode::FLOAT, 16) => f64::from(half::f16::from_ne_bytes(arr(b)))
            .into_pyobject(py)?
            .into_any(),
        (TypeCode::FLOAT, 32) => f64::from(f32::from_ne_bytes(arr(b)))
            .into_pyobject(py)?
            .into_any(),
        (TypeCode::FLOAT, 64) => f64::from_ne_bytes(arr(b)).into_pyobject(py)?.into_any(),
        (TypeCode::BFLOAT, 16) => f64::from(half::bf16::from_ne_bytes(arr(b)))
            .into_pyobject(py)?
            .into_any(),
        (TypeCode::COMPLEX, 64) => {
            let (re, im) = (
                f32::from_ne_bytes(arr(&b[..4])),
                f32::from_ne_bytes(arr(&b[4..])),
            );
            PyComplex::from_doubles(py, re.into(), im.into()).into_any()
        }
        (TypeCode::COMPLEX, 128) => {
            let (re, im) = (
                f64::from_ne_bytes(arr(&b[..8])),
                f64::from_ne_bytes(arr(&b[8..])),
            );
            PyComplex::from_doubles(py, re, im).into_any()
        }
        (TypeCode::BCOMPLEX, 32) => {
            let (re, im) = (
                half::bf16::from_ne_bytes(arr(&b[..2])),
                half::bf16::from_ne_bytes(arr(&b[2..])),
            );
            PyComplex::from_doubles(py, re.into(), im.into()).into_any()
        }
        _ => {
            return Err(PyBufferError::new_err(format!(
                "tolist() has no Python scalar for {dtype}; use dlbridge.to_numpy(t) (ml_dtypes) and convert from there"
            )));
        }
    };
    Ok(value)
}

fn nest<'py>(
    py: Python<'py>,
    shape: &[i64],
    items: &mut impl Iterator<Item = PyResult<Bound<'py, PyAny>>>,
) -> PyResult<Bound<'py, PyAny>> {
    match shape.split_first() {
        None => items.next().expect("one item per element"),
        Some((&n, rest)) => {
            let list = PyList::empty(py);
            for _ in 0..n {
                list.append(nest(py, rest, items)?)?;
            }
            Ok(list.into_any())
        }
    }
}

impl PyTensor {
    /// `__dlpack__` (installed as a raw fastcall method by [`super::fastcall`]): export as a
    /// DLPack capsule. Arguments are already matched; `None` values are `None` here.
    ///
    /// Read-only data asked for as a legacy capsule (which cannot carry the flag) leaves as a
    /// writable copy unless `copy=False` forbids it, the array API's "reuse the buffer if
    /// possible, copy otherwise". Memory dlbridge cannot move itself (oneAPI...) asked for on
    /// another device is moved by the library that owns it, as `to_device` moves it.
    pub(crate) fn dlpack<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let tensor = &slf.get().0;
        let flavor = Flavor::for_max_version(max_version);
        let own = tensor.device();
        // A legacy capsule cannot say read-only: such data needs a writable copy (refused
        // under copy=False by the export's own error, which names the ways out).
        let needs = flavor == Flavor::Legacy && tensor.is_readonly();
        if own.kind == DeviceType::CPU
            && stream.is_none()
            && dl_device.is_none()
            && copy.is_none()
            && !needs
        {
            // The common exchange: host data, no stream to order, no device or copy asked.
            return capsule::export(py, tensor.export(flavor)?);
        }
        Self::dlpack_as_asked(slf, stream, flavor, dl_device, copy, needs)
    }

    /// [`Self::dlpack`] with a stream, a device or `copy` asked, or a legacy capsule of
    /// read-only data: what [`import::decide`] decides, carried out. A function of its own, out
    /// of line, so that the common exchange's frame stays as small as it was before the
    /// decision moved here (measured: 7-15% on `__dlpack__()` inlined).
    #[inline(never)]
    fn dlpack_as_asked<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<&Bound<'py, PyAny>>,
        flavor: Flavor,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<bool>,
        needs: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let tensor = &slf.get().0;
        let own = tensor.device();
        let target = match dl_device.filter(|d| !d.is_none()) {
            None => own,
            Some(d) => {
                let (kind, id) = d.extract::<(i32, i32)>().map_err(|_| {
                    PyValueError::new_err("dl_device must be a (device_type, device_id) tuple")
                })?;
                Device::new(DeviceType(kind), id)
            }
        };
        let request = parse_stream(target, stream)?;
        if target.kind == DeviceType::CPU && target.id != 0 {
            return Err(PyBufferError::new_err(format!(
                "dl_device={target} does not exist: DLPack numbers the host CPU 0"
            )));
        }
        let managed = match import::decide(own, Some(target), copy, needs, false) {
            import::Decision::Refuse(refusal @ import::Refusal::Transfer) => {
                return Err(refusal.error(own, Some(target), "").into());
            }
            import::Decision::Move(target) => match cuda::to_device(tensor, target, request) {
                Ok(moved) => moved.export_owned(flavor)?,
                Err(err @ crate::Error::UnsupportedDevice { .. }) => {
                    let kwargs = PyDict::new(py);
                    kwargs.set_item(intern!(py, "device"), PyDevice(target))?;
                    made_by_library(slf, &kwargs, err.into())?
                        .0
                        .export_owned(flavor)?
                }
                Err(err) => return Err(err.into()),
            },
            import::Decision::Copy if cuda::copies_from(own) => {
                copied_where_it_is(tensor, Order::C, request)?.export_owned(flavor)?
            }
            // Memory dlbridge cannot copy itself (oneAPI...): the owning library's copy.
            import::Decision::Copy => copied(slf, Order::C)?.0.export_owned(flavor)?,
            import::Decision::Keep | import::Decision::Refuse(import::Refusal::Copy) => {
                cuda::order_for_consumer(tensor, request)?;
                tensor.export(flavor)?
            }
        };
        capsule::export(py, managed)
    }
}

#[pymethods]
impl PyTensor {
    #[new]
    #[pyo3(signature = (x, *, device=None, copy=None))]
    fn new(
        x: &Bound<'_, PyAny>,
        device: Option<&Bound<'_, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Self> {
        let device = device
            .filter(|d| !d.is_none())
            .map(parse_device)
            .transpose()?;
        if let Some(t) = super::instance::<PyTensor>(x) {
            let t = reimported(t, device, copy)?;
            return Ok(PyTensor::of(t.get().tensor().clone(), t.get().1.clone()));
        }
        import_object(x, device, copy)
    }

    /// Extents of each dimension.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.shape())
    }
    /// Strides in elements.
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.0.strides())
    }
    /// The element type.
    #[getter]
    fn dtype(&self) -> PyDType {
        PyDType(self.0.dtype())
    }
    /// Names of the dimensions, from an Arrow `arrow.fixed_shape_tensor`'s `dim_names`
    /// (dimension 0, Arrow's rows, is ""); None otherwise. Kept by copies and transfers, dropped
    /// by anything that changes the shape, written back on Arrow export.
    #[getter]
    fn dim_names<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.1
            .as_deref()
            .map(|names| PyTuple::new(py, names))
            .transpose()
    }
    /// Where the memory lives.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice(self.0.device())
    }
    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.0.ndim()
    }
    /// Number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.0.size()
    }
    /// Bytes per element.
    #[getter]
    fn itemsize(&self) -> usize {
        self.0.itemsize()
    }
    /// Bytes of the elements.
    #[getter]
    fn nbytes(&self) -> usize {
        self.0.nbytes()
    }
    /// True when the memory must not be written through this tensor.
    #[getter]
    fn readonly(&self) -> bool {
        self.0.is_readonly()
    }
    /// True when the memory is a copy made for this tensor.
    #[getter]
    fn is_copied(&self) -> bool {
        self.0.is_copied()
    }
    /// Address of the first element.
    #[getter]
    fn data_ptr(&self) -> usize {
        self.0.data_ptr()
    }
    /// Row-major dense.
    #[getter]
    fn is_c_contiguous(&self) -> bool {
        self.0.is_c_contiguous()
    }
    /// Column-major dense.
    #[getter]
    fn is_f_contiguous(&self) -> bool {
        self.0.is_f_contiguous()
    }
    /// NumPy array interface v3 (host-accessible tensors only).
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        array_interface::export(py, &self.0)
    }

    /// `__cuda_array_interface__` v3 (CUDA device, managed and pinned memory only; an
    /// AttributeError elsewhere, so that `hasattr` tells consumers which protocol to use).
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let kind = self.0.device().kind;
        if !matches!(
            kind,
            DeviceType::CUDA | DeviceType::CUDA_MANAGED | DeviceType::CUDA_HOST
        ) {
            return Err(PyAttributeError::new_err(format!(
                "__cuda_array_interface__ describes CUDA memory; this tensor is on {}",
                self.0.device()
            )));
        }
        cuda_array_interface::export(py, &self.0)
    }

    /// Nested lists of Python scalars.
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let contiguous = if self.0.is_c_contiguous() {
            self.tensor().clone()
        } else {
            self.0.copy(Order::C)?
        };
        let bytes = contiguous.host_bytes()?;
        let (dtype, itemsize) = (self.0.dtype(), self.0.itemsize());
        if dtype.is_subbyte() || dtype.lanes() != 1 {
            return Err(PyBufferError::new_err(format!(
                "tolist() has no Python scalar for {dtype}"
            )));
        }
        let mut items = bytes.chunks_exact(itemsize).map(|b| scalar(py, dtype, b));
        nest(py, self.0.shape(), &mut items)
    }

    /// The same memory read as `dtype` (anything `DType` takes, of the same item size),
    /// zero-copy: e.g. uint16 bytes as bfloat16. ValueError when the item sizes differ.
    fn view<'py>(
        &self,
        py: Python<'py>,
        dtype: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyTensor>> {
        let dtype = parse_dtype(dtype)?;
        Bound::new(py, PyTensor::of(self.0.view_as(dtype)?, self.1.clone()))
    }

    /// A new, writable, contiguous copy (`order` "C" or "F") with `is_copied` set, on the
    /// tensor's own device (CUDA data is copied on the GPU).
    #[pyo3(signature = (order="C"))]
    fn copy<'py>(slf: &Bound<'py, Self>, order: &str) -> PyResult<Bound<'py, PyTensor>> {
        exchanged(slf, None, Some(true), order.parse()?, None)
    }

    /// This tensor on `device`: itself when it is already there, else a copy (`is_copied` when
    /// dlbridge made it; memory it cannot reach is copied by the library that owns it, see
    /// [`moved_to`]). Copies to the host are complete on return; see the CUDA notes in the
    /// README for device copies, which are enqueued on `stream` (default: the legacy default
    /// stream).
    #[pyo3(signature = (device, /, *, stream=None))]
    fn to_device<'py>(
        slf: &Bound<'py, Self>,
        device: &Bound<'py, PyAny>,
        stream: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTensor>> {
        let (here, target) = (slf.get().0.device(), parse_device(device)?);
        let value = stream_value(stream)?;
        // SAFETY: a `stream` integer from Python is the caller's promise that it names a live
        // stream (DLPack's contract); dlbridge hands it to the driver as is. Validated first,
        // so that a bad `stream` is refused whether or not a copy is needed.
        let stream = unsafe { cuda::transfer_stream(here, target, value) }?;
        exchanged(slf, Some(target), None, Order::C, Some(stream))
    }

    /// A C-contiguous tensor with the same values, on the same device: itself when already
    /// C-contiguous.
    fn contiguous<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTensor>> {
        if slf.get().0.is_c_contiguous() {
            return Ok(slf.clone());
        }
        copy_of(slf, Order::C)
    }

    /// Pickle support: `(reconstructor, (data, metadata))`. The data travels out of band with
    /// protocol 5 and a `buffer_callback` (zero-copy), in band otherwise.
    fn __reduce_ex__<'py>(slf: &Bound<'py, Self>, protocol: i64) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let rebuild = py.import("dlbridge._native")?.getattr("_rebuild")?;
        let (tensor, names) = (&slf.get().0, slf.get().1.as_deref());
        pickle::reduce_ex(py, tensor, names, protocol, rebuild, |bytes| {
            Ok(Bound::new(py, PyTensor::of(bytes, None))?.into_any())
        })
    }

    /// `(device_type, device_id)` of the memory.
    fn __dlpack_device__(&self) -> (i32, i32) {
        let d = self.0.device();
        (d.kind.0, d.id)
    }

    /// The DLPack C exchange API table (a capsule named `dlpack_exchange_api`), for consumers
    /// that exchange without calling `__dlpack__`.
    #[classattr]
    fn __dlpack_c_exchange_api__(py: Python<'_>) -> PyResult<Py<PyAny>> {
        crate::python::capsule::exchange_api(py, &API).map(Bound::unbind)
    }

    /// An `arrow_schema` capsule: the Arrow field `__arrow_c_array__` exports (a primitive type
    /// for 1-d tensors, `arrow.fixed_shape_tensor` for N-d, `arrow.bool8` for bool).
    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        arrow::export_schema(py, &self.0, cell_names(&self.1))
    }

    /// `(arrow_schema, arrow_array)` capsules over the tensor's memory (host tensors only).
    /// Zero-copy when Arrow can express the layout, else a C-order copy. `requested_schema`
    /// may ask for Arrow's bit-packed boolean or for the bare storage type (no extension);
    /// other requests get the default schema.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        arrow::export_array(py, &self.0, cell_names(&self.1), requested_schema, false)
    }

    /// `(arrow_schema, arrow_device_array)` capsules on the tensor's own device (CPU is
    /// published with Arrow's device id -1; no sync event: CUDA data is complete on return).
    /// Never copies across devices.
    /// Unknown keywords are accepted only with the value None (NotImplementedError otherwise).
    #[pyo3(signature = (requested_schema=None, **kwargs))]
    fn __arrow_c_device_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        arrow::check_device_kwargs(kwargs)?;
        arrow::export_array(py, &self.0, cell_names(&self.1), requested_schema, true)
    }

    /// An `arrow_device_array_stream` capsule yielding the tensor as one device array (the
    /// schema and array of `__arrow_c_device_array__`), then the end. Unknown keywords are
    /// accepted only with the value None (NotImplementedError otherwise).
    #[pyo3(signature = (requested_schema=None, **kwargs))]
    fn __arrow_c_device_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        arrow::check_device_kwargs(kwargs)?;
        arrow::export_device_stream_capsule(py, &self.0, cell_names(&self.1), requested_schema)
    }

    /// An `arrow_array_stream` capsule yielding the tensor as one chunk (host tensors only).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        arrow::export_stream_capsule(py, &self.0, cell_names(&self.1), requested_schema)
    }

    /// A `pyarrow.Array` over the tensor's memory, zero-copy where the Arrow export is (see
    /// `__arrow_c_device_array__`), keeping the tensor alive; read-only tensors give immutable
    /// buffers. `type` (a `pyarrow.DataType`) is asked of the export, as `pyarrow.array()` asks
    /// the PyCapsule interface, and the result is cast to it when it differs (a safe cast:
    /// pyarrow raises for lossy values, as `pyarrow.array(numpy_array, type=...)` does).
    #[pyo3(signature = (r#type=None))]
    fn __arrow_array__<'py>(
        slf: &Bound<'py, Self>,
        r#type: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let pa = pyarrow(py)?;
        let requested = r#type.filter(|t| !t.is_none());
        if let Some(ty) = requested {
            if !ty.is_instance(pa.data_type.bind(py))? {
                return Err(PyTypeError::new_err(format!(
                    "type must be a pyarrow.DataType or None, not {}",
                    ty.get_type().name()?
                )));
            }
        }
        let tensor = &slf.get().0;
        let array = match &pa.from_dlpack {
            Some(from_dlpack) if dlpack_route(tensor) => from_dlpack.bind(py).call1((slf,))?,
            _ => {
                let schema = requested
                    .map(|ty| ty.call_method0(intern!(py, "__arrow_c_schema__")))
                    .transpose()?;
                let (import, device) = match &pa.import {
                    CapsuleImport::Device(f) => (f, true),
                    CapsuleImport::Host(f) => (f, false),
                };
                let names = cell_names(&slf.get().1);
                let capsules = arrow::export_array(py, tensor, names, schema.as_ref(), device)?;
                import.bind(py).call1(capsules)?
            }
        };
        match requested {
            Some(ty) if !array.getattr(intern!(py, "type"))?.eq(ty)? => {
                array.call_method1(intern!(py, "cast"), (ty,))
            }
            _ => Ok(array),
        }
    }

    /// # Safety
    /// Called by CPython's buffer protocol with a `Py_buffer` it owns.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let tensor = slf.get().tensor().clone();
        // SAFETY: CPython passes a Py_buffer it owns; it calls __releasebuffer__ on it later.
        unsafe { buffer::fill(view, flags, &tensor, slf.into_any()) }
    }

    /// # Safety
    /// Called by CPython with a view filled by `__getbuffer__`.
    unsafe fn __releasebuffer__(&self, view: *mut pyo3::ffi::Py_buffer) {
        // SAFETY: the view was filled by buffer::fill in __getbuffer__.
        unsafe { buffer::release(view) }
    }

    fn __len__(&self) -> PyResult<usize> {
        self.0
            .shape()
            .first()
            .map(|&n| n as usize)
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d tensor"))
    }

    fn __repr__(&self) -> String {
        let t = &self.0;
        let fmt = |v: &[i64]| match v {
            [one] => format!("({one},)"),
            _ => format!(
                "({})",
                v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            ),
        };
        format!(
            "dlbridge.Tensor(shape={}, dtype={}, device={}, strides={}, readonly={}, is_copied={})",
            fmt(t.shape()),
            t.dtype(),
            t.device(),
            fmt(t.strides()),
            if t.is_readonly() { "True" } else { "False" },
            if t.is_copied() { "True" } else { "False" },
        )
    }
}
