//! The C ABI mirrors: `#[repr(C)]` structs and constants of DLPack and the Arrow C interfaces,
//! exactly as the specifications lay them out. Nothing here reads producer memory or names a
//! higher layer; the code that reads these structs lives with the protocol it serves
//! ([`ManagedTensor`](crate::ManagedTensor), [`Tensor::export`](crate::Tensor::export),
//! [`crate::arrow`]).
//!
//! Stability: this is the raw C ABI, for code that passes these structs to C or receives them
//! from C. Each struct, field and constant follows its specification (`dlpack.h`, the Arrow C
//! Data, Stream and Device Data interfaces) and changes only when that specification does;
//! the safe API ([`Tensor`](crate::Tensor), [`ManagedTensor`](crate::ManagedTensor),
//! [`crate::arrow`]) is the way in and out for everything else.

pub mod arrow;
pub mod dlpack;
