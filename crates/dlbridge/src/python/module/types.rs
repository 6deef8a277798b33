//! `dlbridge.DType` and `dlbridge.Device`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::{DType, Device, DeviceType};

/// An element type: DLPack code, bits per lane and lanes. Equal to its name string.
#[pyclass(name = "DType", module = "dlbridge", frozen)]
pub struct PyDType(pub(crate) DType);

#[pymethods]
impl PyDType {
    #[new]
    fn new(name: &str) -> PyResult<Self> {
        DType::from_name(name)
            .map(PyDType)
            .ok_or_else(|| PyValueError::new_err(format!("unknown dtype name {name:?}")))
    }
    /// The NumPy / ml_dtypes name.
    #[getter]
    fn name(&self) -> String {
        self.0.name()
    }
    /// The DLPack type code.
    #[getter]
    fn code(&self) -> u8 {
        self.0.code().0
    }
    /// Bits per lane.
    #[getter]
    fn bits(&self) -> u8 {
        self.0.bits()
    }
    /// Number of lanes.
    #[getter]
    fn lanes(&self) -> u16 {
        self.0.lanes()
    }
    /// Bytes per element.
    #[getter]
    fn itemsize(&self) -> usize {
        self.0.itemsize()
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        if let Ok(d) = other.cast::<PyDType>() {
            return d.get().0 == self.0;
        }
        other.extract::<String>().is_ok_and(|s| s == self.0.name())
    }
    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.0.name().hash(&mut h);
        h.finish()
    }
    fn __str__(&self) -> String {
        self.0.name()
    }
    fn __repr__(&self) -> String {
        format!("dlbridge.DType('{}')", self.0.name())
    }
    /// Pickles as its name (`DType(name)` rebuilds it).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> (Bound<'py, PyType>, (String,)) {
        (slf.get_type(), (slf.get().0.name(),))
    }
}

/// A device: DLPack device type and ordinal. Equal to its string form and `(type, id)` tuple.
#[pyclass(name = "Device", module = "dlbridge", frozen)]
pub struct PyDevice(pub(crate) Device);

/// Parse a device argument: a string, a `Device`, a `(type, id)` tuple, an object with
/// `__dlpack_device__`, or the device object of torch (`torch.device`), JAX (`jax.Device`) or
/// dpnp/dpctl (SYCL devices, which are DLPack's oneAPI devices).
pub(super) fn parse_device(obj: &Bound<'_, PyAny>) -> PyResult<Device> {
    if let Ok(d) = obj.cast::<PyDevice>() {
        return Ok(d.get().0);
    }
    if let Ok(s) = obj.extract::<String>() {
        return Ok(s.parse::<Device>()?);
    }
    if let Ok((kind, id)) = obj.extract::<(i32, i32)>() {
        if kind <= 0 || id < 0 {
            return Err(PyValueError::new_err(format!(
                "invalid device ({kind}, {id})"
            )));
        }
        return Ok(Device::new(DeviceType(kind), id));
    }
    if let Some(device) = foreign_device(obj)? {
        return Ok(device);
    }
    Err(PyValueError::new_err(format!(
        "cannot interpret {} as a device: use \"cpu\", \"cuda:1\", a dlbridge.Device, a (type, id) tuple or a torch/jax/dpnp device",
        obj.repr()?
    )))
}

/// The device objects of other libraries, by the attributes they carry.
fn foreign_device(obj: &Bound<'_, PyAny>) -> PyResult<Option<Device>> {
    if let Some(method) = obj.getattr_opt("__dlpack_device__")? {
        let (kind, id): (i32, i32) = method.call0()?.extract()?;
        return Ok(Some(Device::new(DeviceType(kind), id)));
    }
    // dpnp / dpctl: a SYCL device (or a wrapper holding one) is a oneAPI device.
    let sycl = match obj.getattr_opt("sycl_device")? {
        Some(inner) => Some(inner),
        None if obj.hasattr("get_device_id")? => Some(obj.clone()),
        None => None,
    };
    if let Some(sycl) = sycl {
        let id: i32 = sycl.call_method0("get_device_id")?.extract()?;
        return Ok(Some(Device::new(DeviceType::ONEAPI, id)));
    }
    // torch.device: `type` ("cpu", "cuda", ...) and `index` (None = 0).
    if let (Some(kind), Some(index)) = (obj.getattr_opt("type")?, obj.getattr_opt("index")?) {
        if let Ok(kind) = kind.extract::<String>() {
            let id: i32 = if index.is_none() { 0 } else { index.extract()? };
            let name = match kind.as_str() {
                "xpu" => "oneapi",
                "mps" => "metal",
                other => other,
            };
            return Ok(Some(format!("{name}:{id}").parse::<Device>()?));
        }
    }
    // jax.Device: `platform` ("cpu", "gpu"/"cuda", "rocm") and `id`.
    if let (Some(platform), Some(id)) = (obj.getattr_opt("platform")?, obj.getattr_opt("id")?) {
        if let (Ok(platform), Ok(id)) = (platform.extract::<String>(), id.extract::<i32>()) {
            let name = if platform == "gpu" {
                "cuda"
            } else {
                platform.as_str()
            };
            let id = if name == "cpu" { 0 } else { id };
            return Ok(Some(format!("{name}:{id}").parse::<Device>()?));
        }
    }
    Ok(None)
}

#[pymethods]
impl PyDevice {
    #[new]
    fn new(device: &Bound<'_, PyAny>) -> PyResult<Self> {
        parse_device(device).map(PyDevice)
    }
    /// The DLPack device type.
    #[getter]
    fn r#type(&self) -> i32 {
        self.0.kind.0
    }
    /// The ordinal.
    #[getter]
    fn id(&self) -> i32 {
        self.0.id
    }
    /// The device kind name.
    #[getter]
    fn name(&self) -> String {
        self.0
            .kind
            .name()
            .map_or_else(|| format!("device{}", self.0.kind.0), str::to_owned)
    }
    fn __dlpack_device__(&self) -> (i32, i32) {
        (self.0.kind.0, self.0.id)
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        parse_device(other).is_ok_and(|d| d == self.0)
    }
    fn __hash__(&self) -> u64 {
        (self.0.kind.0 as u64) << 32 | self.0.id as u32 as u64
    }
    fn __str__(&self) -> String {
        self.0.to_string()
    }
    fn __repr__(&self) -> String {
        format!("dlbridge.Device('{}')", self.0)
    }
    /// Pickles as its `(type, id)` pair (`Device((type, id))` rebuilds it, for device types
    /// without a name too).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> (Bound<'py, PyType>, ((i32, i32),)) {
        let device = slf.get().0;
        (slf.get_type(), ((device.kind.0, device.id),))
    }
}
