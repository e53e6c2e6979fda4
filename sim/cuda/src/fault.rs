//! Driver-level fault injection (`NCCL_SMOKE_SIM_FAULT`), parsed once per process.

use crate::error::{CUDA_ERROR_INVALID_VALUE, CUresult, CuResult};
use nccl_smoke_fault::{FaultSet, Kind, SpecError, Where};
use std::sync::OnceLock;

fn faults() -> &'static Result<FaultSet, SpecError> {
    static FAULTS: OnceLock<Result<FaultSet, SpecError>> = OnceLock::new();
    FAULTS.get_or_init(|| {
        let set = FaultSet::from_env();
        if let Err(e) = &set {
            eprintln!("nccl-smoke simulated CUDA driver: {e}");
        }
        set
    })
}

fn rank() -> Option<u32> {
    static RANK: OnceLock<Option<u32>> = OnceLock::new();
    *RANK.get_or_init(nccl_smoke_fault::rank_from_env)
}

/// `Err(CUDA_ERROR_INVALID_VALUE)` when the fault spec does not parse (reported once).
pub fn spec_ok() -> CuResult {
    match faults() {
        Ok(_) => Ok(()),
        Err(_) => Err(CUDA_ERROR_INVALID_VALUE),
    }
}

/// What a fault of `kind` does at a place whose error is `error`.
pub fn apply(kind: Kind, error: CUresult) -> CuResult {
    match kind {
        Kind::Error => Err(error),
        Kind::Hang => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        Kind::Crash => std::process::abort(),
        // Meaningless in the driver: ignored.
        Kind::Slow(_) | Kind::Corrupt | Kind::Data { .. } => Ok(()),
    }
}

/// Strikes the fault injected at `at` for this rank, if any.
pub fn strike(at: Where, error: CUresult) -> CuResult {
    match faults() {
        Err(_) => Err(CUDA_ERROR_INVALID_VALUE),
        Ok(set) => match set.find(at, rank()) {
            Some(f) => apply(f.kind, error),
            None => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::*;

    #[test]
    fn kinds_map_to_results() {
        assert_eq!(
            apply(Kind::Error, CUDA_ERROR_NO_DEVICE),
            Err(CUDA_ERROR_NO_DEVICE)
        );
        assert_eq!(apply(Kind::Slow(2.0), CUDA_ERROR_NO_DEVICE), Ok(()));
        assert_eq!(apply(Kind::Corrupt, CUDA_ERROR_OUT_OF_MEMORY), Ok(()));
    }
}
