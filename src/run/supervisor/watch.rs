//! The supervisor's watch loop: follows the worker's stages, and names a hang, a crash, a stop
//! by the launcher, or a rank gone, when the worker cannot.

use super::conclude::{alike_coming, conclude};
use super::recorder::record_remote_failures;
use super::state::{
    Watch, apply, hung, ours, rank0_gone, stopped_by_launcher, waits_on_others, who_at,
};
use super::timing::{GATHER, GATHER_ALIKE, GRACE, LAUNCHER_SIGNAL_WAIT, WAITING_BACKSTOP};
use crate::diagnose::causes;
use crate::error::{Failure, Who};
use crate::ffi::os;
use crate::run::Plan;
use crate::run::status::{self, JobView};
use crate::run::worker_line::Msg;
use crate::stage::PEER_MARGIN;
use std::os::unix::process::ExitStatusExt;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// Follows the worker until it ends, or until this supervisor names its end (a hang, a crash,
/// a stop, rank 0 gone); then concludes the rank and returns its exit code.
pub(super) fn watch(
    plan: &Plan,
    who: &Who,
    mut child: Child,
    rx: mpsc::Receiver<Msg>,
    job: Option<Arc<Mutex<JobView>>>,
    term: &AtomicBool,
) -> u8 {
    let launcher_pid = std::os::unix::process::parent_id();
    let mut last_turn = Instant::now();
    let mut closed = false;
    let mut w = Watch::new(who, job);
    w.exports = plan.exports.clone();
    loop {
        while let Ok(msg) = rx.recv_timeout(Duration::from_millis(50)) {
            match msg {
                Msg::Event(ev) => apply(&mut w, ev),
                Msg::Wake => break,
                Msg::Closed => {
                    closed = true;
                    break;
                }
            }
        }
        if std::os::unix::process::parent_id() != launcher_pid {
            // The launcher died without signalling (a second Ctrl-C makes mpirun exit at
            // once): nothing will stop this rank but itself.
            term.store(true, Ordering::SeqCst);
        }
        if term.load(Ordering::SeqCst)
            && let Some(job) = &w.job
            && let Ok(mut v) = job.lock()
        {
            // First of all, so that no rank takes rank 0's closing line for its death.
            v.say_bye(None);
        }
        if let Some(u) = w.uplink.as_mut() {
            u.keep_alive();
        }
        let gap = last_turn.elapsed();
        last_turn = Instant::now();
        if let Some(job) = &w.job
            && let Ok(mut v) = job.lock()
        {
            if gap > status::SELF_STOPPED {
                v.forgive_gap();
            }
            v.name_unresponsive(|s| status::liveness(plan.deadline(s)));
        }
        record_remote_failures(&mut w);
        match child.try_wait() {
            Ok(Some(status)) => {
                // Drain what the worker said just before it ended: its last lines may still be
                // in the socket, not yet read (a worker that aborts right after entering a stage
                // would otherwise be blamed for the stage before).
                drain(&mut w, &rx, closed, term);
                if let Some(code) = status.code() {
                    let code = code.clamp(0, 255) as u8;
                    if w.failed.is_none() && !ours(code) {
                        // Not one of nccl-smoke's codes, and no verdict: the MPI library ends
                        // the process this way when its launcher goes away (Open MPI: 195 after
                        // Ctrl-C). The launcher's SIGTERM follows within a second or so.
                        let start = Instant::now();
                        while start.elapsed() < LAUNCHER_SIGNAL_WAIT && !term.load(Ordering::SeqCst)
                        {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        if term.load(Ordering::SeqCst) {
                            let f = stopped_by_launcher(&w, who);
                            let code = f.exit_code();
                            return conclude(plan, &mut w, Some(f), code, term);
                        }
                    }
                    return conclude(plan, &mut w, None, code, term);
                }
                let sig = status.signal().unwrap_or(0);
                let stopped = term.load(Ordering::SeqCst)
                    || sig == signal_hook::consts::SIGTERM
                    || sig == signal_hook::consts::SIGINT;
                if !stopped && let Some(given) = w.failed.clone() {
                    // The worker gave its verdict, then died on its way out: the verdict stands.
                    say_err!(
                        "nccl-smoke: the worker died of {} after reporting its failure",
                        os::signal_name(sig)
                    );
                    return conclude(plan, &mut w, None, given.exit_code(), term);
                }
                let f = if stopped {
                    stopped_by_launcher(&w, who)
                } else {
                    causes::crashed(&who_at(&w, who), w.stage, sig)
                };
                let code = f.exit_code();
                return conclude(plan, &mut w, Some(f), code, term);
            }
            Ok(None) => {}
            Err(e) => {
                let f = Failure::new(
                    w.stage,
                    &who_at(&w, who),
                    format!("lost track of the worker: {e}"),
                );
                let code = f.exit_code();
                return conclude(plan, &mut w, Some(f), code, term);
            }
        }
        if term.load(Ordering::SeqCst) {
            // The launcher gives a second or so before SIGKILL. The worker, which the
            // launcher's signal did not reach (it has its own process group), is killed first
            // (its results are on disk after every size, and nothing may outlive the job) and
            // reaped after this rank's end is recorded.
            let _ = child.kill();
            let f = stopped_by_launcher(&w, who);
            let code = f.exit_code();
            let code = conclude(plan, &mut w, Some(f), code, term);
            let _ = child.wait();
            return code;
        }
        // Rank 0: a rank that vanished or stopped answering is one the launcher knows nothing
        // about; rank 0 ends the job, so that it does not wait on that rank for ever.
        if w.failed.is_none()
            && let Some(job) = &w.job
            && job.lock().map(|v| v.has_gone_rank()).unwrap_or(false)
        {
            stop_worker(&mut child);
            let f = causes::ended_by_rank0(&who_at(&w, who), w.stage, "another rank is gone");
            let code = f.exit_code();
            return conclude(plan, &mut w, Some(f), code, term);
        }
        // Rank 0: another rank failed, and the ranks failing alike have had GATHER to report
        // too (GATHER_ALIKE while one of a failed rank's host is still on its way). Rank 0
        // ends the job now, before the failing ranks stop waiting for its goodbye (HOLD) and
        // their exit makes the launcher stop this one mid-verdict.
        if w.failed.is_none()
            && let Some(c) = w.first_remote.clone()
            && c.since.elapsed() >= GATHER
            && (c.since.elapsed() >= GATHER_ALIKE
                || !w
                    .job
                    .as_ref()
                    .is_some_and(|j| j.lock().map(|v| alike_coming(&v, None)).unwrap_or(false)))
        {
            let _ = child.kill();
            // What the worker said before it was stopped (its own failure, at that moment).
            drain(&mut w, &rx, closed, term);
            let _ = child.wait();
            if let Some(given) = w.failed.clone() {
                return conclude(plan, &mut w, None, given.exit_code(), term);
            }
            let f = causes::ended_by_rank0(
                &who_at(&w, who),
                w.stage,
                &format!("{} failed at {}", c.who, c.stage),
            );
            let code = f.exit_code();
            return conclude(plan, &mut w, Some(f), code, term);
        }
        // Another rank: rank 0's supervisor vanished or stopped answering, so nobody would
        // record this job's verdict; this rank names it.
        let limit = status::liveness(plan.deadline(w.stage)).max(status::RANK0_SILENCE_FLOOR);
        if let Some(gone) = w.uplink.as_ref().and_then(|u| u.rank0_gone(limit)) {
            stop_worker(&mut child);
            let f = rank0_gone(&w, who, gone, limit);
            let code = f.exit_code();
            return conclude(plan, &mut w, Some(f), code, term);
        }
        let stopped_now = worker_stopped(child.id());
        match (stopped_now, w.stopped_since) {
            (true, None) => w.stopped_since = Some(Instant::now()),
            (false, Some(_)) => w.stopped_since = None,
            _ => {}
        }
        let deadline = plan.deadline(w.stage);
        let quiet = deadline + w.budget;
        // A stopped worker is the culprit, not a waiter: it is named at its own deadline, before
        // the ranks waiting on it give up (their waits allow `PEER_MARGIN` more).
        let stuck_stopped = w.stopped_since.is_some_and(|t| t.elapsed() > deadline)
            || (stopped_now && w.since.elapsed() > quiet);
        let slack = if waits_on_others(w.stage) || w.waiting {
            PEER_MARGIN + WAITING_BACKSTOP
        } else {
            GRACE
        };
        if w.failed.is_none() && (stuck_stopped || w.since.elapsed() > quiet + slack) {
            stop_worker(&mut child);
            let f = hung(&w, who, deadline, stuck_stopped);
            let code = f.exit_code();
            return conclude(plan, &mut w, Some(f), code, term);
        }
    }
}

/// How long a worker's last events may take to arrive after it ended (its line closes at once
/// unless a process it started holds the socket too).
const LAST_WORDS: Duration = Duration::from_secs(1);

/// Applies what the worker sent before it ended, until its line closes or `LAST_WORDS` pass;
/// without waiting once the launcher is tearing the job down (`term`: its SIGKILL follows
/// within a second or so, and this rank's end must be recorded first).
fn drain(w: &mut Watch, rx: &mpsc::Receiver<Msg>, mut closed: bool, term: &AtomicBool) {
    let until = Instant::now() + LAST_WORDS;
    loop {
        let msg = if closed || term.load(Ordering::SeqCst) {
            rx.try_recv().ok()
        } else {
            rx.recv_timeout(until.saturating_duration_since(Instant::now()))
                .ok()
        };
        match msg {
            Some(Msg::Event(ev)) => apply(w, ev),
            Some(Msg::Closed) => closed = true,
            Some(Msg::Wake) => {}
            None => return,
        }
    }
}

/// Kills the worker (also when it is stopped) and reaps it.
pub(super) fn stop_worker(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Whether the process `pid` is stopped (SIGSTOP, SIGTSTP, or held by a tracer): the state
/// letter of `/proc/PID/stat`, `T` or `t`.
pub(super) fn worker_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
        })
        .is_some_and(|c| c == 'T' || c == 't')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;
    use crate::stage::Stage;

    fn who() -> Who {
        Who {
            rank: Some(0),
            host: "h".into(),
        }
    }

    #[test]
    fn a_worker_s_last_events_still_in_its_line_are_applied() {
        // The worker entered three stages and died before the reader forwarded any of them.
        let (tx, rx) = mpsc::channel();
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            for stage in [Stage::NcclLoad, Stage::Driver, Stage::Device] {
                let _ = tx.send(Msg::Event(Event::Stage {
                    stage,
                    rank: Some(0),
                }));
            }
            let _ = tx.send(Msg::Closed);
        });
        let mut w = Watch::new(&who(), None);
        drain(&mut w, &rx, false, &AtomicBool::new(false));
        late.join().unwrap();
        assert_eq!(w.stage, Stage::Device);
        assert_eq!(w.history.len(), 3);
    }

    #[test]
    fn a_line_that_never_closes_costs_at_most_last_words() {
        let (tx, rx) = mpsc::channel::<Msg>();
        let mut w = Watch::new(&who(), None);
        let start = Instant::now();
        drain(&mut w, &rx, false, &AtomicBool::new(false));
        let took = start.elapsed();
        drop(tx);
        assert!(took >= LAST_WORDS && took < LAST_WORDS * 3, "{took:?}");
        assert_eq!(w.stage, Stage::Launch);
    }

    #[test]
    fn a_closed_line_is_drained_without_waiting() {
        let (tx, rx) = mpsc::channel();
        tx.send(Msg::Event(Event::Stage {
            stage: Stage::Alloc,
            rank: Some(0),
        }))
        .unwrap();
        let mut w = Watch::new(&who(), None);
        let start = Instant::now();
        drain(&mut w, &rx, true, &AtomicBool::new(false));
        assert!(start.elapsed() < LAST_WORDS);
        assert_eq!(w.stage, Stage::Alloc);
    }
}
