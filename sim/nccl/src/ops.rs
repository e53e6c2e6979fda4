//! Collective and point-to-point operations, and how one batch of them (a single call, or a
//! group's operations on one communicator) moves its bytes when the stream reaches it.
//!
//! Everything this rank sends is copied out of the user's buffers first (so in-place
//! operations work), then one thread per peer sends while this thread receives, in issue
//! order, so ranks never wait on each other's full socket buffers. All-reduce folds the
//! contributions in rank order, the same on every rank (streaming: one peer's message at a
//! time, so memory does not grow with the rank count).

use crate::comm::Comm;
use crate::reduce;
use crate::texts::{self, Report};
use crate::transport::{COLL, P2P, Peer, RecvError};
use std::collections::VecDeque;
use std::sync::Arc;

/// A buffer address (device memory is host memory in the simulation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ptr(pub usize);

impl Ptr {
    fn at(self, offset: usize) -> Ptr {
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
}

impl Op {
    /// NCCL's name for the operation, as its log lines and WARNs give it.
    pub fn name(&self) -> &'static str {
        match self {
            Op::AllReduce { .. } => "AllReduce",
            Op::AllToAll { .. } => "AlltoAll",
            Op::Send { .. } => "Send",
            Op::Recv { .. } => "Recv",
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
            | Op::Recv { count, .. } => count,
        }
    }

    pub fn dtype(&self) -> u32 {
        match *self {
            Op::AllReduce { dtype, .. }
            | Op::AllToAll { dtype, .. }
            | Op::Send { dtype, .. }
            | Op::Recv { dtype, .. } => dtype,
        }
    }

    /// The receive buffer this operation writes on this rank and its length in bytes (the
    /// whole buffer, every peer's chunk, for all-to-all); `None` for a send.
    pub fn recv_region(&self, nranks: usize) -> Option<(Ptr, usize)> {
        match *self {
            Op::AllReduce { recv, .. } | Op::Recv { buf: recv, .. } => Some((recv, self.bytes())),
            Op::AllToAll { recv, .. } => Some((recv, self.bytes() * nranks)),
            Op::Send { .. } => None,
        }
    }

