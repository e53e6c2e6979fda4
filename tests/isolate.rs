//! Several hosts on one machine (scripts/netns/cluster.sh: network namespaces on a bridge, each
//! with its own address and host name), 4 hosts × 2 ranks started with torchrun-style
//! variables, against the simulation:
//! - `isolate` names exactly the slowed host, the host whose init fails, and the pair whose
//!   link is cut, and clears every other host, each within [`TIER_LIMIT_S`];
//! - the groups come from ncclCommSplit of a job-wide communicator (`--groups split`, also
//!   with a host sitting out) or fresh unique ids (`--groups fresh`, or after the job-wide
//!   init failed), the header says which, and a round whose split failed runs again fresh;
//! - `run` names a host whose cable is pulled mid-run within 10 s (5 cuts, each timed);
//! - no namespace and no process is left behind.
//!
//! Needs root (network namespaces), as the suite does for mpirun and Slurm.

mod common;
mod netns;
use common::*;
use nccl_smoke::report::isolate::HostStatus;
use nccl_smoke::report::results;
use netns::*;
use std::time::{Duration, Instant};

#[test]
fn isolate_names_the_slowed_host_and_clears_the_others() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (st, out, code, took) = tier("isoslow", Some((3, "net:slow=8")), |_| {});
    use HostStatus::*;
    expect(
        &st,
        &[("h1", Ok), ("h2", Ok), ("h3", Slow), ("h4", Ok)],
        &out,
    );
    assert_eq!(code, Some(25), "{out}");
    assert!(
        out.contains("VERDICT: FAIL [SIMULATED] drain h3 (slow); 3 other host(s) ok"),
        "{out}"
    );
    // A slow host fails nothing: every round splits the job-wide communicator.
    assert!(
        out.contains("# groups from: ncclCommSplit of a job-wide communicator\n"),
        "{out}"
    );
    assert!(took < Duration::from_secs(TIER_LIMIT_S), "{out}");
}

#[test]
fn isolate_names_the_host_whose_init_fails_at_init() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (st, out, code, took) = tier("isoinit", Some((2, "init:error")), |_| {});
    use HostStatus::*;
    expect(
        &st,
        &[("h1", Ok), ("h2", Failed), ("h3", Ok), ("h4", Ok)],
        &out,
    );
    assert_eq!(code, Some(16), "the init stage's exit code\n{out}");
    // The job-wide init fails on h2: fresh ids from round 1, and that failure is no evidence.
    assert!(
        out.contains(
            "# groups from: fresh unique ids (the job-wide communicator's init failed at rank"
        ),
        "{out}"
    );
    assert!(out.contains("drain h2 (failed at init)"), "{out}");
    // Its evidence is its own failure, in the library's words.
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("h2")
            && l.contains("alone (round 1): FAIL at init on ranks 2, 3 (host h2)")),
        "{out}"
    );
    assert!(took < Duration::from_secs(TIER_LIMIT_S), "{out}");
}

#[test]
fn isolate_names_the_pair_whose_link_is_cut_and_clears_the_others() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (st, out, code, took) = tier("isolink", None, |name| {
        cluster(&["cut-pair", name, "3", "4"]);
    });
    use HostStatus::*;
    expect(
        &st,
        &[("h1", Ok), ("h2", Ok), ("h3", Link), ("h4", Link)],
        &out,
    );
    assert_ne!(code, Some(0), "{out}");
    assert!(
        out.contains("check the link h3 <-> h4; 2 other host(s) ok"),
        "{out}"
    );
    // The job-wide init hangs across the cut link: fresh ids from round 1.
    assert!(out.contains("# groups from: fresh unique ids ("), "{out}");
    // Each met a third partner in the pair rounds (the diameters), and passed with it.
    assert!(out.contains("round 4 pairs [h1 + h3]: all_reduce"), "{out}");
    assert!(out.contains("round 4 pairs [h2 + h4]: all_reduce"), "{out}");
    assert!(took < Duration::from_secs(TIER_LIMIT_S), "{out}");
}

/// Every host passed every group: ok, or at worst slow (a healthy host can be judged slow on
/// a loaded machine; these tests are about where the groups come from, not speed).
fn passed_everywhere(st: &[(String, HostStatus)], hosts: &[&str], code: Option<i32>, out: &str) {
    let names: Vec<&str> = st.iter().map(|(h, _)| h.as_str()).collect();
    assert_eq!(names, hosts, "{out}");
    assert!(
        st.iter()
            .all(|(_, s)| matches!(s, HostStatus::Ok | HostStatus::Slow)),
        "{out}"
    );
    assert!(matches!(code, Some(0) | Some(25)), "{out}");
    assert!(!out.contains(": FAIL at"), "{out}");
}

