//! The one error type of dlbridge. Every variant knows which Python exception it becomes.
//!
//! Messages describe the data and what it needs (a copy, host memory, a newer DLPack version),
//! in no particular API's words: the Python layer adds the keyword that gets it (`copy=True`,
//! `device="cpu"`, `max_version=...`) when it raises.

use std::str::FromStr;

use crate::device::{Device, DeviceType};

/// Which Python exception an [`Error`] maps to.
///
/// Non-exhaustive: a later version may map some errors to another exception, so a `match`
/// outside this crate needs a wildcard arm; without one it does not compile:
///
/// ```compile_fail
/// fn exception(kind: dlbridge::ErrorKind) -> &'static str {
///     match kind {
///         dlbridge::ErrorKind::Buffer => "BufferError",
///         dlbridge::ErrorKind::Value => "ValueError",
///         dlbridge::ErrorKind::Type => "TypeError",
///     }
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Valid protocol, but the data cannot be exchanged as asked: `BufferError`.
    Buffer,
    /// A bad argument value from the caller: `ValueError`.
    Value,
    /// An argument of the wrong type, such as an array of another dtype than the Rust type a
    /// view asks for: `TypeError`.
    Type,
}

/// Everything that can go wrong while importing, exporting or copying a tensor.
///
/// With the `pyo3` feature, `PyErr: From<Error>`: `?` in a PyO3 function raises the exception
/// [`Error::kind`] names, with the way out in Python's words added to the message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A versioned managed tensor of a major version this library does not speak.
    #[error("DLPack version {major}.{minor} is not supported (this consumer speaks 1.x)")]
    UnsupportedVersion {
        /// Major version found.
        major: u32,
        /// Minor version found.
        minor: u32,
    },
    /// A dtype that DLPack (as known here) cannot describe or that is invalid.
    #[error("unsupported dtype (code={code}, bits={bits}, lanes={lanes}): {reason}")]
    UnsupportedDType {
        /// DLPack type code.
        code: u8,
        /// Bits per lane.
        bits: u8,
        /// Lanes.
        lanes: u16,
        /// Why it was refused.
        reason: String,
    },
    /// The consumer's negotiated DLPack version predates the dtype.
    #[error("dtype {dtype} needs DLPack 1.{needed_minor} but the consumer asked for {asked}")]
    DTypeNeedsNewerVersion {
        /// dtype name.
        dtype: String,
        /// Minor version of major 1 that introduced it.
        needed_minor: u32,
        /// What the consumer asked for, as text ("a legacy capsule", "DLPack 1.0").
        asked: String,
    },
    /// A buffer-protocol format or typestr without a DLPack equivalent.
    #[error("unsupported element format {format:?}: {reason}")]
    UnsupportedFormat {
        /// The format string.
        format: String,
        /// Why it was refused.
        reason: String,
    },
    /// Arrow data with nulls, which DLPack has no way to mark.
    #[error(
        "the Arrow array (format {format:?}) has {count} {what}, which DLPack cannot represent (it has no validity bitmap)"
    )]
    Nulls {
        /// The Arrow format string of the array (or of the tensor cells' values).
        format: String,
        /// How many.
        count: i64,
        /// "null value(s)" or "null cell(s)".
        what: &'static str,
    },
    /// Non-native byte order (DLPack is native-endian only).
    #[error("{what} has non-native byte order; DLPack data is always native-endian")]
    NonNativeByteOrder {
        /// What was found.
        what: String,
    },
    /// Shape, strides or offsets that cannot describe real memory.
    #[error("invalid layout: {0}")]
    InvalidLayout(String),
    /// A read-only tensor asked for through a legacy capsule, which cannot carry the flag.
    #[error("the tensor is read-only and a legacy DLPack capsule cannot say so")]
    ReadOnlyLegacy,
    /// A write access was requested on read-only memory.
    #[error("the tensor is read-only")]
    ReadOnly,
    /// Mutable access to memory that others may also see: a tensor sharing its owner with
    /// clones, views or exports, or memory that is not the tensor's own copy.
    #[error("the memory may be aliased ({reason}), so it cannot be borrowed mutably")]
    Aliased {
        /// Who else may see the memory.
        reason: String,
    },
    /// A typed view that needs C-contiguous memory ([`Tensor::as_slice`] and the like) of a
    /// tensor that is not: make it contiguous with [`Tensor::copy`] first.
    ///
    /// [`Tensor::as_slice`]: crate::Tensor::as_slice
    /// [`Tensor::copy`]: crate::Tensor::copy
    #[error("the tensor is not C-contiguous (shape {shape:?}, strides {strides:?})")]
    NotContiguous {
        /// The tensor's shape.
        shape: Vec<i64>,
        /// Its strides, in elements.
        strides: Vec<i64>,
    },
    /// A typed view of data whose first element is not aligned for the Rust type: a copy is
    /// aligned.
    #[error("the data is not aligned to {align} bytes, as a Rust {type_name} needs")]
    Misaligned {
        /// The alignment the type needs.
        align: usize,
        /// The Rust type asked for.
        type_name: &'static str,
    },
    /// A typed view asked for a Rust type whose dtype is not the tensor's.
    #[error("the tensor holds {held} but {asked} was asked for")]
    WrongDType {
        /// The tensor's dtype.
        held: String,
        /// The dtype of the Rust type asked for.
        asked: String,
    },
    /// The exchange needs a copy, and the caller ruled copies out (`copy=False` in Python).
    #[error("a copy is needed ({reason}) and copying is not allowed")]
    CopyRequired {
        /// Why a copy is needed.
        reason: String,
    },
    /// The memory is not reachable from the host CPU.
    #[error("the data is on {device}, which the host CPU cannot access")]
    NotHostAccessible {
        /// Where the data is.
        device: Device,
    },
    /// A device transfer dlbridge cannot make.
    #[error("cannot move data from {from} to {to}: {reason}")]
    UnsupportedDevice {
        /// Source device.
        from: Device,
        /// Requested device.
        to: Device,
        /// Why.
        reason: String,
    },
    /// A bad argument value (device string, stream, max_version, order...).
    #[error("{0}")]
    InvalidArgument(String),
    /// Allocation failed.
    #[error("out of memory allocating {0} bytes")]
    OutOfMemory(usize),
    /// The CUDA driver cannot be used here: not installed, no device, too old, or dlbridge was
    /// built without the `cuda` feature.
    #[error(
        "CUDA is not available: {reason}; data cannot be moved to, from or between CUDA devices here"
    )]
    CudaUnavailable {
        /// Why (library not found, missing symbol, `cuInit` error...).
        reason: String,
    },
    /// A CUDA driver call failed.
    #[error("the CUDA driver call {call} failed with {name} ({code}): {message}")]
    Cuda {
        /// The driver function.
        call: &'static str,
        /// The `CUresult` code.
        code: i32,
        /// The code's name (`CUDA_ERROR_...`).
        name: String,
        /// The driver's description.
        message: String,
    },
    /// Shared memory could not be made, mapped or recognised.
    #[error("shared memory: {0}")]
    SharedMemory(String),
}

