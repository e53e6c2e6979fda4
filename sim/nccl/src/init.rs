//! Communicator creation: ncclCommInitRank[Config]'s checks, the bootstrap on the caller's
//! thread or (non-blocking) on a thread of its own, and the INIT lines NCCL prints.

use crate::call::{fail, fault_set};
use crate::comm::{self, Comm, Identity};
use crate::ids::{self, Iface};
use crate::log::{self, sys};
use crate::texts;
use crate::{INPROGRESS, INTERNAL_ERROR, SUCCESS, bootstrap, cuda, faults, ras, version};
use nccl_smoke_fault::{Kind, Where};
use std::ffi::{c_int, c_void};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Arc, Once};

/// The bootstrap interface per `NCCL_SOCKET_IFNAME`; logged once per process, as NCCL's
/// bootstrap network init does.
pub fn bootstrap_iface(v: i32, dev: i32) -> Result<Iface, u32> {
    let spec = std::env::var("NCCL_SOCKET_IFNAME").ok();
    let Some(iface) = ids::choose(&ids::interfaces(), spec.as_deref()) else {
        return Err(fail(texts::no_interface(v)));
    };
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Some(s) = spec.as_deref().filter(|s| s.len() > 1) {
            log::info(
                dev,
                sys::ENV,
                &format!("NCCL_SOCKET_IFNAME set by environment to {s}"),
            );
        }
        texts::Report {
            code: SUCCESS,
            lines: vec![texts::bootstrap_using(v, &iface.name, iface.addr)],
        }
        .emit(dev);
    });
    Ok(iface)
}

/// Reads `blocking` from an ncclConfig_t (`size_t size; unsigned magic; unsigned version;
/// int blocking; …`). NULL, or NCCL_CONFIG_UNDEF_INT, means blocking; a config not made by
/// NCCL_CONFIG_INITIALIZER is refused, as NCCL refuses it.
///
/// # Safety
/// `config` is NULL or points at an ncclConfig_t.
pub(crate) unsafe fn blocking_of(config: *const u8) -> Option<bool> {
    if config.is_null() {
        return Some(true);
    }
    // SAFETY: the documented prefix of ncclConfig_t (20 bytes, in every release).
    let (size, magic, blocking) = unsafe {
        (
            std::ptr::read_unaligned(config as *const usize),
            std::ptr::read_unaligned(config.add(8) as *const u32),
            std::ptr::read_unaligned(config.add(16) as *const i32),
        )
    };
    if magic != 0xcafe_beef || size < 20 {
        return None;
    }
    Some(blocking != 0)
}

/// Where a communicator comes from, as its INIT lines say.
pub enum Origin {
    /// A unique id: `commId 0x…`.
    Id,
    /// `ncclCommSplit`: `parent 0x… splitCount S color C key K` (`ncclCommInitRankFunc`,
    /// `src/init.cc` v2.28.3-1).
    Split {
        parent: usize,
        count: u32,
        color: i32,
        key: i32,
    },
}

/// A communicator leaves this process (abort, destroy, or an init that failed): out of the
/// live table, and RAS told, as NCCL's `commFree` calls `ncclRasCommFini` (src/init.cc,
/// v2.28.3-1). `None` when it had left already.
pub fn comm_free(h: *mut c_void) -> Option<Arc<Comm>> {
    let c = comm::unregister(h)?;
    ras::gone(&c);
    Some(c)
}

/// `comm 0x… rank R nranks N cudaDev D nvmlDev D busId B commId 0x… - Init <what>`.
fn init_line(c: &Comm, api: &str, from: &Origin, what: &str) -> String {
    let prefix = if c.id.version >= 22100 {
        format!("{api} ")
    } else {
        String::new()
    };
    let from = match from {
        Origin::Id => format!("commId {:#x}", c.id.comm_id),
        Origin::Split {
            parent,
            count,
            color,
            key,
        } => format!("parent {parent:#x} splitCount {count} color {color} key {key}"),
    };
    format!(
        "{prefix}comm {:#x} rank {} nranks {} cudaDev {} nvmlDev {} busId {} {from} - Init {what}",
        c.addr(),
        c.id.rank,
        c.id.nranks,
        c.id.dev,
        c.id.dev,
        c.id.bus_id,
    )
}

