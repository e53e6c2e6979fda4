//! NCCL's RAS service (2.24 and later): ask the running job, through the local NCCL process's
//! client socket, which ranks of a communicator are missing, dead, in error, or behind in their
//! operation counts. A second opinion for a wait that timed out after init; never a verdict of
//! its own. See `docs/ras.md` for what is asked, when, and what reaches the verdict.
//!
//! Every behaviour here follows the NVIDIA/nccl source named beside it ("guess" where the
//! source says nothing):
//!
//! | behaviour | source |
//! |---|---|
//! | the service exists from 2.24 | `src/ras/` first appears in v2.24.3-1 |
//! | `NCCL_RAS_ENABLE` (default 1; only the value 1 enables it, read as `strtoll(s, 0, 0)`) | `NCCL_PARAM(RasEnable, "RAS_ENABLE", 1)` and `ncclParamRasEnable() == 1`, `src/bootstrap.cc` v2.28.7-1; `ncclLoadParam`, `src/misc/param.cc` v2.28.7-1 |
//! | `NCCL_RAS_ADDR` (default `localhost:28028`) | `rasClientInitSocket`, `src/ras/client_support.cc` v2.24.3-1 and v2.28.7-1; `NCCL_RAS_CLIENT_PORT`, `src/ras/ras_internal.h` |
//! | handshake `CLIENT PROTOCOL 2` → `SERVER PROTOCOL <n>`; a different `<n>` is tolerated | `connectToNCCL`, `src/ras/client.cc` v2.28.7-1; the server side in `rasClientEventLoop`, `client_support.cc` |
//! | `TIMEOUT <s>` → `OK` (bounds each leg of the RAS collective on the server; half the time left is sent, a guess at the margin) | same two functions; `RAS_COLLECTIVE_LEG_TIMEOUT` and `RAS_COLLECTIVE_EXTRA_TIMEOUT`, `src/ras/ras_internal.h` |
//! | `SET FORMAT json` → `OK`, from 2.28.7 (absent in v2.28.3-1) | `setOutputFormat`, `client.cc` v2.28.7-1 |
//! | `STATUS`; the reply ends when the server closes the connection | `getNCCLStatus`, `client.cc` (reads to EOF); `RAS_CLIENT_FINISHED` → `rasClientTerminate`, `client_support.cc` |
//! | a first answer within a third of the bound (at most 1 s), else a retry on a fresh connection (another process may answer) | `connectToNCCL`, `client.cc` v2.28.7-1 (1 s, then "Connection timed out; retrying"); the third is a guess, to leave time for a retry |
//! | every NCCL process on a node binds the port with `SO_REUSEPORT`; one that cannot bind goes on without a client socket | `rasClientInitSocket` (`SO_REUSEADDR`, `SO_REUSEPORT`), called as `(void)rasClientInitSocket()` in `ncclRasCommInit`, `src/ras/ras.cc` v2.28.7-1 |
//! | what the JSON and text reports hold | [`parse`] (JSON), [`text`] |
//! | the communicator hash of a unique id | [`comm_hash`] |

mod client;
#[cfg(test)]
mod client_tests;
mod hash;
pub mod parse;
#[cfg(test)]
mod tests;
pub mod text;

pub use client::query;
pub use hash::comm_hash;

use std::time::Duration;

/// NCCL's port for RAS clients (`NCCL_RAS_CLIENT_PORT`, `src/ras/ras_internal.h` v2.28.7-1).
pub const DEFAULT_ADDR: &str = "localhost:28028";
/// The first release with RAS.
pub const FIRST_VERSION: i32 = 22400;
/// The first release that takes `SET FORMAT json`.
pub const JSON_VERSION: i32 = 22807;

