//! `nccl-smoke isolate`'s verdict per host: which host to drain, which link to check, from the
//! rounds in which hosts ran alone, in pairs, and re-paired with hosts that passed.
//!
//! The rules (ours; NCCL has no such feature, as its maintainers said in NVIDIA/nccl#1324):
//! - A host that fails **alone** is failed, at the stage it failed, with its own evidence.
//! - A host that passes alone but fails with **every** partner it met (and those partners pass
//!   with someone else) is failed: its network, or its side of the fabric.
//! - A failed pair whose two hosts both pass with other partners points at the **link** between
//!   them: both are named, with the pair as the evidence, and neither is drained.
//! - A failed group is counted against all its hosts until other rounds clear them: a hung pair
//!   says nothing about which side hung.
//! - **Slow**: each host's bus bandwidth (alone, and its best with any partner, so that a slow
//!   partner does not make a host look slow) is compared with the median over the other hosts.
//!   A host is slow when it is more than 3 scaled median absolute deviations of the other hosts
//!   *and* more than 25 % below their median (the second bound keeps a quiet cluster, whose MAD
//!   is near zero, from flagging noise; `--slow-below` sets it). Both bounds are ours.

use crate::bench::SizeResult;
use crate::report::expect::Expectations;
use crate::stage::{Stage, exit};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Which kind of round a group ran in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Each host on its own (intra-host transports).
    Alone,
    /// Hosts in pairs: a perfect matching, then a shifted one (or every pair).
    Pairs,
    /// A suspect re-paired with a host that passed.
    Confirm,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Alone => "alone",
            Phase::Pairs => "pairs",
            Phase::Confirm => "confirm",
        }
    }
}

/// How one group's round ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum Outcome {
    /// Every rank finished: one row per pattern at the measured size.
    Passed { rows: Vec<SizeResult> },
    /// The group failed; `culprits` are the hosts its culprit ranks are on (the verdict of the
    /// group's own failures, never the ranks that only saw a peer go).
    Failed {
        stage: Stage,
        culprits: Vec<String>,
        line: String,
        exit_code: u8,
    },
}

/// One group of one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupResult {
    pub round: u32,
    pub phase: Phase,
    pub hosts: Vec<String>,
    pub ranks: Vec<u32>,
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl GroupResult {
    fn passed(&self) -> bool {
        matches!(self.outcome, Outcome::Passed { .. })
    }
}

/// What a host was found to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostStatus {
    Ok,
    Slow,
    Failed,
    /// Fails only with one partner, which passes with others: the link between them.
    Link,
    /// Its network speed could not be judged: two hosts and no floor, or pairs below a floor
    /// that no partner clears (`floors.rs`). Not drained, and not a pass.
    Undecided,
}

impl HostStatus {
    pub fn name(self) -> &'static str {
        match self {
            HostStatus::Ok => "ok",
            HostStatus::Slow => "slow",
            HostStatus::Failed => "failed",
            HostStatus::Link => "link",
            HostStatus::Undecided => "undecided",
        }
    }
}

/// One host's line of the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostVerdict {
    pub host: String,
    pub ranks: Vec<u32>,
    /// Groups it took part in.
    pub rounds: u32,
    /// Bus bandwidth of the first pattern: alone, and best with any partner (GB/s).
    pub alone_busbw_gbs: Option<f64>,
    pub paired_busbw_gbs: Option<f64>,
    /// Its lower score (alone or paired) over the median host's, all patterns averaged.
    pub vs_median: Option<f64>,
    pub status: HostStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// The partner a `link` host fails with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partner: Option<String>,
    pub evidence: Vec<String>,
}

/// The whole verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IsolateReport {
    pub hosts: Vec<HostVerdict>,
    pub groups: Vec<GroupResult>,
    /// Hosts to take out of service (failed or slow).
    pub drain: Vec<String>,
    /// Links to check: host pairs that fail only with each other.
    pub links: Vec<[String; 2]>,
    /// The one-line verdict.
    pub line: String,
    pub exit_code: u8,
    /// Where the groups' communicators came from.
    #[serde(default)]
    pub source: GroupSource,
    /// Floors of `--expect` that no passed group met the conditions of (its pattern, size or
    /// rank count): they checked nothing, and the table says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unchecked_floors: Vec<String>,
}

