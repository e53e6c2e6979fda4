//! The job's verdict: how much each failure says about its own rank, the culprit among every
//! failure known, and the state each rank is given in the results file's table.

use crate::error::{Failure, Kind};
use crate::stage::Stage;
use serde::{Deserialize, Serialize};

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Pass,
    Fail,
    /// Every stage passed, but the data was not checked (`-c 0`): measured, not a pass.
    Unverified,
    /// `--backend control-plane`: the real libnccl on simulated GPUs got through init and
    /// connect and aborted cleanly; no kernel ran, nothing was measured or checked. Not a pass.
    #[serde(rename = "CONTROL_PLANE_OK")]
    ControlPlaneOk,
    /// `isolate`: no host failed, but the hosts' speed had no reference to be judged against
    /// (two hosts, no floor). Not a pass.
    #[serde(rename = "NOT_JUDGED")]
    NotJudged,
    /// Still running, or killed before it could say.
    Incomplete,
    /// Stopped by a signal to the launcher (Ctrl-C, SIGTERM) before any rank failed; every
    /// size measured until then is kept.
    Cancelled,
}

/// The run's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub status: Status,
    /// The line printed at the end of the run.
    pub line: String,
    /// The process exit code this verdict gives.
    pub exit_code: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// Failures of other ranks that only followed from the verdict's (a peer that vanished,
    /// a wait that ran out), one line each: `rank R (host H) at STAGE: error`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consequences: Vec<String>,
    /// The ranks the verdict names (those that failed alike, first to fail first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<u32>,
}

/// How much a failure says about its own rank, most causal first. The job's verdict names the
/// failures of the most causal kind present, never the ranks that only saw their consequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Blame {
    /// The rank failed on its own: an error of its own, a crash, a kill, a stopped process, a
    /// supervisor that vanished or stopped answering.
    Own,
    /// A wait on other ranks ran out, with no sign of a peer leaving: one of them may be
    /// stuck without saying so.
    Waited,
    /// A peer went away first (`ncclRemoteError`, connections closed by the remote peer): the
    /// peer's own failure is the cause.
    Peer,
    /// The launcher stopped the rank (another rank failed, or the job was cancelled).
    Stopped,
}

/// How much `f` says about its own rank, from its kind (a peer's or a wait's failure is the
/// rank's own when its own log shows a local failure).
pub fn blame(f: &Failure) -> Blame {
    match f.kind {
        Kind::Stopped => Blame::Stopped,
        _ if f.own_evidence => Blame::Own,
        Kind::PeerGone => Blame::Peer,
        Kind::Waited => Blame::Waited,
        Kind::Own | Kind::Hung | Kind::Crashed => Blame::Own,
    }
}

/// The job's verdict from every failure known, in arrival order: the failures of the most
/// causal kind (see [`Blame`]), the first of them and the ranks that failed alike in one line,
/// and every other failure listed as a consequence; one failure on every one of the job's
/// `world` ranks (when known) is named so. `None` when there is none.
pub fn job_verdict(failures: &[Failure], world: Option<u32>) -> Option<Verdict> {
    let level = failures.iter().map(blame).min()?;
    let culprits: Vec<Failure> = failures
        .iter()
        .filter(|f| blame(f) == level)
        .cloned()
        .collect();
    let groups = crate::error::group(&culprits);
    let mut g = groups.first()?.clone();
    g.world = world;
    // Waits that ran out in one stage all point away from their ranks, at nobody in
    // particular: every one of them is as much a suspect, whatever its words.
    let waits = level == Blame::Waited;
    if waits {
        for other in groups
            .iter()
            .skip(1)
            .filter(|o| o.first.stage == g.first.stage)
        {
            for r in &other.ranks {
                if !g.ranks.contains(r) {
                    g.ranks.push(*r);
                }
            }
            for h in &other.hosts {
                if !g.hosts.contains(h) {
                    g.hosts.push(h.clone());
                }
            }
        }
    }
    let named = |f: &Failure| {
        blame(f) == level
            && ((waits && f.stage == g.first.stage)
                || crate::error::group(&[g.first.clone(), f.clone()]).len() == 1)
    };
    let mut consequences = Vec::new();
    // A rank named in the verdict is not also its consequence for being stopped after it.
    let stopped_named = |f: &Failure| f.is_stopped() && g.ranks.contains(&f.rank);
    for f in failures.iter().filter(|f| !named(f) && !stopped_named(f)) {
        let rank = f.rank.map(|r| r.to_string()).unwrap_or_else(|| "?".into());
        let line = format!("rank {rank} (host {}) at {}: {}", f.host, f.stage, f.error);
        if !consequences.contains(&line) {
            consequences.push(line);
        }
    }
    Some(Verdict {
        status: Status::Fail,
        line: g.to_string(),
        exit_code: g.first.exit_code(),
        stage: Some(g.first.stage),
        consequences,
        ranks: g.ranks.iter().flatten().copied().collect(),
    })
}

