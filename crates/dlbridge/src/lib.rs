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
//! # The API
//!
//! - At the root: [`Tensor`] and what describes it ([`DType`], [`Device`], [`Layout`],
//!   [`Order`]), the typed element types ([`Element`]), the DLPack managed tensor
//!   ([`ManagedTensor`], exported with a [`Flavor`]), and the one error type ([`Error`]).
//! - [`arrow`]: the Arrow C data and device interfaces, in ([`arrow::tensor_from_arrow`]) and
//!   out ([`arrow::export`]), streams included; with the `arrow-rs` feature, `arrow::arrow_rs`
//!   connects tensors to arrow-rs arrays and record batches, and to Arrow C Device arrays.
//! - [`cuda`]: CUDA transfers, streams and events, and CUDA IPC, with the driver loaded at run
//!   time.
//! - [`copy`]: [`copy::copy_into`], a copy into an existing tensor.
//! - [`ffi`]: the raw C ABI: the `#[repr(C)]` DLPack and Arrow structs, and the DLPack C
//!   exchange API table, for code that hands them to C or takes them from C.
//! - `shared` (Linux): a tensor in shared memory another process can map, described to it by a
//!   [`Description`] (as a CUDA IPC handle is).
//! - `python` (feature `pyo3`): `Tensor` as a PyO3 argument and return value, the argument
//!   types `Import`, `HostTensor` and `WritableTensor`, and `register`, which adds the
//!   `dlbridge` module's classes and functions to any module.
//!
//! # Typed access
//!
//! A host tensor is read as Rust values of an [`Element`] type matching its dtype:
//! [`Tensor::as_slice`] (C-contiguous data), [`Tensor::iter`] (any strides, in row-major
//! order), [`Tensor::to_vec`] (a copy, any strides), and with the `ndarray` feature
//! `Tensor::as_array` (an `ndarray::ArrayViewD`, any strides, negative ones included). Each
//! checks the device, dtype, item size and alignment and returns an [`Error`] on a mismatch:
//! never a read past the memory or a misaligned one.
//!
//! Mutable access ([`Tensor::as_slice_mut`], `Tensor::as_array_mut`) takes `&mut Tensor` and is
//! given only when nothing else can see the memory ([`Tensor::check_exclusive`]): the tensor
//! is writable, the memory is a copy made for it ([`Tensor::is_copied`]: [`Tensor::from_vec`],
//! [`Tensor::zeros`], copies, an owned `ndarray` array) and no clone, view or export of it is
//! alive. `Clone` shares the memory, so a cloned tensor is not mutable until its clones are
//! dropped. Memory imported without a copy still belongs to its producer, who can read and
//! write it: writing there goes through the `unsafe` [`Tensor::as_slice_mut_unchecked`],
//! whose caller vouches that nothing else touches the elements meanwhile.
//!
//! # Lifetimes: who owns the memory
//!
//! A `Tensor` owns its memory through its [`Owner`], shared by all clones, views and exports:
//! for a vector or array moved in, the vector; for an imported DLPack tensor, the producer's
//! deleter; for an object imported from Python, the capsule, buffer view or object reference
//! that keeps the producer's array alive. The memory is released when the last of them is
//! dropped, on whatever thread that happens (references to Python objects are released with
//! the GIL taken for the purpose). Views (`as_slice`, `iter`, `as_array`) borrow the `Tensor`
//! and cannot outlive it; a `Tensor` itself may outlive the Python call it came from.
//!
//! # Threads
//!
//! `Tensor` is `Send` and `Sync`: the pointer it holds is only a description, and its owner is
//! `Send + Sync`. Clones can be sent to other threads and read there, and the owner is
//! released on whichever thread drops the last of them. Reading a tensor with the GIL
//! released is the way to do long work on it from a PyO3 function (see below); while the GIL
//! is released, and at any time on a free-threaded interpreter, other Python threads run, and
//! one that writes the producer's array (a NumPy array passed in, say) races with the read
//! (see [`Tensor::as_slice`]). Import with a copy (`Import { copy: Some(true), .. }`) when the
//! caller might do that. No part of dlbridge relies on the GIL to guard its own state.
//!
//! # In a PyO3 extension
//!
//! With the `pyo3` feature (pyo3 0.30), a `#[pyfunction]` takes any array as a `Tensor` — from
//! NumPy, PyTorch, JAX, PyArrow, polars, CuPy, dpnp and anything else that speaks DLPack, the
//! Arrow PyCapsule interface, the buffer protocol or the array interfaces — imported as
//! `dlbridge.from_dlpack(x)` imports it, zero-copy when possible. A returned `Tensor` is a
//! Python `Tensor` object that every consumer takes zero-copy (`numpy.from_dlpack`,
//! `torch.from_dlpack`, `pyarrow.array`, the buffer protocol). A [`dlbridge::Error`](Error)
//! becomes the Python exception its [`ErrorKind`] names (BufferError, ValueError, TypeError),
//! with the way out in the message.
//!
//! ```no_run
//! # #[cfg(feature = "pyo3")]
//! # mod example {
//! use dlbridge::Tensor;
//! use pyo3::prelude::*;
//!
//! /// The sum of a float32 array from any library.
//! #[pyfunction]
//! fn total(x: Tensor) -> PyResult<f64> {
//!     Ok(x.as_slice::<f32>()?.iter().map(|&v| v as f64).sum())
//! }
//!
//! /// 0, 1, ..., n - 1 as float32, for numpy.from_dlpack or torch.from_dlpack.
//! #[pyfunction]
//! fn ramp(n: usize) -> PyResult<Tensor> {
//!     Ok(Tensor::from_vec((0..n).map(|i| i as f32).collect(), &[n])?)
//! }
//!
//! /// The sum of any float64 array, strided or not, computed with the GIL released.
//! #[pyfunction]
//! fn strided_total(py: Python<'_>, x: Tensor) -> PyResult<f64> {
//!     Ok(py.detach(|| x.iter::<f64>().map(|values| values.sum::<f64>()))?)
//! }
//!
//! #[pymodule]
//! fn myext(m: &Bound<'_, PyModule>) -> PyResult<()> {
//!     m.add_function(wrap_pyfunction!(total, m)?)?;
//!     m.add_function(wrap_pyfunction!(ramp, m)?)?;
//!     m.add_function(wrap_pyfunction!(strided_total, m)?)?;
//!     // Optional: the dlbridge module's own classes and functions (Tensor, from_dlpack...).
//!     dlbridge::python::register(m)
//! }
//! # }
//! ```
//!
//! The extension does not need the `dlbridge` Python package: the `Tensor` class is compiled
//! into it (Python types belong to the binary that creates them, so the extension's `Tensor`
//! and the package's are two types with one implementation, which import each other through
//! DLPack, zero-copy). Other choices of `device=`, `copy=` and write access are argument
//! types: `python::HostTensor` (copied to the host when elsewhere), `python::WritableTensor`
//! (the caller's own writable memory, never a copy) and `python::Import` (any combination).
//!
//! # Features
//!
//! | feature | default | what |
//! |---|---|---|
//! | `cuda` | yes | CUDA transfers; the driver is loaded at run time, nothing links CUDA |
//! | `pyo3` | no | the Python face (pyo3 0.30; the extension picks its own Python ABI) |
//! | `ndarray` | no | `ndarray` views of host tensors and `Tensor::from(ndarray::Array)` (ndarray 0.17) |
//! | `arrow-rs` | no | `arrow::arrow_rs`: tensors to and from `arrow_array` arrays, record batch columns and Arrow C Device arrays (arrow-rs 60, Rust 1.88) |
//!
//! Each optional dependency is re-exported under its feature (`dlbridge::pyo3`,
//! `dlbridge::ndarray`, `dlbridge::arrow_array`, `dlbridge::arrow_schema`), so a user can name
//! the very version dlbridge was built with instead of matching it by hand.
//!
//! The minimum supported Rust version is 1.87 (1.88 with the `arrow-rs` feature).

