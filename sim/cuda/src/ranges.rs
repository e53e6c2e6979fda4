//! Which memory an address belongs to, whichever call made it: `cuMemAlloc`/`cuMemHostAlloc`
//! blocks and registered host ranges (`memory`), cuMem mappings (`vmm`), and other processes'
//! memory opened through IPC handles (`ipc`).

use crate::device::platform;
use crate::error::*;
use crate::memory::{CUdeviceptr, Range, find_allocated};
use std::ffi::{c_uint, c_void};

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