    /// Bytes per message of this operation (per peer for all-to-all).
    fn bytes(&self) -> usize {
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

/// A message on its way out.
type Msg = (u32, Arc<[u8]>);

/// What this rank contributes, gathered before anything arrives.
struct Outgoing {
    /// Messages by peer, in issue order.
    to: Vec<Vec<Msg>>,
    /// This rank's own all-reduce contribution (uncorrupted), by operation index.
    own: Vec<Option<Arc<[u8]>>>,
    /// All-to-all chunks for this rank itself, by operation index.
    own_chunk: Vec<Option<Arc<[u8]>>>,
    /// Sends to this rank itself, in issue order.
    to_self: VecDeque<Arc<[u8]>>,
}

fn gather(rank: usize, nranks: usize, ops: &[Op], corrupt: bool) -> Outgoing {
    let mut out = Outgoing {
        to: (0..nranks).map(|_| Vec::new()).collect(),
        own: vec![None; ops.len()],
        own_chunk: vec![None; ops.len()],
        to_self: VecDeque::new(),
    };
    let spoil = |mut d: Vec<u8>, dtype: u32| -> Arc<[u8]> {
        if corrupt {
            flip_middle(&mut d, dtype);
        }
        d.into()
    };
    for (i, op) in ops.iter().enumerate() {
        let len = op.bytes();
        match *op {
            // Alone, a rank's result is its own data, moved in place at execution: no copy,
            // so the simulation's memory does not grow with the message for one rank.
            Op::AllReduce { .. } if nranks == 1 => {}
            Op::AllReduce { send, dtype, .. } => {
                // SAFETY: the caller's send buffer of `count` elements.
                let mine: Arc<[u8]> = unsafe { copy_out(send, len) }.into();
                let sent = if corrupt {
                    spoil(mine.to_vec(), dtype)
                } else {
                    mine.clone()
                };
                for (j, q) in out.to.iter_mut().enumerate() {
                    if j != rank {
                        q.push((COLL, sent.clone()));
                    }
                }
                out.own[i] = Some(mine);
            }
            Op::AllToAll { send, dtype, .. } => {
                for (j, q) in out.to.iter_mut().enumerate() {
                    // SAFETY: chunk `j` of the caller's send buffer of nranks * count elements.
                    let chunk = spoil(unsafe { copy_out(send.at(j * len), len) }, dtype);
                    if j == rank {
                        out.own_chunk[i] = Some(chunk);
                    } else {
                        q.push((COLL, chunk));
                    }
                }
            }
            Op::Send {
                buf, dtype, peer, ..
            } => {
                // SAFETY: the caller's send buffer of `count` elements.
                let data = spoil(unsafe { copy_out(buf, len) }, dtype);
                if peer == rank {
                    out.to_self.push_back(data);
                } else if let Some(q) = out.to.get_mut(peer) {
                    q.push((P2P, data));
                }
            }
            Op::Recv { .. } => {}
        }
    }
    out
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

fn io_report(comm: &Comm, peer: &Peer, send: bool, e: std::io::Error) -> Report {
    let v = comm.id.version;
    if comm.aborted() {
        return Report {
            code: crate::INTERNAL_ERROR,
            lines: Vec::new(),
        };
    }
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof
        | std::io::ErrorKind::ConnectionReset
        | std::io::ErrorKind::BrokenPipe
        | std::io::ErrorKind::ConnectionAborted
        | std::io::ErrorKind::NotConnected => {
            texts::closed_by_peer(v, &peer.host, peer.addr.port())
        }
        _ => texts::transfer_failed(v, send, peer.addr, &crate::bootstrap::strerror(&e)),
    }
}

fn peer_of(comm: &Comm, j: usize) -> Result<&Peer, Report> {
    comm.peer(j).ok_or_else(|| Report {
        code: crate::INTERNAL_ERROR,
        lines: vec![texts::Line::Warn {
            site: "transport.cc:60".into(),
            msg: format!("no connection to rank {j}"),
        }],
    })
}

/// Receives the next `chan` message from `j` into `out`; `exact` refuses a short one.
fn recv(comm: &Comm, j: usize, chan: u32, out: &mut [u8], exact: bool) -> Result<usize, Report> {
    let p = peer_of(comm, j)?;
    match p.recv(chan, out) {
        Ok(n) if exact && n != out.len() => Err(texts::truncated(
            comm.id.version,
            p.addr,
            n as u64,
            out.len(),
        )),
        Ok(n) => Ok(n),
        Err(RecvError::Truncated { got, want }) => {
            Err(texts::truncated(comm.id.version, p.addr, got, want))
        }
        Err(RecvError::Io(e)) => Err(io_report(comm, p, false, e)),
    }
}

/// Moves one batch's bytes. `corrupt` spoils what this rank sends (a `verify` fault).
pub fn execute(comm: &Comm, ops: &[Op], corrupt: bool) -> Result<usize, Report> {
    let (rank, nranks) = (comm.id.rank, comm.id.nranks);
    let mut out = gather(rank, nranks, ops, corrupt);
    let to = std::mem::take(&mut out.to);
    let bytes: usize = to.iter().flatten().map(|(_, m)| m.len()).sum();
    std::thread::scope(|scope| {
        let senders: Vec<_> = to
            .into_iter()
            .enumerate()
            .filter(|(_, msgs)| !msgs.is_empty())
            .map(|(j, msgs)| {
                scope.spawn(move || -> Result<(), Report> {
                    let p = peer_of(comm, j)?;
                    for (chan, m) in msgs {
                        p.send(chan, &m).map_err(|e| io_report(comm, p, true, e))?;
                    }
                    Ok(())
                })
            })
            .collect();
        let received = receive(comm, ops, &mut out);
        if received.is_err() {
            // Senders blocked on peers that will never read must let go.
            comm.break_links();
        }
        let mut result = received;
        for s in senders {
            let sent = s.join().unwrap_or_else(|_| {
                Err(Report {
                    code: crate::INTERNAL_ERROR,
                    lines: Vec::new(),
                })
            });
            if result.is_ok() {
                result = sent;
            }
        }
        result.map(|()| bytes)
    })
}

/// The receiving half of [`execute`], operation by operation in issue order.
fn receive(comm: &Comm, ops: &[Op], out: &mut Outgoing) -> Result<(), Report> {
    let (rank, nranks) = (comm.id.rank, comm.id.nranks);
    let mut scratch = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let len = op.bytes();
        match *op {
            Op::AllReduce {
                send,
                recv: r,
                dtype,
                op,
                ..
            } => {
                // SAFETY: the caller's receive buffer (it may be the send buffer: with peers,
                // that was copied before anything was written; alone, see below).
                let d = unsafe { dest(r, len) };
                if nranks == 1 {
                    // SAFETY: the caller's send buffer of `len` bytes; it may be `d` itself
                    // (in place), so the copy is a memmove.
                    unsafe { std::ptr::copy(send.0 as *const u8, d.as_mut_ptr(), len) };
                }
                for j in (0..nranks).filter(|_| nranks > 1) {
                    let part: &[u8] = if j == rank {
                        out.own[i].as_deref().unwrap_or(&[])
                    } else {
                        scratch.resize(len, 0);
                        recv(comm, j, COLL, &mut scratch, true)?;
                        &scratch
                    };
                    if j == 0 {
                        d.copy_from_slice(part);
                    } else {
                        reduce::fold_into(d, part, dtype, op);
                    }
                }
                reduce::finish(d, dtype, op, nranks);
            }
            Op::AllToAll { recv: r, .. } => {
                for j in 0..nranks {
                    // SAFETY: chunk `j` of the caller's receive buffer.
                    let d = unsafe { dest(r.at(j * len), len) };
                    if j == rank {
                        d.copy_from_slice(out.own_chunk[i].as_deref().unwrap_or(&[]));
                    } else {
                        recv(comm, j, COLL, d, true)?;
                    }
                }
            }
            Op::Recv { buf, peer, .. } => {
                // SAFETY: the caller's receive buffer of `count` elements.
                let d = unsafe { dest(buf, len) };
                if peer == rank {
                    let m = out
                        .to_self
                        .pop_front()
                        .ok_or_else(|| texts::self_unmatched(false))?;
                    if m.len() > d.len() {
                        return Err(texts::truncated(
                            comm.id.version,
                            std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 0),
                            m.len() as u64,
                            d.len(),
                        ));
                    }
                    d[..m.len()].copy_from_slice(&m);
                } else {
                    recv(comm, peer, P2P, d, false)?;
                }
            }
            Op::Send { .. } => {}
        }
    }
    Ok(())
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
    fn gathering_copies_and_spoils_what_is_sent() {
        let send: Vec<u8> = (0u8..12).collect();
        let p = Ptr(send.as_ptr() as usize);
        let ops = [
            Op::AllReduce {
                send: p,
                recv: p,
                count: 3,
                dtype: 1,
                op: 0,
            },
            Op::AllToAll {
                send: p,
                recv: p,
                count: 4,
                dtype: 1,
            },
            Op::Send {
                buf: p,
                count: 2,
                dtype: 1,
                peer: 1,
            },
            Op::Send {
                buf: p,
                count: 1,
                dtype: 1,
                peer: 0,
            },
        ];
        let out = gather(0, 3, &ops, true);
        assert_eq!(out.own[0].as_deref(), Some(&[0u8, 1, 2][..]));
        let to1: Vec<(u32, Vec<u8>)> = out.to[1].iter().map(|(c, m)| (*c, m.to_vec())).collect();
        assert_eq!(
            to1,
            vec![
                (COLL, vec![0, 1 ^ 0x5a, 2]),
                (COLL, vec![4, 5, 6 ^ 0x5a, 7]),
                (P2P, vec![0, 1 ^ 0x5a]),
            ]
        );
        assert!(out.to[0].is_empty());
        assert_eq!(out.to[2].len(), 2);
        assert_eq!(
            out.own_chunk[1].as_deref(),
            Some(&[0u8, 1, 2 ^ 0x5a, 3][..])
        );
        assert_eq!(out.to_self.len(), 1);
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