#![deny(missing_docs)]
// docs.rs sets `docsrs` (so does CI's docs.rs-like build): each feature-gated item then says
// which feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod arrow;
pub mod copy;
pub mod cuda;
mod device;
mod dims;
mod dtype;
mod error;
mod export;
pub mod ffi;
mod layout;
mod managed;
#[cfg(feature = "ndarray")]
mod ndarray_interop;
#[cfg(feature = "pyo3")]
pub mod python;
#[cfg(target_os = "linux")]
pub mod shared;
mod tensor;
mod wire;

pub use copy::Order;
pub use device::{Device, DeviceType};
pub use dtype::{DType, TypeCode};
pub use error::{Error, ErrorKind, Result};
pub use export::Flavor;
pub use layout::Layout;
pub use managed::ManagedTensor;
pub use tensor::{Element, Elements, Owner, Tensor, TensorFlags};
pub use wire::Description;

/// The `pyo3` crate dlbridge is built with.
#[cfg(feature = "pyo3")]
pub use pyo3;

/// The `ndarray` crate dlbridge is built with.
#[cfg(feature = "ndarray")]
pub use ndarray;

/// The `arrow-array` crate dlbridge is built with.
#[cfg(feature = "arrow-rs")]
pub use arrow_array;

/// The `arrow-schema` crate dlbridge is built with.
#[cfg(feature = "arrow-rs")]
pub use arrow_schema;

/// The crate README's examples, compiled and run as doctests (`cargo test --doc`), so that
/// the first code a reader meets stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
