//! What a rank's supervisor knows of its worker, and the failures it names from that alone.

use crate::diagnose::causes;
use crate::error::{Failure, Who};
use crate::events::Event;
use crate::report::writer::Writer;
use crate::run::rank0_line::Uplink;
use crate::run::status::JobView;
use crate::stage::{Stage, StageRecord, exit};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Whether this rank failed on its own (not stopped, not cancelled): its run folder is kept.
pub(super) static OWN_FAILURE: AtomicBool = AtomicBool::new(false);

/// Whether `code` is one nccl-smoke's worker exits with.
pub(super) fn ours(code: u8) -> bool {
    code <= exit::WRITE_FAILED
        || Stage::ALL.iter().any(|s| s.exit_code() == code)
        || code == exit::CANCELLED
        || code == exit::BELOW_EXPECTED
        || code == exit::UNVERIFIED
        || code == exit::CONTROL_PLANE_OK
}

/// Whether a rank in this stage is waiting for other ranks (the worker also says so per step,
/// e.g. inside MPI_Init or the first barrier of the launch stage).
pub(super) fn waits_on_others(stage: Stage) -> bool {
    !matches!(
        stage,
        Stage::Launch | Stage::NcclLoad | Stage::Driver | Stage::Device | Stage::Alloc
    )
}

/// What the supervisor knows of its worker.
pub(super) struct Watch {
    pub(super) stage: Stage,
    /// The last step the worker announced within the stage.
    pub(super) step: Option<String>,
    /// Whether that step waits on other ranks.
    pub(super) waiting: bool,
    pub(super) rank: Option<u32>,
    pub(super) host: String,
    pub(super) since: Instant,
    /// The work under way is expected to take this long before the next beat.
    pub(super) budget: Duration,
    /// Since when the worker has been seen stopped (SIGSTOP), if it is.
    pub(super) stopped_since: Option<Instant>,
    /// Rank 0: the results file's one writer, once the worker has named the file.
    pub(super) results: Option<Writer>,
    pub(super) failed: Option<Failure>,
    /// Rank 0: what its worker's check of the data laid on other ranks besides its own
    /// failure (`Event::Implicated`); counted in the job's verdict, never announced as those
    /// ranks' reports.
    pub(super) implicated: Vec<Failure>,
    /// Other ranks: the line to rank 0's supervisor, once its address is known.
    pub(super) uplink: Option<Uplink>,
    /// Rank 0: every rank's reports.
    pub(super) job: Option<Arc<Mutex<JobView>>>,
    /// Rank 0: how many of the other ranks' failures are printed, and in the results file.
    pub(super) announced: usize,
    pub(super) recorded: usize,
    /// Rank 0: the first failure another rank reported (not a stop).
    pub(super) first_remote: Option<FirstRemote>,
    /// The results file's `backend` when the worker said it (simulated GPUs only).
    pub(super) backend: Option<String>,
    /// The NCCL version code and communicator hash NCCL's RAS knows this rank's by.
    pub(super) ras: Option<(i32, u64)>,
    /// The stages left behind, timed, and when the current one was entered.
    pub(super) history: Vec<StageRecord>,
    pub(super) entered: Instant,
    /// Rank 0: `--csv` and `--prometheus`, written with the results document.
    pub(super) exports: crate::report::exports::Exports,
}

/// Rank 0: another rank's failure, and when it arrived.
#[derive(Clone)]
pub(super) struct FirstRemote {
    pub(super) since: Instant,
    /// Its rank, as a verdict names it ("rank 1").
    pub(super) who: String,
    pub(super) stage: Stage,
}

impl Watch {
    /// A worker just started: in its launch stage, nothing heard yet.
    pub(super) fn new(who: &Who, job: Option<Arc<Mutex<JobView>>>) -> Watch {
        Watch {
            stage: Stage::Launch,
            step: None,
            waiting: false,
            rank: who.rank,
            host: who.host.clone(),
            since: Instant::now(),
            budget: Duration::ZERO,
            stopped_since: None,
            results: None,
            failed: None,
            implicated: Vec::new(),
            uplink: None,
            job,
            announced: 0,
            recorded: 0,
            first_remote: None,
            backend: None,
            ras: None,
            history: Vec::new(),
            entered: Instant::now(),
            exports: Default::default(),
        }
    }
}

