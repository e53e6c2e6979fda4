//! NCCL's RAS client service (2.24 and later), as far as one simulated process can give it.
//!
//! Real NCCL runs a RAS thread per process, with a peer network across every process of the
//! job, and answers clients on `NCCL_RAS_ADDR` (`src/ras/`, v2.24.3-1 to v2.30.7-1). The
//! simulation keeps the client side exactly (socket options, commands, replies, the report's
//! format strings, closing the connection to end a report) and replaces the peer network by a
//! folder of per-rank snapshots, `$TMPDIR/nccl-sim-ras/<commHash>/<rank>`, that each process
//! refreshes every 250 ms: ranks on hosts that do not share that folder are reported missing.
//! `sim/README.md` lists each departure.

use crate::comm::{self, Comm};
use crate::log::{self, sys};
use crate::version;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Arc, Once};
use std::time::{Duration, SystemTime};

mod peers;
mod report;
#[cfg(test)]
mod tests;

pub use peers::gone;
use peers::{clean_old_folders, gather, refresh_loop};
use report::{json_report, text_report};

/// `NCCL_RAS_CLIENT_PROTOCOL` and `NCCL_RAS_CLIENT_PORT` (`src/ras/ras_internal.h` v2.28.7-1).
const PROTOCOL: u32 = 2;
const DEFAULT_ADDR: &str = "localhost:28028";
/// How often a process refreshes its snapshots, and when a snapshot is too old to trust
/// (the process is stopped or stuck: what RAS would see as a peer that does not answer).
const REFRESH: Duration = Duration::from_millis(250);
const STALE: Duration = Duration::from_secs(2);

/// `NCCL_RAS_ENABLE` as `ncclLoadParam` reads it (`src/misc/param.cc` v2.28.7-1: `strtoll`
/// with base 0, the default on overflow), enabled only at exactly 1 (`src/bootstrap.cc`).
fn enabled(v: Option<&str>) -> bool {
    let Some(s) = v.map(str::trim_start).filter(|s| !s.is_empty()) else {
        return true;
    };
    let (neg, t) = match s.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (radix, t) = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) if h.starts_with(|c: char| c.is_ascii_hexdigit()) => (16, h),
        _ if t.starts_with('0') => (8, t),
        _ => (10, t),
    };
    let run: String = t.chars().take_while(|c| c.is_digit(radix)).collect();
    let v = if run.is_empty() {
        0
    } else {
        i64::from_str_radix(&run, radix).unwrap_or(1)
    };
    (if neg { -v } else { v }) == 1
}

/// The communicator hash NCCL gives a unique id: `getHash(commId->internal, 128)`
/// (`src/init.cc`); DJB2a over C chars before 2.26 (`src/include/bitops.h` v2.24.3-1,
/// v2.25.1-1), `eatHash`/`digestHash` from v2.26.2-1.
pub fn comm_hash(version: i32, id: &[u8]) -> u64 {
    if version < 22600 {
        return id.iter().fold(5381u64, |h, &b| {
            (h << 5).wrapping_add(h) ^ (b as std::ffi::c_char as i64 as u64)
        });
    }
    let mut acc = [1u64, 1u64];
    acc[0] ^= id.len() as u64;
    for chunk in id.chunks(8) {
        acc[0] = acc[0].wrapping_add(acc[1]);
        acc[1] ^= acc[0];
        acc[0] ^= acc[0] >> 31;
        acc[0] = acc[0].wrapping_mul(0x9de6_2bbc_8cef_3ce3);
        acc[1] ^= acc[1] >> 32;
        acc[1] = acc[1].wrapping_mul(0x485c_d631_1b59_9e79);
        let mut x = [0u8; 8];
        x[..chunk.len()].copy_from_slice(chunk);
        acc[0] = acc[0].wrapping_add(u64::from_le_bytes(x));
    }
    let mut h = acc[0];
    h ^= h >> 31;
    h = h.wrapping_mul(0xbac3_bd56_2846_de6b);
    h = h.wrapping_add(acc[1]);
    h ^= h >> 32;
    h.wrapping_mul(0x995a_187a_14e7_b445)
}

/// Starts the service once per process, at the first communicator init (NCCL's
/// `ncclRasCommInit`, `src/ras/ras.cc` v2.28.7-1, called from `bootstrapInit` when
/// `NCCL_RAS_ENABLE` is 1, `src/bootstrap.cc`).
pub fn start(dev: i32) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let v = version::code();
        if v < 22400 || !enabled(std::env::var("NCCL_RAS_ENABLE").ok().as_deref()) {
            return;
        }
        clean_old_folders();
        let _ = std::thread::Builder::new()
            .name("nccl-sim-ras-peers".into())
            .spawn(refresh_loop);
        let addr = std::env::var("NCCL_RAS_ADDR")
            .ok()
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| DEFAULT_ADDR.into());
        match listen(&addr) {
            Ok(l) => {
                log::info(
                    dev,
                    sys::INIT | sys::RAS,
                    &format!(
                        "RAS client listening socket at {}",
                        l.local_addr().map(|a| a.to_string()).unwrap_or(addr)
                    ),
                );
                let _ = std::thread::Builder::new()
                    .name("nccl-sim-ras".into())
                    .spawn(move || serve(l, v));
            }
            // As NCCL: the process goes on without a client socket (`(void)rasClientInitSocket()`).
            Err(_) => log::info(
                dev,
                sys::INIT | sys::RAS,
                &format!("RAS failed to establish a client listening socket at {addr}"),
            ),
        }
    });
}

