//! Building the Arrow C structs dlbridge produces: schemas and arrays with their own `release`
//! callbacks and private data.

use std::ffi::{CString, c_void};
use std::ptr;

use crate::device::{Device, DeviceType};
use crate::error::{Error, Result};
use crate::ffi::arrow::{ArrowArray, ArrowSchema};

use super::owned::{Owned, OwnedArray, OwnedSchema};
use crate::tensor::Owner;

/// A field to export: format, name, metadata (encoded per the spec), flags and children.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaSpec {
    /// The format string.
    pub format: String,
    /// The field name.
    pub name: String,
    /// Key/value metadata in order (empty = `metadata` NULL).
    pub metadata: Vec<(String, String)>,
    /// `FLAG_*` bits.
    pub flags: i64,
    /// Child fields.
    pub children: Vec<SchemaSpec>,
}

struct SchemaPrivate {
    _format: CString,
    _name: CString,
    _metadata: Option<Box<[u8]>>,
    children: Box<[*mut ArrowSchema]>,
}

/// Encode metadata pairs: int32 count, then int32 length + bytes for each key and value.
pub(super) fn encode_metadata(pairs: &[(String, String)]) -> Result<Option<Box<[u8]>>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let len32 = |n: usize| {
        i32::try_from(n).map_err(|_| Error::InvalidArgument("metadata too large".to_owned()))
    };
    let mut out = Vec::new();
    out.extend_from_slice(&len32(pairs.len())?.to_ne_bytes());
    for (k, v) in pairs {
        for s in [k, v] {
            out.extend_from_slice(&len32(s.len())?.to_ne_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
    Ok(Some(out.into_boxed_slice()))
}

fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::InvalidArgument(format!("{s:?} contains a NUL byte")))
}

unsafe extern "C" fn release_schema(schema: *mut ArrowSchema) {
    // SAFETY: called by the owner of a live schema built by `SchemaSpec::export`, whose
    // private_data is a SchemaPrivate and whose children are boxes we allocated. Each child is
    // released unless a consumer moved it out (release NULL), then its box is freed.
    unsafe {
        let Some(schema) = schema.as_mut() else {
            return;
        };
        if schema.release.is_none() {
            return;
        }
        let private = Box::from_raw(schema.private_data.cast::<SchemaPrivate>());
        for &child in private.children.iter() {
            if let Some(release) = (*child).release {
                release(child);
            }
            drop(Box::from_raw(child));
        }
        schema.private_data = ptr::null_mut();
        schema.release = None;
    }
}

impl SchemaSpec {
    /// A field without metadata or children.
    pub fn new(format: impl Into<String>, name: impl Into<String>, flags: i64) -> Self {
        Self {
            format: format.into(),
            name: name.into(),
            flags,
            ..Self::default()
        }
    }

    /// Build the C struct (owning its strings and children; `release` frees them).
    pub fn export(&self) -> Result<OwnedSchema> {
        let children: Vec<OwnedSchema> = self
            .children
            .iter()
            .map(SchemaSpec::export)
            .collect::<Result<_>>()?;
        let format = c_string(&self.format)?;
        let name = c_string(&self.name)?;
        let metadata = encode_metadata(&self.metadata)?;
        let children: Box<[*mut ArrowSchema]> = children
            .into_iter()
            .map(OwnedSchema::into_raw_box)
            .collect();
        let mut private = Box::new(SchemaPrivate {
            _format: format,
            _name: name,
            _metadata: metadata,
            children,
        });
        let schema = ArrowSchema {
            format: private._format.as_ptr(),
            name: private._name.as_ptr(),
            metadata: private
                ._metadata
                .as_ref()
                .map_or(ptr::null(), |m| m.as_ptr().cast()),
            flags: self.flags,
            n_children: private.children.len() as i64,
            children: if private.children.is_empty() {
                ptr::null_mut()
            } else {
                private.children.as_mut_ptr()
            },
            dictionary: ptr::null_mut(),
            release: Some(release_schema),
            private_data: Box::into_raw(private).cast(),
        };
        Ok(Owned(Box::new(schema)))
    }
}

/// An array to export: its buffers (addresses the producer keeps valid through `owner`) and
/// children. `null_count` is 0 and buffers are CPU or device memory of the export's device.
#[derive(Debug, Default)]
pub struct ArraySpec {
    /// Number of items.
    pub length: i64,
    /// Number of nulls (dlbridge exports none: 0).
    pub null_count: i64,
    /// Items to skip at the start of the buffers.
    pub offset: i64,
    /// Buffer addresses (NULL for an absent validity bitmap or an empty buffer).
    pub buffers: Vec<*const c_void>,
    /// Child arrays.
    pub children: Vec<ArraySpec>,
    /// Keeps the buffers alive until the array (or a child moved out of it) is released.
    pub owner: Option<Owner>,
}

struct ArrayPrivate {
    buffers: Box<[*const c_void]>,
    children: Box<[*mut ArrowArray]>,
    _owner: Option<Owner>,
}

unsafe extern "C" fn release_array(array: *mut ArrowArray) {
    // SAFETY: called by the owner of a live array built by `ArraySpec::export`, whose
    // private_data is an ArrayPrivate and whose children are boxes we allocated.
    unsafe {
        let Some(array) = array.as_mut() else {
            return;
        };
        if array.release.is_none() {
            return;
        }
        let private = Box::from_raw(array.private_data.cast::<ArrayPrivate>());
        for &child in private.children.iter() {
            if let Some(release) = (*child).release {
                release(child);
            }
            drop(Box::from_raw(child));
        }
        array.private_data = ptr::null_mut();
        array.release = None;
    }
}

impl ArraySpec {
    /// Build the C struct for memory on `device` (CPU is published with Arrow's id -1).
    ///
    /// # Safety
    /// A consumer reads the buffers as the schema paired with this array describes them: every
    /// address in `buffers` (and in the children's) must be NULL where the format allows it or
    /// point to memory of `device` holding at least the bytes that format, `offset` and `length`
    /// imply, valid until `owner` is dropped.
    pub unsafe fn export(self, device: Device) -> OwnedArray {
        let device_id = if device.kind == DeviceType::CPU {
            -1
        } else {
            i64::from(device.id)
        };
        OwnedArray::on_device(self.export_array().into_inner(), device.kind.0, device_id)
    }

    /// Build the plain `ArrowArray` (owning its children; `release` frees them).
    fn export_array(self) -> Owned<ArrowArray> {
        let children: Box<[*mut ArrowArray]> = self
            .children
            .into_iter()
            .map(|c| c.export_array().into_raw_box())
            .collect();
        let mut private = Box::new(ArrayPrivate {
            buffers: self.buffers.into_boxed_slice(),
            children,
            _owner: self.owner,
        });
        let array = ArrowArray {
            length: self.length,
            null_count: self.null_count,
            offset: self.offset,
            n_buffers: private.buffers.len() as i64,
            n_children: private.children.len() as i64,
            buffers: if private.buffers.is_empty() {
                ptr::null_mut()
            } else {
                private.buffers.as_mut_ptr()
            },
            children: if private.children.is_empty() {
                ptr::null_mut()
            } else {
                private.children.as_mut_ptr()
            },
            dictionary: ptr::null_mut(),
            release: Some(release_array),
            private_data: Box::into_raw(private).cast(),
        };
        Owned(Box::new(array))
    }
}
