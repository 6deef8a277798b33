//! Python integration (feature `pyo3`): DLPack capsules, buffer-protocol and array-interface
//! import, buffer export, and the import dispatch behind `dlbridge.from_dlpack`.
//!
//! Other PyO3 extensions can call [`import::from_object`] to turn any array-like into a
//! [`Tensor`](crate::Tensor) and [`capsule::export`] to hand one out as a DLPack capsule.

pub mod array_interface;
pub mod arrow;
pub mod buffer;
pub mod call;
pub mod capsule;
pub mod cuda_array_interface;
pub mod errors;
pub mod exchange;
pub mod held;
pub mod import;
pub mod interface_dict;
pub mod numpy_api;
pub mod pickle;
pub mod protocols;
pub mod shared;
pub mod torch;
