//! The job's status line, independent of NCCL and of MPI collectives: every rank's supervisor
//! reports its worker's stages, heartbeats and end to rank 0's supervisor over TCP. Rank 0 can
//! then say, at any moment, which ranks are in which stage, which never reported, which died,
//! and keeps every rank's failure in its results file.
//!
//! Rank 0's worker learns the address at launch (from its supervisor's environment) and
//! broadcasts it with the first MPI collective; before that, each supervisor names only its own
//! rank (and says whether it reached the first collective).

use crate::error::{Failure, SUPERVISOR_SILENT, Who};
use crate::events::Event;
use crate::stage::{Stage, StageRecord};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often rank 0's supervisor tells each rank it is alive. Less often than the ranks beat:
/// at 16k ranks every word is a write on rank 0's node. A rank's wait for rank 0 is never
/// shorter than [`RANK0_SILENCE_FLOOR`], so a few words may be late or lost. An end report is
/// acknowledged at once, whatever this interval.
pub const RANK0_SAYS_EVERY: Duration = Duration::from_millis(500);

/// The shortest silence from rank 0 that a rank takes for rank 0's loss: four of its words.
pub const RANK0_SILENCE_FLOOR: Duration = Duration::from_millis(2000);

/// A gap this long between two turns of a supervisor's watch loop (which turns every 50 ms)
/// means the supervisor itself was stopped: the others' silence meanwhile is not theirs.
pub const SELF_STOPPED: Duration = Duration::from_millis(1000);

/// How often a supervisor says it is alive over the status line (both ways).
pub const ALIVE_EVERY: Duration = Duration::from_millis(100);

/// How many of those beats may go missing before a supervisor is named as not answering, in a
/// stage whose deadline is longer: 50 × 100 ms = 5 s. A host that drops off the network is
/// then named within about 5 s of the loss, not after its stage's deadline (minutes at the
/// defaults). Rank 0's own stalls are forgiven (see [`SELF_STOPPED`]).
pub const MISSED_BEATS: u32 = 50;

/// A rank of a host already named for silence that has itself been silent this long is named
/// with it (see [`JobView::name_unresponsive`]).
pub const HOST_SILENT: Duration = Duration::from_millis(1000);

/// How long a supervisor may stay silent in a stage whose deadline is `deadline`: the shorter
/// of that deadline and [`MISSED_BEATS`] beats.
pub fn liveness(deadline: Duration) -> Duration {
    deadline.min(ALIVE_EVERY * MISSED_BEATS)
}

/// The stage every failure of `known` is a wait that ran out in, the launcher's stops aside;
/// `None` when one is anything else (a failure of a rank's own names the culprit) or there is
/// none.
pub(super) fn all_waited_in_one_stage(known: &[Failure]) -> Option<Stage> {
    use crate::report::results::{Blame, blame};
    let waited = |f: &Failure| blame(f) == Blame::Waited;
    let mut own = known.iter().filter(|f| !f.is_stopped());
    let first = own.next()?;
    (waited(first) && own.all(|f| f.stage == first.stage && waited(f))).then_some(first.stage)
}

/// A rank found inside `stage` (at `step`) when the job ended, with no failure of its own,
/// while the ranks beside it reported waits that ran out there (see
/// [`JobView::stuck_alongside`]). Worded as a wait, which is what it is known to have been.
pub(super) fn stuck_in_step(who: &Who, stage: Stage, step: Option<&str>) -> Failure {
    Failure::new(
        stage,
        who,
        format!(
            "still inside the {stage} stage{} when the job ended, {} like the ranks named with it, \
             before its own wait ran out",
            step.map(|s| format!(" ({s})")).unwrap_or_default(),
            crate::error::WAITED_MARK
        ),
    )
    .cause(
        "no rank failed on its own: every rank named waited inside the same step, and from the \
         host a hang inside an operation looks alike on every rank; whose wait ran out first is \
         chance",
    )
    .hint(
        "look at each named rank's host: dmesg (Xid errors), nvidia-smi; rerun with \
         NCCL_DEBUG=INFO, and on NCCL 2.24+ ask NCCL's RAS (ncclras) for each rank's operation \
         count",
    )
    .kind(crate::error::Kind::Waited)
}
/// A write on the status line that takes longer than this is given up: a stopped peer
/// supervisor must not stop this one.
pub(super) const WRITE_LIMIT: Duration = Duration::from_millis(200);

/// One line from a rank's supervisor to rank 0's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub rank: u32,
    pub host: String,
    pub event: Event,
}

