//! One row of a pattern's table: every rank's sample of one size combined as nccl-tests
//! combines them, and what the data check and the timer found in it.

use super::verify::{self, WrongElement};
use super::{RankSample, Timing};
use crate::elements::{DataType, RedOp};
use crate::patterns::{Layout, Pattern};
use serde::{Deserialize, Serialize};

/// One row of a pattern's table, combined over ranks as nccl-tests combines them by default
/// (`-a 1`: the time is the mean of the ranks' times, `Allreduce(args, &deltaSec, average)`
/// in `BenchTime`, `src/common.cu`), with the slowest rank's time and number kept beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    pub pattern: String,
    /// nccl-tests' "size": the larger of a rank's send and receive bytes.
    pub size_bytes: usize,
    /// nccl-tests' "count": the element count passed to NCCL (per peer for all-to-all).
    pub count: usize,
    pub dtype: DataType,
    /// The reduction, for patterns that reduce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redop: Option<RedOp>,
    pub time_us: Times,
    /// size / time, GB/s (10^9 bytes per second).
    pub algbw_gbs: f64,
    /// algbw × the pattern's factor, GB/s.
    pub busbw_gbs: f64,
    /// Wrong elements over all ranks (0 when unchecked).
    pub wrong: u64,
    /// Whether data was checked.
    pub checked: bool,
    /// The rank with the largest time.
    pub slowest_rank: u32,
    /// Each rank's average time, µs, in rank order.
    pub rank_avg_us: Vec<f64>,
    /// The first wrong element and the rank that received it (a written one when any rank
    /// has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_wrong: Option<(u32, WrongElement)>,
    /// What the data check and the timer found, rank by rank (flattened into the row).
    #[serde(flatten)]
    pub found: Found,
    /// Every repeat's figures when the size was measured more than once (`run --repeat`);
    /// the row's own figures are then their medians (see `report::repeats`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<Repeat>,
    /// The range of the repeats' times (largest − smallest), % of their median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_pct: Option<f64>,
    /// The size asked for (`-b`..`-e`), before the pattern rounded it to whole elements per
    /// peer as nccl-tests rounds; `compare` matches rows on it, so runs of different rank
    /// counts line up. Absent in files written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_bytes: Option<usize>,
}

/// What the data check and the timer found in one row, over all ranks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Found {
    /// Elements checked, over all ranks: every rank's whole receive buffer when `checked`.
    #[serde(default)]
    pub checked_elements: u64,
    /// Of the wrong elements, those never written (they still hold the fill pattern).
    #[serde(default)]
    pub unwritten: u64,
    /// Of the wrong elements, those written with a NaN.
    #[serde(default)]
    pub nan: u64,
    /// Ranks whose whole receive buffer still holds the fill pattern: nothing arrived.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nothing_written_ranks: Vec<u32>,
    /// Ranks with some elements unwritten, and their first runs of them, `[start, end)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unwritten_ranges: Vec<(u32, Vec<(usize, usize)>)>,
    /// Ranks whose every timed iteration took less than the event timer's resolution.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub below_timer_ranks: Vec<u32>,
    /// Ranks that received written wrong elements in a pattern that copies, each with the
    /// ranks whose data those elements should have been (at most `verify::MAX_SENDERS` of
    /// each): who sent to whom, for naming every rank the wrong data points at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wrong_pairs: Vec<(u32, Vec<u32>)>,
    /// The ranks that received wrong elements, each with how many (rank order; a rank absent
    /// received none, when the row was checked).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rank_wrong: Vec<(u32, u64)>,
}

impl Found {
    /// Adds what another repeat of the same size found: nothing one repeat saw is lost.
    pub fn merge(&mut self, other: Found) {
        self.checked_elements += other.checked_elements;
        self.unwritten += other.unwritten;
        self.nan += other.nan;
        let union = |a: &mut Vec<u32>, b: Vec<u32>| {
            a.extend(b);
            a.sort_unstable();
            a.dedup();
        };
        union(&mut self.nothing_written_ranks, other.nothing_written_ranks);
        union(&mut self.below_timer_ranks, other.below_timer_ranks);
        if self.unwritten_ranges.is_empty() {
            self.unwritten_ranges = other.unwritten_ranges;
        }
        if self.wrong_pairs.is_empty() {
            self.wrong_pairs = other.wrong_pairs;
        }
        for (rank, n) in other.rank_wrong {
            match self.rank_wrong.iter_mut().find(|(r, _)| *r == rank) {
                Some((_, m)) => *m += n,
                None => self.rank_wrong.push((rank, n)),
            }
        }
        self.rank_wrong.sort_unstable();
    }
}

