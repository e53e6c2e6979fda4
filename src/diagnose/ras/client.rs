//! The client side of NCCL's RAS protocol, every step bounded by one total time.

use super::{Report, Target, Unavailable};
use super::{parse, text as text_report};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The protocol version this client speaks (`NCCL_RAS_CLIENT_PROTOCOL`, 2 in
/// `src/ras/ras_internal.h` v2.24.3-1 to v2.30.7-1).
const PROTOCOL: u32 = 2;
/// A report larger than this is refused (a real one is a few kB per communicator).
const MAX_REPLY: usize = 4 << 20;
/// The first answer must come within this (NCCL's own client starts with 1 s, `client.cc`).
const FIRST_ANSWER: Duration = Duration::from_secs(1);

/// Asks the RAS service at `target` for its status report, within `bound` in all. A process
/// that does not answer the handshake in time is left for a fresh connection (on a shared
/// port, the kernel may hand it to another NCCL process of the node), as NCCL's own client
/// retries; so is a report that does not know communicator `want` (another job's process on
/// the same port).
pub fn query(target: &Target, bound: Duration, want: Option<u64>) -> Result<Report, Unavailable> {
    let end = Instant::now() + bound;
    let addrs: Vec<SocketAddr> = target
        .addr
        .to_socket_addrs()
        .map_err(|_| Unavailable::BadAddress(target.addr.clone()))?
        .collect();
    if addrs.is_empty() {
        return Err(Unavailable::BadAddress(target.addr.clone()));
    }
    let mut last = Unavailable::TimedOut;
    // The first answer must come within a third of the bound (at most NCCL's own 1 s), so
    // that a silent process leaves time to ask another.
    let first = (bound / 3).clamp(Duration::from_millis(100), FIRST_ANSWER);
    while Instant::now() < end {
        match attempt(&addrs, target.json, end, first) {
            Ok(r) if want.is_none_or(|h| r.knows(h)) => return Ok(r),
            Ok(_) => {
                last = Unavailable::NotOurs;
                std::thread::sleep(Duration::from_millis(50).min(left(end).unwrap_or_default()));
            }
            Err(Attempt::Retry(why)) => last = why,
            Err(Attempt::Stop(why)) => return Err(why),
        }
    }
    Err(last)
}

enum Attempt {
    /// Worth a fresh connection while time is left.
    Retry(Unavailable),
    Stop(Unavailable),
}

fn left(end: Instant) -> Option<Duration> {
    end.checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

fn attempt(
    addrs: &[SocketAddr],
    json: bool,
    end: Instant,
    first: Duration,
) -> Result<Report, Attempt> {
    let mut refused = None;
    let mut stream = None;
    for a in addrs {
        let Some(t) = left(end) else {
            return Err(Attempt::Stop(Unavailable::TimedOut));
        };
        match TcpStream::connect_timeout(a, t.min(first)) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => refused = Some(format!("connecting to {a}: {e}")),
        }
    }
    let Some(mut s) = stream else {
        // Nobody listens: asking again will not change that within a few seconds.
        return Err(Attempt::Stop(Unavailable::NoService(
            refused.unwrap_or_default(),
        )));
    };
    let _ = s.set_nodelay(true);
    let first = left(end).map(|t| t.min(first));
    let retry = |e: std::io::Error| {
        if timed_out(&e) {
            Attempt::Retry(Unavailable::TimedOut)
        } else {
            Attempt::Stop(Unavailable::NoService(e.to_string()))
        }
    };
    let reply = exchange(&mut s, &format!("CLIENT PROTOCOL {PROTOCOL}\n"), first).map_err(retry)?;
    if !reply.to_ascii_uppercase().starts_with("SERVER PROTOCOL ") {
        return Err(Attempt::Stop(Unavailable::Garbled(format!(
            "handshake answered {:?}",
            clip(&reply)
        ))));
    }
    // The server bounds each leg of its gathering by this (whole seconds; 0 would mean no
    // limit), and a gathering may take longer than one leg (`RAS_COLLECTIVE_EXTRA_TIMEOUT`,
    // `src/ras/ras_internal.h`): half of what is left, so that a partial report still comes
    // back in time (a guess at the margin).
    let secs = left(end).map(|t| (t / 2).as_secs().max(1)).unwrap_or(1);
    expect_ok(&mut s, &format!("TIMEOUT {secs}\n"), end)?;
    if json {
        expect_ok(&mut s, "SET FORMAT json\n", end)?;
    }
    send(&mut s, "STATUS\n", end)?;
    let body = read_to_close(&mut s, end)?;
    let text = String::from_utf8_lossy(&body);
    let report = if json {
        parse::json(&text)
    } else {
        text_report::read(&text)
    };
    report.map_err(|why| Attempt::Stop(Unavailable::Garbled(why)))
}

fn clip(s: &str) -> String {
    s.trim().chars().take(80).collect()
}

fn send(s: &mut TcpStream, line: &str, end: Instant) -> Result<(), Attempt> {
    let t = left(end).ok_or(Attempt::Stop(Unavailable::TimedOut))?;
    let _ = s.set_write_timeout(Some(t));
    s.write_all(line.as_bytes()).map_err(|e| {
        Attempt::Stop(if timed_out(&e) {
            Unavailable::TimedOut
        } else {
            Unavailable::NoService(e.to_string())
        })
    })
}

fn expect_ok(s: &mut TcpStream, line: &str, end: Instant) -> Result<(), Attempt> {
    let reply = exchange(s, line, left(end)).map_err(|e| {
        Attempt::Stop(if timed_out(&e) {
            Unavailable::TimedOut
        } else {
            Unavailable::NoService(e.to_string())
        })
    })?;
    if reply.trim().eq_ignore_ascii_case("OK") {
        Ok(())
    } else {
        Err(Attempt::Stop(Unavailable::Garbled(format!(
            "{} answered {:?}",
            line.trim(),
            clip(&reply)
        ))))
    }
}

/// Sends `line` and reads one reply line, within `t`.
fn exchange(s: &mut TcpStream, line: &str, t: Option<Duration>) -> std::io::Result<String> {
    let t = t.ok_or_else(|| std::io::Error::from(std::io::ErrorKind::TimedOut))?;
    s.set_write_timeout(Some(t))?;
    s.write_all(line.as_bytes())?;
    let end = Instant::now() + t;
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\n") {
        let t = left(end).ok_or_else(|| std::io::Error::from(std::io::ErrorKind::TimedOut))?;
        s.set_read_timeout(Some(t))?;
        match s.read(&mut byte) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the RAS service closed the connection",
                ));
            }
            Ok(_) => got.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if got.len() > 1024 {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&got).into_owned())
}

/// The report: everything until the server closes the connection.
fn read_to_close(s: &mut TcpStream, end: Instant) -> Result<Vec<u8>, Attempt> {
    let mut body = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let t = left(end).ok_or(Attempt::Stop(Unavailable::TimedOut))?;
        let _ = s.set_read_timeout(Some(t));
        match s.read(&mut buf) {
            Ok(0) => return Ok(body),
            Ok(n) => {
                body.extend_from_slice(&buf[..n]);
                if body.len() > MAX_REPLY {
                    return Err(Attempt::Stop(Unavailable::Garbled(
                        "a report of more than 4 MiB".into(),
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if timed_out(&e) => return Err(Attempt::Stop(Unavailable::TimedOut)),
            Err(e) => return Err(Attempt::Stop(Unavailable::NoService(e.to_string()))),
        }
    }
}
