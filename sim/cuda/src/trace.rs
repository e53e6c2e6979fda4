//! `NCCL_SMOKE_SIM_CUDA_TRACE=1`: the driver says on stderr which entry points and export
//! tables it was asked for and lacks (and a few notable calls), one line each.

use std::sync::OnceLock;

pub const TRACE_ENV: &str = "NCCL_SMOKE_SIM_CUDA_TRACE";

/// 0: off; 1: what is missing; 2: also every entry point handed out.
fn level() -> u32 {
    static LEVEL: OnceLock<u32> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        crate::config::var(TRACE_ENV)
            .map(|v| v.trim().parse().unwrap_or(1))
            .unwrap_or(0)
    })
}

pub fn enabled() -> bool {
    level() >= 1
}

/// Writes `msg()` to stderr at trace level 2.
pub fn verbose(msg: impl FnOnce() -> String) {
    if level() >= 2 {
        eprintln!("nccl-smoke sim-cuda[{}]: {}", std::process::id(), msg());
    }
}

/// Writes `msg()` to stderr when tracing is on.
pub fn log(msg: impl FnOnce() -> String) {
    if enabled() {
        eprintln!("nccl-smoke sim-cuda[{}]: {}", std::process::id(), msg());
    }
}
