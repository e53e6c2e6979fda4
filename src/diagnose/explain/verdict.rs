//! One verdict for a job's logs: the root cause and the ranks that share it, the ranks that only
//! report consequences, and for hangs the ranks that fell silent first.

use super::summary::{LastOp, Located, LogSummary, Quoted, Who};
use crate::diagnose::classify::{self, Category, LineKind, Severity};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A hang: the operation the waiting ranks timed out on and the ranks that fell silent first.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HangReport {
    /// Ranks that reported a timeout, with the operation they waited on.
    pub waiting: Vec<LastOp>,
    /// Ranks that fell silent first: behind the others, or never reporting while others did.
    pub silent_first: Vec<Who>,
    /// In words.
    pub summary: String,
}

/// A peer a consequence names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct PeerNamed {
    /// `host` or `rank N`, as the line names it.
    pub peer: String,
    /// Whether any of the logs given shows that host or rank.
    pub in_logs: bool,
}

/// The peer a consequence's line names, if it names one.
fn peer_in(evidence: &str) -> Option<String> {
    for key in [
        "remote peer ",
        "Connect to ",
        "connect to ",
        "recv from ",
        "send to ",
    ] {
        if let Some(at) = evidence.find(key) {
            let rest = &evidence[at + key.len()..];
            let host: String = rest
                .chars()
                .take_while(|c| !matches!(c, '<' | ' ' | ',' | ':' | ']' | ')'))
                .collect();
            if !host.is_empty() {
                return Some(host);
            }
        }
    }
    let at = evidence.find(" from rank ")?;
    let n: String = evidence[at + 11..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!n.is_empty()).then(|| format!("rank {n}"))
}

/// One verdict for a job's logs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct JobVerdict {
    /// The stage the verdict names: the root cause's, or for a hang with no finding the step
    /// the logs stopped in (`init` when a nccl-tests run never printed its results header,
    /// `run` otherwise). Absent when nothing failed or nothing is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// "fail", "hang", "consequences-only", "unknown" (error lines no signature names),
    /// "advice", "pass" (the log shows a finished run and no failure) or "no-failure-seen"
    /// (nothing failed, and nothing shows the run finished).
    pub status: String,
    /// The finding that names the cause (the most severe, then the table's order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_cause: Option<Located>,
    /// Processes that report the root cause's family themselves (for a hang: the silent ones).
    pub culprits: Vec<Who>,
    /// Processes that only report consequences (a peer closed, ncclRemoteError, timeouts).
    pub consequences_only: Vec<Who>,
    /// Failures of another family elsewhere in the job (a second problem, or a later step).
    pub other_failures: Vec<Located>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hang: Option<HangReport>,
    /// NCCL version → the processes that report it.
    pub versions: BTreeMap<String, Vec<Who>>,
    pub version_mismatch: bool,
    /// Benign notes and advice.
    pub notes: Vec<Located>,
    /// Error lines no signature names (the first of each log), quoted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unexplained: Vec<Quoted>,
    /// How many error lines no signature names, in all logs.
    pub unexplained_total: u64,
    /// Peers that the consequences name (`Connection closed by remote peer HOST<port>`,
    /// `… from rank N`), and whether any log given shows that host: where the root cause is.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub peers_named: Vec<PeerNamed>,
    /// The line that shows the run finished, when the verdict is a pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed: Option<Quoted>,
    /// The exit code `explain` ends with.
    pub exit_code: u8,
}

