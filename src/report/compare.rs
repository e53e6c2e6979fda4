//! Two results files side by side — a run before and a run after a change (a driver upgrade,
//! a new NCCL) — with a regression verdict: what changed in the environment, and which
//! pattern and size lost bus bandwidth beyond a threshold.

use super::fingerprint::{self, Change};
use super::results::{ResultsDoc, Status};
use crate::bench::SizeResult;

/// What counts as a regression.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Bus bandwidth may drop this many percent before a size counts as regressed.
    pub threshold_pct: f64,
    /// Sizes below this are shown but not judged: latency-bound, their bandwidth is noise.
    pub min_bytes: usize,
}

/// One pattern and size measured in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub pattern: String,
    pub size_bytes: usize,
    pub before_busbw: f64,
    pub after_busbw: f64,
    pub before_us: f64,
    pub after_us: f64,
    /// Bus bandwidth change, percent (negative: slower); `None` when the first run moved
    /// nothing measurable (size 0).
    pub change_pct: Option<f64>,
    /// Judged (at or above `min_bytes`) and below the threshold, or wrong data after.
    pub regressed: bool,
    /// Wrong elements in the second run.
    pub wrong_after: u64,
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
}

impl Comparison {
    pub fn regressed(&self) -> bool {
        !self.reasons.is_empty()
    }
}

fn key(r: &SizeResult) -> (String, usize, String) {
    (
        r.pattern.clone(),
        r.size_bytes,
        format!("{}/{:?}", r.dtype.name(), r.redop.map(|o| o.name())),
    )
}

