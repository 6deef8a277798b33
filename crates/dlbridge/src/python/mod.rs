//! Python integration (feature `pyo3`): DLPack capsules, buffer-protocol and array-interface
//! import, buffer export, and the import dispatch behind `dlbridge.from_dlpack`.
//!
//! [`register`] adds the classes and functions of the `dlbridge` Python module (`Tensor` with
//! `__dlpack__`, `from_dlpack`, ...) to any module; [`PyTensor`] is that `Tensor` class. A
//! `#[pyfunction]` takes [`Tensor`](crate::Tensor), [`HostTensor`], [`WritableTensor`] or
//! [`Import`] arguments; [`Import::extract`] turns any array-like into a
//! [`Tensor`](crate::Tensor) with the options it holds. [`capsule::export`] and
//! [`capsule::consume`] hand one out as a DLPack capsule and take one in. Everything else here
//! is internal.

pub(crate) mod array_interface;
pub(crate) mod arrow;
pub(crate) mod buffer;
pub(crate) mod call;
pub mod capsule;
pub(crate) mod cuda_array_interface;
pub(crate) mod errors;
pub(crate) mod exchange;
pub(crate) mod held;
pub(crate) mod import;
pub(crate) mod interface_dict;
mod module;
pub(crate) mod numpy_api;
pub(crate) mod paddle;
pub(crate) mod pandas;
pub(crate) mod pickle;
pub(crate) mod producers;
pub(crate) mod protocols;
pub(crate) mod raised;
pub(crate) mod shared;
pub(crate) mod torch;
pub(crate) mod torch_native;

pub use module::{HostTensor, Import, PyTensor, WritableTensor, register};
