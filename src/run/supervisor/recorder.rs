//! Rank 0's supervisor's part of the results file and console: every rank's failure, the
//! per-rank table and the job's verdict (see [`crate::report::verdict::job_verdict`], the one
//! place it is decided), printed once.

use super::state::{FirstRemote, Watch, who_label};
use crate::error::Failure;
use crate::report::results::{RankRecord, RankState};
use crate::report::results::{Status, Verdict};
use crate::report::writer;
use crate::stage::StageRecord;
use crate::stage::exit;
use std::time::Instant;

/// Rank 0 prints the job's verdict, with the consequences under it: once, at the job's end.
pub(super) fn say_verdict(w: &Watch, v: &Verdict) {
    let line = match &w.backend {
        Some(b) => crate::report::backing::verdict_line(b, &v.line),
        None => v.line.clone(),
    };
    say_line(&format!("VERDICT: {line}"));
    for c in &v.consequences {
        say_line(&format!("#   consequence: {c}"));
    }
}

/// This rank's stages, the current one ending now (`ok`: it ended well).
pub(super) fn walked(w: &Watch, ok: bool) -> Vec<StageRecord> {
    let mut out = w.history.clone();
    out.push(StageRecord {
        stage: w.stage,
        seconds: w.entered.elapsed().as_secs_f64(),
        ok,
    });
    out
}

/// Rank 0: the results file's per-rank table, this rank in `state` first; empty elsewhere.
pub(super) fn rank_table(
    w: &Watch,
    state: RankState,
    code: Option<u8>,
    ok: bool,
) -> Vec<RankRecord> {
    let Some(job) = &w.job else {
        return Vec::new();
    };
    let me = RankRecord {
        rank: w.rank.unwrap_or(0),
        host: w.host.clone(),
        state,
        exit_code: code,
        stage: Some(w.stage),
        step: w.step.clone(),
        stages: walked(w, ok),
    };
    job.lock().map(|v| v.records(me)).unwrap_or_default()
}

/// Adds this rank's failure (`own`) and the other ranks' (`remote`, rank 0 only) to the
/// results file, sets its verdict (the job's culprit, see [`results::job_verdict`], or
/// CANCELLED), and (rank 0) its per-rank table, this rank in `state` with `code` (`ok`: its
/// current stage ended well). `None` when this rank keeps no results file.
pub(super) fn record(
    w: &mut Watch,
    own: Option<&Failure>,
    remote: &[Failure],
    (state, code, ok): (RankState, Option<u8>, bool),
    cancel: bool,
) -> Option<std::io::Result<()>> {
    w.results.as_ref()?;
    let table = rank_table(w, state, code, ok);
    let stage = w.stage;
    Some(w.results.as_mut()?.amend(|doc| {
        if !table.is_empty() {
            doc.ranks = table;
        }
        // Being stopped because another rank failed is no failure of this rank's own; being
        // stopped with no failure known anywhere is, unless the job was cancelled.
        let own_counts = !cancel
            && own
                .is_some_and(|f| !f.is_stopped() || (remote.is_empty() && doc.failures.is_empty()));
        for f in own.iter().copied().filter(|_| own_counts).chain(remote) {
            if !doc.failures.contains(f) {
                doc.failures.push(f.clone());
            }
        }
        if !writer::decide(doc) && cancel {
            doc.verdict = Verdict {
                status: Status::Cancelled,
                line: format!(
                    "CANCELLED — stopped by a signal during the {stage} stage, before any rank failed; \
                     {} measured size(s) kept",
                    doc.results.len()
                ),
                exit_code: exit::CANCELLED,
                stage: Some(stage),
                consequences: Vec::new(),
                ranks: Vec::new(),
            };
        }
    }))
}

/// Rank 0: another rank's failure goes onto the screen and into the results file as soon as
/// it arrives; when this rank is stopped a moment later, it may not get the chance.
pub(super) fn record_remote_failures(w: &mut Watch) {
    let Some(job) = &w.job else { return };
    // A rank stopped by the launcher is no news: the launcher stops every rank at once (a
    // cancel, or after the failure that will arrive). Such reports count only at the end.
    let all: Vec<Failure> = match job.lock() {
        Ok(v) if v.failures.len() > w.announced.min(w.recorded) => v
            .failures
            .iter()
            .filter(|f| !f.is_stopped())
            .cloned()
            .collect(),
        _ => return,
    };
    if all.len() <= w.announced.min(w.recorded) {
        return;
    }
    for f in &all[w.announced..] {
        let rank = f.rank.map(|r| r.to_string()).unwrap_or_else(|| "?".into());
        say_line(&format!(
            "# job: rank {rank} (host {}) failed at {}; rank 0 recorded it",
            f.host, f.stage
        ));
    }
    w.announced = all.len();
    if let Some(written) = record(
        w,
        None,
        &all[w.recorded..],
        (RankState::Running, None, true),
        false,
    ) {
        if let Err(e) = written {
            say_err!("nccl-smoke: cannot update the results file: {e}");
        }
        w.recorded = all.len();
    }
    // The job has failed: rank 0 concludes it once the ranks failing alike have reported
    // (see `watch`), and prints the one verdict then.
    if w.first_remote.is_none()
        && let Some(f) = all.first()
    {
        w.first_remote = Some(FirstRemote {
            since: Instant::now(),
            who: who_label(f),
            stage: f.stage,
        });
    }
}

/// One line on stdout; a closed stdout (the launcher went first) is no reason to stop.
pub(super) fn say_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}
