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

/// One rank as a report shows it.
#[derive(Clone, Debug, PartialEq)]
struct Rank {
    rank: usize,
    ip: String,
    pid: i64,
    dev: i32,
    init: u32,
    async_error: u32,
    finalize: bool,
    abort: bool,
    allreduce: u64,
}

/// A rank no data came for: its process did not answer (`unresponsive`), or answered without
/// the communicator.
#[derive(Clone, Debug, PartialEq)]
struct Missing {
    rank: usize,
    ip: Option<String>,
    pid: i64,
    dev: i32,
    unresponsive: bool,
    dead: bool,
}

#[derive(Debug)]
struct View {
    hash: u64,
    size: usize,
    ranks: Vec<Rank>,
    missing: Vec<Missing>,
}

fn folder() -> PathBuf {
    std::env::temp_dir().join("nccl-sim-ras")
}

/// Folders of jobs long gone (older than an hour) are removed when a process starts RAS.
fn clean_old_folders() {
    let Ok(d) = std::fs::read_dir(folder()) else {
        return;
    };
    for e in d.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|a| a > Duration::from_secs(3600));
        if old {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn me(c: &Comm) -> Rank {
    Rank {
        rank: c.id.rank,
        ip: c.id.ip.to_string(),
        pid: std::process::id() as i64,
        dev: c.id.dev,
        // ncclInProgress until the connections are up, as `comm->initState`.
        init: if c.peers().is_empty() && c.id.nranks > 1 {
            crate::INPROGRESS
        } else {
            crate::SUCCESS
        },
        async_error: c.async_error(),
        finalize: c.finalize_called.load(std::sync::atomic::Ordering::SeqCst),
        abort: c.aborted(),
        allreduce: c
            .allreduce_launched
            .load(std::sync::atomic::Ordering::SeqCst),
    }
}

/// `v1 rank pid ip dev init async finalize abort allreduce host` (or `gone pid ip host`).
fn snapshot_line(r: &Rank) -> String {
    format!(
        "v1 {} {} {} {} {} {} {} {} {} {}\n",
        r.rank,
        r.pid,
        r.ip,
        r.dev,
        r.init,
        r.async_error,
        r.finalize as u8,
        r.abort as u8,
        r.allreduce,
        log::host()
    )
}

fn write_atomically(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

fn snapshot_path(hash: u64, rank: usize) -> PathBuf {
    folder().join(format!("{hash:016x}")).join(rank.to_string())
}

/// Every 250 ms: this process's ranks of every live communicator, for the other processes'
/// reports (the simulation's stand-in for RAS's peer network).
fn refresh_loop() {
    loop {
        for c in comm::all() {
            let p = snapshot_path(c.id.hash, c.id.rank);
            if let Some(d) = p.parent() {
                let _ = std::fs::create_dir_all(d);
            }
            write_atomically(&p, &snapshot_line(&me(&c)));
        }
        std::thread::sleep(REFRESH);
    }
}

/// A communicator leaves this process (destroy, abort): its process still answers, without it.
pub fn gone(c: &Comm) {
    if c.id.version < 22400 {
        return;
    }
    let p = snapshot_path(c.id.hash, c.id.rank);
    if p.parent().is_some_and(|d| d.exists()) {
        write_atomically(
            &p,
            &format!("gone {} {} {}\n", std::process::id(), c.id.ip, log::host()),
        );
    }
}

fn pid_alive(pid: i64) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0
        && (unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH))
}

