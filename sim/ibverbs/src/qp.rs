//! Reliable-connected queue pairs: creation, the state machine NCCL drives (RESET, INIT, RTR,
//! RTS, ERR) with the checks a real HCA makes of the address, and queries.

use crate::cq::lock;
use crate::device::{GID_TABLE, context_of, gid, hca};
use crate::fabric::{fabric, pd_dev, qp_dev, set_errno, verb_fault};
use crate::mailbox::Mailbox;
use crate::sys::*;
use nccl_smoke_fault::ib::Link;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

/// What a queue pair knows past its creation.
pub(crate) struct QpState {
    pub(crate) attr: ibv_qp_attr,
    pub(crate) peer: Option<Mailbox>,
}

#[repr(C)]
pub struct Qp {
    pub(crate) qp: ibv_qp,
    pub(crate) init: ibv_qp_init_attr,
    pub(crate) mailbox: Mailbox,
    pub(crate) state: Mutex<QpState>,
}

// The mutable parts are behind the mutex or in shared memory.
unsafe impl Send for Qp {}
unsafe impl Sync for Qp {}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    init: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_create_qp", unsafe { pd_dev(pd) }) {
        set_errno(e);
        return std::ptr::null_mut();
    }
    // SAFETY: init is the caller's.
    let init_attr = unsafe { &mut *init };
    if init_attr.qp_type != ibv_qp_type::IBV_QPT_RC
        || init_attr.send_cq.is_null()
        || init_attr.recv_cq.is_null()
    {
        // The stand-in has reliable-connected queue pairs only (all NCCL uses).
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    }
    let (mailbox, qpn) = match Mailbox::create() {
        Ok(m) => m,
        Err(e) => {
            set_errno(e);
            return std::ptr::null_mut();
        }
    };
    init_attr.cap.max_inline_data = init_attr.cap.max_inline_data.max(220);
    // SAFETY: pd is ours.
    let context = unsafe { (*pd).context };
    let qp = Box::into_raw(Box::new(Qp {
        qp: ibv_qp {
            context,
            qp_context: init_attr.qp_context,
            pd,
            send_cq: init_attr.send_cq,
            recv_cq: init_attr.recv_cq,
            srq: init_attr.srq,
            handle: qpn,
            qp_num: qpn,
            state: ibv_qp_state::IBV_QPS_RESET,
            qp_type: init_attr.qp_type,
            ..Default::default()
        },
        init: *init_attr,
        mailbox,
        state: Mutex::new(QpState {
            attr: ibv_qp_attr::default(),
            peer: None,
        }),
    }));
    // SAFETY: recv_cq is one of ours; the queue pair outlives its registration.
    unsafe { crate::cq::register(init_attr.recv_cq, &(*qp).mailbox, qpn) };
    // SAFETY: just allocated.
    unsafe { &raw mut (*qp).qp }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_destroy_qp", unsafe { qp_dev(qp) }) {
        return e;
    }
    // SAFETY: allocated by ibv_create_qp; unregistered before it is freed.
    unsafe {
        let q = qp.cast::<Qp>();
        crate::cq::unregister((*q).qp.recv_cq, &(*q).mailbox);
        drop(Box::from_raw(q));
    }
    0
}

const fn has(mask: c_int, bit: u32) -> bool {
    mask as u32 & bit != 0
}

