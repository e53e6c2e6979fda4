//! NCCL's non-blocking contract, release by release: the simulation speaks as 2.19, 2.22,
//! 2.23, 2.28 and 2.32 (which calls return `ncclInProgress`, when the library refuses a call
//! made too early), and nccl-smoke must give the same verdicts whether the communicator is
//! blocking (its default, as nccl-tests) or non-blocking (a user's `NCCL_COMM_BLOCKING=0`).

mod common;
use common::*;
use nccl_smoke::report::results;
use nccl_smoke::stage::Stage;

const RELEASES: [&str; 5] = ["21903", "22203", "22304", "22803", "23200"];

/// (pattern, size, count, wrong, checked) of every row of a results file.
fn rows(json: &std::path::Path) -> Vec<(String, usize, usize, u64, bool)> {
    results::load(json)
        .unwrap_or_else(|e| panic!("{}: {e}", json.display()))
        .results
        .into_iter()
        .map(|r| (r.pattern, r.size_bytes, r.count, r.wrong, r.checked))
        .collect()
}

fn run(np: u32, release: &str, blocking: &str, fault: Option<&str>) -> (i32, String, Vec<String>) {
    let dir = scratch(&format!("semantics-{release}-{blocking}"));
    let json = dir.join("run.json");
    let mut env = vec![
        ("NCCL_SMOKE_SIM_NCCL_VERSION", release),
        ("NCCL_COMM_BLOCKING", blocking),
    ];
    if let Some(f) = fault {
        env.push(("NCCL_SMOKE_SIM_FAULT", f));
    }
    let o = sim_run(np, &["-b", "0", "--json", json.to_str().unwrap()], &env);
    let t = text(&o);
    let r = if json.exists() {
        rows(&json).into_iter().map(|r| format!("{r:?}")).collect()
    } else {
        Vec::new()
    };
    (code(&o), t, r)
}

#[test]
fn every_pattern_passes_in_both_modes_with_the_same_verified_data() {
    require_sim();
    let mut problems = Vec::new();
    for release in RELEASES {
        let (c1, t1, r1) = run(3, release, "1", None);
        let (c0, t0, r0) = run(3, release, "0", None);
        for (mode, c, t) in [("blocking", c1, &t1), ("non-blocking", c0, &t0)] {
            if c != 0 || !t.contains("PASS [SIMULATED] — 4 patterns") {
                problems.push(format!("{release} {mode}: exit {c}\n{t}"));
            }
            // As an error, never: only the header may name the mode's contract.
            for refused in ["returned ncclInProgress", "returned ncclInvalidArgument"] {
                if t.contains(refused) {
                    problems.push(format!("{release} {mode}: {refused} in the output\n{t}"));
                }
            }
        }
        if r1.is_empty() || r1 != r0 {
            problems.push(format!(
                "{release}: rows differ between modes\nblocking: {r1:?}\nnon-blocking: {r0:?}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

#[test]
fn a_connect_fault_gets_the_same_stage_in_both_modes() {
    require_sim();
    let mut problems = Vec::new();
    for release in RELEASES {
        for (fault, stage) in [
            ("proxy@1:error", Stage::ConnectProxy),
            ("net@0:error", Stage::ConnectNet),
        ] {
            for blocking in ["1", "0"] {
                let (c, t, _) = run(2, release, blocking, Some(fault));
                let rank = &fault[fault.find('@').unwrap() + 1..fault.find(':').unwrap()];
                let want = format!("FAIL at {stage} on rank {rank} ");
                if c != stage.exit_code() as i32 || !t.contains(&want) {
                    problems.push(format!(
                        "{release} NCCL_COMM_BLOCKING={blocking} {fault}: exit {c}, want {} and '{want}'\n{t}",
                        stage.exit_code()
                    ));
                }
                if t.contains("returned ncclInProgress")
                    || t.contains("returned ncclInvalidArgument")
                {
                    problems.push(format!("{release} {blocking} {fault}: ncclInProgress\n{t}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}
