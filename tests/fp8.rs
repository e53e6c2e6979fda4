//! The 8-bit float types: verified like the others where NCCL has them, and refused before
//! NCCL is asked where it has not (before 2.24, and reductions before compute capability 9.0),
//! each with the reason and the GPU.

mod common;
use common::*;
use nccl_smoke::stage::Stage;

#[test]
fn every_pattern_verifies_in_both_fp8_types_at_2_and_4_ranks() {
    for np in [2, 4] {
        for d in ["f8e4m3", "f8e5m2"] {
            let o = sim_run(np, &["-d", d], &[]);
            let t = text(&o);
            assert_eq!(code(&o), 0, "{d} at {np}: {t}");
            assert!(t.contains(&format!(" {d} ")), "{t}");
            assert!(t.contains("PASS [SIMULATED] — 4 patterns"), "{t}");
        }
    }
}

#[test]
fn an_nccl_before_2_24_is_refused_with_the_release_that_has_the_type() {
    let o = sim_run(
        2,
        &["-d", "f8e5m2"],
        &[("NCCL_SMOKE_SIM_NCCL_VERSION", "22304")],
    );
    let t = text(&o);
    assert_eq!(code(&o), Stage::NcclLoad.exit_code() as i32, "{t}");
    assert!(t.contains("-d f8e5m2: NCCL 2.23.4 has no such type"), "{t}");
    assert!(
        t.contains("the 8-bit float types (ncclFloat8e4m3, ncclFloat8e5m2) came with NCCL 2.24.0"),
        "{t}"
    );
}

#[test]
fn an_fp8_reduction_before_hopper_is_refused_and_fp8_copies_still_run() {
    let ampere = [("NCCL_SMOKE_SIM_COMPUTE_CAP", "8.0")];
    let o = sim_run(2, &["-d", "f8e4m3"], &ampere);
    let t = text(&o);
    assert_eq!(code(&o), Stage::Device.exit_code() as i32, "{t}");
    assert!(
        t.contains("-d f8e4m3 with all_reduce: GPU ") && t.contains("has compute capability 8.0"),
        "{t}"
    );
    assert!(
        t.contains("FP8 reduction support begins with sm90 capable devices."),
        "{t}"
    );
    let o = sim_run(
        2,
        &["-d", "f8e4m3", "--patterns", "all_to_all,send_recv"],
        &ampere,
    );
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    assert!(t.contains("PASS [SIMULATED] — 3 patterns"), "{t}");
}
