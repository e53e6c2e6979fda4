//! The exported NCCL API (`nccl.h`'s prototypes). Every export's `# Safety` contract is that
//! of the NCCL function of the same name; none lets a panic unwind into C.

use crate::call::{fail, fault_set, lookup};
use crate::comm::{self, Comm};
use crate::init::{bootstrap_iface, comm_free, init};
use crate::log::{self, sys};
use crate::texts;
use crate::{
    INPROGRESS, INTERNAL_ERROR, INVALID_ARGUMENT, SUCCESS, bootstrap, cuda, group, ids, version,
};
use nccl_smoke_fault::{Kind, Where};
use std::ffi::{c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

mod ops;

const MARKER: &str = concat!(
    "nccl-smoke simulated NCCL ",
    env!("CARGO_PKG_VERSION"),
    "\0"
);

/// `ncclUniqueId`: 128 bytes, passed by value to init as in nccl.h.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    pub internal: [u8; 128],
}

/// Runs an API body without letting a panic unwind into C.
fn guard(body: impl FnOnce() -> u32) -> u32 {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(INTERNAL_ERROR)
}

/// `const char *ncclSmokeSimulation(void)`: identifies the simulation.
#[unsafe(no_mangle)]
pub extern "C" fn ncclSmokeSimulation() -> *const c_char {
    MARKER.as_ptr().cast()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetVersion(out: *mut c_int) -> u32 {
    guard(|| {
        if out.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: checked non-null; the caller's int.
        unsafe { *out = version::code() };
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclGetErrorString(result: u32) -> *const c_char {
    let s: &'static str = match result {
        0 => "no error\0",
        1 => "unhandled cuda error (run with NCCL_DEBUG=INFO for details)\0",
        2 => "unhandled system error (run with NCCL_DEBUG=INFO for details)\0",
        3 => "internal error - please report this issue to the NCCL developers\0",
        4 => "invalid argument (run with NCCL_DEBUG=WARN for details)\0",
        5 => "invalid usage (run with NCCL_DEBUG=WARN for details)\0",
        6 => "remote process exited or there was a network error\0",
        7 => "NCCL operation in progress\0",
        _ => "unknown result code\0",
    };
    s.as_ptr().cast()
}

/// The text of the last WARN (the library's, not the communicator's: NCCL keeps one).
#[unsafe(no_mangle)]
pub extern "C" fn ncclGetLastError(_comm: *mut c_void) -> *const c_char {
    log::last_error_ptr()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetUniqueId(out: *mut UniqueId) -> u32 {
    guard(|| {
        if out.is_null() {
            return fail(texts::null_arg("ncclGetUniqueId", "out"));
        }
        let faults = match fault_set() {
            Ok(f) => f,
            Err(code) => return code,
        };
        let v = version::code();
        let dev = cuda::current_device().unwrap_or(0);
        match faults
            .find(Where::UniqueId, nccl_smoke_fault::rank_from_env())
            .map(|f| f.kind)
        {
            Some(Kind::Crash) => std::process::abort(),
            // No communicator exists to abort: this hangs for good.
            Some(Kind::Hang) => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
            Some(Kind::Error) => return fail(texts::no_interface(v)),
            _ => {}
        }
        let iface = match bootstrap_iface(v, dev) {
            Ok(i) => i,
            Err(code) => return code,
        };
        let nonce = ids::random_u64();
        let root = match bootstrap::start_root(iface.addr, nonce, v) {
            Ok(r) => r,
            Err(e) => return fail(texts::listen_failed(&bootstrap::strerror(&e))),
        };
        // SAFETY: checked non-null; the caller's ncclUniqueId.
        unsafe { (*out).internal = ids::encode_id(root, nonce) };
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRank(
    comm: *mut *mut c_void,
    nranks: c_int,
    id: UniqueId,
    rank: c_int,
) -> u32 {
    // SAFETY: forwarded contract.
    guard(|| unsafe { init(comm, nranks, id.internal, rank, None) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRankConfig(
    comm: *mut *mut c_void,
    nranks: c_int,
    id: UniqueId,
    rank: c_int,
    config: *mut c_void,
) -> u32 {
    // SAFETY: forwarded contract; config is NULL or an ncclConfig_t.
    guard(|| unsafe { init(comm, nranks, id.internal, rank, Some(config as *const u8)) })
}

/// Collective over `comm`: one new communicator per color (see `split`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommSplit(
    comm: *mut c_void,
    color: c_int,
    key: c_int,
    newcomm: *mut *mut c_void,
    config: *mut c_void,
) -> u32 {
    // SAFETY: forwarded contract; config is NULL or an ncclConfig_t.
    guard(|| unsafe { crate::split::split(comm, color, key, newcomm, config as *const u8) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommGetAsyncError(comm: *mut c_void, out: *mut u32) -> u32 {
    guard(|| {
        let c = match lookup(comm, "ncclGetAsyncError") {
            Ok(c) => c,
            Err(r) => return fail(r),
        };
        if out.is_null() {
            return fail(texts::null_arg("ncclGetAsyncError", "asyncError"));
        }
        // SAFETY: checked non-null; the caller's ncclResult_t.
        unsafe { *out = c.async_error() };
        SUCCESS
    })
}

/// Writes one integer property of a communicator through `out`.
fn comm_int(
    comm: *mut c_void,
    out: *mut c_int,
    op: &str,
    what: &str,
    read: fn(&Comm) -> c_int,
) -> u32 {
    guard(|| {
        let c = match lookup(comm, op) {
            Ok(c) => c,
            Err(r) => return fail(r),
        };
        if out.is_null() {
            return fail(texts::null_arg(op, what));
        }
        // The init thread must be joined first (`ncclCommEnsureReady` in ncclCommCount and
        // its siblings, src/init.cc v2.19.3-1 and v2.28.3-1).
        if c.async_error() == INPROGRESS {
            return fail(texts::not_ready(c.id.version));
        }
        // SAFETY: checked non-null; the caller's int.
        unsafe { *out = read(&c) };
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCount(comm: *mut c_void, count: *mut c_int) -> u32 {
    comm_int(comm, count, "CommCount", "count", |c| c.id.nranks as c_int)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommUserRank(comm: *mut c_void, rank: *mut c_int) -> u32 {
    comm_int(comm, rank, "CommUserRank", "rank", |c| c.id.rank as c_int)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCuDevice(comm: *mut c_void, device: *mut c_int) -> u32 {
    comm_int(comm, device, "CommCuDevice", "device", |c| c.id.dev)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommAbort(comm: *mut c_void) -> u32 {
    guard(|| {
        if comm.is_null() {
            return SUCCESS;
        }
        let Some(c) = comm_free(comm) else {
            return fail(texts::corrupted());
        };
        c.quiesce();
        log::info(
            c.id.dev,
            sys::INIT,
            &format!("{} - Abort COMPLETE", c.describe()),
        );
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommFinalize(comm: *mut c_void) -> u32 {
    guard(|| {
        let c = match lookup(comm, "ncclCommFinalize") {
            Ok(c) => c,
            Err(r) => return fail(r),
        };
        match c.async_error() {
            INPROGRESS => return fail(texts::not_ready(c.id.version)),
            SUCCESS => {}
            e => return e,
        }
        // A second finalize is refused (`finalizeCalled`, `ncclCommFinalize`, src/init.cc).
        if c.finalize_called
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return INVALID_ARGUMENT;
        }
        // Finalize is an async job in every version: a non-blocking communicator returns
        // ncclInProgress and its state says when the job is done (`ncclCommFinalize`, v2.19.3-1
        // and v2.28.3-1, through ncclAsyncLaunch and ncclGroupEndInternal).
        let job = c.clone();
        let work = move || -> u32 {
            match job.fault(Where::Finalize) {
                Some(Kind::Error) => {
                    let r = texts::finalize(job.id.version, job.addr(), job.id.rank);
                    r.emit(job.id.dev);
                    return r.code;
                }
                Some(Kind::Hang) => {
                    job.hang();
                    return INTERNAL_ERROR;
                }
                Some(Kind::Crash) => std::process::abort(),
                _ => {}
            }
            job.drain();
            match job.async_error() {
                INPROGRESS => SUCCESS,
                e => e,
            }
        };
        if c.blocking {
            let rc = work();
            c.fail(rc);
            return rc;
        }
        c.set_in_progress();
        match comm::async_job("nccl-sim-finalize", vec![c], work) {
            Ok(()) => INPROGRESS,
            Err(_) => INTERNAL_ERROR,
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommDestroy(comm: *mut c_void) -> u32 {
    guard(|| {
        if comm.is_null() {
            return SUCCESS;
        }
        let Some(c) = comm_free(comm) else {
            return fail(texts::corrupted());
        };
        if c.async_error() != INPROGRESS {
            c.drain();
        }
        c.quiesce();
        log::info(
            c.id.dev,
            sys::INIT,
            &format!("{} - Destroy COMPLETE", c.describe()),
        );
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclGroupStart() -> u32 {
    guard(group::start)
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclGroupEnd() -> u32 {
    guard(group::end)
}

#[cfg(test)]
mod tests {
    use super::ops::ncclAllReduce;
    use super::*;
    use std::ffi::CStr;

    fn text(code: u32) -> String {
        // SAFETY: static NUL-terminated strings.
        unsafe { CStr::from_ptr(ncclGetErrorString(code)) }
            .to_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn error_strings_are_nccls() {
        assert_eq!(text(0), "no error");
        assert_eq!(
            text(1),
            "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"
        );
        assert_eq!(
            text(2),
            "unhandled system error (run with NCCL_DEBUG=INFO for details)"
        );
        assert_eq!(
            text(3),
            "internal error - please report this issue to the NCCL developers"
        );
        assert_eq!(
            text(4),
            "invalid argument (run with NCCL_DEBUG=WARN for details)"
        );
        assert_eq!(
            text(5),
            "invalid usage (run with NCCL_DEBUG=WARN for details)"
        );
        assert_eq!(
            text(6),
            "remote process exited or there was a network error"
        );
        assert_eq!(text(7), "NCCL operation in progress");
        assert_eq!(text(8), "unknown result code");
        assert_eq!(text(u32::MAX), "unknown result code");
    }

    #[test]
    fn the_marker_and_the_version() {
        // SAFETY: a static NUL-terminated string.
        let m = unsafe { CStr::from_ptr(ncclSmokeSimulation()) }
            .to_str()
            .unwrap();
        assert_eq!(
            m,
            concat!("nccl-smoke simulated NCCL ", env!("CARGO_PKG_VERSION"))
        );
        let mut v = 0;
        // SAFETY: valid out-pointer, then NULL.
        unsafe {
            assert_eq!(ncclGetVersion(&mut v), SUCCESS);
            assert_eq!(ncclGetVersion(std::ptr::null_mut()), INVALID_ARGUMENT);
        }
        assert_eq!(v, version::code());
    }

    #[test]
    fn bad_handles_are_refused_not_followed() {
        let mut n = 0;
        let mut err = 0u32;
        // SAFETY: NULL and a made-up handle; neither is dereferenced.
        unsafe {
            assert_eq!(
                ncclCommCount(std::ptr::null_mut(), &mut n),
                INVALID_ARGUMENT
            );
            assert_eq!(ncclCommCount(8 as *mut c_void, &mut n), INVALID_ARGUMENT);
            assert_eq!(
                ncclCommGetAsyncError(8 as *mut c_void, &mut err),
                INVALID_ARGUMENT
            );
            assert_eq!(ncclCommAbort(std::ptr::null_mut()), SUCCESS);
            assert_eq!(ncclCommDestroy(std::ptr::null_mut()), SUCCESS);
            assert_eq!(ncclCommAbort(8 as *mut c_void), INVALID_ARGUMENT);
            assert_eq!(
                ncclAllReduce(
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    1,
                    7,
                    0,
                    std::ptr::null_mut(),
                    std::ptr::null_mut()
                ),
                INVALID_ARGUMENT
            );
        }
    }
}
