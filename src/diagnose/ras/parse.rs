//! RAS status reports in JSON (2.28.7 and later, `SET FORMAT json`) read into a [`Report`];
//! text reports are read by [`super::text`].
//!
//! JSON: the writers `jsonWriteHeader`, `jsonStartCommunicator`, `jsonWriteRankData`,
//! `jsonWriteMissingRank` and `jsonWriteFooter` in `src/ras/client_support.cc` v2.28.7-1:
//! `communicators[]` with `hash` ("0x…"), `size`, `ranks_count`, `missing_ranks_count`,
//! `ranks[]` (`rank`, `host`, `pid`, `status.{init_state, async_error, finalize_called,
//! destroy_flag, abort_flag}`, `collective_counts.{<function>: n}`) and `missing_ranks[]`
//! (`rank`, `host`, `pid`, `status.{unresponsive, considered_dead}`), then
//! `ras.timeouts_count`. In v2.28.7-1 and v2.28.9-1 a missing rank's `"nvml_dev": N` line lacks
//! its comma (fixed by v2.29.7-1), so such reports are not valid JSON as sent: the comma is put
//! back before parsing. The JSON carries raw state, not verdicts; the categories are worked out
//! here as `rasClientRunComms` does for text: an `init_state` or `async_error` other than
//! success or in-progress is an error, `abort_flag` / `finalize_called` / `destroy_flag` a
//! status, and ranks whose count of one function differs from the most common count are named.

use super::{Comm, Finding, Report, State};
use serde_json::Value;
use std::collections::BTreeMap;

/// ncclResult_t names as RAS prints them (`ncclErrorToString`, `client_support.cc`).
fn result_name(code: i64) -> String {
    match code {
        1 => "Unhandled CUDA error".into(),
        2 => "System error".into(),
        3 => "Internal error".into(),
        4 => "Invalid argument".into(),
        5 => "Invalid usage".into(),
        6 => "Remote process error".into(),
        c => format!("error {c}"),
    }
}

/// Puts back the comma v2.28.7-1's `jsonWriteMissingRank` leaves out after `"nvml_dev": N`
/// when the next line opens `"status"`.
fn repair(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::with_capacity(text.len() + 16);
    for (i, l) in lines.iter().enumerate() {
        out.push_str(l);
        let t = l.trim();
        let next = lines.get(i + 1).map(|n| n.trim()).unwrap_or("");
        if t.starts_with("\"nvml_dev\":") && !t.ends_with(',') && next.starts_with("\"status\"") {
            out.push(',');
        }
        out.push('\n');
    }
    out
}

pub(super) fn hex(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u64::from_str_radix(s, 16).ok()
}

fn host_of(v: &Value) -> Option<String> {
    v.get("host")
        .and_then(Value::as_str)
        .filter(|h| !h.is_empty() && *h != "unknown")
        .map(String::from)
}

fn pid_of(v: &Value) -> Option<i64> {
    v.get("pid").and_then(Value::as_i64).filter(|p| *p >= 0)
}

fn rank_of(v: &Value) -> Option<u32> {
    v.get("rank")
        .and_then(Value::as_u64)
        .and_then(|r| u32::try_from(r).ok())
}

/// A JSON report (see the module's notes).
pub fn json(text: &str) -> Result<Report, String> {
    let v: Value = serde_json::from_str(&repair(text)).map_err(|e| format!("JSON: {e}"))?;
    let comms = v
        .get("communicators")
        .and_then(Value::as_array)
        .ok_or("JSON without a communicators list")?;
    let mut report = Report {
        nccl_version: v
            .get("nccl_version")
            .and_then(Value::as_str)
            .map(String::from),
        timeouts: v
            .pointer("/ras/timeouts_count")
            .and_then(Value::as_u64)
            .unwrap_or(0) as u32,
        ..Report::default()
    };
    for c in comms {
        let hash = c
            .get("hash")
            .and_then(Value::as_str)
            .and_then(hex)
            .ok_or("a communicator without a hash")?;
        let mut comm = Comm {
            hash,
            size: c.get("size").and_then(Value::as_u64).map(|n| n as u32),
            answered: c
                .get("ranks_count")
                .and_then(Value::as_u64)
                .map(|n| n as u32),
            findings: Vec::new(),
        };
        let ranks: &[Value] = c
            .get("ranks")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for m in c
            .get("missing_ranks")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            let dead = m.pointer("/status/considered_dead") == Some(&Value::Bool(true));
            let silent = m.pointer("/status/unresponsive") != Some(&Value::Bool(false));
            comm.findings.push(Finding {
                rank: rank_of(m),
                host: host_of(m),
                pid: pid_of(m),
                state: if dead {
                    State::Dead
                } else if silent {
                    State::Missing
                } else {
                    State::NoComm
                },
            });
        }
        for r in ranks {
            let at = |state| Finding {
                rank: rank_of(r),
                host: host_of(r),
                pid: pid_of(r),
                state,
            };
            let code = |key: &str| {
                r.pointer(&format!("/status/{key}"))
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            };
            let flag = |key: &str| r.pointer(&format!("/status/{key}")) == Some(&Value::Bool(true));
            // ncclSuccess (0) and ncclInProgress (7) are no errors (`rasClientRunComms`).
            for (key, what) in [
                ("init_state", "initialization"),
                ("async_error", "asynchronous"),
            ] {
                let c = code(key);
                if c != 0 && c != 7 {
                    comm.findings.push(at(State::Error(format!(
                        "{} ({what} error)",
                        result_name(c)
                    ))));
                }
            }
            if flag("abort_flag") {
                comm.findings.push(at(State::Status("ABORT".into())));
            } else if flag("finalize_called") || flag("destroy_flag") {
                comm.findings.push(at(State::Status("FINALIZE".into())));
            }
        }
        comm.findings.extend(count_outliers(ranks));
        report.comms.push(comm);
    }
    Ok(report)
}

/// Ranks whose count of some function is not the most common one (all of them when no count
/// is more common than another).
fn count_outliers(ranks: &[Value]) -> Vec<Finding> {
    let mut ops: Vec<String> = Vec::new();
    for r in ranks {
        if let Some(m) = r.get("collective_counts").and_then(Value::as_object) {
            for k in m.keys() {
                if !ops.contains(k) {
                    ops.push(k.clone());
                }
            }
        }
    }
    let mut out = Vec::new();
    for op in ops {
        let count = |r: &Value| {
            r.get("collective_counts")
                .and_then(|m| m.get(&op))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let mut freq: BTreeMap<u64, usize> = BTreeMap::new();
        for r in ranks {
            *freq.entry(count(r)).or_default() += 1;
        }
        if freq.len() < 2 {
            continue;
        }
        let top = freq.values().copied().max().unwrap_or(0);
        let usual = {
            let tops: Vec<u64> = freq
                .iter()
                .filter(|(_, n)| **n == top)
                .map(|(v, _)| *v)
                .collect();
            (tops.len() == 1).then(|| tops[0])
        };
        for r in ranks {
            let c = count(r);
            if Some(c) != usual {
                out.push(Finding {
                    rank: rank_of(r),
                    host: host_of(r),
                    pid: pid_of(r),
                    state: State::Launched {
                        op: op.clone(),
                        count: c,
                        usual,
                    },
                });
            }
        }
    }
    out
}