/// What rank 0 knows of one rank.
#[derive(Debug, Clone)]
pub struct RankView {
    pub host: String,
    pub stage: Option<Stage>,
    pub step: Option<String>,
    /// Whether that step waits on other ranks (a barrier, a gather).
    pub waiting: bool,
    /// What NCCL's RAS told it when a wait of its own ran out.
    pub notes: Vec<String>,
    pub last_heard: Instant,
    /// Exit code and failure, once the rank ended.
    pub ended: Option<(u8, Option<Failure>)>,
    /// The connection dropped without an end report: the rank (or its host) vanished.
    pub lost: bool,
    /// Its stages, timed by its supervisor, once it ended.
    pub stages: Vec<StageRecord>,
    /// Rank 0 named it for not answering (its supervisor is stopped, or its host is cut off).
    pub unresponsive: bool,
}

/// Rank 0's view of the job.
#[derive(Debug, Default)]
pub struct JobView {
    pub nranks: u32,
    pub ranks: BTreeMap<u32, RankView>,
    /// Failures reported by other ranks, in arrival order.
    pub failures: Vec<Failure>,
    /// Rank 0's side of each rank's connection, to say goodbye on (shared with the loop that
    /// reads them: one descriptor per rank).
    pub conns: Vec<Arc<TcpStream>>,
    /// Rank 0 has ended: the other ranks are told so, and no longer wait for it.
    pub bye: bool,
    /// How many reports have been applied (every beat included).
    pub heard: u64,
}

impl JobView {
    fn apply(&mut self, r: Report) {
        self.heard += 1;
        let v = self.ranks.entry(r.rank).or_insert_with(|| RankView {
            host: r.host.clone(),
            stage: None,
            step: None,
            waiting: false,
            notes: Vec::new(),
            last_heard: Instant::now(),
            ended: None,
            lost: false,
            stages: Vec::new(),
            unresponsive: false,
        });
        v.last_heard = Instant::now();
        match r.event {
            Event::Stage { stage, .. } => {
                v.stage = Some(stage);
                v.step = None;
                v.waiting = false;
            }
            Event::Step { what, waiting } => {
                v.step = Some(what);
                v.waiting = waiting;
            }
            Event::Failed { failure } => self.failures.push(failure),
            Event::Notes { lines } => v.notes = lines,
            Event::Ended {
                code,
                failure,
                stages,
            } => {
                if let Some(f) = &failure
                    && !self.failures.contains(f)
                {
                    self.failures.push(f.clone());
                }
                v.ended = Some((code, failure));
                v.stages = stages;
            }
            Event::Beat
            | Event::Alive
            | Event::Budget { .. }
            | Event::Results { .. }
            | Event::Doc { .. }
            | Event::Backend { .. }
            | Event::Ras { .. }
            | Event::Implicated { .. }
            | Event::StatusAddr { .. } => {}
        }
    }

    /// A rank's connection dropped without an end report: its supervisor was killed, or its
    /// host went down. That is the rank's own failure, unless the job had already failed (then
    /// the launcher is tearing it down).
    pub fn lose(&mut self, rank: u32) {
        let known_failure = !self.failures.is_empty();
        let Some(v) = self.ranks.get_mut(&rank) else {
            return;
        };
        if v.ended.is_some() || v.lost {
            return;
        }
        v.lost = true;
        if known_failure || self.bye {
            return;
        }
        let stage = v.stage.unwrap_or(Stage::Launch);
        let who = Who {
            rank: Some(rank),
            host: v.host.clone(),
        };
        self.failures.push(
            Failure::new(
                stage,
                &who,
                format!(
                    "its supervisor is gone: its status connection closed without an end report \
                     during the {stage} stage"
                ),
            )
            .cause(
                "the rank's supervisor was killed (SIGKILL, the OOM killer), or its host went down",
            )
            .hint(
                "check the host's kernel log (dmesg) and the scheduler's events for that process",
            ),
        );
    }

