//! Collective and point-to-point operations as the caller issued them, and the buffers they
//! name; how one batch of them moves its bytes is `crate::moves`.

use crate::colls::Coll;
use crate::reduce;
use crate::texts::{self, Report};

/// A buffer address (device memory is host memory in the simulation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ptr(pub usize);

impl Ptr {
    pub fn at(self, offset: usize) -> Ptr {
        Ptr(self.0 + offset)
    }
}

/// One operation as the caller issued it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    AllReduce {
        send: Ptr,
        recv: Ptr,
        count: usize,
        dtype: u32,
        op: u32,
    },
    /// `count` elements to and from each rank.
    AllToAll {
        send: Ptr,
        recv: Ptr,
        count: usize,
        dtype: u32,
    },
    Send {
        buf: Ptr,
        count: usize,
        dtype: u32,
        peer: usize,
    },
    Recv {
        buf: Ptr,
        count: usize,
        dtype: u32,
        peer: usize,
    },
    /// All-gather, reduce-scatter, broadcast or reduce (see [`Coll`]), as issued on rank `me`.
    Coll {
        kind: Coll,
        send: Ptr,
        recv: Ptr,
        count: usize,
        dtype: u32,
        op: u32,
        root: usize,
        me: usize,
    },
}

impl Op {
    /// NCCL's name for the operation, as its log lines and WARNs give it.
    pub fn name(&self) -> &'static str {
        match self {
            Op::AllReduce { .. } => "AllReduce",
            Op::AllToAll { .. } => "AlltoAll",
            Op::Send { .. } => "Send",
            Op::Recv { .. } => "Recv",
            Op::Coll { kind, .. } => kind.name(),
        }
    }

    pub fn is_p2p(&self) -> bool {
        matches!(self, Op::Send { .. } | Op::Recv { .. })
    }

    pub fn count(&self) -> usize {
        match *self {
            Op::AllReduce { count, .. }
            | Op::AllToAll { count, .. }
            | Op::Send { count, .. }
            | Op::Recv { count, .. }
            | Op::Coll { count, .. } => count,
        }
    }

    pub fn dtype(&self) -> u32 {
        match *self {
            Op::AllReduce { dtype, .. }
            | Op::AllToAll { dtype, .. }
            | Op::Send { dtype, .. }
            | Op::Recv { dtype, .. }
            | Op::Coll { dtype, .. } => dtype,
        }
    }

    /// The receive buffer this operation writes on this rank and its length in bytes (the
    /// whole buffer, every peer's chunk, for all-to-all); `None` for a send.
    pub fn recv_region(&self, nranks: usize) -> Option<(Ptr, usize)> {
        match *self {
            Op::AllReduce { recv, .. } | Op::Recv { buf: recv, .. } => Some((recv, self.bytes())),
            Op::AllToAll { recv, .. } => Some((recv, self.bytes() * nranks)),
            Op::Coll {
                kind,
                recv,
                root,
                me,
                ..
            } => Some((recv, kind.recv_len(self.bytes(), me, root, nranks)))
                .filter(|(_, len)| *len > 0),
            Op::Send { .. } => None,
        }
    }

    /// Bytes per message of this operation (per peer for all-to-all).
    pub fn bytes(&self) -> usize {
        self.count() * reduce::elem_size(self.dtype()).unwrap_or(1)
    }
}

/// Copies `len` bytes at `p`.
///
/// # Safety
/// `p` is valid for `len` bytes (a device buffer of the simulated driver, per the NCCL call).
pub(crate) unsafe fn copy_out(p: Ptr, len: usize) -> Vec<u8> {
    if len == 0 {
        return Vec::new();
    }
    // SAFETY: per the function contract.
    unsafe { std::slice::from_raw_parts(p.0 as *const u8, len) }.to_vec()
}

/// The `len` bytes at `p`, to write.
///
/// # Safety
/// `p` is valid for `len` bytes and nothing else touches them meanwhile (the NCCL contract
/// for a receive buffer while the operation runs).
pub(crate) unsafe fn dest<'a>(p: Ptr, len: usize) -> &'a mut [u8] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: per the function contract.
    unsafe { std::slice::from_raw_parts_mut(p.0 as *mut u8, len) }
}

/// Inverts every bit of the middle element: wrong data a receiver can see and attribute.
pub fn flip_middle(data: &mut [u8], dtype: u32) {
    let sz = reduce::elem_size(dtype).unwrap_or(1);
    let n = data.len() / sz;
    if n == 0 {
        return;
    }
    let at = (n / 2) * sz;
    // XOR 0x5a, not a bitwise NOT: NOT turns a zero element into 0xff bytes, the harness's
    // fill for "never written", and a flipped element must read as a wrong value.
    for b in &mut data[at..at + sz] {
        *b ^= 0x5a;
    }
}

/// Checks that sends to self and receives from self pair up, as NCCL checks at group end.
pub fn check_self(rank: usize, ops: &[Op]) -> Result<(), Report> {
    let sends = ops
        .iter()
        .filter(|o| matches!(o, Op::Send { peer, .. } if *peer == rank))
        .count();
    let recvs = ops
        .iter()
        .filter(|o| matches!(o, Op::Recv { peer, .. } if *peer == rank))
        .count();
    match sends.cmp(&recvs) {
        std::cmp::Ordering::Greater => Err(texts::self_unmatched(true)),
        std::cmp::Ordering::Less => Err(texts::self_unmatched(false)),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flipping_the_middle_element() {
        let mut d: Vec<u8> = [1u32, 2, 3, 4]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        flip_middle(&mut d, 3);
        let v: Vec<u32> = d
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(v, [1, 2, 3 ^ 0x5a5a_5a5a, 4]);
        let mut empty: Vec<u8> = Vec::new();
        flip_middle(&mut empty, 7);
        let mut one = vec![5u8];
        flip_middle(&mut one, 1);
        assert_eq!(one, [5u8 ^ 0x5a]);
    }

    #[test]
    fn self_sends_must_pair_up() {
        let p = Ptr(0);
        let send = Op::Send {
            buf: p,
            count: 1,
            dtype: 0,
            peer: 2,
        };
        let recv = Op::Recv {
            buf: p,
            count: 1,
            dtype: 0,
            peer: 2,
        };
        assert!(check_self(2, &[send, recv]).is_ok());
        assert_eq!(
            check_self(2, &[send]).unwrap_err().code,
            crate::INVALID_USAGE
        );
        assert!(check_self(1, &[send]).is_ok());
        assert_eq!(send.name(), "Send");
        assert!(send.is_p2p());
    }
}
