//! NCCL's RAS service, asked when a wait times out after init: against the simulation, whose
//! ranks serve RAS from 2.24 on. A hang in the run stage gets the RAS report's lines in the
//! failures' evidence (JSON from 2.28.7, text before); with `NCCL_RAS_ENABLE=0` nothing
//! changes but their absence. Each job uses its own RAS port (`NCCL_RAS_ADDR`), so that
//! parallel tests do not answer each other.

mod common;
use common::*;
use nccl_smoke::report::results;
use nccl_smoke::stage::Stage;

/// A free local port for one job's RAS service.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A 2-rank run whose rank 1 hangs at its 120th operation: (output, each failure's evidence).
fn hang(version: &str, enable: Option<&str>) -> (String, Vec<Vec<String>>) {
    let dir = scratch(&format!("ras.{version}.{}", enable.unwrap_or("default")));
    let json = dir.join("run.json");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut env = vec![
        ("NCCL_SMOKE_SIM_FAULT", "run@1:hang"),
        ("NCCL_SMOKE_SIM_RUN_FAULT_OP", "120"),
        ("NCCL_SMOKE_SIM_NCCL_VERSION", version),
        ("NCCL_RAS_ADDR", addr.as_str()),
    ];
    if let Some(e) = enable {
        env.push(("NCCL_RAS_ENABLE", e));
    }
    let o = sim_run(2, &["--json", json.to_str().unwrap()], &env);
    let t = text(&o);
    assert_eq!(code(&o), Stage::Run.exit_code() as i32, "{t}");
    assert!(t.contains("FAIL at run on rank"), "{t}");
    assert!(!t.contains("panicked"), "{t}");
    let doc = results::load(&json).unwrap_or_else(|e| panic!("{e}\n{t}"));
    assert_eq!(doc.verdict.stage, Some(Stage::Run), "{t}");
    let evidence = doc.failures.iter().map(|f| f.evidence.clone()).collect();
    assert!(leftovers_after_grace(dir.to_str().unwrap()).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
    (t, evidence)
}

fn ras_lines(evidence: &[String]) -> Vec<&String> {
    evidence
        .iter()
        .filter(|l| l.starts_with("NCCL RAS: "))
        .collect()
}

#[test]
fn a_hang_after_init_gets_the_ras_report_in_its_evidence() {
    require_sim();
    // JSON (2.28.7) and text (2.26.2): the same finding. Every rank launched as many AllReduce
    // operations and answered: the hang is inside an operation, no rank stopped calling NCCL.
    // A text report names a communicator only when something is wrong with it.
    for (version, ok) in [
        (
            "22807",
            ": all 2 ranks answered; none missing, dead or in error, and their operation counts agree",
        ),
        (
            "22602",
            "NCCL RAS: no communicator has missing, dead, failed or mismatched ranks (a text report, which names a communicator only when it has)",
        ),
    ] {
        let (t, evidence) = hang(version, None);
        // Both ranks time out a moment apart. The first to time out asks while both still
        // hold the communicator: its answer is the finding above.
        assert!(
            evidence
                .iter()
                .any(|e| { ras_lines(e).iter().any(|l| l.ends_with(ok)) }),
            "{version}: no rank got RAS's whole answer\n{t}"
        );
        // The later one may ask after the first aborted, and RAS then sees what that abort
        // left, as it would in NCCL: the aborted rank's process without the communicator
        // (NOCOMM, or the asking rank listed as the one whose status differs), or the asking
        // rank's own connection error from the peer's abort; or, once the first has reported
        // and exited, that rank's process gone (considered dead at once on its host,
        // sim/README.md "RAS peer data"), seen once in a clean-clone run.
        let race = [
            "its process answered without this communicator",
            "has status NOCOMM (unlike the other ranks)",
            "has status RUNNING (unlike the other ranks)",
            "reported Remote process error",
            "considered dead (unreachable over the RAS network)",
            // A text report's head line above such a job-level process.
            "no communicator is named (a text report names one only when its ranks disagree), but at the job level:",
        ];
        for l in evidence.iter().flat_map(|e| ras_lines(e)) {
            assert!(
                l.ends_with(ok) || race.iter().any(|r| l.contains(r)),
                "{version}: {l}\n{t}"
            );
            assert!(
                version != "22807" || l.starts_with("NCCL RAS: communicator 0x"),
                "{l}"
            );
        }
    }
}

#[test]
fn ras_off_or_absent_adds_nothing() {
    require_sim();
    for (version, enable) in [("22807", Some("0")), ("22303", None)] {
        let (t, evidence) = hang(version, enable);
        assert!(
            evidence.iter().all(|e| ras_lines(e).is_empty()),
            "{version}: {evidence:?}"
        );
        assert!(!t.contains("NCCL RAS"), "{t}");
    }
}
