//! `ncclCommSplit`: a collective over the parent that makes one child communicator per color.
//!
//! As NCCL (`ncclCommInitChildComm` and `commGetSplitInfo`, `src/init.cc` v2.28.3-1; the same
//! in `ncclCommSplit` of v2.19.3-1): the parent must be ready; every parent rank, whatever its
//! color, takes part in an allgather of (color, key); `NCCL_SPLIT_NOCOLOR` leaves `*newcomm`
//! NULL; the child's ranks are ordered by key, then by parent rank; a NULL config inherits the
//! parent's, `NCCL_COMM_BLOCKING` included; the work is an async job of the parent's, so on a
//! non-blocking parent the call returns `ncclInProgress`, the *parent's* state says when the job
//! is done, and `*newcomm` is written at the end of the job.
//!
//! Departure: NCCL's `bootstrapSplit` (`src/bootstrap.cc` v2.28.3-1) wires the child's bootstrap
//! through the parent's bootstrap ring, without a root. Here the child's first rank makes a fresh
//! unique id (a root of its own) and hands it to the other members over the parent's
//! connections; then the child comes up as `ncclCommInitRank` does, `init` faults included.

use crate::call::{fail, lookup};
use crate::comm::{self, Comm, Identity};
use crate::init::{self, Origin};
use crate::texts::{self, Report};
use crate::transport::{BOOT, RecvError};
use crate::{INPROGRESS, INTERNAL_ERROR, SUCCESS, bootstrap, cuda, ids};
use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The name INIT lines give the call.
const API: &str = "ncclCommSplit";

/// `NCCL_SPLIT_NOCOLOR` (nccl.h).
pub const NOCOLOR: c_int = -1;

/// Where this rank lands: the parent ranks of its color in child-rank order, and its own
/// child rank. `None` for `NCCL_SPLIT_NOCOLOR`.
pub fn members(info: &[(i32, i32)], me: usize) -> Option<(Vec<usize>, usize)> {
    let color = info[me].0;
    if color == NOCOLOR {
        return None;
    }
    let mut ranks: Vec<usize> = (0..info.len()).filter(|&i| info[i].0 == color).collect();
    // Stable: equal keys keep parent-rank order, as commGetSplitInfo's insertion does.
    ranks.sort_by_key(|&i| info[i].1);
    let pos = ranks.iter().position(|&i| i == me)?;
    Some((ranks, pos))
}

/// A failed receive from parent rank `j` during the split.
fn recv_failed(parent: &Comm, j: usize, e: RecvError) -> Report {
    let v = parent.id.version;
    if parent.aborted() {
        return Report {
            code: INTERNAL_ERROR,
            lines: Vec::new(),
        };
    }
    let Some(p) = parent.peer(j) else {
        return Report::new(INTERNAL_ERROR);
    };
    match e {
        RecvError::Io(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
            ) =>
        {
            texts::closed_by_peer(v, &p.host, p.addr.port())
        }
        RecvError::Io(e) => texts::transfer_failed(v, false, p.addr, &bootstrap::strerror(&e)),
        RecvError::Truncated { got, want } => texts::truncated(v, p.addr, got, want),
    }
}

fn send_failed(parent: &Comm, j: usize, e: std::io::Error) -> Report {
    if parent.aborted() {
        return Report {
            code: INTERNAL_ERROR,
            lines: Vec::new(),
        };
    }
    match parent.peer(j) {
        Some(p) => {
            texts::transfer_failed(parent.id.version, true, p.addr, &bootstrap::strerror(&e))
        }
        None => Report::new(INTERNAL_ERROR),
    }
}

