//! What a host's figures are judged against when the other hosts cannot be the reference: a
//! floor of an expectations file (`isolate --expect FILE`), and, with only two hosts in pairs
//! and no floor, nothing (the verdict says so instead of passing them).
//!
//! A pair's bandwidth is bounded by its slower host, so a pair below a floor says only that one
//! of its two hosts is slow. A host is slow when every pair it was in is below the floor while a
//! partner of it meets the floor with another host (the same reasoning as for a host that
//! fails with every partner); when no partner is cleared that way, which of them is slow is
//! not known, and the verdict says so (ours; NCCL has no such feature).

use super::{GroupResult, HostStatus, HostVerdict, Outcome, Phase};
use crate::report::expect::{self, Expectations, System};

/// Per group: `None` when it did not pass or no floor of `exp` applies to its rows (its
/// pattern, size and rank count), else the rows below their floor (empty: every floor met).
pub(super) fn shortfalls(exp: &Expectations, groups: &[GroupResult]) -> Vec<Option<Vec<String>>> {
    groups
        .iter()
        .map(|g| {
            let Outcome::Passed { rows } = &g.outcome else {
                return None;
            };
            let n = System::ranks_only(g.ranks.len() as u32);
            if expect::unchecked(exp, rows, &n).len() == exp.floors.len() {
                return None;
            }
            Some(
                expect::check(exp, rows, &n)
                    .iter()
                    .map(expect::Shortfall::what)
                    .collect(),
            )
        })
        .collect()
}

/// Floors that applied to no passed group (as [`expect::unchecked`] words them): with groups
/// of another rank count than a floor's `ranks`, or sizes not swept, `--expect` checked
/// nothing, and that is said rather than passed over. Nothing when no group passed: the
/// verdict is a failure then, and "not checked" would blame the file.
pub(super) fn unchecked(exp: &Expectations, groups: &[GroupResult]) -> Vec<String> {
    let mut passed = groups.iter().filter_map(|g| match &g.outcome {
        Outcome::Passed { rows } => Some(expect::unchecked(
            exp,
            rows,
            &System::ranks_only(g.ranks.len() as u32),
        )),
        _ => None,
    });
    let Some(mut left) = passed.next() else {
        return Vec::new();
    };
    for other in passed {
        left.retain(|f| other.contains(f));
    }
    left
}

/// What the floors decided.
#[derive(Debug, Default, PartialEq)]
pub(super) struct FloorVerdict {
    /// A floor applied to at least one pair (or larger group).
    pub judged_pairs: bool,
    /// Hosts left undecided by a pair below the floor: which side is slow is not known.
    pub undecided: Vec<String>,
}

/// Marks slow (or undecided) every host still `ok` whose figures fall below a floor: alone,
/// or with every partner it met.
pub(super) fn apply(
    out: &mut [HostVerdict],
    groups: &[GroupResult],
    short: &[Option<Vec<String>>],
) -> FloorVerdict {
    let with = |h: &str| -> Vec<(&GroupResult, &[String])> {
        groups
            .iter()
            .zip(short)
            .filter(|(g, _)| g.hosts.len() > 1 && g.hosts.iter().any(|x| x == h))
            .filter_map(|(g, s)| s.as_deref().map(|s| (g, s)))
            .collect()
    };
    let meets_with_someone = |h: &str| with(h).iter().any(|(_, s)| s.is_empty());
    let mut verdict = FloorVerdict {
        judged_pairs: groups
            .iter()
            .zip(short)
            .any(|(g, s)| g.hosts.len() > 1 && s.is_some()),
        ..FloorVerdict::default()
    };
    for v in out.iter_mut().filter(|v| v.status == HostStatus::Ok) {
        let h = v.host.clone();
        let alone: Vec<String> = groups
            .iter()
            .zip(short)
            .filter(|(g, _)| g.phase == Phase::Alone && g.hosts.contains(&h))
            .flat_map(|(g, s)| {
                s.iter()
                    .flatten()
                    .map(move |l| format!("alone (round {}): {l}", g.round))
            })
            .collect();
        if !alone.is_empty() {
            v.status = HostStatus::Slow;
            v.evidence.extend(alone);
            continue;
        }
        let pairs: Vec<(&GroupResult, &[String])> = with(&h);
        if pairs.is_empty() || pairs.iter().any(|(_, s)| s.is_empty()) {
            continue;
        }
        let partners: Vec<&String> = pairs
            .iter()
            .flat_map(|(g, _)| g.hosts.iter().filter(|x| **x != h))
            .collect();
        let cleared: Vec<&str> = partners
            .iter()
            .filter(|p| meets_with_someone(p))
            .map(|p| p.as_str())
            .collect();
        for (g, s) in &pairs {
            let others: Vec<&str> = g
                .hosts
                .iter()
                .filter(|x| **x != h)
                .map(String::as_str)
                .collect();
            v.evidence.push(format!(
                "with {} (round {}): {}",
                others.join(", "),
                g.round,
                s.join("; ")
            ));
        }
        if cleared.is_empty() {
            v.status = HostStatus::Undecided;
            v.evidence.push(
                "below the floor with every partner, and no partner met it with another host: \
                 which side is slow is not known"
                    .into(),
            );
            verdict.undecided.push(h);
        } else {
            v.status = HostStatus::Slow;
            v.evidence.push(format!(
                "its partners meet the floor with other hosts: {}",
                cleared.join(", ")
            ));
        }
    }
    verdict
}

/// With exactly two hosts measured in pairs and no floor for their pair, the pair's bandwidth
/// has no reference: both hosts still `ok` become undecided, the figures in their evidence.
/// Returns the phrase for the verdict line, or `None` when the hosts could be judged.
pub(super) fn two_hosts_without_floor(
    out: &mut [HostVerdict],
    judged_pairs: bool,
) -> Option<String> {
    let paired: Vec<usize> = (0..out.len())
        .filter(|i| out[*i].paired_busbw_gbs.is_some())
        .collect();
    if judged_pairs || paired.len() != 2 || paired.iter().any(|i| out[*i].status != HostStatus::Ok)
    {
        return None;
    }
    let gb = |x: Option<f64>| {
        x.map(|v| format!("{v:.2} GB/s"))
            .unwrap_or_else(|| "-".into())
    };
    let (a, b) = (&out[paired[0]], &out[paired[1]]);
    let figures = format!(
        "{} alone {}, {} alone {}, together {}",
        a.host,
        gb(a.alone_busbw_gbs),
        b.host,
        gb(b.alone_busbw_gbs),
        gb(a.paired_busbw_gbs)
    );
    let phrase = format!(
        "the network between {} and {} is not judged: with 2 hosts and no floor there is no \
         reference for their pair ({figures}); give --expect FILE",
        a.host, b.host
    );
    for i in paired {
        out[i].status = HostStatus::Undecided;
        out[i]
            .evidence
            .push(format!("2 hosts, no floor: {figures}"));
    }
    Some(phrase)
}