/// A rank's state in the results file's table (see `RankRecord::state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RankState {
    Finished,
    Failed,
    Consequence,
    Stopped,
    Cancelled,
    Running,
    Lost,
    Unresponsive,
    Silent,
}

impl RankState {
    /// The word the results file holds.
    pub fn as_str(&self) -> &'static str {
        match self {
            RankState::Finished => "finished",
            RankState::Failed => "failed",
            RankState::Consequence => "consequence",
            RankState::Stopped => "stopped",
            RankState::Cancelled => "cancelled",
            RankState::Running => "running",
            RankState::Lost => "lost",
            RankState::Unresponsive => "unresponsive",
            RankState::Silent => "silent",
        }
    }

    /// How a rank that ended is shown: `finished` (exit 0), `stopped` (by the launcher) or
    /// `failed`.
    pub fn ended(code: u8, failure: Option<&Failure>) -> RankState {
        match (code, failure) {
            (0, _) => RankState::Finished,
            (crate::stage::exit::CONTROL_PLANE_OK, None) => RankState::Finished,
            (_, Some(f)) if f.is_stopped() => RankState::Stopped,
            _ => RankState::Failed,
        }
    }
}

impl PartialEq<&str> for RankState {
    fn eq(&self, word: &&str) -> bool {
        self.as_str() == *word
    }
}