/// Every parent rank's (color, key), over the parent's connections.
fn allgather(parent: &Comm, color: i32, key: i32) -> Result<Vec<(i32, i32)>, Report> {
    let (me, n) = (parent.id.rank, parent.id.nranks);
    let mut mine = [0u8; 8];
    mine[..4].copy_from_slice(&color.to_le_bytes());
    mine[4..].copy_from_slice(&key.to_le_bytes());
    for j in (0..n).filter(|&j| j != me) {
        let p = parent.peer(j).ok_or_else(|| Report::new(INTERNAL_ERROR))?;
        p.send(BOOT, &mine).map_err(|e| send_failed(parent, j, e))?;
    }
    let mut info = vec![(color, key); n];
    for (j, slot) in info.iter_mut().enumerate().filter(|(j, _)| *j != me) {
        let p = parent.peer(j).ok_or_else(|| Report::new(INTERNAL_ERROR))?;
        let mut b = [0u8; 8];
        let got = p
            .recv(BOOT, &mut b)
            .map_err(|e| recv_failed(parent, j, e))?;
        if got != 8 {
            return Err(Report::new(INTERNAL_ERROR));
        }
        *slot = (
            i32::from_le_bytes(b[..4].try_into().unwrap_or_default()),
            i32::from_le_bytes(b[4..].try_into().unwrap_or_default()),
        );
    }
    Ok(info)
}

/// ncclCommSplit.
///
/// # Safety
/// `newcomm` is NULL or writable until the call returns, or, when it returns `ncclInProgress`,
/// until the parent's state leaves `ncclInProgress` (or the parent is aborted); `config` is NULL
/// or an ncclConfig_t.
pub unsafe fn split(
    parent_h: *mut c_void,
    color: c_int,
    key: c_int,
    newcomm: *mut *mut c_void,
    config: *const u8,
) -> u32 {
    let parent = match lookup(parent_h, "CommSplit") {
        Ok(c) => c,
        Err(r) => return fail(r),
    };
    if newcomm.is_null() {
        return fail(texts::null_arg("CommSplit", "newcomm"));
    }
    let v = parent.id.version;
    // ncclCommEnsureReady: in progress is refused, an error state is returned as it is.
    match parent.async_error() {
        INPROGRESS => return fail(texts::not_ready(v)),
        SUCCESS => {}
        e => return e,
    }
    // SAFETY: checked non-null; the caller's ncclComm_t.
    unsafe { *newcomm = std::ptr::null_mut() };
    let blocking = if config.is_null() {
        // copyCommConfig + envConfigOverride: the parent's, NCCL_COMM_BLOCKING over it.
        parent.blocking
    } else {
        // SAFETY: per this function's contract.
        match unsafe { init::blocking_of(config) } {
            Some(b) => b,
            None => return fail(texts::bad_config(v)),
        }
    };
    let blocking =
        init::blocking_env(std::env::var("NCCL_COMM_BLOCKING").ok().as_deref()).unwrap_or(blocking);
    let dev = parent.id.dev;
    if color == NOCOLOR {
        crate::log::info(
            dev,
            crate::log::sys::INIT,
            &format!(
                "Rank {} has color with NCCL_SPLIT_NOCOLOR, not creating a new communicator",
                parent.id.rank
            ),
        );
    }
    let count = parent.split_count.fetch_add(1, Ordering::SeqCst) + 1;
    let out = newcomm as usize;
    let p = parent.clone();
    let work = move || -> u32 {
        let (rc, child) = make_child(&p, color, key, blocking, count);
        let h = match child {
            Some(c) if rc == SUCCESS => comm::register(&c),
            Some(c) => {
                c.quiesce();
                std::ptr::null_mut()
            }
            None => std::ptr::null_mut(),
        };
        // SAFETY: the caller keeps `newcomm` writable until the job is done (this function's
        // contract); NCCL stores it the same way, atomically, at the end of the job.
        unsafe { (*(out as *const AtomicPtr<c_void>)).store(h, Ordering::Release) };
        p.link_child(None);
        p.split_job(false);
        rc
    };
    parent.split_job(true);
    if parent.blocking {
        return work();
    }
    parent.set_in_progress();
    match comm::async_job("nccl-sim-split", vec![parent.clone()], work) {
        Ok(()) => INPROGRESS,
        Err(e) => {
            parent.split_job(false);
            parent.launch_done(SUCCESS);
            fail(texts::listen_failed(&e.to_string()))
        }
    }
}

