//! Two runs side by side — a run before and a run after a change (a driver upgrade, a new
//! NCCL) — with a verdict that does not cry wolf: what changed in the environment, and per
//! pattern and size whether the second run is slower beyond the threshold *and* beyond the
//! noise of the repeats (see [`super::stats`] for the method).
//!
//! Either run may be a nccl-smoke results file or a nccl-tests log (text or `-J` JSON, see
//! [`super::nccl_tests`]); both become a [`Side`].

use super::fingerprint::{self, Change, Fingerprint};
use super::results::{ResultsDoc, Status};
use super::stats::{self, Shift};

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

/// One pattern and size of one run, its repeats as measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// nccl-smoke's pattern name.
    pub pattern: String,
    pub size_bytes: usize,
    /// Element type and reduction, e.g. `float/sum` (`float/-` when the pattern reduces
    /// nothing): sizes of another type are other rows.
    pub kind: String,
    /// Time per iteration of each repeat, µs.
    pub times_us: Vec<f64>,
    /// Bus bandwidth of each repeat, GB/s.
    pub busbw_gbs: Vec<f64>,
    /// Wrong elements over all repeats.
    pub wrong: u64,
}

/// One run as `compare` sees it, whatever file it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// What kind of file: `nccl-smoke`, `nccl-tests text`, `nccl-tests JSON`.
    pub source: String,
    /// When it ran, when the file says.
    pub started_at: Option<String>,
    pub ranks: usize,
    pub simulated: bool,
    pub fingerprint: Option<Fingerprint>,
    /// The NCCL version the file names.
    pub nccl_version: Option<String>,
    /// The run's own failure line, when it failed.
    pub failed: Option<String>,
    pub rows: Vec<Measured>,
}

/// The element type and reduction key of a row.
pub fn kind(dtype: &str, redop: Option<&str>) -> String {
    format!("{dtype}/{}", redop.unwrap_or("-"))
}

/// Adds one measurement to `rows`, as a further repeat of a row with the same pattern, size
/// and kind when there is one (a log that holds several runs of one sweep).
pub fn add_measurement(rows: &mut Vec<Measured>, m: Measured) {
    match rows
        .iter_mut()
        .find(|r| r.pattern == m.pattern && r.size_bytes == m.size_bytes && r.kind == m.kind)
    {
        Some(r) => {
            r.times_us.extend(m.times_us);
            r.busbw_gbs.extend(m.busbw_gbs);
            r.wrong += m.wrong;
        }
        None => rows.push(m),
    }
}

impl Side {
    /// A nccl-smoke results file.
    pub fn from_results(doc: &ResultsDoc) -> Side {
        let rows = doc
            .results
            .iter()
            .map(|r| {
                let (times_us, busbw_gbs) = if r.repeats.is_empty() {
                    (vec![r.time_us.avg], vec![r.busbw_gbs])
                } else {
                    (
                        r.repeats.iter().map(|x| x.time_us).collect(),
                        r.repeats.iter().map(|x| x.busbw_gbs).collect(),
                    )
                };
                Measured {
                    pattern: r.pattern.clone(),
                    size_bytes: r.size_bytes,
                    kind: kind(r.dtype.name(), r.redop.map(|o| o.name())),
                    times_us,
                    busbw_gbs,
                    wrong: r.wrong,
                }
            })
            .collect();
        Side {
            source: "nccl-smoke".into(),
            started_at: Some(doc.started_at.clone()),
            ranks: doc.fingerprint.ranks.len(),
            simulated: doc.simulated,
            fingerprint: Some(doc.fingerprint.clone()),
            nccl_version: doc.fingerprint.nccl.as_ref().map(|n| n.version.clone()),
            failed: (doc.verdict.status == Status::Fail).then(|| doc.verdict.line.clone()),
            rows,
        }
    }

