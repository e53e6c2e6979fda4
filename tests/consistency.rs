//! Ranks started differently are named before NCCL's init: each difference a warning with its
//! ranks and hosts, or the run's failure with `--strict` (exit 10). The ranks are started as
//! torchrun starts them, each with its own environment.

mod common;
use common::*;

fn args(strict: bool, json: Option<&std::path::Path>) -> Vec<String> {
    let mut a: Vec<String> = [
        "run",
        "--backend",
        "sim",
        "-e",
        "16K",
        "-n",
        "2",
        "-w",
        "1",
        "--patterns",
        "all_reduce",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if strict {
        a.push("--strict".into());
    }
    if let Some(j) = json {
        a.extend(["--json".to_string(), j.display().to_string()]);
    }
    a
}

/// Two ranks; rank 1 reports NCCL 2.21.5 (the simulation's version switch) and sets NCCL_ALGO.
fn world(strict: bool, json: Option<&std::path::Path>) -> Vec<std::process::Output> {
    require_sim();
    let port = free_port();
    let mut odd = torchrun(1, 2, port);
    odd.extend(vars(&[
        ("NCCL_SMOKE_SIM_NCCL_VERSION", "22105".into()),
        ("NCCL_ALGO", "Ring".into()),
    ]));
    start_world(vec![torchrun(0, 2, port), odd], &args(strict, json))
}

#[test]
fn differences_are_warnings_that_name_ranks_and_hosts() {
    let outs = world(false, None);
    let t = text(&outs[0]);
    assert_eq!(code(&outs[0]), 0, "{t}");
    for want in [
        "WARN at launch on rank 0 ",
        "ranks differ: NCCL version: 2.28.3 on rank 0 (host ",
        "; 2.21.5 on rank 1 (host ",
        "ranks differ: NCCL_ALGO: (unset) on rank 0 (host ",
        "; Ring on rank 1 (host ",
    ] {
        assert!(t.contains(want), "{want}: {t}");
    }
}

#[test]
fn strict_fails_before_nccl_init() {
    let json = scratch("strict").join("run.json");
    let outs = world(true, Some(&json));
    let t = text(&outs[0]);
    assert_eq!(code(&outs[0]), 10, "{t}");
    let verdict = t
        .lines()
        .find(|l| l.starts_with("VERDICT: "))
        .unwrap_or_default();
    assert!(
        verdict.starts_with("VERDICT: FAIL at launch on rank 0 ")
            && verdict.contains("ranks differ (--strict): NCCL version: 2.28.3 on rank 0"),
        "{t}"
    );
    // Before NCCL's init: rank 0 stopped at the device stage, its last; and the results keep
    // every rank's setup, the evidence.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let rank0 = &doc["ranks"][0];
    assert_eq!(rank0["stage"], "device", "{rank0}");
    let stages: Vec<&str> = doc["stages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["stage"].as_str())
        .collect();
    assert!(
        !stages.contains(&"init") && !stages.contains(&"unique-id"),
        "{stages:?}"
    );
    let setups: Vec<&str> = doc["fingerprint"]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["setup"]["nccl"].as_str())
        .collect();
    assert_eq!(setups, vec!["2.28.3", "2.21.5"]);
}

#[test]
fn ranks_that_agree_say_nothing() {
    require_sim();
    let port = free_port();
    let outs = start_world(
        vec![torchrun(0, 2, port), torchrun(1, 2, port)],
        &args(true, None),
    );
    let t = text(&outs[0]);
    assert_eq!(code(&outs[0]), 0, "{t}");
    assert!(!t.contains("ranks differ"), "{t}");
}