/// One repeat of one size (`run --repeat`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repeat {
    /// Wall time per iteration, mean over ranks, µs.
    pub time_us: f64,
    /// Wall time per iteration on the slowest rank, µs.
    pub slowest_us: f64,
    /// GB/s.
    pub busbw_gbs: f64,
    /// Each rank's average time, µs, in rank order.
    pub rank_avg_us: Vec<f64>,
    /// Wrong elements over all ranks.
    pub wrong: u64,
}

/// Times of one size, µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Times {
    /// Wall time per iteration, mean over ranks (nccl-tests' "time").
    pub avg: f64,
    /// Wall time per iteration on the slowest rank (absent in files from before it was kept).
    #[serde(default)]
    pub slowest: f64,
    /// Per-iteration latency percentiles, worst over ranks.
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// algbw in GB/s for `bytes` moved in `us` microseconds.
pub fn algbw_gbs(bytes: usize, us: f64) -> f64 {
    if us <= 0.0 {
        0.0
    } else {
        bytes as f64 / us / 1e3
    }
}

/// Why a set of samples cannot make a row: a rank's sample is missing, doubled, out of place
/// or incomplete. Never skipped: a row made of fewer ranks than ran would be a claim about
/// ranks nobody heard from.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleError {
    /// The rank whose sample is wrong (the first missing one, when one is missing).
    pub rank: Option<u32>,
    pub what: String,
}

/// Checks that `samples` hold one sample per rank, in rank order, each with the whole
/// receive buffer checked when the data is checked.
pub fn validate(
    pattern: &dyn Pattern,
    layout: &Layout,
    t: &Timing,
    nranks: u32,
    samples: &[RankSample],
) -> Result<(), SampleError> {
    for (i, s) in samples.iter().enumerate() {
        if s.rank as usize != i {
            let rank = (s.rank as usize) < i;
            return Err(SampleError {
                rank: Some(if rank { s.rank } else { i as u32 }),
                what: if rank {
                    format!("rank {}'s sample came twice", s.rank)
                } else {
                    format!(
                        "rank {i}'s sample is missing (rank {} came in its place)",
                        s.rank
                    )
                },
            });
        }
        let want = pattern.written(s.rank, layout) as u64;
        match (&s.check, t.check) {
            (None, true) => {
                return Err(SampleError {
                    rank: Some(s.rank),
                    what: format!("rank {}'s data was not checked", s.rank),
                });
            }
            (Some(c), true) if c.elements != want => {
                return Err(SampleError {
                    rank: Some(s.rank),
                    what: format!(
                        "rank {} checked {} of its {want} received elements",
                        s.rank, c.elements
                    ),
                });
            }
            _ => {}
        }
    }
    if samples.len() != nranks as usize {
        let rank = samples.len() as u32;
        return Err(SampleError {
            rank: (rank < nranks).then_some(rank),
            what: format!("{} samples for {nranks} ranks", samples.len()),
        });
    }
    Ok(())
}

