//! Rank 0's side of a sweep run more than once (`--repeat N`, `--duration`): rows folded into
//! medians as they come, the burn-in tally per GPU, the results document sent at most once a
//! second (a burn-in measures thousands of sizes; every one is in the next document sent, and
//! a kill loses at most that second), and the culprit GPUs named at the end.

use super::Run;
use crate::bench::SizeResult;
use crate::error::Failure;
use crate::report::burn_in::BurnIn;
use crate::report::fingerprint::Fingerprint;
use crate::report::repeats;
use std::time::{Duration, Instant};

/// The longest a burn-in's results document waits to be sent.
pub const SEND_EVERY: Duration = Duration::from_secs(1);

impl Run<'_> {
    /// Rank 0, once the GPUs are known: an empty tally when the sweep runs more than once.
    pub(super) fn start_burn_in(&mut self, fp: &Fingerprint) {
        if self.plan.repeats() {
            self.burn_in = Some(BurnIn::new(fp));
        }
    }

    /// One measurement of a sweep run more than once: folded, counted, sent now and then.
    pub(super) fn burn_in_row(&mut self, row: &SizeResult) {
        repeats::record(&mut self.folded, row.clone(), 2);
        if let Some(b) = self.burn_in.as_mut() {
            b.add(row, b.passes);
        }
        self.send_now_and_then();
    }

    /// A pass is over.
    pub(super) fn burn_in_pass(&mut self, pass: u32) {
        if let Some(b) = self.burn_in.as_mut() {
            b.passes = u64::from(pass) + 1;
        }
        self.send_now_and_then();
    }

    fn send_now_and_then(&mut self) {
        if self.last_sent.is_none_or(|t| t.elapsed() >= SEND_EVERY) {
            self.send_doc();
        }
    }

    /// The document as it is to be sent under repeats: with the folded rows and the tally.
    pub(super) fn doc_now(&self) -> Option<crate::report::results::ResultsDoc> {
        let mut doc = self.results.as_ref()?.clone();
        doc.results = self.folded.clone();
        doc.burn_in = self.burn_in.clone();
        Some(doc)
    }

    /// The tally's lines, and the evidence it adds to a failure of a culprit rank.
    pub(super) fn burn_in_end(&self) -> Vec<String> {
        self.burn_in.as_ref().map(BurnIn::lines).unwrap_or_default()
    }

    /// Adds the tally of `f`'s rank to its evidence (its GPU, and the passes it went wrong in).
    pub(super) fn burn_in_evidence(&self, f: &mut Failure) {
        let Some(b) = &self.burn_in else { return };
        for t in b.culprits() {
            if f.rank == Some(t.rank) {
                f.evidence.push(format!(
                    "burn-in: GPU {} [{}] of rank {} (host {}) received wrong elements in {} of \
                     {} sample(s) over {} pass(es)",
                    t.gpu, t.bus_id, t.rank, t.host, t.wrong_samples, t.samples, b.passes
                ));
            }
        }
    }

    /// `--duration`: the moment after which no pass begins, on rank 0's clock, from now.
    pub(super) fn passes_until(&self) -> Option<Instant> {
        self.plan
            .duration
            .map(|d| Instant::now() + Duration::from_secs_f64(d))
    }
}
