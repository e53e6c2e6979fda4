//! `ncclGroupStart`/`ncclGroupEnd`: per-thread nesting; inside a group, operations are
//! collected, and the outermost end enqueues each communicator's batch (per stream) as one
//! host function. An operation outside a group is a group of one.

use crate::comm::Comm;
use crate::faults;
use crate::ops::{self, Op};
use crate::{SUCCESS, cuda, texts};
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::Arc;

struct Pending {
    comm: Arc<Comm>,
    stream: usize,
    op: Op,
}

#[derive(Default)]
struct Group {
    depth: u32,
    ops: Vec<Pending>,
    /// The first error of a call inside the group: the group end returns it, and the
    /// group's operations are dropped.
    error: u32,
}

thread_local! {
    static GROUP: RefCell<Group> = RefCell::new(Group::default());
}

pub fn start() -> u32 {
    GROUP.with(|g| g.borrow_mut().depth += 1);
    SUCCESS
}

pub fn end() -> u32 {
    let taken = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth == 0 {
            return None;
        }
        g.depth -= 1;
        if g.depth > 0 {
            return Some(None);
        }
        let error = std::mem::take(&mut g.error);
        Some(Some((std::mem::take(&mut g.ops), error)))
    });
    match taken {
        None => {
            let r = texts::not_in_group(crate::version::code());
            r.emit(crate::cuda::current_device().unwrap_or(0));
            r.code
        }
        Some(None) => SUCCESS,
        Some(Some((_, error))) if error != SUCCESS => error,
        Some(Some((ops, _))) => launch(ops),
    }
}

/// Remembers a failed call inside a group, for the group end to return.
pub fn note_error(code: u32) {
    GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth > 0 && g.error == SUCCESS {
            g.error = code;
        }
    });
}

/// Collects `op` into the open group, or enqueues it at once.
pub fn submit(comm: Arc<Comm>, stream: *mut c_void, op: Op) -> u32 {
    let pending = Pending {
        comm,
        stream: stream as usize,
        op,
    };
    let rest = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.depth > 0 {
            g.ops.push(pending);
            None
        } else {
            Some(pending)
        }
    });
    match rest {
        None => SUCCESS,
        Some(p) => launch(vec![p]),
    }
}

/// One communicator's operations on one stream.
struct Batch {
    comm: Arc<Comm>,
    stream: usize,
    ops: Vec<Op>,
}

/// Sorts operations into batches, in first-seen order; empty operations are dropped.
fn batches(ops: Vec<Pending>) -> Vec<Batch> {
    let mut out: Vec<Batch> = Vec::new();
    for p in ops.into_iter().filter(|p| p.op.count() > 0) {
        match out
            .iter_mut()
            .find(|b| Arc::ptr_eq(&b.comm, &p.comm) && b.stream == p.stream)
        {
            Some(b) => b.ops.push(p.op),
            None => out.push(Batch {
                comm: p.comm,
                stream: p.stream,
                ops: vec![p.op],
            }),
        }
    }
    out
}

/// The point-to-point links (peer, send side) a batch uses.
fn p2p_links(ops: &[Op]) -> Vec<(usize, bool)> {
    ops.iter()
        .filter_map(|op| match *op {
            Op::Send { peer, .. } => Some((peer, true)),
            Op::Recv { peer, .. } => Some((peer, false)),
            _ => None,
        })
        .collect()
}

/// Whether NCCL hands this group to a thread of its own and returns `ncclInProgress`
/// (`ncclGroupEndInternal`, `src/group.cc`): only for non-blocking communicators; from 2.23
/// (v2.23.4-1) always, before (v2.19.3-1, v2.22.3-1) only when connections are pending, which
/// for this simulation's transports means a send/recv to a peer not yet connected
/// (`ncclGroupCommPreconnect` in `src/enqueue.cc`; 2.22's runtime connect of collectives runs
/// inside the blocking branch, `groupLaunch`).
fn goes_async(batches: &[Batch]) -> bool {
    let nonblocking = batches.iter().any(|b| !b.comm.blocking);
    nonblocking
        && (crate::version::code() >= 22300
            || batches
                .iter()
                .any(|b| b.comm.p2p_pending(&p2p_links(&b.ops))))
}

/// Checks every batch, then sets the transports up and queues each batch on its stream, on
/// this thread or (non-blocking, see [`goes_async`]) on a thread of its own, with each
/// communicator's state `ncclInProgress` until it is done. Nothing is queued when a check
/// fails.
fn launch(ops: Vec<Pending>) -> u32 {
    let batches = batches(ops);
    for b in &batches {
        if let Err(r) = ops::check_self(b.comm.id.rank, &b.ops) {
            r.emit(b.comm.id.dev);
            return r.code;
        }
    }
    if !goes_async(&batches) {
        return queue(batches);
    }
    let comms: Vec<Arc<Comm>> = batches.iter().map(|b| b.comm.clone()).collect();
    comms.iter().for_each(|c| c.set_in_progress());
    match crate::comm::async_job("nccl-sim-group", comms, move || queue(batches)) {
        Ok(()) => crate::INPROGRESS,
        Err(_) => crate::SYSTEM_ERROR,
    }
}

/// Transport setup (where the setup faults strike), then each batch on its stream.
fn queue(batches: Vec<Batch>) -> u32 {
    let mut setups = Vec::with_capacity(batches.len());
    for b in &batches {
        match faults::setup(&b.comm, b.ops.iter().any(Op::is_p2p)) {
            Ok(s) => setups.push(s),
            Err(code) => return code,
        }
    }
    for (b, setup) in batches.into_iter().zip(setups) {
        let Batch { comm, stream, ops } = b;
        comm.p2p_connected(&p2p_links(&ops));
        comm.queued();
        let c = comm.clone();
        let task: cuda::Task = Box::new(move || faults::run_batch(&c, &ops, setup));
        if let Err(rc) = cuda::enqueue(stream as *mut c_void, task) {
            comm.unqueued();
            let r = texts::launch_failed(comm.id.version, rc);
            r.emit(comm.id.dev);
            return r.code;
        }
    }
    SUCCESS
}

/// Whether this thread is inside a group (for tests).
#[cfg(test)]
pub fn depth() -> u32 {
    GROUP.with(|g| g.borrow().depth)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_nest_and_an_unmatched_end_is_invalid_usage() {
        assert_eq!(depth(), 0);
        assert_eq!(end(), crate::INVALID_USAGE);
        start();
        start();
        assert_eq!(depth(), 2);
        assert_eq!(end(), SUCCESS);
        assert_eq!(depth(), 1);
        assert_eq!(end(), SUCCESS);
        assert_eq!(depth(), 0);
    }

    #[test]
    fn an_error_inside_a_group_is_returned_by_its_end() {
        start();
        note_error(crate::INVALID_ARGUMENT);
        note_error(crate::SYSTEM_ERROR);
        assert_eq!(end(), crate::INVALID_ARGUMENT);
        start();
        assert_eq!(end(), SUCCESS);
        note_error(crate::SYSTEM_ERROR); // outside a group: nothing to remember
        start();
        assert_eq!(end(), SUCCESS);
    }
}
