//! Element types and reductions, exact for every `ncclDataType_t` and `ncclRedOp_t`.
//!
//! Contributions are folded in rank order, each step rounded to the element type, so every
//! rank computes the same bits. (NCCL's ring folds each chunk in another order; the harness's
//! data is exact in any order, which its own property test checks, so the simulation keeps
//! the streaming rank-order fold: a ring order would hold every rank's message at once.) `avg` is the sum divided by the number of ranks (integer
//! division truncates); integers wrap as on the GPU.

use float8::{F8E4M3, F8E5M2};
use half::{bf16, f16};

/// `ncclFloat8e4m3` and `ncclFloat8e5m2`: in `nccl.h` from v2.24.3-1 (NVIDIA/nccl).
pub const FP8_SINCE: i32 = 22400;

pub const SUM: u32 = 0;
pub const PROD: u32 = 1;
pub const MAX: u32 = 2;
pub const MIN: u32 = 3;
pub const AVG: u32 = 4;

/// Bytes per element of an `ncclDataType_t`, `None` for an unknown code.
pub fn elem_size(dtype: u32) -> Option<usize> {
    match dtype {
        0 | 1 | 10 | 11 => Some(1),
        6 | 9 => Some(2),
        2 | 3 | 7 => Some(4),
        4 | 5 | 8 => Some(8),
        _ => None,
    }
}

pub fn valid_op(op: u32) -> bool {
    op <= AVG
}

trait Elem: Copy {
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
    fn sum(self, o: Self) -> Self;
    fn prod(self, o: Self) -> Self;
    fn max(self, o: Self) -> Self;
    fn min(self, o: Self) -> Self;
    fn div(self, n: usize) -> Self;
}

macro_rules! int_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn load(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().unwrap_or_default())
            }
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes());
            }
            fn sum(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn prod(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn max(self, o: Self) -> Self {
                Ord::max(self, o)
            }
            fn min(self, o: Self) -> Self {
                Ord::min(self, o)
            }
            fn div(self, n: usize) -> Self {
                // Wide enough for every value and count: truncates toward zero.
                (self as i128 / n.max(1) as i128) as $t
            }
        }
    )*};
}
int_elem!(i8, u8, i32, u32, i64, u64);

/// Floats are computed in f64 and rounded once to the element type: for +, * and / on
/// f32, f16 and bf16 that is the correctly rounded result of the type's own operation.
macro_rules! float_elem {
    ($t:ty, $to:expr, $from:expr) => {
        impl Elem for $t {
            fn load(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().unwrap_or_default())
            }
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes());
            }
            fn sum(self, o: Self) -> Self {
                $from($to(self) + $to(o))
            }
            fn prod(self, o: Self) -> Self {
                $from($to(self) * $to(o))
            }
            fn max(self, o: Self) -> Self {
                $from(f64::max($to(self), $to(o)))
            }
            fn min(self, o: Self) -> Self {
                $from(f64::min($to(self), $to(o)))
            }
            fn div(self, n: usize) -> Self {
                $from($to(self) / n.max(1) as f64)
            }
        }
    };
}
float_elem!(f16, |v: f16| v.to_f64(), f16::from_f64);
float_elem!(bf16, |v: bf16| v.to_f64(), bf16::from_f64);
float_elem!(f32, |v: f32| v as f64, |v: f64| v as f32);
float_elem!(f64, |v: f64| v, |v: f64| v);

/// The 8-bit floats, as the others: each step computed in f64 and rounded to the type.
macro_rules! fp8_elem {
    ($t:ty) => {
        impl Elem for $t {
            fn load(b: &[u8]) -> Self {
                <$t>::from_bits(b[0])
            }
            fn store(self, b: &mut [u8]) {
                b[0] = self.to_bits();
            }
            fn sum(self, o: Self) -> Self {
                <$t>::from_f64(self.to_f64() + o.to_f64())
            }
            fn prod(self, o: Self) -> Self {
                <$t>::from_f64(self.to_f64() * o.to_f64())
            }
            fn max(self, o: Self) -> Self {
                <$t>::from_f64(f64::max(self.to_f64(), o.to_f64()))
            }
            fn min(self, o: Self) -> Self {
                <$t>::from_f64(f64::min(self.to_f64(), o.to_f64()))
            }
            fn div(self, n: usize) -> Self {
                <$t>::from_f64(self.to_f64() / n.max(1) as f64)
            }
        }
    };
}
fp8_elem!(F8E4M3);
fp8_elem!(F8E5M2);

fn fold<T: Elem>(acc: &mut [u8], x: &[u8], op: u32) {
    let sz = std::mem::size_of::<T>();
    for (a, b) in acc.chunks_exact_mut(sz).zip(x.chunks_exact(sz)) {
        let (l, r) = (T::load(a), T::load(b));
        let v = match op {
            PROD => l.prod(r),
            MAX => l.max(r),
            MIN => l.min(r),
            _ => l.sum(r),
        };
        v.store(a);
    }
}

