//! `doctor` on this GPU-less machine: fast, no panic, the driver reported missing with a hint,
//! the real NCCL wheel's version and capabilities reported, JSON that parses back.

mod common;
use common::*;
use std::time::Instant;

#[test]
fn doctor_on_this_machine() {
    let lib = wheel_nccl();
    let start = Instant::now();
    let o = run1(&["doctor", "--nccl-lib", lib.to_str().unwrap()], &[]);
    let took = start.elapsed();
    let t = text(&o);
    assert_eq!(code(&o), 32, "{t}");
    assert!(
        t.contains("FAIL  cuda-driver")
            && t.contains("libcuda.so.1")
            && t.contains("try: install the NVIDIA driver"),
        "{t}"
    );
    assert!(
        t.contains("ok    nccl            NCCL 2.19.3") && t.contains("non-blocking init true"),
        "{t}"
    );
    assert!(!t.contains("panicked"), "{t}");
    // Recorded, not asserted as a tight bound: it should be well under a second.
    eprintln!("doctor took {took:?}");
    assert!(took.as_secs() < 5, "doctor took {took:?}");
}

#[test]
fn doctor_json_round_trips() {
    let lib = wheel_nccl();
    let o = run1(
        &["doctor", "--json", "--nccl-lib", lib.to_str().unwrap()],
        &[],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "nccl-smoke/doctor/v1");
    assert_eq!(v["status"], "fail");
    let ids: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    for id in [
        "nccl",
        "cuda-driver",
        "gpus",
        "gpudirect-rdma",
        "infiniband",
        "socket-ifname",
        "dev-shm",
        "memlock",
        "mpi-hcoll",
        "container",
        "known-issues",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
}

#[test]
fn doctor_bad_sysroot_is_usage_error() {
    let o = run1(&["doctor", "--sysroot", "/nonexistent-root"], &[]);
    assert_eq!(code(&o), 2, "{}", text(&o));
}
