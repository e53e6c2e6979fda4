//! The statistics behind `compare`'s verdict: medians and spreads of repeated measurements, and
//! a distribution-free confidence interval on the shift between two sets of them.
//!
//! The shift is estimated on log times, so it reads as a ratio ("the second run takes 1.12×
//! as long") and bus bandwidth, which is a constant over time for one size, follows exactly:
//! a size whose bandwidth prints `0.000` still has a time to judge.
//!
//! Method: the Hodges–Lehmann estimate (the median of all pairwise differences `after_j −
//! before_i`) with the exact confidence interval that the Mann–Whitney rank-sum test gives
//! (Hollander & Wolfe, *Nonparametric Statistical Methods*, ch. 4): the interval between the
//! k-th smallest and k-th largest pairwise differences, k from the exact null distribution of
//! the U statistic. It assumes nothing about the shape of the noise, only that repeats are
//! exchangeable within a run, which the interleaved `run --repeat` aims for.

/// The median of `xs` (the mean of the middle two for an even count); `None` when empty or
/// when a value is not a number.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
}

/// The range of `xs` (largest − smallest) as a percentage of their median; `None` for fewer
/// than two values or a median of 0.
pub fn spread_pct(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = median(xs).filter(|m| *m > 0.0)?;
    let (lo, hi) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    Some((hi - lo) / m * 100.0)
}

/// The sample standard deviation of `xs` (n − 1); 0 for fewer than two values.
pub fn sd(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

/// The two-sided normal quantile of confidence `level` (1.96 at 0.95).
pub fn z(level: f64) -> f64 {
    normal_quantile(1.0 - (1.0 - level) / 2.0)
}

/// The shift from one set of measurements to another, on the log scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shift {
    /// Hodges–Lehmann estimate of `ln(after) − ln(before)`.
    pub estimate: f64,
    /// The confidence interval on it, when the sample sizes allow one at the level asked
    /// (at least 4 values per side for 95 %).
    pub interval: Option<(f64, f64)>,
    /// The confidence the interval actually has (exact, so at least the level asked).
    pub confidence: f64,
    /// The noise: the pooled standard deviation of the log values within each side (0 when
    /// both sides have a single value).
    pub noise: f64,
}

/// The shift of `after` against `before` (both positive values, e.g. times) at confidence
/// `level` (e.g. 0.95). `None` when a side is empty or holds a value that is not positive.
pub fn shift(before: &[f64], after: &[f64], level: f64) -> Option<Shift> {
    if before.is_empty() || after.is_empty() {
        return None;
    }
    let logs = |xs: &[f64]| -> Option<Vec<f64>> {
        xs.iter()
            .map(|&x| (x > 0.0 && x.is_finite()).then(|| x.ln()))
            .collect()
    };
    let (b, a) = (logs(before)?, logs(after)?);
    let mut diffs: Vec<f64> = a
        .iter()
        .flat_map(|ai| b.iter().map(move |bi| ai - bi))
        .collect();
    diffs.sort_by(f64::total_cmp);
    let estimate = median(&diffs)?;
    let (interval, confidence) = match rank_cut(b.len(), a.len(), level) {
        Some((k, conf)) => (Some((diffs[k - 1], diffs[diffs.len() - k])), conf),
        None => (None, 0.0),
    };
    Some(Shift {
        estimate,
        interval,
        confidence,
        noise: pooled_sd(&b, &a),
    })
}

/// The pooled within-side standard deviation of two samples.
fn pooled_sd(b: &[f64], a: &[f64]) -> f64 {
    let ss = |xs: &[f64]| {
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        xs.iter().map(|x| (x - m).powi(2)).sum::<f64>()
    };
    let dof = (b.len() + a.len()).saturating_sub(2);
    if dof == 0 {
        0.0
    } else {
        ((ss(b) + ss(a)) / dof as f64).sqrt()
    }
}

/// The exact null distribution of the Mann–Whitney U for samples of `n` and `m`: the number
/// of orderings giving each U, 0..=n·m, as `f64` (exact for the sample sizes a run has).
fn u_counts(n: usize, m: usize) -> Vec<f64> {
    // counts[i][j][u] over i values from one side and j from the other, kept one row at a
    // time: c(i, j, u) = c(i − 1, j, u − j) + c(i, j − 1, u).
    let mut prev: Vec<Vec<f64>> = (0..=m).map(|_| vec![1.0]).collect();
    for i in 1..=n {
        let mut row: Vec<Vec<f64>> = vec![vec![1.0]];
        for j in 1..=m {
            let mut c = vec![0.0; i * j + 1];
            for (u, slot) in c.iter_mut().enumerate() {
                let from_prev = u
                    .checked_sub(j)
                    .and_then(|v| prev[j].get(v))
                    .copied()
                    .unwrap_or(0.0);
                let from_row = row[j - 1].get(u).copied().unwrap_or(0.0);
                *slot = from_prev + from_row;
            }
            row.push(c);
        }
        prev = row;
    }
    prev.pop().unwrap_or_else(|| vec![1.0])
}

