//! Element types, reductions, and the data every rank can compute for every other.
//!
//! Each element a rank sends is a small integer computed from (sender rank, element index,
//! epoch). Small integers are exact in every type, half and bfloat16 included, and their sums
//! are exact in any order, so every rank knows the exact expected result of every operation
//! without exchanging anything, and a wrong element points at the rank that sent it.

use clap::ValueEnum;
use float8::{F8E4M3, F8E5M2};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

use nccl_smoke_kernels::values::{self as v, Op};
pub use nccl_smoke_kernels::values::{CONTRIBUTORS, COPY_MAX};

/// `ncclDataType_t`, by the names nccl-tests uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataType {
    Int8,
    Uint8,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Half,
    Float,
    Double,
    Bfloat16,
    /// `ncclFloat8e4m3` (NCCL 2.24 and later; reductions on compute capability 9.0 and later).
    F8e4m3,
    /// `ncclFloat8e5m2` (as [`DataType::F8e4m3`]).
    F8e5m2,
}

impl DataType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DataType::Int8 | DataType::Uint8 | DataType::F8e4m3 | DataType::F8e5m2 => 1,
            DataType::Half | DataType::Bfloat16 => 2,
            DataType::Int32 | DataType::Uint32 | DataType::Float => 4,
            DataType::Int64 | DataType::Uint64 | DataType::Double => 8,
        }
    }

    /// The `ncclDataType_t` value.
    pub fn nccl_code(self) -> u32 {
        match self {
            DataType::Int8 => 0,
            DataType::Uint8 => 1,
            DataType::Int32 => 2,
            DataType::Uint32 => 3,
            DataType::Int64 => 4,
            DataType::Uint64 => 5,
            DataType::Half => 6,
            DataType::Float => 7,
            DataType::Double => 8,
            DataType::Bfloat16 => 9,
            DataType::F8e4m3 => 10,
            DataType::F8e5m2 => 11,
        }
    }

    /// An 8-bit float: few integers are exact in it (all of 0..=16 in e4m3, 0..=8 in e5m2),
    /// so a copied value may round (bytes are compared, never values), and a sum of 9 rounds
    /// to 8 in e5m2 whatever the order (every partial sum before the last is at most 6).
    pub fn is_fp8(self) -> bool {
        matches!(self, DataType::F8e4m3 | DataType::F8e5m2)
    }

    /// The first NCCL release that has this type: `ncclFloat8e4m3` and `ncclFloat8e5m2` appear
    /// in `src/nccl.h.in` at v2.24.3-1 (NVIDIA/nccl); the others are in every release.
    pub fn since_nccl(self) -> Option<i32> {
        self.is_fp8().then_some(22400)
    }

    /// (NCCL code, element size), as `crate::comm` takes it.
    pub fn nccl(self) -> (u32, usize) {
        (self.nccl_code(), self.size())
    }

    pub fn name(self) -> &'static str {
        match self {
            DataType::Int8 => "int8",
            DataType::Uint8 => "uint8",
            DataType::Int32 => "int32",
            DataType::Uint32 => "uint32",
            DataType::Int64 => "int64",
            DataType::Uint64 => "uint64",
            DataType::Half => "half",
            DataType::Float => "float",
            DataType::Double => "double",
            DataType::Bfloat16 => "bfloat16",
            DataType::F8e4m3 => "f8e4m3",
            DataType::F8e5m2 => "f8e5m2",
        }
    }

    /// Writes `v` (an integer-valued number) as one element into `out`. Integer types wrap
    /// like the device's two's-complement arithmetic does.
    pub fn encode(self, v: f64, out: &mut [u8]) {
        let i = v as i64;
        match self {
            DataType::Int8 => out.copy_from_slice(&(i as i8).to_le_bytes()),
            DataType::Uint8 => out.copy_from_slice(&(i as u8).to_le_bytes()),
            DataType::Int32 => out.copy_from_slice(&(i as i32).to_le_bytes()),
            DataType::Uint32 => out.copy_from_slice(&(i as u32).to_le_bytes()),
            DataType::Int64 => out.copy_from_slice(&i.to_le_bytes()),
            DataType::Uint64 => out.copy_from_slice(&(i as u64).to_le_bytes()),
            DataType::Half => out.copy_from_slice(&f16::from_f64(v).to_le_bytes()),
            DataType::Bfloat16 => out.copy_from_slice(&bf16::from_f64(v).to_le_bytes()),
            DataType::Float => out.copy_from_slice(&(v as f32).to_le_bytes()),
            DataType::Double => out.copy_from_slice(&v.to_le_bytes()),
            DataType::F8e4m3 => out[0] = F8E4M3::from_f64(v).to_bits(),
            DataType::F8e5m2 => out[0] = F8E5M2::from_f64(v).to_bits(),
        }
    }

    /// Reads one element as a number, for messages.
    pub fn decode(self, b: &[u8]) -> f64 {
        let a = |n: usize| -> [u8; 8] {
            let mut x = [0u8; 8];
            x[..n].copy_from_slice(&b[..n]);
            x
        };
        match self {
            DataType::Int8 => b[0] as i8 as f64,
            DataType::Uint8 => b[0] as f64,
            DataType::Int32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DataType::Uint32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DataType::Int64 => i64::from_le_bytes(a(8)) as f64,
            DataType::Uint64 => u64::from_le_bytes(a(8)) as f64,
            DataType::Half => f16::from_le_bytes([b[0], b[1]]).to_f64(),
            DataType::Bfloat16 => bf16::from_le_bytes([b[0], b[1]]).to_f64(),
            DataType::Float => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DataType::Double => f64::from_le_bytes(a(8)),
            DataType::F8e4m3 => F8E4M3::from_bits(b[0]).to_f64(),
            DataType::F8e5m2 => F8E5M2::from_bits(b[0]).to_f64(),
        }
    }
}

