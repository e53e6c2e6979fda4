//! Data faults (`verify@R:nothing|partial|flip|nan|peer[=BYTES]`): what a collective leaves in
//! the receive buffer of the rank they strike, for the harness's check to tell apart. The bytes
//! are moved as usual first (peers must not hang); the fault then rewrites this rank's receive
//! buffers, restoring what they held before for `nothing` and the unwritten half of `partial`.
//! No NCCL source: these act out failures of the device (a kernel that did not run, a transfer
//! cut short, a flipped bit, a mis-routed buffer), which NCCL has no code for.

use crate::colls::Coll;
use crate::ops::{self, Op, Ptr};
use crate::reduce;
use nccl_smoke_fault::DataFault;

/// A receive buffer as it was before the operation ran.
pub struct Saved {
    regions: Vec<(Ptr, Vec<u8>)>,
}

/// The receive regions `fault` applies to: those of `bytes` length when a size is given.
fn regions(ops: &[Op], nranks: usize, bytes: Option<u64>) -> Vec<(Ptr, usize, u32)> {
    ops.iter()
        .filter_map(|op| op.recv_region(nranks).map(|(p, len)| (p, len, op.dtype())))
        .filter(|(_, len, _)| *len > 0 && bytes.is_none_or(|b| b == *len as u64))
        .collect()
}

/// Whether a fault limited to `bytes` applies to any receive region of `ops`.
pub fn matches(ops: &[Op], nranks: usize, bytes: Option<u64>) -> bool {
    !regions(ops, nranks, bytes).is_empty()
}

/// Keeps what the fault must put back after the operation.
pub fn before(fault: DataFault, bytes: Option<u64>, ops: &[Op], nranks: usize) -> Saved {
    let keep = matches!(fault, DataFault::Nothing | DataFault::Partial);
    let regions = if keep {
        regions(ops, nranks, bytes)
            .into_iter()
            // SAFETY: a receive buffer of this batch, valid for its length (NCCL's contract).
            .map(|(p, len, _)| (p, unsafe { ops::copy_out(p, len) }))
            .collect()
    } else {
        Vec::new()
    };
    Saved { regions }
}

/// Rewrites this rank's receive buffers after the operation moved its bytes.
pub fn after(fault: DataFault, bytes: Option<u64>, ops: &[Op], nranks: usize, saved: Saved) {
    match fault {
        DataFault::Nothing | DataFault::Partial => {
            for (p, old) in saved.regions {
                let from = if fault == DataFault::Partial {
                    old.len() / 2
                } else {
                    0
                };
                // SAFETY: as in `before`; the operation is done with the buffer.
                let d = unsafe { ops::dest(p, old.len()) };
                d[from..].copy_from_slice(&old[from..]);
            }
        }
        DataFault::Flip | DataFault::Nan => {
            for (p, len, dtype) in regions(ops, nranks, bytes) {
                let sz = reduce::elem_size(dtype).unwrap_or(1);
                // SAFETY: as above.
                let d = unsafe { ops::dest(p, len) };
                if fault == DataFault::Flip {
                    let mid = (len / sz / 2) * sz;
                    d[mid..mid + sz].iter_mut().for_each(|b| *b ^= 0x5a);
                } else {
                    let nan = nan_of(dtype);
                    d.chunks_exact_mut(sz)
                        .for_each(|el| el.copy_from_slice(&nan[..sz]));
                }
            }
        }
        DataFault::Peer => peer(ops, nranks, bytes),
    }
}

/// A NaN of the type, little-endian; 0x7f bytes for integer types, which have none, and for
/// the 8-bit floats, where 0x7f is a NaN in both e4m3 and e5m2.
fn nan_of(dtype: u32) -> [u8; 8] {
    match dtype {
        6 => [0x00, 0x7e, 0, 0, 0, 0, 0, 0],
        9 => [0xc0, 0x7f, 0, 0, 0, 0, 0, 0],
        7 => {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&f32::NAN.to_le_bytes());
            b
        }
        8 => f64::NAN.to_le_bytes(),
        _ => [0x7f; 8],
    }
}

/// A receive buffer in one chunk per peer (all-to-all, all-gather, a gather's root), or `None`.
fn chunked(op: &Op) -> Option<Ptr> {
    match *op {
        Op::AllToAll { recv, .. }
        | Op::Coll {
            kind: Coll::AllGather | Coll::Gather,
            recv,
            ..
        } => Some(recv),
        _ => None,
    }
}

/// Another rank's data in the receive buffer: all-to-all's and all-gather's chunks shifted by
/// one peer (chunk p gets what peer p+1 sent); several receives of one group shifted by one; a
/// lone receive or another collective gets this rank's own send buffer (at least as long as
/// what it receives).
fn peer(ops: &[Op], nranks: usize, bytes: Option<u64>) {
    let recvs = regions(ops, nranks, bytes);
    let own_send = ops.iter().find_map(|op| match *op {
        Op::AllReduce { send, .. } | Op::Send { buf: send, .. } => Some(send),
        // Its own block of its input, where a reduce-scatter's or a scatter's block was due
        // (a scatter's non-root send buffer, which NCCL does not read, may be absent).
        Op::Coll {
            kind: Coll::ReduceScatter | Coll::Scatter,
            send,
            me,
            ..
        } if send.0 != 0 => op.recv_region(nranks).map(|(_, len)| send.at(me * len)),
        Op::Coll {
            kind: Coll::Scatter,
            ..
        } => None,
        Op::Coll { kind, send, .. } if !matches!(kind, Coll::AllGather | Coll::Gather) => {
            Some(send)
        }
        _ => None,
    });
    for op in ops {
        if let Some(recv) = chunked(op)
            && let Some((_, len)) = op.recv_region(nranks)
            && recvs.iter().any(|(p, _, _)| *p == recv)
        {
            // SAFETY: as above.
            let d = unsafe { ops::dest(recv, len) };
            d.rotate_left(len / nranks.max(1));
        }
    }
    let singles: Vec<&(Ptr, usize, u32)> = recvs
        .iter()
        .filter(|(p, _, _)| !ops.iter().any(|op| chunked(op) == Some(*p)))
        .collect();
    if singles.len() > 1 {
        // SAFETY: as above; the copies are taken before any buffer is rewritten.
        let copies: Vec<Vec<u8>> = singles
            .iter()
            .map(|(p, len, _)| unsafe { ops::copy_out(*p, *len) })
            .collect();
        for (k, (p, len, _)) in singles.iter().enumerate() {
            let src = &copies[(k + 1) % copies.len()];
            let n = (*len).min(src.len());
            // SAFETY: as above.
            unsafe { ops::dest(*p, n) }.copy_from_slice(&src[..n]);
        }
    } else if let (Some((p, len, _)), Some(send)) = (singles.first(), own_send) {
        // SAFETY: the send buffer of this batch, at least as long as the receive (all-reduce,
        // broadcast, reduce and a ring's send and receive are the same count; a reduce-scatter's
        // or a scatter's block `me` of `nranks` is inside its send buffer).
        let mine = unsafe { ops::copy_out(send, *len) };
        unsafe { ops::dest(*p, *len) }.copy_from_slice(&mine);
    }
}
