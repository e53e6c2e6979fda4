//! Protection domains and memory regions. A region's keys are only numbers: a peer's RDMA
//! reaches the address it is given (see `post`).

use crate::device::context_of;
use crate::fabric::{dev_of, pd_dev, set_errno, verb_fault};
use crate::sys::*;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

static KEYS: AtomicU32 = AtomicU32::new(0x100);

#[repr(C)]
pub struct Pd {
    pd: ibv_pd,
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_alloc_pd", unsafe { dev_of(ctx) }) {
        set_errno(e);
        return std::ptr::null_mut();
    }
    let pd = Box::into_raw(Box::new(Pd {
        pd: ibv_pd {
            context: ctx,
            handle: KEYS.fetch_add(1, Ordering::Relaxed),
        },
    }));
    // SAFETY: just allocated.
    unsafe { &raw mut (*pd).pd }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_dealloc_pd", unsafe { pd_dev(pd) }) {
        return e;
    }
    // SAFETY: allocated by ibv_alloc_pd (pd is the first field).
    drop(unsafe { Box::from_raw(pd.cast::<Pd>()) });
    0
}

fn new_mr(pd: *mut ibv_pd, addr: *mut c_void, length: usize) -> *mut ibv_mr {
    let key = KEYS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: pd is ours.
    let context = unsafe { (*pd).context };
    Box::into_raw(Box::new(ibv_mr {
        context,
        pd,
        addr,
        length,
        handle: key,
        lkey: key,
        rkey: key,
    }))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    _access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_reg_mr", unsafe { pd_dev(pd) }) {
        set_errno(e);
        return std::ptr::null_mut();
    }
    new_mr(pd, addr, length)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    _iova: u64,
    _access: u32,
) -> *mut ibv_mr {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_reg_mr_iova2", unsafe { pd_dev(pd) }) {
        set_errno(e);
        return std::ptr::null_mut();
    }
    new_mr(pd, addr, length)
}

/// DMA-BUF registration, on an HCA whose spec says `dmabuf`: the region is the GPU range the
/// descriptor exports, at `iova` (NCCL passes the buffer's address there: NVIDIA/nccl v2.19.3-1
/// `src/transport/net_ib.cc`, `ncclIbRegMrDmaBuf`), so a peer's RDMA reaches it as any other
/// region. Without `dmabuf` it fails with `EOPNOTSUPP` (rdma-core's answer when the kernel
/// lacks the command), which NCCL's probe (`ncclIbDmaBufSupport`, fd -1) reads as "no
/// DMA-BUF"; a descriptor that is not open is `EBADF`, which the probe reads as "supported".
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_reg_dmabuf_mr(
    pd: *mut ibv_pd,
    _offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    _access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    let refused = match verb_fault("ibv_reg_dmabuf_mr", unsafe { pd_dev(pd) }) {
        Err(e) => Some(e),
        // SAFETY: pd comes from ibv_alloc_pd on a context of ibv_open_device.
        Ok(())
            if pd.is_null()
                || !crate::device::hca(unsafe { context_of((*pd).context) }.device).dmabuf =>
        {
            Some(libc::EOPNOTSUPP)
        }
        // SAFETY: F_GETFD only asks whether the descriptor is open.
        Ok(()) if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 => Some(libc::EBADF),
        Ok(()) => None,
    };
    match refused {
        Some(e) => {
            set_errno(e);
            std::ptr::null_mut()
        }
        None => new_mr(pd, iova as usize as *mut c_void, length),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    if let Err(e) = verb_fault(
        "ibv_dereg_mr",
        unsafe { mr.as_ref() }.and_then(|m| unsafe { dev_of(m.context) }),
    ) {
        return e;
    }
    // SAFETY: allocated by new_mr.
    drop(unsafe { Box::from_raw(mr) });
    0
}