/// Combines all ranks' samples (rank order, see [`validate`]) into one row.
pub fn combine(
    pattern: &dyn Pattern,
    layout: &Layout,
    t: &Timing,
    nranks: u32,
    samples: &[RankSample],
) -> SizeResult {
    let slowest = samples
        .iter()
        .max_by(|a, b| a.avg_us.total_cmp(&b.avg_us))
        .map(|s| (s.rank, s.avg_us))
        .unwrap_or((0, 0.0));
    let mean = if samples.is_empty() {
        0.0
    } else {
        samples.iter().map(|s| s.avg_us).sum::<f64>() / samples.len() as f64
    };
    let worst = |f: fn(&RankSample) -> f64| samples.iter().map(f).fold(0.0, f64::max);
    let bytes = layout.size_column(t.dtype);
    let algbw = algbw_gbs(pattern.algbw_bytes(layout, t.dtype, nranks), mean);
    let checks = || {
        samples
            .iter()
            .filter_map(|s| s.check.as_ref().map(|c| (s.rank, c)))
    };
    // A check's first wrong element is a written one whenever it found any (see
    // `verify::Checker`), i.e. when not every wrong element was unwritten.
    let written_first = checks().find_map(|(r, c)| {
        c.first
            .clone()
            .filter(|_| c.wrong > c.unwritten)
            .map(|w| (r, w))
    });
    SizeResult {
        pattern: pattern.name().into(),
        size_bytes: bytes,
        count: pattern.count_column(layout),
        dtype: t.dtype,
        redop: pattern.reduces().then_some(t.op),
        time_us: Times {
            avg: mean,
            slowest: slowest.1,
            p50: worst(|s| s.p50_us),
            p99: worst(|s| s.p99_us),
            max: worst(|s| s.max_us),
        },
        algbw_gbs: algbw,
        busbw_gbs: algbw * pattern.busbw_factor(nranks),
        wrong: checks().map(|(_, c)| c.wrong).sum(),
        checked: t.check && !samples.is_empty() && samples.iter().all(|s| s.check.is_some()),
        slowest_rank: slowest.0,
        rank_avg_us: samples.iter().map(|s| s.avg_us).collect(),
        first_wrong: written_first
            .or_else(|| checks().find_map(|(r, c)| c.first.clone().map(|w| (r, w)))),
        found: Found {
            checked_elements: checks().map(|(_, c)| c.elements).sum(),
            unwritten: checks().map(|(_, c)| c.unwritten).sum(),
            nan: checks().map(|(_, c)| c.nan).sum(),
            nothing_written_ranks: checks()
                .filter(|(_, c)| c.nothing_written())
                .map(|(r, _)| r)
                .collect(),
            unwritten_ranges: checks()
                .filter(|(_, c)| c.unwritten > 0 && !c.nothing_written())
                .map(|(r, c)| (r, c.unwritten_ranges.clone()))
                .collect(),
            below_timer_ranks: samples
                .iter()
                .filter(|s| s.below_timer)
                .map(|s| s.rank)
                .collect(),
            wrong_pairs: checks()
                .filter(|(_, c)| !c.wrong_from.is_empty())
                .take(verify::MAX_SENDERS)
                .map(|(r, c)| (r, c.wrong_from.iter().map(|(q, _)| *q).collect()))
                .collect(),
            rank_wrong: checks()
                .filter(|(_, c)| c.wrong > 0)
                .map(|(r, c)| (r, c.wrong))
                .collect(),
        },
        repeats: Vec::new(),
        spread_pct: None,
        requested_bytes: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patterns::select;
    use std::time::Duration;

    fn sample(rank: u32, avg_us: f64) -> RankSample {
        RankSample {
            rank,
            avg_us,
            p50_us: avg_us * 0.9,
            p99_us: avg_us * 1.1,
            max_us: avg_us * 1.2,
            check: None,
            below_timer: false,
        }
    }

    #[test]
    fn bandwidth_follows_nccl_tests_formulas() {
        // 1 GB in 1000 µs = 1000 GB/s... nccl-tests: algbw = bytes / time(s) / 1e9.
        assert_eq!(algbw_gbs(1_000_000_000, 1_000_000.0), 1.0);
        assert_eq!(algbw_gbs(128 << 20, 1000.0), 134.217728);
        let p = select(&["all_reduce".into()]).unwrap()[0];
        let t = Timing {
            warmup: 1,
            iters: 1,
            check: true,
            dtype: DataType::Float,
            op: RedOp::Sum,
            deadline: Duration::from_secs(1),
            latency_floor: 0,
            data_on: crate::bench::DataOn::Device,
            kernel_floor: crate::bench::GPU_KERNEL_FLOOR,
            size_budget: std::time::Duration::ZERO,
        };
        let layout = p.layout(1 << 20, 4, 8);
        let r = combine(
            p,
            &layout,
            &t,
            8,
            &[sample(0, 100.0), sample(1, 250.0), sample(2, 90.0)],
        );
        assert_eq!(r.slowest_rank, 1);
        assert_eq!(r.time_us.slowest, 250.0);
        assert!((r.time_us.avg - 440.0 / 3.0).abs() < 1e-12);
        let algbw = (1u64 << 20) as f64 / (440.0 / 3.0) / 1e3;
        assert!((r.algbw_gbs - algbw).abs() < 1e-12);
        assert!((r.busbw_gbs - algbw * 2.0 * 7.0 / 8.0).abs() < 1e-12);
        assert_eq!(r.time_us.max, 300.0);
        assert_eq!(r.redop, Some(RedOp::Sum));
    }

    #[test]
    fn zero_time_gives_zero_bandwidth_not_infinity() {
        assert_eq!(algbw_gbs(0, 0.0), 0.0);
        assert_eq!(algbw_gbs(8, 0.0), 0.0);
    }
}
