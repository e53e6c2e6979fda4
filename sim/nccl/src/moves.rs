//! How one batch of operations (a single call, or a group's operations on one communicator)
//! moves its bytes when the stream reaches it.
//!
//! Everything this rank sends is copied out of the user's buffers first (so in-place
//! operations work), then one thread per peer sends while this thread receives, in issue
//! order, so ranks never wait on each other's full socket buffers. Reductions fold the
//! contributions in rank order, the same on every rank (streaming: one peer's message at a
//! time, so memory does not grow with the rank count).

use crate::colls::Lands;
use crate::comm::Comm;
use crate::ops::{Op, Ptr, copy_out, dest, flip_middle};
use crate::reduce;
use crate::texts::{self, Report};
use crate::transport::{COLL, P2P, Peer, RecvError};
use std::collections::VecDeque;
use std::sync::Arc;

/// A message on its way out.
type Msg = (u32, Arc<[u8]>);

/// What this rank contributes, gathered before anything arrives.
struct Outgoing {
    /// Messages by peer, in issue order.
    to: Vec<Vec<Msg>>,
    /// This rank's own all-reduce contribution, or its share of another collective
    /// (uncorrupted), by operation index.
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
            // Alone, as the all-reduce above.
            Op::Coll { .. } if nranks == 1 => {}
            Op::Coll {
                kind,
                send,
                dtype,
                root,
                ..
            } => {
                for (j, at) in kind.sends(rank, root, nranks, len) {
                    // SAFETY: `len` bytes inside the caller's send buffer (`count` elements, `nranks ×
                    // count` for a reduce-scatter; `Coll::sends` stays inside it).
                    let share = unsafe { copy_out(send.at(at), len) };
                    if j == rank {
                        out.own[i] = Some(share.into());
                    } else if let Some(q) = out.to.get_mut(j) {
                        q.push((COLL, spoil(share, dtype)));
                    }
                }
            }
        }
    }
    out
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

/// One rank alone: its result is its own data, moved in place (a memmove: `d` may be the
/// send buffer itself).
fn alone(send: Ptr, d: &mut [u8]) {
    // SAFETY: the caller's send buffer holds at least `d.len()` bytes (one rank's result is
    // its own input).
    unsafe { std::ptr::copy(send.0 as *const u8, d.as_mut_ptr(), d.len()) };
}

/// The receive buffer of a collective.
fn recv_of(op: &Op) -> Ptr {
    match *op {
        Op::AllReduce { recv, .. } | Op::AllToAll { recv, .. } | Op::Coll { recv, .. } => recv,
        Op::Send { buf, .. } | Op::Recv { buf, .. } => buf,
    }
}

/// Every rank's share, folded into `d` in rank order (the same order on every rank): this
/// rank's from `own`, the others' as they arrive.
fn fold(
    comm: &Comm,
    d: &mut [u8],
    own: Option<&[u8]>,
    (dtype, op): (u32, u32),
    scratch: &mut Vec<u8>,
) -> Result<(), Report> {
    let (rank, nranks) = (comm.id.rank, comm.id.nranks);
    for j in 0..nranks {
        let part: &[u8] = if j == rank {
            own.unwrap_or(&[])
        } else {
            scratch.resize(d.len(), 0);
            recv(comm, j, COLL, scratch, true)?;
            scratch
        };
        if j == 0 {
            d.copy_from_slice(part);
        } else {
            reduce::fold_into(d, part, dtype, op);
        }
    }
    Ok(())
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
                    alone(send, d);
                }
                if nranks > 1 {
                    fold(comm, d, out.own[i].as_deref(), (dtype, op), &mut scratch)?;
                }
                reduce::finish(d, dtype, op, nranks);
            }
            Op::Coll { send, .. } if nranks == 1 => {
                let (_, len) = op.recv_region(nranks).unwrap_or((send, 0));
                // SAFETY: the caller's receive buffer, `len` bytes for one rank.
                alone(send, unsafe { dest(recv_of(op), len) });
            }
            Op::Coll {
                kind,
                recv: r,
                dtype,
                op: redop,
                root,
                ..
            } => {
                let own = out.own[i].as_deref();
                match kind.lands(rank, root) {
                    Lands::Place => {
                        for j in 0..nranks {
                            // SAFETY: rank j's share of the caller's receive buffer.
                            let d = unsafe { dest(r.at(j * len), len) };
                            if j == rank {
                                d.copy_from_slice(own.unwrap_or(&[]));
                            } else {
                                recv(comm, j, COLL, d, true)?;
                            }
                        }
                    }
                    Lands::Fold => {
                        // SAFETY: the caller's receive buffer (copied from first if in place).
                        let d = unsafe { dest(r, len) };
                        fold(comm, d, own, (dtype, redop), &mut scratch)?;
                        reduce::finish(d, dtype, redop, nranks);
                    }
                    Lands::Copy => {
                        // SAFETY: as above.
                        let d = unsafe { dest(r, len) };
                        if root == rank {
                            d.copy_from_slice(own.unwrap_or(&[]));
                        } else {
                            recv(comm, root, COLL, d, true)?;
                        }
                    }
                    Lands::Nothing => {}
                }
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
}
