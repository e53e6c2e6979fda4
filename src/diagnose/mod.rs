//! From symptoms to causes: which sub-step of "connect" failed, and why, from NCCL's own
//! words and from probes that repeat the step outside NCCL.

pub mod causes;
pub mod classify;
pub mod consistency;
pub mod doctor;
pub mod explain;
pub mod node_setup;
pub mod preflight;
pub mod probe;
pub mod ras;
