//! `nccl-smoke compare BEFORE AFTER`

use crate::bench::sweep;
use crate::console;
use crate::report::compare;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The first run: a results file (`run --json`), or nccl-tests output (its text log or
    /// its `-J` JSON file), e.g. before a driver upgrade. A log holding the same sweep several
    /// times (`-N` cycles, logs put together) gives each size several repeats.
    pub before: PathBuf,
    /// The second run, e.g. after it; any of the same kinds of file.
    pub after: PathBuf,
    /// Percent of bus bandwidth a size may lose before it counts as regressed.
    #[arg(long, default_value = "5", value_parser = threshold)]
    pub threshold: f64,
    /// Sizes below this are shown but not judged (latency-bound: their bandwidth is noise).
    /// Accepts the size suffixes of -b/-e.
    #[arg(long, default_value = "1M", value_parser = sweep::parse_size)]
    pub min_bytes: usize,
    /// Also draw bus bandwidth over size, both runs, as an SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// The nccl-tests program a text log comes from, when the log does not say (nccl-tests
    /// before 2.14) and its file name does not either: `all_reduce_perf`, `alltoall_perf`,
    /// `sendrecv_perf`, … (or nccl-smoke's name: `all_reduce`, `all_to_all`, `send_recv_ring`).
    #[arg(long, value_name = "PROGRAM")]
    pub nccl_tests_pattern: Option<String>,
    /// Compare a SIMULATED run with a GPU run (e.g. a nccl-tests log) anyway: the rows
    /// match, the verdict says nothing about the hardware.
    #[arg(long)]
    pub mixed_backends: bool,
    /// Confidence of the interval each size is judged with, percent. 95 needs 4 repeats a
    /// side; 90 needs 3.
    #[arg(long, default_value = "95", value_parser = confidence)]
    pub confidence: f64,
}

fn confidence(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(c) if (50.0..100.0).contains(&c) => Ok(c / 100.0),
        _ => Err(format!("'{s}' is no confidence from 50 to 99.9 (percent)")),
    }
}

fn threshold(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(t) if t.is_finite() && (0.0..100.0).contains(&t) => Ok(t),
        _ => Err(format!("'{s}' is no percentage between 0 and 100")),
    }
}

/// Runs `nccl-smoke compare`; returns its exit code.
pub fn compare(args: &CompareArgs) -> u8 {
    let inputs = console::compare::Inputs {
        before: &args.before,
        after: &args.after,
        nccl_tests_pattern: args.nccl_tests_pattern.as_deref(),
        plot: args.plot.as_deref(),
    };
    let opts = compare::Options {
        threshold_pct: args.threshold,
        min_bytes: args.min_bytes,
        mixed_backends: args.mixed_backends,
        level: args.confidence,
    };
    console::compare::run(&inputs, &opts)
}
