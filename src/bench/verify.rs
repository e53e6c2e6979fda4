//! Data each rank sends, and the check of what it received.

use crate::data::{self, DataType, RedOp};
use crate::patterns::{Layout, Pattern, Source};
use serde::{Deserialize, Serialize};

/// The first wrong element a rank found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrongElement {
    /// Index in the receive buffer.
    pub index: usize,
    /// The rank whose data it should have been (`None` for a reduction of all ranks).
    pub sender: Option<u32>,
    pub expected: f64,
    pub got: f64,
}

/// Fills `out` with what `rank` sends in `epoch`.
pub fn fill_send(
    out: &mut [u8],
    layout: &Layout,
    dtype: DataType,
    op: RedOp,
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
    op: RedOp,
    rank: u32,
    nranks: u32,
    epoch: u32,
) {
    let sz = dtype.size();
    for (i, el) in out.chunks_exact_mut(sz).enumerate() {
        dtype.encode(data::value(op, nranks, rank, first + i, epoch), el);
    }
}

/// The value expected at a source.
fn expected(src: Source, op: RedOp, nranks: u32, epoch: u32) -> (f64, Option<u32>) {
    match src {
        Source::Rank { rank, index } => (data::value(op, nranks, rank, index, epoch), Some(rank)),
        Source::Reduced { index } => (
            op.reduce((0..nranks).map(|r| data::value(op, nranks, r, index, epoch))),
            None,
        ),
    }
}

/// Every value [`data::value`] makes repeats with this period in the element index (4 for
/// sums, maxima and minima, `nranks` for products), so expected elements can be computed once per
/// residue and then compared by bytes.
fn period(nranks: u32) -> usize {
    let n = nranks.max(1) as usize;
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    4 * n / gcd(4, n)
}