impl Error {
    /// The Python exception this error becomes.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument(_) => ErrorKind::Value,
            Error::WrongDType { .. } => ErrorKind::Type,
            _ => ErrorKind::Buffer,
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

// Parsing a device and the host check live here, not in `device`, because `Error` names
// `Device`: the value types point one way (device, then error).
impl Device {
    /// `Ok` when the host CPU can read and write the memory directly
    /// ([`is_host_accessible`](Device::is_host_accessible)); otherwise
    /// [`Error::NotHostAccessible`], which names the device. The one check before host code
    /// touches a tensor's memory.
    pub fn require_host(self) -> Result<()> {
        if self.is_host_accessible() {
            Ok(())
        } else {
            Err(Error::NotHostAccessible { device: self })
        }
    }
}

impl FromStr for Device {
    type Err = Error;

    /// Parse `"cpu"`, `"cuda"`, `"cuda:1"`, `"oneapi:0"`, `"device14:0"`.
    fn from_str(s: &str) -> Result<Self, Error> {
        let invalid = || {
            Error::InvalidArgument(format!(
                "cannot parse device {s:?}: expected a name such as \"cpu\", \"cuda\" or \"cuda:1\""
            ))
        };
        let text = s.trim().to_ascii_lowercase();
        let (name, id) = match text.split_once(':') {
            Some((n, i)) => (n.to_owned(), i.parse::<i32>().map_err(|_| invalid())?),
            None => (text.clone(), 0),
        };
        if id < 0 {
            return Err(invalid());
        }
        let kind = match DeviceType::NAMES.iter().find(|(_, n)| *n == name) {
            Some((t, _)) => *t,
            None => match name.strip_prefix("device").map(str::parse::<i32>) {
                Some(Ok(code)) if code > 0 => DeviceType(code),
                _ => return Err(invalid()),
            },
        };
        Ok(Self { kind, id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn require_host_names_the_device() {
        for host in [
            DeviceType::CPU,
            DeviceType::CUDA_HOST,
            DeviceType::CUDA_MANAGED,
        ] {
            Device::new(host, 0).require_host().unwrap();
        }
        let e = Device::new(DeviceType::CUDA, 1).require_host().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Buffer);
        assert!(e.to_string().contains("cuda:1"), "{e}");
        let e = Device::new(DeviceType(99), 0).require_host().unwrap_err();
        assert!(e.to_string().contains("device99:0"), "{e}");
    }
}
