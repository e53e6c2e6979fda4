//! The worker's part of rank 0's results file and console: the file after every size and at
//! this rank's end, the table rows, this rank's failure. The supervisor adds every rank's
//! failure and the job's verdict (`supervisor::recorder`).

use super::Run;
use crate::bench::{self, Buffers, SizeResult, Timing};
use crate::bootstrap::Bootstrap;
use crate::comm::Communicator;
use crate::console::rank::Console;
use crate::error::Failure;
use crate::events::{self, Event};
use crate::ffi::cuda::Driver;
use crate::ffi::nccl::Nccl;
use crate::patterns::Pattern;
use crate::report::fingerprint::{self, DriverInfo, Fingerprint, NcclInfo, RankInfo};
use crate::report::footer::binary_size;
use crate::report::results::{BudgetReport, Dropped, ResultsDoc, Status, Verdict};
use crate::report::writer;
use crate::report::{repeats, table};
use crate::stage::{Stage, exit};
use std::time::{Duration, Instant};

impl Run<'_> {
    /// Sends the results document, whole, to this rank's supervisor, which writes it (rank 0
    /// only: the other ranks have none).
    pub(in crate::run) fn send_doc(&mut self) {
        let value = if self.plan.repeats() {
            self.doc_now().map(|d| serde_json::to_value(&d))
        } else {
            self.results.as_ref().map(serde_json::to_value)
        };
        let Some(value) = value else { return };
        self.last_sent = Some(Instant::now());
        match value {
            Ok(doc) => events::send(&Event::Doc { doc }),
            // Not seen: the document is plain data (non-finite numbers are strings, see
            // `crate::lossless`). Said, so that a file left behind is not taken as current.
            Err(e) => eprintln!("nccl-smoke: the results document cannot be sent: {e}"),
        }
    }

    /// Reports a failure of this rank: verdict line, results file, supervisor.
    pub(in crate::run) fn fail(&mut self, mut f: Failure) -> u8 {
        if let Some(tables) = crate::ffi::cuda::sim_driver_lacking() {
            f = crate::diagnose::causes::lacking_tables(f, &tables);
        }
        if crate::diagnose::causes::peer_first(&f) {
            std::thread::sleep(super::PEER_FIRST);
        }
        self.stage = f.stage;
        self.leave(false);
        let console = self.console();
        console.own(format!("{}{f}", self.backing.prefix()));
        for line in &f.evidence {
            console.own(format!("#   evidence: {line}"));
        }
        let implicated = std::mem::take(&mut self.implicated);
        if let Some(r) = self.results.as_mut() {
            r.failures.push(f.clone());
            r.failures.extend(implicated.iter().cloned());
            writer::decide(r);
        }
        self.send_doc();
        events::send(&Event::Failed { failure: f.clone() });
        for failure in implicated {
            events::send(&Event::Implicated { failure });
        }
        f.exit_code()
    }

    /// Rank 0 opens the results file as soon as the launch stage is done, so that a failure
    /// anywhere after it (reported here or by another rank's supervisor) lands in it.
    pub(in crate::run) fn open_results(&mut self, boot: &dyn Bootstrap) {
        // A burn-in keeps its document for the supervisor even without a file: Ctrl-C names
        // the culprit GPU from it.
        if self.plan.json.is_none() && self.plan.exports.is_empty() && !self.plan.repeats() {
            return;
        }
        let fp = Fingerprint {
            launcher: boot.describe(),
            bootstrap: Some(boot.info()),
            env: fingerprint::env_snapshot(),
            ..Fingerprint::default()
        };
        let mut doc = ResultsDoc::fresh(&self.plan.config, &self.who.host, &self.backing, fp);
        doc.nccl_logs = Some(self.plan.kept_logs.pattern());
        doc.budget = self.plan.budget.map(|seconds| BudgetReport {
            seconds,
            dropped: Vec::new(),
        });
        doc.stages = self.stages.clone();
        events::send(&Event::Results {
            path: self.plan.json.as_ref().map(|p| p.display().to_string()),
        });
        self.results = Some(doc);
        self.send_doc();
    }

    /// Rank 0, once every rank's device is known: the fingerprint, printed and kept.
    pub(in crate::run) fn record_fingerprint(
        &mut self,
        boot: &dyn Bootstrap,
        nccl: &Nccl,
        driver: &Driver,
        ranks: Vec<RankInfo>,
    ) {
        let fp = Fingerprint {
            hosts: fingerprint::hosts_of(&ranks),
            ranks,
            driver: Some(DriverInfo::from(driver)),
            nccl: Some(NcclInfo::from(nccl)),
            launcher: boot.describe(),
            bootstrap: Some(boot.info()),
            env: fingerprint::env_snapshot(),
        };
        let console = self.console();
        console.job_lines(table::fingerprint_lines(&fp, &self.backing));
        warn_shared_gpus(console, &fp);
        self.hosts = fp.hosts.len();
        self.ranks = fp.ranks.clone();
        self.start_burn_in(&fp);
        if let Some(r) = self.results.as_mut() {
            r.simulated = self.backing.simulated();
            r.backend = self.backing.backend();
            r.simulated_parts = self.backing.parts();
            r.fingerprint = fp;
        }
        self.send_doc();
    }

    /// The measured sweep ([`bench::sweep::run`]), rank 0 printing and recording every row.
    pub(in crate::run) fn sweep(
        &mut self,
        comm: &mut Communicator,
        boot: &dyn Bootstrap,
        selected: &[&dyn Pattern],
        sizes: &[usize],
        bufs: &mut Buffers,
        timing: &Timing,
    ) -> Result<Vec<SizeResult>, Failure> {
        let repeat = self.plan.passes();
        // --budget: the time to the sweep is spent again at the end (verify, teardown), so the
        // sweep gets the budget less twice that.
        let ends_by = self.plan.budget.map(|b| {
            let setup = self.started.elapsed();
            Instant::now() + Duration::from_secs_f64(b).saturating_sub(setup * 2)
        });
        let schedule = bench::sweep::Schedule {
            repeat,
            passes_until: self.passes_until(),
            ends_by,
        };
        let swept = bench::sweep::run(comm, boot, selected, sizes, bufs, timing, schedule, self)
            .map_err(|e| match e {
                bench::sweep::SweepError::Comm(e) => self.comm_failure(Stage::Run, e),
                bench::sweep::SweepError::Sample { what, error } => {
                    let rank = error.rank.unwrap_or(0);
                    self.gather_failure(Stage::Verify, rank, format!("{what}: {}", error.what))
                }
            })?;
        if !self.plan.repeats() {
            return Ok(swept);
        }
        // `--repeat`, `--duration`: one row per pattern and size, of the medians of its
        // repeats (folded as they came); the tables come at the end, when every repeat is in.
        let rows = self.folded.clone();
        let shown = rows
            .iter()
            .map(|r| r.repeats.len())
            .max()
            .unwrap_or(0)
            .max(1) as u32;
        let console = self.console();
        for p in selected {
            let mine: Vec<SizeResult> = rows
                .iter()
                .filter(|r| r.pattern == p.name())
                .cloned()
                .collect();
            console.job_lines(repeats::header(p.name(), comm.nranks, &self.backing, shown));
            console.job_lines(mine.iter().map(repeats::row));
            console.job_lines(table::footer_lines(&mine, &self.backing));
        }
        console.job_lines(self.burn_in_end());
        self.send_doc();
        Ok(rows)
    }

    /// Records the end of a run that walked every stage (a pass, or a run below an `--expect`
    /// floor): rank 0's stage times and a verdict that names no stage and no rank, then saves.
    pub(in crate::run) fn save_end(&mut self, status: Status, line: String, exit_code: u8) {
        if let Some(r) = self.results.as_mut() {
            r.stages = self.stages.clone();
            r.verdict = Verdict {
                status,
                line,
                exit_code,
                stage: None,
                consequences: Vec::new(),
                ranks: Vec::new(),
            };
        }
        self.send_doc();
    }

    pub(in crate::run) fn pass(
        &mut self,
        selected: &[&dyn Pattern],
        sizes: &[usize],
        nranks: u32,
        unmeasured: usize,
    ) -> u8 {
        let hosts = self.hosts;
        let label = self
            .backing
            .label()
            .map(|l| format!(" [{l}]"))
            .unwrap_or_default();
        let alone = if nranks == 1 {
            " (1 rank: nothing crossed a process boundary, so this tested the library, the \
             driver and the GPU, not communication)"
        } else {
            ""
        };
        // A pass is a claim about the data: without a check (-c 0) there is none to make.
        let (status, word, checked, code) = if self.plan.check {
            (Status::Pass, "PASS", "verified", exit::PASS)
        } else {
            (
                Status::Unverified,
                "UNVERIFIED",
                "measured, data NOT checked (-c 0), so not a pass",
                exit::UNVERIFIED,
            )
        };
        // A size --budget dropped is no part of the claim, and said so.
        let budget = match (unmeasured, self.plan.budget) {
            (0, _) | (_, None) => String::new(),
            (n, Some(secs)) => {
                format!(" ({n} pattern × size(s) left unmeasured to fit --budget {secs} s)")
            }
        };
        let line = format!(
            "{word}{label} — {} patterns × {} sizes{budget}, {checked}, on {nranks} ranks, \
             {hosts} host(s){alone}",
            selected.len(),
            sizes.len(),
        );
        self.console().job(&line);
        self.save_end(status, line, code);
        code
    }
}

