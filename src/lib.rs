//! nccl-smoke: does NCCL work across a job's ranks, how fast, and if not, which step broke,
//! on which rank and host, and why.
//!
//! Layers, imports pointing down only (`tests/layers.rs` checks it):
//! `cli` → `run` → `console` → `report` / `diagnose` → `bench` → `patterns` → `comm` → `ffi` /
//! `bootstrap`, with `stage`, `error`, `elements`, `lossless` (an f64 that survives JSON) and
//! `events` as leaves every layer may use. Within a layer and within a module, sibling modules
//! import each other in no circle (`diagnose` uses `report`, never the reverse).
//!
//! - `cli`: the command line's flags (clap) and the dispatch to each subcommand;
//! - `run`: the run engine: a validated plan, one rank's supervisor and worker, the status
//!   line between ranks, rank 0's results file and console; `nccl-smoke launch`;
//! - `console`: what the subcommands that read files (`explain`, `doctor`, `compare`,
//!   `verdict`) print, and their exit codes;
//! - `report` / `diagnose`: what rank 0 shows and keeps; from symptoms to causes;
//! - `bench`: the sweep, measurement and verification; `patterns`: what each collective sends;
//! - `comm`: the communicator; `ffi`: libnccl, the CUDA driver, the OS; `bootstrap`: who the
//!   ranks are before NCCL exists.

// A `Failure` is returned once per process, on the way out; boxing it would buy nothing.
#![allow(clippy::result_large_err)]

pub mod bench;
pub mod bootstrap;
pub mod cli;
pub mod comm;
pub mod console;
pub mod diagnose;
pub mod elements;
pub mod error;
pub mod events;
pub mod ffi;
pub mod lossless;
pub mod patterns;
pub mod report;
pub mod run;
pub mod stage;
