//! The message sizes of a sweep, as nccl-tests walks them, the buffers they need, and the time
//! each may take.

use super::{Buffers, SampleError, SizeResult, Timing};
use crate::bootstrap::{Bootstrap, gather_json};
use crate::comm::{CommError, Communicator};
use crate::events;
use crate::patterns::Pattern;
use std::time::{Duration, Instant};

/// How sizes grow from `-b` to `-e`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// `-f`: multiply by this factor.
    Factor(f64),
    /// `-i`: add this many bytes.
    Bytes(usize),
}

/// Sizes from `min` to `max` inclusive. A zero size steps to 1 byte under a factor so the
/// sweep always advances. Errors name the bad flag.
pub fn sizes(min: usize, max: usize, step: Step) -> Result<Vec<usize>, String> {
    if min > max {
        return Err(format!(
            "-b/--minbytes ({min}) is larger than -e/--maxbytes ({max})"
        ));
    }
    match step {
        Step::Factor(f) if !(f.is_finite() && f >= 1.0) => {
            return Err(format!("-f/--stepfactor must be a number >= 1, got {f}"));
        }
        Step::Bytes(0) if min != max => {
            return Err("-i/--stepbytes must be > 0".into());
        }
        _ => {}
    }
    let mut out = vec![min];
    let mut size = min;
    while size < max {
        let next = match step {
            Step::Factor(1.0) => break,
            Step::Factor(f) => ((size as f64 * f) as usize).max(size + 1),
            Step::Bytes(b) => size.saturating_add(b),
        };
        if next > max {
            break;
        }
        out.push(next);
        size = next;
        if out.len() > 100_000 {
            return Err("the sweep has more than 100000 sizes; raise -f or -i".into());
        }
    }
    Ok(out)
}

/// Parses a size like nccl-tests: a number with an optional K, M, G suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (digits, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1usize << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a size (use e.g. 8, 64K, 128M, 1G)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// How much longer than the run deadline the waits of one size may take, from the time per
/// iteration of the size measured before it (`last`: bytes, µs), scaled up linearly in bytes
/// (an over-estimate for latency-bound sizes), times a margin of [`BUDGET_MARGIN`]: for one
/// wait (the largest of the warm-up, timed and latency batches) and for the whole size (all three),
/// which is what the supervisor allows between two beats. Zero before the first size: the
/// deadline alone covers it. Bounded to a day.
pub fn size_budget(
    last: Option<(usize, f64)>,
    bytes: usize,
    t: &Timing,
) -> (std::time::Duration, std::time::Duration) {
    let Some((prev_bytes, prev_us)) = last else {
        return Default::default();
    };
    let scale = (bytes as f64 / prev_bytes.max(1) as f64).max(1.0);
    let per_iter_s = (prev_us.max(0.0) * scale / 1e6).min(86_400.0);
    let secs = |iters: u32| {
        let s = (per_iter_s * iters as f64 * BUDGET_MARGIN).clamp(0.0, 86_400.0);
        std::time::Duration::try_from_secs_f64(s).unwrap_or_default()
    };
    let lat = super::latency_iters(t.iters, t.latency_floor, bytes);
    (
        secs(t.warmup.max(t.iters).max(lat)),
        secs(t.warmup.saturating_add(t.iters).saturating_add(lat)),
    )
}

/// How much slower than the size before it (scaled) a size may be before its deadline counts.
pub const BUDGET_MARGIN: f64 = 3.0;

/// Largest send and receive buffers any selected pattern needs over the sweep (and connect).
pub fn buffer_sizes(
    selected: &[&dyn Pattern],
    sizes: &[usize],
    t: &Timing,
    nranks: u32,
) -> (usize, usize) {
    let elem = t.dtype.size();
    let mut send = super::CONNECT_MIN_PER_PEER * nranks as usize;
    let mut recv = send;
    for p in selected {
        for &s in sizes {
            let l = p.layout(s, elem, nranks);
            send = send.max(l.count * elem);
            recv = recv.max(l.recv_count * elem);
        }
    }
    (send, recv)
}

