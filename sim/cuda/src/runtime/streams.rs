//! The stream and event entry points NCCL's embedded CUDA runtime asks for beyond the basic
//! ones.

use super::*;

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
