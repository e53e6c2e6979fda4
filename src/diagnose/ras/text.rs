//! RAS status reports in text, read into a [`Report`].
//!
//! Text: `rasClientRunComms` (same file, v2.24.3-1 to v2.28.7-1): after the summary table, an
//! `Errors` section (`INCOMPLETE`, `DEAD`, then per communicator `#G-I (hash) INCOMPLETE` and
//! `#G-I (hash) ERROR`) and a `Warnings` section (`TIMEOUT`, `#G-I (hash) MISMATCH`). Ranks are
//! named `Rank N -- GPU G managed by process P on node H`, or with the state in the line
//! (`Rank N has status S -- …`, `Rank N reported E -- …`, `Rank N has launched up to operation
//! K -- …`, `Rank N has not launched any operations -- …`), or `[process information not
//! found]`; 2.24 and 2.25 list missing ranks as `The missing ranks: 1,2`. Text reports list
//! only the outliers NCCL chose to detail (`rasCountIsOutlier`: at most 10, and at most a
//! quarter of the ranks); counts of a larger group are not per rank.

use super::parse::hex;
use super::{Comm, Finding, Report, State};

/// Where a text report's lines are, as far as findings go.
#[derive(Clone, PartialEq)]
enum Section {
    Other,
    /// Top-level `INCOMPLETE` or `DEAD`: the job processes listed next.
    Processes(State),
    /// A communicator's block: its index in the report, and what its rank lines mean.
    Comm(usize, Mode),
}

/// What the groups of an operation-count block said so far.
#[derive(Clone, Copy, PartialEq)]
enum Counted {
    Nothing,
    /// The first group had more than one rank, at this count.
    Usual(u64),
    /// The first group was a single rank: no count is the usual one.
    NoUsual,
}

impl Counted {
    fn usual(self) -> Option<u64> {
        match self {
            Counted::Usual(u) => Some(u),
            _ => None,
        }
    }
}

#[derive(Clone, PartialEq)]
enum Mode {
    Missing,
    /// An error block; the error the next bare rank lines share.
    Error(Option<String>),
    /// A status mismatch; the status the next bare rank lines share.
    Status(Option<String>),
    /// An operation-count mismatch: the function, the count the next bare rank lines share,
    /// and the most common count when its group came first with more than one rank (NCCL
    /// prints the groups most frequent first, `rasValCountsCompareRev`).
    Counts(String, Option<u64>, Counted),
    /// A mismatch block before its first sub-heading.
    Mismatch,
}

/// `process P on node H`, at the end of a rank line.
fn process_and_node(s: &str) -> (Option<i64>, Option<String>) {
    let Some((_, rest)) = s.rsplit_once("managed by process ") else {
        return (None, None);
    };
    let (pid, host) = match rest.split_once(" on node ") {
        Some((p, h)) => (p.trim().parse().ok(), Some(h.trim().to_string())),
        None => (rest.trim().parse().ok(), None),
    };
    (pid, host.filter(|h| !h.is_empty()))
}

/// A text report (see the module's notes).
pub fn read(text: &str) -> Result<Report, String> {
    let mut report = Report {
        text: true,
        ..Report::default()
    };
    let mut section = Section::Other;
    let mut seen_heading = false;
    for raw in text.lines() {
        let line = raw.trim_end();
        let t = line.trim();
        if let Some(v) = t.strip_prefix("NCCL version ") {
            report.nccl_version = v.split_whitespace().next().map(String::from);
            seen_heading = true;
            continue;
        }
        if t.is_empty() {
            section = Section::Other;
            continue;
        }
        if !line.starts_with(' ') {
            // A heading.
            section = Section::Other;
            match t {
                "INCOMPLETE" => section = Section::Processes(State::Missing),
                "DEAD" => section = Section::Processes(State::Dead),
                "Job summary" | "Errors" | "Warnings" | "TIMEOUT" => seen_heading = true,
                _ => {}
            }
            if let Some((hash, kind)) = comm_heading(t) {
                seen_heading = true;
                let idx = match report.comms.iter().position(|c| c.hash == hash) {
                    Some(i) => i,
                    None => {
                        report.comms.push(Comm {
                            hash,
                            ..Comm::default()
                        });
                        report.comms.len() - 1
                    }
                };
                let mode = match kind {
                    "INCOMPLETE" => Mode::Missing,
                    "ERROR" => Mode::Error(None),
                    _ => Mode::Mismatch,
                };
                section = Section::Comm(idx, mode);
            }
            continue;
        }
        if let Some(n) = t
            .strip_prefix("Encountered ")
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse::<u32>().ok())
        {
            report.timeouts = n;
            continue;
        }
        match &mut section {
            Section::Processes(state) => {
                // `Process P on node H managing GPU(s) …`
                if let Some(rest) = t.strip_prefix("Process ") {
                    let pid = rest.split_whitespace().next().and_then(|p| p.parse().ok());
                    let host = rest
                        .split_once(" on node ")
                        .and_then(|(_, h)| h.split_whitespace().next())
                        .map(String::from);
                    report.processes.push(Finding {
                        rank: None,
                        host,
                        pid,
                        state: state.clone(),
                    });
                }
            }
            Section::Comm(idx, mode) => {
                let comm = &mut report.comms[*idx];
                comm_line(t, mode, comm);
            }
            Section::Other => {}
        }
    }
    if !seen_heading {
        return Err("no RAS report headings in the text".into());
    }
    Ok(report)
}