/// Why the sweep stopped.
#[derive(Debug)]
pub enum SweepError {
    /// An operation failed or hung.
    Comm(CommError),
    /// A rank's sample of `what` (pattern and size) is missing or unreadable.
    Sample { what: String, error: SampleError },
}

impl From<CommError> for SweepError {
    fn from(e: CommError) -> SweepError {
        SweepError::Comm(e)
    }
}

/// How many measurements (pattern × size) one pass of the sweep makes: a size that rounds to
/// the same message as the one before it is not measured again (as in [`run`]).
pub fn planned(
    selected: &[&dyn Pattern],
    sizes: &[usize],
    dtype: crate::elements::DataType,
    nranks: u32,
) -> usize {
    selected
        .iter()
        .map(|p| {
            let counts = sizes
                .iter()
                .map(|&s| p.layout(s, dtype.size(), nranks).count);
            let mut last = None;
            counts.filter(|&c| last.replace(c) != Some(c)).count()
        })
        .sum()
}

/// What the sweep tells its caller as it goes (rank 0 prints and records it).
pub trait Observer {
    /// A pattern begins.
    fn pattern(&mut self, p: &dyn Pattern, nranks: u32);
    /// A measurement begins: its bytes, and its place (1-based) among all the sweep's
    /// measurements.
    fn size(&mut self, p: &dyn Pattern, bytes: usize, n: usize, of: usize);
    /// Rank 0: one size, measured on every rank.
    fn row(&mut self, row: &SizeResult);
    /// A pattern ended, with its rows (rank 0; none elsewhere).
    fn pattern_done(&mut self, rows: &[SizeResult]);
    /// Rank 0: pass `pass` (0-based) is over.
    fn pass_done(&mut self, pass: u32);
    /// Every rank: `--budget` left this pattern's sizes `bytes` (its rest, in sweep order)
    /// unmeasured; `expected` is rank 0's estimate of the first one's time, `left` what was
    /// left of the pattern's share of the budget.
    fn dropped(&mut self, p: &dyn Pattern, bytes: &[usize], expected: Duration, left: Duration);
}

/// How many times the sweep runs over, and by when it must end (`--budget`).
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub repeat: u32,
    /// Rank 0's clock: no pass begins after it (`--duration`; the first always does). Every
    /// rank follows rank 0's decision, one byte broadcast per pass.
    pub passes_until: Option<Instant>,
    /// Rank 0's clock: when the sweep must be over. Each pattern (and pass) gets an equal
    /// share of what is left when it begins; a size whose expected time (the size before it,
    /// as measured end to end on rank 0, scaled by bytes) would overrun the share is dropped
    /// with every larger size of its pattern. Every rank follows rank 0's decision (one byte
    /// broadcast per size), so the ranks never disagree on what they run. The first size of
    /// the sweep always runs.
    pub ends_by: Option<Instant>,
}

/// Rank 0's view of the budget while the sweep goes on.
struct Budget {
    ends_by: Instant,
    /// The end of the current pattern's share.
    share_end: Instant,
    /// The size measured last, end to end on rank 0 (bytes, time).
    last: Option<(usize, Duration)>,
    /// The sweep's first size, which a pattern's first size is estimated from.
    first: Option<(usize, Duration)>,
}

impl Budget {
    /// A pattern begins, with `left` patterns (this one included, over every pass) to go.
    fn pattern(&mut self, left: usize) {
        let now = Instant::now();
        self.last = self.first;
        self.share_end = now + self.ends_by.saturating_duration_since(now) / left.max(1) as u32;
    }

    /// `bytes`' expected time, and whether it fits what is left of the share.
    fn fits(&self, bytes: usize) -> (bool, Duration, Duration) {
        let left = self.share_end.saturating_duration_since(Instant::now());
        let Some((prev, took)) = self.last else {
            return (true, Duration::ZERO, left);
        };
        let expected = took.mul_f64((bytes as f64 / prev.max(1) as f64).max(1.0));
        (expected <= left, expected, left)
    }
}

