//! A queue pair's operations move real bytes: RDMA WRITE and READ go straight into or out of the
//! peer process's memory (`process_vm_writev` / `process_vm_readv`), a SEND or WRITE_WITH_IMM
//! also consumes a receive the peer posted and leaves a completion in the peer's mailbox
//! ([`crate::mailbox`]). Work completes when it is posted; a send completion is queued when the
//! request was signaled or failed. A peer queue pair that is gone (destroyed, in error, or its
//! process dead) gives `IBV_WC_RETRY_EXC_ERR`, as a real requester whose packets go unanswered.

use crate::cq::*;
use crate::device::context_of;
use crate::fabric::{dev_of, fabric, verb_fault};
use crate::mailbox::{Mailbox, PostedRecv, RemoteCompletion};
use crate::qp::Qp;
use crate::sys::*;
use nccl_smoke_fault::ib::{AsyncEvent, IbKind};
use std::ffi::{c_int, c_void};

/// # Safety
/// `qp` from [`crate::ibv_create_qp`], `wr` a valid list.
pub unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: as the caller promises.
    let q = unsafe { &*qp.cast::<Qp>() };
    let fail = |e: c_int, at: *mut ibv_recv_wr| {
        if !bad.is_null() {
            // SAFETY: bad is the caller's.
            unsafe { *bad = at };
        }
        e
    };
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_post_recv", unsafe { dev_of(q.qp.context) }) {
        return fail(e, wr);
    }
    if q.qp.state == ibv_qp_state::IBV_QPS_RESET {
        return fail(libc::EINVAL, wr);
    }
    let mut w = wr;
    while !w.is_null() {
        // SAFETY: a valid list.
        let r = unsafe { &*w };
        let first = if r.num_sge > 0 && !r.sg_list.is_null() {
            // SAFETY: num_sge entries.
            unsafe { *r.sg_list }
        } else {
            ibv_sge::default()
        };
        let posted = PostedRecv {
            wr_id: r.wr_id,
            addr: first.addr,
            length: first.length,
            nsge: r.num_sge.max(0) as u32,
        };
        if !q.mailbox.post_recv(posted) {
            return fail(libc::ENOMEM, w);
        }
        w = r.next;
    }
    0
}

/// The bytes of a request's gather list, as local iovecs.
fn gather(r: &ibv_send_wr) -> (Vec<libc::iovec>, usize) {
    let mut iov = Vec::new();
    let mut total = 0;
    for i in 0..r.num_sge.max(0) as usize {
        // SAFETY: num_sge entries.
        let s = unsafe { *r.sg_list.add(i) };
        iov.push(libc::iovec {
            iov_base: s.addr as *mut c_void,
            iov_len: s.length as usize,
        });
        total += s.length as usize;
    }
    (iov, total)
}

/// Moves `len` bytes between local `iov` and `remote` in process `pid`; the status it ends with.
fn transfer(pid: u32, iov: &[libc::iovec], remote: u64, len: usize, write: bool) -> u32 {
    if len == 0 {
        return WC_SUCCESS;
    }
    let r = libc::iovec {
        iov_base: remote as *mut c_void,
        iov_len: len,
    };
    // SAFETY: the iovecs describe the caller's registered memory and the peer's.
    let n = unsafe {
        if write {
            libc::process_vm_writev(pid as libc::pid_t, iov.as_ptr(), iov.len() as _, &r, 1, 0)
        } else {
            libc::process_vm_readv(pid as libc::pid_t, iov.as_ptr(), iov.len() as _, &r, 1, 0)
        }
    };
    if n == len as isize {
        return WC_SUCCESS;
    }
    match crate::mailbox::errno() {
        libc::ESRCH => WC_RETRY_EXC_ERR,
        libc::EFAULT => WC_REM_ACCESS_ERR,
        _ => WC_LOC_PROT_ERR,
    }
}

/// Waits (as a receiver-not-ready retry would) for the peer to post a receive.
fn take_recv(peer: &Mailbox) -> Result<PostedRecv, u32> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        if let Some(r) = peer.take_recv() {
            return Ok(r);
        }
        if !peer.alive() {
            return Err(WC_RETRY_EXC_ERR);
        }
        if std::time::Instant::now() > until {
            return Err(WC_RNR_RETRY_EXC_ERR);
        }
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}

