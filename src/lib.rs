//! nccl-smoke: does NCCL work across a job's ranks, how fast, and if not, which step broke,
//! on which rank and host, and why.
//!
//! Layers, imports pointing down only:
//! `cli` → `report` / `diagnose` → `bench` → `patterns` → `comm` → `ffi` / `bootstrap`,
//! with `stage`, `error`, `data` and `progress` as leaves every layer may use.

// A `Failure` is returned once per process, on the way out; boxing it would buy nothing.
#![allow(clippy::result_large_err)]

pub mod bench;
pub mod bootstrap;
pub mod cli;
pub mod comm;
pub mod data;
pub mod diagnose;
pub mod error;
pub mod ffi;
pub mod patterns;
pub mod progress;
pub mod report;
pub mod run;
pub mod stage;