/// Whether `attr`'s address vector can reach anything from HCA `device`: a RoCE port needs a
/// global route from a GID entry that exists, an InfiniBand one a LID or a GID entry that exists.
fn address_ok(device: usize, attr: &ibv_qp_attr) -> bool {
    let ah = &attr.ah_attr;
    let sgid = ah.grh.sgid_index as usize;
    let sgid_ok = sgid < GID_TABLE && gid(device, sgid) != [0; 16];
    match hca(device).link {
        Link::Ethernet => ah.is_global == 1 && sgid_ok,
        Link::Infiniband => {
            if ah.is_global == 1 {
                sgid_ok
            } else {
                ah.dlid != 0
            }
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
) -> c_int {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_modify_qp", unsafe { qp_dev(qp) }) {
        return e;
    }
    // SAFETY: qp is ours, attr the caller's.
    let (q, a) = unsafe { (&mut *qp.cast::<Qp>(), &*attr) };
    // SAFETY: the context is ours.
    let device = unsafe { context_of(q.qp.context).device };
    let mut st = lock(&q.state);
    let cur = q.qp.state;
    let next = if has(mask, ibv_qp_attr_mask::IBV_QP_STATE) {
        a.qp_state
    } else {
        cur
    };
    use ibv_qp_state::*;
    let allowed = match (cur, next) {
        (_, IBV_QPS_RESET | IBV_QPS_ERR) => true,
        (IBV_QPS_RESET, IBV_QPS_INIT) => {
            has(mask, ibv_qp_attr_mask::IBV_QP_PORT) && a.port_num == 1
        }
        (IBV_QPS_INIT, IBV_QPS_INIT) => true,
        (IBV_QPS_INIT, IBV_QPS_RTR) => {
            has(mask, ibv_qp_attr_mask::IBV_QP_AV)
                && has(mask, ibv_qp_attr_mask::IBV_QP_DEST_QPN)
                && address_ok(device, a)
        }
        (IBV_QPS_RTR, IBV_QPS_RTS) | (IBV_QPS_RTS, IBV_QPS_RTS) => true,
        _ => false,
    };
    if !allowed {
        if fabric().is_some_and(|f| f.trace) {
            eprintln!(
                "nccl-smoke simulated libibverbs: ibv_modify_qp {cur} -> {next} refused (mask {mask:#x}, \
                 port {}, is_global {}, sgid_index {}, dlid {})",
                a.port_num, a.ah_attr.is_global, a.ah_attr.grh.sgid_index, a.ah_attr.dlid
            );
        }
        return libc::EINVAL;
    }
    let s = &mut st.attr;
    macro_rules! keep {
        ($($bit:ident => $($field:ident),+;)*) => {
            $(if has(mask, ibv_qp_attr_mask::$bit) { $(s.$field = a.$field;)+ })*
        };
    }
    keep! {
        IBV_QP_PKEY_INDEX => pkey_index;
        IBV_QP_PORT => port_num;
        IBV_QP_ACCESS_FLAGS => qp_access_flags;
        IBV_QP_AV => ah_attr;
        IBV_QP_PATH_MTU => path_mtu;
        IBV_QP_DEST_QPN => dest_qp_num;
        IBV_QP_RQ_PSN => rq_psn;
        IBV_QP_SQ_PSN => sq_psn;
        IBV_QP_TIMEOUT => timeout;
        IBV_QP_RETRY_CNT => retry_cnt;
        IBV_QP_RNR_RETRY => rnr_retry;
        IBV_QP_MIN_RNR_TIMER => min_rnr_timer;
        IBV_QP_MAX_QP_RD_ATOMIC => max_rd_atomic;
        IBV_QP_MAX_DEST_RD_ATOMIC => max_dest_rd_atomic;
    }
    s.qp_state = next;
    q.qp.state = next;
    q.mailbox
        .set_alive(!matches!(next, IBV_QPS_ERR | IBV_QPS_RESET));
    if next == IBV_QPS_RESET {
        st.peer = None;
    }
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_query_qp", unsafe { qp_dev(qp) }) {
        return e;
    }
    // SAFETY: qp is ours, attr and init the caller's.
    unsafe {
        let q = &*qp.cast::<Qp>();
        let mut a = lock(&q.state).attr;
        a.qp_state = q.qp.state;
        a.cur_qp_state = q.qp.state;
        a.cap = q.init.cap;
        *attr = a;
        if !init.is_null() {
            *init = q.init;
        }
    }
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_ece(_qp: *mut ibv_qp, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_set_ece(_qp: *mut ibv_qp, _ece: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}