/// `#G-I (hash) KIND` → (hash, KIND).
fn comm_heading(t: &str) -> Option<(u64, &str)> {
    let rest = t.strip_prefix('#')?;
    let (_, rest) = rest.split_once(" (")?;
    let (hash, kind) = rest.split_once(") ")?;
    Some((hex(hash)?, kind.trim()))
}

/// One indented line of a communicator's block.
fn comm_line(t: &str, mode: &mut Mode, comm: &mut Comm) {
    // Sub-headings that set what the following bare rank lines mean.
    if t == "Communicator ranks have different status" {
        *mode = Mode::Status(None);
        return;
    }
    if let Some(rest) = t.strip_prefix("Communicator ranks have different ") {
        let op = rest
            .strip_suffix(" operation counts")
            .unwrap_or(rest)
            .to_string();
        *mode = Mode::Counts(op, None, Counted::Nothing);
        return;
    }
    if let Some(rest) = t.strip_prefix("The missing rank") {
        // 2.24/2.25: `The missing ranks: 1,2` (the separator code may also lead with a comma).
        let list = rest.split_once(':').map(|(_, l)| l).unwrap_or("");
        for r in list.split(',').filter_map(|r| r.trim().parse::<u32>().ok()) {
            comm.findings.push(Finding {
                rank: Some(r),
                host: None,
                pid: None,
                state: State::Missing,
            });
        }
        return;
    }
    // `N ranks have status S` / `N ranks reported E` / `N ranks have launched up to operation K`
    // / `N ranks have not launched any operations`: the group the next bare lines belong to.
    if t.split_whitespace()
        .next()
        .is_some_and(|w| w.parse::<u32>().is_ok())
        && let Some((_, rest)) = t.split_once(" ranks ")
    {
        match mode {
            Mode::Status(s) => {
                *s = rest
                    .strip_prefix("have status ")
                    .map(|s| s.trim().to_string());
            }
            Mode::Error(e) => *e = rest.strip_prefix("reported ").map(|s| s.trim().to_string()),
            Mode::Counts(_, c, counted) => {
                *c = if rest.starts_with("have not launched") {
                    Some(0)
                } else {
                    rest.strip_prefix("have launched up to operation ")
                        .and_then(|k| k.trim().parse().ok())
                };
                if *counted == Counted::Nothing {
                    *counted = c.map_or(Counted::NoUsual, Counted::Usual);
                }
            }
            _ => {}
        }
        return;
    }
    let Some(rest) = t.strip_prefix("Rank ") else {
        return;
    };
    let rank = rest
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|r| r.parse::<u32>().ok());
    let after = &rest[rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len())..];
    let (head, tail) = after.split_once(" -- ").unwrap_or((after, ""));
    let head = head.trim();
    let (pid, host) = process_and_node(tail);
    // A single rank's group names its state in the line; when it is the first group printed,
    // no count is the usual one.
    let inline = |mode: &mut Mode, count: u64| {
        if let Mode::Counts(_, _, counted) = mode
            && *counted == Counted::Nothing
        {
            *counted = Counted::NoUsual;
        }
        State::Launched {
            op: op_of(mode),
            count,
            usual: usual_of(mode),
        }
    };
    let state = if let Some(s) = head.strip_prefix("has status ") {
        State::Status(s.trim().to_string())
    } else if let Some(e) = head.strip_prefix("reported ") {
        State::Error(e.trim().to_string())
    } else if let Some(k) = head.strip_prefix("has launched up to operation ") {
        inline(mode, k.trim().parse().unwrap_or(0))
    } else if head.starts_with("has not launched any operations") {
        inline(mode, 0)
    } else {
        match mode {
            Mode::Missing => State::Missing,
            Mode::Error(e) => State::Error(e.clone().unwrap_or_else(|| "an error".into())),
            Mode::Status(s) => State::Status(s.clone().unwrap_or_else(|| "different".into())),
            Mode::Counts(op, c, counted) => {
                // A rank of the usual group is no finding.
                if c.is_some() && *c == counted.usual() {
                    return;
                }
                State::Launched {
                    op: op.clone(),
                    count: c.unwrap_or(0),
                    usual: counted.usual(),
                }
            }
            Mode::Mismatch => return,
        }
    };
    comm.findings.push(Finding {
        rank,
        host,
        pid,
        state,
    });
}

fn op_of(mode: &Mode) -> String {
    match mode {
        Mode::Counts(op, ..) => op.clone(),
        _ => "collective".into(),
    }
}

fn usual_of(mode: &Mode) -> Option<u64> {
    match mode {
        Mode::Counts(_, _, counted) => counted.usual(),
        _ => None,
    }
}
