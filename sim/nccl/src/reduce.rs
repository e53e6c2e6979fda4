//! Element types and reductions, exact for every `ncclDataType_t` and `ncclRedOp_t`.

use half::{bf16, f16};

/// Bytes per element of an `ncclDataType_t`, `None` for an unknown code.
pub fn elem_size(dtype: u32) -> Option<usize> {
    match dtype {
        0 | 1 => Some(1),
        6 | 9 => Some(2),
        2 | 3 | 7 => Some(4),
        4 | 5 | 8 => Some(8),
        _ => None,
    }
}

pub fn valid_op(op: u32) -> bool {
    op <= 4
}

macro_rules! int_reduce {
    ($t:ty, $acc:expr, $x:expr, $op:expr, $n:expr, $last:expr) => {{
        let a = <$t>::from_le_bytes($acc.try_into().unwrap());
        let b = <$t>::from_le_bytes($x.try_into().unwrap());
        let mut r = match $op {
            1 => a.wrapping_mul(b),
            2 => a.max(b),
            3 => a.min(b),
            _ => a.wrapping_add(b),
        };
        if $op == 4 && $last {
            r /= $n as $t;
        }
        $acc.copy_from_slice(&r.to_le_bytes());
    }};
}

macro_rules! float_reduce {
    ($t:ty, $acc:expr, $x:expr, $op:expr, $n:expr, $last:expr, $to:expr, $from:expr) => {{
        let a: f64 = $to(<$t>::from_le_bytes($acc.try_into().unwrap()));
        let b: f64 = $to(<$t>::from_le_bytes($x.try_into().unwrap()));
        let mut r = match $op {
            1 => a * b,
            2 => a.max(b),
            3 => a.min(b),
            _ => a + b,
        };
        if $op == 4 && $last {
            r /= $n as f64;
        }
        let r: $t = $from(r);
        $acc.copy_from_slice(&r.to_le_bytes());
    }};
}

/// `acc = acc (op) x`, element-wise; `last` marks the final contribution (where `avg`
/// divides by `nranks`). Contributions are applied in rank order, so every rank computes the
/// same bits.
pub fn reduce_into(acc: &mut [u8], x: &[u8], dtype: u32, op: u32, nranks: usize, last: bool) {
    let Some(sz) = elem_size(dtype) else { return };
    for (a, b) in acc.chunks_exact_mut(sz).zip(x.chunks_exact(sz)) {
        match dtype {
            0 => int_reduce!(i8, a, b, op, nranks, last),
            1 => int_reduce!(u8, a, b, op, nranks, last),
            2 => int_reduce!(i32, a, b, op, nranks, last),
            3 => int_reduce!(u32, a, b, op, nranks, last),
            4 => int_reduce!(i64, a, b, op, nranks, last),
            5 => int_reduce!(u64, a, b, op, nranks, last),
            6 => float_reduce!(
                f16,
                a,
                b,
                op,
                nranks,
                last,
                |v: f16| v.to_f64(),
                f16::from_f64
            ),
            7 => float_reduce!(f32, a, b, op, nranks, last, |v: f32| v as f64, |v: f64| v
                as f32),
            8 => float_reduce!(f64, a, b, op, nranks, last, |v: f64| v, |v: f64| v),
            9 => float_reduce!(
                bf16,
                a,
                b,
                op,
                nranks,
                last,
                |v: bf16| v.to_f64(),
                bf16::from_f64
            ),
            _ => {}
        }
    }
}

/// Reduces all ranks' buffers (rank order) into the first.
pub fn reduce_all(bufs: &mut [Vec<u8>], dtype: u32, op: u32) -> Vec<u8> {
    let n = bufs.len();
    let mut acc = std::mem::take(&mut bufs[0]);
    if n == 1 && op == 4 {
        // avg over one rank is the value itself.
        return acc;
    }
    for (i, b) in bufs.iter().enumerate().skip(1) {
        reduce_into(&mut acc, b, dtype, op, n, i == n - 1);
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
        v.iter().flat_map(|x| f(*x)).collect()
    }

    #[test]
    fn integer_reductions_wrap_and_divide() {
        let mut bufs = vec![vec![100u8, 3], vec![200u8, 5]];
        assert_eq!(reduce_all(&mut bufs.clone(), 1, 0), vec![44, 8]); // wraps
        assert_eq!(reduce_all(&mut bufs.clone(), 1, 2), vec![200, 5]);
        assert_eq!(reduce_all(&mut bufs.clone(), 1, 3), vec![100, 3]);
        assert_eq!(reduce_all(&mut bufs, 1, 4), vec![22, 4]); // (44 wrapped)/2, 8/2
        let mut b = vec![
            enc(&[-3i32, 7], |x| x.to_le_bytes().to_vec()),
            enc(&[5i32, -2], |x| x.to_le_bytes().to_vec()),
        ];
        assert_eq!(
            reduce_all(&mut b, 2, 1),
            enc(&[-15i32, -14], |x| x.to_le_bytes().to_vec())
        );
    }

    #[test]
    fn half_and_bfloat16_round_like_their_types() {
        // 2048 + 1 is not representable in half: rounds to even (2048).
        let h = |v: f64| f16::from_f64(v).to_le_bytes().to_vec();
        let mut b = vec![h(2048.0), h(1.0)];
        assert_eq!(reduce_all(&mut b, 6, 0), h(2048.0));
        let bf = |v: f64| bf16::from_f64(v).to_le_bytes().to_vec();
        let mut b = vec![bf(256.0), bf(1.0)];
        assert_eq!(reduce_all(&mut b, 9, 0), bf(256.0));
        let mut b = vec![bf(3.0), bf(4.0), bf(5.0)];
        assert_eq!(reduce_all(&mut b, 9, 4), bf(4.0));
    }

    #[test]
    fn float_and_double() {
        let f = |v: f32| v.to_le_bytes().to_vec();
        let mut b = vec![f(1.5), f(2.0), f(-4.0)];
        assert_eq!(reduce_all(&mut b.clone(), 7, 0), f(-0.5));
        assert_eq!(reduce_all(&mut b.clone(), 7, 1), f(-12.0));
        assert_eq!(reduce_all(&mut b.clone(), 7, 2), f(2.0));
        assert_eq!(reduce_all(&mut b, 7, 3), f(-4.0));
        let d = |v: f64| v.to_le_bytes().to_vec();
        let mut b = vec![d(1.0), d(2.0)];
        assert_eq!(reduce_all(&mut b, 8, 4), d(1.5));
    }

    #[test]
    fn sizes_and_validation() {
        assert_eq!(
            (0..10).map(|d| elem_size(d).unwrap()).collect::<Vec<_>>(),
            [1, 1, 4, 4, 8, 8, 2, 4, 8, 2]
        );
        assert_eq!(elem_size(10), None);
        assert!(valid_op(4) && !valid_op(5));
    }
}
