//! `isolate` on host counts where pairing alone cannot decide (namespace hosts, simulation):
//! - three hosts, one slowed: every pair is measured, so the slow host is named (a ring of
//!   two rounds measured only the two pairs that hold it, and every host passed);
//! - two hosts and no floor: nothing to compare their pair with, so the verdict says it
//!   cannot judge, gives both hosts' figures, and is not a pass;
//! - two hosts with a floor (`--expect`): a pair above it passes, a pair below it is below
//!   the floor without either host being blamed.
//!
//! Needs root (network namespaces), as the suite does for mpirun and Slurm.

mod common;
mod netns;
use common::*;
use nccl_smoke::report::isolate::HostStatus;
use netns::*;
use std::time::Duration;

/// A floor file for all_reduce at 1 MiB (the size these tiers measure) on pairs of 4 ranks.
fn floor_file(name: &str, busbw_gbs: f64) -> String {
    let path = scratch(name).join("floor.json");
    std::fs::write(
        &path,
        format!(
            r#"{{"schema": "nccl-smoke/expect/v1", "floors": [{{"pattern": "all_reduce",
               "ranks": 4, "size": "1M", "busbw_gbs": {busbw_gbs}, "source": "this test"}}]}}"#
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn three_hosts_with_the_middle_one_slow_name_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (st, out, code, took) = tier_with(
        "iso3slow",
        Some((2, "net:slow=8")),
        |_| {},
        "auto",
        3,
        &["--patterns", "all_reduce"],
    );
    use HostStatus::*;
    expect(&st, &[("h1", Ok), ("h2", Slow), ("h3", Ok)], &out);
    assert_eq!(code, Some(25), "{out}");
    assert!(out.contains("drain h2 (slow); 2 other host(s) ok"), "{out}");
    // The pair without h2 is what h2 is judged against.
    assert!(out.contains("round 4 pairs [h3 + h1]: all_reduce"), "{out}");
    assert!(took < Duration::from_secs(TIER_LIMIT_S), "{out}");
}

#[test]
fn two_hosts_without_a_floor_are_not_judged_and_not_passed() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (st, out, code, _) = tier_with(
        "iso2",
        None,
        |_| {},
        "auto",
        2,
        &["--patterns", "all_reduce"],
    );
    use HostStatus::*;
    expect(&st, &[("h1", Undecided), ("h2", Undecided)], &out);
    assert_eq!(code, Some(38), "{out}");
    assert!(!out.contains("every host passed"), "{out}");
    assert!(
        out.contains("the network between h1 and h2 is not judged: with 2 hosts and no floor")
            && out.contains("h1 alone ")
            && out.contains(", h2 alone ")
            && out.contains(", together ")
            && out.contains("give --expect FILE"),
        "{out}"
    );
}

#[test]
fn two_hosts_with_a_floor_pass_above_it_and_blame_neither_below_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    use HostStatus::*;
    let low = floor_file("iso2lo", 0.001);
    let (st, out, code, _) = tier_with(
        "iso2lo",
        None,
        |_| {},
        "auto",
        2,
        &["--patterns", "all_reduce", "--expect", &low],
    );
    expect(&st, &[("h1", Ok), ("h2", Ok)], &out);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("every host passed: 2 host(s) ok"), "{out}");

    let high = floor_file("iso2hi", 1000.0);
    let (st, out, code, _) = tier_with(
        "iso2hi",
        None,
        |_| {},
        "auto",
        2,
        &["--patterns", "all_reduce", "--expect", &high],
    );
    expect(&st, &[("h1", Undecided), ("h2", Undecided)], &out);
    assert_eq!(code, Some(25), "{out}");
    assert!(out.contains("cannot tell which of h1, h2 is slow"), "{out}");
    assert!(
        out.contains("below the floor 1000 GB/s (source: this test)"),
        "{out}"
    );
}
