//! The launch stage's end, before the ranks first meet: no rank has rank 0's status address
//! yet, and rank 0's worker has not opened the results file.

use super::state::{Watch, connect_uplink};
use super::timing::LOCAL_LOOKUP;
use crate::error::Failure;
use crate::report::results;
use crate::report::writer::Writer;
use crate::run::Plan;
use crate::run::worker_line;
use crate::stage::Stage;

/// Rank 0's results file when its worker never opened it: a fresh document, labelled from the
/// backend the worker reported or else the one asked for. `unheard`: rank 0 heard from no rank
/// (with the job's exit code): the document's verdict says so and names no rank.
pub(super) fn launch_doc(plan: &Plan, w: &Watch, unheard: Option<u8>) -> Option<Writer> {
    use crate::report::backing::Backing;
    let backing = Backing::of(plan.libs.sim, plan.libs.control_plane, None);
    let mut doc = crate::report::results::ResultsDoc::fresh(
        &plan.config,
        &w.host,
        &backing,
        Default::default(),
    );
    doc.nccl_logs = Some(plan.kept_logs.pattern());
    if let Some(b) = &w.backend {
        doc.backend = b.clone();
    }
    if let Some(code) = unheard {
        let line = format!(
            "FAIL at {}: rank 0 heard from no other rank; before the ranks first meet only a \
                 rank on rank 0's host can report to rank 0, so a rank that failed there on \
                 another host named itself in its own VERDICT line",
            w.stage
        );
        doc.verdict = crate::report::results::Verdict {
            status: crate::report::results::Status::Fail,
            line: crate::report::backing::verdict_line(&doc.backend, &line),
            exit_code: code,
            stage: Some(w.stage),
            consequences: Vec::new(),
            ranks: Vec::new(),
        };
    }
    let mut out = Writer::new(plan.json.as_deref(), plan.exports.clone());
    match out.take(doc) {
        Ok(()) => Some(out),
        Err(e) => {
            say_err!("nccl-smoke: cannot write the results file: {e}");
            None
        }
    }
}

/// Another rank that failed before the ranks first met knows no address of rank 0's
/// supervisor; when that runs on this host it answers under the job's name, and this rank's
/// end then reaches the job's one verdict like any other's (see
/// [`worker_line::answer_status_port_locally`]). On another host, nothing is found and this rank
/// names itself in its own VERDICT line.
pub(super) fn report_before_meeting(w: &mut Watch) {
    if w.rank.is_none_or(|r| r == 0) {
        return;
    }
    let Some(key) = crate::bootstrap::launcher::job_key(|k| std::env::var(k).ok()) else {
        return;
    };
    let addrs = worker_line::local_status_address(&key, LOCAL_LOOKUP);
    if !addrs.is_empty() {
        connect_uplink(w, &addrs);
    }
}

/// A wait that ran out in the launch stage, at the ranks' first meeting.
pub(super) fn waited_at_launch(f: &Failure) -> bool {
    f.stage == Stage::Launch && results::blame(f) == results::Blame::Waited
}