/// Joins the logs of one job (one per rank, or one for all) into one verdict.
pub fn job_verdict(summaries: &[LogSummary]) -> JobVerdict {
    let all: Vec<&Located> = summaries.iter().flat_map(|s| &s.findings).collect();
    let mut v = JobVerdict {
        unexplained: summaries
            .iter()
            .flat_map(|s| s.unexplained.iter().cloned())
            .take(super::summary::UNEXPLAINED_KEPT)
            .collect(),
        unexplained_total: summaries.iter().map(|s| s.unexplained_total).sum(),
        ..JobVerdict::default()
    };

    // Versions across processes.
    for s in summaries {
        for (ver, whos) in &s.versions {
            v.versions
                .entry(ver.clone())
                .or_default()
                .extend(whos.iter().cloned());
        }
    }
    v.version_mismatch = v.versions.len() > 1;

    let mut failures: Vec<Located> = all
        .iter()
        .filter(|f| f.severity >= Severity::Consequence)
        .map(|f| (*f).clone())
        .collect();
    if v.version_mismatch {
        failures.push(version_finding(&v.versions));
    }
    v.notes = all
        .iter()
        .filter(|f| f.severity < Severity::Consequence)
        .map(|f| (*f).clone())
        .collect();

    explain_generic_error(&mut failures, &v.notes);
    let root = failures
        .iter()
        .min_by_key(|f| (key_of(f), f.file.clone(), f.line))
        .cloned();
    let hang = hang_report(summaries);

    // The peers the consequences name: the failing rank is there.
    let shown_hosts: BTreeSet<String> = summaries
        .iter()
        .flat_map(|s| s.processes.iter().filter_map(|p| p.who.host.clone()))
        .chain(all.iter().filter_map(|f| f.host.clone()))
        .chain(summaries.iter().flat_map(|s| s.addresses.iter().cloned()))
        .collect();
    let shown_ranks: BTreeSet<u32> = summaries
        .iter()
        .flat_map(|s| s.processes.iter().filter_map(|p| p.who.rank))
        .chain(all.iter().filter_map(|f| f.rank))
        .collect();
    let named: BTreeSet<PeerNamed> = failures
        .iter()
        .filter(|f| f.severity == Severity::Consequence)
        .filter_map(|f| peer_in(&f.evidence))
        .map(|peer| {
            let in_logs = match peer.strip_prefix("rank ") {
                Some(n) => n.parse().is_ok_and(|n: u32| shown_ranks.contains(&n)),
                None => shown_hosts.contains(&peer),
            };
            PeerNamed { peer, in_logs }
        })
        .collect();
    v.peers_named = named.into_iter().take(8).collect();

    match root {
        Some(root) => {
            let root_family = (root.category, root.severity);
            let mut culprits: BTreeSet<Who> = BTreeSet::new();
            let mut others: BTreeMap<(Category, Who), Located> = BTreeMap::new();
            for f in &failures {
                if (f.category, f.severity) == root_family {
                    culprits.insert(f.who());
                } else if f.severity == Severity::Fail {
                    others
                        .entry((f.category, f.who()))
                        .or_insert_with(|| f.clone());
                }
            }
            let culprit_keys: BTreeSet<_> = culprits.iter().map(Who::process_key).collect();
            let failing_keys: BTreeSet<_> = failures
                .iter()
                .filter(|f| f.severity == Severity::Fail)
                .map(|f| f.who().process_key())
                .collect();
            let consequences: BTreeSet<Who> = failures
                .iter()
                .filter(|f| f.severity < Severity::Fail)
                .map(Located::who)
                .filter(|w| {
                    !culprit_keys.contains(&w.process_key())
                        && !failing_keys.contains(&w.process_key())
                })
                .collect();
            v.consequences_only = consequences.into_iter().collect();
            v.other_failures = others.into_values().collect();
            v.status = match root.severity {
                Severity::Fail => "fail",
                Severity::Hang => "hang",
                _ => "consequences-only",
            }
            .to_string();
            if root.severity == Severity::Hang {
                let h = hang.unwrap_or_default();
                // The waiting ranks are victims; the culprits are the ones that went quiet.
                v.culprits = h.silent_first.clone();
                v.hang = Some(h);
            } else {
                v.culprits = culprits.into_iter().collect();
                if let Some(h) = hang {
                    v.hang = Some(h);
                }
            }
            v.exit_code = root.exit_code;
            v.stage = Some(root.stage.clone());
            v.root_cause = Some(root);
        }
        None => {
            if let Some(h) = hang.filter(|h| !h.silent_first.is_empty()) {
                // No error line at all, but the ranks stopped at different operations.
                v.status = "hang".into();
                v.culprits = h.silent_first.clone();
                v.exit_code = crate::stage::Stage::Run.exit_code();
                v.stage = Some(crate::stage::Stage::Run.name().into());
                v.hang = Some(h);
            } else if let Some(open) = summaries.iter().find_map(|s| s.sweep_open.as_ref()) {
                // The log ends inside an operation: a nccl-tests run with no footer; before
                // its results header, its communicators never finished init.
                let stage = if super::evidence::nccl_tests_start(&open.text) {
                    crate::stage::Stage::Init
                } else {
                    crate::stage::Stage::Run
                };
                v.status = "hang".into();
                v.exit_code = stage.exit_code();
                v.stage = Some(stage.name().into());
                v.hang = Some(HangReport {
                    summary: format!(
                        "the log ends inside a nccl-tests run, after {}:{} ('{}'), with no footer: \
                         the next step never finished, or the log was cut",
                        open.file,
                        open.line,
                        open.text.chars().take(80).collect::<String>()
                    ),
                    ..HangReport::default()
                });
            } else if v.unexplained_total > 0 {
                v.status = "unknown".into();
                v.exit_code = crate::stage::exit::UNKNOWN;
            } else if let Some(a) = v.notes.iter().find(|n| n.severity == Severity::Advice) {
                v.status = "advice".into();
                v.exit_code = a.exit_code;
            } else if let Some(done) = summaries.iter().find_map(|s| s.completed.as_ref()) {
                v.status = "pass".into();
                v.completed = Some(done.clone());
                v.exit_code = crate::stage::exit::PASS;
            } else {
                v.status = "no-failure-seen".into();
                v.exit_code = crate::stage::exit::NO_FAILURE_SEEN;
            }
        }
    }
    v
}

