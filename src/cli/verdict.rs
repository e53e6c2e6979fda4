//! `nccl-smoke verdict FILE`: a results file's verdict line, and its exit code as this
//! process's own — for scripts and batch jobs whose launcher's status is not the verdict (a
//! Slurm step under `--mpi=pmix` ends with SIGKILL when one rank fails).

use clap::Args;
use std::path::PathBuf;

pub use crate::console::verdict::Field;

#[derive(Args, Debug)]
pub struct VerdictArgs {
    /// A results file written by `nccl-smoke run --json`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// What to print: the verdict's line, its status (PASS, FAIL, UNVERIFIED, INCOMPLETE,
    /// CANCELLED, ...), the stage it failed at (nothing when none), or its exit code; e.g. for
    /// a node label or a drain reason.
    #[arg(long, value_enum, default_value = "line")]
    pub field: Field,
}

pub fn verdict(args: &VerdictArgs) -> u8 {
    crate::console::verdict::run(&args.file, args.field)
}