#[test]
fn isolate_groups_split_and_fresh_both_work_and_the_header_names_the_source() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for (groups, source) in [
        (
            "split",
            "# groups from: ncclCommSplit of a job-wide communicator\n",
        ),
        (
            "fresh",
            "# groups from: fresh unique ids (--groups fresh)\n",
        ),
    ] {
        let (st, out, code, took) = tier_with(
            &format!("isog{}", &groups[..1]),
            None,
            |_| {},
            groups,
            HOSTS,
            &[],
        );
        passed_everywhere(&st, &["h1", "h2", "h3", "h4"], code, &out);
        assert!(out.contains(source), "--groups {groups}\n{out}");
        assert!(out.contains("round 3 pairs [h4 + h1]: all_reduce"), "{out}");
        assert!(took < Duration::from_secs(TIER_LIMIT_S), "{out}");
    }
}

/// A split that fails in one group of a round: `init@3` on h1's ranks spares the job-wide
/// communicator (h1 holds ranks 0 and 1) and every group where h1 leads, and strikes where
/// h1's second rank is rank 3 of its group: round 3's [h4 + h1]. That round runs again with
/// fresh ids (its split groups set aside, not judged) and fresh ids from then on.
#[test]
fn isolate_runs_a_round_whose_split_failed_again_with_fresh_ids() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_, out, _, took) = tier_with(
        "isorerun",
        Some((1, "init@3:error")),
        |_| {},
        "auto",
        HOSTS,
        &[],
    );
    assert!(
        out.contains(
            "# groups from: ncclCommSplit of a job-wide communicator in round(s) 1, 2, 3, then \
             fresh unique ids (round 3's split failed or hung in a group; the round ran again \
             as round 4 with fresh unique ids)"
        ),
        "{out}"
    );
    assert!(
        !out.contains("#   round 3 "),
        "round 3's groups are set aside\n{out}"
    );
    assert!(
        out.contains("#   round 4 pairs [h2 + h3]: all_reduce"),
        "{out}"
    );
    assert!(
        out.contains("#   round 4 pairs [h4 + h1]: FAIL at init"),
        "{out}"
    );
    assert!(took < Duration::from_secs(TIER_LIMIT_S), "{out}");
}

/// Three hosts: in each pair round one host sits out, and its ranks still take part in the
/// split (NCCL_SPLIT_NOCOLOR), which is collective over the job-wide communicator.
#[test]
fn isolate_splits_with_a_host_sitting_out() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (st, out, code, took) = tier_with("isoodd", None, |_| {}, "split", 3, &[]);
    passed_everywhere(&st, &["h1", "h2", "h3"], code, &out);
    assert!(
        out.contains("# groups from: ncclCommSplit of a job-wide communicator\n"),
        "{out}"
    );
    assert!(out.contains("round 2 pairs [h1 + h2]: all_reduce"), "{out}");
    assert!(out.contains("round 3 pairs [h2 + h3]: all_reduce"), "{out}");
    assert!(took < Duration::from_secs(TIER_LIMIT_S), "{out}");
}

/// How long after host 3's cable is pulled mid-run rank 0 names it, 5 times.
#[test]
fn run_names_a_host_cut_off_mid_run_within_10_s() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_sim();
    let mut times = Vec::new();
    for i in 0..5 {
        let name = format!("iscut{i}");
        let mut c = Cluster::up(&name);
        let dir = scratch(&name);
        let json = dir.join("run.json");
        let args = long_sweep_args(json.to_str().unwrap());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        c.start(&args, None);
        let rx = c.rank0_lines();
        let mut out = Vec::new();
        // Cut once the sweep is under way.
        let start = Instant::now();
        let mut cut_at = None;
        let mut named_at = None;
        while start.elapsed() < Duration::from_secs(90) {
            let Ok((at, line)) = rx.recv_timeout(Duration::from_millis(100)) else {
                continue;
            };
            if cut_at.is_none() && line.starts_with("# all_reduce, 8 ranks") {
                std::thread::sleep(Duration::from_millis(500));
                cluster(&["cut", &name, "3"]);
                cut_at = Some(Instant::now());
            }
            if cut_at.is_some() && line.starts_with("VERDICT: FAIL") {
                named_at = Some(at);
                out.push(line);
                break;
            }
            out.push(line);
        }
        let (_, _) = c.wait(Duration::from_secs(30));
        drop(c);
        let out = out.join("\n");
        let (Some(cut), Some(named)) = (cut_at, named_at) else {
            panic!("run {i}: no cut or no verdict\n{out}");
        };
        let secs = named.duration_since(cut).as_secs_f64();
        assert!(
            out.contains("VERDICT: FAIL at ")
                && out.contains("on ranks 4, 5 (host h3): its supervisor stopped answering"),
            "run {i}: the first verdict must name host h3's two ranks\n{out}"
        );
        let doc = results::load(&json).unwrap();
        assert_eq!(doc.verdict.ranks, vec![4, 5], "run {i}\n{out}");
        assert!(namespaces_of(&name).is_empty());
        let left = rank_leftovers();
        assert!(left.is_empty(), "processes left behind: {left:?}");
        times.push(secs);
    }
    let max = times.iter().copied().fold(0.0, f64::max);
    println!(
        "cut host named after (s): {}; worst {max:.2}",
        times
            .iter()
            .map(|t| format!("{t:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(max < 10.0, "named only after {max:.2} s: {times:?}");
}
