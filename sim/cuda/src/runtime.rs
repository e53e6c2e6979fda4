//! The rest of what the CUDA runtime inside the real libnccl calls (FACTS.md, "The real libnccl
//! on a CPU machine": device, context and stream queries, stream capture, memory pools, pointer
//! attributes, peer copies). Signatures follow the NVIDIA CUDA driver API documentation
//! (cuda.h, 12.x); values that a real GPU would measure are marked as guesses.

use crate::context::{
    CUcontext, context_device, current_device, current_handle, primary_active, primary_handle,
};
use crate::copy;
use crate::device::{CUdevice, check_device, platform};
use crate::error::*;
use crate::memory::{self, CUdeviceptr};
use crate::ranges::find_range;
use crate::stream::{CUstream, lookup, stream_device};
use std::cell::Cell;
use std::ffi::{CStr, c_char, c_int, c_uint, c_ulonglong, c_ushort, c_void};

// ---------------------------------------------------------------------------------------------
// Devices

/// Deprecated but still asked: the compute capability of an H100 (9.0), as attribute 75/76.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceComputeCapability(
    major: *mut c_int,
    minor: *mut c_int,
    dev: CUdevice,
) -> CUresult {
    ffi("cuDeviceComputeCapability", || {
        non_null(major)?;
        non_null(minor)?;
        check_device(dev)?;
        // SAFETY: both checked non-null.
        unsafe {
            put(major, 9)?;
            put(minor, 0)
        }
    })
}

/// Every simulated device can reach every other (they share host memory); a device is not its
/// own peer (NVIDIA docs: `canAccessPeer` is 0 for the same device).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceCanAccessPeer(
    can: *mut c_int,
    dev: CUdevice,
    peer: CUdevice,
) -> CUresult {
    ffi("cuDeviceCanAccessPeer", || {
        non_null(can)?;
        check_device(dev)?;
        check_device(peer)?;
        // SAFETY: checked non-null.
        unsafe { put(can, c_int::from(dev != peer)) }
    })
}

