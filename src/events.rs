//! The worker's side of the line to its supervisor (see `crate::run::supervisor`): which stage it is
//! in, that it is still making progress, and how it ended. One JSON object per line over a
//! Unix socket; a worker started without a supervisor reports nowhere.

use crate::error::Failure;
use crate::stage::{Stage, StageRecord};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, OnceLock};

/// Environment variable carrying the supervisor's socket path to the worker.
pub const SOCKET_ENV: &str = "NCCL_SMOKE_SUPERVISOR_SOCKET";

/// What a worker tells its supervisor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Entered `stage`; the supervisor's deadline for it starts now.
    Stage {
        stage: Stage,
        #[serde(default)]
        rank: Option<u32>,
    },
    /// Still making progress within the current stage (restarts its deadline).
    Beat,
    /// The work now under way (one message size of the sweep) is expected to take up to
    /// `secs` seconds on its own: the stage's deadline, which bounds the time without progress,
    /// counts from there. Sent before each size, from the time the previous one took.
    Budget { secs: f64 },
    /// Supervisor to rank 0's supervisor: still here (sent every few tenths of a second, so a
    /// stopped or vanished supervisor is noticed).
    Alive,
    /// Where within the stage the worker is now (does not restart the deadline), so that a
    /// hang report says "waiting in the first MPI collective" rather than only "launch".
    /// `waiting`: the step waits on other ranks.
    Step {
        what: String,
        #[serde(default)]
        waiting: bool,
    },
    /// Rank 0 keeps a results document (its supervisor writes it, with its `--csv` and
    /// `--prometheus` copies): at `--json`'s path, when given.
    Results { path: Option<String> },
    /// Rank 0's results document as it stands now, whole: after every size and at the
    /// worker's end. The supervisor is its one writer (`report::writer::Writer`).
    Doc { doc: serde_json::Value },
    /// What runs underneath (the results file's `backend`), when it is the real libnccl on
    /// simulated GPUs: the supervisor labels the job's verdict with it.
    Backend { backend: String },
    /// What NCCL's RAS said when a wait of the worker's ran out, sent before the communicator
    /// is aborted (an abort that hangs must not lose it).
    Notes { lines: Vec<String> },
    /// The communicator NCCL's RAS knows this rank's by: the library's version code and the
    /// communicator's hash (rank 0's supervisor asks RAS about it when it names a rank that
    /// never arrived).
    Ras { version: i32, hash: u64 },
    /// The worker failed and has printed its own verdict.
    Failed { failure: Failure },
    /// Rank 0's check of the data lays this failure on another rank too (wrong data from
    /// several ranks): it counts in the job's verdict as that rank's, sent after `Failed`.
    Implicated { failure: Failure },
    /// Where rank 0's supervisor takes status reports (rank 0 broadcast it at launch).
    StatusAddr { addrs: Vec<Address> },
    /// Supervisor to rank 0's supervisor: this rank is done, with this exit code and verdict.
    Ended {
        code: u8,
        #[serde(default)]
        failure: Option<Failure>,
        /// The rank's walk through the stages, as its supervisor timed it.
        #[serde(default)]
        stages: Vec<StageRecord>,
    },
}

static LINE: OnceLock<Mutex<Option<UnixStream>>> = OnceLock::new();

fn line() -> &'static Mutex<Option<UnixStream>> {
    LINE.get_or_init(|| {
        let stream = std::env::var(SOCKET_ENV)
            .ok()
            .and_then(|p| UnixStream::connect(p).ok());
        Mutex::new(stream)
    })
}

/// Sends an event; a lost supervisor is not the worker's failure, so errors are dropped.
pub fn send(event: &Event) {
    let Ok(mut guard) = line().lock() else { return };
    if let Some(stream) = guard.as_mut() {
        let mut text = serde_json::to_string(event).unwrap_or_default();
        text.push('\n');
        if stream.write_all(text.as_bytes()).is_err() {
            *guard = None;
        }
    }
}

/// Shorthand: entered `stage`.
pub fn enter(stage: Stage, rank: Option<u32>) {
    send(&Event::Stage { stage, rank });
}

/// Shorthand: now doing `what` within the current stage.
pub fn step(what: &str) {
    send(&Event::Step {
        what: what.to_string(),
        waiting: false,
    });
}

/// Shorthand: now waiting on the other ranks for `what`.
pub fn waiting(what: &str) {
    send(&Event::Step {
        what: what.to_string(),
        waiting: true,
    });
}

/// Shorthand: still going.
pub fn beat() {
    send(&Event::Beat);
}

/// Shorthand: the work now under way may take `secs` seconds before the next beat.
pub fn budget(secs: f64) {
    send(&Event::Budget { secs });
}

/// Where a process of rank 0 listens (its supervisor's status line, `isolate`'s coordinator):
/// a host, by IPv4 address or by name, and a port. Written `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Address {
    pub host: String,
    pub port: u16,
}

impl Address {
    /// `host:port` (the port after the last colon), or `None`.
    pub fn parse(text: &str) -> Option<Address> {
        let (host, port) = text.trim().rsplit_once(':')?;
        Some(Address {
            host: host.to_string(),
            port: port.parse().ok()?,
        })
    }

    /// The address as a socket address when its host is an IP address (a name is not looked
    /// up).
    pub fn ip(&self) -> Option<std::net::SocketAddr> {
        let ip: std::net::IpAddr = self.host.parse().ok()?;
        Some(std::net::SocketAddr::new(ip, self.port))
    }

    /// The first socket address it resolves to (a name is looked up).
    pub fn resolve(&self) -> Option<std::net::SocketAddr> {
        use std::net::ToSocketAddrs;
        (self.host.as_str(), self.port)
            .to_socket_addrs()
            .ok()?
            .next()
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// An address crosses the line and the text of rank 0's broadcast unchanged.
        #[test]
        fn an_address_survives_the_wire_and_its_text(
            host in "[a-z0-9.-]{1,30}",
            port in proptest::num::u16::ANY,
        ) {
            let a = Address { host, port };
            let e = Event::StatusAddr { addrs: vec![a.clone()] };
            let back: Event = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
            proptest::prop_assert_eq!(back, e);
            proptest::prop_assert_eq!(Address::parse(&a.to_string()), Some(a));
        }
    }

    #[test]
    fn an_address_is_a_host_and_a_port() {
        let a = Address::parse("10.0.0.2:4711").unwrap();
        assert_eq!(a.ip(), Some("10.0.0.2:4711".parse().unwrap()));
        let named = Address::parse("gpu01:4711").unwrap();
        assert_eq!(
            (named.host.as_str(), named.port, named.ip()),
            ("gpu01", 4711, None)
        );
        assert_eq!(Address::parse("gpu01"), None);
        assert_eq!(Address::parse("gpu01:port"), None);
    }

    #[test]
    fn events_are_one_json_line_each() {
        let e = Event::Stage {
            stage: Stage::Init,
            rank: Some(1),
        };
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(text, r#"{"event":"stage","stage":"init","rank":1}"#);
        let back: Event = serde_json::from_str(&text).unwrap();
        assert_eq!(back, e);
    }
}
