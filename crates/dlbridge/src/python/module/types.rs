//! `dlbridge.DType` and `dlbridge.Device`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple, PyType};

use crate::dtype::TypeCode;
use crate::{DType, Device, DeviceType};

/// An element type: DLPack code, bits per lane and lanes. Equal to its name string and to
/// anything else a dtype argument reads as the same dtype.
#[pyclass(name = "DType", module = "dlbridge", frozen)]
pub struct PyDType(pub(crate) DType);

/// Parse a dtype argument: a `DType`, an object with `__dlpack_data_type__` (the dtype
/// exchange protocol), a tvm-ffi dtype, a name (`"float32"`, `"bfloat16"`, `"float32x4"`), a
/// torch dtype, a NumPy or ml_dtypes dtype or scalar type, or a JAX scalar type
/// (`jax.numpy.float32`). TypeError for any other type, ValueError for a value of the right
/// type that names no dtype dlbridge knows.
pub(super) fn parse_dtype(obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    let py = obj.py();
    if let Some(d) = super::instance::<PyDType>(obj) {
        return Ok(d.get().0);
    }
    // A special method, looked up on the type as Python does (a class passed as a dtype does
    // not speak the protocol of its instances).
    let protocol = intern!(py, "__dlpack_data_type__");
    if obj.get_type().hasattr(protocol)? {
        let what = format!("{}.__dlpack_data_type__() gave", obj.get_type().name()?);
        return dtype_from_triple(&what, &obj.call_method0(protocol)?);
    }
    // tvm-ffi's dtype (a str subclass, so read before names) offers the triple as properties.
    if is_instance_of_loaded(obj, "tvm_ffi", "dtype")? {
        let triple = (
            obj.getattr(intern!(py, "type_code"))?,
            obj.getattr(intern!(py, "bits"))?,
            obj.getattr(intern!(py, "lanes"))?,
        )
            .into_pyobject(py)?;
        return dtype_from_triple(
            "tvm_ffi.dtype's (type_code, bits, lanes) are",
            triple.as_any(),
        );
    }
    if let Ok(name) = obj.cast::<PyString>() {
        let name = name.to_cow()?;
        return DType::from_name(&name)
            .ok_or_else(|| PyValueError::new_err(format!("unknown dtype name {name:?}")));
    }
    if is_instance_of_loaded(obj, "torch", "dtype")? {
        // str(torch.float32) is "torch.float32"; torch's names are NumPy's.
        let text = obj.str()?.to_string();
        let name = text.strip_prefix("torch.").unwrap_or(&text);
        return DType::from_name(name).ok_or_else(|| {
            PyValueError::new_err(format!("{text} has no DLPack dtype that dlbridge knows"))
        });
    }
    if let Some(numpy_dtype) = loaded_attr(py, "numpy", "dtype")? {
        if obj.is_instance(&numpy_dtype)? {
            return from_numpy_dtype(obj);
        }
        if let Ok(ty) = obj.cast::<PyType>() {
            // NumPy and ml_dtypes scalar types (numpy.float32, ml_dtypes.bfloat16).
            if let Some(generic) = loaded_attr(py, "numpy", "generic")? {
                if ty.is_subclass(&generic)? {
                    return from_numpy_dtype(&numpy_dtype.call1((ty,))?);
                }
            }
            // JAX's scalar types (jax.numpy.float32) carry their NumPy dtype.
            if let Some(inner) = ty.getattr_opt(intern!(py, "dtype"))? {
                if inner.is_instance(&numpy_dtype)? {
                    return from_numpy_dtype(&inner);
                }
            }
        }
    }
    Err(PyTypeError::new_err(format!(
        "cannot interpret {} as a dtype: use a name (\"float32\"), a dlbridge.DType, a NumPy, ml_dtypes, torch, JAX or tvm-ffi dtype, or an object with __dlpack_data_type__",
        obj.repr()?
    )))
}

/// The dtype of a `(code, bits, lanes)` tuple (`what` says where it came from, for the
/// message): ValueError when it is not a tuple of three integers in range or names no dtype
/// dlbridge knows.
fn dtype_from_triple(what: &str, triple: &Bound<'_, PyAny>) -> PyResult<DType> {
    let (code, bits, lanes) = triple
        .cast::<PyTuple>()
        .ok()
        .and_then(|t| t.extract::<(u8, u8, u16)>().ok())
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "{what} {}: not a (code, bits, lanes) tuple of a uint8, a uint8 and a uint16",
                triple
                    .repr()
                    .map_or_else(|_| "?".to_owned(), |r| r.to_string())
            ))
        })?;
    DType::new(TypeCode(code), bits, lanes)
        .map_err(|e| PyValueError::new_err(format!("{what} an {e}")))
}

