//! The C ABI mirrors: `#[repr(C)]` structs and constants of DLPack and the Arrow C interfaces,
//! exactly as the specifications lay them out. Nothing here reads producer memory or names a
//! higher layer; the code that reads these structs lives with the protocol it serves
//! ([`ManagedTensor`](crate::ManagedTensor), [`Tensor::export`](crate::Tensor::export),
//! [`crate::arrow`]).

pub mod arrow;
pub mod dlpack;
