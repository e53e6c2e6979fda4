//! Contexts: primary contexts (one per device, reference counted), created contexts, and the
//! per-thread context stack, as in CUDA.

use crate::device::{CUdevice, check_device, platform};
use crate::error::*;
use crate::fault;
use nccl_smoke_fault::Where;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_uint, c_void};
use std::sync::{LazyLock, Mutex, MutexGuard};

pub type CUcontext = *mut c_void;

#[derive(Debug, Clone, Copy)]
struct Ctx {
    device: CUdevice,
    primary: bool,
}

#[derive(Default)]
struct Table {
    /// Live contexts by handle.
    live: HashMap<usize, Ctx>,
    /// Primary context of each device: (handle, retain count).
    primary: HashMap<CUdevice, (usize, u32)>,
}

static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(Mutex::default);

fn table() -> MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

thread_local! {
    /// This thread's context stack; the top is the current context.
    static STACK: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// This thread's context stack, unless the thread is exiting and its storage is gone (a
/// thread of the real libnccl calls `cuCtxGetDevice` from a destructor at its exit, seen with
/// NCCL 2.28.9): then `CUDA_ERROR_INVALID_CONTEXT`, as for a thread without a context.
fn with_stack<R>(f: impl FnOnce(&mut Vec<usize>) -> R) -> CuResult<R> {
    STACK
        .try_with(|s| f(&mut s.borrow_mut()))
        .map_err(|_| CUDA_ERROR_INVALID_CONTEXT)
}

pub(crate) fn current_handle() -> Option<usize> {
    with_stack(|s| s.last().copied()).ok().flatten()
}

fn live(handle: usize) -> CuResult<Ctx> {
    table()
        .live
        .get(&handle)
        .copied()
        .ok_or(CUDA_ERROR_INVALID_CONTEXT)
}

/// The device of this thread's current context; `CUDA_ERROR_INVALID_CONTEXT` when there is
/// none (or it was destroyed).
/// The device of a live context handle.
pub(crate) fn context_device(handle: usize) -> CuResult<CUdevice> {
    Ok(live(handle)?.device)
}

/// The primary context of `dev`, created (inactive, not retained) when it does not exist yet.
/// Source: ZLUDA's documentation of CUDART_INTERFACE slot 2 (vosen/ZLUDA `dark_api/`), whose
/// implementation hands back the primary context without retaining it.
pub(crate) fn primary_handle(dev: CUdevice) -> CuResult<usize> {
    check_device(dev)?;
    let mut t = table();
    let (handle, _) = *t
        .primary
        .entry(dev)
        .or_insert_with(|| (crate::next_handle(), 0));
    t.live.insert(
        handle,
        Ctx {
            device: dev,
            primary: true,
        },
    );
    Ok(handle)
}

/// Whether the primary context of `dev` is retained (`cuDevicePrimaryCtxGetState`'s "active").
pub(crate) fn primary_active(dev: CUdevice) -> bool {
    table().primary.get(&dev).is_some_and(|&(_, refs)| refs > 0)
}

pub fn current_device() -> CuResult<CUdevice> {
    platform()?;
    let h = current_handle().ok_or(CUDA_ERROR_INVALID_CONTEXT)?;
    Ok(live(h)?.device)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) -> CUresult {
    ffi("cuDevicePrimaryCtxRetain", || {
        non_null(pctx)?;
        check_device(dev)?;
        fault::strike(Where::Device, CUDA_ERROR_INVALID_DEVICE)?;
        let handle = {
            let mut t = table();
            let (handle, refs) = *t
                .primary
                .entry(dev)
                .or_insert_with(|| (crate::next_handle(), 0));
            t.primary.insert(dev, (handle, refs + 1));
            t.live.insert(
                handle,
                Ctx {
                    device: dev,
                    primary: true,
                },
            );
            handle
        };
        // SAFETY: checked non-null.
        unsafe { put(pctx, handle as CUcontext) }
    })
}

fn primary_release(dev: CUdevice) -> CuResult {
    check_device(dev)?;
    let mut t = table();
    match t.primary.get_mut(&dev) {
        Some((_, refs)) if *refs > 0 => {
            *refs -= 1;
            Ok(())
        }
        _ => Err(CUDA_ERROR_INVALID_CONTEXT),
    }
}

fn primary_reset(dev: CUdevice) -> CuResult {
    check_device(dev)?;
    if let Some((_, refs)) = table().primary.get_mut(&dev) {
        *refs = 0;
    }
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease(dev: CUdevice) -> CUresult {
    ffi("cuDevicePrimaryCtxRelease", || primary_release(dev))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) -> CUresult {
    ffi("cuDevicePrimaryCtxRelease_v2", || primary_release(dev))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxReset(dev: CUdevice) -> CUresult {
    ffi("cuDevicePrimaryCtxReset", || primary_reset(dev))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxReset_v2(dev: CUdevice) -> CUresult {
    ffi("cuDevicePrimaryCtxReset_v2", || primary_reset(dev))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxCreate_v2(
    pctx: *mut CUcontext,
    _flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    ffi("cuCtxCreate_v2", || {
        non_null(pctx)?;
        check_device(dev)?;
        fault::strike(Where::Device, CUDA_ERROR_INVALID_DEVICE)?;
        let handle = crate::next_handle();
        table().live.insert(
            handle,
            Ctx {
                device: dev,
                primary: false,
            },
        );
        with_stack(|s| s.push(handle))?;
        // SAFETY: checked non-null.
        unsafe { put(pctx, handle as CUcontext) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxDestroy_v2(ctx: CUcontext) -> CUresult {
    ffi("cuCtxDestroy_v2", || {
        platform()?;
        let h = ctx as usize;
        {
            let mut t = table();
            match t.live.get(&h) {
                Some(c) if !c.primary => {
                    t.live.remove(&h);
                }
                _ => return Err(CUDA_ERROR_INVALID_CONTEXT),
            }
        }
        // A thread at its exit has no stack left to clean.
        let _ = with_stack(|s| s.retain(|&c| c != h));
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxSetCurrent(ctx: CUcontext) -> CUresult {
    ffi("cuCtxSetCurrent", || {
        platform()?;
        let h = ctx as usize;
        if h == 0 {
            with_stack(|s| s.pop())?;
            return Ok(());
        }
        live(h)?;
        with_stack(|s| {
            s.pop();
            s.push(h);
        })?;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetCurrent(pctx: *mut CUcontext) -> CUresult {
    ffi("cuCtxGetCurrent", || {
        non_null(pctx)?;
        platform()?;
        let h = current_handle().unwrap_or(0);
        // SAFETY: checked non-null.
        unsafe { put(pctx, h as CUcontext) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetDevice(device: *mut CUdevice) -> CUresult {
    ffi("cuCtxGetDevice", || {
        non_null(device)?;
        let d = current_device()?;
        // SAFETY: checked non-null.
        unsafe { put(device, d) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxPushCurrent_v2(ctx: CUcontext) -> CUresult {
    ffi("cuCtxPushCurrent_v2", || {
        platform()?;
        let h = ctx as usize;
        live(h)?;
        with_stack(|s| s.push(h))?;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxPopCurrent_v2(pctx: *mut CUcontext) -> CUresult {
    ffi("cuCtxPopCurrent_v2", || {
        platform()?;
        let h = with_stack(|s| s.pop())?.ok_or(CUDA_ERROR_INVALID_CONTEXT)?;
        if !pctx.is_null() {
            // SAFETY: non-null out-pointer from the caller.
            unsafe { pctx.write(h as CUcontext) };
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::init_for_tests;
    use crate::stream::cuCtxSynchronize;
    use std::ptr::null_mut;

    #[test]
    fn primary_context_and_stack() {
        init_for_tests();
        // SAFETY: valid out-pointers throughout.
        unsafe {
            let mut dev = -1;
            assert_eq!(cuCtxGetDevice(&mut dev), CUDA_ERROR_INVALID_CONTEXT);
            let mut cur: CUcontext = null_mut();
            assert_eq!(cuCtxGetCurrent(&mut cur), CUDA_SUCCESS);
            assert!(cur.is_null());

            let mut p2: CUcontext = null_mut();
            let mut p2b: CUcontext = null_mut();
            assert_eq!(cuDevicePrimaryCtxRetain(&mut p2, 2), CUDA_SUCCESS);
            assert_eq!(cuDevicePrimaryCtxRetain(&mut p2b, 2), CUDA_SUCCESS);
            assert_eq!(p2, p2b);
            assert_eq!(
                cuDevicePrimaryCtxRetain(&mut p2b, 42),
                CUDA_ERROR_INVALID_DEVICE
            );
            assert_eq!(cuCtxSetCurrent(p2), CUDA_SUCCESS);
            assert_eq!(cuCtxGetDevice(&mut dev), CUDA_SUCCESS);
            assert_eq!(dev, 2);

            let mut own: CUcontext = null_mut();
            assert_eq!(cuCtxCreate_v2(&mut own, 0, 5), CUDA_SUCCESS);
            assert_eq!(cuCtxGetDevice(&mut dev), CUDA_SUCCESS);
            assert_eq!(dev, 5);
            let mut popped: CUcontext = null_mut();
            assert_eq!(cuCtxPopCurrent_v2(&mut popped), CUDA_SUCCESS);
            assert_eq!(popped, own);
            assert_eq!(cuCtxGetDevice(&mut dev), CUDA_SUCCESS);
            assert_eq!(dev, 2);
            assert_eq!(cuCtxPushCurrent_v2(own), CUDA_SUCCESS);
            assert_eq!(cuCtxSynchronize(), CUDA_SUCCESS);
            assert_eq!(cuCtxDestroy_v2(own), CUDA_SUCCESS);
            assert_eq!(cuCtxGetDevice(&mut dev), CUDA_SUCCESS);
            assert_eq!(dev, 2);
            assert_eq!(cuCtxDestroy_v2(own), CUDA_ERROR_INVALID_CONTEXT);
            assert_eq!(cuCtxPushCurrent_v2(own), CUDA_ERROR_INVALID_CONTEXT);
            assert_eq!(cuCtxDestroy_v2(p2), CUDA_ERROR_INVALID_CONTEXT);

            assert_eq!(cuDevicePrimaryCtxRelease_v2(2), CUDA_SUCCESS);
            assert_eq!(cuDevicePrimaryCtxRelease(2), CUDA_SUCCESS);
            assert_eq!(cuDevicePrimaryCtxRelease_v2(2), CUDA_ERROR_INVALID_CONTEXT);
            assert_eq!(cuDevicePrimaryCtxReset_v2(2), CUDA_SUCCESS);
            assert_eq!(cuCtxSetCurrent(null_mut()), CUDA_SUCCESS);
            assert_eq!(cuCtxPopCurrent_v2(null_mut()), CUDA_ERROR_INVALID_CONTEXT);
            assert_eq!(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
        }
    }
}
