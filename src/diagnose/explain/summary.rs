//! What reading a log yields: the processes it shows, the findings located in it, and the caps
//! on what one log may cost.

use crate::diagnose::classify::{Category, Severity};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Bounds on what one log may cost.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Stop after this many bytes.
    pub max_bytes: u64,
    /// Stop at this instant (checked between lines).
    pub deadline: Option<Instant>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: u64::MAX,
            deadline: None,
        }
    }
}

/// Who printed a line: NCCL's `host:pid:tid [dev]` prefix, a wrapper's rank tag, the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Who {
    pub file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

impl Who {
    /// "rank 3 (host a, pid 7)", "host a, pid 7", or the file.
    pub fn describe(&self) -> String {
        let mut at = Vec::new();
        if let Some(h) = &self.host {
            at.push(format!("host {h}"));
        }
        if let Some(p) = self.pid {
            at.push(format!("pid {p}"));
        }
        match (self.rank, at.is_empty()) {
            (Some(r), true) => format!("rank {r} ({})", self.file),
            (Some(r), false) => format!("rank {r} ({})", at.join(", ")),
            (None, false) => at.join(", "),
            (None, true) => self.file.clone(),
        }
    }

    /// The same process, whatever file it came from: rank where known, else host and pid.
    pub(super) fn process_key(&self) -> (Option<u32>, Option<String>, Option<u32>, String) {
        if self.rank.is_some() {
            (self.rank, None, None, String::new())
        } else if self.pid.is_some() {
            (None, self.host.clone(), self.pid, String::new())
        } else {
            (None, None, None, self.file.clone())
        }
    }
}

/// A finding located in a log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Located {
    pub file: String,
    /// 1-based line number.
    pub line: u64,
    /// Host, pid and CUDA device from NCCL's line prefix (`host:pid:tid [dev] NCCL …`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<u32>,
    /// The rank, from NCCL's init lines for this host:pid or from a wrapper's rank tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    pub stage: String,
    pub category: Category,
    pub severity: Severity,
    pub signature: String,
    pub cause: String,
    pub hint: String,
    pub evidence: String,
    /// What a code in the evidence means (an ibv_wc_status number, an errno text, an NCCL
    /// result), when it holds one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(skip)]
    pub exit_code: u8,
}

impl Located {
    pub fn who(&self) -> Who {
        Who {
            file: self.file.clone(),
            host: self.host.clone(),
            pid: self.pid,
            rank: self.rank,
        }
    }
}

/// The last collective operation one process was seen in.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LastOp {
    #[serde(flatten)]
    pub who: Who,
    /// PyTorch's sequence number of the operation the watchdog timed out on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed_out_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// PyTorch's "last enqueued work" / "last completed work".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_enqueued: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_completed: Option<u64>,
    /// NCCL's own opCount from NCCL_DEBUG_SUBSYS=COLL lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_op_count: Option<u64>,
}

/// What one log gave.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LogSummary {
    pub file: String,
    pub lines: u64,
    /// Lines that looked like NCCL's (`NCCL INFO|WARN|…`).
    pub nccl_lines: u64,
    /// Lines cut at the length cap.
    pub truncated_lines: u64,
    pub findings: Vec<Located>,
    /// NCCL version per process (from NCCL's own version line).
    pub versions: BTreeMap<String, BTreeSet<Who>>,
    /// The largest communicator size seen (`nranks N`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nranks: Option<u32>,
    /// Every process the log shows, with its last operation where one was seen.
    pub processes: Vec<LastOp>,
    /// The addresses its processes said they use (bootstrap, sockets, IB's out-of-band).
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    pub addresses: BTreeSet<String>,
    /// Why reading stopped early (size or time cap), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// The first line that shows the run finished healthy (nccl-tests' `Out of bounds values :
    /// 0 OK`, NCCL's `Destroy COMPLETE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed: Option<Quoted>,
    /// The last results row of a nccl-tests sweep this log ends inside (no footer after it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sweep_open: Option<Quoted>,
    /// Lines that read as errors (or NCCL WARN lines) that no signature names: the first
    /// 20 of them, quoted; never dropped from the report.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unexplained: Vec<Quoted>,
    /// How many such lines the log holds.
    pub unexplained_total: u64,
}

impl LogSummary {
    /// Why this log gives nothing to judge, if it does: empty, or no line that NCCL, a family
    /// around it, an error or a finished run wrote (random text, a log with NCCL_DEBUG unset
    /// and nothing else). Such a file gets no verdict, not even "no failure seen".
    pub fn nothing_to_judge(&self) -> Option<&'static str> {
        if self.lines == 0 {
            return Some("empty: nothing to judge");
        }
        let said_something = self.nccl_lines > 0
            || !self.findings.is_empty()
            || self.unexplained_total > 0
            || self.completed.is_some()
            || self.sweep_open.is_some();
        (!said_something).then_some(
            "no NCCL line, no error line and no sign of a finished run in it: nothing to judge (was \
             NCCL_DEBUG set to WARN or INFO in the job's environment?)",
        )
    }
}

/// How many unexplained error lines one log keeps.
pub const UNEXPLAINED_KEPT: usize = 20;

/// One line of a log, quoted with its place.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Quoted {
    pub file: String,
    pub line: u64,
    pub text: String,
}

/// Replaces control characters (terminal escapes included) with '?', so that what a log
/// contains can be printed safely.
pub fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() && c != '\t' { '?' } else { c })
        .collect()
}