/// Advice that a network provider did not load: NCCL goes on without it, so alone it is advice.
const PROVIDER_ADVICE: &[&str] = &["net-plugin-version", "ibverbs-no-provider"];

/// When the only failure is an NCCL error that no line explains ("internal error", "unhandled
/// system error" in a wrapper's words) and the log shows a network provider that did not load,
/// that provider is the likely cause: it becomes a failure, ranked above the generic error.
fn explain_generic_error(failures: &mut Vec<Located>, notes: &[Located]) {
    let generic = |f: &Located| f.signature == "wrapper-nccl-error";
    let only_generic = failures.iter().any(generic)
        && failures
            .iter()
            .all(|f| f.severity < Severity::Fail || generic(f));
    if !only_generic {
        return;
    }
    for n in notes
        .iter()
        .filter(|n| PROVIDER_ADVICE.contains(&n.signature.as_str()))
    {
        let mut promoted = n.clone();
        promoted.severity = Severity::Fail;
        promoted.cause = format!(
            "{}; NCCL then failed with an error no line explains: this is its likely cause",
            n.cause
        );
        failures.push(promoted);
    }
}

/// The root cause's order: more severe first; a finding that names a cause before one that
/// only places a line (by its source file or a generic text); then the table's order (root
/// causes before the consequences NCCL's proxy relays); then the earliest line. (Ordering by
/// line before the table lost a held-out log and was not kept: see scripts/explain-corpus.py.)
fn key_of(f: &Located) -> (std::cmp::Reverse<Severity>, bool, usize, u64) {
    let ids: Vec<&str> = classify::signature_ids().collect();
    (
        std::cmp::Reverse(f.severity),
        classify::is_generic(&f.signature),
        ids.iter()
            .position(|i| *i == f.signature)
            .unwrap_or(usize::MAX),
        f.line,
    )
}

fn version_finding(versions: &BTreeMap<String, Vec<Who>>) -> Located {
    let listing: Vec<String> = versions
        .iter()
        .map(|(ver, whos)| {
            let mut names: Vec<String> = whos.iter().map(Who::describe).collect();
            names.dedup();
            let more = names.len().saturating_sub(4);
            names.truncate(4);
            let tail = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!("{ver} on {}{tail}", names.join("; "))
        })
        .collect();
    let line = "h:0:0 [0] NCCL WARN Mismatched NCCL version detected";
    let f = classify::classify_line(line, LineKind::Warn)
        .expect("the version-mismatch signature names its own words");
    Located {
        file: String::new(),
        line: 0,
        host: None,
        pid: None,
        device: None,
        rank: None,
        stage: f.stage.name().to_string(),
        category: f.category,
        severity: f.severity,
        signature: f.signature.to_string(),
        cause: f.cause.to_string(),
        hint: f.hint.to_string(),
        evidence: format!(
            "ranks report different NCCL versions: {}",
            listing.join(" | ")
        ),
        code: None,
        exit_code: f.stage.exit_code(),
    }
}

