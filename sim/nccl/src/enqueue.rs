//! An operation call: NCCL's enqueue checks (communicator ready, peer, type, operation,
//! buffers), its COLL line, then the group machinery.

use crate::call::{fail, lookup};
use crate::colls::Coll;
use crate::comm::Comm;
use crate::log::{self, sys};
use crate::ops::{Op, Ptr};
use crate::texts::{self, Report};
use crate::{INPROGRESS, SUCCESS, group, reduce, version};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// `%p` as glibc prints it.
fn p(addr: usize) -> String {
    if addr == 0 {
        "(nil)".into()
    } else {
        format!("{addr:#x}")
    }
}

/// Arguments as the caller gave them, before they are known to be valid.
pub struct Call {
    pub name: &'static str,
    pub send: usize,
    pub recv: usize,
    pub count: usize,
    pub dtype: c_int,
    pub redop: c_int,
    /// NCCL's `root`: the peer of a send or receive.
    pub root: c_int,
}

/// Checks a call as NCCL's enqueue check does, logs its COLL line, and submits it.
pub fn submit(comm: *mut c_void, stream: *mut c_void, call: Call) -> u32 {
    let v = version::code();
    let outcome = (|| -> Result<(Arc<Comm>, Op), Report> {
        let c = lookup(comm, call.name)?;
        match c.async_error() {
            INPROGRESS => return Err(texts::not_ready(v)),
            SUCCESS => {}
            e => {
                return Err(Report {
                    code: e,
                    lines: Vec::new(),
                });
            }
        }
        // NCCL's ArgsCheck checks every call's root (a send's or receive's peer), 0 for the
        // collectives without one (`src/misc/argcheck.cc`, v2.28.3-1).
        if call.root < 0 || call.root as usize >= c.id.nranks {
            return Err(texts::bad_peer(v, call.name, call.root.into(), c.id.nranks));
        }
        let fp8 = matches!(call.dtype, 10 | 11);
        if call.dtype < 0
            || reduce::elem_size(call.dtype as u32).is_none()
            || (fp8 && version::code() < reduce::FP8_SINCE)
        {
            return Err(texts::bad_type(v, call.name, call.dtype));
        }
        if call.redop < 0 || !reduce::valid_op(call.redop as u32) {
            return Err(texts::bad_op(v, call.name, call.redop));
        }
        if call.count > 0 {
            let root = call.root as usize == c.id.rank;
            for (what, addr) in [("sendbuff", call.send), ("recvbuff", call.recv)] {
                // A broadcast's send buffer and a reduce's receive buffer matter on the root
                // only (ArgsCheck, as above); a scatter's and a gather's too, by their data
                // flow (guessed: ArgsCheck in v2.28.3-1 names neither).
                let needed = match call.name {
                    "Send" => what == "sendbuff",
                    "Recv" => what == "recvbuff",
                    "Broadcast" | "Scatter" => what == "recvbuff" || root,
                    "Reduce" | "Gather" => what == "sendbuff" || root,
                    _ => true,
                };
                if needed && addr == 0 {
                    return Err(texts::bad_pointer(call.name, what));
                }
            }
        }
        let (dtype, peer) = (call.dtype as u32, call.root.max(0) as usize);
        let op = match call.name {
            "AllReduce" => Op::AllReduce {
                send: Ptr(call.send),
                recv: Ptr(call.recv),
                count: call.count,
                dtype,
                op: call.redop as u32,
            },
            "AlltoAll" => Op::AllToAll {
                send: Ptr(call.send),
                recv: Ptr(call.recv),
                count: call.count,
                dtype,
            },
            name if let Some(kind) = Coll::from_name(name) => Op::Coll {
                kind,
                send: Ptr(call.send),
                recv: Ptr(call.recv),
                count: call.count,
                dtype,
                op: call.redop as u32,
                root: peer,
                me: c.id.rank,
            },
            "Send" => Op::Send {
                buf: Ptr(call.send),
                count: call.count,
                dtype,
                peer,
            },
            _ => Op::Recv {
                buf: Ptr(call.recv),
                count: call.count,
                dtype,
                peer,
            },
        };
        Ok((c, op))
    })();
    let (c, op) = match outcome {
        Ok(x) => x,
        Err(r) => {
            let code = fail(r);
            group::note_error(code);
            return code;
        }
    };
    let n = c.op_count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    // Send and Recv carry their buffer as NCCL's recvbuff, their peer as root.
    let (sb, rb) = match op {
        Op::Send { .. } | Op::Recv { .. } => (0, call.send | call.recv),
        _ => (call.send, call.recv),
    };
    log::info(
        c.id.dev,
        sys::COLL,
        &format!(
            "{}: opCount {n:x} sendbuff {} recvbuff {} count {} datatype {} op {} root {} comm {} [nranks={}] stream {}",
            op.name(),
            p(sb),
            p(rb),
            call.count,
            call.dtype,
            call.redop,
            call.root,
            p(c.addr()),
            c.id.nranks,
            p(stream as usize)
        ),
    );
    let allreduce = matches!(op, Op::AllReduce { .. });
    let counted = c.clone();
    let code = group::submit(c, stream, op);
    if allreduce && matches!(code, SUCCESS | INPROGRESS) {
        counted
            .allreduce_launched
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    if code != SUCCESS {
        group::note_error(code);
    }
    code
}
