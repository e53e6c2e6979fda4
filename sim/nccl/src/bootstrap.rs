//! Bootstrap: the root thread behind a unique id collects every rank's address and hands out
//! the table; then the ranks connect a full mesh (a higher rank connects to each lower one,
//! which accepts), each connection tagged with the connecting rank.

use crate::comm::Comm;
use crate::texts::{self, Report};
use crate::transport::{Peer, read_str, read_u32, read_u64, write_str, write_u32, write_u64};
use crate::{INTERNAL_ERROR, log};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// First word of a rank's hello to the root.
const HELLO: u32 = 0x4e53_424f;
/// First word of a mesh connection.
const MESH: u32 = 0x4e53_4d53;

/// How long a rank keeps retrying a refused or timed-out connect.
const CONNECT_PATIENCE: Duration = Duration::from_secs(60);

/// strerror's text of an I/O error ("Connection refused"), as NCCL prints it.
pub fn strerror(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn v4(a: SocketAddr) -> io::Result<SocketAddrV4> {
    match a {
        SocketAddr::V4(a) => Ok(a),
        SocketAddr::V6(_) => Err(io::Error::other("not an IPv4 address")),
    }
}

/// Starts the root for a new unique id on `addr`; returns where it listens.
pub fn start_root(addr: Ipv4Addr, nonce: u64, version: i32) -> io::Result<SocketAddrV4> {
    let l = TcpListener::bind(SocketAddrV4::new(addr, 0))?;
    let at = v4(l.local_addr()?)?;
    std::thread::Builder::new()
        .name("nccl-sim-root".into())
        .spawn(move || root(l, nonce, version))?;
    Ok(at)
}

struct Arrival {
    rank: u32,
    stream: TcpStream,
    addr: String,
    host: String,
    dev: u32,
}

struct Hello {
    magic: u32,
    nonce: u64,
    rank: u32,
    nranks: u32,
    addr: String,
    host: String,
    dev: u32,
}

fn read_hello(s: &mut TcpStream) -> io::Result<Hello> {
    Ok(Hello {
        magic: read_u32(s)?,
        nonce: read_u64(s)?,
        rank: read_u32(s)?,
        nranks: read_u32(s)?,
        addr: read_str(s)?,
        host: read_str(s)?,
        dev: read_u32(s)?,
    })
}

fn refuse(s: &mut TcpStream, msg: &str) {
    let _ = write_u32(s, 1).and_then(|_| write_str(s, msg));
}

/// The root: waits for every rank, then sends each the table of (address, host) by rank. A
/// rank that disagrees on the number of ranks, or a rank that checks in twice, fails the
/// bootstrap: everyone who arrived, and whoever arrives for a while after, is told why.
fn root(l: TcpListener, nonce: u64, v: i32) {
    let mut joined: Vec<Arrival> = Vec::new();
    let mut nranks: Option<u32> = None;
    let mut problem: Option<(String, Instant)> = None;
    loop {
        let accepted = match &problem {
            None => l.accept(),
            Some((_, since)) => {
                if since.elapsed() > Duration::from_secs(120) {
                    return;
                }
                let _ = l.set_nonblocking(true);
                match l.accept() {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    other => other,
                }
            }
        };
        let mut s = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // As NCCL's root does when accept fails (EMFILE under a low `ulimit -n`, say):
                // it says why in its log, and the bootstrap ends there.
                log::warn(
                    0,
                    &texts::accept_failed_site(v),
                    &texts::accept_failed(&strerror(&e)),
                );
                return;
            }
        };
        let _ = s.set_nonblocking(false);
        let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
        let Ok(h) = read_hello(&mut s) else {
            continue;
        };
        if h.magic != HELLO || h.nonce != nonce {
            continue;
        }
        let (rank, n) = (h.rank, h.nranks);
        let _ = s.set_read_timeout(None);
        if let Some((msg, _)) = &problem {
            refuse(&mut s, msg);
            continue;
        }
        let expected = *nranks.get_or_insert(n);
        let issue = if n != expected {
            Some((texts::root_mismatch(v, expected, n), false))
        } else if rank >= n || joined.iter().any(|j| j.rank == rank) {
            Some((texts::root_duplicate(rank, n), true))
        } else {
            None
        };
        if let Some((msg, duplicate)) = issue {
            log::warn(0, &texts::root_site(v, duplicate), &msg);
            refuse(&mut s, &msg);
            for mut j in joined.drain(..) {
                refuse(&mut j.stream, &msg);
            }
            problem = Some((msg, Instant::now()));
            continue;
        }
        joined.push(Arrival {
            rank,
            stream: s,
            addr: h.addr,
            host: h.host,
            dev: h.dev,
        });
        if joined.len() == expected as usize {
            break;
        }
    }
    joined.sort_by_key(|j| j.rank);
    let table: Vec<(String, String, u32)> = joined
        .iter()
        .map(|j| (j.addr.clone(), j.host.clone(), j.dev))
        .collect();
    for j in joined.iter_mut() {
        let s = &mut j.stream;
        let _ = write_u32(s, 0).and_then(|_| {
            table.iter().try_for_each(|(a, h, d)| {
                write_str(s, a)?;
                write_str(s, h)?;
                write_u32(s, *d)
            })
        });
    }
}

