//! `run --repeat N`: each size measured N times, the repeats interleaved (every size once,
//! then every size again) so that drift over the run (a warming machine, a neighbour's job)
//! spreads over all sizes instead of landing on a few. Every repeat's figures are kept (the
//! latest `burn_in::KEPT` of a long burn-in); the row shows their medians and the spread.

use super::stats;
use super::table;
use crate::bench::{self, Repeat, SizeResult};

/// Adds `row` (one measurement) to `rows`: pushed as it is when the run measures each size
/// once, else folded into the row of the same pattern, size, type and reduction, whose figures
/// become the medians of its repeats.
pub fn record(rows: &mut Vec<SizeResult>, row: SizeResult, repeat: u32) {
    if repeat <= 1 {
        rows.push(row);
        return;
    }
    let same = |r: &SizeResult| {
        r.pattern == row.pattern
            && r.size_bytes == row.size_bytes
            && r.dtype == row.dtype
            && r.redop == row.redop
    };
    let one = Repeat {
        time_us: row.time_us.avg,
        slowest_us: row.time_us.slowest,
        busbw_gbs: row.busbw_gbs,
        rank_avg_us: row.rank_avg_us.clone(),
        wrong: row.wrong,
    };
    match rows.iter_mut().find(|r| same(r)) {
        Some(r) => {
            // A burn-in's passes are many: the figures are the latest ones' medians.
            if r.repeats.len() >= super::burn_in::KEPT {
                r.repeats.remove(0);
            }
            r.repeats.push(one);
            r.wrong += row.wrong;
            r.first_wrong = r.first_wrong.take().or(row.first_wrong);
            // What the check found, over every repeat: nothing one repeat saw is lost.
            r.checked &= row.checked;
            r.found.merge(row.found);
            r.time_us.p50 = r.time_us.p50.max(row.time_us.p50);
            r.time_us.p99 = r.time_us.p99.max(row.time_us.p99);
            r.time_us.max = r.time_us.max.max(row.time_us.max);
            settle(r);
        }
        None => {
            let mut r = row;
            r.repeats = vec![one];
            settle(&mut r);
            rows.push(r);
        }
    }
}

/// Sets the row's figures to the medians of its repeats (percentiles stay the worst seen).
fn settle(r: &mut SizeResult) {
    let times: Vec<f64> = r.repeats.iter().map(|x| x.time_us).collect();
    let Some(time) = stats::median(&times) else {
        return;
    };
    let factor = if r.algbw_gbs > 0.0 {
        r.busbw_gbs / r.algbw_gbs
    } else {
        1.0
    };
    r.time_us.avg = time;
    let slowest: Vec<f64> = r.repeats.iter().map(|x| x.slowest_us).collect();
    r.time_us.slowest = stats::median(&slowest).unwrap_or(time);
    r.algbw_gbs = bench::algbw_gbs(r.size_bytes, time);
    r.busbw_gbs = r.algbw_gbs * factor;
    let ranks = r
        .repeats
        .iter()
        .map(|x| x.rank_avg_us.len())
        .min()
        .unwrap_or(0);
    r.rank_avg_us = (0..ranks)
        .map(|i| {
            let per: Vec<f64> = r.repeats.iter().map(|x| x.rank_avg_us[i]).collect();
            stats::median(&per).unwrap_or(0.0)
        })
        .collect();
    if let Some((i, _)) = r
        .rank_avg_us
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
    {
        r.slowest_rank = i as u32;
    }
    r.spread_pct = stats::spread_pct(&times);
}

/// The table header with a spread column, for runs with repeats.
pub fn header(
    pattern: &str,
    nranks: u32,
    backing: &super::backing::Backing,
    repeat: u32,
) -> Vec<String> {
    let mut lines = table::table_header(pattern, nranks, backing);
    if let Some(title) = lines.get_mut(1) {
        title.push_str(&format!(", median of {repeat} repeats"));
    }
    let n = lines.len();
    if n >= 2 {
        lines[n - 2].push_str(&format!(" {:>8}", "spread"));
        // "slowest" over "rank": pad the shorter to the 7 the row gives the rank.
        lines[n - 1].push_str(&format!("    {:>8}", "(time)"));
    }
    lines
}

/// One row with its spread: the range of the repeats' times, % of their median.
pub fn row(r: &SizeResult) -> String {
    let spread = r
        .spread_pct
        .map(|s| format!("{s:.1}%"))
        .unwrap_or_else(|| "-".into());
    let base = table::table_row(r);
    match base.rsplit_once("  ") {
        Some((head, rank)) => format!("{head}  {rank:<7} {spread:>8}"),
        None => format!("{base} {spread:>8}"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bench::Times;
    use crate::elements::DataType;

    pub(crate) fn measured(size: usize, us: f64, wrong: u64) -> SizeResult {
        SizeResult {
            pattern: "all_reduce".into(),
            size_bytes: size,
            count: size / 4,
            dtype: DataType::Float,
            redop: None,
            time_us: Times {
                avg: us,
                slowest: us + 1.0,
                p50: us,
                p99: us,
                max: us,
            },
            algbw_gbs: bench::algbw_gbs(size, us),
            busbw_gbs: bench::algbw_gbs(size, us) * 2.0,
            wrong,
            checked: true,
            slowest_rank: 0,
            rank_avg_us: vec![us, us + 1.0],
            first_wrong: None,
            found: Default::default(),
            repeats: Vec::new(),
            spread_pct: None,
            requested_bytes: None,
        }
    }

    #[test]
    fn one_repeat_keeps_rows_as_measured() {
        let mut rows = Vec::new();
        record(&mut rows, measured(1024, 10.0, 0), 1);
        record(&mut rows, measured(1024, 12.0, 0), 1);
        assert_eq!(rows.len(), 2);
        assert!(rows[0].repeats.is_empty() && rows[0].spread_pct.is_none());
    }

    #[test]
    fn repeats_fold_into_one_row_of_medians_with_every_repeat_kept() {
        let mut rows = Vec::new();
        for (size, us) in [
            (1 << 20, 100.0),
            (8, 5.0),
            (1 << 20, 80.0),
            (1 << 20, 120.0),
        ] {
            record(&mut rows, measured(size, us, (us == 80.0) as u64), 3);
        }
        assert_eq!(rows.len(), 2);
        let r = &rows[0];
        assert_eq!(r.repeats.len(), 3);
        assert_eq!(r.time_us.avg, 100.0);
        assert_eq!(r.time_us.p99, 120.0, "percentiles stay the worst seen");
        assert_eq!(r.busbw_gbs, bench::algbw_gbs(1 << 20, 100.0) * 2.0);
        assert_eq!(r.rank_avg_us, vec![100.0, 101.0]);
        assert_eq!((r.slowest_rank, r.wrong), (1, 1));
        assert_eq!(r.spread_pct, Some(40.0));
        assert!(row(r).ends_with("   40.0%"), "{}", row(r));
        let head = header("all_reduce", 2, &super::super::backing::Backing::Real, 3);
        assert!(head[1].ends_with("median of 3 repeats"));
        assert_eq!(head[2].len(), row(r).len(), "the spread column lines up");
        assert_eq!(head[3].len(), row(r).len());
    }
}
