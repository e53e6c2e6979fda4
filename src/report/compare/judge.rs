//! The call on each size (noise, threshold and between-run noise weighed) and the words for
//! the verdict: the reasons a run regressed, the doubts that leave it inconclusive, the notes
//! on how little too few repeats tell.

use super::{Call, Measured, Options, Row, SUGGESTED_REPEATS, Side, patterns};
use crate::report::stats::{self, Shift};

pub(super) fn reasons(before: &Side, after: &Side, rows: &[Row], opts: &Options) -> Vec<String> {
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

pub(super) fn doubts(rows: &[Row], between_pct: Option<f64>) -> Vec<String> {
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
        if unsure.is_empty() {
            continue;
        }
        // The repeats' noise, where a size had repeats on both sides to measure it.
        let noise = unsure
            .iter()
            .filter(|u| u.0.interval_pct.is_some())
            .map(|u| u.1)
            .reduce(f64::max)
            .map(|n| format!("noise {n:.1}% of time"))
            .unwrap_or_else(|| "noise unknown (one measurement a side)".into());
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
            "{pattern}: cannot tell at {}: {noise}; {settle}",
            sizes.join(", ")
        ));
    }
    out
}

pub(super) fn notes(before: &Side, after: &Side, level: f64) -> Vec<String> {
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
pub(super) fn between_runs(
    pairs: &[(&Measured, &Measured, Option<Shift>)],
    opts: &Options,
) -> Option<f64> {
    let from = (opts.min_bytes / BETWEEN_SPAN).max(1);
    let shifts: Vec<f64> = pairs
        .iter()
        .filter(|(b, _, _)| b.size_bytes >= from)
        .filter_map(|(_, _, s)| s.map(|s| s.estimate))
        .collect();
    (shifts.len() >= BETWEEN_MIN_SIZES).then(|| stats::sd(&shifts))
}

pub(super) fn row(
    b: &Measured,
    a: &Measured,
    shift: Option<&Shift>,
    between: f64,
    opts: &Options,
) -> Row {
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

#[cfg(test)]
mod tests {
    use super::super::tests::{OPTS, STEADY, measured, scaled, side};
    use super::super::{Call, Options, Side, Verdict, compare};

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
        // One measurement a side has no noise figure: never "noise 0.0%".
        assert!(
            c.doubts[0].contains("noise unknown (one measurement a side)"),
            "{:?}",
            c.doubts
        );
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
}