    /// The fewest repeats any of its rows has.
    pub fn repeats(&self) -> usize {
        self.rows
            .iter()
            .map(|r| r.times_us.len())
            .min()
            .unwrap_or(0)
    }
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
    /// (see [`between_runs`]); `None` when too few sizes tell.
    pub between_runs_pct: Option<f64>,
}

impl Comparison {
    pub fn regressed(&self) -> bool {
        !self.reasons.is_empty()
    }

    pub fn verdict(&self) -> Verdict {
        if self.regressed() {
            Verdict::Regressed
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
    let between = between_runs(&pairs, opts);
    let rows: Vec<Row> = pairs
        .iter()
        .map(|(b, a, shift)| row(b, a, shift.as_ref(), between.unwrap_or(0.0), opts))
        .collect();
    let only_after = after
        .rows
        .iter()
        .filter(|a| !before.rows.iter().any(|b| same(a, b)))
        .map(|a| (a.pattern.clone(), a.size_bytes))
        .collect();
    Ok(Comparison {
        changes: changes(before, after),
        reasons: reasons(before, after, &rows, opts),
        doubts: doubts(&rows, between.map(|b| (b.exp() - 1.0) * 100.0)),
        notes: notes(before, after, opts.level),
        between_runs_pct: between.map(|b| (b.exp() - 1.0) * 100.0),
        rows,
        only_before,
        only_after,
    })
}

fn changes(before: &Side, after: &Side) -> Vec<Change> {
    match (&before.fingerprint, &after.fingerprint) {
        (Some(b), Some(a)) => fingerprint::diff(b, a),
        _ => match (&before.nccl_version, &after.nccl_version) {
            (Some(b), Some(a)) if b != a => vec![Change {
                field: "nccl.version".into(),
                before: b.clone(),
                after: a.clone(),
            }],
            _ => Vec::new(),
        },
    }
}

fn reasons(before: &Side, after: &Side, rows: &[Row], opts: &Options) -> Vec<String> {
    let mut reasons = Vec::new();
    if let (Some(line), None) = (&after.failed, &before.failed) {
        reasons.push(format!("the second run failed: {line}"));
    }
    let wrong: Vec<String> = rows
        .iter()
        .filter(|r| r.wrong_after > 0)
        .map(|r| format!("{} {} B", r.pattern, r.size_bytes))
        .collect();
    if !wrong.is_empty() {
        reasons.push(format!(
            "wrong data in the second run at {}",
            wrong.join(", ")
        ));
    }
    for pattern in patterns(rows) {
        let slower: Vec<&Row> = rows
            .iter()
            .filter(|r| r.pattern == pattern && r.call == Call::Regressed && r.wrong_after == 0)
            .collect();
        let worst = slower
            .iter()
            .filter_map(|r| r.change_pct.map(|c| (c, r)))
            .min_by(|x, y| x.0.total_cmp(&y.0));
        if let Some((pct, r)) = worst {
            let ci = r
                .interval_pct
                .map(|(lo, hi)| {
                    format!(
                        " ({:.0}% interval {lo:+.1}% to {hi:+.1}%)",
                        opts.level * 100.0
                    )
                })
                .unwrap_or_default();
            reasons.push(format!(
                "{pattern}: bus bandwidth down beyond {}% and beyond the noise at {} size(s), \
                 worst {pct:+.1}%{ci} at {} B",
                opts.threshold_pct,
                slower.len(),
                r.size_bytes
            ));
        }
    }
    reasons
}

fn doubts(rows: &[Row], between_pct: Option<f64>) -> Vec<String> {
    let mut out = Vec::new();
    for pattern in patterns(rows) {
        let unsure: Vec<(&Row, f64, Option<u32>, bool)> = rows
            .iter()
            .filter(|r| r.pattern == pattern)
            .filter_map(|r| match r.call {
                Call::Inconclusive {
                    noise_pct,
                    repeats_needed,
                    between_runs,
                } => Some((r, noise_pct, repeats_needed, between_runs)),
                _ => None,
            })
            .collect();
        let Some(noise) = unsure.iter().map(|u| u.1).reduce(f64::max) else {
            continue;
        };
        let sizes: Vec<String> = unsure
            .iter()
            .map(|u| format!("{} B", u.0.size_bytes))
            .collect();
        let settle = if unsure.iter().any(|u| u.0.interval_pct.is_none()) {
            format!(
                "too few repeats for a noise band; run both with --repeat {SUGGESTED_REPEATS} or more"
            )
        } else if unsure.iter().all(|u| u.3) {
            format!(
                "slower beyond the repeats' noise, but the runs' sizes disagree by {:.1}% \
                 (between-run noise): run each side again, more repeats in one run do not \
                 settle it",
                between_pct.unwrap_or(0.0)
            )
        } else {
            // The estimate is a normal approximation; the repeats already taken did not
            // settle it, so never ask for fewer than one more.
            let had = unsure
                .iter()
                .map(|u| u.0.repeats.0.max(u.0.repeats.1))
                .max();
            let more = had.unwrap_or(0) as u32 + 1;
            match unsure
                .iter()
                .filter(|u| !u.3)
                .map(|u| u.2)
                .collect::<Option<Vec<u32>>>()
            {
                Some(n) => format!(
                    "about {} repeats per run would settle it",
                    n.into_iter().max().unwrap_or(SUGGESTED_REPEATS).max(more)
                ),
                None => "the change sits on the threshold: more repeats may not settle it".into(),
            }
        };
        out.push(format!(
            "{pattern}: cannot tell at {}: noise {noise:.1}% of time; {settle}",
            sizes.join(", ")
        ));
    }
    out
}

fn notes(before: &Side, after: &Side, level: f64) -> Vec<String> {
    let (nb, na) = (before.repeats(), after.repeats());
    let fewest = stats::fewest_repeats(level);
    if nb.min(na) >= fewest {
        return Vec::new();
    }
    vec![format!(
        "{nb} and {na} repeat(s) per size: too few for a noise band at {:.0}% ({fewest} a side \
         at least); a loss beyond the threshold is INCONCLUSIVE, not REGRESSED, and a \
         run-to-run swing of 10-30% is common on a shared machine. Use run --repeat \
         {SUGGESTED_REPEATS}, or concatenate several nccl-tests logs",
        level * 100.0
    )]
}

/// Sizes from `min_bytes / BETWEEN_SPAN` up tell the between-run noise.
const BETWEEN_SPAN: usize = 16;
/// The fewest sizes the between-run noise is estimated from.
const BETWEEN_MIN_SIZES: usize = 6;

/// The between-run noise, a log-time standard deviation: how much the sizes of this pair of
/// runs disagree about the shift from one run to the other (the standard deviation of their
/// shift estimates, sizes from `min_bytes / 16` up, the judged ones included). Repeats in one
/// run share that run's conditions (its connections, the machine's load while it ran), so
/// their spread misses what changes from run to run; a real change moves the sizes together,
/// a run-to-run swing moves one size away from the others. `None` from fewer than 6 sizes.
fn between_runs(pairs: &[(&Measured, &Measured, Option<Shift>)], opts: &Options) -> Option<f64> {
    let from = (opts.min_bytes / BETWEEN_SPAN).max(1);
    let shifts: Vec<f64> = pairs
        .iter()
        .filter(|(b, _, _)| b.size_bytes >= from)
        .filter_map(|(_, _, s)| s.map(|s| s.estimate))
        .collect();
    (shifts.len() >= BETWEEN_MIN_SIZES).then(|| stats::sd(&shifts))
}

fn row(b: &Measured, a: &Measured, shift: Option<&Shift>, between: f64, opts: &Options) -> Row {
    let med = |xs: &[f64]| stats::median(xs).unwrap_or(0.0);
    let range = |xs: &[f64]| {
        xs.iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            })
    };
    // Time up by d (log) is bus bandwidth down to e^-d.
    let pct = |d: f64| ((-d).exp() - 1.0) * 100.0;
    let call = if b.size_bytes < opts.min_bytes {
        Call::NotJudged
    } else {
        judge(shift, between, opts)
    };
    Row {
        pattern: b.pattern.clone(),
        size_bytes: b.size_bytes,
        before_busbw: med(&b.busbw_gbs),
        after_busbw: med(&a.busbw_gbs),
        before_us: med(&b.times_us),
        after_us: med(&a.times_us),
        before_busbw_range: range(&b.busbw_gbs),
        after_busbw_range: range(&a.busbw_gbs),
        repeats: (b.times_us.len(), a.times_us.len()),
        change_pct: shift.map(|s| pct(s.estimate)),
        interval_pct: shift.and_then(|s| s.interval.map(|(lo, hi)| (pct(hi), pct(lo)))),
        call,
        wrong_after: a.wrong,
    }
}

