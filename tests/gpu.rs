//! On a machine with an NVIDIA GPU and its driver: the real path end to end. Run by
//! scripts/gpu-check.sh (or `cargo test --release --test gpu -- --ignored`), with
//! NCCL_SMOKE_NCCL_LIB pointing at a libnccl.so.2 when it is not on the library path.

mod common;
use common::*;

#[test]
#[ignore = "needs GPU"]
fn real_gpu_single_rank_passes_and_is_not_simulated() {
    let o = run1(&["launch", "-n", "1", "run", "-e", "64M"], &[]);
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    assert!(t.lines().any(|l| l.starts_with("PASS — ")), "{t}");
    assert!(!t.contains("SIMULATED"), "{t}");
    assert!(t.contains("# cuda driver: "), "{t}");
}

#[test]
#[ignore = "needs GPU"]
fn real_gpu_doctor_sees_the_driver_and_a_gpu() {
    let o = run1(&["doctor", "--json"], &[]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let check = |id: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(check("cuda-driver")["status"], "ok", "{v}");
    assert_eq!(check("gpus")["status"], "ok", "{v}");
    assert_eq!(check("nccl")["status"], "ok", "{v}");
}
