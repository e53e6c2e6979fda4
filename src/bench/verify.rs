//! Data each rank sends, and the check of what it received.
//!
//! The receive buffer is filled with [`elements::FILL_BYTE`] before each measurement, bits no
//! correct result has, so the check tells three failures apart: elements never written (the
//! collective did not run, or wrote elsewhere), another rank's data where this one's was due,
//! and wrong values.

use crate::elements::{self, DataType, RedOp};
use crate::patterns::{Layout, Pattern, Source};
use serde::{Deserialize, Serialize};

/// The first wrong element a rank found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrongElement {
    /// Index in the receive buffer.
    pub index: usize,
    /// The rank whose data it should have been (`None` for a reduction of all ranks).
    pub sender: Option<u32>,
    /// The value expected, and the value received (NaN and ±inf included: see
    /// [`crate::lossless`]).
    #[serde(with = "crate::lossless")]
    pub expected: f64,
    #[serde(with = "crate::lossless")]
    pub got: f64,
    /// The element's bytes as received, little-endian, in hex: exact whatever the type.
    #[serde(default)]
    pub got_hex: String,
    /// Whose data the wrong elements are, when they are one other rank's (or, in a reduction,
    /// one rank's own input instead of the result): told from up to [`PEER_WINDOW`] of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_rank: Option<u32>,
}

/// What the check of one receive buffer found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Elements checked.
    pub elements: u64,
    /// Elements that differ from what their senders sent.
    pub wrong: u64,
    /// Of the wrong ones, those that still hold the fill pattern: never written.
    pub unwritten: u64,
    /// Of the wrong ones, those written with a NaN (floating types).
    #[serde(default)]
    pub nan: u64,
    /// The first [`MAX_RANGES`] runs of unwritten elements, `[start, end)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unwritten_ranges: Vec<(usize, usize)>,
    /// The first wrong element that was written; the first unwritten one when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<WrongElement>,
    /// Written wrong elements counted by the rank whose data they should have been (patterns
    /// that copy; in rank order, at most [`MAX_SENDERS`] ranks, the first met).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wrong_from: Vec<(u32, u64)>,
}

impl Check {
    /// Every element checked still holds the fill pattern.
    pub fn nothing_written(&self) -> bool {
        self.elements > 0 && self.unwritten == self.elements
    }
}

/// Senders a check counts wrong elements of (what goes to rank 0 stays small at any scale).
pub const MAX_SENDERS: usize = 64;
/// Runs of unwritten elements a check keeps.
pub const MAX_RANGES: usize = 4;
/// Wrong elements looked at to tell whose data they are.
pub const PEER_WINDOW: usize = 16;
/// The most ranks considered when telling whose data a wrong element is (the search costs a
/// hash per rank for the first wrong element).
pub const MAX_PEER_SEARCH: u32 = 4096;

/// Fills `out` with what `rank` sends in `epoch` (`op`: `None` for a pattern that copies).
pub fn fill_send(
    out: &mut [u8],
    layout: &Layout,
    dtype: DataType,
    op: Option<RedOp>,
    rank: u32,
    nranks: u32,
    epoch: u32,
) {
    fill_send_from(
        0,
        &mut out[..layout.count * dtype.size()],
        dtype,
        op,
        rank,
        nranks,
        epoch,
    );
}

/// Fills `out` with elements `first..` of what `rank` sends in `epoch`: one staging chunk of
/// a send buffer that is filled piece by piece.
pub fn fill_send_from(
    first: usize,
    out: &mut [u8],
    dtype: DataType,
    op: Option<RedOp>,
    rank: u32,
    nranks: u32,
    epoch: u32,
) {
    elements::fill(out, dtype, op, nranks, rank, first, epoch);
}

/// The reduction a pattern applies (`None` when it copies).
pub fn op_of(pattern: &dyn Pattern, op: RedOp) -> Option<RedOp> {
    pattern.reduces().then_some(op)
}

/// Counts the elements of `got` that differ from what the senders sent.
#[allow(clippy::too_many_arguments)]
pub fn check(
    got: &[u8],
    pattern: &dyn Pattern,
    layout: &Layout,
    dtype: DataType,
    op: RedOp,
    rank: u32,
    nranks: u32,
    epoch: u32,
) -> Check {
    let mut c = Checker::new(pattern, layout, dtype, op, rank, nranks, epoch);
    c.chunk(0, &got[..pattern.written(rank, layout) * dtype.size()]);
    c.finish()
}

/// The ranks whose data the wrong elements seen so far could be.
struct PeerGuess {
    candidates: Vec<u32>,
    seen: usize,
}

/// The check of one receive buffer, fed chunk by chunk (a staging buffer's worth at a time),
/// so host memory does not grow with the message size.
pub struct Checker<'a> {
    pattern: &'a dyn Pattern,
    layout: &'a Layout,
    dtype: DataType,
    op: RedOp,
    rank: u32,
    nranks: u32,
    epoch: u32,
    out: Check,
    /// A reduction's expected elements by index modulo [`elements::PERIOD`]: bytes and value.
    reduced: Vec<Option<([u8; 8], f64)>>,
    /// Whether `out.first` is an unwritten element.
    first_unwritten: bool,
    /// The run of unwritten elements in progress.
    run: Option<(usize, usize)>,
    guess: Option<PeerGuess>,
    /// Written wrong elements by the rank whose data they should have been.
    wrong_from: std::collections::BTreeMap<u32, u64>,
}

