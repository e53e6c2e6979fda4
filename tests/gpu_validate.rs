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
