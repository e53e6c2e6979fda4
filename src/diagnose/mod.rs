//! From symptoms to causes: which sub-step of "connect" failed, and why, from NCCL's own words.

pub mod classify;
pub mod explain;
