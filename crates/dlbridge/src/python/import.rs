//! Any Python array-like -> [`Tensor`], in the documented order, then the `device` / `copy`
//! policy of the array API.

use pyo3::exceptions::{PyBufferError, PyNotImplementedError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::copy::Order;
use crate::cuda;
use crate::device::{Device, DeviceType};
use crate::error::Error;
use crate::ffi::dlpack::{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
use crate::python::protocols::Protocols;
use crate::python::{
    array_interface, arrow, buffer, call, capsule, cuda_array_interface, errors, paddle, pandas,
    protocols, torch,
};
use crate::tensor::Tensor;

/// Import `x` like `from_dlpack`: the most common inputs in one step each ([`direct`]), the
/// rest through the whole dispatch, with the `device` / `copy` policy applied; the names of an
/// Arrow `fixed_shape_tensor`'s cell dimensions are kept.
pub(crate) fn import_object(
    x: &Bound<'_, PyAny>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<(Tensor, CellNames)> {
    let offers = protocols::of(x)?;
    if let Some(tensor) = direct(x, &offers, device, copy)? {
        return Ok(match apply_policy(&tensor, device, copy)? {
            None => (tensor, None),
            Some(copied) => (copied, None),
        });
    }
    // The table and pyarrow's `__dlpack__` were asked already (not asked twice).
    let rest = Protocols {
        exchange: None,
        pyarrow_primitive: false,
        ..offers
    };
    from_object_with(x, Some(rest), device, copy)
}

/// What an exchange does with data on `here`, decided by [`decide`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The data as it is.
    Keep,
    /// A copy on the data's own device.
    Copy,
    /// A copy on another device.
    Move(Device),
    /// A copy is needed (`Refusal` says why) and `copy=False` forbids it.
    Refuse(Refusal),
}

/// Why [`decide`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The data is on another device than the one asked for.
    Transfer,
    /// The consumer cannot take the data as it is.
    Copy,
}

impl Refusal {
    /// The one wording of a `copy=False` refusal, for `from_dlpack` and the planner of
    /// `convert` alike: a transfer from `here` to `device`, or a copy needed because of `why`.
    #[cold] // off the import's path: only a refusal words it
    pub(crate) fn error(self, here: Device, device: Option<Device>, why: &str) -> Error {
        let reason = match self {
            Refusal::Transfer => format!(
                "the data is on {here} and device={} needs a transfer",
                device.unwrap_or(here)
            ),
            Refusal::Copy => why.to_owned(),
        };
        Error::CopyRequired { reason }
    }
}

/// The one copy and device rule of `from_dlpack`, `Tensor.to_device` and the planner of
/// `convert`, for data on `here` asked for `device` and `copy` (the array API's rule):
///
/// - another device is a transfer, refused under `copy=False`;
/// - a copy the consumer `needs` (misaligned data, a layout or read-only flag it cannot take)
///   is made, refused under `copy=False`;
/// - `copy=True` is a copy, unless the data is `fresh` already (a producer's own copy, or the
///   planner's, that the result alone will hold);
/// - anything else is kept as it is.
pub(crate) fn decide(
    here: Device,
    device: Option<Device>,
    copy: Option<bool>,
    needs: bool,
    fresh: bool,
) -> Decision {
    match (device, copy) {
        (Some(target), Some(false)) if target != here => Decision::Refuse(Refusal::Transfer),
        (Some(target), _) if target != here => Decision::Move(target),
        (_, Some(false)) if needs => Decision::Refuse(Refusal::Copy),
        _ if needs => Decision::Copy,
        (_, Some(true)) if !fresh => Decision::Copy,
        _ => Decision::Keep,
    }
}

/// Import `obj` zero-copy when possible, honouring `device` and `copy` like the array API's
/// `from_dlpack`: `copy=True` always copies (C-contiguous result), `copy=False` never copies,
/// `copy=None` copies only when needed (e.g. data not aligned to its item size).
pub(crate) fn from_object(
    obj: &Bound<'_, PyAny>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<Tensor> {
    Ok(from_object_named(obj, device, copy)?.0)
}

/// [`from_object`], with the names an Arrow `fixed_shape_tensor` gives its cell dimensions
/// (`None` for every other import).
pub(crate) fn from_object_named(
    obj: &Bound<'_, PyAny>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<(Tensor, CellNames)> {
    from_object_with(obj, None, device, copy)
}

