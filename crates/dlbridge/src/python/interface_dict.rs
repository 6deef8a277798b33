//! The fields NumPy's `__array_interface__` and the CUDA Array Interface share: `shape`,
//! `typestr`, `descr`, `strides` (bytes), `data = (address, readonly)` and `mask`. One parser
//! serves both; each protocol adds its own keys (the CUDA one, `stream`).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::dtype::DType;
use crate::error::Error;
use crate::layout::Layout;
use crate::python::buffer::element_strides;
use crate::python::errors::buffer_error;

/// The common fields, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fields {
    /// Element type.
    pub dtype: DType,
    /// Shape and element strides.
    pub layout: Layout,
    /// Address of the first element (0 only for zero-size arrays).
    pub address: usize,
    /// The read-only flag of `data`.
    pub readonly: bool,
}

/// One interface dict of one object, for parsing with messages that name both.
pub(crate) struct InterfaceDict<'a, 'py> {
    obj: &'a Bound<'py, PyAny>,
    dict: &'a Bound<'py, PyDict>,
    protocol: &'static str,
}

impl<'a, 'py> InterfaceDict<'a, 'py> {
    /// `iface` (the value of `obj.<protocol>`) as a dict, or a BufferError.
    pub(crate) fn new(
        obj: &'a Bound<'py, PyAny>,
        iface: &'a Bound<'py, PyAny>,
        protocol: &'static str,
    ) -> PyResult<Self> {
        let dict = iface.cast::<PyDict>().map_err(|_| {
            buffer_error(format!(
                "{}.{protocol} is malformed: it is not a dict",
                type_name(obj)
            ))
        })?;
        Ok(Self {
            obj,
            dict,
            protocol,
        })
    }

    /// A BufferError saying the dict is malformed, and how.
    pub(crate) fn malformed(&self, what: &str) -> PyErr {
        buffer_error(format!(
            "{}.{} is malformed: {what}",
            type_name(self.obj),
            self.protocol
        ))
    }

    /// The value of `key`, if present.
    pub(crate) fn get(&self, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.dict.get_item(key)
    }

    /// `version`, which must lie in `supported`; `default` when absent (`None`: required).
    pub(crate) fn version(
        &self,
        supported: std::ops::RangeInclusive<i64>,
        default: Option<i64>,
    ) -> PyResult<i64> {
        let version = match self.get("version")? {
            Some(v) => v
                .extract::<i64>()
                .map_err(|_| self.malformed("'version' must be an int"))?,
            None => default.ok_or_else(|| self.malformed("'version' is missing"))?,
        };
        if !supported.contains(&version) {
            return Err(self.malformed(&format!(
                "version {version} is not supported (dlbridge reads versions {} to {})",
                supported.start(),
                supported.end()
            )));
        }
        Ok(version)
    }

    fn ints(&self, value: &Bound<'py, PyAny>, key: &str) -> PyResult<Vec<i64>> {
        let bad = || self.malformed(&format!("'{key}' must be a tuple of ints"));
        let tuple = value.cast::<PyTuple>().map_err(|_| bad())?;
        tuple
            .iter()
            .map(|v| v.extract::<i64>().map_err(|_| bad()))
            .collect()
    }

    /// The shared fields (everything but `version` and protocol-specific keys).
    pub(crate) fn fields(&self) -> PyResult<Fields> {
        if self.get("mask")?.is_some_and(|m| !m.is_none()) {
            return Err(buffer_error(format!(
                "{}.{} has a mask (masked array), which cannot be exchanged; fill the masked values first",
                type_name(self.obj),
                self.protocol
            )));
        }
        let shape = self.ints(
            &self
                .get("shape")?
                .ok_or_else(|| self.malformed("'shape' is missing"))?,
            "shape",
        )?;
        let typestr: String = self
            .get("typestr")?
            .ok_or_else(|| self.malformed("'typestr' is missing"))?
            .extract()
            .map_err(|_| self.malformed("'typestr' must be a str"))?;
        if let Some(descr) = self.get("descr")? {
            let simple = descr.len().ok() == Some(1)
                && descr
                    .get_item(0)
                    .and_then(|f| f.get_item(0))
                    .and_then(|n| n.extract::<String>())
                    .is_ok_and(|n| n.is_empty());
            if !simple {
                return Err(buffer_error(
                    "structured dtypes (a 'descr' with fields) cannot be exchanged",
                ));
            }
        }
        let dtype = DType::from_typestr(&typestr)?;
        let itemsize = dtype.itemsize();
        let strides = match self.get("strides")? {
            Some(s) if !s.is_none() => {
                let bytes = self.ints(&s, "strides")?;
                if bytes.len() != shape.len() {
                    return Err(self.malformed(&format!(
                        "{} strides for {} dimensions",
                        bytes.len(),
                        shape.len()
                    )));
                }
                Some(element_strides(&shape, bytes.into_iter(), itemsize)?)
            }
            _ => None,
        };
        let layout = Layout::new(&shape, strides.as_deref(), itemsize)?;
        let data = self
            .get("data")?
            .ok_or_else(|| self.malformed("'data' is missing"))?;
        let Ok(tuple) = data.cast::<PyTuple>() else {
            return Err(buffer_error(format!(
                "{}.{} whose 'data' is a buffer object or None is not supported; pass the buffer itself",
                type_name(self.obj),
                self.protocol
            )));
        };
        if tuple.len() != 2 {
            return Err(self.malformed("'data' must be a tuple (address, readonly)"));
        }
        let address: usize = tuple
            .get_item(0)?
            .extract()
            .map_err(|_| self.malformed("the data address must be a non-negative int"))?;
        let readonly = tuple.get_item(1)?.is_truthy()?;
        if address == 0 && layout.size() > 0 {
            return Err(Error::InvalidLayout(format!(
                "{}.{} data address is NULL for a non-empty array",
                type_name(self.obj),
                self.protocol
            ))
            .into());
        }
        Ok(Fields {
            dtype,
            layout,
            address,
            readonly,
        })
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}
