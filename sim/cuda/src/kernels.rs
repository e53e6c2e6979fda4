//! nccl-smoke's own kernels, run by name: a launch of `ncclsmoke_fill` or `ncclsmoke_check`
//! (nccl_smoke_kernels::PTX) runs their host reference (`nccl_smoke_kernels::reference`) on
//! the stream, where a GPU would run the JIT-compiled PTX. Any other kernel (NCCL's) is still
//! recorded and not run (see `module.rs`).

use crate::error::*;
use crate::stream::Task;
use nccl_smoke_kernels::args::{CheckArgs, CheckResult, FillArgs};
use nccl_smoke_kernels::{CHECK, FILL, reference};
use std::ffi::c_void;

/// Reads the one by-value parameter of a launch (`params[0]` points at it).
///
/// # Safety
/// `params` is the launch's parameter array, whose first entry points at a `T`.
unsafe fn arg<T: Copy>(params: *mut *mut c_void) -> CuResult<T> {
    if params.is_null() {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: the caller's launch contract.
    let p = unsafe { *params };
    if p.is_null() {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: as above; the parameter need not be aligned in the caller's memory.
    Ok(unsafe { (p as *const T).read_unaligned() })
}

/// A device address and extent, checked as the copies check theirs (not null, no overflow).
fn extent(addr: u64, bytes: u64) -> CuResult<(usize, usize)> {
    let (a, n) = (addr as usize, bytes as usize);
    if n > 0 && a == 0 || a.checked_add(n).is_none() {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    Ok((a, n))
}

/// # Safety
/// The extent is device memory the launching process owns until the stream passes the task.
unsafe fn bytes<'a>((a, n): (usize, usize)) -> &'a [u8] {
    if n == 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(a as *const u8, n) }
}

/// # Safety
/// As [`bytes`].
unsafe fn bytes_mut<'a>((a, n): (usize, usize)) -> &'a mut [u8] {
    if n == 0 {
        return &mut [];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts_mut(a as *mut u8, n) }
}

/// The work a launch of `name` stands for, when it is one of nccl-smoke's kernels.
///
/// # Safety
/// `params` is the launch's parameter array.
pub unsafe fn task(name: &str, params: *mut *mut c_void) -> CuResult<Option<Task>> {
    match name {
        FILL => {
            // SAFETY: the launch's contract.
            let a: FillArgs = unsafe { arg(params)? };
            let (out, table) = reference::fill_needs(&a).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
            let (out, table) = (extent(a.out, out)?, extent(a.table, table)?);
            Ok(Some(Box::new(move || {
                // Cannot fail: `fill_needs` checked the arguments and the extents hold its
                // bytes. Were it to, the buffer would stay unwritten, which the check counts.
                // SAFETY: the addresses are the caller's device memory (CUDA's contract).
                let _ = reference::fill(&a, unsafe { bytes_mut(out) }, unsafe { bytes(table) });
            })))
        }
        CHECK => {
            // SAFETY: the launch's contract.
            let a: CheckArgs = unsafe { arg(params)? };
            let (got, table, blocks) =
                reference::check_needs(&a).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
            let (got, table) = (extent(a.got, got)?, extent(a.table, table)?);
            let (blocks, result) = (extent(a.blocks, blocks)?, extent(a.result, 24)?);
            Ok(Some(Box::new(move || {
                // SAFETY: the addresses are the caller's device memory (CUDA's contract).
                let out: &mut [u8; 24] = unsafe { bytes_mut(result) }.try_into().expect("24 bytes");
                let mut r = CheckResult::from_bytes(out);
                let (got, table, blocks) = unsafe { (bytes(got), bytes(table), bytes(blocks)) };
                // On failure (arguments `check_needs` passed cannot fail) the result keeps 0
                // elements compared, which the harness never takes for a clean check.
                if reference::check(&a, got, table, blocks, &mut r).is_ok() {
                    *out = r.to_bytes();
                }
            })))
        }
        _ => Ok(None),
    }
}