/// What an abort leaves: nothing to log, nobody to tell.
fn aborted() -> Report {
    Report {
        code: INTERNAL_ERROR,
        lines: Vec::new(),
    }
}

fn retryable(k: io::ErrorKind) -> bool {
    matches!(
        k,
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::TimedOut
            | io::ErrorKind::WouldBlock
            | io::ErrorKind::Interrupted
            | io::ErrorKind::HostUnreachable
    )
}

/// Connects to `addr`, retrying refusals and timeouts for a while, as NCCL's sockets do.
fn connect(comm: &Comm, addr: SocketAddrV4) -> Result<TcpStream, Report> {
    let v = comm.id.version;
    let start = Instant::now();
    let mut attempts = 0u32;
    loop {
        if comm.aborted() {
            return Err(aborted());
        }
        attempts += 1;
        match TcpStream::connect_timeout(&addr.into(), Duration::from_secs(5)) {
            Ok(s) => {
                if !comm.track(&s) {
                    return Err(aborted());
                }
                return Ok(s);
            }
            Err(e) if retryable(e.kind()) && start.elapsed() < CONNECT_PATIENCE => {
                comm.sleep(Duration::from_millis((u64::from(attempts) * 10).min(500)));
            }
            Err(e) if retryable(e.kind()) => {
                return Err(texts::connect_exhausted(v, addr, &strerror(&e), attempts));
            }
            Err(e) => return Err(texts::connect_failed(v, addr, &strerror(&e))),
        }
    }
}

/// A connection that broke during bootstrap: aborted, closed by the peer, or another error.
fn broken(comm: &Comm, e: io::Error, peer: SocketAddrV4, host: &str) -> Report {
    let v = comm.id.version;
    if comm.aborted() {
        aborted()
    } else if matches!(
        e.kind(),
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
    ) {
        texts::closed_by_peer(v, host, peer.port())
    } else {
        texts::transfer_failed(v, false, peer, &strerror(&e))
    }
}

