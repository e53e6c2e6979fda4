//! What each kernel of `kernels.ptx` does, on host memory: the simulated driver runs these when
//! a launch names the kernel, and the GPU test holds the PTX to them byte for byte.

use crate::args::{Block, CheckArgs, CheckResult, FillArgs, TABLE_LEN};
use crate::values::{self, Op};

/// Why a kernel's arguments cannot be run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadArgs {
    ElementSize(u64),
    Op(u64),
    /// The buffer given holds fewer bytes than the arguments say.
    Short {
        what: &'static str,
        need: u64,
        have: usize,
    },
}

impl std::fmt::Display for BadArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadArgs::ElementSize(s) => write!(f, "element size {s} (1, 2, 4 or 8)"),
            BadArgs::Op(o) => write!(f, "op {o} (0..=4)"),
            BadArgs::Short { what, need, have } => {
                write!(f, "{what} holds {have} bytes, {need} needed")
            }
        }
    }
}

fn elsize(s: u64) -> Result<usize, BadArgs> {
    match s {
        1 | 2 | 4 | 8 => Ok(s as usize),
        _ => Err(BadArgs::ElementSize(s)),
    }
}

fn op(code: u64) -> Result<Op, BadArgs> {
    Op::from_code(code).ok_or(BadArgs::Op(code))
}

fn need(what: &'static str, bytes: u64, have: usize) -> Result<(), BadArgs> {
    if bytes > have as u64 {
        return Err(BadArgs::Short {
            what,
            need: bytes,
            have,
        });
    }
    Ok(())
}

/// Table entry `v` (see [`FillArgs::table`]).
fn entry(table: &[u8], v: u64) -> u64 {
    let at = (v as usize % TABLE_LEN) * 8;
    u64::from_le_bytes(table[at..at + 8].try_into().expect("8 bytes"))
}

/// The bytes [`FillArgs`] says `out` and `table` must hold.
pub fn fill_needs(a: &FillArgs) -> Result<(u64, u64), BadArgs> {
    let sz = elsize(a.elsize)?;
    op(a.op)?;
    Ok((a.count.saturating_mul(sz as u64), (TABLE_LEN * 8) as u64))
}

/// `ncclsmoke_fill` on `out` (the elements at `a.out`) with `table` (the bytes at `a.table`).
pub fn fill(a: &FillArgs, out: &mut [u8], table: &[u8]) -> Result<(), BadArgs> {
    let (out_bytes, table_bytes) = fill_needs(a)?;
    need("the fill's output", out_bytes, out.len())?;
    need("the encoding table", table_bytes, table.len())?;
    let (sz, op) = (a.elsize as usize, op(a.op)?);
    let (n, sender, epoch) = (a.nranks as u32, a.sender as u32, a.epoch as u32);
    // The kernel computes each element's base; walking it up is the same and spares a
    // division per element on the host.
    let wrap = u64::from(n.max(1));
    let mut base = values::base(n, a.first, epoch);
    for (k, el) in out[..out_bytes as usize].chunks_exact_mut(sz).enumerate() {
        let i = a.first + k as u64;
        let at = if op == Op::Copy { 0 } else { base };
        let v = values::value_at(op, n, sender, i, epoch, at);
        el.copy_from_slice(&entry(table, v).to_le_bytes()[..sz]);
        base += 1;
        if base == wrap {
            base = 0;
        }
    }
    Ok(())
}

/// The bytes [`CheckArgs`] says `got`, `table` and `blocks` must hold.
pub fn check_needs(a: &CheckArgs) -> Result<(u64, u64, u64), BadArgs> {
    let sz = elsize(a.elsize)?;
    let op = op(a.op)?;
    let blocks = match op {
        Op::Copy => a.count.div_ceil(a.per_peer.max(1)) * 16,
        _ => 0,
    };
    Ok((
        a.count.saturating_mul(sz as u64),
        (TABLE_LEN * 8) as u64,
        blocks,
    ))
}