/// Rank 0's ring lines: `Channel 00/02 :  0  1 …`.
pub fn channel_lines(nranks: usize) -> Vec<String> {
    let width = (nranks.max(1) - 1).to_string().len();
    (0..2)
        .map(|c| {
            let ranks: String = (0..nranks).map(|r| format!(" {r:>width$}")).collect();
            format!("Channel {c:02}/02 :{ranks}")
        })
        .collect()
}

/// What a successful init logs after the connections are up.
fn init_complete(c: &Comm, api: &str, from: &Origin) {
    let dev = c.id.dev;
    if c.id.rank == 0 {
        for l in channel_lines(c.id.nranks) {
            log::info(dev, sys::INIT, &l);
        }
    }
    if matches!(c.fault(Where::Net), Some(Kind::Slow(_))) {
        texts::Report {
            code: SUCCESS,
            lines: vec![texts::gdr_disabled()],
        }
        .emit(dev);
    }
    let rings = if c.id.version >= 22400 {
        "Connected all rings, use ring PXN 0 GDR 0"
    } else {
        "Connected all rings"
    };
    log::info(dev, sys::INIT, rings);
    log::info(dev, sys::INIT, &init_line(c, api, from, "COMPLETE"));
}

/// The process-wide lines of a first init: the version banner (rank 0, as NCCL) and the
/// driver version.
pub(crate) fn first_init_lines(v: i32, dev: i32, rank: c_int) {
    if rank == 0 {
        log::banner(dev, &format!("NCCL version {}+sim", version::text(v)));
        static SIM: Once = Once::new();
        SIM.call_once(|| {
            log::info(
                dev,
                sys::INIT,
                &format!(
                    "nccl-smoke simulation of NCCL {}: CPU stand-in, no GPU, data moves over TCP (library {})",
                    version::text(v),
                    env!("CARGO_PKG_VERSION")
                ),
            );
        });
    }
    static DRIVER: Once = Once::new();
    DRIVER.call_once(|| {
        if let Some(d) = cuda::driver_version() {
            log::info(dev, sys::INIT, &format!("cudaDriverVersion {d}"));
        }
    });
}