/// The ranks that fell silent first, from PyTorch's watchdog lines or NCCL's opCount.
fn hang_report(summaries: &[LogSummary]) -> Option<HangReport> {
    // One entry per process across files (the same rank may appear in several).
    let mut procs: BTreeMap<_, LastOp> = BTreeMap::new();
    for s in summaries {
        for p in &s.processes {
            let e = procs
                .entry(p.who.process_key())
                .or_insert_with(|| p.clone());
            if e.timed_out_seq.is_none() {
                e.timed_out_seq = p.timed_out_seq;
            }
            e.last_enqueued = e.last_enqueued.max(p.last_enqueued);
            e.last_completed = e.last_completed.max(p.last_completed);
            e.nccl_op_count = e.nccl_op_count.max(p.nccl_op_count);
            if e.op.is_none() {
                e.op = p.op.clone();
            }
        }
    }
    let waiting: Vec<LastOp> = procs
        .values()
        .filter(|p| p.timed_out_seq.is_some())
        .cloned()
        .collect();
    if !waiting.is_empty() {
        let top = waiting.iter().filter_map(|p| p.timed_out_seq).max()?;
        // Behind: timed out on an older operation, or never enqueued the one others wait on.
        let mut silent: Vec<Who> = waiting
            .iter()
            .filter(|p| {
                p.timed_out_seq.is_some_and(|s| s < top) || p.last_enqueued.is_some_and(|e| e < top)
            })
            .map(|p| p.who.clone())
            .collect();
        // Ranks the logs show but that never reported a timeout while others did.
        let reported: BTreeSet<Option<u32>> = waiting.iter().map(|p| p.who.rank).collect();
        let mut quiet: BTreeSet<u32> = procs
            .values()
            .filter(|p| p.timed_out_seq.is_none())
            .filter_map(|p| p.who.rank)
            .filter(|r| !reported.contains(&Some(*r)))
            .collect();
        let nranks = summaries.iter().filter_map(|s| s.nranks).max();
        if let Some(n) = nranks
            && reported.iter().all(Option::is_some)
            && n <= 4096
        {
            quiet.extend((0..n).filter(|r| !reported.contains(&Some(*r))));
        }
        for r in quiet {
            if !silent.iter().any(|w| w.rank == Some(r)) {
                silent.push(Who {
                    rank: Some(r),
                    ..Who::default()
                });
            }
        }
        let op = waiting
            .iter()
            .find(|p| p.timed_out_seq == Some(top))
            .and_then(|p| p.op.clone())
            .unwrap_or_else(|| "an operation".into());
        let summary = if silent.is_empty() {
            format!(
                "{} rank(s) timed out waiting on SeqNum={top} ({op}); no rank that reported is behind the others, \
                 so the rank(s) missing from these logs, or the link between them, are the suspects",
                waiting.len()
            )
        } else {
            format!(
                "{} rank(s) timed out waiting on SeqNum={top} ({op}); fell silent first: {}",
                waiting.len(),
                silent
                    .iter()
                    .map(Who::describe)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return Some(HangReport {
            waiting,
            silent_first: silent,
            summary,
        });
    }
    // NCCL's own opCount (NCCL_DEBUG_SUBSYS=COLL): ranks that stopped at an earlier operation.
    let counted: Vec<&LastOp> = procs
        .values()
        .filter(|p| p.nccl_op_count.is_some())
        .collect();
    let max = counted.iter().filter_map(|p| p.nccl_op_count).max()?;
    let min = counted.iter().filter_map(|p| p.nccl_op_count).min()?;
    if counted.len() < 2 || min == max {
        return None;
    }
    let silent: Vec<Who> = counted
        .iter()
        .filter(|p| p.nccl_op_count == Some(min))
        .map(|p| p.who.clone())
        .collect();
    Some(HangReport {
        summary: format!(
            "ranks stopped at different NCCL operations (opCount {min:#x} to {max:#x}); fell silent first: {}",
            silent
                .iter()
                .map(Who::describe)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        waiting: counted
            .iter()
            .filter(|p| p.nccl_op_count == Some(max))
            .map(|p| (*p).clone())
            .collect(),
        silent_first: silent,
    })
}

#[cfg(test)]
mod tests;
