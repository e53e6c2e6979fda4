//! The whole flow under mpirun on the simulation libraries: every pattern passes verification,
//! the output is labelled SIMULATED, and the results file reads back with nccl-tests' formulas.

mod common;
use common::*;
use nccl_smoke::report::results;
use nccl_smoke::stage::Stage;

fn pass_run(np: u32) {
    require_sim();
    let dir = scratch(&format!("pass{np}"));
    let json = dir.join("run.json");
    let o = mpirun(
        np,
        &[
            "run",
            "--backend",
            "sim",
            "-e",
            "256K",
            "-n",
            "5",
            "-w",
            "1",
            "--json",
            json.to_str().unwrap(),
        ],
        &[],
        120,
    );
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    let verdict = t
        .lines()
        .find(|l| l.starts_with("PASS"))
        .unwrap_or_else(|| panic!("no PASS:\n{t}"));
    assert!(verdict.contains("[SIMULATED]"), "{verdict}");
    for p in [
        "all_reduce",
        "all_to_all",
        "send_recv_ring",
        "send_recv_pairwise",
    ] {
        assert!(
            t.contains(&format!("# {p}, {np} ranks — SIMULATED")),
            "{p}:\n{t}"
        );
    }
    assert!(t.contains("# SIMULATED run"), "{t}");

    let doc = results::load(&json).unwrap();
    assert_eq!(doc.backend, "SIMULATED");
    assert!(doc.simulated);
    assert_eq!(doc.verdict.status, results::Status::Pass);
    assert_eq!(doc.fingerprint.ranks.len(), np as usize);
    // The per-rank table: every rank finished, its stages timed, launch to finalize.
    assert_eq!(doc.ranks.len(), np as usize, "{:?}", doc.ranks);
    for (i, r) in doc.ranks.iter().enumerate() {
        assert_eq!(
            (r.rank, r.state.as_str(), r.exit_code),
            (i as u32, "finished", Some(0))
        );
        let walked: Vec<Stage> = r.stages.iter().map(|s| s.stage).collect();
        assert_eq!(walked.first(), Some(&Stage::Launch), "{r:?}");
        assert_eq!(walked.last(), Some(&Stage::Finalize), "{r:?}");
        assert!(r.stages.iter().all(|s| s.ok && s.seconds >= 0.0), "{r:?}");
    }
    assert!(doc.fingerprint.nccl.as_ref().unwrap().simulated.is_some());
    let patterns: std::collections::BTreeSet<_> =
        doc.results.iter().map(|r| r.pattern.as_str()).collect();
    assert_eq!(patterns.len(), 4, "{patterns:?}");
    for r in &doc.results {
        assert_eq!(r.wrong, 0, "{r:?}");
        assert!(r.checked);
        assert_eq!(r.rank_avg_us.len(), np as usize);
        // algbw = size / time; busbw = algbw × factor (nccl-tests).
        let algbw = r.size_bytes as f64 / r.time_us.avg / 1e3;
        assert!(
            (r.algbw_gbs - algbw).abs() <= 1e-9 * algbw.max(1.0),
            "{r:?}"
        );
        let n = np as f64;
        let factor = match r.pattern.as_str() {
            "all_reduce" => 2.0 * (n - 1.0) / n,
            "all_to_all" => (n - 1.0) / n,
            _ => 1.0,
        };
        assert!(
            (r.busbw_gbs - algbw * factor).abs() <= 1e-9 * algbw.max(1.0),
            "{r:?}"
        );
        assert!(
            r.time_us.p50 <= r.time_us.p99 && r.time_us.p99 <= r.time_us.max,
            "{r:?}"
        );
    }
    assert!(leftovers_after_grace(dir.to_str().unwrap()).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_ranks_pass_all_patterns() {
    pass_run(2);
}

#[test]
fn four_ranks_pass_all_patterns() {
    pass_run(4);
}

#[test]
fn every_datatype_and_op_verifies() {
    require_sim();
    for (d, o) in [
        ("half", "sum"),
        ("bfloat16", "max"),
        ("int8", "min"),
        ("double", "prod"),
        ("uint64", "sum"),
        ("int32", "prod"),
        ("f8e4m3", "sum"),
        ("f8e5m2", "sum"),
    ] {
        let out = mpirun(
            3,
            &[
                "run",
                "--backend",
                "sim",
                "-e",
                "4K",
                "-n",
                "2",
                "-w",
                "0",
                "-d",
                d,
                "-o",
                o,
            ],
            &[],
            120,
        );
        let t = text(&out);
        assert_eq!(code(&out), 0, "{d} {o}: {t}");
        assert!(t.contains(&format!(" {d} ")), "{t}");
    }
}

#[test]
fn grouped_send_recv_fallback_when_the_library_lacks_alltoall() {
    require_sim();
    let out = mpirun(
        3,
        &[
            "run",
            "--backend",
            "sim",
            "-e",
            "16K",
            "--patterns",
            "all_to_all,gather,scatter",
        ],
        &[("NCCL_SMOKE_SIM_NCCL_VERSION", "21903")],
        120,
    );
    let t = text(&out);
    assert_eq!(code(&out), 0, "{t}");
    assert!(t.contains("native ncclAlltoAll no"), "{t}");
    // Gather and scatter as nccl-tests runs them before NCCL 2.28: grouped sends and receives.
    assert!(t.contains("native ncclGather/ncclScatter no"), "{t}");
    assert!(t.contains("# gather, ") && t.contains("# scatter, "), "{t}");
}
