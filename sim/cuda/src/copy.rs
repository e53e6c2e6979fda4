//! Copies and fills of device memory (host memory here), synchronous or queued on a stream.

use crate::device::platform;
use crate::error::*;
use crate::memory::CUdeviceptr;
use crate::stream::{CUstream, default_stream, lookup};
use std::ffi::{c_uchar, c_uint, c_void};

/// One memory operation, run now or on a stream worker.
#[derive(Clone, Copy)]
pub(crate) enum Op {
    Copy { dst: usize, src: usize, n: usize },
    Set8 { dst: usize, v: u8, n: usize },
    Set16 { dst: usize, v: u16, n: usize },
    Set32 { dst: usize, v: u32, n: usize },
}

impl Op {
    fn check(self) -> CuResult<Op> {
        let (dst, src, bytes) = match self {
            Op::Copy { dst, src, n } => (dst, src, n),
            Op::Set8 { dst, n, .. } => (dst, dst, n),
            Op::Set16 { dst, n, .. } => {
                if !dst.is_multiple_of(2) {
                    return Err(CUDA_ERROR_INVALID_VALUE);
                }
                (dst, dst, n.checked_mul(2).ok_or(CUDA_ERROR_INVALID_VALUE)?)
            }
            Op::Set32 { dst, n, .. } => {
                if !dst.is_multiple_of(4) {
                    return Err(CUDA_ERROR_INVALID_VALUE);
                }
                (dst, dst, n.checked_mul(4).ok_or(CUDA_ERROR_INVALID_VALUE)?)
            }
        };
        if bytes > 0 && (dst == 0 || src == 0) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        if dst.checked_add(bytes).is_none() || src.checked_add(bytes).is_none() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        Ok(self)
    }

    /// # Safety
    /// The addresses must be valid for the operation's extent (the CUDA caller's contract).
    unsafe fn run(self) {
        // SAFETY (whole body): guaranteed by the caller; `copy` allows overlap.
        unsafe {
            match self {
                Op::Copy { dst, src, n } => std::ptr::copy(src as *const u8, dst as *mut u8, n),
                Op::Set8 { dst, v, n } => std::ptr::write_bytes(dst as *mut u8, v, n),
                Op::Set16 { dst, v, n } => {
                    let p = dst as *mut u16;
                    for i in 0..n {
                        p.add(i).write(v);
                    }
                }
                Op::Set32 { dst, v, n } => {
                    let p = dst as *mut u32;
                    for i in 0..n {
                        p.add(i).write(v);
                    }
                }
            }
        }
    }
}

/// Synchronous: waits for the default stream, then does the work.
pub(crate) fn now(op: Op) -> CuResult {
    platform()?;
    let op = op.check()?;
    default_stream()?.synchronize();
    // SAFETY: the caller of the CUDA API vouches for the addresses.
    unsafe { op.run() };
    Ok(())
}

/// Queued behind the stream's earlier work.
pub(crate) fn queued(op: Op, stream: CUstream) -> CuResult {
    let s = lookup(stream)?;
    let op = op.check()?;
    s.enqueue(Box::new(move || {
        // SAFETY: the caller keeps the memory alive until the stream passes this point.
        unsafe { op.run() }
    }));
    Ok(())
}

/// A copy between host and device memory, logged (with `NCCL_SMOKE_SIM_CUDA_TRACE=1`) so that a
/// test can count what crossed between host and device.
fn host_copy(name: &str, n: usize) {
    crate::trace::log(|| format!("{name} {n} B"));
}

pub(crate) fn copy(dst: usize, src: usize, n: usize) -> Op {
    Op::Copy { dst, src, n }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpy(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    byte_count: usize,
) -> CUresult {
    ffi("cuMemcpy", || {
        now(copy(dst as usize, src as usize, byte_count))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyHtoD_v2(
    dst: CUdeviceptr,
    src: *const c_void,
    byte_count: usize,
) -> CUresult {
    ffi("cuMemcpyHtoD_v2", || {
        host_copy("cuMemcpyHtoD_v2", byte_count);
        now(copy(dst as usize, src as usize, byte_count))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(
    dst: *mut c_void,
    src: CUdeviceptr,
    byte_count: usize,
) -> CUresult {
    ffi("cuMemcpyDtoH_v2", || {
        host_copy("cuMemcpyDtoH_v2", byte_count);
        now(copy(dst as usize, src as usize, byte_count))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoD_v2(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    byte_count: usize,
) -> CUresult {
    ffi("cuMemcpyDtoD_v2", || {
        now(copy(dst as usize, src as usize, byte_count))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyAsync(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    byte_count: usize,
    h_stream: CUstream,
) -> CUresult {
    ffi("cuMemcpyAsync", || {
        queued(copy(dst as usize, src as usize, byte_count), h_stream)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    dst: CUdeviceptr,
    src: *const c_void,
    byte_count: usize,
    h_stream: CUstream,
) -> CUresult {
    ffi("cuMemcpyHtoDAsync_v2", || {
        host_copy("cuMemcpyHtoDAsync_v2", byte_count);
        queued(copy(dst as usize, src as usize, byte_count), h_stream)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(
    dst: *mut c_void,
    src: CUdeviceptr,
    byte_count: usize,
    h_stream: CUstream,
) -> CUresult {
    ffi("cuMemcpyDtoHAsync_v2", || {
        host_copy("cuMemcpyDtoHAsync_v2", byte_count);
        queued(copy(dst as usize, src as usize, byte_count), h_stream)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoDAsync_v2(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    byte_count: usize,
    h_stream: CUstream,
) -> CUresult {
    ffi("cuMemcpyDtoDAsync_v2", || {
        queued(copy(dst as usize, src as usize, byte_count), h_stream)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD8_v2(dst: CUdeviceptr, uc: c_uchar, n: usize) -> CUresult {
    ffi("cuMemsetD8_v2", || {
        now(Op::Set8 {
            dst: dst as usize,
            v: uc,
            n,
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD32_v2(dst: CUdeviceptr, ui: c_uint, n: usize) -> CUresult {
    ffi("cuMemsetD32_v2", || {
        now(Op::Set32 {
            dst: dst as usize,
            v: ui,
            n,
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD8Async(
    dst: CUdeviceptr,
    uc: c_uchar,
    n: usize,
    h_stream: CUstream,
) -> CUresult {
    ffi("cuMemsetD8Async", || {
        queued(
            Op::Set8 {
                dst: dst as usize,
                v: uc,
                n,
            },
            h_stream,
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD32Async(
    dst: CUdeviceptr,
    ui: c_uint,
    n: usize,
    h_stream: CUstream,
) -> CUresult {
    ffi("cuMemsetD32Async", || {
        queued(
            Op::Set32 {
                dst: dst as usize,
                v: ui,
                n,
            },
            h_stream,
        )
    })
}
