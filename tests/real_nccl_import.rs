//! Seed 000 acted out by the real libnccl: the stand-in driver fails rank 1's
//! `cuMemImportFromShareableHandle` with 101 (invalid device ordinal). NCCL 2.19.3 does it
//! inside `ncclCommInitRank` and prints `transport/p2p.cc:243 … Cuda failure 101` without the
//! function's name, then its proxy's complaints; 2.32.3 does it at the first collective and
//! names `ncclP2pImportShareableBuffer`. Both must be named connect:buffer-import (exit 18) on
//! rank 1, with the import's cause, never the victim rank 0: in a run, and by `explain` over
//! the logs those runs printed (tests/fixtures/stand-in-logs/SOURCES.md).

mod common;
mod stand_in;
use common::*;
use stand_in::*;
use std::path::PathBuf;

const CAUSE: &str = "likely cause: importing a peer GPU's buffer for the P2P transport failed";

/// NCCL's own WARN line for the failed import, per release.
fn warn_of(version: &str) -> &'static str {
    match version {
        "2.19.3" => "transport/p2p.cc:243 NCCL WARN Cuda failure 101 'invalid device ordinal'",
        "2.32.3" => {
            "transport/p2p.cc:294 (ncclP2pImportShareableBuffer) NCCL WARN Cuda failure 101 'invalid device ordinal'"
        }
        _ => unreachable!(),
    }
}

#[test]
fn seed_000_runs_are_named_buffer_import_on_rank_1() {
    let libs = lib_dir();
    for version in ["2.19.3", "2.32.3"] {
        let lib = wheel(version);
        let o = real_run(
            2,
            &[
                "run",
                "--nccl-lib",
                lib.to_str().unwrap(),
                "-e",
                "64K",
                "--timeout",
                "20",
            ],
            &[("NCCL_SMOKE_SIM_FAULT", "import@1:error")],
            &libs,
            180,
        );
        let t = text(&o);
        assert_eq!(code(&o), 18, "{version}: {t}");
        let v = verdict(&t);
        assert!(
            v.starts_with(&format!(
                "VERDICT: [REAL NCCL {version} · SIMULATED GPUS] FAIL at connect:buffer-import on \
                 rank 1 (host "
            )),
            "{version}: {v}"
        );
        assert!(v.contains(CAUSE), "{version}: {v}");
        assert!(
            !t.contains("on rank 0 (host"),
            "{version}: rank 0 blamed:\n{t}"
        );
        assert!(!t.contains("on ranks 0"), "{version}: rank 0 blamed:\n{t}");
        assert!(
            !t.contains(" on all "),
            "{version}: every rank blamed:\n{t}"
        );
        // NCCL's own words are quoted.
        assert!(
            t.lines()
                .any(|l| l.starts_with("#   evidence: ") && l.contains(warn_of(version))),
            "{version}: {t}"
        );
        assert!(!t.contains("panicked"), "{t}");
    }
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/stand-in-logs")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn explain_names_seed_000_from_the_real_logs() {
    for version in ["2.19.3", "2.32.3"] {
        let r0 = fixture(&format!("seed000_import_{version}.rank0.log"));
        let r1 = fixture(&format!("seed000_import_{version}.rank1.log"));
        let o = run1(&["explain", &r0, &r1], &[]);
        let t = text(&o);
        assert_eq!(code(&o), 18, "{version}: {t}");
        assert!(
            t.contains("VERDICT FAIL at connect:buffer-import [buffer-import]"),
            "{version}: {t}"
        );
        let after = t.split("VERDICT FAIL").nth(1).unwrap();
        assert!(
            after.contains("root cause on: rank 1 (host vm, "),
            "{version}: {t}"
        );
        assert!(!after.contains("root cause on: rank 0"), "{version}: {t}");
        assert!(after.contains(warn_of(version)), "{version}: {t}");
        assert!(
            after.contains("importing a peer GPU's buffer for the P2P transport failed"),
            "{version}: {t}"
        );
        // Each rank alone: rank 1's log names the import; rank 0's names no cause of its own.
        let o = run1(&["explain", &r1], &[]);
        assert_eq!(code(&o), 18, "{version}: {}", text(&o));
        let o = run1(&["explain", &r0], &[]);
        assert!(
            !text(&o).contains("FAIL at connect:buffer-import"),
            "{version}: {}",
            text(&o)
        );
    }
}
