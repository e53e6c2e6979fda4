//! Element types, reductions, and the data every rank can compute for every other.
//!
//! Each element a rank sends is a small integer computed from (sender rank, element index,
//! epoch). Small integers are exact in every type, half and bfloat16 included, and their sums
//! are exact in any order, so every rank knows the exact expected result of every operation
//! without exchanging anything, and a wrong element points at the rank that sent it.

use clap::ValueEnum;
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

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
}

impl DataType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DataType::Int8 | DataType::Uint8 => 1,
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
        }
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

/// The value `sender` puts at element `index` of its send buffer in `epoch`.
///
/// For `prod`, exactly one rank contributes 2 and the others 1, so the product is 2 for any
/// number of ranks; otherwise values are 0..=3, so a sum over n ranks is at most 3n.
pub fn value(op: RedOp, nranks: u32, sender: u32, index: usize, epoch: u32) -> f64 {
    match op {
        RedOp::Prod => {
            let owner = (index as u64 + epoch as u64) % nranks.max(1) as u64;
            if owner == sender as u64 { 2.0 } else { 1.0 }
        }
        _ => {
            let h = (sender as u64)
                .wrapping_mul(3)
                .wrapping_add((index as u64).wrapping_mul(7))
                .wrapping_add((epoch as u64).wrapping_mul(5));
            (h % 4) as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [DataType; 10] = [
        DataType::Int8,
        DataType::Uint8,
        DataType::Int32,
        DataType::Uint32,
        DataType::Int64,
        DataType::Uint64,
        DataType::Half,
        DataType::Float,
        DataType::Double,
        DataType::Bfloat16,
    ];

    #[test]
    fn sizes_and_codes_match_nccl_h() {
        let sizes: Vec<usize> = ALL.iter().map(|d| d.size()).collect();
        assert_eq!(sizes, [1, 1, 4, 4, 8, 8, 2, 4, 8, 2]);
        let codes: Vec<u32> = ALL.iter().map(|d| d.nccl_code()).collect();
        assert_eq!(codes, (0..10).collect::<Vec<u32>>());
        assert_eq!(
            [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min].map(|o| o.nccl_code()),
            [0, 1, 2, 3]
        );
    }

    #[test]
    fn encode_decode_round_trips_small_integers_in_every_type() {
        for dt in ALL {
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
                let p = RedOp::Prod.reduce((0..n).map(|r| value(RedOp::Prod, n, r, i, 7)));
                assert_eq!(p, 2.0);
            }
        }
    }

    #[test]
    fn sums_stay_exact_in_half_and_bfloat16() {
        // 3 * 64 ranks = 192 is exact in bfloat16 (8 bits of mantissa covers integers to 256).
        let n = 64;
        for i in 0..64 {
            let s = RedOp::Sum.reduce((0..n).map(|r| value(RedOp::Sum, n, r, i, 1)));
            for dt in [DataType::Half, DataType::Bfloat16] {
                let mut b = [0u8; 2];
                dt.encode(s, &mut b);
                assert_eq!(dt.decode(&b), s);
            }
        }
    }

    #[test]
    fn values_depend_on_sender_index_and_epoch() {
        assert_ne!(value(RedOp::Sum, 4, 0, 0, 0), value(RedOp::Sum, 4, 1, 0, 0));
        assert_ne!(value(RedOp::Sum, 4, 0, 0, 0), value(RedOp::Sum, 4, 0, 1, 0));
        assert_ne!(value(RedOp::Sum, 4, 0, 0, 0), value(RedOp::Sum, 4, 0, 0, 1));
        assert_eq!(RedOp::Max.reduce([1.0, 3.0, 2.0].into_iter()), 3.0);
        assert_eq!(RedOp::Min.reduce([1.0, 3.0, 2.0].into_iter()), 1.0);
    }
}