/// Takes in one of the worker's events, and passes it on to rank 0 when it matters there.
pub(super) fn apply(w: &mut Watch, ev: Event) {
    // The results document is rank 0's alone, and large: taken, not copied.
    if let Event::Doc { doc } = ev {
        if let Some(out) = w.results.as_mut() {
            take_doc(out, doc);
        }
        return;
    }
    match &ev {
        Event::Stage { stage, rank } => {
            if *stage != w.stage {
                w.history.push(StageRecord {
                    stage: w.stage,
                    seconds: w.entered.elapsed().as_secs_f64(),
                    ok: true,
                });
                w.entered = Instant::now();
            }
            w.stage = *stage;
            w.step = None;
            w.waiting = false;
            w.rank = rank.or(w.rank);
            w.since = Instant::now();
            w.budget = Duration::ZERO;
        }
        Event::Beat => {
            w.since = Instant::now();
            w.budget = Duration::ZERO;
        }
        Event::Budget { secs } => {
            // Bounded: a day of expected work is no deadline at all.
            w.budget = Duration::try_from_secs_f64(secs.clamp(0.0, 86_400.0)).unwrap_or_default();
            return;
        }
        Event::Step { what, waiting } => {
            w.step = Some(what.clone());
            w.waiting = *waiting;
        }
        Event::Results { path } => {
            if w.results.is_none() {
                w.results = Some(Writer::new(
                    path.as_deref().map(Path::new),
                    w.exports.clone(),
                ));
            }
        }
        Event::Backend { backend } => w.backend = Some(backend.clone()),
        Event::Notes { .. } => {}
        Event::Ras { version, hash } => {
            w.ras = Some((*version, *hash));
            return;
        }
        Event::Failed { failure } => w.failed = Some(failure.clone()),
        Event::Implicated { failure } => {
            if !w.implicated.contains(failure) {
                w.implicated.push(failure.clone());
            }
            return;
        }
        Event::StatusAddr { addrs } => {
            connect_uplink(w, addrs);
            return;
        }
        Event::Ended { .. } | Event::Alive | Event::Doc { .. } => return,
    }
    if let Some(u) = w.uplink.as_mut() {
        u.send(&ev);
    }
}

/// Another rank: opens its line to rank 0's supervisor at `addrs`, unless it has one, and
/// says the stage it is in.
pub(super) fn connect_uplink(w: &mut Watch, addrs: &[crate::events::Address]) {
    if let Some(rank) = w.rank.filter(|r| *r != 0)
        && w.uplink.is_none()
    {
        w.uplink = Uplink::connect(addrs, rank, &w.host);
        let now = Event::Stage {
            stage: w.stage,
            rank: w.rank,
        };
        if let Some(u) = w.uplink.as_mut() {
            u.send(&now);
        }
    }
}

pub(super) fn who_label(f: &Failure) -> String {
    Who {
        rank: f.rank,
        host: f.host.clone(),
    }
    .rank_label()
}

pub(super) fn who_at(w: &Watch, who: &Who) -> Who {
    Who {
        rank: w.rank,
        host: who.host.clone(),
    }
}

pub(super) fn rank0_gone(w: &Watch, who: &Who, closed: bool, limit: Duration) -> Failure {
    let host = w
        .uplink
        .as_ref()
        .map(|u| u.rank0_host.clone())
        .unwrap_or_default();
    causes::rank0_gone(host, &who_at(w, who).rank_label(), w.stage, closed, limit)
}

pub(super) fn stopped_by_launcher(w: &Watch, who: &Who) -> Failure {
    causes::stopped_by_launcher(&who_at(w, who), w.stage)
}

pub(super) fn hung(w: &Watch, who: &Who, deadline: Duration, stopped: bool) -> Failure {
    causes::hung(&causes::Hang {
        who: who_at(w, who),
        stage: w.stage,
        step: w.step.as_deref(),
        waiting: waits_on_others(w.stage) || w.waiting,
        quiet: w.since.elapsed(),
        deadline,
        budget: w.budget,
        stopped,
    })
}

/// Writes the worker's newest document. A failed write is said once, with what follows: the
/// run goes on (its measurements are worth more than the file), and a run that would pass
/// exits with `WRITE_FAILED` unless a later write succeeds.
fn take_doc(out: &mut Writer, doc: serde_json::Value) {
    if let Err(e) = out.take_json(doc)
        && !WRITE_SAID.swap(true, std::sync::atomic::Ordering::SeqCst)
    {
        say_err!(
            "nccl-smoke: cannot write the results file {}: {e}; the run goes on, and exits \
             with code {} unless a later write succeeds",
            out.path().display(),
            exit::WRITE_FAILED
        );
    }
}

/// Whether a failed write of the results file has been said.
static WRITE_SAID: AtomicBool = AtomicBool::new(false);
