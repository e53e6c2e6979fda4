//! Completion queues: the completions of this process's own requests, and the receive
//! completions peers left in the mailboxes of the queue pairs that use the queue.

use crate::fabric::{cq_dev, dev_of, set_errno, verb_fault};
use crate::mailbox::Mailbox;
use crate::sys::*;
use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

/// rdma-core's status codes used here.
pub(crate) const WC_SUCCESS: u32 = 0;
pub(crate) const WC_LOC_QP_OP_ERR: u32 = 2;
pub(crate) const WC_LOC_PROT_ERR: u32 = 4;
pub(crate) const WC_WR_FLUSH_ERR: u32 = 5;
pub(crate) const WC_REM_ACCESS_ERR: u32 = 10;
pub(crate) const WC_RETRY_EXC_ERR: u32 = 12;
pub(crate) const WC_RNR_RETRY_EXC_ERR: u32 = 13;
/// mlx5's vendor syndrome for a transport retry counter exceeded (0x81), others 0.
pub(crate) fn vendor_err(status: u32) -> u32 {
    if status == WC_RETRY_EXC_ERR { 0x81 } else { 0 }
}

/// A completion queue: its local completions, and the queue pairs whose receive completions it
/// collects from their mailboxes.
#[repr(C)]
pub struct Cq {
    cq: ibv_cq,
    pub(crate) local: Mutex<VecDeque<ibv_wc>>,
    receivers: Mutex<Vec<Receiver>>,
}

/// A queue pair whose receive completions a queue collects: its mailbox and number.
struct Receiver {
    mailbox: *const Mailbox,
    qp_num: u32,
}

// SAFETY: a queue pair unregisters itself (`unregister`) before its mailbox is freed.
unsafe impl Send for Receiver {}

/// Makes `cq` collect the receive completions left in `mailbox` (queue pair `qp_num`).
///
/// # Safety
/// `cq` from [`ibv_create_cq`]; `mailbox` lives until [`unregister`].
pub(crate) unsafe fn register(cq: *mut ibv_cq, mailbox: &Mailbox, qp_num: u32) {
    // SAFETY: as the caller promises.
    let c = unsafe { &*cq.cast::<Cq>() };
    lock(&c.receivers).push(Receiver { mailbox, qp_num });
}

/// Stops `cq` collecting from `mailbox`.
///
/// # Safety
/// `cq` from [`ibv_create_cq`].
pub(crate) unsafe fn unregister(cq: *mut ibv_cq, mailbox: &Mailbox) {
    // SAFETY: as the caller promises.
    let c = unsafe { &*cq.cast::<Cq>() };
    lock(&c.receivers).retain(|r| !std::ptr::eq(r.mailbox, mailbox));
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    _vector: c_int,
) -> *mut ibv_cq {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_create_cq", unsafe { dev_of(ctx) }) {
        set_errno(e);
        return std::ptr::null_mut();
    }
    let cq = Box::into_raw(Box::new(Cq {
        cq: ibv_cq {
            context: ctx,
            channel,
            cq_context,
            cqe,
            ..Default::default()
        },
        local: Mutex::new(VecDeque::new()),
        receivers: Mutex::new(Vec::new()),
    }));
    // SAFETY: just allocated.
    unsafe { &raw mut (*cq).cq }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_destroy_cq", unsafe { cq_dev(cq) }) {
        return e;
    }
    // SAFETY: allocated by ibv_create_cq.
    drop(unsafe { Box::from_raw(cq.cast::<Cq>()) });
    0
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// # Safety
/// `cq` from [`ibv_create_cq`], `wc` room for `n` entries.
pub unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_poll_cq", unsafe { cq_dev(cq) }) {
        return -e;
    }
    // SAFETY: as the caller promises.
    let c = unsafe { &*cq.cast::<Cq>() };
    let mut local = lock(&c.local);
    for rx in lock(&c.receivers).iter() {
        // SAFETY: a queue pair unregisters its mailbox before freeing it.
        let mailbox = unsafe { &*rx.mailbox };
        let qp_num = rx.qp_num;
        while let Some(r) = mailbox.take_completion() {
            let mut w = ibv_wc {
                wr_id: r.wr_id,
                status: r.status,
                opcode: r.opcode,
                vendor_err: vendor_err(r.status),
                byte_len: r.byte_len,
                qp_num,
                src_qp: r.src_qp,
                wc_flags: r.flags,
                ..Default::default()
            };
            w.__bindgen_anon_1.imm_data = r.imm;
            local.push_back(w);
        }
    }
    let mut got = 0;
    while got < n.max(0) {
        let Some(w) = local.pop_front() else { break };
        // SAFETY: room for n entries.
        unsafe { *wc.add(got as usize) = w };
        got += 1;
    }
    got
}

/// # Safety
/// Any arguments: nothing is read.
pub unsafe extern "C" fn req_notify_cq(_cq: *mut ibv_cq, _solicited: c_int) -> c_int {
    0
}