/// The dtype of a NumPy (or ml_dtypes) dtype object, by its name: ValueError for a
/// non-native byte order or a type without a DLPack equivalent.
fn from_numpy_dtype(dtype: &Bound<'_, PyAny>) -> PyResult<DType> {
    let py = dtype.py();
    if !dtype.getattr(intern!(py, "isnative"))?.is_truthy()? {
        return Err(PyValueError::new_err(format!(
            "{} is not in native byte order; use dtype.newbyteorder('=')",
            dtype.repr()?
        )));
    }
    let name: String = dtype.getattr(intern!(py, "name"))?.extract()?;
    DType::from_name(&name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "the NumPy dtype {name} has no DLPack dtype that dlbridge knows"
        ))
    })
}

/// `sys.modules[module].attr` when `module` is already imported (dlbridge never imports a
/// library to read an argument: an object of a library not imported cannot be passed).
fn loaded_attr<'py>(
    py: Python<'py>,
    module: &str,
    attr: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let modules = py
        .import(intern!(py, "sys"))?
        .getattr(intern!(py, "modules"))?;
    match modules.get_item(module) {
        Ok(m) => m.getattr_opt(attr),
        Err(_) => Ok(None),
    }
}

/// Whether `obj` is an instance of `module.class`, a class of a library that is already
/// imported (see [`loaded_attr`]).
fn is_instance_of_loaded(obj: &Bound<'_, PyAny>, module: &str, class: &str) -> PyResult<bool> {
    match loaded_attr(obj.py(), module, class)? {
        Some(class) => obj.is_instance(&class),
        None => Ok(false),
    }
}

#[pymethods]
impl PyDType {
    #[new]
    fn new(dtype: &Bound<'_, PyAny>) -> PyResult<Self> {
        parse_dtype(dtype).map(PyDType)
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
    /// The dtype exchange protocol: `(code, bits, lanes)` as DLPack's `DLDataType` has them.
    fn __dlpack_data_type__(&self) -> (u8, u8, u16) {
        (self.0.code().0, self.0.bits(), self.0.lanes())
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        parse_dtype(other).is_ok_and(|d| d == self.0)
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

/// A device: DLPack device type and ordinal. Equal to its string form, its `(type, id)` tuple
/// and anything else a device argument reads as the same device.
#[pyclass(name = "Device", module = "dlbridge", frozen)]
pub struct PyDevice(pub(crate) Device);

/// Parse a device argument: a string (`"cpu"`, `"cuda:1"`), a `Device`, a `(type, id)` tuple,
/// an object with `__dlpack_device__` (the device exchange protocol, which arrays offer too),
/// a tvm-ffi device, or the device object of torch (`torch.device`), JAX (`jax.Device`) or
/// dpnp/dpctl (SYCL devices, which are DLPack's oneAPI devices). TypeError for any other type,
/// ValueError for a value of the right type that names no device.
pub(super) fn parse_device(obj: &Bound<'_, PyAny>) -> PyResult<Device> {
    if let Some(d) = super::instance::<PyDevice>(obj) {
        return Ok(d.get().0);
    }
    if let Ok(s) = obj.extract::<String>() {
        return Ok(s.parse::<Device>()?);
    }
    if obj.is_instance_of::<PyTuple>() {
        return device_from_pair("device", obj);
    }
    if let Some(device) = foreign_device(obj)? {
        return Ok(device);
    }
    Err(PyTypeError::new_err(format!(
        "cannot interpret {} as a device: use \"cpu\", \"cuda:1\", a dlbridge.Device, a (type, id) tuple, a torch/jax/dpnp/tvm-ffi device or an object with __dlpack_device__",
        obj.repr()?
    )))
}

/// The device of a `(device_type, device_id)` tuple (`what` says where it came from, for the
/// message): ValueError when it is not a tuple of two integers, the type is not positive or
/// the id is negative. Unknown positive device types are kept (a Tensor can live there).
fn device_from_pair(what: &str, pair: &Bound<'_, PyAny>) -> PyResult<Device> {
    let repr = || {
        pair.repr()
            .map_or_else(|_| "?".to_owned(), |r| r.to_string())
    };
    let (kind, id) = pair
        .cast::<PyTuple>()
        .ok()
        .and_then(|t| t.extract::<(i32, i32)>().ok())
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "{what} {}: not a (device_type, device_id) tuple of two int32",
                repr()
            ))
        })?;
    if kind <= 0 || id < 0 {
        return Err(PyValueError::new_err(format!(
            "{what} {}: invalid device (the type must be positive, the id not negative)",
            repr()
        )));
    }
    Ok(Device::new(DeviceType(kind), id))
}

