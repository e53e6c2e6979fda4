//! Every fault the simulation can inject, on rank 0 and on another rank: the run ends with the
//! stage's exit code, a verdict naming the stage and the rank, nothing left running, and the
//! results file keeping what completed.

mod common;
use common::*;
use nccl_smoke::report::results;
use nccl_smoke::stage::Stage;

struct Case {
    fault: &'static str,
    stage: Stage,
    /// The rank whose verdict must appear (the faulty one).
    rank: u32,
}

fn check(np: u32, case: &Case) -> String {
    let dir = scratch(&case.fault.replace(['@', ':', '='], "_"));
    let json = dir.join("run.json");
    let o = sim_run(
        np,
        &["--json", json.to_str().unwrap()],
        &[
            ("NCCL_SMOKE_SIM_FAULT", case.fault),
            ("NCCL_SMOKE_SIM_RUN_FAULT_OP", "120"),
        ],
    );
    let t = text(&o);
    let mut problems = Vec::new();
    if code(&o) != case.stage.exit_code() as i32 {
        problems.push(format!(
            "exit code {} (want {} for {})",
            code(&o),
            case.stage.exit_code(),
            case.stage
        ));
    }
    let want = format!("FAIL at {} on rank {} ", case.stage, case.rank);
    // A hang inside an operation (the simulation's run hang) looks alike from every rank: each
    // waits for the others, and whose wait runs out first is chance. The job's verdict then
    // names every rank stuck there, the faulty one among them, and none alone.
    let inside_op = case.fault.starts_with("run@") && case.fault.ends_with(":hang");
    let verdict = t.lines().rev().find(|l| l.starts_with("VERDICT: "));
    if inside_op {
        let among = verdict
            .and_then(|l| l.split(&format!("FAIL at {} on ranks ", case.stage)).nth(1))
            .and_then(|r| r.split(" (").next())
            .is_some_and(|ranks| ranks.split(", ").any(|r| r == case.rank.to_string()))
            || verdict
                .is_some_and(|l| l.contains(&format!("FAIL at {} on all {np} ranks ", case.stage)));
        if !among && !verdict.is_some_and(|l| l.contains(&want)) {
            problems.push(format!(
                "the verdict does not name rank {} among the ranks stuck in the operation: {verdict:?}",
                case.rank
            ));
        }
    } else if !t.lines().any(|l| l.contains(&want)) {
        problems.push(format!("no line containing '{want}'"));
    }
    // A hang is named within its deadline + 2 s (`--timeout 4`), by the supervisor ("no progress
    // for N s") or by the worker's own wait ("did not complete within N s").
    if case.fault.ends_with(":hang")
        && let Some(secs) = (if inside_op {
            verdict
        } else {
            t.lines().find(|l| l.contains(&want))
        })
        .and_then(|l| (l.split("no progress for ").nth(1)).or_else(|| l.split("within ").nth(1)))
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse::<f64>().ok())
        && secs > 6.0
    {
        problems.push(format!("hang named after {secs} s (deadline 4 s)"));
    }
    // One job, one verdict: printed once, when the job is concluded.
    let verdicts = t.lines().filter(|l| l.starts_with("VERDICT: ")).count();
    if verdicts != 1 {
        problems.push(format!("{verdicts} VERDICT lines (want exactly 1)"));
    }
    if t.contains("panicked") {
        problems.push("a panic".into());
    }
    let left = leftovers_after_grace(dir.to_str().unwrap());
    if !left.is_empty() {
        problems.push(format!("processes left behind: {left:?}"));
    }
    // What completed before the fault is on disk (rank 0 writes once it knows the fingerprint).
    if json.exists()
        && let Err(e) = results::load(&json)
    {
        problems.push(format!("results file unreadable: {e}"));
    }
    if problems.is_empty() {
        let _ = std::fs::remove_dir_all(&dir);
        String::new()
    } else {
        format!(
            "{} on {np} ranks: {}\n{t}\n",
            case.fault,
            problems.join("; ")
        )
    }
}