/// `CUdevice_P2PAttribute`: performance rank (1) 0, every "supported" attribute 1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetP2PAttribute(
    value: *mut c_int,
    attrib: c_int,
    src: CUdevice,
    dst: CUdevice,
) -> CUresult {
    ffi("cuDeviceGetP2PAttribute", || {
        non_null(value)?;
        check_device(src)?;
        check_device(dst)?;
        if src == dst {
            return Err(CUDA_ERROR_INVALID_DEVICE);
        }
        let v = match attrib {
            1 => 0,
            2..=4 => 1,
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        // SAFETY: checked non-null.
        unsafe { put(value, v) }
    })
}

/// `cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)`: case-insensitive match with
/// the id `cuDeviceGetPCIBusId` gives (a shorter `bus:dev.fn` form means domain 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetByPCIBusId(
    dev: *mut CUdevice,
    bus_id: *const c_char,
) -> CUresult {
    ffi("cuDeviceGetByPCIBusId", || {
        non_null(dev)?;
        non_null(bus_id)?;
        // SAFETY: checked non-null; a NUL-terminated string from the caller.
        let want = unsafe { CStr::from_ptr(bus_id) }
            .to_string_lossy()
            .to_ascii_uppercase();
        let want = if want.matches(':').count() == 1 {
            format!("0000:{want}")
        } else {
            want
        };
        let p = platform()?;
        let found = p
            .gpus
            .iter()
            .position(|g| crate::config::bus_id_string(g.physical) == want)
            .ok_or(CUDA_ERROR_INVALID_DEVICE)?;
        // SAFETY: checked non-null.
        unsafe { put(dev, found as CUdevice) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxGetState(
    dev: CUdevice,
    flags: *mut c_uint,
    active: *mut c_int,
) -> CUresult {
    ffi("cuDevicePrimaryCtxGetState", || {
        non_null(flags)?;
        non_null(active)?;
        check_device(dev)?;
        // SAFETY: both checked non-null.
        unsafe {
            put(flags, 0)?;
            put(active, c_int::from(primary_active(dev)))
        }
    })
}

/// Flags are accepted and ignored (nothing here depends on scheduling).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxSetFlags_v2(dev: CUdevice, _flags: c_uint) -> CUresult {
    ffi("cuDevicePrimaryCtxSetFlags_v2", || {
        check_device(dev).map(|_| ())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxSetFlags(dev: CUdevice, flags: c_uint) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuDevicePrimaryCtxSetFlags_v2(dev, flags) }
}

/// Memory pools: one default pool per device, a handle that only names the device.
const POOL_BASE: usize = 0x9001_0000;

fn pool_handle(dev: CUdevice) -> *mut c_void {
    (POOL_BASE + dev as usize * 0x10) as *mut c_void
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetDefaultMemPool(
    pool: *mut *mut c_void,
    dev: CUdevice,
) -> CUresult {
    ffi("cuDeviceGetDefaultMemPool", || {
        check_device(dev)?;
        // SAFETY: null checked by `put`.
        unsafe { put(pool, pool_handle(dev)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetMemPool(pool: *mut *mut c_void, dev: CUdevice) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuDeviceGetDefaultMemPool(pool, dev) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceSetMemPool(dev: CUdevice, _pool: *mut c_void) -> CUresult {
    ffi("cuDeviceSetMemPool", || check_device(dev).map(|_| ()))
}

/// `cuMemPoolSetAttribute(pool, attr, void *value)`: accepted and ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemPoolSetAttribute(
    _pool: *mut c_void,
    _attr: c_int,
    value: *mut c_void,
) -> CUresult {
    ffi("cuMemPoolSetAttribute", || {
        platform()?;
        non_null(value)
    })
}

/// `cuMemPoolGetAttribute`: the reuse flags (1–3) are `int` 1, the byte counts (4–8) `cuuint64_t` 0
/// (cuda.h 12.x types; values a guess: nothing is pooled).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemPoolGetAttribute(
    _pool: *mut c_void,
    attr: c_int,
    value: *mut c_void,
) -> CUresult {
    ffi("cuMemPoolGetAttribute", || {
        platform()?;
        non_null(value)?;
        // SAFETY: checked non-null; the type follows the attribute.
        unsafe {
            match attr {
                1..=3 => put(value.cast::<c_int>(), 1),
                4..=8 => put(value.cast::<u64>(), 0),
                _ => Err(CUDA_ERROR_INVALID_VALUE),
            }
        }
    })
}

/// `cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)`: NCCL 2.32 makes its
/// own pool at init (FACTS.md: "memory pools (2.32)"). A pool is only a name here: its
/// allocations come from `cuMemAllocFromPoolAsync`, allocated at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemPoolCreate(pool: *mut *mut c_void, props: *const c_void) -> CUresult {
    ffi("cuMemPoolCreate", || {
        non_null(props)?;
        platform()?;
        // SAFETY: null checked by `put`.
        unsafe { put(pool, crate::next_handle() as *mut c_void) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemPoolDestroy(pool: *mut c_void) -> CUresult {
    ffi("cuMemPoolDestroy", || {
        platform()?;
        non_null(pool)
    })
}

/// `cuMemPoolSetAccess(pool, const CUmemAccessDesc *map, size_t count)`: every device may
/// always access everything here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemPoolSetAccess(
    pool: *mut c_void,
    map: *const c_void,
    count: usize,
) -> CUresult {
    ffi("cuMemPoolSetAccess", || {
        platform()?;
        non_null(pool)?;
        if count > 0 {
            non_null(map)?;
        }
        Ok(())
    })
}

/// `cuMemPoolGetAccess(CUmemAccess_flags *flags, pool, CUmemLocation *location)`: read-write (3).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemPoolGetAccess(
    flags: *mut c_int,
    pool: *mut c_void,
    location: *const c_void,
) -> CUresult {
    ffi("cuMemPoolGetAccess", || {
        platform()?;
        non_null(pool)?;
        non_null(location)?;
        // SAFETY: null checked by `put`.
        unsafe { put(flags, 3) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemPoolTrimTo(
    _pool: *mut c_void,
    _min_bytes_to_keep: usize,
) -> CUresult {
    ffi("cuMemPoolTrimTo", || platform().map(|_| ()))
}

/// Stream-ordered allocation: allocated at once (a CPU does not need to wait).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    stream: CUstream,
) -> CUresult {
    ffi("cuMemAllocAsync", || {
        non_null(dptr)?;
        let dev = stream_device(stream)?;
        let addr = memory::allocate(bytesize, Some(dev))?;
        // SAFETY: checked non-null.
        unsafe { put(dptr, addr as CUdeviceptr) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocFromPoolAsync(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    _pool: *mut c_void,
    stream: CUstream,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuMemAllocAsync(dptr, bytesize, stream) }
}

/// Freed when the stream reaches this point.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFreeAsync(dptr: CUdeviceptr, stream: CUstream) -> CUresult {
    ffi("cuMemFreeAsync", || {
        let s = lookup(stream)?;
        find_range(dptr as usize).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        s.enqueue(Box::new(move || {
            // The range was checked when queued; a failure here has no caller to go to (a
            // GPU would make it a sticky error of the context).
            let _ = memory::release(dptr as usize, false);
        }));
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Odds and ends

/// Writes are always flushed here (host memory).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFlushGPUDirectRDMAWrites(_target: c_int, _scope: c_int) -> CUresult {
    ffi("cuFlushGPUDirectRDMAWrites", || platform().map(|_| ()))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuProfilerStart() -> CUresult {
    CUDA_SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuProfilerStop() -> CUresult {
    CUDA_SUCCESS
}

mod contexts;
mod pointers;
mod streams;
pub use contexts::*;
pub use pointers::*;
pub use streams::*;

#[cfg(test)]
mod tests;
