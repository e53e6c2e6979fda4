//! CPU stand-in for NCCL (`libnccl.so.2`), loaded by nccl-smoke through `dlopen` exactly like
//! the real library. See `sim/README.md` for the contract.
//!
//! Same C ABI, same return codes, same log-line shapes as NCCL; data moves between processes
//! over TCP, on the caller's stream (via the driver's `cuLaunchHostFunc`), so events time the
//! operations as they would on a GPU. Every export's `# Safety` contract is that of the NCCL API
//! function of the same name.
#![allow(clippy::missing_safety_doc)]

mod comm;
mod cuda;
mod faults;
mod log;
mod net;
mod reduce;

use comm::{Comm, Op, Ptr};
use nccl_smoke_fault::{FaultSet, Kind, Where};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};
use std::net::{SocketAddrV4, TcpListener};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub(crate) const SUCCESS: u32 = 0;
pub(crate) const UNHANDLED_CUDA_ERROR: u32 = 1;
pub(crate) const SYSTEM_ERROR: u32 = 2;
pub(crate) const INTERNAL_ERROR: u32 = 3;
pub(crate) const INVALID_ARGUMENT: u32 = 4;
pub(crate) const INVALID_USAGE: u32 = 5;
pub(crate) const REMOTE_ERROR: u32 = 6;
pub(crate) const INPROGRESS: u32 = 7;

const MARKER: &str = concat!(
    "nccl-smoke simulated NCCL ",
    env!("CARGO_PKG_VERSION"),
    "\0"
);

/// `const char *ncclSmokeSimulation(void)`: identifies the simulation.
#[unsafe(no_mangle)]
pub extern "C" fn ncclSmokeSimulation() -> *const c_char {
    MARKER.as_ptr().cast()
}

/// `ncclUniqueId`: a 128-byte struct, passed by value to init as in nccl.h.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    internal: [u8; 128],
}

/// The communicator handle handed to C: a box around the shared state.
struct Handle(Arc<Comm>);

/// Runs an API body without letting a panic unwind into C.
fn guard(body: impl FnOnce() -> u32) -> u32 {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(INTERNAL_ERROR)
}

fn version_code() -> i32 {
    std::env::var("NCCL_SMOKE_SIM_NCCL_VERSION")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(22803)
}

fn version_text(code: i32) -> String {
    format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
}

fn faults() -> Result<FaultSet, u32> {
    FaultSet::from_env().map_err(|e| {
        log::warn(0, "init.cc:1", &e.to_string());
        INVALID_USAGE
    })
}