fn divide<T: Elem>(acc: &mut [u8], n: usize) {
    let sz = std::mem::size_of::<T>();
    for a in acc.chunks_exact_mut(sz) {
        T::load(a).div(n).store(a);
    }
}

macro_rules! by_type {
    ($dtype:expr, $f:ident, $($arg:expr),*) => {
        match $dtype {
            0 => $f::<i8>($($arg),*),
            1 => $f::<u8>($($arg),*),
            2 => $f::<i32>($($arg),*),
            3 => $f::<u32>($($arg),*),
            4 => $f::<i64>($($arg),*),
            5 => $f::<u64>($($arg),*),
            6 => $f::<f16>($($arg),*),
            7 => $f::<f32>($($arg),*),
            8 => $f::<f64>($($arg),*),
            9 => $f::<bf16>($($arg),*),
            10 => $f::<F8E4M3>($($arg),*),
            11 => $f::<F8E5M2>($($arg),*),
            _ => {}
        }
    };
}

/// `acc = acc (op) x`, element-wise (`avg` folds as a sum).
pub fn fold_into(acc: &mut [u8], x: &[u8], dtype: u32, op: u32) {
    by_type!(dtype, fold, acc, x, op);
}

/// Completes a fold over `nranks` contributions: `avg` divides, other operations are done.
pub fn finish(acc: &mut [u8], dtype: u32, op: u32, nranks: usize) {
    if op == AVG {
        by_type!(dtype, divide, acc, nranks);
    }
}

