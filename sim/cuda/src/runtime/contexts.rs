//! The context entry points NCCL's embedded CUDA runtime asks for beyond the basic ones.

use super::*;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetFlags(flags: *mut c_uint) -> CUresult {
    ffi("cuCtxGetFlags", || {
        non_null(flags)?;
        current_device()?;
        // SAFETY: checked non-null.
        unsafe { put(flags, 0) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxSetFlags(_flags: c_uint) -> CUresult {
    ffi("cuCtxSetFlags", || current_device().map(|_| ()))
}

/// The context API version: 3020 for every context since CUDA 3.2 (NVIDIA docs; a guess for
/// the exact number the driver gives).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetApiVersion(ctx: CUcontext, version: *mut c_uint) -> CUresult {
    ffi("cuCtxGetApiVersion", || {
        non_null(version)?;
        ctx_or_current(ctx)?;
        // SAFETY: checked non-null.
        unsafe { put(version, 3020) }
    })
}

fn ctx_or_current(ctx: CUcontext) -> CuResult<usize> {
    platform()?;
    let h = if ctx.is_null() {
        current_handle().ok_or(CUDA_ERROR_INVALID_CONTEXT)?
    } else {
        ctx as usize
    };
    context_device(h)?;
    Ok(h)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetId(ctx: CUcontext, id: *mut c_ulonglong) -> CUresult {
    ffi("cuCtxGetId", || {
        non_null(id)?;
        let h = ctx_or_current(ctx)?;
        // SAFETY: checked non-null.
        unsafe { put(id, h as c_ulonglong) }
    })
}

/// `CUlimit` values of an H100 context with default settings (a guess for the exact numbers).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetLimit(value: *mut usize, limit: c_int) -> CUresult {
    ffi("cuCtxGetLimit", || {
        non_null(value)?;
        current_device()?;
        let v = match limit {
            0 => 1024,    // STACK_SIZE
            1 => 1 << 20, // PRINTF_FIFO_SIZE
            2 => 8 << 20, // MALLOC_HEAP_SIZE
            3 => 2,       // DEV_RUNTIME_SYNC_DEPTH
            4 => 2048,    // DEV_RUNTIME_PENDING_LAUNCH_COUNT
            5 => 32,      // MAX_L2_FETCH_GRANULARITY
            6 => 0,       // PERSISTING_L2_CACHE_SIZE
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        // SAFETY: checked non-null.
        unsafe { put(value, v) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxSetLimit(_limit: c_int, _value: usize) -> CUresult {
    ffi("cuCtxSetLimit", || current_device().map(|_| ()))
}

/// Priorities 0 (least) to -5 (greatest), as on an H100 (a guess for other GPUs).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetStreamPriorityRange(
    least: *mut c_int,
    greatest: *mut c_int,
) -> CUresult {
    ffi("cuCtxGetStreamPriorityRange", || {
        current_device()?;
        // SAFETY: each written only when non-null (both optional in CUDA).
        unsafe {
            if !least.is_null() {
                least.write(0);
            }
            if !greatest.is_null() {
                greatest.write(-5);
            }
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetCacheConfig(config: *mut c_int) -> CUresult {
    ffi("cuCtxGetCacheConfig", || {
        current_device()?;
        // SAFETY: null checked by `put`.
        unsafe { put(config, 0) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxSetCacheConfig(_config: c_int) -> CUresult {
    ffi("cuCtxSetCacheConfig", || current_device().map(|_| ()))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetSharedMemConfig(config: *mut c_int) -> CUresult {
    ffi("cuCtxGetSharedMemConfig", || {
        current_device()?;
        // SAFETY: null checked by `put`.
        unsafe { put(config, 0) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxResetPersistingL2Cache() -> CUresult {
    ffi("cuCtxResetPersistingL2Cache", || {
        current_device().map(|_| ())
    })
}

/// Peer access is always possible here; enabling it twice is an error, as in CUDA.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxEnablePeerAccess(peer: CUcontext, _flags: c_uint) -> CUresult {
    ffi("cuCtxEnablePeerAccess", || {
        let me = current_handle().ok_or(CUDA_ERROR_INVALID_CONTEXT)?;
        context_device(me)?;
        context_device(peer as usize)?;
        let mut set = PEERS.lock().unwrap_or_else(|e| e.into_inner());
        if !set.insert((me, peer as usize)) {
            return Err(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxDisablePeerAccess(peer: CUcontext) -> CUresult {
    ffi("cuCtxDisablePeerAccess", || {
        let me = current_handle().ok_or(CUDA_ERROR_INVALID_CONTEXT)?;
        let mut set = PEERS.lock().unwrap_or_else(|e| e.into_inner());
        if !set.remove(&(me, peer as usize)) {
            return Err(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
        }
        Ok(())
    })
}

static PEERS: std::sync::LazyLock<std::sync::Mutex<std::collections::HashSet<(usize, usize)>>> =
    std::sync::LazyLock::new(Default::default);

/// `cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int numParams, unsigned flags,
/// CUdevice dev)`: affinity parameters are ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxCreate_v3(
    pctx: *mut CUcontext,
    _params: *mut c_void,
    _num_params: c_int,
    flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    // SAFETY: same contract as `cuCtxCreate_v2` for what is used.
    unsafe { crate::context::cuCtxCreate_v2(pctx, flags, dev) }
}

/// `cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned flags, CUdevice dev)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxCreate_v4(
    pctx: *mut CUcontext,
    _params: *mut c_void,
    flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    // SAFETY: same contract as `cuCtxCreate_v2` for what is used.
    unsafe { crate::context::cuCtxCreate_v2(pctx, flags, dev) }
}
