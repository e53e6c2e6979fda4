//! Symbols newer than the header `sys.rs` was generated from (NCCL 2.19.3), declared by hand
//! from the NCCL documentation of the release that added them.

use super::super::os;
use std::ffi::c_void;

/// `ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
/// ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)`, NCCL >= 2.28.3: `count`
/// elements go to, and come from, each peer.
pub type AlltoAllFn =
    unsafe extern "C" fn(*const c_void, *mut c_void, usize, u32, *mut c_void, *mut c_void) -> u32;

/// `ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
/// ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)` and `ncclScatter`
/// with the same prototype, NCCL >= 2.28.3 (`src/nccl.h.in`, v2.28.3-1).
pub type RootedFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    u32,
    i32,
    *mut c_void,
    *mut c_void,
) -> u32;

/// `ncclGather` and `ncclScatter`, when the library has both.
pub fn gather_scatter(lib: &os::Library) -> Option<(RootedFn, RootedFn)> {
    // SAFETY: as in `alltoall`.
    let get = |name: &[u8]| unsafe { lib.raw().get::<RootedFn>(name) }.ok().map(|s| *s);
    Some((get(b"ncclGather")?, get(b"ncclScatter")?))
}

pub fn alltoall(lib: &os::Library) -> Option<AlltoAllFn> {
    // SAFETY: the prototype above is the documented one; the pointer is copied out while the
    // library stays loaded for the life of `Nccl`.
    unsafe { lib.raw().get::<AlltoAllFn>(b"ncclAlltoAll") }
        .ok()
        .map(|s| *s)
}
