//! The real libnccl of an nvidia-nccl-cu12 wheel on the stand-in CUDA driver and NVML
//! (sim/README.md, "Hosting the real libnccl"), through nccl-smoke's ordinary real path:
//! `mpirun … nccl-smoke run --nccl-lib <wheel>/libnccl.so.2` with the stand-ins first on
//! `LD_LIBRARY_PATH`, no special flag.
#![allow(dead_code)]

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Output;

/// The real libnccl.so.2 of release `version`, as scripts/setup.sh unpacks it; a release that
/// is not there fails the test, naming what to run.
pub fn wheel(version: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".deps/nccl")
        .join(version)
        .join("nvidia/nccl/lib/libnccl.so.2");
    assert!(
        p.exists(),
        "NCCL {version} is not set up ({} is missing): run scripts/setup.sh, which unpacks the \
         nvidia-nccl-cu12 wheels under .deps/nccl/<version>/",
        p.display()
    );
    p
}

/// A fresh folder holding the stand-in driver under the names NCCL opens (`libcuda.so` for
/// 2.19, `libcuda.so.1` later) and the stand-in NVML as `libnvidia-ml.so.1`.
pub fn lib_dir() -> PathBuf {
    let release = bin().parent().unwrap().to_path_buf();
    let cuda = release.join("libcuda.so");
    let nvml = release.join("libnvidia_ml.so");
    for l in [&cuda, &nvml] {
        assert!(
            l.exists(),
            "{} missing: run `cargo build --release --workspace` first",
            l.display()
        );
    }
    let d = scratch("stand-in-libs");
    for (target, name) in [
        (&cuda, "libcuda.so"),
        (&cuda, "libcuda.so.1"),
        (&nvml, "libnvidia-ml.so.1"),
    ] {
        std::os::unix::fs::symlink(target, d.join(name)).unwrap();
    }
    d
}

/// `mpirun -np N nccl-smoke <args>` over the stand-ins in `libs`, `env` set and forwarded,
/// bounded by `limit_s`. Each rank is told its rank (`NCCL_SMOKE_SIM_RANK`, from Open MPI's
/// `OMPI_COMM_WORLD_RANK`), which the stand-in driver's rank-specific faults need: on the real
/// path nccl-smoke does not announce it.
pub fn real_run(np: u32, args: &[&str], env: &[(&str, &str)], libs: &Path, limit_s: u32) -> Output {
    let ld = match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", libs.display()),
        _ => libs.display().to_string(),
    };
    let mut all: Vec<(&str, &str)> = vec![("LD_LIBRARY_PATH", &ld)];
    all.extend_from_slice(env);
    let once = || {
        let program = bin();
        let mut wrapped: Vec<&std::ffi::OsStr> = vec![
            "-c".as_ref(),
            "NCCL_SMOKE_SIM_RANK=$OMPI_COMM_WORLD_RANK exec \"$@\"".as_ref(),
            "sh".as_ref(),
            program.as_os_str(),
        ];
        wrapped.extend(args.iter().map(|a| std::ffi::OsStr::new(*a)));
        bounded(
            mpirun_command_of(Path::new("sh"), np, &wrapped, &all),
            limit_s,
        )
    };
    let first = once();
    if launcher_crashed(&first) {
        eprintln!(
            "mpirun itself crashed (Open MPI teardown); running the case once more:\n{}",
            text(&first)
        );
        return once();
    }
    first
}

/// The job's verdict line (`VERDICT: …`), the last one printed.
pub fn verdict(t: &str) -> &str {
    t.lines()
        .rev()
        .find(|l| l.starts_with("VERDICT: "))
        .unwrap_or_else(|| panic!("no verdict:\n{t}"))
}