/// The call on one judged size: the time shift's interval against the bound that a
/// `threshold_pct` loss of bus bandwidth puts on time. A regression must also clear the
/// between-run noise `between` (z × it, z of the confidence level).
fn judge(shift: Option<&Shift>, between: f64, opts: &Options) -> Call {
    let Some(s) = shift else {
        return Call::NotJudged; // a time of 0 or none: nothing to judge on
    };
    let bound = -(1.0 - opts.threshold_pct / 100.0).ln();
    let margin = stats::z(opts.level) * between;
    let inconclusive = |between_runs: bool| Call::Inconclusive {
        noise_pct: (s.noise.exp() - 1.0) * 100.0,
        repeats_needed: if between_runs {
            None
        } else {
            stats::repeats_needed(s, bound, opts.level)
        },
        between_runs,
    };
    match s.interval {
        Some((lo, _)) if lo > bound + margin => Call::Regressed,
        Some((lo, _)) if lo > bound => inconclusive(true),
        Some((_, hi)) if hi <= bound => Call::NoRegression,
        Some(_) => inconclusive(false),
        None if s.estimate > bound => inconclusive(false),
        None => Call::NoRegression,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(pattern: &str, size: usize, times: &[f64], wrong: u64) -> Measured {
        Measured {
            pattern: pattern.into(),
            size_bytes: size,
            kind: kind("float", Some("sum")),
            times_us: times.to_vec(),
            busbw_gbs: times.iter().map(|t| size as f64 / t / 1e3).collect(),
            wrong,
        }
    }

    fn side(rows: Vec<Measured>) -> Side {
        Side {
            source: "nccl-smoke".into(),
            started_at: None,
            ranks: 2,
            simulated: true,
            fingerprint: None,
            nccl_version: None,
            failed: None,
            rows,
        }
    }

    const OPTS: Options = Options {
        threshold_pct: 5.0,
        min_bytes: 1 << 20,
        mixed_backends: false,
        level: LEVEL,
    };
    const STEADY: [f64; 5] = [100.0, 101.0, 99.0, 100.5, 99.5];

    fn scaled(f: f64, xs: &[f64]) -> Vec<f64> {
        xs.iter().map(|x| x * f).collect()
    }

    #[test]
    fn a_loss_beyond_threshold_and_noise_regresses_a_judged_size_only() {
        let before = side(vec![
            measured("all_reduce", 1024, &STEADY, 0),
            measured("all_reduce", 1 << 24, &STEADY, 0),
            measured("all_to_all", 1 << 24, &STEADY, 0),
        ]);
        let after = side(vec![
            measured("all_reduce", 1024, &scaled(2.0, &STEADY), 0),
            measured("all_reduce", 1 << 24, &scaled(1.5, &STEADY), 0),
            measured("all_to_all", 1 << 24, &scaled(1.01, &STEADY), 0),
        ]);
        let c = compare(&before, &after, &OPTS).unwrap();
        assert_eq!(c.verdict(), Verdict::Regressed);
        let calls: Vec<Call> = c.rows.iter().map(|r| r.call).collect();
        assert_eq!(
            calls,
            vec![Call::NotJudged, Call::Regressed, Call::NoRegression]
        );
        let r = &c.rows[1];
        assert!((r.change_pct.unwrap() - (1.0 / 1.5 - 1.0) * 100.0).abs() < 1e-9);
        assert_eq!(c.reasons.len(), 1);
        assert!(
            c.reasons[0].starts_with(
                "all_reduce: bus bandwidth down beyond 5% and beyond the noise at 1 size(s), worst -33.3% (95% interval"
            ),
            "{}",
            c.reasons[0]
        );
        assert!(c.notes.is_empty());
    }

    #[test]
    fn noise_wider_than_the_threshold_is_inconclusive_with_the_repeats_that_would_settle_it() {
        let noisy = [80.0, 120.0, 95.0, 110.0, 100.0];
        let before = side(vec![measured("all_reduce", 1 << 24, &noisy, 0)]);
        let after = side(vec![measured(
            "all_reduce",
            1 << 24,
            &[100.0, 85.0, 118.0, 97.0, 112.0],
            0,
        )]);
        let c = compare(&before, &after, &OPTS).unwrap();
        assert_eq!(c.verdict(), Verdict::Inconclusive);
        let Call::Inconclusive {
            noise_pct,
            repeats_needed,
            ..
        } = c.rows[0].call
        else {
            panic!("{:?}", c.rows[0].call)
        };
        assert!(noise_pct > 10.0 && noise_pct < 25.0, "{noise_pct}");
        assert!(repeats_needed.is_some_and(|n| n > 5), "{repeats_needed:?}");
        assert!(c.doubts[0].starts_with("all_reduce: cannot tell at 16777216 B: noise"));
    }

    #[test]
    fn one_repeat_never_regresses_on_speed_and_says_how_little_it_tells() {
        let before = side(vec![measured("all_reduce", 1 << 24, &[100.0], 0)]);
        let slower = side(vec![measured("all_reduce", 1 << 24, &[150.0], 0)]);
        let c = compare(&before, &slower, &OPTS).unwrap();
        assert_eq!(c.verdict(), Verdict::Inconclusive);
        assert!(c.doubts[0].contains("--repeat 5"), "{:?}", c.doubts);
        assert!(c.notes[0].starts_with("1 and 1 repeat(s) per size"));
        let c = compare(&before, &before, &OPTS).unwrap();
        assert_eq!(c.verdict(), Verdict::NoRegression);
        assert!(!c.notes.is_empty());
        let wrong = side(vec![measured("all_reduce", 1 << 24, &[100.0], 3)]);
        let c = compare(&before, &wrong, &OPTS).unwrap();
        assert_eq!(c.verdict(), Verdict::Regressed);
        assert_eq!(
            c.reasons,
            vec![format!(
                "wrong data in the second run at all_reduce {} B",
                1 << 24
            )]
        );
    }

    #[test]
    fn a_loss_within_the_sizes_disagreement_is_between_run_noise_and_a_shared_one_regresses() {
        let sizes = [1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 20, 1 << 21];
        let before = side(
            sizes
                .iter()
                .map(|&n| measured("all_reduce", n, &STEADY, 0))
                .collect(),
        );
        // The sizes disagree by ±10%, and the largest is 1.4x slower: a run-to-run swing.
        let factors = [0.9, 1.1, 0.95, 1.08, 1.0, 1.4];
        let swing = side(
            sizes
                .iter()
                .zip(factors)
                .map(|(&n, f)| measured("all_reduce", n, &scaled(f, &STEADY), 0))
                .collect(),
        );
        let c = compare(&before, &swing, &OPTS).unwrap();
        assert_eq!(c.verdict(), Verdict::Inconclusive, "{:?}", c.rows);
        assert!(matches!(
            c.rows[5].call,
            Call::Inconclusive {
                between_runs: true,
                ..
            }
        ));
        assert!(c.doubts[0].contains("between-run noise"), "{:?}", c.doubts);
        assert!(
            c.between_runs_pct.is_some_and(|b| b > 10.0),
            "{:?}",
            c.between_runs_pct
        );
        // Every size 1.4x slower: a real change.
        let slower = side(
            sizes
                .iter()
                .map(|&n| measured("all_reduce", n, &scaled(1.4, &STEADY), 0))
                .collect(),
        );
        let c = compare(&before, &slower, &OPTS).unwrap();
        assert_eq!(c.verdict(), Verdict::Regressed);
        assert!(c.between_runs_pct.is_some_and(|b| b < 1.0));
    }

    #[test]
    fn three_repeats_a_side_judge_at_90_percent_not_at_95() {
        let before = side(vec![measured("all_reduce", 1 << 24, &STEADY[..3], 0)]);
        let after = side(vec![measured(
            "all_reduce",
            1 << 24,
            &scaled(1.5, &STEADY[..3]),
            0,
        )]);
        let c = compare(&before, &after, &OPTS).unwrap();
        assert_eq!(c.verdict(), Verdict::Inconclusive);
        assert!(c.notes[0].contains("(4 a side at least)"), "{:?}", c.notes);
        let c = compare(&before, &after, &Options { level: 0.9, ..OPTS }).unwrap();
        assert_eq!(c.verdict(), Verdict::Regressed);
        assert!(c.notes.is_empty());
    }

    #[test]
    fn sizes_whose_bandwidth_prints_zero_are_judged_on_time() {
        // 8 bytes in 20 µs: busbw 0.0004 GB/s, printed as 0.000 on both sides.
        let before = side(vec![measured(
            "all_reduce",
            8,
            &[20.0, 20.5, 19.5, 20.2, 19.8],
            0,
        )]);
        let after = side(vec![measured(
            "all_reduce",
            8,
            &[20.1, 20.4, 19.6, 20.3, 19.9],
            0,
        )]);
        let c = compare(
            &before,
            &after,
            &Options {
                min_bytes: 0,
                ..OPTS
            },
        )
        .unwrap();
        let r = &c.rows[0];
        assert!(r.change_pct.unwrap().abs() < 2.0, "{r:?}");
        assert_eq!(r.call, Call::NoRegression);
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

    #[test]
    fn a_failed_second_run_regresses_and_nccl_versions_are_compared_without_fingerprints() {
        let before = Side {
            nccl_version: Some("2.19.3".into()),
            ..side(vec![])
        };
        let after = Side {
            failed: Some("FAIL at init on rank 1 (host b): boom".into()),
            nccl_version: Some("2.21.5".into()),
            ..side(vec![])
        };
        let c = compare(&before, &after, &OPTS).unwrap();
        assert_eq!(
            c.reasons,
            vec!["the second run failed: FAIL at init on rank 1 (host b): boom".to_string()]
        );
        assert_eq!(c.changes[0].to_string(), "nccl.version: 2.19.3 -> 2.21.5");
    }

    #[test]
    fn a_results_file_with_repeats_gives_its_repeats() {
        let mut doc = super::super::results::tests::sample_doc();
        let mut r = super::super::repeats::tests::measured(1 << 20, 100.0, 0);
        crate::report::repeats::record(&mut doc.results, r.clone(), 2);
        r.time_us.avg = 110.0;
        crate::report::repeats::record(&mut doc.results, r, 2);
        let s = Side::from_results(&doc);
        assert_eq!(s.rows[0].times_us, vec![100.0, 110.0]);
        assert_eq!(s.repeats(), 2);
    }
}