/// `ncclRedOp_t`, by the names nccl-tests uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RedOp {
    Sum,
    Prod,
    Max,
    Min,
}

impl RedOp {
    pub fn nccl_code(self) -> u32 {
        match self {
            RedOp::Sum => 0,
            RedOp::Prod => 1,
            RedOp::Max => 2,
            RedOp::Min => 3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RedOp::Sum => "sum",
            RedOp::Prod => "prod",
            RedOp::Max => "max",
            RedOp::Min => "min",
        }
    }

    /// Combines contributions in rank order.
    pub fn reduce(self, values: impl Iterator<Item = f64>) -> f64 {
        match self {
            RedOp::Sum => values.sum(),
            RedOp::Prod => values.product(),
            RedOp::Max => values.fold(f64::MIN, f64::max),
            RedOp::Min => values.fold(f64::MAX, f64::min),
        }
    }
}

/// The byte the receive buffer is filled with before each measurement: `0xff…` is -1 or the
/// largest value of an integer type and a NaN of every floating type, so no correct result of
/// [`value`]'s data (0..=126 for copies, 1..=9 for reductions) ever has these bits, and an
/// element that still holds them was never written.
pub const FILL_BYTE: u8 = 0xff;

/// A reduction's expected results repeat with this period in the element index (its
/// contributors' values depend on the index modulo it), so a check computes 64 of them per
/// size and compares bytes.
pub const PERIOD: usize = v::PERIOD as usize;

/// The kernels' op for a pattern's reduction (`None`: the pattern copies).
pub fn kernel_op(op: Option<RedOp>) -> Op {
    match op {
        None => Op::Copy,
        Some(RedOp::Sum) => Op::Sum,
        Some(RedOp::Prod) => Op::Prod,
        Some(RedOp::Max) => Op::Max,
        Some(RedOp::Min) => Op::Min,
    }
}

/// Which of the element's contributors `sender` is, if any (see
/// [`nccl_smoke_kernels::values::contributor_at`]).
pub fn contributor(nranks: u32, sender: u32, index: usize, epoch: u32) -> Option<u32> {
    v::contributor_at(nranks, sender, v::base(nranks, index as u64, epoch))
}

/// The value `sender` puts at element `index` of its send buffer in `epoch`: `op` is `None`
/// for patterns that copy (all-to-all, send/recv), the reduction otherwise. The values are
/// [`nccl_smoke_kernels::values::value`]'s: the same the device kernels compute.
pub fn value(op: Option<RedOp>, nranks: u32, sender: u32, index: usize, epoch: u32) -> f64 {
    v::value(kernel_op(op), nranks, sender, index as u64, epoch) as f64
}