/// `ncclsmoke_check` on `got` (the elements at `a.got`), with `table` and `blocks` (the bytes
/// at `a.table` and `a.blocks`), folded into `result` as the kernel's threads fold theirs.
pub fn check(
    a: &CheckArgs,
    got: &[u8],
    table: &[u8],
    blocks: &[u8],
    result: &mut CheckResult,
) -> Result<(), BadArgs> {
    let (got_bytes, table_bytes, block_bytes) = check_needs(a)?;
    need("the receive buffer", got_bytes, got.len())?;
    need("the encoding table", table_bytes, table.len())?;
    need("the block list", block_bytes, blocks.len())?;
    let (sz, op) = (a.elsize as usize, op(a.op)?);
    let (n, epoch, per) = (a.nranks as u32, a.epoch as u32, a.per_peer.max(1));
    let block = |b: u64| {
        let at = b as usize * 16;
        let word = |o: usize| u64::from_le_bytes(blocks[at + o..at + o + 8].try_into().expect("8"));
        Block {
            sender: word(0),
            base: word(8),
        }
    };
    let (mut wrong, mut first) = (0u64, u64::MAX);
    for (k, el) in got[..got_bytes as usize].chunks_exact(sz).enumerate() {
        let i = k as u64;
        let v = match op {
            Op::Copy => {
                let b = block(i / per);
                values::value(Op::Copy, n, b.sender as u32, b.base + i % per, epoch)
            }
            _ => values::reduced(op, n, i, epoch),
        };
        let mut word = [0u8; 8];
        word[..sz].copy_from_slice(el);
        if u64::from_le_bytes(word) != entry(table, v) {
            wrong += 1;
            first = first.min(i);
        }
    }
    result.checked += a.count;
    result.wrong += wrong;
    result.first = result.first.min(first);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{blocks_bytes, table_bytes};

    fn int_table(sz: usize) -> Vec<u8> {
        table_bytes(sz, |v, out| {
            out.copy_from_slice(&(v as u64).to_le_bytes()[..out.len()])
        })
    }

    /// Two ranks' send buffers, and rank 1's receive buffer of a ring (rank 0's data) checked.
    #[test]
    fn a_filled_buffer_checks_clean_and_each_corruption_is_counted() {
        for sz in [1usize, 2, 4, 8] {
            let table = int_table(sz);
            let count = 1000u64;
            let mut sent = vec![0u8; count as usize * sz];
            let fa = FillArgs {
                count,
                elsize: sz as u64,
                nranks: 2,
                sender: 0,
                epoch: 9,
                ..Default::default()
            };
            fill(&fa, &mut sent, &table).unwrap();
            let ca = CheckArgs {
                count,
                elsize: sz as u64,
                nranks: 2,
                epoch: 9,
                per_peer: count,
                ..Default::default()
            };
            let blocks = blocks_bytes(&[Block { sender: 0, base: 0 }]);
            let mut r = CheckResult::START;
            check(&ca, &sent, &table, &blocks, &mut r).unwrap();
            assert_eq!((r.checked, r.wrong, r.first), (count, 0, u64::MAX), "{sz}");
            sent[17 * sz] ^= 0x40;
            sent[900 * sz + sz - 1] ^= 0x01;
            let mut r = CheckResult::START;
            check(&ca, &sent, &table, &blocks, &mut r).unwrap();
            assert_eq!((r.wrong, r.first), (2, 17), "{sz}");
        }
    }

    #[test]
    fn a_reduction_checks_against_the_reduced_values() {
        let table = int_table(4);
        for op in [Op::Sum, Op::Prod, Op::Max, Op::Min] {
            let count = 300u64;
            let n = 5u32;
            let mut sum = vec![0u64; count as usize];
            let mut bufs = Vec::new();
            for r in 0..n {
                let mut b = vec![0u8; count as usize * 4];
                let fa = FillArgs {
                    count,
                    elsize: 4,
                    op: op as u64,
                    nranks: n as u64,
                    sender: r as u64,
                    epoch: 2,
                    ..Default::default()
                };
                fill(&fa, &mut b, &table).unwrap();
                bufs.push(b);
            }
            for (i, s) in sum.iter_mut().enumerate() {
                let v = bufs
                    .iter()
                    .map(|b| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap()) as u64);
                *s = match op {
                    Op::Sum => v.sum(),
                    Op::Prod => v.product(),
                    Op::Max => v.max().unwrap(),
                    _ => v.min().unwrap(),
                };
            }
            let got: Vec<u8> = sum.iter().flat_map(|&v| (v as u32).to_le_bytes()).collect();
            let ca = CheckArgs {
                count,
                elsize: 4,
                op: op as u64,
                nranks: n as u64,
                epoch: 2,
                per_peer: count,
                ..Default::default()
            };
            let mut r = CheckResult::START;
            check(&ca, &got, &table, &[], &mut r).unwrap();
            assert_eq!((r.checked, r.wrong), (count, 0), "{op:?}");
        }
    }

    #[test]
    fn bad_arguments_are_refused_not_run() {
        let table = int_table(4);
        let mut out = vec![0u8; 8];
        let a = FillArgs {
            count: 4,
            elsize: 3,
            ..Default::default()
        };
        assert_eq!(fill(&a, &mut out, &table), Err(BadArgs::ElementSize(3)));
        let a = FillArgs {
            count: 4,
            elsize: 4,
            ..Default::default()
        };
        assert!(matches!(
            fill(&a, &mut out, &table),
            Err(BadArgs::Short { need: 16, .. })
        ));
        let a = CheckArgs {
            count: 2,
            elsize: 4,
            op: 9,
            ..Default::default()
        };
        let mut r = CheckResult::START;
        assert_eq!(check(&a, &out, &table, &[], &mut r), Err(BadArgs::Op(9)));
    }
}
