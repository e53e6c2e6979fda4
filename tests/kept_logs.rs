//! Evidence kept where results are kept, nothing else left behind: the NCCL log of a rank that
//! failed on its own (the INFO log nccl-smoke has NCCL write when NCCL_DEBUG is not set) goes
//! beside the results file (or into `--logs DIR`), named by job, rank and
//! host, and the results file names the pattern; the temp directory holds only the run folders
//! of live ranks, and those of ranks that are gone are removed at the next start.

mod common;
use common::*;
use std::path::Path;

/// The entries of a temp directory that are nccl-smoke's (not Open MPI's session folder).
fn ours(tmp: &Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("nccl-smoke"))
        .collect()
}

fn kept(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("nccl-smoke.") && n.ends_with(".log"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_failed_rank_s_nccl_log_is_kept_beside_the_results_and_the_temp_dir_is_left_clean() {
    let dir = scratch("kept-logs");
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // A run folder of a rank that is gone (no such pid), as a killed run leaves it.
    let stale = tmp.join("nccl-smoke.999999999.000000001");
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("nccl.h.1.log"), "old\n").unwrap();
    let json = dir.join("run.json");
    require_sim();
    let mut cmd = mpirun_command(
        2,
        &[SIM_RUN, &["--json", json.to_str().unwrap()]].concat(),
        &[
            ("NCCL_SMOKE_SIM_FAULT", "proxy@1:error"),
            ("TMPDIR", tmp.to_str().unwrap()),
        ],
    );
    // The suite's own folder for kept logs (.cargo/config.toml) unset: the default is tested.
    cmd.env_remove("NCCL_SMOKE_LOGS");
    let o = bounded(cmd, 90);
    let t = text(&o);
    assert_eq!(code(&o), 19, "{t}");
    // Rank 1 failed on its own: its log is beside the results, named by job, rank and host.
    let logs = kept(&dir);
    assert_eq!(logs.len(), 1, "{logs:?}\n{t}");
    let host = nccl_smoke::ffi::os::hostname();
    assert!(
        logs[0].contains(".rank1.") && logs[0].ends_with(&format!(".{host}.log")),
        "{logs:?}"
    );
    let body = std::fs::read_to_string(dir.join(&logs[0])).unwrap();
    assert!(
        body.contains("NCCL WARN") && body.contains("NCCL INFO"),
        "{body}"
    );
    assert!(
        t.contains(&format!(
            "NCCL log of this rank kept in {}",
            dir.join(&logs[0]).display()
        )),
        "{t}"
    );
    // The results file names where failed ranks keep their logs.
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let pattern = doc["nccl_logs"].as_str().unwrap();
    assert!(
        pattern.starts_with(dir.to_str().unwrap()) && pattern.contains("rank<RANK>.<HOST>.log"),
        "{pattern}"
    );
    let job = logs[0]
        .strip_prefix("nccl-smoke.")
        .and_then(|n| n.split(".rank1.").next())
        .unwrap();
    assert!(
        pattern.contains(&format!("nccl-smoke.{job}.rank<RANK>")),
        "{pattern}"
    );
    // Nothing of nccl-smoke's is left in the temp directory: not this run's folders, not the
    // gone rank's.
    assert!(ours(&tmp).is_empty(), "{:?}", ours(&tmp));
}

#[test]
fn logs_go_where_logs_says_and_a_passing_run_writes_none() {
    let dir = scratch("kept-logs-flag");
    let tmp = dir.join("tmp");
    let logs_dir = dir.join("evidence");
    std::fs::create_dir(&tmp).unwrap();
    let o = sim_run(
        2,
        &["--logs", logs_dir.to_str().unwrap()],
        &[
            ("NCCL_SMOKE_SIM_FAULT", "proxy@1:error"),
            ("TMPDIR", tmp.to_str().unwrap()),
        ],
    );
    let t = text(&o);
    assert_eq!(code(&o), 19, "{t}");
    let logs = kept(&logs_dir);
    assert!(
        logs.len() == 1 && logs[0].contains(".rank1."),
        "{logs:?}\n{t}"
    );
    assert!(ours(&tmp).is_empty(), "{:?}", ours(&tmp));

    let clean = dir.join("clean");
    let o = sim_run(
        2,
        &["--logs", clean.to_str().unwrap()],
        &[("TMPDIR", tmp.to_str().unwrap())],
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(!clean.exists(), "a passing run wrote logs");
    assert!(ours(&tmp).is_empty(), "{:?}", ours(&tmp));
}
