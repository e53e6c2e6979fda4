//! Two runs side by side — a run before and a run after a change (a driver upgrade, a new
//! NCCL) — with a verdict that does not cry wolf: what changed in the environment, and per
//! pattern and size whether the second run is slower beyond the threshold *and* beyond the
//! noise of the repeats (see [`super::stats`] for the method).
//!
//! Either run may be a nccl-smoke results file or a nccl-tests log (text or `-J` JSON, see
//! [`super::nccl_tests`]); both become a [`Side`].
//!
//! This file: the [`Options`], the [`Comparison`] and [`compare()`]. Beside it: `side.rs`
//! (what one run measured), `judge.rs` (the call on each size and the reasons for the
//! verdict). What `nccl-smoke compare` prints is `console::compare`'s.

mod judge;
mod side;

pub use side::{Measured, Side, add_measurement, kind};

use super::fingerprint::{self, Change};
use super::stats;

/// The confidence of the interval each size is judged with, unless told otherwise.
pub const LEVEL: f64 = 0.95;
/// Repeats per run `compare` asks for when a run has too few to estimate noise.
pub const SUGGESTED_REPEATS: u32 = 5;

/// What counts as a regression.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Bus bandwidth may drop this many percent before a size counts as regressed.
    pub threshold_pct: f64,
    /// Sizes below this are shown but not judged: latency-bound, their bandwidth is noise.
    pub min_bytes: usize,
    /// Compare a SIMULATED run with a GPU run anyway.
    pub mixed_backends: bool,
    /// The confidence of the interval each size is judged with (e.g. [`LEVEL`]).
    pub level: f64,
}

/// How one size came out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Call {
    /// Below `min_bytes`: shown, not judged.
    NotJudged,
    /// The whole confidence interval lies within the threshold (or, without repeats, the
    /// one measurement does).
    NoRegression,
    /// The whole confidence interval lies beyond the threshold.
    Regressed,
    /// The interval straddles the threshold, or a single measurement lost more than the
    /// threshold with no noise figure to weigh it against.
    Inconclusive {
        /// The noise: pooled standard deviation of the repeats, % of time.
        noise_pct: f64,
        /// Repeats per run that would settle it if shift and noise stay as seen.
        repeats_needed: Option<u32>,
        /// Beyond the threshold and the repeats' noise, not beyond the between-run noise:
        /// more repeats in a run do not settle it, more runs do.
        between_runs: bool,
    },
}

/// One pattern and size measured in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub pattern: String,
    pub size_bytes: usize,
    /// Medians of the repeats.
    pub before_busbw: f64,
    pub after_busbw: f64,
    pub before_us: f64,
    pub after_us: f64,
    /// Smallest and largest bus bandwidth of the repeats.
    pub before_busbw_range: (f64, f64),
    pub after_busbw_range: (f64, f64),
    /// Repeats per run.
    pub repeats: (usize, usize),
    /// Bus bandwidth change, percent (negative: slower), estimated from the times (so it
    /// means something for sizes whose bandwidth prints as 0.000); `None` when a time is
    /// missing or 0.
    pub change_pct: Option<f64>,
    /// Its confidence interval, percent, when the repeats allow one.
    pub interval_pct: Option<(f64, f64)>,
    pub call: Call,
    /// Wrong elements in the second run.
    pub wrong_after: u64,
}

impl Row {
    /// Judged and regressed, or wrong data in the second run.
    pub fn regressed(&self) -> bool {
        self.call == Call::Regressed || self.wrong_after > 0
    }
}

/// The verdict of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No size was judged: nothing in common at or above `--min-bytes`. Never a pass.
    NothingCompared,
    NoRegression,
    Inconclusive,
    Regressed,
}

