//! What this process's fabric is: its HCAs and faults (read once from the environment), the
//! rank faults are aimed at, and the per-verb call counts they are aimed by.

use crate::sys::ibv_context;
use nccl_smoke_fault::ib::{self, Hca, IbFault, IbKind};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

pub struct Fabric {
    pub hcas: Vec<Hca>,
    faults: Vec<IbFault>,
    rank: Option<u32>,
    /// Calls per (verb, HCA index), and per (verb, `None`) for all of them.
    calls: Mutex<HashMap<(&'static str, Option<usize>), u64>>,
    pub trace: bool,
}

/// The fabric, or `None` when a spec did not parse (said once on stderr): then no device exists.
pub fn fabric() -> Option<&'static Fabric> {
    static FABRIC: OnceLock<Option<Fabric>> = OnceLock::new();
    FABRIC
        .get_or_init(|| {
            let read = ib::hcas_from_env().and_then(|h| Ok((h, ib::ib_faults_from_env()?)));
            match read {
                Ok((hcas, faults)) => Some(Fabric {
                    hcas,
                    faults,
                    rank: nccl_smoke_fault::rank_from_env(),
                    calls: Mutex::new(HashMap::new()),
                    trace: std::env::var("NCCL_SMOKE_SIM_IB_TRACE").is_ok_and(|v| v == "1"),
                }),
                Err(e) => {
                    eprintln!("nccl-smoke simulated libibverbs: {e}; no device is presented");
                    None
                }
            }
        })
        .as_ref()
}

impl Fabric {
    /// Counts one call of `what` on HCA `dev` (`None`: a call on no HCA) and returns the fault
    /// that strikes it, if any.
    pub fn strike(&self, what: &'static str, dev: Option<usize>) -> Option<IbKind> {
        if self.faults.is_empty() {
            return None;
        }
        let (all, on_dev) = {
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            let mut count = |k| {
                let n = calls.entry((what, k)).or_insert(0);
                *n += 1;
                *n
            };
            (count(None), dev.map(|d| count(Some(d))))
        };
        let name = dev.and_then(|d| self.hcas.get(d)).map(|h| h.name.as_str());
        let hit = self
            .faults
            .iter()
            .find(|f| {
                let call = if f.hca.is_some() {
                    on_dev.unwrap_or(0)
                } else {
                    all
                };
                f.strikes(what, self.rank, name, call)
            })
            .map(|f| f.kind);
        if let (Some(k), true) = (hit, self.trace) {
            eprintln!(
                "nccl-smoke simulated libibverbs: {what} call {all} on {}: fault {k:?}",
                name.unwrap_or("no HCA")
            );
        }
        hit
    }
}

/// The HCA index of a context (`None` for a null one).
///
/// # Safety
/// `ctx` must be null or come from `ibv_open_device`.
pub unsafe fn dev_of(ctx: *mut ibv_context) -> Option<usize> {
    // SAFETY: the caller vouches for ctx.
    (!ctx.is_null()).then(|| unsafe { crate::device::context_of(ctx) }.device)
}

/// The HCA index of a protection domain's context.
///
/// # Safety
/// `pd` must be null or come from `ibv_alloc_pd`.
pub unsafe fn pd_dev(pd: *mut crate::sys::ibv_pd) -> Option<usize> {
    // SAFETY: the caller vouches for pd.
    unsafe { pd.as_ref().and_then(|p| dev_of(p.context)) }
}

/// The HCA index of a completion queue's context.
///
/// # Safety
/// `cq` must be null or come from `ibv_create_cq`.
pub unsafe fn cq_dev(cq: *mut crate::sys::ibv_cq) -> Option<usize> {
    // SAFETY: the caller vouches for cq.
    unsafe { cq.as_ref().and_then(|c| dev_of(c.context)) }
}

/// The HCA index of a queue pair's context.
///
/// # Safety
/// `qp` must be null or come from `ibv_create_qp`.
pub unsafe fn qp_dev(qp: *mut crate::sys::ibv_qp) -> Option<usize> {
    // SAFETY: the caller vouches for qp.
    unsafe { qp.as_ref().and_then(|q| dev_of(q.context)) }
}

/// The errno a verb's fault makes it fail with; a `hang` never returns and a `crash` aborts.
/// `dev`: the HCA the call is on.
pub fn verb_fault(what: &'static str, dev: Option<usize>) -> Result<(), i32> {
    match fabric().and_then(|f| f.strike(what, dev)) {
        None | Some(IbKind::Status(_)) | Some(IbKind::Event(_)) => Ok(()),
        Some(IbKind::Errno(e)) => Err(e),
        Some(IbKind::Hang) => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        Some(IbKind::Crash) => std::process::abort(),
    }
}

/// Sets the calling thread's `errno`.
pub fn set_errno(e: i32) {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}