/// Writes elements `first..` of what `sender` sends in `epoch` into `out`, one element of
/// `dtype` each: [`value`] for every element, by the fill kernel's reference (the device
/// kernel's table, its values), so the host's fill and the simulated device's are one.
pub fn fill(
    out: &mut [u8],
    dtype: DataType,
    op: Option<RedOp>,
    nranks: u32,
    sender: u32,
    first: usize,
    epoch: u32,
) {
    let args = nccl_smoke_kernels::args::FillArgs {
        out: 0,
        count: (out.len() / dtype.size()) as u64,
        first: first as u64,
        table: 0,
        elsize: dtype.size() as u64,
        op: kernel_op(op) as u64,
        nranks: nranks as u64,
        sender: sender as u64,
        epoch: epoch as u64,
    };
    nccl_smoke_kernels::reference::fill(&args, out, &kernel_table(dtype))
        .expect("a DataType's size and a kernel op are what the reference takes");
}

/// The exact result of reducing every rank's element `index` with `op`: only the
/// contributors count (the others give the identity), so this costs O(1) at any rank count,
/// and it depends on `index` only modulo [`PERIOD`].
pub fn reduced(op: RedOp, nranks: u32, index: usize, epoch: u32) -> f64 {
    v::reduced(kernel_op(Some(op)), nranks, index as u64, epoch) as f64
}

