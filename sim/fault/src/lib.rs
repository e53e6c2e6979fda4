//! The fault-injection grammar of the simulation backend.
//!
//! `NCCL_SMOKE_SIM_FAULT=<where>[@<rank>][:<kind>][,…]`
//!
//! * `where` — the step that fails, named as nccl-smoke names its stages: `launch`, `driver`,
//!   `device`, `alloc`, `unique-id`, `init`, `import` (buffer import while connecting), `proxy`
//!   (proxy connect), `shm` (shared-memory transport), `net` (network transport), `run`,
//!   `verify`, `finalize`.
//! * `rank` — the rank it applies to (every rank when omitted).
//! * `kind` — `error` (default: the return code and log lines the real library gives for that
//!   failure), `hang`, `crash` (the process dies), `slow=<factor>` (transfers take `factor`
//!   times as long), `corrupt` (one element of each received buffer is flipped), or a data fault
//!   at `verify` (`nothing`, `partial`, `flip`, `nan`, `peer`, each with an optional `=<bytes>`
//!   and `/<K>`: only operations with a receive buffer that long, only in every K-th run of them).
//!
//! The simulation libraries and the harness share this parser, so a spec that one of them
//! rejects is rejected everywhere, with a message naming the offending part.

pub mod ib;

use std::fmt;

/// The largest `slow=` factor: a thousand times slower is a link that is down, which `hang`
/// says better (a guess at a useful bound; NCCL has no such knob).
pub const MAX_SLOW: f64 = 1000.0;
/// The largest rank a fault may name.
pub const MAX_RANK: u32 = 1 << 20;
/// The most entries a fault list may hold, and its longest text.
pub const MAX_FAULTS: usize = 64;
pub const MAX_SPEC_LEN: usize = 4096;

/// `s` as an error message may quote it: control characters escaped, at most 60 characters.
fn shown(s: &str) -> String {
    let mut out: String = s.chars().take(60).flat_map(char::escape_debug).collect();
    if s.chars().count() > 60 {
        out.push('…');
    }
    out
}

/// Environment variable holding the fault list.
pub const FAULT_ENV: &str = "NCCL_SMOKE_SIM_FAULT";
/// Environment variable through which the harness tells the simulated driver its rank
/// (the driver has no communicator to ask).
pub const RANK_ENV: &str = "NCCL_SMOKE_SIM_RANK";

/// Where a fault strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Where {
    Launch,
    Driver,
    Device,
    Alloc,
    UniqueId,
    Init,
    Import,
    Proxy,
    Shm,
    Net,
    Run,
    Verify,
    Finalize,
}

impl Where {
    pub const ALL: [Where; 13] = [
        Where::Launch,
        Where::Driver,
        Where::Device,
        Where::Alloc,
        Where::UniqueId,
        Where::Init,
        Where::Import,
        Where::Proxy,
        Where::Shm,
        Where::Net,
        Where::Run,
        Where::Verify,
        Where::Finalize,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Where::Launch => "launch",
            Where::Driver => "driver",
            Where::Device => "device",
            Where::Alloc => "alloc",
            Where::UniqueId => "unique-id",
            Where::Init => "init",
            Where::Import => "import",
            Where::Proxy => "proxy",
            Where::Shm => "shm",
            Where::Net => "net",
            Where::Run => "run",
            Where::Verify => "verify",
            Where::Finalize => "finalize",
        }
    }

    fn parse(s: &str) -> Option<Where> {
        Where::ALL.into_iter().find(|w| w.name() == s)
    }
}

/// What happens when a fault strikes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// The call fails the way the real library fails at this step.
    Error,
    /// The call never returns (or the operation never completes).
    Hang,
    /// The process dies (SIGABRT), as when a library segfaults.
    Crash,
    /// Transfers take `factor` times as long.
    Slow(f64),
    /// One element of each received buffer is flipped.
    Corrupt,
    /// What an operation leaves in this rank's receive buffer (`verify` only), at every
    /// operation or only at those whose receive buffer is `bytes` long; with `every` K, only in
    /// every K-th run of such operations (a run: operations in a row that all match, as one
    /// size's iterations are), so a sweep repeated pass after pass sees it once every K passes.
    Data {
        fault: DataFault,
        bytes: Option<u64>,
        every: Option<u32>,
    },
}