    /// Rank 0: names the ranks whose supervisors have said nothing (not even that they are
    /// alive) for longer than `limit` of their stage (see [`liveness`]), once each. Returns
    /// whether any was named now.
    ///
    /// A host that went silent silences all its ranks at once, but their last reports arrived
    /// some milliseconds apart: once one rank of a host is named, the others on that host
    /// silent for [`HOST_SILENT`] are named with it, so that the verdict names the host's
    /// ranks together.
    pub fn name_unresponsive(&mut self, limit: impl Fn(Stage) -> Duration) -> bool {
        let mut named = Vec::new();
        let over = |v: &RankView| v.last_heard.elapsed() > limit(v.stage.unwrap_or(Stage::Launch));
        let silent_hosts: Vec<String> = self
            .ranks
            .values()
            .filter(|v| v.ended.is_none() && !v.lost && over(v))
            .map(|v| v.host.clone())
            .collect();
        for (rank, v) in self.ranks.iter_mut() {
            let stage = v.stage.unwrap_or(Stage::Launch);
            if v.ended.is_some() || v.lost || v.unresponsive {
                continue;
            }
            let quiet = v.last_heard.elapsed();
            let with_host = silent_hosts.contains(&v.host) && quiet > HOST_SILENT;
            if quiet <= limit(stage) && !with_host {
                continue;
            }
            v.unresponsive = true;
            let who = Who {
                rank: Some(*rank),
                host: v.host.clone(),
            };
            named.push(
                Failure::new(
                    stage,
                    &who,
                    format!(
                        "{SUPERVISOR_SILENT}: no status report for {:.1} s during the {stage} \
                         stage (limit {:.1} s)",
                        quiet.as_secs_f64(),
                        limit(stage).as_secs_f64()
                    ),
                )
                .cause("the rank's supervisor process is stopped (SIGSTOP, a debugger), or its host is \
                        overloaded or cut off from rank 0's")
                .hint("look at that process's state on its host (ps -o stat,pid,cmd)"),
            );
        }
        let any = !named.is_empty();
        self.failures.extend(named);
        any
    }

    /// Rank 0, whose own wait on the other ranks ran out in `stage` (`waiting`: in a step that
    /// waits on them, a barrier or a gather) after `waited`: the ranks it was waiting for, as
    /// failures of their own. A rank is one when it is behind: in an earlier stage, or in the
    /// same stage inside a step of its own (an operation the others had finished) while rank 0
    /// waited at a barrier or gather. Its own report, if it is only a wait that ran out, is
    /// taken over (returned in its place); a rank that failed on its own, vanished or went
    /// silent is named already and left alone.
    pub fn laggards(&self, stage: Stage, waiting: bool, waited: Duration) -> Vec<(u32, Failure)> {
        use crate::report::results::{Blame, blame};
        let mut out = Vec::new();
        for (rank, v) in &self.ranks {
            if v.lost || v.unresponsive {
                continue;
            }
            let reported: Vec<&Failure> = self
                .failures
                .iter()
                .filter(|f| f.rank == Some(*rank))
                .collect();
            if reported.iter().any(|f| blame(f) != Blame::Waited) {
                continue;
            }
            let its = v.stage.unwrap_or(Stage::Launch);
            if !(its < stage || (its == stage && waiting && !v.waiting)) {
                continue;
            }
            let whereabouts = match &v.step {
                Some(step) => format!("{its} ({step})"),
                None => its.to_string(),
            };
            let who = Who {
                rank: Some(*rank),
                host: v.host.clone(),
            };
            let cause = "this rank stopped inside a step the other ranks had finished, and they waited \
                         for it: an operation of its own that never completed (a kernel that never \
                         ends, a stream that never drains, a GPU that stopped executing)";
            let hint = "look at this rank's host: dmesg (Xid errors), nvidia-smi; rerun with \
                        NCCL_DEBUG=INFO, and on NCCL 2.24+ ask NCCL's RAS (ncclras) for each rank's \
                        operation count";
            let f = match reported.first() {
                Some(own) => {
                    let mut f = (*own).clone();
                    f.error = format!(
                        "{} — it never got past {whereabouts}, where the other ranks waited for it",
                        f.error
                    );
                    f
                }
                None => Failure::new(
                    its,
                    &who,
                    format!(
                        "it never got past {whereabouts}: the ranks waiting for it gave up after \
                         {:.1} s",
                        waited.as_secs_f64()
                    ),
                ),
            };
            let mut f = f.cause(cause).hint(hint).kind(crate::error::Kind::Hung);
            for line in &v.notes {
                if !f.evidence.contains(line) {
                    f.evidence.push(line.clone());
                }
            }
            out.push((*rank, f));
        }
        out
    }

