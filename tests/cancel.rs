//! Ctrl-C (SIGINT) or SIGTERM to the launcher is a cancellation, not a failure: rank 0's
//! results file says CANCELLED (exit code 130) and keeps every size measured, and within 2 s
//! no process of the job is left, nor anything of nccl-smoke's in /dev/shm.

mod common;
use common::*;
use nccl_smoke::report::results;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn shm_entries() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("nccl"))
                .collect()
        })
        .unwrap_or_default()
}

fn cancel_with(signal: &str) -> Result<(), String> {
    require_sim();
    let dir = scratch(&format!("cancel-{signal}"));
    let json = dir.join("run.json");
    let shm_before = shm_entries();
    let args = long_sweep_args(json.to_str().unwrap());
    let mut cmd = mpirun_command(3, &args, &[]);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    let start = Instant::now();
    // Once the sweep is under way (a size is on disk), signal the launcher alone.
    while !results::load(&json).is_ok_and(|d| !d.results.is_empty()) {
        if start.elapsed() > Duration::from_secs(60) || child.try_wait().ok().flatten().is_some() {
            common::signal("-KILL", &format!("-{}", child.id()));
            return Err("the sweep never got under way".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status();
    let sent = Instant::now();
    let _ = child.wait();
    let mut problems = Vec::new();
    let tag = dir.to_str().unwrap();
    while !leftovers(tag).is_empty() && sent.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = leftovers(tag);
    if !left.is_empty() {
        problems.push(format!("processes left 2 s after the signal: {left:?}"));
        for l in &left {
            if let Some(pid) = l.split_whitespace().next() {
                let _ = Command::new("kill").args(["-KILL", pid]).status();
            }
        }
    }
    let new_shm: Vec<String> = shm_entries()
        .into_iter()
        .filter(|n| !shm_before.contains(n))
        .collect();
    if !new_shm.is_empty() {
        problems.push(format!("left in /dev/shm: {new_shm:?}"));
    }
    match results::load(&json) {
        Ok(doc) => {
            if doc.verdict.status != results::Status::Cancelled || doc.verdict.exit_code != 130 {
                problems.push(format!("verdict {:?}", doc.verdict));
            }
            if doc.results.is_empty() {
                problems.push("no measured size kept".into());
            }
        }
        Err(e) => problems.push(format!("results file: {e}")),
    }
    if problems.is_empty() {
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    } else {
        Err(format!("SIG{signal}: {}", problems.join("; ")))
    }
}

#[test]
fn sigterm_and_ctrl_c_of_the_launcher_cancel_the_run() {
    let failures: Vec<String> = ["TERM", "INT", "TERM", "INT"]
        .iter()
        .filter_map(|s| cancel_with(s).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