/// Why there is no RAS report. None of these is a failure of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// `NCCL_RAS_ENABLE` is not 1.
    Disabled,
    /// The loaded NCCL predates RAS.
    TooOld(i32),
    /// `NCCL_RAS_ADDR` names nothing this host can connect to.
    BadAddress(String),
    /// Nobody listens (connection refused), or no connection could be made in time.
    NoService(String),
    /// The time allowed ran out before a whole report came back.
    TimedOut,
    /// Something answered that does not speak the RAS protocol, or a report that could not be
    /// read.
    Garbled(String),
    /// A report came back but does not know the communicator asked about (another job's NCCL
    /// process on this node answered on the shared port).
    NotOurs,
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::Disabled => write!(f, "NCCL_RAS_ENABLE is not 1"),
            Unavailable::TooOld(v) => write!(f, "NCCL {v} predates RAS (2.24)"),
            Unavailable::BadAddress(a) => write!(f, "NCCL_RAS_ADDR {a:?} cannot be resolved"),
            Unavailable::NoService(why) => write!(f, "no RAS service: {why}"),
            Unavailable::TimedOut => write!(f, "no whole RAS report in the time allowed"),
            Unavailable::Garbled(why) => write!(f, "unreadable RAS answer: {why}"),
            Unavailable::NotOurs => write!(f, "the RAS report does not know this communicator"),
        }
    }
}

/// Where to ask, and how: from the environment the NCCL library reads, and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub addr: String,
    pub json: bool,
}

/// Whether and where this process's NCCL (version `code`) serves RAS, per `env` (the
/// process's environment, where NCCL reads it).
pub fn target(code: i32, env: impl Fn(&str) -> Option<String>) -> Result<Target, Unavailable> {
    if code < FIRST_VERSION {
        return Err(Unavailable::TooOld(code));
    }
    if !enabled(env("NCCL_RAS_ENABLE").as_deref()) {
        return Err(Unavailable::Disabled);
    }
    let addr = env("NCCL_RAS_ADDR")
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| DEFAULT_ADDR.to_string());
    Ok(Target {
        addr,
        json: code >= JSON_VERSION,
    })
}

/// `NCCL_RAS_ENABLE` as NCCL reads it: unset or empty is the default (1); otherwise
/// `strtoll(s, NULL, 0)`, an out-of-range value falling back to the default; RAS runs only when
/// the value is exactly 1.
pub fn enabled(v: Option<&str>) -> bool {
    match v.filter(|s| !s.is_empty()) {
        None => true,
        Some(s) => strtoll0(s).unwrap_or(1) == 1,
    }
}

/// C's `strtoll(s, NULL, 0)`: leading blanks, a sign, `0x` hex or `0` octal, the longest run
/// of digits; no digits is 0. `None` on overflow (where C sets `ERANGE`).
fn strtoll0(s: &str) -> Option<i64> {
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if (t.starts_with("0x") || t.starts_with("0X"))
        && t[2..].starts_with(|c: char| c.is_ascii_hexdigit())
    {
        (16, &t[2..])
    } else if t.starts_with('0') {
        (8, t)
    } else {
        (10, t)
    };
    let run: String = digits.chars().take_while(|c| c.is_digit(radix)).collect();
    if run.is_empty() {
        return Some(0);
    }
    let v = i64::from_str_radix(&run, radix).ok()?;
    Some(if neg { -v } else { v })
}

/// How long a query may take: a quarter of `deadline`, clamped to 0.5–10 s.
pub fn bound(deadline: Duration) -> Duration {
    (deadline / 4).clamp(Duration::from_millis(500), Duration::from_secs(10))
}

/// What RAS says about one rank (or one process, when the rank is not known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// No data came back from the rank's process (`INCOMPLETE`; JSON `unresponsive`).
    Missing,
    /// The rank's process is unreachable over the RAS network (`DEAD`; JSON `considered_dead`).
    Dead,
    /// The process answered but does not hold this communicator any more (NOCOMM).
    NoComm,
    /// An initialization or asynchronous error, in RAS's words.
    Error(String),
    /// A status different from the other ranks' (`INIT`, `FINALIZE`, `ABORT`, …).
    Status(String),
    /// Launched up to `count` operations of kind `op` where most ranks launched `usual`
    /// (`None` when RAS did not say).
    Launched {
        op: String,
        count: u64,
        usual: Option<u64>,
    },
}

/// One finding: a rank (when known), where it runs, and its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub rank: Option<u32>,
    pub host: Option<String>,
    pub pid: Option<i64>,
    pub state: State,
}

/// One communicator as RAS reported it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comm {
    pub hash: u64,
    /// Ranks in the communicator, when the report says.
    pub size: Option<u32>,
    /// Ranks whose data came back, when the report says.
    pub answered: Option<u32>,
    pub findings: Vec<Finding>,
}

