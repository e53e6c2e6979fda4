//! `scripts/install.sh PREFIX` gives a self-contained tree: the installed binary, run from
//! elsewhere, finds the simulation installed beside it, not the build folder's copy.

mod common;

use common::{bin, require_sim, scratch};
use std::process::Command;

#[test]
fn an_installed_tree_runs_from_anywhere_on_its_own_simulation() {
    require_sim();
    let root = env!("CARGO_MANIFEST_DIR");
    let target = bin().parent().unwrap().parent().unwrap().to_path_buf();
    let prefix = scratch("install").join("prefix");
    let out = Command::new("bash")
        .arg(format!("{root}/scripts/install.sh"))
        .arg(&prefix)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    assert!(out.status.success(), "install.sh: {out:?}");
    let installed = prefix.join("bin/nccl-smoke");
    let lib = prefix.join("lib/nccl-smoke");
    assert!(installed.exists() && lib.join("libnccl.so.2").exists());

    let elsewhere = scratch("install-cwd");
    let run = Command::new(&installed)
        .current_dir(&elsewhere)
        .args(["launch", "-n", "2", "run", "--backend", "sim", "-e", "1K"])
        .args(["--patterns", "all_reduce"])
        .env_remove("NCCL_SMOKE_SIM_DIR")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let nccl_line = text.lines().find(|l| l.starts_with("# nccl: ")).unwrap();
    assert!(
        nccl_line.contains(&lib.join("libnccl.so.2").display().to_string()),
        "the installed binary loaded another simulation: {nccl_line}"
    );
    assert!(text.contains("PASS [SIMULATED]"), "{text}");
}

#[test]
fn install_refuses_without_a_build_and_says_why() {
    let root = env!("CARGO_MANIFEST_DIR");
    let empty = scratch("install-nobuild");
    let out = Command::new("bash")
        .arg(format!("{root}/scripts/install.sh"))
        .arg(empty.join("prefix"))
        .env("CARGO_TARGET_DIR", &empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not built"));
}