/// The largest k ≥ 1 with P(U ≤ k − 1) ≤ (1 − level) / 2, and the interval's exact
/// confidence `1 − 2·P(U ≤ k − 1)`; `None` when even the extreme differences are not enough
/// (too few values). Samples larger than 60 a side are cut to a normal approximation.
fn rank_cut(n: usize, m: usize, level: f64) -> Option<(usize, f64)> {
    // A hair of slack so that 90 % admits the exact 5 % tail of 3 values a side.
    let tail = (1.0 - level) / 2.0 + 1e-12;
    if n > 60 || m > 60 {
        let (nf, mf) = (n as f64, m as f64);
        let sd = (nf * mf * (nf + mf + 1.0) / 12.0).sqrt();
        let k = (nf * mf / 2.0 - normal_quantile(1.0 - tail) * sd).floor();
        return (k >= 1.0).then_some((k as usize, level));
    }
    let counts = u_counts(n, m);
    let total: f64 = counts.iter().sum();
    let mut below = 0.0;
    let mut k = 0;
    for c in &counts {
        if (below + c) / total > tail {
            break;
        }
        below += c;
        k += 1;
    }
    (k >= 1).then_some((k, 1.0 - 2.0 * below / total))
}

/// The fewest values per side that give a rank interval at confidence `level` (4 at 95 %,
/// 3 at 90 %).
pub fn fewest_repeats(level: f64) -> usize {
    (1..=60)
        .find(|&n| rank_cut(n, n, level).is_some())
        .unwrap_or(61)
}

/// The standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9).
fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// The repeats per run that would put a confidence interval of `level` on one side of
/// `bound` (a log shift), if the shift and noise stay as seen: half-width ≈ z·σ·√(2/n) from
/// the normal approximation, with 5 % added for the rank method's efficiency (3/π at worst
/// for normal noise, ≈ 0.95). At least 4 (the fewest for a 95 % rank interval); `None` when
/// the estimate sits on the bound (no number of repeats settles it) or needs more than 1000.
pub fn repeats_needed(s: &Shift, bound: f64, level: f64) -> Option<u32> {
    let gap = (s.estimate - bound).abs();
    if gap < 1e-12 {
        return None;
    }
    let n = 2.0 * (z(level) * s.noise / gap).powi(2) * 1.05;
    (n <= 1000.0).then(|| (n.ceil() as u32).max(4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_spreads() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
        assert_eq!(spread_pct(&[90.0, 100.0, 110.0]), Some(20.0));
        assert_eq!(spread_pct(&[5.0]), None);
        assert_eq!(sd(&[1.0, 3.0]), 2f64.sqrt());
        assert_eq!(sd(&[1.0]), 0.0);
        assert!((z(0.95) - 1.959_964).abs() < 1e-5);
    }

    #[test]
    fn the_u_distribution_is_exact() {
        // n = m = 2: U ∈ {0,1,1,2,2,...}: counts 1,1,2,1,1 over the C(4,2) = 6 orderings.
        assert_eq!(u_counts(2, 2), vec![1.0, 1.0, 2.0, 1.0, 1.0]);
        let c = u_counts(5, 5);
        assert_eq!(c.iter().sum::<f64>(), 252.0);
        assert_eq!(&c[..4], &[1.0, 1.0, 2.0, 3.0]);
        assert_eq!(u_counts(3, 1), vec![1.0, 1.0, 1.0, 1.0]);
    }

    #[test]
    fn the_rank_interval_needs_four_values_a_side_at_95_percent() {
        assert_eq!(rank_cut(1, 1, 0.95), None);
        assert_eq!(rank_cut(3, 3, 0.95), None);
        assert_eq!((fewest_repeats(0.95), fewest_repeats(0.9)), (4, 3));
        let (k, conf) = rank_cut(4, 4, 0.95).unwrap();
        assert_eq!(k, 1);
        assert!((conf - (1.0 - 2.0 / 70.0)).abs() < 1e-12);
        // Tables give k = 3 for n = m = 5 (U critical value 2), confidence 1 − 8/252.
        let (k, conf) = rank_cut(5, 5, 0.95).unwrap();
        assert_eq!(k, 3);
        assert!((conf - (1.0 - 8.0 / 252.0)).abs() < 1e-12);
        // Large samples use the normal approximation: k near nm/2 − 1.96·sd.
        let (k, _) = rank_cut(100, 100, 0.95).unwrap();
        assert!((4_190..4_200).contains(&k), "{k}");
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-5);
    }

    #[test]
    fn a_clear_shift_is_bracketed_and_noise_is_not_taken_for_one() {
        let before = [100.0, 102.0, 98.0, 101.0, 99.0];
        let after: Vec<f64> = before.iter().map(|t| t * 1.5).collect();
        let s = shift(&before, &after, 0.95).unwrap();
        assert!((s.estimate - 1.5f64.ln()).abs() < 1e-12);
        let (lo, hi) = s.interval.unwrap();
        assert!(lo > 1.4f64.ln() && hi < 1.6f64.ln(), "{lo} {hi}");
        let same = shift(&before, &[99.5, 101.5, 98.5, 100.5, 100.0], 0.95).unwrap();
        let (lo, hi) = same.interval.unwrap();
        assert!(lo < 0.0 && hi > 0.0);
        assert!(shift(&[1.0], &[0.0], 0.95).is_none());
        let single = shift(&[1.0], &[2.0], 0.95).unwrap();
        assert_eq!((single.interval, single.noise), (None, 0.0));
    }

    #[test]
    fn repeats_needed_grow_with_noise_and_shrink_with_the_gap() {
        let s = Shift {
            estimate: 0.0,
            interval: None,
            confidence: 0.0,
            noise: 0.05,
        };
        let bound = (1.0f64 / 0.95).ln();
        let n = repeats_needed(&s, bound, 0.95).unwrap();
        let noisier = repeats_needed(&Shift { noise: 0.1, ..s }, bound, 0.95).unwrap();
        assert!(n >= 4 && noisier > n, "{n} {noisier}");
        assert_eq!(
            repeats_needed(
                &Shift {
                    estimate: bound,
                    ..s
                },
                bound,
                0.95
            ),
            None
        );
    }
}
