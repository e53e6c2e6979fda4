//! What the data says: a receive buffer never written, partly written, holding another rank's
//! data, or holding wrong values; a sweep that did not check everything it measured; and a
//! collective too fast to have run. Each is its own finding, in its own words, because each
//! points somewhere else: a kernel that did not run, a transfer cut short, a routing or
//! addressing bug, a corrupting link or memory.

use crate::bench::{SizeResult, TIMER_RESOLUTION_US};
use crate::error::{Failure, Who};
use crate::stage::Stage;

/// `pattern size B` for a row.
fn label(r: &SizeResult) -> String {
    format!("{} {} B", r.pattern, r.size_bytes)
}

/// A value as a person reads it: whole numbers plain, the very small and very large in
/// scientific notation (a flipped bit can make a 200-digit decimal).
fn shown(v: f64) -> String {
    if v != 0.0 && v.is_finite() && (v.abs() < 1e-3 || v.abs() >= 1e9) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

/// Ranks as a short list: `0, 1, 3` or `0-7`.
fn ranks(list: &[u32]) -> String {
    let contiguous = list.windows(2).all(|w| w[1] == w[0] + 1);
    match list {
        [] => String::new(),
        [one] => one.to_string(),
        [first, .., last] if contiguous && list.len() > 2 => format!("{first}-{last}"),
        _ => list
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn culprit(me: &Who, rank: u32, host_of: &dyn Fn(u32) -> Option<String>) -> Who {
    Who {
        rank: Some(rank),
        host: host_of(rank).unwrap_or_else(|| me.host.clone()),
    }
}

/// Every wrong row's finding, so a run with several patterns shows each pattern's own words;
/// consecutive sizes of one pattern with the same finding share a line (`all_reduce 8 B to
/// 65536 B (14 sizes): …`), so a GPU that runs nothing gives one line per pattern, not one
/// per size.
fn evidence(bad: &[&SizeResult]) -> Vec<String> {
    let mut groups: Vec<(&SizeResult, &SizeResult, usize, String)> = Vec::new();
    for r in bad {
        let text = finding(r).0;
        match groups.last_mut() {
            Some((_, last, n, t)) if last.pattern == r.pattern && *t == text => {
                *last = r;
                *n += 1;
            }
            _ => groups.push((r, r, 1, text)),
        }
    }
    groups
        .into_iter()
        .map(|(first, last, n, text)| match n {
            1 => format!("{}: {text}", label(first)),
            _ => format!(
                "{} {} B to {} B ({n} sizes): {text}",
                first.pattern, first.size_bytes, last.size_bytes
            ),
        })
        .collect()
}

/// The finding one wrong row makes, the rank it points at, and whether that rank is the
/// sender of a wrong value in a copy (rather than a rank that received something wrong).
fn finding(r: &SizeResult) -> (String, u32, bool) {
    if !r.found.nothing_written_ranks.is_empty() {
        let n = r.found.nothing_written_ranks.len();
        let on = if n == r.rank_avg_us.len() {
            "every rank".to_string()
        } else {
            format!("rank(s) {}", ranks(&r.found.nothing_written_ranks))
        };
        return (
            format!(
                "the collective wrote nothing into the receive buffer (it still holds the fill \
                 pattern) on {on}"
            ),
            r.found.nothing_written_ranks[0],
            false,
        );
    }
    if let Some((rank, runs)) = r.found.unwritten_ranges.first() {
        let shown: Vec<String> = runs.iter().map(|(a, b)| format!("{a}..{b}")).collect();
        return (
            format!(
                "{} of the received elements were never written (still the fill pattern); rank \
                 {rank}: elements {}{}",
                r.found.unwritten,
                shown.join(", "),
                if runs.len() >= crate::bench::verify::MAX_RANGES {
                    ", …"
                } else {
                    ""
                }
            ),
            *rank,
            false,
        );
    }
    let count = |n: u64| format!("{n} wrong element{}", if n == 1 { "" } else { "s" });
    if r.found.nan > 0 && r.found.nan == r.wrong {
        let (receiver, at) = r
            .first_wrong
            .as_ref()
            .map(|(rank, w)| (*rank, format!(", from element {}", w.index)))
            .unwrap_or((0, String::new()));
        return (
            format!(
                "{}, every one of them NaN (rank {receiver}{at}): the buffer was written, with \
                 NaNs",
                count(r.wrong)
            ),
            receiver,
            false,
        );
    }
    match &r.first_wrong {
        Some((receiver, w)) => match (w.from_rank, w.sender) {
            (Some(q), Some(s)) => (
                format!(
                    "{}; rank {receiver} received rank {q}'s data where rank {s}'s was due (from \
                     element {})",
                    count(r.wrong),
                    w.index
                ),
                *receiver,
                false,
            ),
            (Some(q), None) => (
                format!(
                    "{}; rank {receiver} holds rank {q}'s own input instead of the reduction of \
                     every rank's (from element {})",
                    count(r.wrong),
                    w.index
                ),
                *receiver,
                false,
            ),
            (None, sender) => (
                format!(
                    "{}; e.g. element {} received by rank {receiver} is {} (bytes {}) instead \
                     of {}{}",
                    count(r.wrong),
                    w.index,
                    shown(w.got),
                    w.got_hex,
                    shown(w.expected),
                    sender
                        .map(|s| format!(", sent by rank {s}"))
                        .unwrap_or_default()
                ),
                sender.unwrap_or(*receiver),
                sender.is_some(),
            ),
        },
        None => (count(r.wrong), 0, false),
    }
}

/// The ranks wrong values in a copy point at, from who sent wrong data to whom
/// (`Found::wrong_pairs`): a rank whose data was wrong at two or more receivers is named (its
/// sends, or its GPU, spoil them), and so is a rank that received wrong data from two or more
/// senders (its receives); a wrong element that neither explains is pinned on its sender, as a
/// single one is. Corruption on every rank names every rank; one rank's, that rank alone.
fn copy_culprits(pairs: &[(u32, Vec<u32>)]) -> Vec<u32> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut receivers_of: BTreeMap<u32, usize> = BTreeMap::new();
    for (_, senders) in pairs {
        for s in senders {
            *receivers_of.entry(*s).or_default() += 1;
        }
    }
    let mut named = BTreeSet::new();
    for (receiver, senders) in pairs {
        if senders.len() >= 2 {
            named.insert(*receiver);
        }
        for s in senders {
            if receivers_of[s] >= 2 || senders.len() < 2 {
                named.insert(*s);
            }
        }
    }
    named.into_iter().collect()
}

/// Wrong data in any row: the first wrong row's finding names the verdict's rank (the sender
/// of a wrong element where the pattern tells, else the rank that received it), and every
/// wrong row gets an evidence line. Never written, partly written, another rank's data and
/// wrong values are told apart. Wrong values in a copy name every rank the lead row's wrong
/// data points at (`copy_culprits`): one failure each, the lead's own first, alike but for
/// the rank, so that the job's verdict reads `on ranks 0, 1, 2`. Empty when no data was wrong.
pub fn verify_failures(
    rows: &[SizeResult],
    me: &Who,
    host_of: impl Fn(u32) -> Option<String>,
) -> Vec<Failure> {
    let Some(lead) = lead_row(rows) else {
        return Vec::new();
    };
    let (first, by_sender) = lead_failure(lead, rows, me, &host_of);
    let mut named = if by_sender {
        copy_culprits(&lead.found.wrong_pairs)
    } else {
        Vec::new()
    };
    if named.is_empty() {
        return vec![first];
    }
    // The lead's own rank first when it is among them (its words name it).
    named.sort_by_key(|r| Some(*r) != first.rank);
    named
        .into_iter()
        .map(|rank| {
            let who = culprit(me, rank, &host_of);
            let mut f = first.clone();
            f.rank = who.rank;
            f.host = who.host;
            f
        })
        .collect()
}

/// The row whose finding leads: nothing written, then partly written, then a wrong element
/// that names its sender (copies: it points at the rank that sent the bad data, where a
/// reduction's can only point at the rank that received it), then the first wrong row.
fn lead_row(rows: &[SizeResult]) -> Option<&SizeResult> {
    let bad: Vec<&SizeResult> = rows.iter().filter(|r| r.wrong > 0).collect();
    bad.iter()
        .find(|r| !r.found.nothing_written_ranks.is_empty())
        .or_else(|| bad.iter().find(|r| !r.found.unwritten_ranges.is_empty()))
        .or_else(|| {
            bad.iter().find(|r| {
                r.first_wrong
                    .as_ref()
                    .is_some_and(|(_, w)| w.sender.is_some())
            })
        })
        .or_else(|| bad.first())
        .copied()
}

/// The lead row's failure alone, and whether it is pinned on the sender of a wrong value in a
/// copy (see [`verify_failures`]).
fn lead_failure(
    lead: &SizeResult,
    rows: &[SizeResult],
    me: &Who,
    host_of: impl Fn(u32) -> Option<String>,
) -> (Failure, bool) {
    let bad: Vec<&SizeResult> = rows.iter().filter(|r| r.wrong > 0).collect();
    let (text, rank, by_sender) = finding(lead);
    let who = culprit(me, rank, &host_of);
    let also = if bad.len() > 1 {
        format!(
            " (and {} more pattern × size(s) wrong: evidence below)",
            bad.len() - 1
        )
    } else {
        String::new()
    };
    let (cause, hint) = if !lead.found.nothing_written_ranks.is_empty() {
        (
            "the kernel did not run or wrote elsewhere: a GPU that no longer executes work \
             (a wedged context, an Xid error), a driver fault, or an NCCL build that does not \
             match the GPU",
            "check dmesg for Xid errors and nvidia-smi for the GPU's state; rerun this pattern \
             alone with NCCL_DEBUG=INFO",
        )
    } else if !lead.found.unwritten_ranges.is_empty() {
        (
            "the transfer stopped part-way: a kernel or a proxy that ended early, or a \
             transport that dropped data",
            "rerun this pattern alone with NCCL_DEBUG=INFO; check link errors (nvidia-smi \
             nvlink -e, the InfiniBand port counters)",
        )
    } else if lead.found.nan > 0 && lead.found.nan == lead.wrong {
        (
            "NaNs where numbers were due: a reduction fed with NaN or infinity (uninitialised or \
             corrupted memory), or a kernel that wrote garbage",
            "check ECC errors (nvidia-smi -q -d ECC) and dmesg for Xid errors; rerun this \
             pattern alone",
        )
    } else if lead
        .first_wrong
        .as_ref()
        .is_some_and(|(_, w)| w.from_rank.is_some())
    {
        (
            "data went to the wrong place: a mis-routed transfer or a buffer addressing bug \
             (the library, or two ranks sharing one GPU or buffer)",
            "check that every rank has its own GPU (the fingerprint's bus ids); rerun with \
             another NCCL release",
        )
    } else {
        (
            "data was corrupted between ranks: a faulty link (NVLink/PCIe/network), GPU \
             memory, or a library bug",
            "rerun the failing pattern alone; check ECC and link errors (nvidia-smi -q -d ECC, \
             nvidia-smi nvlink -e, dmesg)",
        )
    };
    let mut f = Failure::new(
        Stage::Verify,
        &who,
        format!("{}: {text}{also}", label(lead)),
    )
    .cause(cause)
    .hint(hint);
    f.evidence = evidence(&bad);
    (f, by_sender)
}

/// The precondition of a pass: every pattern and size of the plan measured on every rank, and
/// every element checked. `expected_rows` is how many rows the sweep was to give. Zero rows,
/// a row with no checked element, or a row whose elements were not all checked is never a
/// pass.
pub fn coverage_failure(
    rows: &[SizeResult],
    expected_rows: usize,
    nranks: u32,
    check: bool,
    me: &Who,
) -> Option<Failure> {
    let why = if rows.is_empty() {
        Some("no size was measured".to_string())
    } else if rows.len() != expected_rows {
        Some(format!(
            "{} of the plan's {expected_rows} pattern × size measurements came back",
            rows.len()
        ))
    } else if let Some(r) = rows.iter().find(|r| r.rank_avg_us.len() != nranks as usize) {
        Some(format!(
            "{} has {} of the {nranks} ranks' measurements",
            label(r),
            r.rank_avg_us.len()
        ))
    } else if !check {
        None
    } else {
        // A 0-byte size (all-to-all rounds small sizes down to nothing per peer, as nccl-tests
        // does) has nothing to check; every other size must have been checked, and the run as
        // a whole must have checked something.
        rows.iter()
            .find(|r| !r.checked || (r.size_bytes > 0 && r.found.checked_elements == 0))
            .map(|r| format!("{}: no element was checked", label(r)))
            .or_else(|| {
                (rows.iter().map(|r| r.found.checked_elements).sum::<u64>() == 0)
                    .then(|| "no element of any size was checked (every size is 0 bytes)".into())
            })
    };
    why.map(|why| {
        Failure::new(Stage::Verify, me, format!("the run cannot pass: {why}"))
            .cause("a measurement was lost between the ranks and rank 0")
            .hint("rerun; if it recurs, report it as a bug in nccl-smoke with the results file")
    })
}

/// A size whose every timed iteration, on some rank, took less than the event timer's
/// resolution although bytes were to move: the collective did not run, so its time and
/// bandwidth mean nothing.
pub fn timer_failure(
    rows: &[SizeResult],
    me: &Who,
    host_of: impl Fn(u32) -> Option<String>,
) -> Option<Failure> {
    let r = rows
        .iter()
        .find(|r| !r.found.below_timer_ranks.is_empty())?;
    let rank = r.found.below_timer_ranks[0];
    let who = culprit(me, rank, &host_of);
    Some(
        Failure::new(
            Stage::Run,
            &who,
            format!(
                "{}: every timed iteration took less than the event timer's resolution \
                 ({TIMER_RESOLUTION_US} µs) on rank(s) {}: the collective did not run, so no \
                 time or bandwidth is reported for it",
                label(r),
                ranks(&r.found.below_timer_ranks)
            ),
        )
        .cause("the operation returned without doing its work: a GPU that does not execute kernels, or a library that skipped it")
        .hint("check dmesg for Xid errors and nvidia-smi for the GPU's state; rerun with NCCL_DEBUG=INFO"),
    )
}

#[cfg(test)]
mod tests;