/// The bytes of the kernels' encoding table for `dtype` (entry `v`: `v` in `dtype`).
pub fn kernel_table(dtype: DataType) -> Vec<u8> {
    nccl_smoke_kernels::args::table_bytes(dtype.size(), |x, out| dtype.encode(x, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every type, in `ncclDataType_t` order (the declaration's, which clap lists).
    fn all() -> &'static [DataType] {
        DataType::value_variants()
    }

    #[test]
    fn sizes_and_codes_match_nccl_h() {
        let sizes: Vec<usize> = all().iter().map(|d| d.size()).collect();
        assert_eq!(sizes, [1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1]);
        let codes: Vec<u32> = all().iter().map(|d| d.nccl_code()).collect();
        assert_eq!(codes, (0..12).collect::<Vec<u32>>());
        assert_eq!(
            [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min].map(|o| o.nccl_code()),
            [0, 1, 2, 3]
        );
    }

    #[test]
    fn encode_decode_round_trips_small_integers_in_every_type() {
        for &dt in all() {
            for v in [0.0, 1.0, 2.0, 3.0, 12.0, 96.0] {
                let mut b = vec![0u8; dt.size()];
                dt.encode(v, &mut b);
                assert_eq!(dt.decode(&b), v, "{dt:?} {v}");
            }
        }
    }

    #[test]
    fn integer_types_wrap_like_the_device() {
        let mut b = [0u8; 1];
        DataType::Int8.encode(130.0, &mut b);
        assert_eq!(DataType::Int8.decode(&b), -126.0);
        DataType::Uint8.encode(300.0, &mut b);
        assert_eq!(DataType::Uint8.decode(&b), 44.0);
    }

    #[test]
    fn product_is_two_for_any_rank_count() {
        for n in [1u32, 2, 3, 8, 64] {
            for i in 0..50 {
                let p = RedOp::Prod.reduce((0..n).map(|r| value(Some(RedOp::Prod), n, r, i, 7)));
                assert_eq!(p, 2.0);
                assert_eq!(reduced(RedOp::Prod, n, i, 7), 2.0);
            }
        }
    }

    #[test]
    fn reduced_is_the_reduction_over_every_rank() {
        for n in [1u32, 2, 3, 4, 5, 6, 7, 8, 17, 64] {
            for op in [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min] {
                for i in 0..40 {
                    let all = op.reduce((0..n).map(|r| value(Some(op), n, r, i, 3)));
                    assert_eq!(reduced(op, n, i, 3), all, "{op:?} n={n} i={i}");
                    assert!((1.0..=9.0).contains(&all), "{op:?} n={n}: {all}");
                }
            }
        }
    }

    #[test]
    fn every_rank_contributes_within_nranks_elements() {
        for n in [1u32, 2, 3, 4, 7, 100] {
            for r in 0..n {
                let hits = (0..n as usize)
                    .filter(|&i| contributor(n, r, i, 5).is_some())
                    .count();
                assert_eq!(hits as u32, n.min(CONTRIBUTORS), "rank {r} of {n}");
            }
        }
    }

    #[test]
    fn no_correct_value_has_the_fill_bits() {
        for &dt in all() {
            let fill = vec![FILL_BYTE; dt.size()];
            let mut b = vec![0u8; dt.size()];
            for v in 0..=COPY_MAX {
                dt.encode(v as f64, &mut b);
                assert_ne!(b, fill, "{dt:?} {v}");
                if !dt.is_fp8() {
                    assert_eq!(dt.decode(&b), v as f64, "{dt:?} {v} is not exact");
                }
            }
        }
    }

    #[test]
    fn copied_values_tell_senders_apart() {
        // A window of 16 elements of one sender matches no other sender's (here: 1,000 ranks).
        for r in 0..1000u32 {
            let w = |s: u32| {
                (0..16)
                    .map(|i| value(None, 1000, s, 4096 + i, 9))
                    .collect::<Vec<_>>()
            };
            let mine = w(r);
            assert!(
                (0..1000).filter(|&s| s != r).all(|s| w(s) != mine),
                "rank {r}"
            );
        }
    }

    #[test]
    fn values_depend_on_sender_index_and_epoch() {
        let v = |s, i, e| value(None, 4, s, i, e);
        assert!((0..8).any(|i| v(0, i, 0) != v(1, i, 0)));
        assert!((0..8).any(|i| v(0, i, 0) != v(0, i + 1, 0)));
        assert!((0..8).any(|i| v(0, i, 0) != v(0, i, 1)));
        assert_eq!(RedOp::Max.reduce([1.0, 3.0, 2.0].into_iter()), 3.0);
        assert_eq!(RedOp::Min.reduce([1.0, 3.0, 2.0].into_iter()), 1.0);
    }

    /// Folds `vals` in the given order as a device does, rounding to `dt` at every step.
    fn fold_in(dt: DataType, op: RedOp, vals: &[f64]) -> (f64, bool) {
        let mut b = vec![0u8; dt.size()];
        let mut acc = vals[0];
        let mut exact = true;
        for &v in &vals[1..] {
            let want = op.reduce([acc, v].into_iter());
            dt.encode(want, &mut b);
            acc = dt.decode(&b);
            exact &= acc == want;
        }
        (acc, exact)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Every partial result of every reduction is exact in every type, in any order, from
        /// 2 to 16,384 ranks: a healthy job of any size never reports corruption. In the 8-bit
        /// floats the result may round (9 is 8 in e5m2), but to the same bits in every order,
        /// which are the bits the check expects (the expected value encoded).
        #[test]
        fn reductions_are_exact_in_any_order_up_to_16384_ranks(
            n in 2u32..=16384,
            index in 0usize..1 << 30,
            epoch in 0u32..1000,
            seed in proptest::prelude::any::<u64>(),
        ) {
            for op in [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min] {
                let mut vals: Vec<f64> = (0..n).map(|r| value(Some(op), n, r, index, epoch)).collect();
                // A seeded Fisher-Yates shuffle: one reduction order of the many.
                let mut s = seed;
                for i in (1..vals.len()).rev() {
                    s = nccl_smoke_kernels::values::mix(s.wrapping_add(i as u64));
                    vals.swap(i, (s % (i as u64 + 1)) as usize);
                }
                let want = reduced(op, n, index, epoch);
                for &dt in all() {
                    let (got, exact) = fold_in(dt, op, &vals);
                    if dt.is_fp8() {
                        let (mut a, mut b) = ([0u8; 1], [0u8; 1]);
                        dt.encode(got, &mut a);
                        dt.encode(want, &mut b);
                        proptest::prop_assert_eq!(a, b, "{:?} {:?} n={}", dt, op, n);
                        continue;
                    }
                    proptest::prop_assert!(exact, "{:?} {:?} n={}: a partial result was rounded", dt, op, n);
                    proptest::prop_assert_eq!(got, want, "{:?} {:?} n={}", dt, op, n);
                }
            }
        }
    }
}