impl std::fmt::Display for RankState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::error::{STOPPED, WAITED_MARK};
    use crate::report::results::{RankRecord, tests::sample_doc};
    use crate::report::writer::agree;

    pub(crate) fn at(rank: u32, stage: Stage, error: &str) -> Failure {
        let who = crate::error::Who {
            rank: Some(rank),
            host: format!("h{rank}"),
        };
        // Read back as another process would: its kind from its words.
        let f = Failure::new(stage, &who, error);
        serde_json::from_value(serde_json::to_value(&f).unwrap()).unwrap()
    }

    pub(crate) const REMOTE: &str =
        "ncclCommGetAsyncError returned ncclRemoteError (6): remote process exited";

    #[test]
    fn the_verdict_names_the_culprit_whatever_arrives_first() {
        let culprit = at(
            1,
            Stage::Run,
            "the worker died of SIGKILL (Killed) during the run stage",
        );
        let victims = [at(0, Stage::Run, REMOTE), at(2, Stage::Run, REMOTE)];
        for order in [
            vec![culprit.clone(), victims[0].clone(), victims[1].clone()],
            vec![victims[0].clone(), victims[1].clone(), culprit.clone()],
            vec![victims[1].clone(), culprit.clone(), victims[0].clone()],
        ] {
            let v = job_verdict(&order, None).unwrap();
            assert!(
                v.line
                    .starts_with("FAIL at run on rank 1 (host h1): the worker died of SIGKILL"),
                "{}",
                v.line
            );
            assert_eq!(v.ranks, vec![1]);
            assert_eq!(v.exit_code, Stage::Run.exit_code());
            let mut named: Vec<&str> = v.consequences.iter().map(|c| &c[..6]).collect();
            named.sort();
            assert_eq!(named, vec!["rank 0", "rank 2"], "{:?}", v.consequences);
        }
    }

    #[test]
    fn a_stuck_rank_outranks_the_waits_that_ran_out_and_stopped_ranks_count_last() {
        let waited = at(
            0,
            Stage::Run,
            "timed iterations of all_reduce 8 bytes did not complete within 5.9 s",
        );
        let stuck = at(
            2,
            Stage::Run,
            "no progress for 4.1 s in the run stage: the worker is stopped (SIGSTOP)",
        );
        let stopped = at(1, Stage::Run, &format!("{STOPPED} during the run stage"));
        let v = job_verdict(&[stopped.clone(), waited.clone(), stuck.clone()], None).unwrap();
        assert_eq!(v.ranks, vec![2], "{}", v.line);
        // With no failure of a rank's own, the waits are the verdict; with nothing else, the stop.
        assert_eq!(
            job_verdict(&[stopped.clone(), waited], None).unwrap().ranks,
            vec![0]
        );
        assert_eq!(
            job_verdict(std::slice::from_ref(&stopped), None)
                .unwrap()
                .ranks,
            vec![1]
        );
        assert!(job_verdict(&[], None).is_none());
        let hung_waiting = at(
            3,
            Stage::Init,
            &format!("no progress for 7 s in the init stage {WAITED_MARK}"),
        );
        assert_eq!(blame(&hung_waiting), Blame::Waited);
    }

    #[test]
    fn waits_that_ran_out_in_one_stage_are_named_together_whatever_their_words() {
        // Rank 2's own wait ran out first; rank 0's supervisor found rank 3 still inside the
        // same step (a hang inside an operation looks alike on every rank); rank 1 was stopped
        // by the launcher, and is named with them instead of listed as their consequence.
        let fs = [
            at(
                2,
                Stage::Run,
                "latency iterations of all_reduce 512 bytes did not complete within 5.5 s",
            ),
            at(
                3,
                Stage::Run,
                &format!("still inside the run stage when the job ended, {WAITED_MARK}"),
            ),
            at(1, Stage::Run, &format!("{STOPPED} during the run stage")),
            at(
                0,
                Stage::Finalize,
                "communicator teardown did not complete within 5.5 s",
            ),
        ];
        let v = job_verdict(&fs, None).unwrap();
        assert_eq!(v.ranks, vec![2, 3], "{}", v.line);
        assert!(
            v.line.starts_with("FAIL at run on ranks 2, 3 "),
            "{}",
            v.line
        );
        // The wait in another stage stays a consequence; rank 1's stop is one too (not named).
        assert_eq!(v.consequences.len(), 2, "{:?}", v.consequences);
        // Once rank 1 is found stuck too, its stop is not listed beside its name.
        let mut more = fs.to_vec();
        more.push(at(
            1,
            Stage::Run,
            &format!("still inside the run stage when the job ended, {WAITED_MARK}"),
        ));
        let v = job_verdict(&more, None).unwrap();
        assert_eq!(v.ranks, vec![2, 3, 1]);
        assert_eq!(v.consequences.len(), 1, "{:?}", v.consequences);
        // A failure of a rank's own still names that rank alone.
        more.push(at(1, Stage::Run, "unhandled cuda error"));
        assert_eq!(job_verdict(&more, None).unwrap().ranks, vec![1]);
    }

    #[test]
    fn one_failure_on_every_rank_is_named_so() {
        let fs: Vec<Failure> = (0..3)
            .map(|r| at(r, Stage::Launch, "simulated launch failure"))
            .collect();
        let all = job_verdict(&fs, Some(3)).unwrap();
        assert!(
            all.line
                .starts_with("FAIL at launch on all 3 ranks (hosts h0, h1, h2)"),
            "{}",
            all.line
        );
        assert_eq!(all.ranks, vec![0, 1, 2]);
        // Three of four is three ranks, named; so is every rank when the job's size is unknown.
        let some = job_verdict(&fs, Some(4)).unwrap();
        assert!(
            some.line.starts_with("FAIL at launch on ranks 0, 1, 2 "),
            "{}",
            some.line
        );
        let unknown = job_verdict(&fs, None).unwrap();
        assert_eq!(unknown.line, some.line);
    }

    #[test]
    fn ranks_failing_alike_share_the_verdict_and_the_table_agrees() {
        let fs = [
            at(2, Stage::ConnectProxy, "proxy connect failed on port 4711"),
            at(0, Stage::ConnectProxy, REMOTE),
            at(1, Stage::ConnectProxy, "proxy connect failed on port 4712"),
        ];
        let v = job_verdict(&fs, None).unwrap();
        assert!(
            v.line.starts_with("FAIL at connect:proxy on ranks 1, 2 "),
            "{}",
            v.line
        );
        assert_eq!(v.ranks, vec![2, 1]);
        assert_eq!(v.consequences.len(), 1);
        let mut doc = sample_doc();
        doc.verdict = v;
        doc.ranks = (0..3)
            .map(|rank| RankRecord {
                rank,
                host: format!("h{rank}"),
                state: RankState::Failed,
                exit_code: Some(19),
                stage: Some(Stage::ConnectProxy),
                step: None,
                stages: vec![],
            })
            .collect();
        agree(&mut doc);
        let states: Vec<RankState> = doc.ranks.iter().map(|r| r.state).collect();
        assert_eq!(
            states,
            [RankState::Consequence, RankState::Failed, RankState::Failed]
        );
    }
}