/// A RAS report, summarised.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub nccl_version: Option<String>,
    pub comms: Vec<Comm>,
    /// Job processes with no data, or considered dead, outside any one communicator (text).
    pub processes: Vec<Finding>,
    /// Communication timeouts RAS met while gathering.
    pub timeouts: u32,
    /// Read from a text report, which names a communicator only when something is wrong with
    /// it (`rasClientRunComms`): one that names none has nothing to say against any.
    pub text: bool,
}

impl Report {
    pub fn comm(&self, hash: u64) -> Option<&Comm> {
        self.comms.iter().find(|c| c.hash == hash)
    }

    /// Whether the report speaks of communicator `hash`: names it, or is a text report that
    /// names no communicator at all (every one of the answering job is fine).
    pub fn knows(&self, hash: u64) -> bool {
        self.comm(hash).is_some() || (self.text && self.comms.is_empty())
    }

    /// The evidence lines about communicator `hash` (empty when the report does not know it).
    pub fn evidence(&self, hash: u64) -> Vec<String> {
        if self.text && self.comms.is_empty() {
            // The job-level process list is the report's own finding then: never say "none
            // missing" above a line that names a missing or dead process.
            let first = if self.processes.is_empty() {
                "NCCL RAS: no communicator has missing, dead, failed or mismatched ranks (a text report, which names a communicator only when it has)"
            } else {
                "NCCL RAS: no communicator is named (a text report names one only when its ranks disagree), but at the job level:"
            };
            let mut lines = vec![first.to_string()];
            lines.extend(
                self.processes
                    .iter()
                    .take(MAX_LINES)
                    .map(|p| format!("NCCL RAS: {}", p.describe())),
            );
            return lines;
        }
        let Some(c) = self.comm(hash) else {
            return Vec::new();
        };
        let head = format!("NCCL RAS: communicator {hash:#018x}");
        let mut lines: Vec<String> = c
            .findings
            .iter()
            .take(MAX_LINES)
            .map(|f| format!("{head}: {}", f.describe()))
            .collect();
        if c.findings.len() > MAX_LINES {
            lines.push(format!(
                "{head}: and {} more findings",
                c.findings.len() - MAX_LINES
            ));
        }
        // Job processes RAS names outside the communicator, unless a rank line names them.
        let named = |p: &Finding| {
            c.findings
                .iter()
                .any(|f| f.pid.is_some() && f.pid == p.pid && f.host == p.host)
        };
        lines.extend(
            self.processes
                .iter()
                .filter(|p| !named(p))
                .take(MAX_LINES)
                .map(|p| format!("NCCL RAS: {}", p.describe())),
        );
        if lines.is_empty() {
            let n = c
                .answered
                .or(c.size)
                .map(|n| format!("all {n} ranks"))
                .unwrap_or_else(|| "every rank".into());
            lines.push(format!(
                "{head}: {n} answered; none missing, dead or in error, and their operation counts agree"
            ));
        }
        if self.timeouts > 0 {
            lines.push(format!(
                "NCCL RAS: {} communication timeouts while gathering (the answer may be partial)",
                self.timeouts
            ));
        }
        lines
    }
}

/// At most this many finding lines per report.
const MAX_LINES: usize = 8;

impl Finding {
    fn describe(&self) -> String {
        let mut where_ = Vec::new();
        if let Some(h) = &self.host {
            where_.push(format!("host {h}"));
        }
        if let Some(p) = self.pid {
            where_.push(format!("pid {p}"));
        }
        let place = if where_.is_empty() {
            String::new()
        } else {
            format!(" ({})", where_.join(", "))
        };
        let who = match self.rank {
            Some(r) => format!("rank {r}{place}"),
            None => format!("process{place}"),
        };
        let what = match &self.state {
            State::Missing => "missing (no data came back from its process)".to_string(),
            State::Dead => "considered dead (unreachable over the RAS network)".to_string(),
            State::NoComm => "its process answered without this communicator".to_string(),
            State::Error(e) => format!("reported {e}"),
            State::Status(s) => format!("has status {s} (unlike the other ranks)"),
            State::Launched { op, count, usual } => {
                let usual = usual
                    .map(|u| format!(" (most ranks: {u})"))
                    .unwrap_or_default();
                format!("launched up to {op} operation {count}{usual}")
            }
        };
        format!("{who} {what}")
    }
}