/// The measured sweep: every selected pattern over every size (a size that rounds to the same
/// message as the one before it is skipped), each size measured, gathered to rank 0 and
/// combined as nccl-tests combines it. Rank 0 gets every row; the others none.
///
/// With `repeat` > 1 the whole sweep runs `repeat` times over, every pattern and size once
/// before any again, so that drift over the run (a warming machine, a neighbour's burst)
/// spreads over every row's repeats instead of landing on one pattern's. Each measurement is
/// its own row, in measuring order, given to the observer and not returned (the caller folds
/// them and prints the tables of medians once every repeat is in); the observer hears of
/// patterns only without repeats. `schedule.passes_until` makes the number of passes open.
#[allow(clippy::too_many_arguments)]
pub fn run(
    comm: &mut Communicator,
    boot: &dyn Bootstrap,
    selected: &[&dyn Pattern],
    sizes: &[usize],
    bufs: &mut Buffers,
    timing: &Timing,
    schedule: Schedule,
    obs: &mut dyn Observer,
) -> Result<Vec<SizeResult>, SweepError> {
    let nranks = comm.nranks;
    let repeat = schedule.repeat.max(1);
    let mut budget = schedule.ends_by.map(|ends_by| Budget {
        ends_by,
        share_end: ends_by,
        last: None,
        first: None,
    });
    let mut patterns_left = (repeat as usize).saturating_mul(selected.len());
    let mut rows = Vec::new();
    // The last size measured (bytes, µs per iteration on this rank).
    let mut last: Option<(usize, f64)> = None;
    let mut done = 0;
    let tell = repeat == 1 && schedule.passes_until.is_none();
    let total = if schedule.passes_until.is_some() {
        0
    } else {
        sizes.len() * selected.len() * repeat as usize
    };
    for pass in 0..repeat {
        if let Some(until) = schedule.passes_until {
            let mut go = [u8::from(pass == 0 || Instant::now() < until)];
            boot.broadcast(&mut go);
            if go[0] == 0 {
                break;
            }
        }
        for p in selected {
            if tell {
                obs.pattern(*p, nranks);
            }
            if let Some(b) = budget.as_mut() {
                b.pattern(patterns_left);
            }
            patterns_left -= 1;
            let mut last_count = None;
            let mut pattern_rows = Vec::new();
            for (i, &size) in sizes.iter().enumerate() {
                let layout = p.layout(size, timing.dtype.size(), nranks);
                if last_count == Some(layout.count) {
                    continue; // rounding made it the same message as the previous size
                }
                last_count = Some(layout.count);
                let bytes = layout.bytes(timing.dtype);
                let began = Instant::now();
                if let Some(b) = &budget {
                    let (fits, expected, left) = b.fits(bytes);
                    let mut go = [u8::from(fits)];
                    boot.broadcast(&mut go);
                    if go[0] == 0 {
                        let rest = rest_of(*p, &sizes[i..], timing, nranks);
                        obs.dropped(*p, &rest, expected, left);
                        break;
                    }
                }
                done += 1;
                obs.size(*p, bytes, done, total);
                // The run deadline bounds the time without progress, so each size's waits get
                // the deadline plus the time its iterations are expected to take (see
                // `size_budget`), and the supervisor is told so.
                let (per_wait, whole) = size_budget(last, bytes, timing);
                events::budget(whole.as_secs_f64());
                let sized = Timing {
                    deadline: timing.deadline + per_wait,
                    size_budget: whole,
                    ..*timing
                };
                // A fresh data epoch per size and pass: a stale buffer never passes the check.
                let epoch = pass.wrapping_mul(sizes.len() as u32).wrapping_add(i as u32);
                // Where this rank is, for rank 0's view of a hang: a rank still in a size's
                // iterations while the others wait at a barrier or gather is the one they wait for.
                let name = p.name();
                let lined_up = || {
                    events::waiting(&format!(
                        "at the barrier before {name} {bytes} B (a rank that has not got this far is stuck)"
                    ));
                    boot.barrier();
                    events::step(&format!("{name} {bytes} B: its iterations"));
                };
                let sample = super::measure(comm, &lined_up, *p, &layout, bufs, &sized, epoch)?;
                last = Some((bytes, sample.avg_us));
                events::beat();
                events::waiting(&format!(
                    "gathering every rank's sample of {name} {bytes} B (a rank that has not got this far is stuck)"
                ));
                let what = format!("sample of {name} {bytes} B");
                let gathered = gather_json(boot, &sample).map_err(|e| SweepError::Sample {
                    what: what.clone(),
                    error: SampleError {
                        rank: Some(e.rank),
                        what: format!("rank {}'s {}", e.rank, e.what),
                    },
                })?;
                if let Some(all) = gathered {
                    super::validate(*p, &layout, timing, nranks, &all)
                        .map_err(|error| SweepError::Sample { what, error })?;
                    let mut row = super::combine(*p, &layout, timing, nranks, &all);
                    row.requested_bytes = Some(size);
                    obs.row(&row);
                    pattern_rows.push(row);
                }
                if let Some(b) = budget.as_mut() {
                    b.last = Some((bytes, began.elapsed()));
                    b.first = b.first.or(b.last);
                }
            }
            // With repeats the rows go to the observer alone, which folds them: a burn-in's
            // measurements are not all kept.
            if tell {
                obs.pattern_done(&pattern_rows);
                rows.extend(pattern_rows);
            }
        }
        obs.pass_done(pass);
    }
    Ok(rows)
}

