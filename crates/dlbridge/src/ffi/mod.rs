//! The C ABI layer: struct mirrors and the code that reads foreign structs. All `unsafe` that
//! touches producer memory lives here.

pub mod arrow;
pub mod dlpack;
