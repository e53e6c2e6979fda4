//! Symbols newer than the header `sys.rs` was generated from (NCCL 2.19.3), declared by hand
//! from the NCCL documentation of the release that added them.

use super::super::os;
use std::ffi::c_void;

/// `ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
/// ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)`, NCCL >= 2.28.3: `count`
/// elements go to, and come from, each peer.
pub type AlltoAllFn =
    unsafe extern "C" fn(*const c_void, *mut c_void, usize, u32, *mut c_void, *mut c_void) -> u32;

pub fn alltoall(lib: &os::Library) -> Option<AlltoAllFn> {
    // SAFETY: the prototype above is the documented one; the pointer is copied out while the
    // library stays loaded for the life of `Nccl`.
    unsafe { lib.raw().get::<AlltoAllFn>(b"ncclAlltoAll") }
        .ok()
        .map(|s| *s)
}