/// Reduces every rank's buffer, in rank order.
#[cfg(test)]
pub fn reduce_all(bufs: &[Vec<u8>], dtype: u32, op: u32) -> Vec<u8> {
    let mut acc = bufs[0].clone();
    for b in &bufs[1..] {
        fold_into(&mut acc, b, dtype, op);
    }
    finish(&mut acc, dtype, op, bufs.len());
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
        v.iter().flat_map(|x| f(*x)).collect()
    }

    macro_rules! check_int {
        ($t:ty, $code:expr) => {{
            let e = |v: &[$t]| enc(v, |x: $t| x.to_le_bytes().to_vec());
            let bufs = vec![e(&[3, 7, <$t>::MAX]), e(&[5, 2, 1]), e(&[1, 9, 1])];
            assert_eq!(
                reduce_all(&bufs, $code, SUM),
                e(&[9, 18, <$t>::MAX.wrapping_add(2)])
            );
            assert_eq!(reduce_all(&bufs, $code, PROD), e(&[15, 126, <$t>::MAX]));
            assert_eq!(reduce_all(&bufs, $code, MAX), e(&[5, 9, <$t>::MAX]));
            assert_eq!(reduce_all(&bufs, $code, MIN), e(&[1, 2, 1]));
            let avg = reduce_all(&bufs[..2], $code, AVG);
            assert_eq!(&avg[..2 * std::mem::size_of::<$t>()], &e(&[4, 4])[..]);
        }};
    }

    #[test]
    fn every_integer_type_and_operation() {
        check_int!(i8, 0);
        check_int!(u8, 1);
        check_int!(i32, 2);
        check_int!(u32, 3);
        check_int!(i64, 4);
        check_int!(u64, 5);
    }

    #[test]
    fn signed_integers_wrap_and_truncate_toward_zero() {
        let e = |v: &[i8]| enc(v, |x: i8| x.to_le_bytes().to_vec());
        assert_eq!(
            reduce_all(&[e(&[-7, 100]), e(&[0, 100])], 0, AVG),
            e(&[-3, -28])
        );
        assert_eq!(reduce_all(&[e(&[-3]), e(&[5])], 0, PROD), e(&[-15]));
        assert_eq!(reduce_all(&[e(&[-3]), e(&[5])], 0, MIN), e(&[-3]));
        // More ranks than the type can count: the divisor is not truncated to the type.
        let mut acc = vec![200u8];
        finish(&mut acc, 1, AVG, 300);
        assert_eq!(acc, vec![0]);
        let mut acc = vec![200u8];
        finish(&mut acc, 1, AVG, 256);
        assert_eq!(acc, vec![0]);
        let mut acc = 1000i64.to_le_bytes().to_vec();
        finish(&mut acc, 4, AVG, 300);
        assert_eq!(acc, 3i64.to_le_bytes().to_vec());
    }

    #[test]
    fn float_and_double() {
        let f = |v: f32| v.to_le_bytes().to_vec();
        let b = vec![f(1.5), f(2.0), f(-4.0)];
        assert_eq!(reduce_all(&b, 7, SUM), f(-0.5));
        assert_eq!(reduce_all(&b, 7, PROD), f(-12.0));
        assert_eq!(reduce_all(&b, 7, MAX), f(2.0));
        assert_eq!(reduce_all(&b, 7, MIN), f(-4.0));
        assert_eq!(reduce_all(&b, 7, AVG), f(-0.5 / 3.0));
        // Rounded at each step, in rank order: (1e8 + 1) + -1e8 is 0 in f32, not 1.
        let b = vec![f(1e8), f(1.0), f(-1e8)];
        assert_eq!(reduce_all(&b, 7, SUM), f(0.0));
        let b = vec![f(1e8), f(-1e8), f(1.0)];
        assert_eq!(reduce_all(&b, 7, SUM), f(1.0));
        let d = |v: f64| v.to_le_bytes().to_vec();
        assert_eq!(reduce_all(&[d(1.0), d(2.0)], 8, AVG), d(1.5));
        assert_eq!(reduce_all(&[d(0.1), d(0.2)], 8, SUM), d(0.1 + 0.2));
        assert_eq!(reduce_all(&[d(3.0), d(-0.5)], 8, PROD), d(-1.5));
    }

    #[test]
    fn half_rounds_like_half() {
        let h = |v: f64| f16::from_f64(v).to_le_bytes().to_vec();
        // 2048 + 1 is not representable: ties to even gives 2048; 2048 + 3 gives 2052.
        assert_eq!(reduce_all(&[h(2048.0), h(1.0)], 6, SUM), h(2048.0));
        assert_eq!(reduce_all(&[h(2048.0), h(3.0)], 6, SUM), h(2052.0));
        // Step-wise rounding: (2048 + 1) + 1 stays 2048, unlike 2048 + (1 + 1).
        assert_eq!(reduce_all(&[h(2048.0), h(1.0), h(1.0)], 6, SUM), h(2048.0));
        assert_eq!(reduce_all(&[h(1.0), h(1.0), h(2048.0)], 6, SUM), h(2050.0));
        assert_eq!(
            reduce_all(&[h(60000.0), h(60000.0)], 6, SUM),
            h(f64::INFINITY)
        );
        assert_eq!(reduce_all(&[h(300.0), h(300.0)], 6, PROD), h(90000.0)); // overflows to inf
        assert_eq!(reduce_all(&[h(1.0), h(2.0), h(2.0)], 6, AVG), h(5.0 / 3.0));
        assert_eq!(reduce_all(&[h(-1.0), h(0.5)], 6, MAX), h(0.5));
        assert_eq!(reduce_all(&[h(-1.0), h(0.5)], 6, MIN), h(-1.0));
    }

    #[test]
    fn bfloat16_rounds_like_bfloat16() {
        let bf = |v: f64| bf16::from_f64(v).to_le_bytes().to_vec();
        assert_eq!(reduce_all(&[bf(256.0), bf(1.0)], 9, SUM), bf(256.0));
        assert_eq!(reduce_all(&[bf(256.0), bf(3.0)], 9, SUM), bf(260.0));
        assert_eq!(reduce_all(&[bf(3.0), bf(4.0), bf(5.0)], 9, AVG), bf(4.0));
        assert_eq!(reduce_all(&[bf(1.0), bf(1.0), bf(1.0)], 9, AVG), bf(1.0));
        assert_eq!(reduce_all(&[bf(1.5), bf(-2.0)], 9, PROD), bf(-3.0));
        assert_eq!(reduce_all(&[bf(1.5), bf(-2.0)], 9, MAX), bf(1.5));
        assert_eq!(reduce_all(&[bf(1.5), bf(-2.0)], 9, MIN), bf(-2.0));
        // 1/3 in bfloat16 is 0x3EAB.
        assert_eq!(
            reduce_all(&[bf(1.0), bf(0.0), bf(0.0)], 9, AVG),
            0x3eabu16.to_le_bytes().to_vec()
        );
    }

    #[test]
    fn fp8_rounds_each_step_to_its_type() {
        let e4 = |v: f64| vec![F8E4M3::from_f64(v).to_bits()];
        let e5 = |v: f64| vec![F8E5M2::from_f64(v).to_bits()];
        assert_eq!(reduce_all(&[e4(3.0), e4(3.0), e4(3.0)], 10, SUM), e4(9.0));
        // 9 lies halfway between 8 and 10 in e5m2 and rounds to the even 8.
        assert_eq!(reduce_all(&[e5(3.0), e5(3.0), e5(3.0)], 11, SUM), e5(8.0));
        assert_eq!(reduce_all(&[e5(2.0), e5(1.0)], 11, PROD), e5(2.0));
        assert_eq!(reduce_all(&[e4(2.0), e4(5.0)], 10, MAX), e4(5.0));
        assert_eq!(reduce_all(&[e4(2.0), e4(5.0)], 10, MIN), e4(2.0));
    }

    #[test]
    fn sizes_and_validation() {
        assert_eq!(
            (0..12).map(|d| elem_size(d).unwrap()).collect::<Vec<_>>(),
            [1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1]
        );
        assert_eq!(elem_size(12), None);
        assert!(valid_op(AVG) && !valid_op(5));
    }

    #[test]
    fn one_rank_is_the_identity() {
        let h = |v: f64| f16::from_f64(v).to_le_bytes().to_vec();
        for op in 0..=AVG {
            assert_eq!(reduce_all(&[h(1.25)], 6, op), h(1.25), "op {op}");
        }
    }
}
