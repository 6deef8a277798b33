//! dlbridge: correct, zero-copy array exchange.
//!
//! Every array that crosses dlbridge becomes a [`Tensor`]: an owned, validated description of
//! memory (device, dtype, shape, strides in elements, flags) plus the owner that keeps the memory
//! alive. Importers turn a protocol into a `Tensor`; exporters turn a `Tensor` into a protocol;
//! copies are an explicit step ([`Tensor::copy`]).
//!
//! ```
//! use dlbridge::{Flavor, Order, Tensor};
//!
//! let t = Tensor::from_vec((0..6).map(|x| x as f32).collect(), &[2, 3])?;
//! // Export as a DLPack 1.x managed tensor and import it again: zero-copy.
//! let managed = t.export(Flavor::Versioned { minor: 3 })?;
//! let back = Tensor::from_managed(managed)?;
//! assert_eq!(back.data_ptr(), t.data_ptr());
//! assert_eq!(back.as_slice::<f32>()?, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
//! let copy = back.copy(Order::F)?;
//! assert!(copy.is_f_contiguous() && copy.is_copied());
//! # Ok::<(), dlbridge::Error>(())
//! ```
//!
//! With the `pyo3` feature, [`python`] adds capsules, buffer-protocol and array-interface
//! import, so other PyO3 extensions can reuse the same importers, and pickling.
//!
//! Across processes: [`wire`] turns a tensor into one run of bytes plus a description that a
//! receiver checks before viewing bytes it was handed; `shared` (Linux) puts a tensor in a memfd
//! another process can map; [`cuda`] exports device memory through CUDA IPC.

pub mod arrow;
pub mod copy;
pub mod cuda;
pub mod device;
mod dims;
pub mod dtype;
pub mod error;
pub mod export;
pub mod ffi;
mod fixed_shape_json;
pub mod layout;
#[cfg(feature = "pyo3")]
pub mod python;
#[cfg(target_os = "linux")]
pub mod shared;
pub mod tensor;
pub mod wire;

pub use copy::Order;
pub use device::{Device, DeviceType};
pub use dtype::{DType, TypeCode};
pub use error::{Error, ErrorKind, Result};
pub use export::Flavor;
pub use ffi::managed::ManagedTensor;
pub use layout::Layout;
pub use tensor::{Element, Owner, Tensor};
