//! How a host's figures are judged against the others': medians and scaled median absolute
//! deviations, each host's score from the groups it was in.

use super::{GroupResult, Outcome, Phase};
use std::collections::BTreeSet;

/// Slower than the median by more than this many scaled MADs (and the slow fraction) is slow.
pub const MAD_LIMIT: f64 = 3.0;
/// …and by more than this fraction of the median, unless `--slow-below` says otherwise.
pub const SLOW_FRACTION: f64 = 0.25;
/// The MAD of normally distributed data times this is its standard deviation.
const MAD_SCALE: f64 = 1.4826;

pub(super) fn median(v: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The values that are low outliers by the median/MAD rule above, each judged against the
/// median and MAD of the *other* values: with a handful of hosts, a slow host's own deficit
/// would otherwise widen the spread it is measured against (4 hosts at 1.11, 0.89, 1.03 and
/// 0.51 of the median: 0.51 is within 3 MADs of all four, and 4 MADs below the other three).
pub fn low_outliers(values: &[f64], slow_fraction: f64) -> Vec<bool> {
    (0..values.len())
        .map(|i| {
            let others: Vec<f64> = values
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, v)| *v)
                .collect();
            let Some(med) = median(&others) else {
                return false;
            };
            let dev: Vec<f64> = others.iter().map(|v| (v - med).abs()).collect();
            let mad = median(&dev).unwrap_or(0.0) * MAD_SCALE;
            let v = values[i];
            med - v > MAD_LIMIT * mad && med - v > slow_fraction * med
        })
        .collect()
}

/// Each group's score in its phase: per pattern, its bus bandwidth over the phase's median for
/// that pattern, averaged over patterns. Failed groups, and groups whose busbw is 0 (one rank
/// alone), have none.
pub(super) fn scores(groups: &[GroupResult], phase: impl Fn(Phase) -> bool) -> Vec<Option<f64>> {
    let rows = |g: &GroupResult| match &g.outcome {
        Outcome::Passed { rows } if phase(g.phase) && rows.iter().any(|r| r.busbw_gbs > 0.0) => {
            Some(rows.clone())
        }
        _ => None,
    };
    let patterns: BTreeSet<String> = groups
        .iter()
        .filter_map(rows)
        .flatten()
        .map(|r| r.pattern)
        .collect();
    let medians: Vec<(String, f64)> = patterns
        .into_iter()
        .filter_map(|p| {
            let v: Vec<f64> = groups
                .iter()
                .filter_map(rows)
                .flatten()
                .filter(|r| r.pattern == p)
                .map(|r| r.busbw_gbs)
                .collect();
            median(&v).filter(|m| *m > 0.0).map(|m| (p, m))
        })
        .collect();
    groups
        .iter()
        .map(|g| {
            let rows = rows(g)?;
            let ratios: Vec<f64> = rows
                .iter()
                .filter_map(|r| {
                    medians
                        .iter()
                        .find(|(p, _)| *p == r.pattern)
                        .map(|(_, m)| r.busbw_gbs / m)
                })
                .collect();
            (!ratios.is_empty()).then(|| ratios.iter().sum::<f64>() / ratios.len() as f64)
        })
        .collect()
}

pub(super) fn first_busbw(g: &GroupResult) -> Option<f64> {
    match &g.outcome {
        Outcome::Passed { rows } => rows.first().map(|r| r.busbw_gbs),
        Outcome::Failed { .. } => None,
    }
}