/// The comparison of two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub changes: Vec<Change>,
    pub rows: Vec<Row>,
    /// (pattern, size) measured in one run only.
    pub only_before: Vec<(String, usize)>,
    pub only_after: Vec<(String, usize)>,
    /// Why the second run counts as regressed, one reason each; empty: no regression.
    pub reasons: Vec<String>,
    /// Why the verdict is inconclusive, one line per pattern.
    pub doubts: Vec<String>,
    /// Notes on how much the comparison can tell (a run without repeats).
    pub notes: Vec<String>,
    /// How much the two runs differ from each other beyond their repeats' noise, % of time
    /// (see `judge::between_runs`); `None` when too few sizes tell.
    pub between_runs_pct: Option<f64>,
}

impl Comparison {
    pub fn regressed(&self) -> bool {
        !self.reasons.is_empty()
    }

    pub fn verdict(&self) -> Verdict {
        if self.regressed() {
            Verdict::Regressed
        } else if self.rows.iter().all(|r| r.call == Call::NotJudged) {
            Verdict::NothingCompared
        } else if !self.doubts.is_empty() {
            Verdict::Inconclusive
        } else {
            Verdict::NoRegression
        }
    }
}

/// Compares `after` with `before`. Refuses runs that cannot be compared (a simulated run
/// against a GPU run, unless `mixed_backends`).
pub fn compare(before: &Side, after: &Side, opts: &Options) -> Result<Comparison, String> {
    if before.simulated != after.simulated && !opts.mixed_backends {
        return Err(
            "one run is SIMULATED and the other is not: CPU numbers say nothing about a GPU run \
             (--mixed-backends compares them anyway)"
                .into(),
        );
    }
    let same = |a: &Measured, b: &Measured| {
        a.pattern == b.pattern && a.size_bytes == b.size_bytes && a.kind == b.kind
    };
    let mut pairs = Vec::new();
    let mut only_before = Vec::new();
    for b in &before.rows {
        match after.rows.iter().find(|a| same(a, b)) {
            Some(a) => pairs.push((b, a, stats::shift(&b.times_us, &a.times_us, opts.level))),
            None => only_before.push((b.pattern.clone(), b.size_bytes)),
        }
    }
    let between = judge::between_runs(&pairs, opts);
    let rows: Vec<Row> = pairs
        .iter()
        .map(|(b, a, shift)| judge::row(b, a, shift.as_ref(), between.unwrap_or(0.0), opts))
        .collect();
    let only_after = after
        .rows
        .iter()
        .filter(|a| !before.rows.iter().any(|b| same(a, b)))
        .map(|a| (a.pattern.clone(), a.size_bytes))
        .collect();
    Ok(Comparison {
        changes: changes(before, after),
        reasons: judge::reasons(before, after, &rows, opts),
        doubts: judge::doubts(&rows, between.map(|b| (b.exp() - 1.0) * 100.0)),
        notes: judge::notes(before, after, opts.level),
        between_runs_pct: between.map(|b| (b.exp() - 1.0) * 100.0),
        rows,
        only_before,
        only_after,
    })
}

fn changes(before: &Side, after: &Side) -> Vec<Change> {
    if let (Some(b), Some(a)) = (&before.fingerprint, &after.fingerprint) {
        return fingerprint::diff(b, a);
    }
    // What every kind of file can say (a nccl-tests log: its NCCL version line, its device
    // lines): each compared where both sides say it.
    let hosts = |s: &Side| (!s.hosts.is_empty()).then(|| s.hosts.len().to_string());
    [
        (
            "nccl.version",
            before.nccl_version.clone(),
            after.nccl_version.clone(),
        ),
        ("gpus", before.gpu_models(), after.gpu_models()),
        ("hosts", hosts(before), hosts(after)),
    ]
    .into_iter()
    .filter_map(|(field, b, a)| match (b, a) {
        (Some(b), Some(a)) if b != a => Some(Change {
            field: field.into(),
            before: b,
            after: a,
        }),
        _ => None,
    })
    .collect()
}

/// The patterns of `rows`, in first-seen order.
pub fn patterns(rows: &[Row]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.contains(&r.pattern) {
            out.push(r.pattern.clone());
        }
    }
    out
}

