//! The run engine: one rank's supervisor and worker, the status line between ranks, and rank
//! 0's results file. `cli` builds a [`Plan`] and hands it here.

pub mod env;
pub mod libs;
pub mod plan;

pub use plan::{Plan, Settings};
