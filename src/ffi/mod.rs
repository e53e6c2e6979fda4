//! Every `unsafe` line of nccl-smoke lives under this folder, one module per foreign library.
//! Callers get safe functions returning `Result`s with the library's error decoded by name.
// The one home of nccl-smoke's unsafe code (the workspace denies it elsewhere).
#![allow(unsafe_code)]

pub mod cuda;
pub mod ibverbs;
pub mod nccl;
pub mod os;
pub mod wheel;