/// `(judged, bandwidth-bound)` when fewer than half of the (pattern, size) pairs at or above
/// `min_bytes` that either run holds were judged; `None` otherwise.
pub fn coverage(c: &Comparison, min_bytes: usize) -> Option<(usize, usize)> {
    let judged = c.rows.iter().filter(|r| r.call != Call::NotJudged).count();
    let bound = |s: usize| s >= min_bytes;
    let of = c.rows.iter().filter(|r| bound(r.size_bytes)).count()
        + c.only_before.iter().filter(|(_, s)| bound(*s)).count()
        + c.only_after.iter().filter(|(_, s)| bound(*s)).count();
    (judged > 0 && judged * 2 < of).then_some((judged, of))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn measured(pattern: &str, size: usize, times: &[f64], wrong: u64) -> Measured {
        Measured {
            pattern: pattern.into(),
            size_bytes: size,
            kind: kind("float", Some("sum")),
            times_us: times.to_vec(),
            busbw_gbs: times.iter().map(|t| size as f64 / t / 1e3).collect(),
            wrong,
        }
    }

    pub(super) fn side(rows: Vec<Measured>) -> Side {
        Side {
            source: "nccl-smoke".into(),
            started_at: None,
            ranks: 2,
            simulated: true,
            fingerprint: None,
            nccl_version: None,
            failed: None,
            rows,
            gpus: Vec::new(),
            hosts: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub(super) const OPTS: Options = Options {
        threshold_pct: 5.0,
        min_bytes: 1 << 20,
        mixed_backends: false,
        level: LEVEL,
    };
    pub(super) const STEADY: [f64; 5] = [100.0, 101.0, 99.0, 100.5, 99.5];

    pub(super) fn scaled(f: f64, xs: &[f64]) -> Vec<f64> {
        xs.iter().map(|x| x * f).collect()
    }

    #[test]
    fn a_verdict_on_a_few_of_the_sizes_says_how_few() {
        let big = |p: &str, s: usize| measured(p, s, &STEADY, 0);
        // One size in common of the four bandwidth-bound sizes the runs hold together.
        let before = side(vec![big("all_reduce", 1 << 20), big("all_reduce", 1 << 21)]);
        let after = side(vec![big("all_reduce", 1 << 20), big("all_to_all", 1 << 22)]);
        let c = compare(&before, &after, &OPTS).unwrap();
        assert_eq!(c.verdict(), Verdict::NoRegression);
        assert_eq!(coverage(&c, OPTS.min_bytes), Some((1, 3)));
        // Everything in common: nothing to say.
        let c = compare(&before, &before, &OPTS).unwrap();
        assert_eq!(coverage(&c, OPTS.min_bytes), None);
    }

    #[test]
    fn a_repeated_nccl_tests_log_becomes_repeats_and_runs_of_one_kind_only_match() {
        let mut rows = Vec::new();
        add_measurement(&mut rows, measured("all_reduce", 8, &[1.0], 0));
        add_measurement(&mut rows, measured("all_reduce", 16, &[2.0], 0));
        add_measurement(&mut rows, measured("all_reduce", 8, &[3.0], 1));
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].times_us.clone(), rows[0].wrong),
            (vec![1.0, 3.0], 1)
        );
        let before = side(rows);
        let after = side(vec![measured("all_to_all", 8, &[1.0], 0)]);
        let c = compare(&before, &after, &OPTS).unwrap();
        assert_eq!(c.only_before.len(), 2);
        assert_eq!(c.only_after, vec![("all_to_all".to_string(), 8)]);
        let mut gpu = after.clone();
        gpu.simulated = false;
        assert!(
            compare(&before, &gpu, &OPTS)
                .unwrap_err()
                .contains("SIMULATED")
        );
        assert!(
            compare(
                &before,
                &gpu,
                &Options {
                    mixed_backends: true,
                    ..OPTS
                }
            )
            .is_ok()
        );
    }
}