/// What the snapshot of `rank` of communicator `c` says.
fn peer(c: &Comm, rank: usize) -> Result<Rank, Missing> {
    let ip = c.peer(rank).map(|p| p.addr.ip().to_string());
    let silent = Missing {
        rank,
        ip: ip.clone(),
        pid: -1,
        dev: c.peer(rank).map(|p| p.dev).unwrap_or(-1),
        unresponsive: true,
        dead: false,
    };
    let p = snapshot_path(c.id.hash, rank);
    let (Ok(text), Ok(meta)) = (std::fs::read_to_string(&p), std::fs::metadata(&p)) else {
        return Err(silent);
    };
    let age = meta
        .modified()
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .unwrap_or_default();
    let f: Vec<&str> = text.split_whitespace().collect();
    let host = f.last().copied().unwrap_or("");
    let pid: i64 = f
        .get(if f.first() == Some(&"gone") { 1 } else { 2 })
        .and_then(|p| p.parse().ok())
        .unwrap_or(-1);
    // Only a process of this host can be seen to be gone; elsewhere, a snapshot that stopped
    // changing is all there is.
    let dead = host == log::host() && !pid_alive(pid);
    let missing = |unresponsive| Missing {
        pid,
        unresponsive: unresponsive || dead,
        dead,
        ..silent.clone()
    };
    match f.first().copied() {
        Some("gone") => Err(missing(false)),
        Some("v1") if f.len() == 11 => {
            if dead || age > STALE {
                return Err(missing(true));
            }
            let num = |i: usize| f[i].parse::<u64>().unwrap_or(0);
            Ok(Rank {
                rank,
                ip: f[3].to_string(),
                pid,
                dev: f[4].parse().unwrap_or(-1),
                init: num(5) as u32,
                async_error: num(6) as u32,
                finalize: num(7) != 0,
                abort: num(8) != 0,
                allreduce: num(9),
            })
        }
        _ => Err(silent),
    }
}

/// Every communicator this process holds, with every rank: its own from memory, the others
/// from their snapshots.
fn gather() -> Vec<View> {
    let mut by_hash: BTreeMap<u64, Vec<Arc<Comm>>> = BTreeMap::new();
    for c in comm::all() {
        by_hash.entry(c.id.hash).or_default().push(c);
    }
    by_hash
        .into_iter()
        .map(|(hash, comms)| {
            let first = &comms[0];
            let mut view = View {
                hash,
                size: first.id.nranks,
                ranks: Vec::new(),
                missing: Vec::new(),
            };
            for r in 0..first.id.nranks {
                if let Some(c) = comms.iter().find(|c| c.id.rank == r) {
                    view.ranks.push(me(c));
                    continue;
                }
                match peer(first, r) {
                    Ok(rank) => view.ranks.push(rank),
                    Err(m) => view.missing.push(m),
                }
            }
            view
        })
        .collect()
}

fn version_text(v: i32) -> String {
    version::text(v)
}

/// The JSON report: `jsonWriteHeader` … `jsonWriteFooter`, `client_support.cc` v2.28.7-1,
/// including that release's missing comma after a missing rank's `nvml_dev` (fixed in
/// v2.29.2-1).
fn json_report(v: i32, views: &[View]) -> String {
    let mut o = String::new();
    o += "{\n";
    o += &format!("  \"nccl_version\": \"{}\",\n", version_text(v));
    o += "  \"cuda_runtime_version\": 12080,\n";
    o += &format!(
        "  \"cuda_driver_version\": {},\n",
        crate::cuda::driver_version().unwrap_or(-1)
    );
    o += "  \"timestamp\": \"\",\n";
    o += &format!("  \"communicators_count\": {},\n", views.len());
    o += "  \"communicators\": [\n";
    for (i, c) in views.iter().enumerate() {
        if i > 0 {
            o += ",\n";
        }
        o += "    {\n";
        o += &format!("      \"hash\": \"{:#x}\",\n", c.hash);
        o += "      \"secondary_hash\": \"0x0:0x0\",\n";
        o += &format!("      \"size\": {},\n", c.size);
        o += &format!("      \"ranks_count\": {},\n", c.ranks.len());
        o += &format!("      \"missing_ranks_count\": {},\n", c.missing.len());
        o += "      \"ranks\": [\n";
        for (j, r) in c.ranks.iter().enumerate() {
            if j > 0 {
                o += ",\n";
            }
            o += "        {\n";
            o += &format!("          \"rank\": {},\n", r.rank);
            o += &format!("          \"host\": \"{}\",\n", r.ip);
            o += &format!("          \"pid\": {},\n", r.pid);
            o += &format!("          \"cuda_dev\": {},\n", r.dev);
            o += &format!("          \"nvml_dev\": {},\n", r.dev);
            o += "          \"status\": {\n";
            o += &format!("            \"init_state\": {},\n", r.init);
            o += &format!("            \"async_error\": {},\n", r.async_error);
            o += &format!("            \"finalize_called\": {},\n", r.finalize);
            o += "            \"destroy_flag\": false,\n";
            o += &format!("            \"abort_flag\": {}\n", r.abort);
            o += "          },\n";
            o += "          \"collective_counts\": {\n";
            for (k, f) in FUNCTIONS.iter().enumerate() {
                let n = if *f == "AllReduce" { r.allreduce } else { 0 };
                let comma = if k + 1 < FUNCTIONS.len() { "," } else { "" };
                o += &format!("            \"{f}\": {n}{comma}\n");
            }
            o += "          }\n";
            o += "        }";
        }
        o += "\n      ],\n";
        o += "      \"missing_ranks\": [\n";
        for (j, m) in c.missing.iter().enumerate() {
            if j > 0 {
                o += ",\n";
            }
            let comma = if v < 22902 { "" } else { "," };
            o += "        {\n";
            o += &format!("          \"rank\": {},\n", m.rank);
            o += &format!(
                "          \"host\": \"{}\",\n",
                m.ip.as_deref().unwrap_or("unknown")
            );
            o += &format!("          \"pid\": {},\n", m.pid);
            o += &format!("          \"cuda_dev\": {},\n", m.dev);
            o += &format!("          \"nvml_dev\": {}{comma}\n", m.dev);
            o += "          \"status\": {\n";
            o += &format!("            \"unresponsive\": {},\n", m.unresponsive);
            o += &format!("            \"considered_dead\": {}\n", m.dead);
            o += "          }\n";
            o += "        }";
        }
        o += "\n      ]\n";
        o += "    }";
    }
    o += "\n  ],\n";
    o += "  \"ras\": {\n";
    o += "    \"collection_time_sec\": 0.000,\n";
    o += "    \"timeouts_count\": 0\n";
    o += "  }\n";
    o += "}\n";
    o
}