impl<'a> Checker<'a> {
    pub fn new(
        pattern: &'a dyn Pattern,
        layout: &'a Layout,
        dtype: DataType,
        op: RedOp,
        rank: u32,
        nranks: u32,
        epoch: u32,
    ) -> Checker<'a> {
        Checker {
            pattern,
            layout,
            dtype,
            op,
            rank,
            nranks,
            epoch,
            out: Check::default(),
            reduced: vec![None; elements::PERIOD],
            first_unwritten: false,
            run: None,
            guess: None,
            wrong_from: Default::default(),
        }
    }

    /// What rank `q` alone would have put at this element: its data for a copy, its own
    /// input for a reduction.
    fn of_rank(&self, q: u32, src: Source) -> f64 {
        match src {
            Source::Rank { index, .. } => elements::value(None, self.nranks, q, index, self.epoch),
            Source::Reduced { index } => {
                elements::value(Some(self.op), self.nranks, q, index, self.epoch)
            }
        }
    }

    fn bits(&self, v: f64) -> [u8; 8] {
        let mut b = [0u8; 8];
        self.dtype.encode(v, &mut b[..self.dtype.size()]);
        b
    }

    /// Narrows the ranks whose data a wrong, written element matches.
    fn guess_peer(&mut self, src: Source, el: &[u8]) {
        let sz = self.dtype.size();
        if self.nranks > MAX_PEER_SEARCH {
            return;
        }
        match &mut self.guess {
            None => {
                let candidates = (0..self.nranks)
                    .filter(|&q| self.bits(self.of_rank(q, src))[..sz] == *el)
                    .collect();
                self.guess = Some(PeerGuess {
                    candidates,
                    seen: 1,
                });
            }
            Some(g) if g.seen < PEER_WINDOW && !g.candidates.is_empty() => {
                let keep: Vec<u32> = g.candidates.clone();
                let kept = keep
                    .into_iter()
                    .filter(|&q| self.bits(self.of_rank(q, src))[..sz] == *el)
                    .collect();
                if let Some(g) = &mut self.guess {
                    g.candidates = kept;
                    g.seen += 1;
                }
            }
            Some(_) => {}
        }
    }

    fn close_run(&mut self) {
        if let Some(r) = self.run.take()
            && self.out.unwritten_ranges.len() < MAX_RANGES
        {
            self.out.unwritten_ranges.push(r);
        }
    }

    /// Checks `got`, which holds receive-buffer elements `first..`.
    pub fn chunk(&mut self, first: usize, got: &[u8]) {
        let sz = self.dtype.size();
        let fill = [elements::FILL_BYTE; 8];
        for (k, el) in got.chunks_exact(sz).enumerate() {
            let i = first + k;
            self.out.elements += 1;
            let src = self.pattern.source(self.rank, self.nranks, i, self.layout);
            let (want, bits, sender) = match src {
                Source::Rank { rank, index } => {
                    let v = elements::value(None, self.nranks, rank, index, self.epoch);
                    (v, self.bits(v), Some(rank))
                }
                Source::Reduced { index } => {
                    let (op, n, e, dtype) = (self.op, self.nranks, self.epoch, self.dtype);
                    let (b, v) = *self.reduced[index % elements::PERIOD].get_or_insert_with(|| {
                        let v = elements::reduced(op, n, index, e);
                        let mut b = [0u8; 8];
                        dtype.encode(v, &mut b[..sz]);
                        (b, v)
                    });
                    (v, b, None)
                }
            };
            if el == &bits[..sz] {
                self.close_run();
                continue;
            }
            self.out.wrong += 1;
            let unwritten = el == &fill[..sz];
            if unwritten {
                self.out.unwritten += 1;
                self.run = match self.run {
                    Some((s, e)) if e == i => Some((s, i + 1)),
                    other => {
                        if other.is_some() {
                            self.close_run();
                        }
                        Some((i, i + 1))
                    }
                };
            } else {
                self.close_run();
                if self.dtype.decode(el).is_nan() {
                    self.out.nan += 1;
                }
                self.guess_peer(src, el);
                if let Some(q) = sender
                    && (self.wrong_from.len() < MAX_SENDERS || self.wrong_from.contains_key(&q))
                {
                    *self.wrong_from.entry(q).or_default() += 1;
                }
            }
            // A written wrong element says more than an unwritten one.
            let replace = self.out.first.is_none() || (!unwritten && self.first_unwritten);
            if replace {
                self.first_unwritten = unwritten;
                self.out.first = Some(WrongElement {
                    index: i,
                    sender,
                    expected: want,
                    got: self.dtype.decode(el),
                    got_hex: hex(el),
                    from_rank: None,
                });
            }
        }
    }

    pub fn finish(mut self) -> Check {
        self.close_run();
        self.out.wrong_from = std::mem::take(&mut self.wrong_from).into_iter().collect();
        let sender = self.out.first.as_ref().and_then(|f| f.sender);
        let from = match &self.guess {
            Some(g) if g.candidates.len() == 1 && g.seen >= 2 => Some(g.candidates[0]),
            _ => None,
        };
        if let Some(f) = &mut self.out.first
            && !self.first_unwritten
        {
            // Another rank's data (copies), or one rank's input alone (reductions).
            f.from_rank = from.filter(|&q| Some(q) != sender);
        }
        self.out
    }
}

/// Bytes in hex, as they lie in memory.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests;