/// Where the groups' communicators came from: `ncclCommSplit` of one job-wide communicator in
/// some rounds, fresh unique ids in the others.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupSource {
    /// Rounds whose groups were split off the job-wide communicator.
    pub split_rounds: Vec<u32>,
    /// Why the other rounds' groups came from fresh unique ids (`None` when none did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fresh_because: Option<String>,
    /// Groups of a split round that was run again with fresh ids (not judged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub set_aside: Vec<GroupResult>,
}

impl GroupSource {
    /// One line: which source built the groups of which rounds, and why.
    pub fn describe(&self) -> String {
        const SPLIT: &str = "ncclCommSplit of a job-wide communicator";
        const FRESH: &str = "fresh unique ids";
        let why = self.fresh_because.as_deref().unwrap_or("");
        match (self.split_rounds.as_slice(), self.fresh_because.is_some()) {
            ([], _) => format!("{FRESH} ({why})"),
            (_, false) => SPLIT.to_string(),
            (r, true) => {
                let list: Vec<String> = r.iter().map(u32::to_string).collect();
                format!(
                    "{SPLIT} in round(s) {}, then {FRESH} ({why})",
                    list.join(", ")
                )
            }
        }
    }
}

/// The per-host verdict from every group's outcome. `hosts` in host order, with their ranks; a
/// host more than `slow_fraction` below the others' median (and beyond [`MAD_LIMIT`]) is slow,
/// and so is one below a floor of `floors` (see `floors.rs`).
pub fn judge(
    hosts: &[(String, Vec<u32>)],
    groups: &[GroupResult],
    slow_fraction: f64,
    floors: Option<&Expectations>,
) -> IsolateReport {
    let alone_scores = scores(groups, |p| p == Phase::Alone);
    let paired_scores = scores(groups, |p| p != Phase::Alone);
    let in_group = |h: &str, g: &GroupResult| g.hosts.iter().any(|x| x == h);
    let multi = |g: &GroupResult| g.hosts.len() > 1;

    let failed_alone = |h: &str| {
        groups
            .iter()
            .find(|g| g.phase == Phase::Alone && in_group(h, g) && !g.passed())
    };
    let partners = |h: &str, passed: bool| -> Vec<(&GroupResult, String)> {
        groups
            .iter()
            .filter(|g| multi(g) && in_group(h, g) && g.passed() == passed)
            .flat_map(|g| {
                g.hosts
                    .iter()
                    .filter(|x| *x != h)
                    .map(move |x| (g, x.clone()))
            })
            .collect()
    };
    // A partner explains a failed pair when it failed alone or failed with everyone.
    let fails_with_all = |h: &str| partners(h, true).is_empty() && !partners(h, false).is_empty();

    let mut out: Vec<HostVerdict> = Vec::new();
    for (host, ranks) in hosts {
        let h = host.as_str();
        let rounds = groups.iter().filter(|g| in_group(h, g)).count() as u32;
        let mut v = HostVerdict {
            host: host.clone(),
            ranks: ranks.clone(),
            rounds,
            alone_busbw_gbs: None,
            paired_busbw_gbs: None,
            vs_median: None,
            status: HostStatus::Ok,
            stage: None,
            partner: None,
            evidence: Vec::new(),
        };
        if let Some(g) = failed_alone(h) {
            if let Outcome::Failed { stage, line, .. } = &g.outcome {
                v.status = HostStatus::Failed;
                v.stage = Some(*stage);
                v.evidence
                    .push(format!("alone (round {}): {line}", g.round));
            }
            out.push(v);
            continue;
        }
        let bad: Vec<(&GroupResult, String)> = partners(h, false)
            .into_iter()
            .filter(|(_, p)| failed_alone(p).is_none())
            .collect();
        let good = partners(h, true);
        if !bad.is_empty() && good.is_empty() {
            // Failed with every partner it met; are the partners fine elsewhere?
            let cleared: Vec<&String> = bad
                .iter()
                .map(|(_, p)| p)
                .filter(|p| !partners(p, true).is_empty())
                .collect();
            if !cleared.is_empty() {
                v.status = HostStatus::Failed;
                for (g, p) in &bad {
                    if let Outcome::Failed { stage, line, .. } = &g.outcome {
                        v.stage.get_or_insert(*stage);
                        v.evidence
                            .push(format!("with {p} (round {}, {stage}): {line}", g.round));
                    }
                }
                v.evidence.push(format!(
                    "its partners pass with other hosts: {}",
                    cleared
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            } else {
                // Nobody it met is known good: a suspect the rounds could not settle.
                v.status = HostStatus::Failed;
                for (g, p) in &bad {
                    if let Outcome::Failed { stage, line, .. } = &g.outcome {
                        v.stage.get_or_insert(*stage);
                        v.evidence.push(format!(
                            "with {p} (round {}, {stage}): {line} (not confirmed against a \
                             host that passed)",
                            g.round
                        ));
                    }
                }
            }
        } else {
            for (g, p) in &bad {
                if fails_with_all(p) {
                    continue;
                }
                if let Outcome::Failed { stage, line, .. } = &g.outcome {
                    v.status = HostStatus::Link;
                    v.stage.get_or_insert(*stage);
                    v.partner.get_or_insert(p.clone());
                    v.evidence.push(format!(
                        "fails only with {p} (round {}, {stage}): {line}; passes with {}",
                        g.round,
                        good.iter()
                            .map(|(_, x)| x.as_str())
                            .collect::<BTreeSet<_>>()
                            .into_iter()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
        out.push(v);
    }

    // Bandwidth: alone, and best with any partner.
    let host_score = |h: &str, sc: &[Option<f64>], pick: &dyn Fn(&GroupResult) -> bool| {
        groups
            .iter()
            .zip(sc)
            .filter(|(g, _)| in_group(h, g) && pick(g))
            .filter_map(|(g, s)| s.map(|s| (s, first_busbw(g))))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    };
    let alone: Vec<Option<(f64, Option<f64>)>> = out
        .iter()
        .map(|v| host_score(&v.host, &alone_scores, &|g| g.phase == Phase::Alone))
        .collect();
    let paired: Vec<Option<(f64, Option<f64>)>> = out
        .iter()
        .map(|v| host_score(&v.host, &paired_scores, &|g| g.hosts.len() > 1))
        .collect();
    let flags = |xs: &[Option<(f64, Option<f64>)>]| {
        let idx: Vec<usize> = (0..xs.len()).filter(|i| xs[*i].is_some()).collect();
        let vals: Vec<f64> = idx.iter().map(|i| xs[*i].unwrap().0).collect();
        let med = median(&vals);
        let low = low_outliers(&vals, slow_fraction);
        let mut f = vec![None; xs.len()];
        for (k, i) in idx.iter().enumerate() {
            f[*i] = Some((low[k], vals[k], med.unwrap_or(0.0)));
        }
        f
    };
    let (alone_flags, paired_flags) = (flags(&alone), flags(&paired));
    for (i, v) in out.iter_mut().enumerate() {
        v.alone_busbw_gbs = alone[i].and_then(|a| a.1);
        v.paired_busbw_gbs = paired[i].and_then(|a| a.1);
        let ratios: Vec<f64> = [alone_flags[i], paired_flags[i]]
            .iter()
            .flatten()
            .map(|(_, s, m)| if *m > 0.0 { s / m } else { 1.0 })
            .collect();
        v.vs_median = ratios.iter().copied().reduce(f64::min);
        if v.status != HostStatus::Ok {
            continue;
        }
        for (flag, what) in [
            (alone_flags[i], "alone"),
            (paired_flags[i], "with its best partner"),
        ] {
            if let Some((true, s, m)) = flag {
                v.status = HostStatus::Slow;
                v.evidence.push(format!(
                    "{what}: {:.0} % of the median host's bus bandwidth (over {} % below, \
                     beyond {MAD_LIMIT} scaled MADs)",
                    100.0 * s / m,
                    (100.0 * slow_fraction).round() as u32
                ));
            }
        }
    }

    let short = floors.map(|f| floors::shortfalls(f, groups));
    let by_floor = short
        .as_deref()
        .map(|s| floors::apply(&mut out, groups, s))
        .unwrap_or_default();
    let not_judged = floors::two_hosts_without_floor(&mut out, by_floor.judged_pairs);

    let drain: Vec<String> = out
        .iter()
        .filter(|v| matches!(v.status, HostStatus::Failed | HostStatus::Slow))
        .map(|v| v.host.clone())
        .collect();
    let mut links: Vec<[String; 2]> = Vec::new();
    for v in &out {
        if let Some(p) = &v.partner {
            let mut pair = [v.host.clone(), p.clone()];
            pair.sort();
            if !links.contains(&pair) {
                links.push(pair);
            }
        }
    }
    let exit_code = out
        .iter()
        .find(|v| v.status == HostStatus::Failed)
        .or_else(|| out.iter().find(|v| v.status == HostStatus::Link))
        .and_then(|v| v.stage)
        .map(|s| s.exit_code())
        .or_else(|| {
            (out.iter().any(|v| v.status == HostStatus::Slow) || !by_floor.undecided.is_empty())
                .then_some(exit::BELOW_EXPECTED)
        })
        .or_else(|| not_judged.is_some().then_some(exit::NOT_JUDGED))
        .unwrap_or(exit::PASS);
    let undecided = if by_floor.undecided.is_empty() {
        not_judged
    } else {
        Some(format!(
            "cannot tell which of {} is slow: below the floor with every partner, and no \
             partner clears it",
            by_floor.undecided.join(", ")
        ))
    };
    let line = verdict_line(&out, &drain, &links, undecided.as_deref());
    IsolateReport {
        hosts: out,
        groups: groups.to_vec(),
        drain,
        links,
        line,
        exit_code,
        source: GroupSource::default(),
        unchecked_floors: floors
            .map(|f| floors::unchecked(f, groups))
            .unwrap_or_default(),
    }
}

fn verdict_line(
    hosts: &[HostVerdict],
    drain: &[String],
    links: &[[String; 2]],
    undecided: Option<&str>,
) -> String {
    if drain.is_empty() && links.is_empty() && undecided.is_none() {
        return format!("every host passed: {} host(s) ok", hosts.len());
    }
    let mut parts = Vec::new();
    if !drain.is_empty() {
        let named: Vec<String> = hosts
            .iter()
            .filter(|v| drain.contains(&v.host))
            .map(|v| match (v.status, v.stage) {
                (HostStatus::Slow, _) => format!("{} (slow)", v.host),
                (_, Some(s)) => format!("{} (failed at {s})", v.host),
                _ => format!("{} ({})", v.host, v.status.name()),
            })
            .collect();
        parts.push(format!("drain {}", named.join(", ")));
    }
    if !links.is_empty() {
        let named: Vec<String> = links.iter().map(|[a, b]| format!("{a} <-> {b}")).collect();
        parts.push(format!("check the link {}", named.join(", ")));
    }
    parts.extend(undecided.map(String::from));
    match hosts.iter().filter(|v| v.status == HostStatus::Ok).count() {
        0 => parts.join("; "),
        ok => format!("{}; {ok} other host(s) ok", parts.join("; ")),
    }
}

mod floors;
mod scores;
mod table;
pub use scores::{MAD_LIMIT, SLOW_FRACTION, low_outliers};
use scores::{first_busbw, median, scores};
pub use table::table;

#[cfg(test)]
mod tests;
