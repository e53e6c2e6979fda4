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
    real_run_with(np, args, env, libs, limit_s, &Extra::default())
}

/// What a case adds to [`real_run`].
#[derive(Default)]
pub struct Extra<'a> {
    /// Variables set on one rank only: (rank, name, value).
    pub rank_env: &'a [(u32, &'a str, &'a str)],
    /// A shell command run before `mpirun`, in the same `sh -c`, which then `exec`s it (e.g.
    /// mounting a small /dev/shm), and the program that runs that shell (e.g. `unshare` into a
    /// private mount namespace).
    pub before: Option<(&'a [&'a str], &'a str)>,
}

/// [`real_run`] with per-rank variables and a command around `mpirun`.
pub fn real_run_with(
    np: u32,
    args: &[&str],
    env: &[(&str, &str)],
    libs: &Path,
    limit_s: u32,
    extra: &Extra,
) -> Output {
    let ld = match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", libs.display()),
        _ => libs.display().to_string(),
    };
    let mut all: Vec<(&str, &str)> = vec![("LD_LIBRARY_PATH", &ld)];
    all.extend_from_slice(env);
    let mut script =
        "NCCL_SMOKE_SIM_RANK=$OMPI_COMM_WORLD_RANK; export NCCL_SMOKE_SIM_RANK; ".to_string();
    for (rank, k, v) in extra.rank_env {
        script.push_str(&format!(
            "if [ \"$OMPI_COMM_WORLD_RANK\" = {rank} ]; then export {k}='{v}'; fi; "
        ));
    }
    script.push_str("exec \"$@\"");
    let once = || {
        let program = bin();
        let mut wrapped: Vec<&std::ffi::OsStr> = vec![
            "-c".as_ref(),
            script.as_ref(),
            "sh".as_ref(),
            program.as_os_str(),
        ];
        wrapped.extend(args.iter().map(|a| std::ffi::OsStr::new(*a)));
        let cmd = mpirun_command_of(Path::new("sh"), np, &wrapped, &all);
        let cmd = match extra.before {
            None => cmd,
            Some((runner, before)) => {
                let mut outer = std::process::Command::new(runner[0]);
                outer.args(&runner[1..]).args([
                    "sh",
                    "-c",
                    &format!("{before} && exec \"$@\""),
                    "sh",
                ]);
                outer.arg(cmd.get_program()).args(cmd.get_args());
                for (k, v) in cmd.get_envs() {
                    match v {
                        Some(v) => outer.env(k, v),
                        None => outer.env_remove(k),
                    };
                }
                outer
            }
        };
        bounded(cmd, limit_s)
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

/// [`lib_dir`] with the stand-in libibverbs too (`libibverbs.so` and `libibverbs.so.1`, the
/// names NCCL opens), so that NCCL's NET/IB transport finds the simulated HCAs
/// (`NCCL_SMOKE_SIM_IB_HCAS`, sim/README.md).
pub fn ib_lib_dir() -> PathBuf {
    let d = lib_dir();
    let verbs = bin().parent().unwrap().join("libsim_ibverbs.so");
    assert!(
        verbs.exists(),
        "{} missing: run `cargo build --release --workspace` first",
        verbs.display()
    );
    for name in ["libibverbs.so", "libibverbs.so.1"] {
        std::os::unix::fs::symlink(&verbs, d.join(name)).unwrap();
    }
    d
}

/// A control-plane run of one 64 KiB size on `lib` (one iteration, no warm-up), every stage
/// bounded by `timeout` seconds, the teardown by 3.
pub fn control_plane_args<'a>(lib: &'a Path, timeout: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "--backend",
        "control-plane",
        "--nccl-lib",
        lib.to_str().unwrap(),
        "-b",
        "64K",
        "-e",
        "64K",
        "-n",
        "1",
        "-w",
        "0",
        "--timeout",
        timeout,
        "--stage-timeout",
        "finalize=3",
    ]
}

/// Every channel through the network, on the simulated HCA `mlx5_0`: P2P and SHM off.
pub const NET_ONLY: [(&str, &str); 3] = [
    ("NCCL_P2P_DISABLE", "1"),
    ("NCCL_SHM_DISABLE", "1"),
    ("NCCL_IB_HCA", "mlx5_0"),
];

/// An ordinary run (`nccl-smoke run --nccl-lib`) on `lib` up to 8 KiB, every stage bounded by
/// 20 seconds: on simulated GPUs it fails at verify unless something fails first.
pub fn ordinary_args(lib: &Path) -> Vec<&str> {
    vec![
        "run",
        "--nccl-lib",
        lib.to_str().unwrap(),
        "-e",
        "8K",
        "--timeout",
        "20",
    ]
}