fn apply_hang_or_crash(kind: Option<Kind>) {
    match kind {
        Some(Kind::Crash) => std::process::abort(),
        Some(Kind::Hang) => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        _ => {}
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetVersion(version: *mut c_int) -> u32 {
    guard(|| {
        if version.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: checked non-null.
        unsafe { *version = version_code() };
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetErrorString(result: u32) -> *const c_char {
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

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetLastError(_comm: *mut c_void) -> *const c_char {
    log::last_error_ptr()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetUniqueId(out: *mut UniqueId) -> u32 {
    guard(|| {
        if out.is_null() {
            return INVALID_ARGUMENT;
        }
        let faults = match faults() {
            Ok(f) => f,
            Err(code) => return code,
        };
        let kind = faults
            .find(Where::UniqueId, nccl_smoke_fault::rank_from_env())
            .map(|f| f.kind);
        apply_hang_or_crash(kind);
        let spec = std::env::var("NCCL_SOCKET_IFNAME").ok();
        let iface = match (kind, net::choose(&net::interfaces(), spec.as_deref())) {
            (Some(Kind::Error), _) | (_, None) => {
                log::warn(
                    0,
                    "bootstrap.cc:65",
                    "Bootstrap : no socket interface found",
                );
                return INTERNAL_ERROR;
            }
            (_, Some(i)) => i,
        };
        log::info(
            0,
            "INIT",
            &format!("Bootstrap : Using {}:{}<0>", iface.name, iface.addr),
        );
        let listener = match TcpListener::bind(SocketAddrV4::new(iface.addr, 0)) {
            Ok(l) => l,
            Err(e) => {
                log::warn(0, "misc/socket.cc:410", &format!("socketListen: {e}"));
                return SYSTEM_ERROR;
            }
        };
        let addr = match listener.local_addr() {
            Ok(std::net::SocketAddr::V4(a)) => a,
            _ => return INTERNAL_ERROR,
        };
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
            ^ ((std::process::id() as u64) << 32);
        std::thread::spawn(move || comm::run_root(listener));
        // SAFETY: checked non-null; 128 bytes as in nccl.h.
        unsafe { (*out).internal = net::encode_id(addr, nonce) };
        SUCCESS
    })
}

/// Reads `blocking` from an ncclConfig_t: {size_t size; unsigned magic; unsigned version;
/// int blocking; …}. NULL, a bad magic or NCCL_CONFIG_UNDEF_INT mean blocking.
///
/// # Safety
/// `config` is NULL or points at an ncclConfig_t.
unsafe fn blocking_of(config: *const u8) -> bool {
    if config.is_null() {
        return true;
    }
    // SAFETY: the documented prefix of ncclConfig_t.
    let (size, magic, blocking) = unsafe {
        (
            std::ptr::read_unaligned(config as *const usize),
            std::ptr::read_unaligned(config.add(8) as *const u32),
            std::ptr::read_unaligned(config.add(16) as *const i32),
        )
    };
    !(size >= 20 && magic == 0xcafe_beef && blocking == 0)
}

unsafe fn init(
    comm_out: *mut *mut c_void,
    nranks: c_int,
    id: [u8; 128],
    rank: c_int,
    blocking: bool,
) -> u32 {
    if comm_out.is_null() {
        return INVALID_ARGUMENT;
    }
    if nranks < 1 || rank < 0 || rank >= nranks {
        log::warn(
            0,
            "init.cc:1719",
            &format!("Invalid rank requested : {rank}/{nranks}"),
        );
        return INVALID_ARGUMENT;
    }
    let faults = match faults() {
        Ok(f) => f,
        Err(code) => return code,
    };
    if !cuda::available() {
        log::warn(
            0,
            "init.cc:1",
            "Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'",
        );
        return UNHANDLED_CUDA_ERROR;
    }
    let Some((root, nonce)) = net::decode_id(&id) else {
        log::warn(
            0,
            "bootstrap.cc:340",
            "Bootstrap : unique id is not from this library",
        );
        return INVALID_ARGUMENT;
    };
    let comm = Arc::new(Comm::new(
        rank as usize,
        nranks as usize,
        faults,
        nonce,
        blocking,
    ));
    let code = version_code();
    if rank == 0 {
        log::version(
            comm.dev,
            &format!(
                "NCCL version {}+sim (nccl-smoke simulation, no GPU)",
                version_text(code)
            ),
        );
    }
    log::info(
        comm.dev,
        "INIT",
        &format!("{} commId {:#x} - Init START", comm.describe(), nonce),
    );
    let kind = comm
        .faults
        .find(Where::Init, Some(rank as u32))
        .map(|f| f.kind);
    let spec = std::env::var("NCCL_SOCKET_IFNAME").ok();
    let iface = net::choose(&net::interfaces(), spec.as_deref());
    let work = {
        let comm = comm.clone();
        move || -> u32 {
            match kind {
                Some(Kind::Crash) => std::process::abort(),
                Some(Kind::Hang) => {
                    comm.hang();
                    return REMOTE_ERROR;
                }
                Some(Kind::Error) => {
                    log::warn(
                        comm.dev,
                        "misc/socket.cc:484",
                        &format!(
                            "socketStartConnect: Connect to {}<{}> failed : Connection refused",
                            root.ip(),
                            root.port()
                        ),
                    );
                    return SYSTEM_ERROR;
                }
                _ => {}
            }
            let Some(iface) = iface else {
                log::warn(
                    comm.dev,
                    "bootstrap.cc:65",
                    "Bootstrap : no socket interface found",
                );
                return INTERNAL_ERROR;
            };
            let rc = comm.connect_all(root, &iface);
            if rc == SUCCESS {
                if comm
                    .faults
                    .find(Where::Net, Some(comm.rank as u32))
                    .is_some_and(|f| matches!(f.kind, Kind::Slow(_)))
                {
                    log::info(
                        comm.dev,
                        "NET",
                        "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
                    );
                }
                let ring: Vec<String> = (0..comm.nranks).map(|r| r.to_string()).collect();
                log::info(
                    comm.dev,
                    "INIT",
                    &format!("Channel 00/02 : {}", ring.join(" ")),
                );
                log::info(comm.dev, "INIT", "Connected all rings");
                log::info(
                    comm.dev,
                    "INIT",
                    &format!(
                        "{} commId {:#x} - Init COMPLETE",
                        comm.describe(),
                        comm.id_hash
                    ),
                );
            }
            rc
        }
    };
    let handle = Box::into_raw(Box::new(Handle(comm.clone()))) as *mut c_void;
    // SAFETY: checked non-null.
    unsafe { *comm_out = handle };
    if blocking {
        let rc = work();
        comm.async_err.store(rc, Ordering::SeqCst);
        if rc != SUCCESS {
            // SAFETY: the handle was just made; the caller gets NULL back with the error.
            unsafe {
                drop(Box::from_raw(handle as *mut Handle));
                *comm_out = std::ptr::null_mut();
            }
        }
        rc
    } else {
        let c = comm.clone();
        std::thread::spawn(move || {
            let rc = work();
            let _ =
                c.async_err
                    .compare_exchange(INPROGRESS, rc, Ordering::SeqCst, Ordering::SeqCst);
        });
        INPROGRESS
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRank(
    comm: *mut *mut c_void,
    nranks: c_int,
    id: UniqueId,
    rank: c_int,
) -> u32 {
    // SAFETY: forwarded contract.
    guard(|| unsafe { init(comm, nranks, id.internal, rank, true) })
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
    guard(|| unsafe {
        init(
            comm,
            nranks,
            id.internal,
            rank,
            blocking_of(config as *const u8),
        )
    })
}

/// The communicator behind a handle.
///
/// # Safety
/// `comm` is NULL or a handle from init that has not been destroyed.
unsafe fn get(comm: *mut c_void) -> Option<Arc<Comm>> {
    if comm.is_null() {
        return None;
    }
    // SAFETY: per the contract.
    Some(unsafe { &*(comm as *const Handle) }.0.clone())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommGetAsyncError(comm: *mut c_void, out: *mut u32) -> u32 {
    guard(|| {
        // SAFETY: forwarded contract.
        let Some(c) = (unsafe { get(comm) }) else {
            return INVALID_ARGUMENT;
        };
        if out.is_null() {
            return INVALID_ARGUMENT;
        }
        // SAFETY: checked non-null.
        unsafe { *out = c.async_err.load(Ordering::SeqCst) };
        SUCCESS
    })
}

/// Writes one integer property of a communicator through `out`.
///
/// # Safety
/// `comm` as for [`get`]; `out` is NULL or writable.
unsafe fn comm_int(comm: *mut c_void, out: *mut c_int, read: impl FnOnce(&Comm) -> c_int) -> u32 {
    // SAFETY: forwarded contract.
    guard(|| match (unsafe { get(comm) }, out.is_null()) {
        (Some(c), false) => {
            // SAFETY: checked non-null.
            unsafe { *out = read(&c) };
            SUCCESS
        }
        _ => INVALID_ARGUMENT,
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCount(comm: *mut c_void, out: *mut c_int) -> u32 {
    // SAFETY: forwarded contract.
    unsafe { comm_int(comm, out, |c| c.nranks as c_int) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommUserRank(comm: *mut c_void, out: *mut c_int) -> u32 {
    // SAFETY: forwarded contract.
    unsafe { comm_int(comm, out, |c| c.rank as c_int) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCuDevice(comm: *mut c_void, out: *mut c_int) -> u32 {
    // SAFETY: forwarded contract.
    unsafe { comm_int(comm, out, |c| c.dev) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommAbort(comm: *mut c_void) -> u32 {
    guard(|| {
        if comm.is_null() {
            return SUCCESS;
        }
        // SAFETY: forwarded contract; the handle is consumed here.
        let h = unsafe { Box::from_raw(comm as *mut Handle) };
        h.0.abort();
        log::info(
            h.0.dev,
            "INIT",
            &format!("{} - Abort COMPLETE", h.0.describe()),
        );
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommFinalize(comm: *mut c_void) -> u32 {
    guard(|| {
        // SAFETY: forwarded contract.
        let Some(c) = (unsafe { get(comm) }) else {
            return INVALID_ARGUMENT;
        };
        match c
            .faults
            .find(Where::Finalize, Some(c.rank as u32))
            .map(|f| f.kind)
        {
            Some(Kind::Error) => {
                log::warn(
                    c.dev,
                    "init.cc:2100",
                    "commFinalize: proxy thread did not stop: Connection closed by remote peer",
                );
                SYSTEM_ERROR
            }
            Some(Kind::Hang) => {
                c.hang();
                REMOTE_ERROR
            }
            Some(Kind::Crash) => std::process::abort(),
            _ => SUCCESS,
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommDestroy(comm: *mut c_void) -> u32 {
    guard(|| {
        if comm.is_null() {
            return SUCCESS;
        }
        // SAFETY: forwarded contract; the handle is consumed here.
        let h = unsafe { Box::from_raw(comm as *mut Handle) };
        log::info(
            h.0.dev,
            "INIT",
            &format!("{} - Destroy COMPLETE", h.0.describe()),
        );
        h.0.aborted.store(true, Ordering::SeqCst);
        SUCCESS
    })
}

/// An operation collected in a group, with its communicator and stream.
type Pending = (Arc<Comm>, usize, Op);

thread_local! {
    /// Group depth and the operations collected in it.
    static GROUP: RefCell<(u32, Vec<Pending>)> = const { RefCell::new((0, Vec::new())) };
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGroupStart() -> u32 {
    GROUP.with(|g| g.borrow_mut().0 += 1);
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGroupEnd() -> u32 {
    guard(|| {
        let batch = GROUP.with(|g| {
            let mut g = g.borrow_mut();
            if g.0 == 0 {
                return None;
            }
            g.0 -= 1;
            (g.0 == 0).then(|| std::mem::take(&mut g.1))
        });
        match batch {
            None => SUCCESS,
            Some(ops) => launch_batches(ops),
        }
    })
}

/// Enqueues collected operations, one batch per (communicator, stream), in first-seen order.
fn launch_batches(ops: Vec<Pending>) -> u32 {
    let mut batches: Vec<(Arc<Comm>, usize, Vec<Op>)> = Vec::new();
    for (c, s, op) in ops {
        match batches
            .iter_mut()
            .find(|b| Arc::ptr_eq(&b.0, &c) && b.1 == s)
        {
            Some(b) => b.2.push(op),
            None => batches.push((c, s, vec![op])),
        }
    }
    for (c, s, ops) in batches {
        let rc = enqueue(&c, s, ops);
        if rc != SUCCESS {
            return rc;
        }
    }
    SUCCESS
}

fn enqueue(c: &Arc<Comm>, stream: usize, ops: Vec<Op>) -> u32 {
    let p2p = ops
        .iter()
        .any(|o| matches!(o, Op::Send { .. } | Op::Recv { .. }));
    let firsts = match c.setup_faults(p2p) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let comm = c.clone();
    if cuda::enqueue(
        stream as *mut c_void,
        Box::new(move || comm.run_batch(ops, firsts)),
    ) {
        SUCCESS
    } else {
        log::warn(
            c.dev,
            "enqueue.cc:1",
            "Cuda failure 'invalid resource handle' (cuLaunchHostFunc)",
        );
        UNHANDLED_CUDA_ERROR
    }
}

/// Collects `op` into the open group, or enqueues it at once.
fn submit(comm: *mut c_void, stream: *mut c_void, op: Op) -> u32 {
    // SAFETY: the caller passes a live handle (NCCL's contract).
    let Some(c) = (unsafe { get(comm) }) else {
        log::warn(0, "enqueue.cc:1", "Invalid comm: NULL or destroyed");
        return INVALID_ARGUMENT;
    };
    if let Err(msg) = validate(&c, &op) {
        log::warn(c.dev, "enqueue.cc:1", &msg);
        return INVALID_ARGUMENT;
    }
    let in_group = GROUP.with(|g| {
        let mut g = g.borrow_mut();
        if g.0 > 0 {
            g.1.push((c.clone(), stream as usize, op));
            true
        } else {
            false
        }
    });
    if in_group {
        SUCCESS
    } else {
        enqueue(&c, stream as usize, vec![op])
    }
}

fn validate(c: &Comm, op: &Op) -> Result<(), String> {
    let (dtype, peer, redop) = match *op {
        Op::AllReduce { dtype, op, .. } => (dtype, None, Some(op)),
        Op::AllToAll { dtype, .. } => (dtype, None, None),
        Op::Send { dtype, peer, .. } | Op::Recv { dtype, peer, .. } => (dtype, Some(peer), None),
    };
    if reduce::elem_size(dtype).is_none() {
        return Err(format!("Invalid datatype {dtype}"));
    }
    if let Some(r) = redop
        && !reduce::valid_op(r)
    {
        return Err(format!("Invalid reduction operation {r}"));
    }
    if let Some(p) = peer
        && p >= c.nranks
    {
        return Err(format!("Invalid peer {p} (nranks {})", c.nranks));
    }
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclAllReduce(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: u32,
    op: u32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    guard(|| {
        submit(
            comm,
            stream,
            Op::AllReduce {
                send: Ptr(send as usize),
                recv: Ptr(recv as usize),
                count,
                dtype,
                op,
            },
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclAlltoAll(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: u32,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    guard(|| {
        submit(
            comm,
            stream,
            Op::AllToAll {
                send: Ptr(send as usize),
                recv: Ptr(recv as usize),
                count,
                dtype,
            },
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclSend(
    buf: *const c_void,
    count: usize,
    dtype: u32,
    peer: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    guard(|| {
        submit(
            comm,
            stream,
            Op::Send {
                buf: Ptr(buf as usize),
                count,
                dtype,
                peer: peer.max(0) as usize,
            },
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclRecv(
    buf: *mut c_void,
    count: usize,
    dtype: u32,
    peer: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    guard(|| {
        submit(
            comm,
            stream,
            Op::Recv {
                buf: Ptr(buf as usize),
                count,
                dtype,
                peer: peer.max(0) as usize,
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn error_strings_are_nccls() {
        // SAFETY: static strings.
        let s = |c| {
            unsafe { CStr::from_ptr(ncclGetErrorString(c)) }
                .to_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(s(0), "no error");
        assert!(s(2).starts_with("unhandled system error"));
        assert_eq!(s(99), "unknown result code");
    }

    #[test]
    fn config_blocking_is_read_from_the_prefix() {
        let mut cfg = [0u8; 48];
        cfg[0..8].copy_from_slice(&48usize.to_le_bytes());
        cfg[8..12].copy_from_slice(&0xcafe_beefu32.to_le_bytes());
        cfg[16..20].copy_from_slice(&0i32.to_le_bytes());
        // SAFETY: a buffer shaped like ncclConfig_t.
        assert!(!unsafe { blocking_of(cfg.as_ptr()) });
        cfg[16..20].copy_from_slice(&i32::MIN.to_le_bytes());
        assert!(unsafe { blocking_of(cfg.as_ptr()) });
        assert!(unsafe { blocking_of(std::ptr::null()) });
    }

    #[test]
    fn version_text_reads_like_nccl() {
        assert_eq!(version_text(22803), "2.28.3");
        assert_eq!(version_text(21903), "2.19.3");
    }
}
