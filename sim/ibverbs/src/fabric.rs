//! What this process's fabric is: its HCAs and faults (read once from the environment), the
//! rank faults are aimed at, and the per-verb call counts they are aimed by.

use nccl_smoke_fault::ib::{self, Hca, IbFault, IbKind};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

pub struct Fabric {
    pub hcas: Vec<Hca>,
    faults: Vec<IbFault>,
    rank: Option<u32>,
    calls: Mutex<HashMap<&'static str, u64>>,
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
    /// Counts one call of `what` and returns the fault that strikes it, if any.
    pub fn strike(&self, what: &'static str) -> Option<IbKind> {
        if self.faults.is_empty() {
            return None;
        }
        let call = {
            let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
            let n = calls.entry(what).or_insert(0);
            *n += 1;
            *n
        };
        let hit = self
            .faults
            .iter()
            .find(|f| f.strikes(what, self.rank, call))
            .map(|f| f.kind);
        if let (Some(k), true) = (hit, self.trace) {
            eprintln!("nccl-smoke simulated libibverbs: {what} call {call}: fault {k:?}");
        }
        hit
    }
}

/// The errno a verb's fault makes it fail with; a `hang` never returns and a `crash` aborts.
pub fn verb_fault(what: &'static str) -> Result<(), i32> {
    match fabric().and_then(|f| f.strike(what)) {
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
