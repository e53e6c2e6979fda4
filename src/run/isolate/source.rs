//! Where each round's group communicators come from: `ncclCommSplit` of one job-wide
//! communicator while that works, fresh unique ids otherwise (see the module doc of
//! [`super`]). The decisions here are the coordinator's; they touch no library.

use crate::report::isolate::{GroupResult, GroupSource, Outcome};
use crate::stage::Stage;

/// `isolate --groups`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum Groups {
    /// ncclCommSplit of a job-wide communicator where every rank's library has it and that
    /// communicator comes up; fresh unique ids otherwise, and after a round where a group
    /// failed or hung.
    Auto,
    /// As auto, but a library without ncclCommSplit (NCCL < 2.18.1) is an error, not a
    /// fallback.
    Split,
    /// A fresh unique id per group, from its leader, in every round.
    Fresh,
}

/// The coordinator's running choice.
#[derive(Debug, Clone, Default)]
pub struct Choice {
    /// The job-wide communicator is up on every rank and may still be split.
    pub split: bool,
    pub record: GroupSource,
}

impl Choice {
    /// Before the job-wide communicator: whether to try it at all. `lacking` are the ranks whose
    /// library has no ncclCommSplit.
    pub fn start(mode: Groups, lacking: &[u32]) -> Result<(), String> {
        match mode {
            Groups::Fresh => Err("--groups fresh".into()),
            _ if !lacking.is_empty() => Err(format!(
                "the library lacks ncclCommSplit (NCCL < 2.18.1) on rank(s) {}",
                list(lacking)
            )),
            _ => Ok(()),
        }
    }

    /// The groups come from fresh ids from now on, because `why`.
    pub fn fresh(&mut self, why: String) {
        self.split = false;
        if self.record.fresh_because.is_none() {
            self.record.fresh_because = Some(why);
        }
    }

    /// Whether round `n` splits; `gone` are ranks already gone (a parent with a gone member
    /// cannot split).
    pub fn for_round(&mut self, n: u32, gone: &[u32]) -> bool {
        if self.split && !gone.is_empty() {
            self.fresh(format!(
                "switched before round {n}: rank(s) {} gone",
                list(gone)
            ));
        }
        if self.split {
            self.record.split_rounds.push(n);
        }
        self.split
    }

    /// Whether round `n` (its groups) must run again with fresh ids: it was split, and a
    /// group failed at init, which is where the split (collective over every rank) happens.
    pub fn run_again(&self, n: u32, groups: &[GroupResult]) -> bool {
        self.record.split_rounds.last() == Some(&n)
            && groups.iter().any(|g| {
                g.round == n
                    && matches!(
                        g.outcome,
                        Outcome::Failed {
                            stage: Stage::Init,
                            ..
                        }
                    )
            })
    }

    /// After round `n` (its groups): a group that failed or hung leaves the job-wide
    /// communicator unable to split again.
    pub fn after_round(&mut self, n: u32, groups: &[GroupResult]) {
        let failed = groups
            .iter()
            .any(|g| g.round == n && matches!(g.outcome, Outcome::Failed { .. }));
        if self.split && failed {
            self.fresh(format!(
                "switched after round {n}: a group failed or hung, and a communicator with a \
                 failed member cannot split again"
            ));
        }
    }
}

pub fn list(ranks: &[u32]) -> String {
    ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::isolate::Phase;

    fn group(round: u32, ok: bool) -> GroupResult {
        group_at(round, ok, Stage::Init)
    }

    fn group_at(round: u32, ok: bool, stage: Stage) -> GroupResult {
        GroupResult {
            round,
            phase: Phase::Pairs,
            hosts: vec!["a".into(), "b".into()],
            ranks: vec![0, 1],
            outcome: if ok {
                Outcome::Passed { rows: Vec::new() }
            } else {
                Outcome::Failed {
                    stage,
                    culprits: vec!["b".into()],
                    line: "x".into(),
                    exit_code: 16,
                }
            },
        }
    }

    #[test]
    fn the_parent_is_tried_unless_fresh_is_asked_or_a_library_lacks_split() {
        assert!(Choice::start(Groups::Auto, &[]).is_ok());
        assert!(Choice::start(Groups::Split, &[]).is_ok());
        assert_eq!(
            Choice::start(Groups::Fresh, &[]).unwrap_err(),
            "--groups fresh"
        );
        let why = Choice::start(Groups::Auto, &[3, 5]).unwrap_err();
        assert!(
            why.contains("lacks ncclCommSplit") && why.ends_with("3, 5"),
            "{why}"
        );
    }

    #[test]
    fn rounds_split_until_a_group_fails_then_stay_fresh() {
        let mut c = Choice {
            split: true,
            ..Choice::default()
        };
        assert!(c.for_round(1, &[]));
        c.after_round(1, &[group(1, true)]);
        assert!(c.for_round(2, &[]));
        c.after_round(2, &[group(2, true), group(2, false)]);
        assert!(!c.for_round(3, &[]));
        c.after_round(3, &[group(3, false)]);
        assert_eq!(c.record.split_rounds, vec![1, 2]);
        let d = c.record.describe();
        assert!(
            d.starts_with("ncclCommSplit of a job-wide communicator in round(s) 1, 2, then fresh unique ids (switched after round 2"),
            "{d}"
        );
    }

    #[test]
    fn a_split_round_that_failed_at_init_runs_again_fresh_but_not_a_later_failure() {
        let mut c = Choice {
            split: true,
            ..Choice::default()
        };
        assert!(c.for_round(1, &[]));
        assert!(c.run_again(1, &[group(1, true), group_at(1, false, Stage::Init)]));
        assert!(!c.run_again(1, &[group(1, true), group_at(1, false, Stage::Run)]));
        assert!(!c.run_again(1, &[group(1, true)]));
        // A fresh round is never run again.
        c.fresh("x".into());
        assert!(!c.for_round(2, &[]));
        assert!(!c.run_again(2, &[group_at(2, false, Stage::Init)]));
    }

    #[test]
    fn a_gone_rank_switches_before_the_round() {
        let mut c = Choice {
            split: true,
            ..Choice::default()
        };
        assert!(!c.for_round(1, &[6]));
        assert!(c.record.split_rounds.is_empty());
        assert_eq!(
            c.record.describe(),
            "fresh unique ids (switched before round 1: rank(s) 6 gone)"
        );
    }

    #[test]
    fn every_round_split_says_so_plainly() {
        let mut c = Choice {
            split: true,
            ..Choice::default()
        };
        c.for_round(1, &[]);
        assert_eq!(
            c.record.describe(),
            "ncclCommSplit of a job-wide communicator"
        );
    }
}