/// A data fault: what a collective leaves in the receive buffer of the rank it strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataFault {
    /// Nothing: the buffer keeps what it held before (a kernel that did not run).
    Nothing,
    /// Only the first half is written.
    Partial,
    /// One element (the middle one) has its bits flipped after a correct transfer.
    Flip,
    /// Every element is a NaN (for integer types: every byte 0x7f).
    Nan,
    /// Another rank's data: all-to-all chunks shifted by one peer; for all-reduce and
    /// send/recv, the rank's own send buffer.
    Peer,
}

impl DataFault {
    pub const ALL: [DataFault; 5] = [
        DataFault::Nothing,
        DataFault::Partial,
        DataFault::Flip,
        DataFault::Nan,
        DataFault::Peer,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DataFault::Nothing => "nothing",
            DataFault::Partial => "partial",
            DataFault::Flip => "flip",
            DataFault::Nan => "nan",
            DataFault::Peer => "peer",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Error => f.write_str("error"),
            Kind::Hang => f.write_str("hang"),
            Kind::Crash => f.write_str("crash"),
            Kind::Slow(x) => write!(f, "slow={x}"),
            Kind::Corrupt => f.write_str("corrupt"),
            Kind::Data {
                fault,
                bytes,
                every,
            } => {
                f.write_str(fault.name())?;
                if let Some(b) = bytes {
                    write!(f, "={b}")?;
                }
                match every {
                    Some(k) => write!(f, "/{k}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// One entry of the fault list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fault {
    pub at: Where,
    /// `None`: every rank.
    pub rank: Option<u32>,
    pub kind: Kind,
}

impl Fault {
    pub fn applies_to(&self, rank: Option<u32>) -> bool {
        match (self.rank, rank) {
            (None, _) => true,
            (Some(want), Some(have)) => want == have,
            (Some(_), None) => false,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.at.name())?;
        if let Some(r) = self.rank {
            write!(f, "@{r}")?;
        }
        write!(f, ":{}", self.kind)
    }
}

/// A spec that could not be parsed; the message names the bad part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(pub String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{FAULT_ENV}: {}", self.0)
    }
}

impl std::error::Error for SpecError {}

/// The parsed fault list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultSet(pub Vec<Fault>);

impl FaultSet {
    /// Parses a comma-separated list. Empty input means no faults.
    pub fn parse(spec: &str) -> Result<FaultSet, SpecError> {
        if spec.len() > MAX_SPEC_LEN {
            return Err(SpecError(format!(
                "{} bytes long, more than the {MAX_SPEC_LEN} a fault list may be",
                spec.len()
            )));
        }
        let mut out = Vec::new();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            out.push(parse_one(part)?);
            if out.len() > MAX_FAULTS {
                return Err(SpecError(format!(
                    "more than {MAX_FAULTS} faults in one list"
                )));
            }
        }
        Ok(FaultSet(out))
    }

    /// Reads [`FAULT_ENV`]; unset means no faults.
    pub fn from_env() -> Result<FaultSet, SpecError> {
        match std::env::var(FAULT_ENV) {
            Ok(s) => FaultSet::parse(&s),
            Err(std::env::VarError::NotPresent) => Ok(FaultSet::default()),
            Err(std::env::VarError::NotUnicode(_)) => {
                Err(SpecError("value is not valid UTF-8".into()))
            }
        }
    }

    /// The first fault at `at` that applies to `rank`.
    pub fn find(&self, at: Where, rank: Option<u32>) -> Option<Fault> {
        self.0
            .iter()
            .copied()
            .find(|f| f.at == at && f.applies_to(rank))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The rank the harness announced through [`RANK_ENV`], if any.
pub fn rank_from_env() -> Option<u32> {
    std::env::var(RANK_ENV).ok()?.trim().parse().ok()
}

fn parse_one(part: &str) -> Result<Fault, SpecError> {
    let (head, kind) = match part.split_once(':') {
        Some((h, k)) => (h, parse_kind(k, part)?),
        None => (part, Kind::Error),
    };
    let (name, rank) = match head.split_once('@') {
        Some((n, r)) => {
            let rank = r
                .parse::<u32>()
                .ok()
                .filter(|r| *r <= MAX_RANK)
                .ok_or_else(|| {
                    SpecError(format!(
                        "bad rank '{}' in '{}': expected an integer from 0 to {MAX_RANK}",
                        shown(r),
                        shown(part)
                    ))
                })?;
            (n, Some(rank))
        }
        None => (head, None),
    };
    let at = Where::parse(name).ok_or_else(|| {
        let names: Vec<_> = Where::ALL.iter().map(|w| w.name()).collect();
        SpecError(format!(
            "unknown fault location '{}' in '{}': expected one of {}",
            shown(name),
            shown(part),
            names.join(", ")
        ))
    })?;
    if matches!(kind, Kind::Data { .. }) && at != Where::Verify {
        return Err(SpecError(format!(
            "'{}': data faults (nothing, partial, flip, nan, peer) strike at 'verify' only",
            shown(part)
        )));
    }
    Ok(Fault { at, rank, kind })
}

/// `nothing`, `partial`, `flip`, `nan` or `peer`, with an optional `=<bytes>` (the receive
/// buffer size of the operations it strikes) and an optional `/<K>` (in every K-th run of them).
fn parse_data(k: &str, part: &str) -> Result<Kind, SpecError> {
    let (k, every) = match k.split_once('/') {
        Some((k, e)) => {
            let every = e.parse::<u32>().ok().filter(|e| *e >= 1).ok_or_else(|| {
                SpecError(format!(
                    "bad period '{}' in '{}': expected a whole number of runs from 1",
                    shown(e),
                    shown(part)
                ))
            })?;
            (k, Some(every))
        }
        None => (k, None),
    };
    let (name, bytes) = match k.split_once('=') {
        Some((n, b)) => {
            let bytes = b.parse::<u64>().map_err(|_| {
                SpecError(format!(
                    "bad size '{}' in '{}': expected a number of bytes",
                    shown(b),
                    shown(part)
                ))
            })?;
            (n, Some(bytes))
        }
        None => (k, None),
    };
    let fault = DataFault::ALL
        .into_iter()
        .find(|d| d.name() == name)
        .ok_or_else(|| SpecError(format!("unknown data fault '{}'", shown(name))))?;
    Ok(Kind::Data {
        fault,
        bytes,
        every,
    })
}

fn parse_kind(k: &str, part: &str) -> Result<Kind, SpecError> {
    match k {
        "error" => Ok(Kind::Error),
        "hang" => Ok(Kind::Hang),
        "crash" => Ok(Kind::Crash),
        "corrupt" => Ok(Kind::Corrupt),
        _ if DataFault::ALL
            .iter()
            .any(|d| k.split(['=', '/']).next() == Some(d.name())) =>
        {
            parse_data(k, part)
        }
        _ => match k.strip_prefix("slow=") {
            Some(x) => match x.parse::<f64>() {
                Ok(f) if f.is_finite() && (1.0..=MAX_SLOW).contains(&f) => Ok(Kind::Slow(f)),
                _ => Err(SpecError(format!(
                    "bad slow factor '{}' in '{}': expected a number from 1 to {MAX_SLOW}",
                    shown(x),
                    shown(part)
                ))),
            },
            None => Err(SpecError(format!(
                "unknown fault kind '{}' in '{}': expected error, hang, crash, slow=<factor>, corrupt, or a data fault (nothing, partial, flip, nan, peer, each with an optional =<bytes>)",
                shown(k),
                shown(part)
            ))),
        },
    }
}

#[cfg(test)]
mod tests;
