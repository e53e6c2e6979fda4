//! The rest of what the CUDA runtime inside the real libnccl calls (FACTS.md, "The real libnccl
//! on a CPU machine": device, context and stream queries, stream capture, memory pools, pointer
//! attributes, peer copies). Signatures follow the NVIDIA CUDA driver API documentation
//! (cuda.h, 12.x); values that a real GPU would measure are marked as guesses.

use crate::context::{
    CUcontext, context_device, current_device, current_handle, primary_active, primary_handle,
};
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
// Contexts

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

// ---------------------------------------------------------------------------------------------
// Streams

/// A stream's flags are not kept: 0 (a guess; NCCL only passes them back when creating).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetFlags(stream: CUstream, flags: *mut c_uint) -> CUresult {
    ffi("cuStreamGetFlags", || {
        non_null(flags)?;
        lookup(stream)?;
        // SAFETY: checked non-null.
        unsafe { put(flags, 0) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetPriority(stream: CUstream, priority: *mut c_int) -> CUresult {
    ffi("cuStreamGetPriority", || {
        non_null(priority)?;
        lookup(stream)?;
        // SAFETY: checked non-null.
        unsafe { put(priority, 0) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetId(stream: CUstream, id: *mut c_ulonglong) -> CUresult {
    ffi("cuStreamGetId", || {
        non_null(id)?;
        lookup(stream)?;
        // SAFETY: checked non-null.
        unsafe { put(id, stream as usize as c_ulonglong) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetDevice(stream: CUstream, dev: *mut CUdevice) -> CUresult {
    ffi("cuStreamGetDevice", || {
        non_null(dev)?;
        let d = stream_device(stream)?;
        // SAFETY: checked non-null.
        unsafe { put(dev, d) }
    })
}

/// v1 (CUDA 9.2): the primary context of the stream's device (streams of a created context
/// also answer its device's primary context: a simplification).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetCtx(stream: CUstream, pctx: *mut CUcontext) -> CUresult {
    ffi("cuStreamGetCtx", || {
        non_null(pctx)?;
        let d = stream_device(stream)?;
        let h = primary_handle(d)?;
        // SAFETY: checked non-null.
        unsafe { put(pctx, h as CUcontext) }
    })
}

/// v2 (CUDA 12.5): `(stream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)`; never a green context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetCtx_v2(
    stream: CUstream,
    pctx: *mut CUcontext,
    pgreen: *mut *mut c_void,
) -> CUresult {
    ffi("cuStreamGetCtx_v2", || {
        let d = stream_device(stream)?;
        let h = primary_handle(d)?;
        // SAFETY: each written only when non-null.
        unsafe {
            if !pctx.is_null() {
                pctx.write(h as CUcontext);
            }
            if !pgreen.is_null() {
                pgreen.write(std::ptr::null_mut());
            }
        }
        Ok(())
    })
}

type StreamCallback = Option<unsafe extern "C" fn(CUstream, CUresult, *mut c_void)>;

/// `cuStreamAddCallback(stream, callback(stream, status, userData), userData, flags)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamAddCallback(
    stream: CUstream,
    callback: StreamCallback,
    user_data: *mut c_void,
    flags: c_uint,
) -> CUresult {
    ffi("cuStreamAddCallback", || {
        let cb = callback.ok_or(CUDA_ERROR_INVALID_VALUE)?;
        if flags != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let s = lookup(stream)?;
        let data = crate::stream::SendPtr(user_data);
        let sh = crate::stream::SendPtr(stream);
        s.enqueue(Box::new(move || {
            let (data, sh) = (data, sh);
            // SAFETY: the caller's callback with the caller's data.
            unsafe { cb(sh.0, CUDA_SUCCESS, data.0) }
        }));
        Ok(())
    })
}

/// Streams never capture here: status `CU_STREAM_CAPTURE_STATUS_NONE` (0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamIsCapturing(stream: CUstream, status: *mut c_int) -> CUresult {
    ffi("cuStreamIsCapturing", || {
        non_null(status)?;
        lookup(stream)?;
        // SAFETY: checked non-null.
        unsafe { put(status, 0) }
    })
}

/// Writes "not capturing" and zeroes the optional outputs.
///
/// # Safety
/// Each pointer is null or valid for its write.
unsafe fn capture_info(
    stream: CUstream,
    status: *mut c_int,
    id: *mut u64,
    graph: *mut *mut c_void,
    deps: *mut *const c_void,
    edges: *mut *const c_void,
    num_deps: *mut usize,
) -> CuResult {
    non_null(status)?;
    lookup(stream)?;
    // SAFETY: each written only when non-null, as the caller vouches.
    unsafe {
        status.write(0);
        if !id.is_null() {
            id.write(0);
        }
        if !graph.is_null() {
            graph.write(std::ptr::null_mut());
        }
        if !deps.is_null() {
            deps.write(std::ptr::null());
        }
        if !edges.is_null() {
            edges.write(std::ptr::null());
        }
        if !num_deps.is_null() {
            num_deps.write(0);
        }
    }
    Ok(())
}

/// v1 (CUDA 10.1): `(stream, CUstreamCaptureStatus *status, cuuint64_t *id)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetCaptureInfo(
    stream: CUstream,
    status: *mut c_int,
    id: *mut u64,
) -> CUresult {
    let n = std::ptr::null_mut();
    // SAFETY: the caller's pointers; the rest null.
    ffi("cuStreamGetCaptureInfo", || unsafe {
        capture_info(stream, status, id, n, n.cast(), n.cast(), n.cast())
    })
}

/// v2 (CUDA 11.3): `(stream, status*, id*, CUgraph *graph, const CUgraphNode **deps, size_t
/// *numDeps)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetCaptureInfo_v2(
    stream: CUstream,
    status: *mut c_int,
    id: *mut u64,
    graph: *mut *mut c_void,
    deps: *mut *const c_void,
    num_deps: *mut usize,
) -> CUresult {
    // SAFETY: the caller's pointers.
    ffi("cuStreamGetCaptureInfo_v2", || unsafe {
        capture_info(
            stream,
            status,
            id,
            graph,
            deps,
            std::ptr::null_mut(),
            num_deps,
        )
    })
}

/// v3 (CUDA 12.3): v2 plus `const CUgraphEdgeData **edgeData` before `numDeps`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetCaptureInfo_v3(
    stream: CUstream,
    status: *mut c_int,
    id: *mut u64,
    graph: *mut *mut c_void,
    deps: *mut *const c_void,
    edges: *mut *const c_void,
    num_deps: *mut usize,
) -> CUresult {
    // SAFETY: the caller's pointers.
    ffi("cuStreamGetCaptureInfo_v3", || unsafe {
        capture_info(stream, status, id, graph, deps, edges, num_deps)
    })
}

thread_local! {
    static CAPTURE_MODE: Cell<c_int> = const { Cell::new(0) };
}

/// `cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)`: swaps the thread's mode.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuThreadExchangeStreamCaptureMode(mode: *mut c_int) -> CUresult {
    ffi("cuThreadExchangeStreamCaptureMode", || {
        non_null(mode)?;
        // SAFETY: checked non-null.
        let new = unsafe { mode.read() };
        if !(0..=2).contains(&new) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let old = CAPTURE_MODE.with(|m| m.replace(new));
        // SAFETY: checked non-null.
        unsafe { put(mode, old) }
    })
}

// ---------------------------------------------------------------------------------------------
// Memory: pointer attributes, peer copies, 16-bit fills

/// Writes one `CUpointer_attribute` (cuda.h 12.x numbering) for `ptr`; unknown memory gets
/// zeroes, as `cuPointerGetAttributes` documents. Booleans are written as one byte (a guess
/// that avoids writing past a `bool`).
///
/// # Safety
/// `data` must be valid for the attribute's type.
unsafe fn pointer_attribute(attr: c_int, ptr: usize, data: *mut c_void) -> CuResult {
    let r = find_range(ptr);
    let dev = r.as_ref().and_then(|r| r.device);
    let known = r.is_some();
    // SAFETY (whole body): the caller vouches for `data`'s type.
    unsafe {
        match attr {
            1 => {
                let ctx = match dev {
                    Some(d) => primary_handle(d)? as CUcontext,
                    None => std::ptr::null_mut(),
                };
                data.cast::<CUcontext>().write(ctx)
            }
            // MEMORY_TYPE: HOST 1, DEVICE 2.
            2 => data.cast::<c_uint>().write(match (&r, dev) {
                (_, Some(_)) => 2,
                (Some(_), None) => 1,
                (None, None) => 0,
            }),
            3 | 4 => data.cast::<usize>().write(if known { ptr } else { 0 }),
            5 => data.cast::<[u64; 2]>().write([0; 2]),
            6 | 8 | 10 | 13 | 15 => data.cast::<u8>().write(match attr {
                6 => 1,
                10 => u8::from(r.as_ref().is_some_and(|r| r.memfd.is_some())),
                13 | 15 => u8::from(known),
                _ => 0,
            }),
            7 | 20 => data
                .cast::<u64>()
                .write(r.as_ref().map_or(0, |r| r.base as u64)),
            9 => data.cast::<c_int>().write(dev.unwrap_or(-2)),
            11 | 19 => data.cast::<usize>().write(r.as_ref().map_or(0, |r| r.base)),
            12 | 18 => data.cast::<usize>().write(r.as_ref().map_or(0, |r| r.size)),
            14 => data.cast::<u64>().write(0),
            16 => data.cast::<c_uint>().write(if known { 3 } else { 0 }),
            17 => data.cast::<*mut c_void>().write(std::ptr::null_mut()),
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        }
    }
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuPointerGetAttribute(
    data: *mut c_void,
    attr: c_int,
    ptr: CUdeviceptr,
) -> CUresult {
    ffi("cuPointerGetAttribute", || {
        non_null(data)?;
        platform()?;
        if find_range(ptr as usize).is_none() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: the caller passes storage of the attribute's type.
        unsafe { pointer_attribute(attr, ptr as usize, data) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuPointerGetAttributes(
    num: c_uint,
    attrs: *const c_int,
    data: *mut *mut c_void,
    ptr: CUdeviceptr,
) -> CUresult {
    ffi("cuPointerGetAttributes", || {
        platform()?;
        if num == 0 || attrs.is_null() || data.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        for i in 0..num as usize {
            // SAFETY: the caller passes `num` attributes and `num` destinations.
            unsafe {
                let d = *data.add(i);
                if !d.is_null() {
                    pointer_attribute(*attrs.add(i), ptr as usize, d)?;
                }
            }
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuPointerSetAttribute(
    _value: *const c_void,
    _attr: c_int,
    ptr: CUdeviceptr,
) -> CUresult {
    ffi("cuPointerSetAttribute", || {
        platform()?;
        find_range(ptr as usize)
            .map(|_| ())
            .ok_or(CUDA_ERROR_INVALID_VALUE)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyPeer(
    dst: CUdeviceptr,
    _dst_ctx: CUcontext,
    src: CUdeviceptr,
    _src_ctx: CUcontext,
    n: usize,
) -> CUresult {
    ffi("cuMemcpyPeer", || {
        memory::now(memory::copy(dst as usize, src as usize, n))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyPeerAsync(
    dst: CUdeviceptr,
    _dst_ctx: CUcontext,
    src: CUdeviceptr,
    _src_ctx: CUcontext,
    n: usize,
    stream: CUstream,
) -> CUresult {
    ffi("cuMemcpyPeerAsync", || {
        memory::queued(memory::copy(dst as usize, src as usize, n), stream)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD16_v2(dst: CUdeviceptr, us: c_ushort, n: usize) -> CUresult {
    ffi("cuMemsetD16_v2", || {
        memory::now(memory::Op::Set16 {
            dst: dst as usize,
            v: us,
            n,
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD16Async(
    dst: CUdeviceptr,
    us: c_ushort,
    n: usize,
    stream: CUstream,
) -> CUresult {
    ffi("cuMemsetD16Async", || {
        memory::queued(
            memory::Op::Set16 {
                dst: dst as usize,
                v: us,
                n,
            },
            stream,
        )
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

#[cfg(test)]
mod tests;