    /// When every failure known (`known`, rank 0's own among them when it has one) is a wait
    /// that ran out in one stage, no rank failed on its own: the other ranks still inside that
    /// stage with no report of their own (running, or stopped by the launcher before their
    /// wait ran out) were stuck in the same place, and are as much suspects as the ranks that
    /// reported. From the host, a hang inside an operation looks the same on every rank (each
    /// waits for the others); whose wait runs out first is chance, so they are named together
    /// instead of leaving out the ranks that were slower to report.
    pub fn stuck_alongside(&self, known: &[Failure]) -> Vec<Failure> {
        let Some(stage) = all_waited_in_one_stage(known) else {
            return Vec::new();
        };
        let reported = |r: u32| known.iter().any(|f| f.rank == Some(r) && !f.is_stopped());
        self.ranks
            .iter()
            .filter(|(rank, v)| {
                !reported(**rank)
                    && !v.lost
                    && !v.unresponsive
                    && v.stage == Some(stage)
                    && !matches!(v.ended, Some((0, _)))
                    && v.ended
                        .as_ref()
                        .is_none_or(|(_, f)| f.as_ref().is_none_or(Failure::is_stopped))
            })
            .map(|(rank, v)| {
                stuck_in_step(
                    &Who {
                        rank: Some(*rank),
                        host: v.host.clone(),
                    },
                    stage,
                    v.step.as_deref(),
                )
            })
            .collect()
    }

    /// Rank 0's supervisor was itself stopped for a while (see [`SELF_STOPPED`]): every rank's
    /// silence starts over now.
    pub fn forgive_gap(&mut self) {
        let now = Instant::now();
        for v in self.ranks.values_mut() {
            v.last_heard = now;
        }
    }

    /// Whether a rank that never ended is named for vanishing or not answering: the launcher
    /// cannot tell, so rank 0 ends the job.
    pub fn has_gone_rank(&self) -> bool {
        self.ranks
            .values()
            .any(|v| v.ended.is_none() && (v.unresponsive || (v.lost && !self.failures.is_empty())))
    }

    /// Whether a rank's status line closed without an end report: its process is gone, and the
    /// launcher, which saw it go, is stopping every rank.
    pub fn any_lost(&self) -> bool {
        self.ranks.values().any(|v| v.lost && v.ended.is_none())
    }

    /// Whether every other rank has connected to the status line (before that, a rank's
    /// failure may not have reached rank 0).
    pub fn all_connected(&self) -> bool {
        (1..self.nranks).all(|r| self.ranks.contains_key(&r))
    }

    /// Rank 0 is ending: tells every rank so, so that none takes the closed line for rank 0's
    /// death; with the job's exit code once rank 0 has concluded (`code`), which a failing
    /// rank then exits with too, so that the launcher's code is the verdict's whichever rank
    /// exits first (mpirun returns the first non-zero code, srun the highest).
    pub fn say_bye(&mut self, code: Option<u8>) {
        if self.bye && code.is_none() {
            return;
        }
        self.bye = true;
        let word = match code {
            Some(c) => format!("bye {c}\n"),
            None => "bye\n".to_string(),
        };
        for c in &self.conns {
            // Non-blocking: a rank whose line is full (its supervisor is stopped) misses it.
            let _ = (&**c).write_all(word.as_bytes());
        }
    }

    /// Whether a rank other than rank 0 is still running on one of `hosts` and was heard from
    /// within `fresh`: it may be about to report the failure its host's other ranks reported
    /// (ranks of one host fail alike), so rank 0 waits for it a little longer. Its last step
    /// may still read as a wait (the unique id's broadcast) on a loaded host while it fails
    /// alike, so a waiting rank counts too. A silent one is not coming: its deadline names it.
    pub fn alike_pending(&self, hosts: &[&str], fresh: Duration) -> bool {
        self.ranks.iter().any(|(&r, v)| {
            r != 0
                && v.ended.is_none()
                && !v.lost
                && !v.unresponsive
                && v.last_heard.elapsed() < fresh
                && hosts.contains(&v.host.as_str())
        })
    }

    /// Whether every other rank has ended (or was lost).
    pub fn all_ended(&self) -> bool {
        (1..self.nranks).all(|r| {
            self.ranks
                .get(&r)
                .is_some_and(|v| v.ended.is_some() || v.lost)
        })
    }
}

/// Rank 0's side: accepts reports into `view` until the process ends, and tells each rank,
/// every [`RANK0_SAYS_EVERY`], that rank 0's supervisor is alive (`alive`); at once, that its
/// end report arrived (`ack`); or, once, that rank 0 has ended (`bye`, from
/// [`JobView::say_bye`]).
///
/// One thread serves every rank (an event loop, `status/hub.rs`), with one descriptor per rank.
pub fn serve(listener: TcpListener, view: Arc<Mutex<JobView>>) {
    std::thread::spawn(move || hub::run(listener, view));
}

mod hub;
mod summary;
#[cfg(test)]
mod tests;
