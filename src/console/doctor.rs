//! What `nccl-smoke doctor` prints: one line per check of this node, with its evidence and
//! what to try, or the JSON report; and the exit code.

use crate::diagnose::doctor::{self, Check, Examination, Node, Status};
use crate::ffi::os;
use crate::report::fingerprint::{self, DriverInfo, Fingerprint, NcclInfo, RankInfo};
use crate::stage::exit;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The doctor report, as `--json` prints it (schema `nccl-smoke/doctor/v1`).
///
/// Its `fingerprint` is the type a run's results file carries: `report::results::
/// load_fingerprint` reads it from either file and `report::fingerprint::diff` compares two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always "nccl-smoke/doctor/v1"; bumped when a field changes meaning.
    pub schema: String,
    pub tool_version: String,
    pub host: String,
    /// The worst status of any check: "ok", "skipped", "warn" or "fail".
    pub status: Status,
    /// In a fixed order; each with `id`, `status`, `evidence` and (unless ok) `hint`.
    pub checks: Vec<Check>,
    /// This node's environment: host, one rank entry per visible GPU (rank = local rank =
    /// ordinal, pid = doctor's), driver and NCCL as loaded, no launcher, and the
    /// `NCCL_*`/`CUDA_VISIBLE_DEVICES`/`UCX_*`/`OMPI_MCA_*` variables set.
    pub fingerprint: Fingerprint,
}

/// What `nccl-smoke doctor` examines.
pub struct Inputs<'a> {
    /// Where the node's file-system facts are read (`/`, or a fixture node).
    pub sysroot: &'a Path,
    /// The libnccl and CUDA driver to load, as resolved.
    pub libs: (Option<String>, Option<String>),
    pub local_ranks: u32,
    pub json: bool,
}

/// Examines the node, prints the report and returns the exit code.
pub fn run(inputs: &Inputs) -> u8 {
    if !inputs.sysroot.is_dir() {
        eprintln!(
            "nccl-smoke doctor: --sysroot {} is not a directory",
            inputs.sysroot.display()
        );
        return exit::USAGE;
    }
    let node = Node {
        root: inputs.sysroot.to_path_buf(),
        env: Box::new(|k| std::env::var(k).ok()),
        libs: inputs.libs.clone(),
        local_ranks: inputs.local_ranks,
    };
    let found = node.examine();
    let host = os::hostname();
    let report = Report {
        schema: doctor::SCHEMA.into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        status: doctor::worst(&found.checks),
        fingerprint: node_fingerprint(&found, &host),
        host,
        checks: found.checks,
    };
    if inputs.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print_text(&report);
    }
    match report.status {
        Status::Ok | Status::Skipped => exit::PASS,
        Status::Warn => exit::DOCTOR_WARN,
        Status::Fail => exit::DOCTOR_FAIL,
    }
}

/// The node's fingerprint: what was loaded and seen, as a run records it.
fn node_fingerprint(found: &Examination, host: &str) -> Fingerprint {
    let ranks = found
        .gpus
        .iter()
        .map(|d| RankInfo {
            rank: d.ordinal.max(0) as u32,
            host: host.into(),
            local_rank: d.ordinal.max(0) as u32,
            pid: std::process::id(),
            device: d.clone(),
            setup: None,
        })
        .collect();
    Fingerprint {
        hosts: vec![host.into()],
        ranks,
        driver: found.driver.as_ref().map(DriverInfo::from),
        nccl: found.nccl.as_ref().map(NcclInfo::from),
        launcher: String::new(),
        bootstrap: None,
        env: fingerprint::env_snapshot(),
    }
}

fn print_text(r: &Report) {
    println!("# nccl-smoke doctor {} on {}", r.tool_version, r.host);
    for c in &r.checks {
        let tag = match c.status {
            Status::Ok => "ok  ",
            Status::Skipped => "skip",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        };
        println!("{tag}  {:<16} {}", c.id, c.evidence);
        // A skipped check's hint says why it was skipped; the others' say what to do.
        match c.status {
            Status::Ok => {}
            _ if c.hint.is_empty() => {}
            Status::Skipped => println!("      {:<16} why: {}", "", c.hint),
            _ => println!("      {:<16} try: {}", "", c.hint),
        }
    }
    let verdict = match r.status {
        Status::Ok | Status::Skipped => "OK",
        Status::Warn => "WARN",
        Status::Fail => "FAIL",
    };
    println!("{verdict}");
}
