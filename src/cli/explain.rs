//! `nccl-smoke explain LOG…`

use crate::bench::sweep::parse_size;
use crate::console;
use crate::diagnose::explain::clean;
use crate::stage::exit;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// NCCL log files of one job: one per rank (NCCL_DEBUG_FILE=nccl.%h.%p), or a job's whole
    /// stdout/stderr; `-` reads standard input. Several files give one verdict for the job.
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    /// Print the findings and the job's verdict as JSON (schema: docs/explain-json.md).
    #[arg(long)]
    pub json: bool,
    /// Read at most this much of each file (e.g. 512M, 4G).
    #[arg(long, value_name = "SIZE", default_value = "16G")]
    pub max_bytes: String,
    /// Give up on a file (a FIFO with no writer, a slow pipe) after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub time_limit: u64,
}

pub fn explain(args: &ExplainArgs) -> u8 {
    let max_bytes = match parse_size(&args.max_bytes) {
        Ok(n) if n > 0 => n as u64,
        _ => {
            eprintln!(
                "nccl-smoke explain: --max-bytes '{}' is not a size",
                clean(&args.max_bytes)
            );
            return exit::USAGE;
        }
    };
    console::explain::run(&console::explain::Inputs {
        logs: &args.logs,
        json: args.json,
        max_bytes,
        time_limit: Duration::from_secs(args.time_limit),
    })
}
