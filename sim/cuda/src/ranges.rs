//! Which memory an address belongs to, whichever call made it: `cuMemAlloc`/`cuMemHostAlloc`
//! blocks and registered host ranges (`memory`), cuMem mappings (`vmm`), and other processes'
//! memory opened through IPC handles (`ipc`); and the DMA-BUF export of a device range.

use crate::device::platform;
use crate::error::*;
use crate::memory::{CUdeviceptr, Range, find_allocated};
use std::ffi::{c_int, c_uint, c_ulonglong, c_void};

/// The block, registered host range, cuMem mapping or IPC import holding `addr`.
pub(crate) fn find_range(addr: usize) -> Option<Range> {
    if let Some(r) = find_allocated(addr) {
        return Some(r);
    }
    if let Some((base, size, dev)) = crate::vmm::find_mapping(addr) {
        return Some(Range {
            base,
            size,
            device: Some(dev),
            memfd: None,
        });
    }
    crate::ipc::find_import(addr).map(|(base, size, dev)| Range {
        base,
        size,
        device: Some(dev),
        memfd: None,
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostGetFlags(flags: *mut c_uint, p: *mut c_void) -> CUresult {
    ffi("cuMemHostGetFlags", || {
        non_null(flags)?;
        platform()?;
        find_range(p as usize).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        // SAFETY: checked non-null.
        unsafe { put(flags, 0) }
    })
}

/// `cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)`; either
/// out-pointer may be NULL (NVIDIA CUDA driver API docs).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetAddressRange_v2(
    pbase: *mut CUdeviceptr,
    psize: *mut usize,
    dptr: CUdeviceptr,
) -> CUresult {
    ffi("cuMemGetAddressRange_v2", || {
        platform()?;
        let r = find_range(dptr as usize).ok_or(CUDA_ERROR_NOT_FOUND)?;
        // SAFETY: each out-pointer is written only when non-null.
        unsafe {
            if !pbase.is_null() {
                pbase.write(r.base as CUdeviceptr);
            }
            if !psize.is_null() {
                psize.write(r.size);
            }
        }
        Ok(())
    })
}

/// `CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD` (cuda.h 11.7).
const DMA_BUF_FD: c_int = 1;

/// `cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
/// CUmemRangeHandleType handleType, unsigned long long flags)`: a DMA-BUF file descriptor for a
/// device range (NVIDIA CUDA driver API docs, 11.7+), written as an `int` through `handle`.
/// The range must lie inside one block of device memory. NCCL asks for it when it registers a
/// buffer with the NIC through DMA-BUF (NVIDIA/nccl v2.19.3-1 `src/transport/net.cc`,
/// `sendProxyConnect`/`recvProxyConnect`); the descriptor is a memfd the NIC stand-in only
/// checks (a real one is the driver's dma-buf object). `flags` 0 or 1
/// (`CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE`, 12.8).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetHandleForAddressRange(
    handle: *mut c_void,
    dptr: CUdeviceptr,
    size: usize,
    handle_type: c_int,
    flags: c_ulonglong,
) -> CUresult {
    ffi("cuMemGetHandleForAddressRange", || {
        non_null(handle)?;
        platform()?;
        if handle_type != DMA_BUF_FD || flags > 1 || size == 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let r = find_range(dptr as usize).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        let inside = (dptr as usize)
            .checked_add(size)
            .is_some_and(|end| end <= r.base + r.size);
        if r.device.is_none() || !inside {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: a plain syscall with a NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"nccl-smoke-dmabuf".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(CUDA_ERROR_OUT_OF_MEMORY);
        }
        // SAFETY: checked non-null; the caller passes room for an int.
        unsafe { put(handle.cast::<c_int>(), fd) }
    })
}