/// The split job: the allgather, then (with a color) the child's id from its first rank and
/// the child's init. Returns the result and the child made, if any.
fn make_child(
    parent: &Arc<Comm>,
    color: c_int,
    key: c_int,
    blocking: bool,
    count: u32,
) -> (u32, Option<Arc<Comm>>) {
    let v = parent.id.version;
    let dev = parent.id.dev;
    let emit = |r: Report| {
        if !parent.aborted() {
            r.emit(dev);
        }
        r.code
    };
    let info = match allgather(parent, color, key) {
        Ok(i) => i,
        Err(r) => return (emit(r), None),
    };
    let Some((ranks, my_rank)) = members(&info, parent.id.rank) else {
        return (SUCCESS, None);
    };
    let iface = match init::bootstrap_iface(v, dev) {
        Ok(i) => i,
        Err(code) => return (code, None),
    };
    // The child's id: made by its first rank, sent to the others over the parent.
    let id = if my_rank == 0 {
        let nonce = ids::random_u64();
        let root = match bootstrap::start_root(iface.addr, nonce, v) {
            Ok(r) => r,
            Err(e) => return (emit(texts::listen_failed(&bootstrap::strerror(&e))), None),
        };
        let id = ids::encode_id(root, nonce);
        for &j in &ranks[1..] {
            let Some(p) = parent.peer(j) else {
                return (INTERNAL_ERROR, None);
            };
            if let Err(e) = p.send(BOOT, &id) {
                return (emit(send_failed(parent, j, e)), None);
            }
        }
        id
    } else {
        let first = ranks[0];
        let Some(p) = parent.peer(first) else {
            return (INTERNAL_ERROR, None);
        };
        let mut id = [0u8; 128];
        if let Err(e) = p.recv(BOOT, &mut id) {
            return (emit(recv_failed(parent, first, e)), None);
        }
        id
    };
    let Some((root, nonce)) = ids::decode_id(&id) else {
        return (emit(texts::bad_unique_id()), None);
    };
    let child = Arc::new(Comm::new(
        Identity {
            rank: my_rank,
            nranks: ranks.len(),
            dev,
            bus_id: cuda::bus_id(dev),
            comm_id: nonce,
            // RAS names the child by the hash of its own (fresh) id: a departure, as its
            // bootstrap is; NCCL hashes the parent's commHash with the split's count and
            // color (`ncclCommInitRankFunc`, `src/init.cc` v2.28.3-1).
            hash: crate::ras::comm_hash(v, &id),
            ip: iface.addr,
            version: v,
            faults: parent.id.faults.clone(),
            run_fault_op: parent.id.run_fault_op,
        },
        blocking,
    ));
    parent.link_child(Some(child.clone()));
    let from = Origin::Split {
        parent: parent.addr(),
        count,
        color,
        key,
    };
    init::init_start(&child, API, &from);
    let rc = init::bring_up(&child, API, &from, root, nonce, iface.addr);
    child.init_done(rc);
    (rc, Some(child))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_key_then_parent_rank() {
        // Parent ranks 0..5: colors and keys.
        let info = [(1, 5), (0, 0), (1, 2), (NOCOLOR, 0), (1, 2), (0, 9)];
        assert_eq!(members(&info, 0), Some((vec![2, 4, 0], 2)));
        assert_eq!(members(&info, 2), Some((vec![2, 4, 0], 0)));
        assert_eq!(members(&info, 4), Some((vec![2, 4, 0], 1)));
        assert_eq!(members(&info, 1), Some((vec![1, 5], 0)));
        assert_eq!(members(&info, 3), None);
    }
}
