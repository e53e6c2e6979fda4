//! scripts/gpu-validate.sh on a machine without GPUs: each missing piece is named with its own
//! exit code. A stand-in `nvidia-smi` (a script listing one GPU) gets it past the driver check,
//! so that the library check and nccl-smoke's own failure (the driver stage, on this GPU-less
//! machine) are reached too. The comparison with nccl-tests itself needs a GPU machine.

mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

fn script(out: &std::path::Path, path: &str, env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new("bash");
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/gpu-validate.sh"
    ))
    .arg(out)
    .env("BIN", bin())
    .env("PATH", path)
    .env_remove("NCCL_SMOKE_NCCL_LIB")
    .env_remove("NCCL_TESTS_SRC");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = bounded(cmd, 120);
    (code(&o), text(&o))
}

#[test]
fn without_a_gpu_it_says_what_it_needs() {
    let dir = scratch("gpu-validate");
    let path = std::env::var("PATH").unwrap_or_default();
    let (rc, t) = script(&dir.join("out"), &path, &[]);
    assert_eq!(rc, 40, "{t}");
    assert!(
        t.contains("no NVIDIA driver here: nvidia-smi is not on PATH"),
        "{t}"
    );

    // A stand-in nvidia-smi listing one GPU.
    let fake = dir.join("bin");
    std::fs::create_dir_all(&fake).unwrap();
    let smi = fake.join("nvidia-smi");
    std::fs::write(
        &smi,
        "#!/bin/sh\ncase \"$1\" in -L) echo 'GPU 0: Stand-in (UUID: GPU-0)';; *) echo 'Stand-in, 0.0';; esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{path}", fake.display());
    let (rc, t) = script(
        &dir.join("out"),
        &path,
        &[("NCCL_SMOKE_NCCL_LIB", "/nonexistent/libnccl.so.2")],
    );
    assert_eq!(rc, 41, "{t}");
    assert!(t.contains("no libnccl.so.2"), "{t}");

    // The real libnccl of a pip wheel: nccl-smoke runs and fails at the driver stage.
    let lib = wheel_nccl().display().to_string();
    let (rc, t) = script(&dir.join("out"), &path, &[("NCCL_SMOKE_NCCL_LIB", &lib)]);
    assert_eq!(rc, 42, "{t}");
    assert!(
        t.contains("nccl-smoke exited 12"),
        "the driver stage's code:\n{t}"
    );
    assert!(t.contains("FAIL at driver"), "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The whole script on the simulation (`SMOKE_BACKEND=sim`), with stand-ins for the GPU driver's
/// `nvidia-smi` and for the three nccl-tests programs (each prints a real nccl-tests log from the
/// fixtures): nccl-smoke runs, each program runs as the launch asks (threads, then one process
/// per GPU under mpirun), and the summary has one line per pattern with both verdicts.
#[test]
fn on_the_simulation_with_stand_in_programs_it_writes_the_side_by_side_and_the_summary() {
    require_sim();
    let dir = scratch("gpu-validate-sim");
    let fake = dir.join("bin");
    let progs = dir.join("nccl-tests");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::create_dir_all(&progs).unwrap();
    let exe = |p: &std::path::Path, body: &str| {
        std::fs::write(p, body).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    exe(
        &fake.join("nvidia-smi"),
        "#!/bin/sh\ncase \"$1\" in -L) echo 'GPU 0: Stand-in (UUID: GPU-0)';; *) echo 'Stand-in, 0.0';; esac\n",
    );
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    for (prog, log) in [
        (
            "all_reduce_perf",
            "nccl-tests/all_reduce_perf.a100-16rank.txt",
        ),
        (
            "alltoall_perf",
            "nccl-tests-wild/alltoall_perf-superbench-testdata.log",
        ),
        (
            "sendrecv_perf",
            "nccl-tests-wild/sendrecv_perf-thomaslie210-a100-pcie.log",
        ),
        (
            "all_gather_perf",
            "nccl-tests-wild/all_gather_perf-superbench-testdata.log",
        ),
        (
            "reduce_scatter_perf",
            "nccl-tests-wild/reduce_scatter_perf-thomaslie210-gdr-off.log",
        ),
        (
            "broadcast_perf",
            "nccl-tests-wild/broadcast_perf-superbench-testdata.log",
        ),
        (
            "reduce_perf",
            "nccl-tests-wild/reduce_perf-superbench-testdata.log",
        ),
    ] {
        exe(
            &progs.join(prog),
            &format!("#!/bin/sh\ncat {fixtures}/{log}\n"),
        );
    }
    let path = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let progs = progs.display().to_string();
    for launch in ["threads", "mpirun"] {
        let out = dir.join(format!("out-{launch}"));
        let (rc, t) = script(
            &out,
            &path,
            &[
                ("SMOKE_BACKEND", "sim"),
                ("NCCL_TESTS_BIN", &progs),
                ("NCCL_TESTS_LAUNCH", launch),
                ("MAXBYTES", "64K"),
            ],
        );
        assert_eq!(rc, 0, "{launch}: {t}");
        let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
        let how = match launch {
            "threads" => "nccl-tests launched as one process driving 1 GPU(s) (-g 1)",
            _ => "nccl-tests launched as one process per GPU (",
        };
        assert!(summary.contains(how), "{summary}");
        for pattern in [
            "all_reduce",
            "all_to_all",
            "send_recv_ring",
            "all_gather",
            "reduce_scatter",
            "broadcast",
            "reduce",
        ] {
            let line = summary
                .lines()
                .find(|l| l.trim_start().starts_with(pattern))
                .unwrap_or_else(|| panic!("no {pattern} line:\n{summary}"));
            assert!(
                line.contains("wrong: 0 OK") && line.ends_with("PASS [SIMULATED]"),
                "{line}"
            );
            assert!(out.join(format!("side-by-side.{pattern}.txt")).exists());
        }
        // A program the nccl-tests folder lacks (no gather_perf, scatter_perf here) is said,
        // and the rest still compared.
        for pattern in ["gather", "scatter"] {
            assert!(
                summary.lines().any(|l| l.trim_start().starts_with(pattern)
                    && l.contains(&format!("nccl-tests' {pattern}_perf is not in"))),
                "{summary}"
            );
        }
        // The 8 B row is in both all_reduce tables: its time difference is given.
        assert!(
            summary
                .lines()
                .any(|l| l.trim_start().starts_with("all_reduce") && l.contains(" us (")),
            "{summary}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