/// Two ranks of one host on one GPU is a classic misconfiguration; NCCL before 2.30 refuses it.
/// Rank 0 prints the sweep's table as nccl-tests does, and keeps every row in the results file.
impl bench::sweep::Observer for Run<'_> {
    fn pattern(&mut self, p: &dyn Pattern, nranks: u32) {
        self.console()
            .job_lines(table::table_header(p.name(), nranks, &self.backing));
    }

    fn size(&mut self, p: &dyn Pattern, bytes: usize, n: usize, of: usize) {
        // `of` is 0 when the passes are open (`--duration`).
        let place = if of == 0 {
            n.to_string()
        } else {
            format!("{n}/{of}")
        };
        self.console()
            .progress(format!("{} {bytes} B ({place})", p.name()));
    }

    fn row(&mut self, row: &SizeResult) {
        if self.plan.repeats() {
            return self.burn_in_row(row);
        }
        self.console().job(table::table_row(row));
        if let Some(r) = self.results.as_mut() {
            r.results.push(row.clone());
        }
        self.send_doc();
    }

    fn pass_done(&mut self, pass: u32) {
        if self.plan.repeats() {
            self.burn_in_pass(pass);
        }
    }

    fn pattern_done(&mut self, rows: &[SizeResult]) {
        self.console()
            .job_lines(table::footer_lines(rows, &self.backing));
    }

    fn dropped(&mut self, p: &dyn Pattern, bytes: &[usize], expected: Duration, left: Duration) {
        let name = p.name();
        self.dropped
            .extend(bytes.iter().map(|b| (name.to_string(), *b)));
        let (first, last) = (bytes.first().copied(), bytes.last().copied());
        let span = match (first, last) {
            (Some(a), Some(b)) if a != b => format!("{} to {}", binary_size(a), binary_size(b)),
            (Some(a), _) => binary_size(a),
            _ => String::new(),
        };
        self.console().job(format!(
            "# --budget: {name} {span} not measured ({} size(s)): the first would take about \
             {:.2} s, {:.2} s of the pattern's share of the budget was left",
            bytes.len(),
            expected.as_secs_f64(),
            left.as_secs_f64()
        ));
        if let Some(report) = self.results.as_mut().and_then(|r| r.budget.as_mut()) {
            report.dropped.push(Dropped {
                pattern: name.into(),
                sizes: bytes.to_vec(),
                expected_s: expected.as_secs_f64(),
                left_s: left.as_secs_f64(),
            });
        }
        self.send_doc();
    }
}

impl Run<'_> {
    /// The measurements --budget dropped that no pass measured: distinct (pattern, bytes).
    pub(super) fn never_measured(&self, rows: &[SizeResult]) -> usize {
        let mut never: Vec<&(String, usize)> = self
            .dropped
            .iter()
            .filter(|(p, b)| !rows.iter().any(|r| r.pattern == *p && r.size_bytes == *b))
            .collect();
        never.sort_unstable();
        never.dedup();
        never.len()
    }
}

fn warn_shared_gpus(console: Console, fp: &Fingerprint) {
    console.job_lines(
        crate::diagnose::preflight::shared_gpus(&fp.ranks)
            .iter()
            .map(|g| {
                format!(
                    "# WARNING: {g}: bind one GPU per local rank (CUDA_VISIBLE_DEVICES or --device)"
                )
            }),
    );
}