fn matrix(np: u32, cases: &[Case]) {
    require_sim();
    let failures: Vec<String> = cases
        .iter()
        .map(|c| check(np, c))
        .filter(|s| !s.is_empty())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

macro_rules! cases {
    ($($fault:literal => $stage:ident @ $rank:literal),* $(,)?) => {
        [$(Case { fault: $fault, stage: Stage::$stage, rank: $rank }),*]
    };
}

#[test]
fn errors_on_rank_0_and_rank_1() {
    matrix(
        2,
        &cases![
            "launch@0:error" => Launch @ 0, "launch@1:error" => Launch @ 1,
            "driver@0:error" => Driver @ 0, "driver@1:error" => Driver @ 1,
            "device@0:error" => Device @ 0, "device@1:error" => Device @ 1,
            "alloc@0:error" => Alloc @ 0, "alloc@1:error" => Alloc @ 1,
            "unique-id@0:error" => UniqueId @ 0,
            "init@0:error" => Init @ 0, "init@1:error" => Init @ 1,
            "import@0:error" => ConnectImport @ 0, "import@1:error" => ConnectImport @ 1,
            "proxy@0:error" => ConnectProxy @ 0, "proxy@1:error" => ConnectProxy @ 1,
            "shm@0:error" => ConnectShm @ 0, "shm@1:error" => ConnectShm @ 1,
            "net@0:error" => ConnectNet @ 0, "net@1:error" => ConnectNet @ 1,
            "run@0:error" => Run @ 0, "run@1:error" => Run @ 1,
            "verify@0:corrupt" => Verify @ 0, "verify@1:corrupt" => Verify @ 1,
            "finalize@0:error" => Finalize @ 0, "finalize@1:error" => Finalize @ 1,
        ],
    );
}

/// Where a hang or a crash at each fault location is named: the stage the worker was in.
fn stage_of(at: &str) -> Stage {
    match at {
        "launch" => Stage::Launch,
        "driver" => Stage::Driver,
        "device" => Stage::Device,
        "alloc" => Stage::Alloc,
        "unique-id" => Stage::UniqueId,
        "init" => Stage::Init,
        "import" | "proxy" | "shm" | "net" => Stage::Connect,
        "run" => Stage::Run,
        "finalize" => Stage::Finalize,
        other => panic!("no stage for {other}"),
    }
}

/// Every location where `kind` applies, on `rank` (unique-id is made by rank 0 only).
fn every_location(kind: &'static str, rank: u32) -> Vec<Case> {
    let locations = [
        "launch",
        "driver",
        "device",
        "alloc",
        "unique-id",
        "init",
        "import",
        "proxy",
        "shm",
        "net",
        "run",
        "finalize",
    ];
    locations
        .iter()
        .filter(|at| rank == 0 || **at != "unique-id")
        .map(|at| Case {
            fault: Box::leak(format!("{at}@{rank}:{kind}").into_boxed_str()),
            stage: stage_of(at),
            rank,
        })
        .collect()
}

#[test]
fn crashes_on_rank_0() {
    matrix(2, &every_location("crash", 0));
}

#[test]
fn crashes_on_rank_1() {
    matrix(2, &every_location("crash", 1));
}

#[test]
fn hangs_on_rank_0_are_named_within_the_deadline() {
    matrix(2, &every_location("hang", 0));
}

#[test]
fn hangs_on_rank_1_are_named_within_the_deadline() {
    matrix(2, &every_location("hang", 1));
}

/// The stage an injected `error` at `at` is named with: transport faults by their kind.
fn stage_of_error(at: &str) -> Stage {
    match at {
        "import" => Stage::ConnectImport,
        "proxy" => Stage::ConnectProxy,
        "shm" => Stage::ConnectShm,
        "net" => Stage::ConnectNet,
        other => stage_of(other),
    }
}

/// Every error at every location, plus a corrupted element, on `rank` of `np`.
fn every_error(rank: u32) -> Vec<Case> {
    let mut cases: Vec<Case> = every_location("error", rank)
        .into_iter()
        .map(|c| Case {
            stage: stage_of_error(c.fault.split('@').next().unwrap_or("")),
            ..c
        })
        .collect();
    cases.push(Case {
        fault: Box::leak(format!("verify@{rank}:corrupt").into_boxed_str()),
        stage: Stage::Verify,
        rank,
    });
    cases
}

#[test]
fn four_ranks_errors_on_rank_0_and_rank_3() {
    let mut cases = every_error(0);
    cases.extend(every_error(3));
    matrix(4, &cases);
}

#[test]
fn four_ranks_crashes_on_rank_0_and_rank_3() {
    let mut cases = every_location("crash", 0);
    cases.extend(every_location("crash", 3));
    matrix(4, &cases);
}

#[test]
fn four_ranks_hangs_on_rank_0_are_named_within_the_deadline() {
    matrix(4, &every_location("hang", 0));
}

#[test]
fn four_ranks_hangs_on_rank_3_are_named_within_the_deadline() {
    matrix(4, &every_location("hang", 3));
}

#[test]
fn results_file_keeps_sizes_measured_before_a_run_fault() {
    require_sim();
    let dir = scratch("keep");
    let json = dir.join("run.json");
    let o = sim_run(
        2,
        &["--json", json.to_str().unwrap()],
        &[
            ("NCCL_SMOKE_SIM_FAULT", "run@1:crash"),
            ("NCCL_SMOKE_SIM_RUN_FAULT_OP", "120"),
        ],
    );
    let t = text(&o);
    assert_eq!(code(&o), Stage::Run.exit_code() as i32, "{t}");
    let doc = results::load(&json).unwrap();
    assert!(!doc.results.is_empty(), "no completed sizes kept:\n{t}");
    assert!(doc.results.iter().all(|r| r.wrong == 0));
}

/// Rank 0 learns of another rank's failure over the status line, not through NCCL or MPI: its
/// results file carries that rank's failure and verdict, and its output the job's state.
#[test]
fn rank_0_records_another_ranks_failure() {
    let dir = scratch("job");
    let json = dir.join("run.json");
    let o = sim_run(
        3,
        &["--json", json.to_str().unwrap()],
        &[("NCCL_SMOKE_SIM_FAULT", "device@2:error")],
    );
    let t = text(&o);
    assert_eq!(code(&o), Stage::Device.exit_code() as i32, "{t}");
    let doc = results::load(&json).unwrap();
    assert_eq!(doc.verdict.status, results::Status::Fail, "{t}");
    assert_eq!(doc.verdict.stage, Some(Stage::Device), "{t}");
    assert!(
        doc.verdict.line.starts_with("FAIL at device on rank 2 "),
        "{}",
        doc.verdict.line
    );
    assert!(
        doc.failures
            .iter()
            .any(|f| f.rank == Some(2) && f.stage == Stage::Device),
        "{:?}",
        doc.failures
    );
    let row = |rank: u32| doc.ranks.iter().find(|r| r.rank == rank);
    assert_eq!(
        row(2).map(|r| (r.state.as_str(), r.stage)),
        Some(("failed", Some(Stage::Device))),
        "{:?}",
        doc.ranks
    );
    assert!(
        row(2).is_some_and(|r| r
            .stages
            .last()
            .is_some_and(|s| !s.ok && s.stage == Stage::Device)),
        "{:?}",
        doc.ranks
    );
    assert!(
        t.contains("# job: rank 2 (host ") && t.contains(") failed at device; rank 0 recorded it"),
        "{t}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two ranks failing alike are one verdict line naming both, in rank 0's output and file; the
/// rank that only saw its peers vanish does not take the verdict.
#[test]
fn alike_failures_on_two_ranks_are_one_verdict() {
    let dir = scratch("alike");
    let json = dir.join("run.json");
    let o = sim_run(
        3,
        &["--json", json.to_str().unwrap()],
        &[("NCCL_SMOKE_SIM_FAULT", "proxy@1:error,proxy@2:error")],
    );
    let t = text(&o);
    assert_eq!(code(&o), Stage::ConnectProxy.exit_code() as i32, "{t}");
    let doc = results::load(&json).unwrap();
    assert!(
        doc.verdict
            .line
            .starts_with("FAIL at connect:proxy on ranks 1, 2 (host "),
        "{}",
        doc.verdict.line
    );
    assert_eq!(doc.verdict.stage, Some(Stage::ConnectProxy));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same fault on every rank, at 4 ranks: every rank is named, whichever reported first,
/// as one failure of all 4 ranks, in one `VERDICT:` line; a launch failure too, before the
/// ranks first meet (every rank is on rank 0's host).
/// A failing rank keeps its process until rank 0 has concluded (or a bound), so the launcher
/// does not stop the ranks about to report the same failure; before, which ranks were named
/// changed from run to run (`init` on all 4 ranks, 5 runs: three different sets).
#[test]
fn a_fault_on_every_rank_names_every_rank() {
    require_sim();
    let mut wrong = Vec::new();
    for (fault, stage) in [
        ("launch:error", Stage::Launch),
        ("driver:error", Stage::Driver),
        ("alloc:error", Stage::Alloc),
        ("init:error", Stage::Init),
        ("import:error", Stage::ConnectImport),
        // Every rank's sends spoiled: rank 0's check names every rank, not the first it met.
        ("verify:corrupt", Stage::Verify),
    ] {
        for _ in 0..2 {
            let o = sim_run(4, &[], &[("NCCL_SMOKE_SIM_FAULT", fault)]);
            let t = text(&o);
            let want = format!("VERDICT: FAIL at {stage} on all 4 ranks (host ");
            let last = t.lines().rev().find(|l| l.starts_with("VERDICT: "));
            let verdicts = t.lines().filter(|l| l.starts_with("VERDICT: ")).count();
            if code(&o) != stage.exit_code() as i32
                || !last.is_some_and(|l| l.contains(&want))
                || verdicts != 1
            {
                wrong.push(format!(
                    "{fault}: exit {}, {verdicts} verdict line(s), the last {last:?}",
                    code(&o)
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The worker killed (SIGABRT, the simulation's crash) in every stage, on rank 0 and on a
/// middle rank of 3: rank 0's supervisor leaves a results document that is complete and valid
/// — it reads back, says FAIL with the stage's exit code, names the stage and the killed rank
/// and no other, and has a row for every rank (a launch-stage crash elsewhere too: before the
/// ranks first meet, a rank on rank 0's host finds rank 0's supervisor by the job's name).
#[test]
fn a_worker_killed_in_every_stage_leaves_a_complete_results_file() {
    require_sim();
    let mut wrong = Vec::new();
    let mut cases = every_location("crash", 0);
    cases.extend(every_location("crash", 1));
    for case in &cases {
        let dir = scratch(&format!("doc-{}", case.fault.replace(['@', ':'], "_")));
        let json = dir.join("run.json");
        let o = mpirun(
            3,
            &[SIM_RUN, &["--json", json.to_str().unwrap()]].concat(),
            &[
                ("NCCL_SMOKE_SIM_FAULT", case.fault),
                ("NCCL_SMOKE_SIM_RUN_FAULT_OP", "120"),
            ],
            60,
        );
        let mut problems = Vec::new();
        match results::load(&json) {
            Err(e) => problems.push(format!("results file: {e}")),
            Ok(doc) => {
                let v = &doc.verdict;
                if v.status != results::Status::Fail
                    || v.exit_code != case.stage.exit_code()
                    || code(&o) != case.stage.exit_code() as i32
                {
                    problems.push(format!(
                        "status {:?}, exit code {} in the file and {} from mpirun (want {})",
                        v.status,
                        v.exit_code,
                        code(&o),
                        case.stage.exit_code()
                    ));
                }
                if v.stage != Some(case.stage) || v.ranks != vec![case.rank] {
                    problems.push(format!("verdict {:?} on ranks {:?}", v.stage, v.ranks));
                }
                {
                    let rows: Vec<(u32, &str)> = doc
                        .ranks
                        .iter()
                        .map(|r| (r.rank, r.state.as_str()))
                        .collect();
                    let failed: Vec<u32> = rows
                        .iter()
                        .filter(|(_, s)| *s == "failed")
                        .map(|(r, _)| *r)
                        .collect();
                    if rows.len() != 3 || failed != vec![case.rank] {
                        problems.push(format!("rank table {rows:?}"));
                    }
                }
            }
        }
        if problems.is_empty() {
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            wrong.push(format!(
                "{}: {}\n{}",
                case.fault,
                problems.join("; "),
                text(&o)
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases wrong:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}
