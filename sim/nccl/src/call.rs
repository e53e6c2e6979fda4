//! What every API call shares, below the exports: failing with NCCL's words on the caller's
//! device, the injected-fault set, and the communicator behind a handle.

use crate::comm::{self, Comm};
use crate::cuda;
use crate::texts::{self, Report};
use nccl_smoke_fault::FaultSet;
use std::ffi::c_void;
use std::sync::Arc;

/// Logs `r` on the calling thread's device and returns its code.
pub fn fail(r: Report) -> u32 {
    r.emit(cuda::current_device().unwrap_or(0));
    r.code
}

pub fn fault_set() -> Result<FaultSet, u32> {
    FaultSet::from_env().map_err(|e| fail(texts::bad_fault_spec(&e.to_string())))
}

/// The communicator behind a handle, or the failure NCCL reports for a bad one.
pub fn lookup(h: *mut c_void, op: &str) -> Result<Arc<Comm>, Report> {
    if h.is_null() {
        return Err(texts::null_arg(op, "comm"));
    }
    comm::get(h).ok_or_else(texts::corrupted)
}