/// Bootstraps through the root at `root` and connects to every peer; `nonce` is the unique
/// id's. Returns the connections by rank (`None` for this rank).
pub fn mesh(
    comm: &Comm,
    root_addr: SocketAddrV4,
    nonce: u64,
    iface: Ipv4Addr,
) -> Result<Vec<Option<Peer>>, Report> {
    let (rank, nranks, v) = (comm.id.rank, comm.id.nranks, comm.id.version);
    let sys = |e: io::Error| Report {
        code: crate::SYSTEM_ERROR,
        lines: vec![texts::Line::Warn {
            site: "misc/socket.cc:408".into(),
            msg: format!("socketListen: {}", strerror(&e)),
        }],
    };
    let listener = TcpListener::bind(SocketAddrV4::new(iface, 0)).map_err(sys)?;
    let me = v4(listener.local_addr().map_err(sys)?).map_err(sys)?;

    let mut rs = connect(comm, root_addr)?;
    let root_broken = |comm: &Comm, e| broken(comm, e, root_addr, &root_addr.ip().to_string());
    (|| -> io::Result<()> {
        write_u32(&mut rs, HELLO)?;
        write_u64(&mut rs, nonce)?;
        write_u32(&mut rs, rank as u32)?;
        write_u32(&mut rs, nranks as u32)?;
        write_str(&mut rs, &me.to_string())?;
        write_str(&mut rs, log::host())?;
        write_u32(&mut rs, comm.id.dev as u32)
    })()
    .map_err(|e| root_broken(comm, e))?;
    let status = read_u32(&mut rs).map_err(|e| root_broken(comm, e))?;
    if status != 0 {
        let msg = read_str(&mut rs).unwrap_or_default();
        return Err(Report {
            code: crate::INVALID_USAGE,
            lines: vec![texts::Line::Warn {
                site: texts::root_site(v, msg.contains("already checked in")),
                msg,
            }],
        });
    }
    let mut table = Vec::with_capacity(nranks);
    for _ in 0..nranks {
        let addr = read_str(&mut rs).map_err(|e| root_broken(comm, e))?;
        let host = read_str(&mut rs).map_err(|e| root_broken(comm, e))?;
        let dev = read_u32(&mut rs).map_err(|e| root_broken(comm, e))? as i32;
        let addr: SocketAddrV4 = addr.parse().map_err(|_| {
            root_broken(
                comm,
                io::Error::new(io::ErrorKind::InvalidData, "bad address"),
            )
        })?;
        table.push((addr, host, dev));
    }
    drop(rs);

    let mut streams: Vec<Option<TcpStream>> = (0..nranks).map(|_| None).collect();
    for (j, (addr, host, _)) in table.iter().enumerate().take(rank) {
        let mut s = connect(comm, *addr)?;
        (|| -> io::Result<()> {
            write_u32(&mut s, MESH)?;
            write_u64(&mut s, nonce)?;
            write_u32(&mut s, rank as u32)
        })()
        .map_err(|e| broken(comm, e, *addr, host))?;
        streams[j] = Some(s);
    }

    listener.set_nonblocking(true).map_err(sys)?;
    let mut missing = nranks - 1 - rank;
    while missing > 0 {
        if comm.aborted() {
            return Err(aborted());
        }
        let mut s = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                comm.sleep(Duration::from_millis(2));
                continue;
            }
            Err(e) => return Err(sys(e)),
        };
        if !comm.track(&s) {
            return Err(aborted());
        }
        let _ = s.set_nonblocking(false);
        let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
        let hello = (|| -> io::Result<(u32, u64, u32)> {
            Ok((read_u32(&mut s)?, read_u64(&mut s)?, read_u32(&mut s)?))
        })();
        let Ok((magic, their_nonce, j)) = hello else {
            continue;
        };
        let j = j as usize;
        if magic != MESH || their_nonce != nonce || j <= rank || j >= nranks || streams[j].is_some()
        {
            continue;
        }
        let _ = s.set_read_timeout(None);
        streams[j] = Some(s);
        missing -= 1;
    }

    let mut peers = Vec::with_capacity(nranks);
    for (j, s) in streams.into_iter().enumerate() {
        peers.push(match s {
            None => None,
            Some(s) => {
                let (addr, host, dev) = &table[j];
                let p = Peer::new(s, host.clone(), *addr, *dev)
                    .map_err(|e| broken(comm, e, *addr, host))?;
                Some(p)
            }
        });
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strerror_drops_the_os_error_suffix() {
        let e = io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(strerror(&e), "Connection refused");
        assert_eq!(strerror(&io::Error::other("plain")), "plain");
    }
}
