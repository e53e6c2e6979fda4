//! The line from a worker to its supervisor: the worker's events over a Unix socket (sent with
//! [`crate::events`]), read here into the supervisor's watch loop; and rank 0's status
//! address, which rank 0's worker broadcasts at launch and every worker hands its supervisor.

use super::env;
use crate::bootstrap::Bootstrap;
use crate::events::{self, Address, Event};
use crate::ffi::os;
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
pub(super) static STATUS_ADDRS: std::sync::OnceLock<Vec<Address>> = std::sync::OnceLock::new();

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
        events::send(&Event::StatusAddr { addrs });
    }
}

/// Rank 0 broadcasts `port` on each of its IPv4 addresses and on its host name (last); every
/// rank gets the list (empty when rank 0 has no port to give).
pub(super) fn share_address(boot: &dyn Bootstrap, port: Option<u16>) -> Vec<Address> {
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
        .filter_map(Address::parse)
        .collect()
}

/// Rank 0's supervisor's addresses, once broadcast.
pub(super) fn status_addrs() -> &'static [Address] {
    STATUS_ADDRS.get().map(Vec::as_slice).unwrap_or(&[])
}

/// The name, in the host's abstract Unix socket namespace, under which rank 0's supervisor of
/// job `key` (see [`crate::bootstrap::launcher::job_key`]) answers its status port.
fn local_name(key: &str) -> std::io::Result<std::os::unix::net::SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    // An abstract name holds at most 107 bytes.
    let name: String = format!("nccl-smoke/{key}/status")
        .chars()
        .take(100)
        .collect();
    std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
}

/// Rank 0's supervisor: answers its status `port` to whichever process of this host asks under
/// the job's name, for as long as it runs. Before the ranks first meet no rank knows rank 0's
/// address; a rank that fails then, on rank 0's host, finds it here and reports like any other
/// (see [`local_status_address`]). Nothing is written to disk, and the name goes with the process.
pub(super) fn answer_status_port_locally(key: &str, port: u16) {
    let Ok(listener) = local_name(key).and_then(|a| UnixListener::bind_addr(&a)) else {
        return;
    };
    std::thread::spawn(move || {
        use std::io::Write;
        for mut s in listener.incoming().flatten() {
            let _ = writeln!(s, "{port}");
        }
    });
}

/// A rank that has no address of rank 0's supervisor (it failed before the ranks first met):
/// rank 0's status address when rank 0's supervisor runs on this host, asked for `within`
/// (rank 0's supervisor may be starting still). Empty when it is not found.
pub(super) fn local_status_address(key: &str, within: std::time::Duration) -> Vec<Address> {
    let start = std::time::Instant::now();
    let Ok(name) = local_name(key) else {
        return Vec::new();
    };
    loop {
        if let Ok(s) = std::os::unix::net::UnixStream::connect_addr(&name) {
            let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(500)));
            let mut line = String::new();
            let _ = BufReader::new(s).read_line(&mut line);
            return match line.trim().parse::<u16>() {
                // The host name last, as rank 0 lists it (see `share_address`).
                Ok(port) => vec![
                    Address {
                        host: "127.0.0.1".into(),
                        port,
                    },
                    Address {
                        host: os::hostname(),
                        port,
                    },
                ],
                Err(_) => Vec::new(),
            };
        }
        if start.elapsed() >= within {
            return Vec::new();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_on_rank_0s_host_finds_its_status_port_by_the_job_alone() {
        let key = format!("test-{}", std::process::id());
        let none = local_status_address(&key, std::time::Duration::ZERO);
        assert!(none.is_empty(), "{none:?}");
        answer_status_port_locally(&key, 4711);
        let found = local_status_address(&key, std::time::Duration::from_secs(2));
        assert_eq!(
            found.first().map(ToString::to_string).as_deref(),
            Some("127.0.0.1:4711")
        );
        assert!(found.last().is_some_and(|a| a.port == 4711), "{found:?}");
        // Another job's name is another socket.
        let other = local_status_address(&format!("{key}-other"), std::time::Duration::ZERO);
        assert!(other.is_empty(), "{other:?}");
    }
}