/// `NCCL_COMM_BLOCKING` as NCCL's integer parameter: 0 or 1 override, anything else does not.
pub(crate) fn blocking_env(v: Option<&str>) -> Option<bool> {
    match v?.trim().parse::<i64>().ok()? {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// Logs the START line of a communicator made by `api`.
pub fn init_start(c: &Comm, api: &str, from: &Origin) {
    log::info(c.id.dev, sys::INIT, &init_line(c, api, from, "START"));
}

/// Init proper, once the communicator exists: `init` faults strike, then the bootstrap
/// through the root at `root` and the mesh; the INIT lines of a success. Returns the result.
pub fn bring_up(
    c: &Arc<Comm>,
    api: &str,
    from: &Origin,
    root: SocketAddrV4,
    nonce: u64,
    iface: Ipv4Addr,
) -> u32 {
    match c.fault(Where::Init) {
        Some(Kind::Crash) => std::process::abort(),
        Some(Kind::Hang) => {
            c.hang();
            return INTERNAL_ERROR;
        }
        Some(Kind::Error) => {
            let r = texts::init_error(c.id.version, root);
            r.emit(c.id.dev);
            return r.code;
        }
        _ => {}
    }
    match bootstrap::mesh(c, root, nonce, iface) {
        Ok(peers) => {
            c.set_peers(peers);
            init_complete(c, api, from);
            SUCCESS
        }
        Err(r) => {
            if !c.aborted() {
                r.emit(c.id.dev);
            }
            c.break_links();
            r.code
        }
    }
}

/// ncclCommInitRank and ncclCommInitRankConfig.
///
/// # Safety
/// `out` is NULL or writable; `config` is `None` (no config argument), NULL or an ncclConfig_t.
pub unsafe fn init(
    out: *mut *mut c_void,
    nranks: c_int,
    id: [u8; 128],
    rank: c_int,
    config: Option<*const u8>,
) -> u32 {
    let api = if config.is_some() {
        "ncclCommInitRankConfig"
    } else {
        "ncclCommInitRank"
    };
    let v = version::code();
    if out.is_null() {
        return fail(texts::null_arg("CommInitRank", "newcomm"));
    }
    let fault_list = match fault_set() {
        Ok(f) => f,
        Err(code) => return code,
    };
    if !cuda::available() {
        return fail(texts::no_driver(v));
    }
    let dev = cuda::current_device().unwrap_or(0);
    // SAFETY: per this function's contract.
    let asked = match config.map(|c| unsafe { blocking_of(c) }) {
        None => true,
        Some(Some(b)) => b,
        Some(None) => return fail(texts::bad_config(v)),
    };
    // NCCL_COMM_BLOCKING=0|1 overrides the config, for ncclCommInitRank too (`parseCommConfig`,
    // `src/init.cc`, v2.19.3-1 and v2.28.3-1).
    let blocking =
        blocking_env(std::env::var("NCCL_COMM_BLOCKING").ok().as_deref()).unwrap_or(asked);
    if nranks < 1 || rank < 0 || rank >= nranks {
        return fail(texts::invalid_rank(v, rank, nranks));
    }
    let Some((root, nonce)) = ids::decode_id(&id) else {
        return fail(texts::bad_unique_id());
    };
    first_init_lines(v, dev, rank);
    let iface = match bootstrap_iface(v, dev) {
        Ok(i) => i,
        Err(code) => return code,
    };
    let comm = Arc::new(Comm::new(
        Identity {
            rank: rank as usize,
            nranks: nranks as usize,
            dev,
            bus_id: cuda::bus_id(dev),
            comm_id: nonce,
            hash: ras::comm_hash(v, &id),
            ip: iface.addr,
            version: v,
            faults: fault_list,
            run_fault_op: faults::run_fault_op(),
        },
        blocking,
    ));
    // NCCL starts RAS during the bootstrap of the first communicator (`ncclRasCommInit`).
    ras::start(dev);
    let handle = comm::register(&comm);
    // SAFETY: checked non-null. NCCL hands the communicator out before init completes.
    unsafe { *out = handle };
    log::info(dev, sys::INIT, &init_line(&comm, api, &Origin::Id, "START"));
    let c = comm.clone();
    let work = move || bring_up(&c, api, &Origin::Id, root, nonce, iface.addr);
    if blocking {
        let rc = work();
        if rc != SUCCESS {
            // Unless an abort from another thread took it already, the communicator goes.
            if let Some(c) = comm_free(handle) {
                c.quiesce();
            }
            // SAFETY: checked non-null above.
            unsafe { *out = std::ptr::null_mut() };
        }
        return rc;
    }
    match comm::async_job("nccl-sim-init", vec![comm], work) {
        Ok(()) => INPROGRESS,
        Err(e) => {
            if let Some(c) = comm_free(handle) {
                c.quiesce();
            }
            // SAFETY: checked non-null above.
            unsafe { *out = std::ptr::null_mut() };
            fail(texts::listen_failed(&e.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_overrides_blocking_with_0_or_1_only() {
        assert_eq!(blocking_env(Some("0")), Some(false));
        assert_eq!(blocking_env(Some(" 1")), Some(true));
        assert_eq!(blocking_env(Some("2")), None);
        assert_eq!(blocking_env(Some("yes")), None);
        assert_eq!(blocking_env(None), None);
    }

    #[test]
    fn config_blocking_is_read_from_the_prefix() {
        let mut cfg = [0u8; 64];
        cfg[0..8].copy_from_slice(&64usize.to_le_bytes());
        cfg[8..12].copy_from_slice(&0xcafe_beefu32.to_le_bytes());
        cfg[12..16].copy_from_slice(&22803u32.to_le_bytes());
        cfg[16..20].copy_from_slice(&0i32.to_le_bytes());
        // SAFETY: buffers shaped like ncclConfig_t, or NULL.
        unsafe {
            assert_eq!(blocking_of(cfg.as_ptr()), Some(false));
            cfg[16..20].copy_from_slice(&i32::MIN.to_le_bytes());
            assert_eq!(blocking_of(cfg.as_ptr()), Some(true));
            cfg[16..20].copy_from_slice(&1i32.to_le_bytes());
            assert_eq!(blocking_of(cfg.as_ptr()), Some(true));
            assert_eq!(blocking_of(std::ptr::null()), Some(true));
            cfg[8..12].copy_from_slice(&0u32.to_le_bytes());
            assert_eq!(blocking_of(cfg.as_ptr()), None);
        }
    }

    #[test]
    fn ring_lines_pad_like_nccl() {
        assert_eq!(
            channel_lines(2),
            ["Channel 00/02 : 0 1", "Channel 01/02 : 0 1"]
        );
        let l = &channel_lines(12)[0];
        assert!(
            l.starts_with("Channel 00/02 :  0  1") && l.ends_with(" 10 11"),
            "{l}"
        );
    }
}
