//! Against the real libnccl.so.2 of the nvidia-nccl-cu12 wheel, on a machine without a GPU
//! or a CUDA driver: the library loads (its version and path are reported), and the run fails
//! at the driver stage, on every rank, without a panic.

mod common;
use common::*;

#[test]
fn real_library_version_and_path_are_reported() {
    let lib = wheel_nccl();
    let o = run1(&["run", "--nccl-lib", lib.to_str().unwrap()], &[]);
    let t = text(&o);
    assert!(t.contains("# nccl: 2.19.3 ("), "{t}");
    let canon = std::fs::canonicalize(&lib).unwrap();
    assert!(t.contains(&canon.display().to_string()), "{t}");
    assert!(t.contains("non-blocking init yes"), "{t}");
    assert!(!t.contains("SIMULATED"), "{t}");
}

#[test]
fn no_driver_fails_at_driver_stage_on_every_rank() {
    let lib = wheel_nccl();
    let o = mpirun(2, &["run", "--nccl-lib", lib.to_str().unwrap()], &[], 120);
    let t = text(&o);
    assert_eq!(code(&o), 12, "{t}");
    for rank in 0..2 {
        let line = t
            .lines()
            .find(|l| l.starts_with(&format!("FAIL at driver on rank {rank} ")))
            .unwrap_or_else(|| panic!("no driver verdict for rank {rank}:\n{t}"));
        assert!(line.contains("libcuda.so.1"), "{line}");
        // NCCL's own words, from ncclGetLastError, corroborate the missing driver.
        assert!(line.contains("NCCL's own init agrees: Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'"), "{line}");
    }
    assert!(!t.contains("panicked"), "{t}");
}

#[test]
fn missing_library_fails_at_nccl_load_naming_the_path() {
    let o = mpirun(
        2,
        &["run", "--nccl-lib", "/nonexistent/libnccl.so.2"],
        &[],
        120,
    );
    let t = text(&o);
    assert_eq!(code(&o), 11, "{t}");
    assert!(t.contains("FAIL at nccl-load on rank 0"), "{t}");
    assert!(t.contains("/nonexistent/libnccl.so.2"), "{t}");
    assert!(!t.contains("panicked"), "{t}");
}