/// Compares `after` with `before`. Refuses runs that cannot be compared (a simulated run
/// against a GPU run).
pub fn compare(
    before: &ResultsDoc,
    after: &ResultsDoc,
    opts: &Options,
) -> Result<Comparison, String> {
    if before.simulated != after.simulated {
        return Err(
            "one run is SIMULATED and the other is not: CPU numbers say nothing about a GPU run"
                .into(),
        );
    }
    let mut rows = Vec::new();
    let mut only_before = Vec::new();
    for b in &before.results {
        match after.results.iter().find(|a| key(a) == key(b)) {
            Some(a) => rows.push(row(b, a, opts)),
            None => only_before.push((b.pattern.clone(), b.size_bytes)),
        }
    }
    let only_after = after
        .results
        .iter()
        .filter(|a| !before.results.iter().any(|b| key(a) == key(b)))
        .map(|a| (a.pattern.clone(), a.size_bytes))
        .collect();
    let mut reasons = Vec::new();
    if after.verdict.status == Status::Fail && before.verdict.status != Status::Fail {
        reasons.push(format!("the second run failed: {}", after.verdict.line));
    }
    let wrong: Vec<&Row> = rows.iter().filter(|r| r.wrong_after > 0).collect();
    if !wrong.is_empty() {
        reasons.push(format!(
            "wrong data in the second run at {}",
            wrong
                .iter()
                .map(|r| format!("{} {} B", r.pattern, r.size_bytes))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for pattern in patterns(&rows) {
        // Sizes that lost bandwidth (wrong data is reported above).
        let slower: Vec<(f64, usize)> = rows
            .iter()
            .filter(|r| r.pattern == pattern && r.regressed && r.wrong_after == 0)
            .filter_map(|r| r.change_pct.map(|c| (c, r.size_bytes)))
            .collect();
        let count = slower.len();
        let worst = slower.into_iter().min_by(|x, y| x.0.total_cmp(&y.0));
        if let Some((pct, size)) = worst {
            reasons.push(format!(
                "{pattern}: bus bandwidth down beyond {}% at {count} size(s), worst {pct:.1}% at {size} B",
                opts.threshold_pct
            ));
        }
    }
    Ok(Comparison {
        changes: fingerprint::diff(&before.fingerprint, &after.fingerprint),
        rows,
        only_before,
        only_after,
        reasons,
    })
}

fn row(b: &SizeResult, a: &SizeResult, opts: &Options) -> Row {
    let change_pct = (b.busbw_gbs > 0.0).then(|| (a.busbw_gbs / b.busbw_gbs - 1.0) * 100.0);
    let judged = b.size_bytes >= opts.min_bytes;
    let slower = change_pct.is_some_and(|c| c < -opts.threshold_pct);
    Row {
        pattern: b.pattern.clone(),
        size_bytes: b.size_bytes,
        before_busbw: b.busbw_gbs,
        after_busbw: a.busbw_gbs,
        before_us: b.time_us.avg,
        after_us: a.time_us.avg,
        change_pct,
        regressed: (judged && slower) || a.wrong > 0,
        wrong_after: a.wrong,
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
    use crate::bench::Times;
    use crate::data::DataType;

    fn result(pattern: &str, size: usize, busbw: f64, wrong: u64) -> SizeResult {
        SizeResult {
            pattern: pattern.into(),
            size_bytes: size,
            count: size / 4,
            dtype: DataType::Float,
            redop: None,
            time_us: Times {
                avg: 100.0,
                slowest: 100.0,
                p50: 90.0,
                p99: 120.0,
                max: 130.0,
            },
            algbw_gbs: busbw,
            busbw_gbs: busbw,
            wrong,
            checked: true,
            slowest_rank: 0,
            rank_avg_us: vec![100.0],
            first_wrong: None,
        }
    }

    fn doc(results: Vec<SizeResult>) -> ResultsDoc {
        let mut d = super::super::results::tests::sample_doc();
        d.results = results;
        d
    }

    const OPTS: Options = Options {
        threshold_pct: 5.0,
        min_bytes: 1 << 20,
    };

    #[test]
    fn a_drop_beyond_the_threshold_on_a_judged_size_regresses() {
        let before = doc(vec![
            result("all_reduce", 1024, 1.0, 0),
            result("all_reduce", 1 << 20, 100.0, 0),
            result("all_reduce", 1 << 24, 200.0, 0),
            result("all_to_all", 1 << 24, 50.0, 0),
        ]);
        let after = doc(vec![
            result("all_reduce", 1024, 0.5, 0),
            result("all_reduce", 1 << 20, 96.0, 0),
            result("all_reduce", 1 << 24, 150.0, 0),
            result("all_to_all", 1 << 24, 51.0, 0),
        ]);
        let c = compare(&before, &after, &OPTS).unwrap();
        assert!(c.regressed());
        assert_eq!(
            c.rows.iter().map(|r| r.regressed).collect::<Vec<_>>(),
            vec![false, false, true, false],
            "small sizes are not judged; -4% is within 5%"
        );
        assert_eq!(
            c.reasons,
            vec![format!(
                "all_reduce: bus bandwidth down beyond 5% at 1 size(s), worst -25.0% at {} B",
                1 << 24
            )]
        );
    }

    #[test]
    fn the_same_run_does_not_regress_and_wrong_data_does() {
        let before = doc(vec![result("all_reduce", 1 << 24, 200.0, 0)]);
        let c = compare(&before, &before, &OPTS).unwrap();
        assert!(!c.regressed() && c.changes.is_empty() && c.rows[0].change_pct == Some(0.0));
        let after = doc(vec![result("all_reduce", 1 << 24, 200.0, 3)]);
        let c = compare(&before, &after, &OPTS).unwrap();
        assert_eq!(
            c.reasons,
            vec![format!(
                "wrong data in the second run at all_reduce {} B",
                1 << 24
            )]
        );
    }

    #[test]
    fn sizes_in_one_run_only_are_listed_and_simulated_is_not_compared_with_gpu() {
        let before = doc(vec![result("all_reduce", 8, 0.1, 0)]);
        let after = doc(vec![result("all_to_all", 8, 0.1, 0)]);
        let c = compare(&before, &after, &OPTS).unwrap();
        assert_eq!(c.only_before, vec![("all_reduce".to_string(), 8)]);
        assert_eq!(c.only_after, vec![("all_to_all".to_string(), 8)]);
        let mut sim = after.clone();
        sim.simulated = !before.simulated;
        assert!(
            compare(&before, &sim, &OPTS)
                .unwrap_err()
                .contains("SIMULATED")
        );
    }

    #[test]
    fn a_failed_second_run_regresses() {
        let before = doc(vec![]);
        let mut after = doc(vec![]);
        after.verdict.status = Status::Fail;
        after.verdict.line = "FAIL at init on rank 1 (host b): boom".into();
        let c = compare(&before, &after, &OPTS).unwrap();
        assert_eq!(
            c.reasons,
            vec!["the second run failed: FAIL at init on rank 1 (host b): boom".to_string()]
        );
    }
}