/// Carries out one work request to the peer; the status it completes with.
fn execute(q: &Qp, peer: &Mailbox, r: &ibv_send_wr) -> u32 {
    use ibv_wr_opcode::*;
    if !peer.alive() {
        return WC_RETRY_EXC_ERR;
    }
    let (iov, len) = gather(r);
    // SAFETY: the rdma member is the one these opcodes use.
    let remote = unsafe { r.wr.rdma.remote_addr };
    // SAFETY: imm_data is read for the opcodes that carry it.
    let imm = unsafe { r.__bindgen_anon_1.imm_data };
    match r.opcode {
        IBV_WR_RDMA_WRITE => transfer(peer.pid(), &iov, remote, len, true),
        IBV_WR_RDMA_READ => transfer(peer.pid(), &iov, remote, len, false),
        IBV_WR_RDMA_WRITE_WITH_IMM | IBV_WR_SEND | IBV_WR_SEND_WITH_IMM => {
            let status = if r.opcode == IBV_WR_RDMA_WRITE_WITH_IMM {
                transfer(peer.pid(), &iov, remote, len, true)
            } else {
                WC_SUCCESS
            };
            if status != WC_SUCCESS {
                return status;
            }
            let recv = match take_recv(peer) {
                Ok(p) => p,
                Err(s) => return s,
            };
            let mut c = RemoteCompletion {
                wr_id: recv.wr_id,
                byte_len: len as u32,
                src_qp: q.qp.qp_num,
                ..Default::default()
            };
            if r.opcode == IBV_WR_RDMA_WRITE_WITH_IMM {
                c.opcode = ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM;
                c.flags = ibv_wc_flags::IBV_WC_WITH_IMM;
                c.imm = imm;
            } else {
                c.opcode = ibv_wc_opcode::IBV_WC_RECV;
                if r.opcode == IBV_WR_SEND_WITH_IMM {
                    c.flags = ibv_wc_flags::IBV_WC_WITH_IMM;
                    c.imm = imm;
                }
                c.status = if len > recv.length as usize {
                    1 // IBV_WC_LOC_LEN_ERR, at the receiver
                } else {
                    transfer(peer.pid(), &iov, recv.addr, len, true)
                };
            }
            if !peer.complete(c) {
                return WC_RNR_RETRY_EXC_ERR;
            }
            c.status
        }
        _ => WC_LOC_QP_OP_ERR,
    }
}

fn wc_opcode(op: u32) -> u32 {
    use ibv_wr_opcode::*;
    match op {
        IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM => ibv_wc_opcode::IBV_WC_RDMA_WRITE,
        IBV_WR_RDMA_READ => ibv_wc_opcode::IBV_WC_RDMA_READ,
        _ => ibv_wc_opcode::IBV_WC_SEND,
    }
}

/// # Safety
/// `qp` from [`crate::ibv_create_qp`], `wr` a valid list.
pub unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: as the caller promises.
    let q = unsafe { &mut *qp.cast::<Qp>() };
    let fail = |e: c_int| {
        if !bad.is_null() {
            // SAFETY: bad is the caller's.
            unsafe { *bad = wr };
        }
        e
    };
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_post_send", unsafe { dev_of(q.qp.context) }) {
        return fail(e);
    }
    use ibv_qp_state::*;
    if !matches!(q.qp.state, IBV_QPS_RTS | IBV_QPS_ERR) {
        return fail(libc::EINVAL);
    }
    let mut st = lock(&q.state);
    if st.peer.is_none() && q.qp.state == IBV_QPS_RTS {
        st.peer = Mailbox::open(st.attr.dest_qp_num).ok();
    }
    // SAFETY: the contexts and CQs are ours.
    let (ctx, send_cq) = unsafe { (context_of(q.qp.context), &*q.qp.send_cq.cast::<Cq>()) };
    let mut w = wr;
    while !w.is_null() {
        // SAFETY: a valid list.
        let r = unsafe { &*w };
        let struck = fabric().and_then(|f| f.strike("completion", Some(ctx.device)));
        let event = fabric().and_then(|f| f.strike("async", Some(ctx.device)));
        let status = if q.qp.state == IBV_QPS_ERR {
            WC_WR_FLUSH_ERR
        } else if let Some(IbKind::Status(s)) = struck {
            s
        } else {
            match &st.peer {
                None => WC_RETRY_EXC_ERR,
                Some(p) => execute(q, p, r),
            }
        };
        if status != WC_SUCCESS && status != WC_WR_FLUSH_ERR {
            // A failed request takes its queue pair to the error state.
            q.qp.state = IBV_QPS_ERR;
            st.attr.qp_state = IBV_QPS_ERR;
            q.mailbox.set_alive(false);
        }
        let signaled =
            r.send_flags & ibv_send_flags::IBV_SEND_SIGNALED != 0 || q.init.sq_sig_all != 0;
        if signaled || status != WC_SUCCESS {
            lock(&send_cq.local).push_back(ibv_wc {
                wr_id: r.wr_id,
                status,
                opcode: wc_opcode(r.opcode),
                vendor_err: vendor_err(status),
                byte_len: gather(r).1 as u32,
                qp_num: q.qp.qp_num,
                ..Default::default()
            });
        }
        if let Some(IbKind::Event(e)) = event {
            if e == AsyncEvent::QpFatal {
                q.qp.state = IBV_QPS_ERR;
                st.attr.qp_state = IBV_QPS_ERR;
                q.mailbox.set_alive(false);
            }
            ctx.raise(e, qp);
        }
        w = r.next;
    }
    0
}
