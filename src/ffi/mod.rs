//! Every `unsafe` line of nccl-smoke lives under this folder, one module per foreign library.
//! Callers get safe functions returning `Result`s with the library's error decoded by name.

pub mod cuda;
pub mod nccl;
pub mod os;
pub mod wheel;