/// [`from_object_named`] for a caller that has already looked up `obj`'s protocols (`offers`;
/// the lookup is then not repeated).
pub(crate) fn from_object_with(
    obj: &Bound<'_, PyAny>,
    offers: Option<Protocols>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<(Tensor, CellNames)> {
    let (tensor, names) = import_named(obj, offers, device, copy)?;
    match apply_policy(&tensor, device, copy)? {
        None => Ok((tensor, names)),
        Some(copied) => Ok((copied, names)),
    }
}

/// The names of an Arrow `fixed_shape_tensor`'s cell dimensions, if it had some.
pub(crate) type CellNames = Option<Vec<String>>;

/// Import without applying the copy policy (the producer may still have been asked for a copy
/// on another device).
pub(crate) fn import(
    obj: &Bound<'_, PyAny>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<Tensor> {
    Ok(import_named(obj, None, device, copy)?.0)
}

/// The import of the most common inputs in one step, without the layers of
/// [`from_object`] (which cost as much as the import itself): NumPy arrays, tensors with a
/// DLPack C exchange API (torch), pyarrow's numeric arrays and producers that offer only
/// `__dlpack__` (JAX, tvm-ffi, ...). The result is the one [`import`] gives; `None` for
/// anything else, which takes the general path with `offers.exchange` and
/// `offers.pyarrow_primitive` cleared (those routes were tried here).
#[inline(always)]
pub(crate) fn direct(
    obj: &Bound<'_, PyAny>,
    offers: &Protocols,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<Option<Tensor>> {
    if let Some(tensor) = numpy_array(obj, offers, device)? {
        return Ok(Some(tensor));
    }
    if let Some(tensor) = exchange_table(obj, offers, device)? {
        return Ok(Some(tensor));
    }
    if let Some(tensor) = pyarrow_numeric(obj, offers)? {
        return Ok(Some(tensor));
    }
    dlpack_only(obj, offers, device, copy)
}

/// A NumPy array read in place, as its `__dlpack__` would describe it (on the CPU, so only
/// when no other device is asked for); `None` for anything else, which takes the general path.
pub(crate) fn numpy_array(
    obj: &Bound<'_, PyAny>,
    offers: &Protocols,
    device: Option<Device>,
) -> PyResult<Option<Tensor>> {
    match (offers.numpy_ndarray, device) {
        (Some(api), None | Some(Device::CPU)) => api.import(obj),
        _ => Ok(None),
    }
}

/// A tensor exported through its type's DLPack C exchange API (torch's state checked), when
/// the type has one, no device is asked for, and the data is host-accessible; `None` for
/// anything else, which takes the general path.
pub(crate) fn exchange_table(
    obj: &Bound<'_, PyAny>,
    offers: &Protocols,
    device: Option<Device>,
) -> PyResult<Option<Tensor>> {
    let (Some(api), None) = (offers.exchange, device) else {
        return Ok(None);
    };
    let imported = match api.import(obj) {
        Err(err) if offers.torch_tensor => return Err(torch::export_refused(obj, err)),
        imported => imported?,
    };
    let Some(tensor) = imported else {
        return Ok(None);
    };
    // Checked after the export, whose dtype says which states the tensor can have (a refusal
    // drops the export, and torch's deleter runs).
    if offers.torch_tensor {
        torch::check_exported(obj, tensor.dtype())?;
    }
    if offers.paddle_tensor {
        paddle::check_exported(obj)?;
    }
    Ok(Some(tensor))
}

/// A pyarrow integer or float array read through its own `__dlpack__`; `None` for anything
/// else, and for the arrays that take the Arrow path.
///
/// These arrays are the exception to the Arrow-first rule of the dispatch: their own
/// `__dlpack__` gives the same read-only zero-copy view (slice offset applied) in a fraction
/// of the time. What it refuses (nulls, as an ArrowTypeError) goes on to the Arrow path, whose
/// error names the fix. So do empty arrays: pyarrow's capsule has a NULL data pointer there,
/// which NumPy then exports as a writable array, where the Arrow path keeps the (read-only)
/// buffer's address.
fn pyarrow_numeric(obj: &Bound<'_, PyAny>, offers: &Protocols) -> PyResult<Option<Tensor>> {
    if !offers.pyarrow_primitive {
        return Ok(None);
    }
    let py = obj.py();
    match call::dlpack_with_max_version(obj, offers.dlpack_method) {
        Ok(capsule) => {
            let tensor = capsule::consume(&capsule)?;
            Ok((tensor.size() > 0).then_some(tensor))
        }
        Err(err)
            if err.is_instance_of::<PyTypeError>(py) || err.is_instance_of::<PyBufferError>(py) =>
        {
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

/// A producer whose type offers `__dlpack__` and nothing the dispatch would try before it
/// (no NumPy array, exchange table, torch tensor or Arrow protocol), imported through it
/// straight away when no device is asked for; `None` for anything else, which takes the
/// general path. The result is the general path's: a refusal (NotImplementedError) goes on to
/// the routes after `__dlpack__`, any other error is raised. JAX, tvm-ffi and
/// array-api-strict arrays come this way; the layers it skips cost about 300 of the 3,770
/// instructions of importing a tvm-ffi tensor (callgrind).
fn dlpack_only(
    obj: &Bound<'_, PyAny>,
    offers: &Protocols,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<Option<Tensor>> {
    let before_dlpack = offers.numpy_ndarray.is_some()
        || offers.exchange.is_some()
        || offers.torch_tensor
        || offers.pyarrow_primitive
        || offers.arrow_device_array
        || offers.arrow_array
        || offers.arrow_device_stream
        || offers.arrow_stream;
    if !offers.dlpack || before_dlpack || device.is_some() {
        return Ok(None);
    }
    match import_dlpack(obj, offers.dlpack_method, None, copy) {
        Ok(tensor) => Ok(Some(tensor)),
        Err(err) if err.is_instance_of::<PyNotImplementedError>(obj.py()) => {
            let next = Route::ORDER
                .iter()
                .position(|route| matches!(route, Route::DLPack))
                .expect("DLPack is a route")
                + 1;
            let refusals = vec![(Route::DLPack, err)];
            Ok(Some(
                after_refusal(obj, offers, None, copy, refusals, next)?.0,
            ))
        }
        Err(err) => Err(err),
    }
}

/// [`import`], with the names of an Arrow `fixed_shape_tensor`'s cell dimensions.
fn import_named(
    obj: &Bound<'_, PyAny>,
    offers: Option<Protocols>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<(Tensor, CellNames)> {
    let unnamed = |tensor| Ok((tensor, None));
    let py = obj.py();
    if capsule::is_capsule(obj) {
        return unnamed(capsule::consume(obj)?);
    }
    let offers = match offers {
        Some(offers) => offers,
        None => protocols::of(obj)?,
    };
    if let Some(tensor) = numpy_array(obj, &offers, device)? {
        return unnamed(tensor);
    }
    if let Some(tensor) = exchange_table(obj, &offers, device)? {
        return unnamed(tensor);
    }
    if offers.torch_tensor {
        torch::check_describable(obj)?;
        torch::check_exportable(obj)?;
    }
    if let Some(tensor) = pyarrow_numeric(obj, &offers)? {
        return unnamed(tensor);
    }
    match offers.pandas {
        Some(pandas::Kind::Series) => {
            if let Some(view) = pandas::numpy_view(obj)? {
                return import_named(&view, None, device, copy);
            }
        }
        Some(pandas::Kind::DataFrame) => return Err(pandas::dataframe_refused()),
        None => {}
    }
    // The protocols the type offers, in the documented order. Objects that speak the Arrow C
    // interface go through it, even when they also offer __dlpack__ (pyarrow arrays do): it
    // carries nulls (refused with a BufferError naming the fix), bit-packed booleans (unpacked
    // by a copy), fixed-size lists and the fixed_shape_tensor extension, which pyarrow's
    // __dlpack__ refuses with TypeError or, for a permutation that is not its own inverse,
    // exports with overlapping strides. Plain arrays are zero-copy and read-only either way.
    //
    // A producer that raises NotImplementedError from one of them says "not this protocol"
    // (the Arrow PyCapsule interface's own convention, e.g. a device method on a host-only
    // build), so the next one it offers is tried. Any other error is about the data and is
    // raised as it is: a BufferError for nulls, a device it cannot reach, ... would only be
    // hidden by another protocol's different error.
    for (i, route) in Route::ORDER.into_iter().enumerate() {
        if !route.is_offered(obj, &offers) {
            continue;
        }
        match route.import(obj, &offers, device, copy) {
            Ok(imported) => return Ok(imported),
            Err(err) if err.is_instance_of::<PyNotImplementedError>(py) => {
                return after_refusal(obj, &offers, device, copy, vec![(route, err)], i + 1);
            }
            Err(err) => return Err(err),
        }
    }
    // The type offers nothing; the instance may (an `__array_interface__` set in `__init__`,
    // as NumPy's documentation shows, or a `__dlpack__` attached to one object).
    if obj.getattr_opt(intern!(py, "__dlpack__"))?.is_some() {
        return unnamed(import_dlpack(obj, None, device, copy)?);
    }
    if let Some(iface) = obj.getattr_opt(intern!(py, "__cuda_array_interface__"))? {
        return unnamed(import_cuda_array_interface(obj, &iface)?);
    }
    if let Some(iface) = obj.getattr_opt(intern!(py, "__array_interface__"))? {
        return unnamed(array_interface::import(obj, &iface)?);
    }
    let type_name = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default();
    Err(errors::no_protocol_error(
        py,
        format!(
            "cannot import an object of type {type_name}: it offers none of __dlpack__, a DLPack capsule, __cuda_array_interface__, the Arrow PyCapsule interface (__arrow_c_array__, __arrow_c_stream__...), the buffer protocol or __array_interface__ (for a Python list, build an array first, e.g. numpy.asarray)"
        ),
    ))
}

/// A protocol of the general dispatch (after capsules, NumPy arrays, exchange tables and
/// pyarrow's numeric arrays).
#[derive(Clone, Copy, Debug)]
enum Route {
    Arrow(arrow::Protocol),
    DLPack,
    CudaArrayInterface,
    Buffer,
    ArrayInterface,
}

impl Route {
    /// Every route, in the order they are tried.
    const ORDER: [Route; 8] = [
        Route::Arrow(arrow::Protocol::DeviceArray),
        Route::Arrow(arrow::Protocol::Array),
        Route::Arrow(arrow::Protocol::DeviceStream),
        Route::Arrow(arrow::Protocol::Stream),
        Route::DLPack,
        Route::CudaArrayInterface,
        Route::Buffer,
        Route::ArrayInterface,
    ];

    /// Whether `obj`'s type offers the route (asked only when the routes before it did not
    /// import `obj`).
    fn is_offered(self, obj: &Bound<'_, PyAny>, offers: &Protocols) -> bool {
        match self {
            Route::Arrow(protocol) => protocol.is_offered(offers),
            Route::DLPack => offers.dlpack,
            Route::CudaArrayInterface => offers.cuda_array_interface,
            Route::Buffer => buffer::has_buffer(obj),
            Route::ArrayInterface => offers.array_interface,
        }
    }

    /// What the route is called in messages.
    fn name(self) -> &'static str {
        match self {
            Route::Arrow(protocol) => protocol.method(),
            Route::DLPack => "__dlpack__",
            Route::CudaArrayInterface => "__cuda_array_interface__",
            Route::Buffer => "the buffer protocol",
            Route::ArrayInterface => "__array_interface__",
        }
    }

    fn import(
        self,
        obj: &Bound<'_, PyAny>,
        offers: &Protocols,
        device: Option<Device>,
        copy: Option<bool>,
    ) -> PyResult<(Tensor, CellNames)> {
        let py = obj.py();
        let tensor = match self {
            Route::Arrow(protocol) => {
                let imported =
                    arrow::import_with(obj, protocol, copy, crate::arrow::Nulls::Refuse)?;
                return Ok((imported.values, imported.dim_names));
            }
            Route::DLPack => import_dlpack(obj, offers.dlpack_method, device, copy)?,
            Route::CudaArrayInterface => import_cuda_array_interface(
                obj,
                &obj.getattr(intern!(py, "__cuda_array_interface__"))?,
            )?,
            Route::Buffer => buffer::import(obj)?,
            Route::ArrayInterface => {
                array_interface::import(obj, &obj.getattr(intern!(py, "__array_interface__"))?)?
            }
        };
        Ok((tensor, None))
    }
}

/// The routes after a refusal (`refusals` so far; `next`: the index in [`Route::ORDER`] to go
/// on from). Out of line, so that the common import carries no list of refusals (90 of
/// the 3,500 instructions of importing a tvm-ffi tensor, measured with callgrind).
#[cold]
fn after_refusal(
    obj: &Bound<'_, PyAny>,
    offers: &Protocols,
    device: Option<Device>,
    copy: Option<bool>,
    mut refusals: Vec<(Route, PyErr)>,
    next: usize,
) -> PyResult<(Tensor, CellNames)> {
    for route in Route::ORDER.into_iter().skip(next) {
        if !route.is_offered(obj, offers) {
            continue;
        }
        match route.import(obj, offers, device, copy) {
            Ok(imported) => return Ok(imported),
            Err(err) if err.is_instance_of::<PyNotImplementedError>(obj.py()) => {
                refusals.push((route, err));
            }
            Err(err) => return Err(err),
        }
    }
    Err(every_route_refused(obj, refusals))
}

/// The BufferError for an object every offered protocol of which refused
/// (NotImplementedError): each protocol and its error, the last error as the cause.
#[cold]
fn every_route_refused(obj: &Bound<'_, PyAny>, refusals: Vec<(Route, PyErr)>) -> PyErr {
    let refusals = refusals
        .into_iter()
        .map(|(route, err)| (route.name(), err))
        .collect();
    refused_by_each(
        obj,
        "every protocol it offers refused",
        refusals,
        "convert it with its own library first (e.g. numpy.asarray)",
    )
}

/// The BufferError for an object whose protocols (by name) all refused, `what` saying which
/// ones: each protocol and its error in the order they were tried, then `way_out`; the last
/// error is the cause. The object does speak a protocol, so this is not a TypeError: its
/// producer declined to exchange this data.
#[cold]
pub(crate) fn refused_by_each(
    obj: &Bound<'_, PyAny>,
    what: &str,
    refusals: Vec<(&'static str, PyErr)>,
    way_out: &str,
) -> PyErr {
    let py = obj.py();
    let type_name = obj
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default();
    let each: Vec<String> = refusals
        .iter()
        .map(|(name, err)| format!("{name} raised {}", describe_error(py, err)))
        .collect();
    let refused = PyBufferError::new_err(format!(
        "cannot import an object of type {type_name}: {what} ({}); {way_out}",
        each.join("; ")
    ));
    if let Some((_, last)) = refusals.into_iter().last() {
        refused.set_cause(py, Some(last));
    }
    refused
}

/// `Type: message` (or the type alone) for an error in a message.
fn describe_error(py: Python<'_>, err: &PyErr) -> String {
    let kind = err
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default();
    match err.value(py).str().map(|s| s.to_string()) {
        Ok(message) if !message.is_empty() => format!("{kind}: {message}"),
        _ => kind,
    }
}

/// `__cuda_array_interface__`, with the object's `__dlpack_device__` (if any) as the device
/// hint for when the CUDA driver cannot be asked.
fn import_cuda_array_interface(
    obj: &Bound<'_, PyAny>,
    iface: &Bound<'_, PyAny>,
) -> PyResult<Tensor> {
    let hint = match obj.getattr_opt(intern!(obj.py(), "__dlpack_device__"))? {
        Some(method) => {
            let (kind, id): (i32, i32) = method.call0()?.extract()?;
            Some(Device::new(DeviceType(kind), id))
        }
        None => None,
    };
    cuda_array_interface::import(obj, iface, hint)
}

fn is_keyword_type_error(py: Python<'_>, err: &PyErr) -> bool {
    err.is_instance_of::<PyTypeError>(py)
        && err
            .value(py)
            .str()
            .map(|s| {
                let s = s.to_string_lossy();
                s.contains("keyword") || s.contains("argument")
            })
            .unwrap_or(false)
}

/// `obj`'s DLPack export (`method`: its `__dlpack__` function, when known for its type).
fn import_dlpack(
    obj: &Bound<'_, PyAny>,
    method: Option<&Py<PyAny>>,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<Tensor> {
    let py = obj.py();
    // Where the data is, when it matters (None: the producer has no `__dlpack_device__`).
    let here = match (device, copy) {
        (Some(_), _) | (_, Some(true)) => dlpack_device(obj)?,
        _ => None,
    };
    // A copy of data the host cannot reach is the producer's to make (it knows its device).
    let target = device.or_else(|| here.filter(|h| copy == Some(true) && !h.is_host_accessible()));
    let Some(target) = target else {
        let capsule = match call::dlpack_with_max_version(obj, method) {
            Ok(c) => c,
            Err(err) if is_keyword_type_error(py, &err) => {
                obj.call_method0(intern!(py, "__dlpack__"))?
            }
            Err(err) => return Err(err),
        };
        return capsule::consume_from(&capsule, obj);
    };
    let method = obj.getattr(intern!(py, "__dlpack__"))?;
    let kwargs = PyDict::new(py);
    // Given, not left out: see `call::dlpack_with_max_version`.
    kwargs.set_item(intern!(py, "stream"), py.None())?;
    kwargs.set_item(
        intern!(py, "max_version"),
        (DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION),
    )?;
    let Some(here) = here.filter(|h| *h != target) else {
        // Already there (or the producer cannot say where): `apply_policy` moves it if needed.
        if copy == Some(true) && !target.is_host_accessible() {
            kwargs.set_item(intern!(py, "copy"), true)?;
            wait_for_sycl_producer(obj)?;
        }
        return call_dlpack(obj, &method, &kwargs);
    };
    // Another device: the producer knows its memory best, so it is asked first (with `copy`
    // passed on, and no stream: a host target needs a complete copy on return).
    kwargs.set_item(intern!(py, "dl_device"), (target.kind.0, target.id))?;
    if let Some(c) = copy {
        kwargs.set_item(intern!(py, "copy"), c)?;
    }
    match call_dlpack(obj, &method, &kwargs) {
        Ok(tensor) => Ok(tensor),
        // The producer cannot (or, being old, does not know how to): dlbridge makes the
        // transfer itself when it can reach both devices; `apply_policy` copies.
        Err(err)
            if producer_refused(py, &err)
                && copy != Some(false)
                && cuda::route(here, target).is_ok() =>
        {
            kwargs.del_item(intern!(py, "dl_device"))?;
            let _ = kwargs.del_item(intern!(py, "copy"));
            call_dlpack(obj, &method, &kwargs)
        }
        Err(err) => Err(transfer_refused(py, err, here, target, copy)),
    }
}

/// The error for a transfer from `here` to `target` that neither the producer (`err`, the
/// cause) nor dlbridge makes: the copy rule's refusal under `copy=False`, else a BufferError
/// naming the way out. Out of line: the import's path does not carry its formatting.
#[cold]
fn transfer_refused(
    py: Python<'_>,
    err: PyErr,
    here: Device,
    target: Device,
    copy: Option<bool>,
) -> PyErr {
    let refused: PyErr = match decide(here, Some(target), copy, false, false) {
        Decision::Refuse(refusal) => refusal.error(here, Some(target), "").into(),
        _ => PyBufferError::new_err(format!(
            "cannot import data on {here} to {target}: the producer refused ({err}) and dlbridge cannot reach {target} from {here} itself; import it where it is (device=None) or copy it with the producer's own transfer function"
        )),
    };
    refused.set_cause(py, Some(err));
    refused
}

/// Before a producer copies its data on a SYCL device: wait for the producer's queue (the
/// `sycl_queue` of dpnp and dpctl arrays), when it has one. dpctl's `__dlpack__(copy=True)`
/// enqueues the copy without waiting for the kernels still writing the source, and DLPack gives
/// a consumer no stream to order it with on these devices: measured here, 138 of 3000 copies of
/// a fresh `dpnp.arange` came back with stale values, none after this wait.
fn wait_for_sycl_producer(obj: &Bound<'_, PyAny>) -> PyResult<()> {
    if let Some(queue) = obj.getattr_opt(intern!(obj.py(), "sycl_queue"))? {
        if let Some(wait) = queue.getattr_opt(intern!(obj.py(), "wait"))? {
            wait.call0()?;
        }
    }
    Ok(())
}

/// The producer's `__dlpack_device__()`, or `None` when it has none (a pre-2021 producer) or
/// its answer is not two ints: paddle 3.3 answers `(kDLCPU, None)` for CPU tensors. Unknown
/// means "ask the producer": its capsule says where the data is.
fn dlpack_device(obj: &Bound<'_, PyAny>) -> PyResult<Option<Device>> {
    match obj.getattr_opt(intern!(obj.py(), "__dlpack_device__"))? {
        Some(method) => {
            let answer = method.call0()?;
            Ok(answer
                .extract::<(i32, i32)>()
                .ok()
                .map(|(kind, id)| Device::new(DeviceType(kind), id)))
        }
        None => Ok(None),
    }
}

/// The errors by which a producer declines a `dl_device` / `copy` request.
fn producer_refused(py: Python<'_>, err: &PyErr) -> bool {
    err.is_instance_of::<PyBufferError>(py)
        || err.is_instance_of::<pyo3::exceptions::PyNotImplementedError>(py)
        || err.is_instance_of::<pyo3::exceptions::PyValueError>(py)
        || is_keyword_type_error(py, err)
}

/// Call `obj`'s `__dlpack__` (`method`) with `kwargs`; an old producer that rejects the
/// keywords is asked again without any, and the capsule name says which flavour came back.
fn call_dlpack(
    obj: &Bound<'_, PyAny>,
    method: &Bound<'_, PyAny>,
    kwargs: &Bound<'_, PyDict>,
) -> PyResult<Tensor> {
    let capsule = match method.call((), Some(kwargs)) {
        Ok(c) => c,
        Err(err) if is_keyword_type_error(method.py(), &err) => method.call0()?,
        Err(err) => return Err(err),
    };
    capsule::consume_from(&capsule, obj)
}

/// Apply `device` / `copy` to an imported tensor: the tensor to use instead (a copy), or
/// `None` to keep it as it is. Taking it by reference keeps the common no-copy path free of
/// moves.
pub(crate) fn apply_policy(
    tensor: &Tensor,
    device: Option<Device>,
    copy: Option<bool>,
) -> PyResult<Option<Tensor>> {
    let here = tensor.device();
    // A producer's fresh copy (IS_COPIED) is the consumer's alone; on the host it counts as
    // the copy `copy=True` asks for when it is also C-contiguous, as dlbridge's copies are.
    let fresh = tensor.is_copied() && (tensor.is_c_contiguous() || !here.is_host_accessible());
    match decide(here, device, copy, needs_realignment(tensor), fresh) {
        Decision::Refuse(refusal) => Err(refusal
            .error(here, device, "the data is not aligned to its item size")
            .into()),
        Decision::Move(target) => Ok(Some(cuda::to_device(
            tensor,
            target,
            cuda::StreamRequest::Default,
        )?)),
        Decision::Copy if !here.is_host_accessible() => Ok(Some(cuda::to_device(
            tensor,
            here,
            cuda::StreamRequest::Default,
        )?)),
        Decision::Copy => Ok(Some(tensor.copy(Order::C)?)),
        // A producer's fresh copy (IS_COPIED) is the consumer's alone: writable, even when the
        // producer kept its source's READ_ONLY on it (dpnp does), when a copy or a device was
        // asked for.
        Decision::Keep
            if tensor.is_readonly()
                && tensor.is_copied()
                && (copy == Some(true) || device.is_some()) =>
        {
            Ok(Some(tensor.clone().into_writable_if_copied()))
        }
        Decision::Keep => Ok(None),
    }
}

fn needs_realignment(tensor: &Tensor) -> bool {
    tensor.device().is_host_accessible() && !tensor.is_aligned()
}

#[cfg(test)]
mod tests {
    use super::{Decision, Refusal, decide};
    use crate::device::{Device, DeviceType};

    #[test]
    fn the_copy_and_device_rule() {
        let cpu = Device::CPU;
        let cuda = Device::new(DeviceType::CUDA, 0);
        // (here, device, copy, needs, fresh) -> decision
        let table = [
            ((cpu, None, None, false, false), Decision::Keep),
            ((cpu, Some(cpu), None, false, false), Decision::Keep),
            ((cpu, Some(cuda), None, false, false), Decision::Move(cuda)),
            (
                (cpu, Some(cuda), Some(true), false, true),
                Decision::Move(cuda),
            ),
            (
                (cpu, Some(cuda), Some(false), false, false),
                Decision::Refuse(Refusal::Transfer),
            ),
            ((cpu, None, Some(true), false, false), Decision::Copy),
            ((cpu, None, Some(true), false, true), Decision::Keep),
            ((cpu, None, None, true, false), Decision::Copy),
            // a fresh copy with a layout the consumer cannot take is copied again
            ((cpu, None, Some(true), true, true), Decision::Copy),
            (
                (cpu, Some(cpu), Some(false), true, false),
                Decision::Refuse(Refusal::Copy),
            ),
            ((cuda, None, Some(false), false, false), Decision::Keep),
        ];
        for ((here, device, copy, needs, fresh), want) in table {
            assert_eq!(
                decide(here, device, copy, needs, fresh),
                want,
                "{here} {device:?} {copy:?} needs={needs} fresh={fresh}"
            );
        }
    }
}