/// `rasClientInitSocket` (`src/ras/client_support.cc` v2.28.7-1): `SO_REUSEADDR` and
/// `SO_REUSEPORT`, so that every NCCL process of a node (same user) binds the same port and
/// the kernel spreads the clients among them; a backlog of 16384.
fn listen(addr: &str) -> std::io::Result<TcpListener> {
    use std::os::fd::FromRawFd;
    let sa = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::AddrNotAvailable))?;
    let (family, raw, len) = sockaddr(&sa);
    // SAFETY: plain socket calls on a descriptor this function owns until it is wrapped.
    unsafe {
        let fd = libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let one: libc::c_int = 1;
        let opt = |name| {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                name,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if opt(libc::SO_REUSEADDR) != 0
            || opt(libc::SO_REUSEPORT) != 0
            || libc::bind(fd, raw.as_ptr().cast(), len) != 0
            || libc::listen(fd, 16384) != 0
        {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        Ok(TcpListener::from_raw_fd(fd))
    }
}

/// A `sockaddr_in`/`sockaddr_in6` for `sa`, as bytes, with its family and length.
fn sockaddr(sa: &std::net::SocketAddr) -> (libc::c_int, Vec<u8>, libc::socklen_t) {
    match sa {
        std::net::SocketAddr::V4(a) => {
            // SAFETY: sockaddr_in is plain old data; zero is a valid value.
            let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            s.sin_family = libc::AF_INET as libc::sa_family_t;
            s.sin_port = a.port().to_be();
            s.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            let len = std::mem::size_of::<libc::sockaddr_in>();
            // SAFETY: reading the bytes of a local value of that size.
            let bytes = unsafe {
                std::slice::from_raw_parts((&s as *const libc::sockaddr_in).cast::<u8>(), len)
            };
            (libc::AF_INET, bytes.to_vec(), len as libc::socklen_t)
        }
        std::net::SocketAddr::V6(a) => {
            // SAFETY: as above.
            let mut s: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            s.sin6_port = a.port().to_be();
            s.sin6_addr.s6_addr = a.ip().octets();
            let len = std::mem::size_of::<libc::sockaddr_in6>();
            // SAFETY: as above.
            let bytes = unsafe {
                std::slice::from_raw_parts((&s as *const libc::sockaddr_in6).cast::<u8>(), len)
            };
            (libc::AF_INET6, bytes.to_vec(), len as libc::socklen_t)
        }
    }
}

fn serve(l: TcpListener, v: i32) {
    for s in l.incoming().flatten() {
        let _ = std::thread::Builder::new()
            .name("nccl-sim-ras-client".into())
            .spawn(move || client(s, v));
    }
}

/// One client: commands one per line, case-insensitive, a trailing `\r` ignored
/// (`rasClientEventLoop`, `client_support.cc` v2.28.7-1); after a status report the server
/// closes the connection.
fn client(s: TcpStream, v: i32) {
    let Ok(mut w) = s.try_clone() else { return };
    let mut json = false;
    for line in BufReader::new(s).lines() {
        let Ok(line) = line else { return };
        let cmd = line.strip_suffix('\r').unwrap_or(&line);
        let low = cmd.to_ascii_lowercase();
        let reply = if low.starts_with("client protocol ") {
            format!("SERVER PROTOCOL {PROTOCOL}\n")
        } else if let Some(t) = low.strip_prefix("timeout ") {
            match t.parse::<i64>() {
                Ok(n) if n >= 0 => "OK\n".into(),
                _ => format!(
                    "ERROR: Invalid timeout value {}\n",
                    &cmd["timeout ".len()..]
                ),
            }
        } else if v >= 22807 && low.starts_with("set format ") {
            match &low["set format ".len()..] {
                "text" => {
                    json = false;
                    "OK\n".into()
                }
                "json" => {
                    json = true;
                    "OK\n".into()
                }
                _ => format!("ERROR: Invalid format {}\n", &cmd["set format ".len()..]),
            }
        } else if low == "status" || low == "verbose status" {
            let views = gather();
            let report = if json {
                json_report(v, &views)
            } else {
                text_report(v, &views)
            };
            let _ = w.write_all(report.as_bytes());
            return;
        } else {
            format!("ERROR: Unknown command {cmd}\n")
        };
        if w.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}