/// Counts the elements of `got` that differ from what the senders sent, and the first one.
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
) -> (u64, Option<WrongElement>) {
    let mut c = Checker::new(pattern, layout, dtype, op, rank, nranks, epoch);
    c.chunk(0, &got[..layout.recv_count * dtype.size()]);
    c.finish()
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
    per: usize,
    /// Expected bytes per (sender slot, index residue); slot `nranks` stands for "reduced".
    table: Vec<Option<([u8; 8], f64)>>,
    wrong: u64,
    first: Option<WrongElement>,
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
        let per = period(nranks);
        Checker {
            pattern,
            layout,
            dtype,
            op,
            rank,
            nranks,
            epoch,
            per,
            table: vec![None; (nranks as usize + 1) * per],
            wrong: 0,
            first: None,
        }
    }

    /// Checks `got`, which holds receive-buffer elements `first..`.
    pub fn chunk(&mut self, first: usize, got: &[u8]) {
        let sz = self.dtype.size();
        for (k, el) in got.chunks_exact(sz).enumerate() {
            let i = first + k;
            let src = self.pattern.source(self.rank, self.nranks, i, self.layout);
            let (slot, index, sender) = match src {
                Source::Rank { rank, index } => (rank as usize, index, Some(rank)),
                Source::Reduced { index } => (self.nranks as usize, index, None),
            };
            let (op, nranks, epoch, dtype) = (self.op, self.nranks, self.epoch, self.dtype);
            let entry = &mut self.table[slot * self.per + index % self.per];
            let (want, v) = *entry.get_or_insert_with(|| {
                let (v, _) = expected(src, op, nranks, epoch);
                let mut b = [0u8; 8];
                dtype.encode(v, &mut b[..sz]);
                (b, v)
            });
            if el != &want[..sz] {
                self.wrong += 1;
                if self.first.is_none() {
                    self.first = Some(WrongElement {
                        index: i,
                        sender,
                        expected: v,
                        got: dtype.decode(el),
                    });
                }
            }
        }
    }

    pub fn finish(self) -> (u64, Option<WrongElement>) {
        (self.wrong, self.first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patterns::select;

    /// Simulates a pattern on the host: every rank's receive buffer built from the senders'
    /// buffers by the pattern's own source map; then corrupts one element.
    #[test]
    fn correct_data_passes_and_a_flipped_element_names_its_sender() {
        let n = 4;
        let dt = DataType::Float;
        let p = select(&["all_to_all".into()]).unwrap()[0];
        let l = p.layout(4 * 64, dt.size(), n);
        let sends: Vec<Vec<u8>> = (0..n)
            .map(|r| {
                let mut b = vec![0u8; l.count * 4];
                fill_send(&mut b, &l, dt, RedOp::Sum, r, n, 3);
                b
            })
            .collect();
        let mut recv = vec![0u8; l.recv_count * 4];
        for i in 0..l.recv_count {
            if let Source::Rank { rank, index } = p.source(2, n, i, &l) {
                recv[i * 4..i * 4 + 4]
                    .copy_from_slice(&sends[rank as usize][index * 4..index * 4 + 4]);
            }
        }
        assert_eq!(check(&recv, p, &l, dt, RedOp::Sum, 2, n, 3), (0, None));
        recv[4 * 40] ^= 0xff; // element 40: chunk 2 (from rank 2 itself, 16 per peer)
        let (wrong, first) = check(&recv, p, &l, dt, RedOp::Sum, 2, n, 3);
        assert_eq!(wrong, 1);
        let first = first.unwrap();
        assert_eq!((first.index, first.sender), (40, Some(2)));
    }

    /// A buffer checked in uneven chunks gives what one whole check gives.
    #[test]
    fn chunked_fill_and_check_equal_whole_ones() {
        let (n, dt) = (3, DataType::Double);
        let p = select(&["all_reduce".into()]).unwrap()[0];
        let l = p.layout(8 * 1000, dt.size(), n);
        let mut whole = vec![0u8; l.count * 8];
        fill_send(&mut whole, &l, dt, RedOp::Sum, 1, n, 7);
        let mut pieces = vec![0u8; l.count * 8];
        for (k, chunk) in pieces.chunks_mut(8 * 37).enumerate() {
            fill_send_from(k * 37, chunk, dt, RedOp::Sum, 1, n, 7);
        }
        assert_eq!(whole, pieces);
        let mut recv = vec![0u8; l.count * 8];
        for (i, el) in recv.chunks_exact_mut(8).enumerate() {
            let sum = RedOp::Sum.reduce((0..n).map(|r| data::value(RedOp::Sum, n, r, i, 7)));
            dt.encode(sum, el);
        }
        recv[8 * 500] ^= 1;
        let mut c = Checker::new(p, &l, dt, RedOp::Sum, 1, n, 7);
        for (k, chunk) in recv.chunks(8 * 37).enumerate() {
            c.chunk(k * 37, chunk);
        }
        let (wrong, first) = c.finish();
        assert_eq!((wrong, first.as_ref().map(|w| w.index)), (1, Some(500)));
        assert_eq!((wrong, first), check(&recv, p, &l, dt, RedOp::Sum, 1, n, 7));
    }

    #[test]
    fn values_repeat_with_the_period() {
        for n in [1u32, 2, 3, 4, 6, 7, 8] {
            let per = period(n);
            for op in [RedOp::Sum, RedOp::Prod] {
                for i in 0..3 * per {
                    for r in 0..n {
                        assert_eq!(
                            data::value(op, n, r, i, 5),
                            data::value(op, n, r, i + per, 5)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn reduction_is_checked_against_all_ranks() {
        let n = 3;
        let dt = DataType::Half;
        let p = select(&["all_reduce".into()]).unwrap()[0];
        let l = p.layout(2 * 10, dt.size(), n);
        let mut recv = vec![0u8; l.count * 2];
        for i in 0..l.count {
            let s: f64 = (0..n)
                .map(|r| data::value(RedOp::Max, n, r, i, 0))
                .fold(0.0, f64::max);
            dt.encode(s, &mut recv[i * 2..i * 2 + 2]);
        }
        assert_eq!(check(&recv, p, &l, dt, RedOp::Max, 0, n, 0).0, 0);
        assert!(check(&recv, p, &l, dt, RedOp::Sum, 0, n, 0).0 > 0);
    }
}
