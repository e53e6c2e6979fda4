//! The value each rank puts at each element, and the exact result of reducing them.
//!
//! Every value is a small non-negative integer computed from (sender rank, element index,
//! epoch), so it is exact in every element type and every rank can compute what every other
//! sent. The PTX kernels compute the same functions (`kernels.ptx`); a GPU test compares them.

/// How a pattern combines what ranks send: [`Op::Copy`] for patterns that move data, else the
/// reduction. The numbers are what the kernels take (not `ncclRedOp_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Op {
    Copy = 0,
    Sum = 1,
    Prod = 2,
    Max = 3,
    Min = 4,
}

impl Op {
    /// The op a kernel argument names, if any.
    pub fn from_code(code: u64) -> Option<Op> {
        [Op::Copy, Op::Sum, Op::Prod, Op::Max, Op::Min]
            .into_iter()
            .find(|o| *o as u64 == code)
    }
}

/// Ranks that contribute a non-zero value to each element of a reduction (fewer when the job
/// has fewer ranks). The others contribute the operation's identity, so every partial result,
/// in any order and at any rank count, is a small integer.
pub const CONTRIBUTORS: u32 = 3;

/// The largest value a copied element holds: 0..=126 fits every type exactly (int8 and
/// bfloat16 included).
pub const COPY_MAX: u64 = 126;

/// A reduction's expected results repeat with this period in the element index.
pub const PERIOD: u64 = 64;

/// A 64-bit mix (splitmix64's finaliser, public domain), so that neighbouring ranks, indices
/// and epochs give unrelated values.
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A hash of three numbers.
pub fn key(a: u64, b: u64, c: u64) -> u64 {
    mix(a.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ b.wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
        ^ c.wrapping_mul(0x1656_67b1_9e37_79f9))
}

/// Which of the element's contributors `sender` is, given `base` = (index + epoch) mod
/// nranks: contributor `j` is rank `(base + j * (nranks / k)) mod nranks`, `k` = min(nranks,
/// [`CONTRIBUTORS`]), so every rank contributes to `k` of every `nranks` consecutive elements.
pub fn contributor_at(nranks: u32, sender: u32, base: u64) -> Option<u32> {
    let n = nranks.max(1) as u64;
    let k = nranks.clamp(1, CONTRIBUTORS) as u64;
    let step = n / k;
    let off = (sender as u64 + n - base) % n;
    (off.is_multiple_of(step) && off / step < k).then_some((off / step) as u32)
}

/// (index + epoch) mod nranks: where an element's contributors start.
pub fn base(nranks: u32, index: u64, epoch: u32) -> u64 {
    index.wrapping_add(epoch as u64) % nranks.max(1) as u64
}

/// What contributor `j` gives at element `index`: 1..=3.
pub fn contribution(j: u32, index: u64, epoch: u32) -> u64 {
    1 + key(j as u64, index % PERIOD, epoch as u64) % 3
}

/// The value `sender` puts at element `index` in `epoch`, given `base` (see [`base`]):
///
/// - [`Op::Copy`]: 0..=[`COPY_MAX`], a hash of (sender, index, epoch), so a window of received
///   elements tells which rank's data it is.
/// - `Sum`, `Max`: each element's [`CONTRIBUTORS`] contributors give 1..=3, every other rank
///   0; `Min`: the others give 4. The result is 1..=9 at any rank count.
/// - `Prod`: exactly one rank gives 2, the others 1, so the product is 2.
pub fn value_at(op: Op, nranks: u32, sender: u32, index: u64, epoch: u32, base: u64) -> u64 {
    match op {
        Op::Copy => key(sender as u64, index, epoch as u64) % (COPY_MAX + 1),
        Op::Prod => {
            if base == sender as u64 {
                2
            } else {
                1
            }
        }
        _ => match contributor_at(nranks, sender, base) {
            Some(j) => contribution(j, index, epoch),
            None if op == Op::Min => 4,
            None => 0,
        },
    }
}

/// [`value_at`], computing the base.
pub fn value(op: Op, nranks: u32, sender: u32, index: u64, epoch: u32) -> u64 {
    let b = match op {
        Op::Copy => 0,
        _ => base(nranks, index, epoch),
    };
    value_at(op, nranks, sender, index, epoch, b)
}

/// The exact result of reducing every rank's element `index` with `op` (not [`Op::Copy`]):
/// only the contributors count, so it costs O(1) at any rank count.
pub fn reduced(op: Op, nranks: u32, index: u64, epoch: u32) -> u64 {
    let k = nranks.clamp(1, CONTRIBUTORS);
    let c = (0..k).map(|j| contribution(j, index, epoch));
    match op {
        Op::Prod => 2,
        Op::Max => c.max().unwrap_or(0),
        Op::Min => c.min().unwrap_or(0),
        _ => c.sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduced_is_the_reduction_over_every_rank() {
        for n in [1u32, 2, 3, 4, 5, 7, 8, 17, 64] {
            for op in [Op::Sum, Op::Prod, Op::Max, Op::Min] {
                for i in 0..40u64 {
                    let v = (0..n).map(|r| value(op, n, r, i, 3));
                    let all = match op {
                        Op::Sum => v.sum(),
                        Op::Prod => v.product(),
                        Op::Max => v.max().unwrap(),
                        _ => v.min().unwrap(),
                    };
                    assert_eq!(reduced(op, n, i, 3), all, "{op:?} n={n} i={i}");
                }
            }
        }
    }

    #[test]
    fn ops_round_trip_through_their_codes() {
        for op in [Op::Copy, Op::Sum, Op::Prod, Op::Max, Op::Min] {
            assert_eq!(Op::from_code(op as u64), Some(op));
        }
        assert_eq!(Op::from_code(5), None);
    }
}