/// The bytes of each message a pattern sends over `sizes` (a size rounding to the message
/// before it counted once), as the sweep would measure them.
fn rest_of(p: &dyn Pattern, sizes: &[usize], timing: &Timing, nranks: u32) -> Vec<usize> {
    let mut last = None;
    sizes
        .iter()
        .map(|&s| p.layout(s, timing.dtype.size(), nranks))
        .filter(|l| last.replace(l.count) != Some(l.count))
        .map(|l| l.bytes(timing.dtype))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubling_sweep_is_inclusive() {
        assert_eq!(sizes(8, 64, Step::Factor(2.0)).unwrap(), [8, 16, 32, 64]);
    }

    #[test]
    fn non_power_of_two_ends_below_max() {
        assert_eq!(sizes(3, 100, Step::Factor(4.0)).unwrap(), [3, 12, 48]);
        assert_eq!(sizes(10, 35, Step::Bytes(10)).unwrap(), [10, 20, 30]);
    }

    #[test]
    fn zero_advances() {
        assert_eq!(sizes(0, 4, Step::Factor(2.0)).unwrap(), [0, 1, 2, 4]);
        assert_eq!(sizes(0, 0, Step::Factor(2.0)).unwrap(), [0]);
    }

    #[test]
    fn single_size_and_factor_one() {
        assert_eq!(sizes(32, 32, Step::Factor(2.0)).unwrap(), [32]);
        assert_eq!(sizes(32, 64, Step::Factor(1.0)).unwrap(), [32]);
    }

    #[test]
    fn bad_sweeps_name_the_flag() {
        assert!(
            sizes(64, 8, Step::Factor(2.0))
                .unwrap_err()
                .contains("-b/--minbytes (64)")
        );
        assert!(
            sizes(8, 64, Step::Factor(0.5))
                .unwrap_err()
                .contains("-f/--stepfactor")
        );
        assert!(
            sizes(8, 64, Step::Bytes(0))
                .unwrap_err()
                .contains("-i/--stepbytes")
        );
    }

    #[test]
    fn sizes_parse_like_nccl_tests() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("128M").unwrap(), 128 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-5").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }
}
