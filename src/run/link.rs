//! The line from a worker to its supervisor: the worker's events over a Unix socket (sent with
//! [`crate::progress`]), read here into the supervisor's watch loop; and rank 0's status
//! address, which rank 0's worker broadcasts at launch and every worker hands its supervisor.

use super::env;
use crate::bootstrap::Bootstrap;
use crate::ffi::os;
use crate::progress::{self, Event};
use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixListener;
use std::sync::mpsc;

/// What the watch loop hears: the worker's events, or a signal that wakes it.
pub(super) enum Msg {
    Event(Event),
    Wake,
    /// The worker's end of the line closed: every event it sent has been read.
    Closed,
}

/// Reads the worker's events, once it connects, into `tx` until the worker or the watch ends.
pub(super) fn read_worker(listener: UnixListener, tx: mpsc::Sender<Msg>) {
    std::thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if let Ok(ev) = serde_json::from_str::<Event>(&line)
                    && tx.send(Msg::Event(ev)).is_err()
                {
                    return;
                }
            }
            let _ = tx.send(Msg::Closed);
        }
    });
}

/// Rank 0's supervisor's addresses, once broadcast: a host every rank should reach.
pub(super) static STATUS_ADDRS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Rank 0 broadcasts where its supervisor takes status reports; every worker hands that to its
/// own supervisor, which then reports to rank 0's.
pub(super) fn share_status_address(boot: &dyn Bootstrap) {
    let port = if boot.rank() == 0 {
        env::status_port().and_then(|p| p.parse().ok())
    } else {
        None
    };
    let addrs = share_address(boot, port);
    if !addrs.is_empty() {
        let _ = STATUS_ADDRS.set(addrs.clone());
        progress::send(&Event::StatusAddr { addrs });
    }
}

/// Rank 0 broadcasts `port` on each of its IPv4 addresses and on its host name (last); every
/// rank gets the list (empty when rank 0 has no port to give).
pub(super) fn share_address(boot: &dyn Bootstrap, port: Option<u16>) -> Vec<String> {
    let mut buf = [0u8; 1024];
    if boot.rank() == 0
        && let Some(port) = port
    {
        let mut addrs: Vec<String> = os::ipv4_addresses()
            .iter()
            .map(|a| format!("{a}:{port}"))
            .collect();
        addrs.push(format!("{}:{port}", os::hostname()));
        let text = addrs.join(",");
        let n = text.len().min(buf.len());
        buf[..n].copy_from_slice(&text.as_bytes()[..n]);
    }
    boot.broadcast(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    text.trim_end_matches('\0')
        .split(',')
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect()
}

/// Rank 0's supervisor's addresses, once broadcast.
pub(super) fn status_addrs() -> &'static [String] {
    STATUS_ADDRS.get().map(Vec::as_slice).unwrap_or(&[])
}
