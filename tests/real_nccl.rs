//! Against the real libnccl.so.2 of each nvidia-nccl-cu12 release set up (scripts/setup.sh:
//! 2.19.3, 2.23.4, 2.28.9, 2.32.3), on a machine without a GPU or a CUDA driver: the library loads (its
//! version, path and capabilities are reported), and the run fails at the driver stage, on
//! every rank, naming libcuda, without a panic.

mod common;
use common::*;

#[test]
fn every_release_set_up_is_tested() {
    // The releases scripts/setup.sh fetches, unless NCCL_WHEEL_VERSIONS said otherwise.
    let versions: Vec<String> = wheel_nccls().into_iter().map(|(v, _)| v).collect();
    let asked = std::env::var("NCCL_WHEEL_VERSIONS")
        .unwrap_or_else(|_| "2.19.3 2.23.4 2.28.9 2.32.3".into());
    for v in asked.split_whitespace() {
        assert!(
            versions.iter().any(|have| have == v),
            "release {v} not set up: {versions:?}"
        );
    }
}

#[test]
fn real_library_version_path_and_capabilities_are_reported() {
    for (version, lib) in wheel_nccls() {
        let o = run1(&["run", "--nccl-lib", lib.to_str().unwrap()], &[]);
        let t = text(&o);
        assert!(t.contains(&format!("# nccl: {version} (")), "{t}");
        let canon = std::fs::canonicalize(&lib).unwrap();
        assert!(t.contains(&canon.display().to_string()), "{t}");
        // Every supported release has the config API, ncclGetLastError and finalize; native
        // all-to-all came with 2.28.3.
        let native_alltoall = version
            .split('.')
            .nth(1)
            .and_then(|m| m.parse::<u32>().ok())
            >= Some(28);
        let caps = format!(
            "non-blocking init yes, ncclGetLastError yes, ncclCommFinalize yes, native ncclAlltoAll {}",
            if native_alltoall { "yes" } else { "no" }
        );
        assert!(t.contains(&caps), "{version}: want '{caps}'\n{t}");
        // Native gather and scatter came with 2.28.3 too.
        let gs = format!(
            "native ncclGather/ncclScatter {}",
            if native_alltoall { "yes" } else { "no" }
        );
        assert!(t.contains(&gs), "{version}: want '{gs}'\n{t}");
        assert!(!t.contains("SIMULATED"), "{t}");
    }
}

#[test]
fn no_driver_fails_at_driver_stage_on_every_rank() {
    for (version, lib) in wheel_nccls() {
        let o = mpirun(2, &["run", "--nccl-lib", lib.to_str().unwrap()], &[], 120);
        let t = text(&o);
        assert_eq!(code(&o), 12, "{version}: {t}");
        for rank in 0..2 {
            let line = t
                .lines()
                .find(|l| l.starts_with(&format!("FAIL at driver on rank {rank} ")))
                .unwrap_or_else(|| panic!("{version}: no driver verdict for rank {rank}:\n{t}"));
            assert!(line.contains("libcuda.so.1"), "{line}");
            // NCCL's own words, from ncclGetLastError, corroborate the missing driver.
            assert!(line.contains("NCCL's own init agrees: Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'"), "{version}: {line}");
        }
        assert!(!t.contains("panicked"), "{t}");
    }
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
