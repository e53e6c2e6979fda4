//! A node whose only NCCL is a pip wheel (`site-packages/nvidia/nccl/lib`, as PyTorch installs
//! it): without `--nccl-lib`, `doctor` and `run` find it there and say where it came from; with
//! none anywhere, the failure says where nccl-smoke looked.

mod common;

use common::{bin, code, run1, scratch, text, wheel_nccl};
use std::process::Command;

/// A virtual environment holding the real wheel's libnccl.so.2.
fn venv() -> std::path::PathBuf {
    let v = scratch("venv");
    let lib = v.join("lib/python3.11/site-packages/nvidia/nccl/lib");
    std::fs::create_dir_all(&lib).unwrap();
    // A hard link (a symbolic one would be reported under its target's path), else a copy.
    let dst = lib.join("libnccl.so.2");
    if std::fs::hard_link(wheel_nccl(), &dst).is_err() {
        std::fs::copy(wheel_nccl(), &dst).unwrap();
    }
    v
}

fn doctor(env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(bin());
    cmd.args(["doctor"])
        .env_remove("NCCL_SMOKE_NCCL_LIB")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX");
    for (k, v) in env {
        cmd.env(k, v);
    }
    text(&common::bounded(cmd, 60))
}

#[test]
fn the_active_venvs_wheel_is_found_and_named() {
    let v = venv();
    let vs = v.display().to_string();
    let t = doctor(&[("VIRTUAL_ENV", &vs)]);
    let line = t
        .lines()
        .find(|l| l.starts_with("ok    nccl "))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(
        line.contains(&format!(
            "{vs}/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"
        )),
        "{line}"
    );
    assert!(line.contains("a pip wheel's copy"), "{line}");

    // The run loads it too (and, with no GPU here, fails at the driver stage).
    let o = run1(&["run"], &[("VIRTUAL_ENV", &vs)]);
    let t = text(&o);
    assert_eq!(code(&o), 12, "{t}");
    assert!(
        t.contains("site-packages/nvidia/nccl/lib/libnccl.so.2"),
        "{t}"
    );
}

#[test]
fn with_no_wheel_anywhere_the_failure_says_where_it_looked() {
    let empty = scratch("novenv");
    let es = empty.display().to_string();
    let t = doctor(&[("VIRTUAL_ENV", &es), ("HOME", &es)]);
    // The test machine (scripts/setup.sh) keeps its real wheels out of every searched folder.
    assert!(
        t.contains("no pip wheel copy (site-packages/nvidia/nccl/lib)"),
        "{t}"
    );
    assert!(t.contains("pip install nvidia-nccl-cu12"), "{t}");
}
