//! What rank 0 makes of the job's status for people and for the results file: the rank table
//! and the one line per rank it prints when the job fails or hangs.

use super::JobView;
use crate::error::Failure;
use crate::report::results::{RankRecord, RankState};
use crate::stage::Stage;

impl JobView {
    /// The per-rank table of the results file: `me` (rank 0), then every other rank, the ones
    /// never heard from included.
    pub fn records(&self, me: RankRecord) -> Vec<RankRecord> {
        let mut out = vec![me];
        for rank in 1..self.nranks.max(1) {
            let Some(v) = self.ranks.get(&rank) else {
                out.push(RankRecord {
                    rank,
                    host: String::new(),
                    state: RankState::Silent,
                    exit_code: None,
                    stage: None,
                    step: None,
                    stages: Vec::new(),
                });
                continue;
            };
            let (state, code) = match &v.ended {
                Some((c, f)) => (RankState::ended(*c, f.as_ref()), Some(*c)),
                None if v.lost => (RankState::Lost, None),
                None if v.unresponsive => (RankState::Unresponsive, None),
                // Its failure arrived, its end not yet: failed, as `failures` says, not running.
                None if self.failure_of(rank).is_some() => (RankState::Failed, None),
                None => (RankState::Running, None),
            };
            out.push(RankRecord {
                rank,
                host: v.host.clone(),
                state,
                exit_code: code,
                stage: v.stage,
                step: v.step.clone(),
                stages: v.stages.clone(),
            });
        }
        out
    }

    /// The failure a rank reported, if any (its own, or the one it saw).
    fn failure_of(&self, rank: u32) -> Option<&Failure> {
        self.failures.iter().find(|f| f.rank == Some(rank))
    }

    /// One line per rank, plus the ranks never heard from: what rank 0 prints when the job
    /// fails or hangs. `me` is rank 0's stage and step, and its failure when it has one, so
    /// that its line agrees with the verdict above it.
    pub fn summary(&self, me: Option<(Stage, Option<&str>, Option<&Failure>)>) -> Vec<String> {
        let mut out = Vec::new();
        match me {
            Some((_, _, Some(f))) => {
                out.push(format!("# job: rank 0 failed at {} (above)", f.stage))
            }
            Some((stage, step, None)) => out.push(format!(
                "# job: rank 0 in {stage}{}",
                step.map(|s| format!(" ({s})")).unwrap_or_default()
            )),
            None => {}
        }
        for (rank, v) in &self.ranks {
            let state = match (&v.ended, v.lost) {
                (Some((0, _)), _) => "finished".to_string(),
                (Some((code, Some(f))), _) => {
                    format!("ended with exit code {code} (FAIL at {}, above)", f.stage)
                }
                (Some((code, None)), _) => format!("ended with exit code {code}"),
                (None, true) => format!(
                    "lost contact during {} {:.0} s ago (process or host gone)",
                    v.stage.map(|s| s.name()).unwrap_or("launch"),
                    v.last_heard.elapsed().as_secs_f64()
                ),
                (None, false) if v.unresponsive => format!(
                    "stopped answering during {}, last heard {:.0} s ago",
                    v.stage.map(|s| s.name()).unwrap_or("launch"),
                    v.last_heard.elapsed().as_secs_f64()
                ),
                // Its failure is known (above), its process has not ended yet.
                (None, false) if let Some(f) = self.failure_of(*rank) => {
                    format!("failed at {} (above), not ended yet", f.stage)
                }
                (None, false) => format!(
                    "in {}{}, last heard {:.0} s ago",
                    v.stage.map(|s| s.name()).unwrap_or("launch"),
                    v.step
                        .as_deref()
                        .map(|s| format!(" ({s})"))
                        .unwrap_or_default(),
                    v.last_heard.elapsed().as_secs_f64()
                ),
            };
            out.push(format!("# job: rank {rank} (host {}) {state}", v.host));
        }
        let missing: Vec<String> = (1..self.nranks)
            .filter(|r| !self.ranks.contains_key(r))
            .map(|r| r.to_string())
            .collect();
        // The status lines open after the launch stage's first collective: a job that ended in
        // its launch stage never opened them (the verdict above says why).
        let own_launch = matches!(me, Some((Stage::Launch, _, _)));
        let ranks = if missing.len() == 1 { "rank" } else { "ranks" };
        match (missing.join(", "), own_launch) {
            (m, _) if m.is_empty() => {}
            (m, true) => out.push(format!(
                "# job: {ranks} {m}: no status line (the job ended in its launch stage, before \
                 the status lines open)"
            )),
            (m, false) => out.push(format!("# job: ranks never heard from after launch: {m}")),
        }
        out
    }
}
