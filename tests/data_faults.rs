//! The data-fault matrix: six data types (bfloat16 and half among them) × the five data faults
//! of the simulation (`verify@1:nothing|partial|flip|nan|peer`) × every pattern, on 2 and 4
//! ranks. Each run holds every pattern; each pattern's evidence line must carry the fault's own
//! finding, the verdict must name verify and rank 1 (the rank whose receive buffer the fault
//! rewrote; a wrong value in a copy is pinned on its sender), and no run may pass.

mod common;
use common::*;
use nccl_smoke::report::results;
use std::collections::BTreeMap;

const TYPES: [&str; 6] = ["float", "half", "bfloat16", "double", "int32", "int8"];
const FAULTS: [&str; 5] = ["nothing", "partial", "flip", "nan", "peer"];
/// Every pattern that writes rank 1's receive buffer (a reduce and a gather write the root's
/// only: see `tests/collectives.rs`).
const PATTERNS: [&str; 8] = [
    "all_reduce",
    "all_to_all",
    "send_recv_ring",
    "send_recv_pairwise",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "scatter",
];

/// The words the finding of `fault` must hold for `pattern` in type `dtype`.
fn finding(fault: &str, pattern: &str, dtype: &str) -> Vec<&'static str> {
    let float = !dtype.starts_with("int");
    match (fault, pattern) {
        ("nothing", _) => vec![
            "the collective wrote nothing into the receive buffer (it still holds the fill \
             pattern) on rank(s) 1",
        ],
        ("partial", _) => vec![
            "of the received elements were never written (still the fill pattern); rank 1: \
             elements",
        ],
        // One element of each receive buffer (pairwise on 4 ranks has three).
        ("flip", _) => vec!["wrong element", "; e.g. element", "received by rank 1 is"],
        // Integer types have no NaN: the simulation writes 0x7f bytes, a wrong value.
        ("nan", _) if float => vec!["every one of them NaN (rank 1"],
        ("nan", _) => vec![
            "wrong elements; e.g. element 0 received by rank 1 is",
            "(bytes 7f",
        ],
        ("peer", "all_reduce" | "reduce_scatter") => {
            vec!["rank 1 holds rank 1's own input instead of the reduction"]
        }
        ("peer", _) => vec!["rank 1 received rank 1's data where rank 0's was due"],
        _ => unreachable!(),
    }
}

fn case(np: u32, dtype: &str, fault: &str) -> Option<String> {
    let spec = format!("verify@1:{fault}");
    let dir = scratch(&format!("data-{np}-{dtype}-{fault}"));
    let json = dir.join("run.json");
    let o = mpirun(
        np,
        &[
            "run",
            "--backend",
            "sim",
            "-b",
            "1K",
            "-e",
            "1K",
            "-n",
            "1",
            "-w",
            "0",
            "--timeout",
            "10",
            "-d",
            dtype,
            "--patterns",
            &PATTERNS.join(","),
            "--json",
            json.to_str().unwrap(),
        ],
        &[("NCCL_SMOKE_SIM_FAULT", &spec)],
        60,
    );
    let t = text(&o);
    let mut problems = Vec::new();
    if code(&o) != 23 {
        problems.push(format!("exit code {} (want 23, verify)", code(&o)));
    }
    // A buffer never written, half written, NaN or another rank's data is the receiving rank's;
    // a wrong value in a copy is pinned on the rank that sent it (the verdict cannot tell a
    // sender's corruption from a receiver's, and says which rank received it in the evidence).
    let pinned_on_sender = fault == "flip" || (fault == "nan" && dtype.starts_with("int"));
    let verdict = if pinned_on_sender {
        "VERDICT: FAIL at verify on rank "
    } else {
        "VERDICT: FAIL at verify on rank 1 "
    };
    if !t.lines().any(|l| l.starts_with(verdict)) {
        problems.push(format!("no verdict '{verdict}'"));
    }
    if t.lines().any(|l| l.contains("PASS")) {
        problems.push("a PASS".into());
    }
    for p in PATTERNS {
        let prefix = format!("#   evidence: {p} ");
        let line = t.lines().find(|l| l.starts_with(&prefix));
        for want in finding(fault, p, dtype) {
            match line {
                Some(l) if l.contains(want) => {}
                Some(l) => problems.push(format!("{p}: '{l}' lacks '{want}'")),
                None => problems.push(format!("{p}: no evidence line")),
            }
        }
    }
    match results::load(&json) {
        Ok(doc) => {
            if doc.verdict.exit_code != 23 || doc.results.len() != PATTERNS.len() {
                problems.push(format!(
                    "results file: exit code {}, {} rows",
                    doc.verdict.exit_code,
                    doc.results.len()
                ));
            }
        }
        Err(e) => problems.push(format!("results file unreadable: {e}")),
    }
    if problems.is_empty() {
        let _ = std::fs::remove_dir_all(&dir);
        None
    } else {
        Some(format!(
            "{spec} -d {dtype} on {np} ranks: {}\n{t}",
            problems.join("; ")
        ))
    }
}

fn matrix(np: u32) {
    require_sim();
    let mut wrong = BTreeMap::new();
    for dtype in TYPES {
        for fault in FAULTS {
            if let Some(why) = case(np, dtype, fault) {
                wrong.insert((dtype, fault), why);
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases wrong:\n{}",
        wrong.len(),
        TYPES.len() * FAULTS.len(),
        wrong.into_values().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn every_data_fault_is_named_in_every_type_and_pattern_on_2_ranks() {
    matrix(2);
}

#[test]
fn every_data_fault_is_named_in_every_type_and_pattern_on_4_ranks() {
    matrix(4);
}

/// A fault at one size strikes that size alone: the others are checked and pass, and the
/// verdict names the size.
#[test]
fn a_data_fault_at_one_size_names_that_size() {
    require_sim();
    let o = mpirun(
        2,
        &[
            "run",
            "--backend",
            "sim",
            "-b",
            "1K",
            "-e",
            "4K",
            "-n",
            "1",
            "-w",
            "0",
            "--patterns",
            "all_reduce",
            "-d",
            "half",
        ],
        &[("NCCL_SMOKE_SIM_FAULT", "verify@1:nothing=2048")],
        60,
    );
    let t = text(&o);
    assert_eq!(code(&o), 23, "{t}");
    assert!(
        t.lines()
            .any(|l| l.starts_with("VERDICT: FAIL at verify on rank 1 ")
                && l.contains("all_reduce 2048 B: the collective wrote nothing")
                && !l.contains("more pattern")),
        "{t}"
    );
}
