//! A burn-in's tally (`--repeat N`, `--duration`): per rank, with its GPU (UUID, bus id) and
//! host, how many samples (one rank's part of one measured size) it gave, how many of them held
//! wrong elements and how many elements in all, and how many were slow: its time more than
//! [`SLOW_FACTOR`] times the size's median so far (the median over earlier passes of the mean
//! over ranks) and at least [`SLOW_EXCESS_US`] above it (guesses at useful thresholds, not
//! figures from NCCL or nccl-tests: on an H200, latency-bound sizes of about 5 µs took 10 to
//! 24 µs once in a hundred passes, host jitter rather than a slow GPU). Kept in
//! the results as it grows, so a run killed mid-way still names the GPU that produced wrong
//! data.

use super::fingerprint::Fingerprint;
use super::stats;
use crate::bench::SizeResult;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// A sample slower than this many times its size's median is slow…
pub const SLOW_FACTOR: f64 = 2.0;
/// …when it is also this much above it (µs).
pub const SLOW_EXCESS_US: f64 = 50.0;
/// Earlier passes of a size needed before its samples are judged slow.
pub const SLOW_AFTER: usize = 2;
/// The most passes a size's median is taken over (the latest), and the most wrong passes
/// listed per rank.
pub const KEPT: usize = 1000;
pub const LISTED: usize = 20;

/// The tally, as the results file keeps it (`burn_in`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BurnIn {
    /// Passes over the whole sweep completed.
    pub passes: u64,
    pub slow_factor: f64,
    pub ranks: Vec<RankTally>,
    /// Each size's recent times (mean over ranks, µs), for the slow threshold.
    #[serde(skip)]
    recent: HashMap<(String, usize), Vec<f64>>,
}

/// One rank's tally.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankTally {
    pub rank: u32,
    pub host: String,
    /// The GPU's UUID and PCI bus id, as the driver gave them.
    pub gpu: String,
    pub bus_id: String,
    pub samples: u64,
    pub wrong_samples: u64,
    pub wrong_elements: u64,
    pub slow_samples: u64,
    /// The passes (1-based) in which it received wrong elements, the first [`LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wrong_passes: Vec<u64>,
}

impl BurnIn {
    /// An empty tally for the job's ranks (the fingerprint's, with their GPUs and hosts).
    pub fn new(fp: &Fingerprint) -> BurnIn {
        BurnIn {
            passes: 0,
            slow_factor: SLOW_FACTOR,
            ranks: fp
                .ranks
                .iter()
                .map(|r| RankTally {
                    rank: r.rank,
                    host: r.host.clone(),
                    gpu: r.device.uuid.clone(),
                    bus_id: r.device.bus_id.clone(),
                    ..RankTally::default()
                })
                .collect(),
            recent: HashMap::new(),
        }
    }

    /// Counts one measured size (every rank's sample of it), measured in pass `pass`
    /// (0-based).
    pub fn add(&mut self, row: &SizeResult, pass: u64) {
        let key = (row.pattern.clone(), row.size_bytes);
        let recent = self.recent.entry(key).or_default();
        let median = (recent.len() >= SLOW_AFTER)
            .then(|| stats::median(&recent[..]))
            .flatten();
        for (i, us) in row.rank_avg_us.iter().enumerate() {
            let Some(t) = self.ranks.iter_mut().find(|t| t.rank == i as u32) else {
                continue;
            };
            t.samples += 1;
            if median.is_some_and(|m| *us > m * SLOW_FACTOR && *us - m >= SLOW_EXCESS_US) {
                t.slow_samples += 1;
            }
        }
        for (rank, n) in &row.found.rank_wrong {
            if let Some(t) = self.ranks.iter_mut().find(|t| t.rank == *rank) {
                t.wrong_samples += 1;
                t.wrong_elements += n;
                if t.wrong_passes.len() < LISTED && t.wrong_passes.last() != Some(&(pass + 1)) {
                    t.wrong_passes.push(pass + 1);
                }
            }
        }
        if recent.len() >= KEPT {
            recent.remove(0);
        }
        recent.push(row.time_us.avg);
    }

    /// The ranks whose GPUs produced wrong data, most wrong samples first.
    pub fn culprits(&self) -> Vec<&RankTally> {
        let mut c: Vec<&RankTally> = self.ranks.iter().filter(|t| t.wrong_samples > 0).collect();
        c.sort_by(|a, b| {
            b.wrong_samples
                .cmp(&a.wrong_samples)
                .then(a.rank.cmp(&b.rank))
        });
        c
    }