/// The device objects of other libraries, by the attributes they carry.
fn foreign_device(obj: &Bound<'_, PyAny>) -> PyResult<Option<Device>> {
    let py = obj.py();
    // Looked up on the type, like `__dlpack_data_type__` in [`parse_dtype`].
    let protocol = intern!(py, "__dlpack_device__");
    if obj.get_type().hasattr(protocol)? {
        let what = format!("{}.__dlpack_device__() gave", obj.get_type().name()?);
        return device_from_pair(&what, &obj.call_method0(protocol)?).map(Some);
    }
    // tvm-ffi's Device: `dlpack_device_type()` and `index`.
    if is_instance_of_loaded(obj, "tvm_ffi", "Device")? {
        let pair = (
            obj.call_method0(intern!(py, "dlpack_device_type"))?,
            obj.getattr(intern!(py, "index"))?,
        )
            .into_pyobject(py)?;
        let what = "tvm_ffi.Device's (dlpack_device_type(), index) are";
        return device_from_pair(what, pair.as_any()).map(Some);
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
    /// True when the host CPU reads and writes the memory directly (plain, pinned and managed
    /// host memory).
    #[getter]
    fn is_host_accessible(&self) -> bool {
        self.0.is_host_accessible()
    }
    /// True when dlbridge copies data out of this device's memory itself.
    #[getter]
    fn dlbridge_copies_from(&self) -> bool {
        crate::cuda::copies_from(self.0)
    }
    /// True when dlbridge makes copies on this device itself.
    #[getter]
    fn dlbridge_copies_to(&self) -> bool {
        crate::cuda::copies_to(self.0)
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

#[cfg(test)]
mod tests {
    use super::*;
    use pyo3::exceptions::PyTypeError;
    use pyo3::types::PyDict;

    /// A class defined in Python whose `__dlpack_data_type__` and `__dlpack_device__` return
    /// `value`, and an instance of it for each value in `values` (Python source literals).
    fn speakers<'py>(py: Python<'py>, method: &str, values: &[&str]) -> Vec<Bound<'py, PyAny>> {
        let globals = PyDict::new(py);
        let code = format!(
            "class Speaker:\n    def __init__(self, value):\n        self.value = value\n    def {method}(self):\n        return self.value\n"
        );
        py.run(&std::ffi::CString::new(code).unwrap(), Some(&globals), None)
            .unwrap();
        let class = globals.get_item("Speaker").unwrap().unwrap();
        values
            .iter()
            .map(|v| {
                let value = py
                    .eval(&std::ffi::CString::new(*v).unwrap(), None, None)
                    .unwrap();
                class.call1((value,)).unwrap()
            })
            .collect()
    }

    #[test]
    fn dtype_protocol_values() {
        Python::initialize();
        Python::attach(|py| {
            let good = speakers(
                py,
                "__dlpack_data_type__",
                &["(2, 32, 1)", "(4, 16, 1)", "(2, 32, 4)"],
            );
            let got: Vec<DType> = good.iter().map(|o| parse_dtype(o).unwrap()).collect();
            let vector = DType::new(TypeCode::FLOAT, 32, 4).unwrap();
            assert_eq!(got, [DType::FLOAT32, DType::BFLOAT16, vector]);
            // Malformed tuples, values out of range, unknown codes and bits: ValueError.
            let bad = [
                "[2, 32, 1]",
                "(2, 32)",
                "(2, 32, 1, 0)",
                "('2', 32, 1)",
                "(2, 256, 1)",
                "(-1, 8, 1)",
                "(2, 32, 0)",
                "(99, 8, 1)",
                "(2, 24, 1)",
                "(3, 64, 1)",
                "None",
            ];
            for obj in speakers(py, "__dlpack_data_type__", &bad) {
                let err = parse_dtype(&obj).unwrap_err();
                assert!(err.is_instance_of::<PyValueError>(py), "{obj}: {err}");
            }
        });
    }

    #[test]
    fn dtype_names_and_wrong_types() {
        Python::initialize();
        Python::attach(|py| {
            let name = PyString::new(py, "float8_e4m3fn");
            assert_eq!(parse_dtype(&name).unwrap().name(), "float8_e4m3fn");
            let err = parse_dtype(&PyString::new(py, "float33")).unwrap_err();
            assert!(err.is_instance_of::<PyValueError>(py));
            for wrong in [
                py.None().into_bound(py),
                3.5f64.into_pyobject(py).unwrap().into_any(),
            ] {
                assert!(
                    parse_dtype(&wrong)
                        .unwrap_err()
                        .is_instance_of::<PyTypeError>(py)
                );
            }
        });
    }

    #[test]
    fn device_protocol_values() {
        Python::initialize();
        Python::attach(|py| {
            let good = speakers(py, "__dlpack_device__", &["(1, 0)", "(2, 3)", "(99, 0)"]);
            let got: Vec<Device> = good.iter().map(|o| parse_device(o).unwrap()).collect();
            assert_eq!(
                got,
                [
                    Device::CPU,
                    Device::new(DeviceType::CUDA, 3),
                    Device::new(DeviceType(99), 0)
                ]
            );
            let bad = [
                "[1, 0]",
                "(1,)",
                "(0, 0)",
                "(2, -1)",
                "(1, 2**40)",
                "('cpu', 0)",
                "'cpu'",
            ];
            for obj in speakers(py, "__dlpack_device__", &bad) {
                let err = parse_device(&obj).unwrap_err();
                assert!(err.is_instance_of::<PyValueError>(py), "{obj}: {err}");
            }
            let wrong = 3.5f64.into_pyobject(py).unwrap().into_any();
            assert!(
                parse_device(&wrong)
                    .unwrap_err()
                    .is_instance_of::<PyTypeError>(py)
            );
        });
    }
}