/// The functions RAS counts (`NCCL_NUM_FUNCTIONS` = 5, in `ncclFunc_t` order,
/// `src/include/nccl_common.h` v2.28.7-1); of them the simulation has AllReduce only.
const FUNCTIONS: [&str; 5] = [
    "Broadcast",
    "Reduce",
    "AllGather",
    "ReduceScatter",
    "AllReduce",
];

/// `ncclErrorToString`, `client_support.cc` v2.28.7-1.
fn error_text(code: u32) -> &'static str {
    match code {
        1 => "Unhandled CUDA error",
        2 => "System error",
        3 => "Internal error",
        4 => "Invalid argument",
        5 => "Invalid usage",
        6 => "Remote process error",
        7 => "NCCL operation in progress",
        _ => "Unexpected error",
    }
}

/// `rasCountIsOutlier` (not verbose), `client_support.cc` v2.28.7-1: a group NCCL lists rank
/// by rank.
fn outlier(count: usize, total: usize) -> bool {
    count == 1 || (count <= 10 && count as f64 <= total as f64 * 0.25)
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

/// The text report: `rasClientRunInit` and `rasClientRunComms`, `client_support.cc`
/// v2.28.7-1 (the 2.26+ rank lines for every text release; see `sim/README.md`).
fn text_report(v: i32, views: &[View]) -> String {
    let mut o = String::new();
    o += &format!(
        "NCCL version {}+sim compiled with CUDA 12.8\n",
        version_text(v)
    );
    o += &format!(
        "CUDA runtime version 12080, driver version {}\n\n",
        crate::cuda::driver_version().unwrap_or(-1)
    );
    // The job: the processes this process knows of (its own and its peers').
    let mut procs: Vec<(String, i64)> = Vec::new();
    for r in views.iter().flat_map(|c| &c.ranks) {
        if !procs.contains(&(r.ip.clone(), r.pid)) {
            procs.push((r.ip.clone(), r.pid));
        }
    }
    let mut nodes: Vec<&String> = procs.iter().map(|(ip, _)| ip).collect();
    nodes.sort();
    nodes.dedup();
    o += "Job summary\n===========\n\n";
    o += "  Nodes  Processes         GPUs  Processes     GPUs\n(total)   per node  per process    (total)  (total)\n";
    o += &format!(
        "{:7}  {:9}  {:11}  {:9}  {:7}\n\n",
        nodes.len(),
        procs.len() / nodes.len().max(1),
        1,
        procs.len(),
        procs.len()
    );
    o += "Communicators... (0.000s)\n=============\n\n";
    if views.is_empty() {
        o += "No communicator data collected!\n";
    } else {
        o += "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n    #  in group  per comm  per node  per comm  in group\n";
    }
    for (i, c) in views.iter().enumerate() {
        let mut ips: Vec<&String> = c.ranks.iter().map(|r| &r.ip).collect();
        ips.sort();
        ips.dedup();
        let per_node = c.ranks.len() / ips.len().max(1);
        // statusStr of the highest status bit, errorStr of the error bits (`rasClientRunComms`).
        let status = if c.ranks.iter().any(|r| r.abort) {
            "ABORT"
        } else if c.ranks.iter().any(|r| r.finalize) {
            "FINALIZE"
        } else if c.ranks.iter().any(|r| r.init == crate::SUCCESS) {
            "RUNNING"
        } else if !c.ranks.is_empty() {
            "INIT"
        } else {
            "NOCOMM"
        };
        let mut counts: Vec<u64> = c.ranks.iter().map(|r| r.allreduce).collect();
        counts.dedup();
        let statuses = {
            let mut s: Vec<(bool, bool, bool)> = c
                .ranks
                .iter()
                .map(|r| (r.abort, r.finalize, r.init == crate::SUCCESS))
                .collect();
            s.sort();
            s.dedup();
            s.len()
        };
        let mismatch =
            counts.len() > 1 || statuses > 1 || c.missing.iter().any(|m| !m.unresponsive);
        let error = c
            .ranks
            .iter()
            .any(|r| !matches!(r.async_error, crate::SUCCESS | crate::INPROGRESS));
        let incomplete = c.missing.iter().any(|m| m.unresponsive);
        let errors = [
            "OK",
            "MISMATCH",
            "ERROR",
            "ERROR,MISMATCH",
            "INCOMPLETE",
            "INCOMPLETE,MISMATCH",
            "INCOMPLETE,ERROR",
            "INCOMPLETE,ERROR,MISMATCH",
        ][usize::from(mismatch) | (usize::from(error) << 1) | (usize::from(incomplete) << 2)];
        o += &format!(
            "{:5}  {:8}  {:8}  {:>8}  {:8}  {:8}  {:>8}  {:>6}\n",
            i,
            1,
            ips.len(),
            per_node,
            c.size,
            c.ranks.len(),
            status,
            errors
        );
    }
    o += "\nErrors\n======\n\n";
    let mut silent: Vec<&Missing> = Vec::new();
    let mut dead: Vec<&Missing> = Vec::new();
    for m in views.iter().flat_map(|c| &c.missing) {
        let list = if m.dead { &mut dead } else { &mut silent };
        if m.unresponsive && m.pid > 0 && !list.iter().any(|x| x.pid == m.pid && x.ip == m.ip) {
            list.push(m);
        }
    }
    let process = |m: &Missing| {
        format!(
            "  Process {} on node {} managing GPU {}\n",
            m.pid,
            m.ip.as_deref().unwrap_or(""),
            m.dev
        )
    };
    if !silent.is_empty() {
        let n = silent.len();
        o += &format!(
            "INCOMPLETE\n  Missing communicator data from {n} job process{}\n",
            plural(n, "", "es")
        );
        silent.iter().for_each(|m| o += &process(m));
        o += "\n";
    }
    if !dead.is_empty() {
        let n = dead.len();
        o += &format!(
            "DEAD\n  {n} job process{} considered dead (unreachable via the RAS network)\n",
            plural(n, " is", "es are")
        );
        dead.iter().for_each(|m| o += &process(m));
        o += "\n";
    }
    let rank_line = |rank: usize, dev: i32, pid: i64, ip: &str| {
        if pid > 0 {
            format!("Rank {rank} -- GPU {dev} managed by process {pid} on node {ip}\n")
        } else {
            format!("Rank {rank} -- [process information not found]\n")
        }
    };
    for (i, c) in views.iter().enumerate() {
        let incomplete: Vec<&Missing> = c.missing.iter().filter(|m| m.unresponsive).collect();
        if !incomplete.is_empty() {
            let n = incomplete.len();
            o += &format!(
                "#0-{i} ({:016x}) INCOMPLETE\n  Missing communicator data from {n} rank{}\n",
                c.hash,
                plural(n, "", "s")
            );
            for m in incomplete {
                o += "  ";
                o += &rank_line(m.rank, m.dev, m.pid, m.ip.as_deref().unwrap_or(""));
            }
            o += "\n";
        }
        let failed: Vec<&Rank> = c
            .ranks
            .iter()
            .filter(|r| !matches!(r.async_error, crate::SUCCESS | crate::INPROGRESS))
            .collect();
        if !failed.is_empty() {
            let n = failed.len();
            o += &format!(
                "#0-{i} ({:016x}) ERROR\n  Asynchronous error{} on {n} rank{}\n",
                c.hash,
                plural(n, "", "s"),
                plural(n, "", "s")
            );
            for r in failed {
                o += &format!(
                    "  Rank {} reported {} -- GPU {} managed by process {} on node {}\n",
                    r.rank,
                    error_text(r.async_error),
                    r.dev,
                    r.pid,
                    r.ip
                );
            }
            o += "\n";
        }
    }
    o += "Warnings\n========\n\n";
    for (i, c) in views.iter().enumerate() {
        let status = |r: &Rank| {
            if r.abort {
                "ABORT"
            } else if r.finalize {
                "FINALIZE"
            } else if r.init == crate::SUCCESS {
                "RUNNING"
            } else {
                "INIT"
            }
        };
        let mut statuses: BTreeMap<&str, Vec<&Rank>> = BTreeMap::new();
        c.ranks
            .iter()
            .for_each(|r| statuses.entry(status(r)).or_default().push(r));
        let nocomm: Vec<&Missing> = c.missing.iter().filter(|m| !m.unresponsive).collect();
        let mut counts: BTreeMap<u64, Vec<&Rank>> = BTreeMap::new();
        c.ranks
            .iter()
            .for_each(|r| counts.entry(r.allreduce).or_default().push(r));
        let status_mismatch = statuses.len() + usize::from(!nocomm.is_empty()) > 1;
        if !status_mismatch && counts.len() < 2 {
            continue;
        }
        o += &format!("#0-{i} ({:016x}) MISMATCH\n", c.hash);
        // Groups most frequent first (`rasValCountsCompareRev`); a group of more than one
        // rank gets a header; its ranks are listed only when it is an outlier.
        let detail = |o: &mut String, n: usize, state: &str, rows: Vec<String>| {
            if n > 1 {
                *o += &format!("  {n} ranks {}\n", state.replacen("has", "have", 1));
            }
            if outlier(n, c.size) {
                for (rank, rest) in rows.iter().map(|l| l.split_once(" -- ").unwrap_or((l, ""))) {
                    if n > 1 {
                        *o += &format!("  {rank} -- {rest}");
                    } else {
                        *o += &format!("  {rank} {state} -- {rest}");
                    }
                }
            }
        };
        if status_mismatch {
            o += "  Communicator ranks have different status\n";
            let mut groups: Vec<(String, Vec<String>)> = statuses
                .iter()
                .map(|(s, rs)| {
                    let rows = rs
                        .iter()
                        .map(|r| rank_line(r.rank, r.dev, r.pid, &r.ip))
                        .collect();
                    (format!("has status {s}"), rows)
                })
                .collect();
            if !nocomm.is_empty() {
                let rows = nocomm
                    .iter()
                    .map(|m| rank_line(m.rank, m.dev, m.pid, m.ip.as_deref().unwrap_or("")))
                    .collect();
                groups.push(("has status NOCOMM".into(), rows));
            }
            groups.sort_by_key(|g| std::cmp::Reverse(g.1.len()));
            for (state, rows) in groups {
                detail(&mut o, rows.len(), &state, rows);
            }
        }
        if counts.len() > 1 {
            o += "  Communicator ranks have different AllReduce operation counts\n";
            let mut groups: Vec<(&u64, &Vec<&Rank>)> = counts.iter().collect();
            groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(b.0.cmp(a.0)));
            for (n, rs) in groups {
                let state = if *n > 0 {
                    format!("has launched up to operation {n}")
                } else {
                    "has not launched any operations".into()
                };
                let rows = rs
                    .iter()
                    .map(|r| rank_line(r.rank, r.dev, r.pid, &r.ip))
                    .collect();
                detail(&mut o, rs.len(), &state, rows);
            }
        }
        o += "\n";
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_enable_switch_reads_like_ncclloadparam() {
        for (v, on) in [
            (None, true),
            (Some(""), true),
            (Some("1"), true),
            (Some("0x1"), true),
            (Some("0"), false),
            (Some("2"), false),
            (Some("off"), false),
        ] {
            assert_eq!(enabled(v), on, "{v:?}");
        }
    }

    #[test]
    fn hashes_match_nccls_own() {
        // NCCL's getHash (v2.28.7-1 and v2.24.3-1 `src/include/bitops.h`) compiled with gcc.
        let id: Vec<u8> = (0..128u32).map(|i| (i * 37 + 11) as u8).collect();
        assert_eq!(comm_hash(22807, &id), 0x3002_dcd1_bbe6_653d);
        if std::ffi::c_char::MIN != 0 {
            assert_eq!(comm_hash(22403, &id), 0x65bb_3b0c_ba52_7185);
        }
    }

    #[test]
    fn peers_are_read_from_their_snapshots() {
        use crate::comm::Identity;
        use nccl_smoke_fault::FaultSet;
        let hash = crate::ids::random_u64();
        let c = Comm::new(
            Identity {
                rank: 0,
                nranks: 2,
                dev: 0,
                bus_id: "0".into(),
                comm_id: 1,
                hash,
                ip: std::net::Ipv4Addr::LOCALHOST,
                version: 22807,
                faults: FaultSet::parse("").unwrap(),
                run_fault_op: 0,
            },
            true,
        );
        let path = snapshot_path(hash, 1);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let me = std::process::id();
        let host = log::host();
        // No snapshot: no data came back.
        let m = peer(&c, 1).unwrap_err();
        assert!(m.unresponsive && !m.dead && m.pid == -1);
        // A fresh one: the rank as its process last wrote it.
        std::fs::write(&path, format!("v1 1 {me} 10.0.0.2 1 0 0 0 0 42 {host}\n")).unwrap();
        let r = peer(&c, 1).unwrap();
        assert_eq!(
            (r.allreduce, r.ip.as_str(), r.pid),
            (42, "10.0.0.2", me as i64)
        );
        // Its process is gone: dead.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone_pid = child.id();
        child.wait().unwrap();
        std::fs::write(
            &path,
            format!("v1 1 {gone_pid} 10.0.0.2 1 0 0 0 0 42 {host}\n"),
        )
        .unwrap();
        let m = peer(&c, 1).unwrap_err();
        assert!(m.dead && m.unresponsive && m.pid == gone_pid as i64);
        // Stale (a stopped process): missing.
        std::fs::write(&path, format!("v1 1 {me} 10.0.0.2 1 0 0 0 0 42 {host}\n")).unwrap();
        let old = SystemTime::now() - Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let m = peer(&c, 1).unwrap_err();
        assert!(m.unresponsive && !m.dead);
        // Destroyed: the process answers without the communicator.
        std::fs::write(&path, format!("gone {me} 10.0.0.2 {host}\n")).unwrap();
        let m = peer(&c, 1).unwrap_err();
        assert!(!m.unresponsive && !m.dead);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn reports_carry_ranks_missing_and_mismatches() {
        let rank = |rank: usize, allreduce: u64, async_error: u32| Rank {
            rank,
            ip: "10.0.0.1".into(),
            pid: 100 + rank as i64,
            dev: rank as i32,
            init: 0,
            async_error,
            finalize: false,
            abort: false,
            allreduce,
        };
        let views = [View {
            hash: 0xabc,
            size: 4,
            ranks: vec![rank(0, 5, 0), rank(1, 5, 6), rank(2, 4, 0)],
            missing: vec![Missing {
                rank: 3,
                ip: Some("10.0.0.2".into()),
                pid: 7,
                dev: 3,
                unresponsive: true,
                dead: false,
            }],
        }];
        let j = json_report(22807, &views);
        assert!(j.contains("\"nvml_dev\": 3\n          \"status\""), "{j}");
        let fixed = json_report(22902, &views);
        assert!(
            fixed.contains("\"nvml_dev\": 3,\n          \"status\""),
            "{fixed}"
        );
        let t = text_report(22803, &views);
        for want in [
            "#0-0 (0000000000000abc) INCOMPLETE\n  Missing communicator data from 1 rank\n  Rank 3 -- GPU 3 managed by process 7 on node 10.0.0.2\n",
            "  Rank 1 reported Remote process error -- GPU 1 managed by process 101 on node 10.0.0.1\n",
            "  Communicator ranks have different AllReduce operation counts\n  2 ranks have launched up to operation 5\n  Rank 2 has launched up to operation 4 -- GPU 2 managed by process 102 on node 10.0.0.1\n",
            "INCOMPLETE\n  Missing communicator data from 1 job process\n  Process 7 on node 10.0.0.2 managing GPU 3\n",
        ] {
            assert!(t.contains(want), "{want}\n---\n{t}");
        }
    }
}