    /// What rank 0 prints at the end (and the supervisor on Ctrl-C).
    pub fn lines(&self) -> Vec<String> {
        let samples: u64 = self.ranks.iter().map(|t| t.samples).sum();
        let mut out = vec![format!(
            "# burn-in: {} pass(es), {samples} rank sample(s): wrong data from {} GPU(s), slow \
             samples (over {}× the size's median, and {SLOW_EXCESS_US} µs above it) on {} \
             rank(s)",
            self.passes,
            self.culprits().len(),
            self.slow_factor,
            self.ranks.iter().filter(|t| t.slow_samples > 0).count()
        )];
        for t in self.culprits() {
            out.push(format!(
                "# burn-in: wrong data: rank {} (host {}) GPU {} [{}]: {} wrong element(s) in {} \
                 of {} sample(s), passes {}",
                t.rank,
                t.host,
                t.gpu,
                t.bus_id,
                t.wrong_elements,
                t.wrong_samples,
                t.samples,
                passes(&t.wrong_passes, t.wrong_samples)
            ));
        }
        let mut slow: Vec<&RankTally> = self.ranks.iter().filter(|t| t.slow_samples > 0).collect();
        slow.sort_by_key(|t| std::cmp::Reverse(t.slow_samples));
        for t in slow.iter().take(LISTED) {
            out.push(format!(
                "# burn-in: slow: rank {} (host {}) GPU {} [{}]: {} of {} sample(s)",
                t.rank, t.host, t.gpu, t.bus_id, t.slow_samples, t.samples
            ));
        }
        out
    }
}

fn passes(list: &[u64], samples: u64) -> String {
    let shown: Vec<String> = list.iter().map(u64::to_string).collect();
    let more = if samples as usize > list.len() && list.len() >= LISTED {
        ", …"
    } else {
        ""
    };
    format!("{}{more}", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::exports::tests::{doc_on, row};

    #[test]
    fn wrong_data_is_laid_to_the_gpu_that_received_it() {
        let doc = doc_on(&["a", "b"]);
        let mut b = BurnIn::new(&doc.fingerprint);
        for pass in 0..30u64 {
            let mut r = row("all_reduce", 1024, &[10.0, 10.0]);
            if pass % 10 == 9 {
                r.found.rank_wrong = vec![(1, 1)];
            }
            b.add(&r, pass);
            b.passes = pass + 1;
        }
        let c = b.culprits();
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].rank, c[0].gpu.as_str()), (1, "GPU-1"));
        assert_eq!((c[0].wrong_samples, c[0].wrong_elements), (3, 3));
        assert_eq!(c[0].wrong_passes, [10, 20, 30]);
        assert_eq!(b.ranks[0].wrong_samples, 0);
        let lines = b.lines();
        assert!(
            lines[1].contains("rank 1 (host b) GPU GPU-1 [0000:18:00.0]: 3 wrong element(s) in 3 of 30 sample(s), passes 10, 20, 30"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_sample_over_twice_its_sizes_median_and_50_us_above_is_slow_once_there_is_one() {
        let doc = doc_on(&["a", "b"]);
        let mut b = BurnIn::new(&doc.fingerprint);
        // The first passes set the median; a slow first pass is not judged.
        b.add(&row("all_reduce", 64, &[500.0, 100.0]), 0);
        b.add(&row("all_reduce", 64, &[100.0, 100.0]), 1);
        b.add(&row("all_reduce", 64, &[100.0, 100.0]), 2);
        b.add(&row("all_reduce", 64, &[100.0, 350.0]), 3);
        // Twice the median but a few µs: a latency-bound size's jitter, not slow.
        b.add(&row("all_reduce", 8, &[5.0, 5.0]), 0);
        b.add(&row("all_reduce", 8, &[5.0, 5.0]), 1);
        b.add(&row("all_reduce", 8, &[20.0, 5.0]), 2);
        assert_eq!(b.ranks[0].slow_samples, 0);
        assert_eq!(b.ranks[1].slow_samples, 1);
        assert!(b.lines()[1].starts_with("# burn-in: slow: rank 1 (host b)"));
    }
}
