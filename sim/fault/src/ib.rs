//! The simulated InfiniBand fabric's two specs, shared by the libibverbs stand-in and the
//! harness (which rejects a bad one before any rank starts).
//!
//! `NCCL_SMOKE_SIM_IB_HCAS=<name>[:<option>…][,…]` — the host's HCAs, one port each:
//! * `name` — the device name NCCL prints and `NCCL_IB_HCA` selects (`mlx5_0`);
//! * `ib` (default) or `roce` — the port's link layer;
//! * `down` — the port is DOWN (NCCL skips it);
//! * `speed=<edr|hdr|ndr|xdr>` — the port's rate at width 4x (default `ndr`, 400 Gb/s);
//! * `dmabuf` — the kernel and rdma-core register GPU memory through DMA-BUF
//!   (`ibv_reg_dmabuf_mr`); without it the verb fails with `EOPNOTSUPP`, as on a kernel
//!   before 5.12, and NCCL's probe finds no DMA-BUF.
//!
//! Unset means one InfiniBand HCA, `mlx5_0`; empty means a host without HCAs.
//!
//! `NCCL_SMOKE_SIM_IB_FAULT=<what>[/<hca>][@<rank>][#<n>[..<m>]][:<how>][,…]`:
//! * `what` — a verb (`ibv_modify_qp`, `ibv_reg_mr`, `ibv_create_qp`, …) that fails with an
//!   errno (`how`: a name such as `EINVAL`, or a number; default `EIO`), or `hang`s, or
//!   `crash`es the process; `completion`: a work request completes with an `ibv_wc_status`
//!   (`how`: a number or name, default 12, `IBV_WC_RETRY_EXC_ERR`) and moves no byte; `async`:
//!   an asynchronous event (`how`: `qp-fatal`, `port-error`, `device-fatal`; default
//!   `qp-fatal`) raised at a work request.
//! * `hca` — the HCA (a name of `NCCL_SMOKE_SIM_IB_HCAS`) whose calls it strikes: those on its
//!   context, protection domains, queues and regions (every HCA when omitted; a verb on no HCA,
//!   `ibv_get_device_list`, only then).
//! * `rank` — the process whose `NCCL_SMOKE_SIM_RANK` it is (every process when omitted).
//! * `n`, `m` — the calls of that verb (or the work requests posted, for `completion` and
//!   `async`) in the process that it strikes, on its HCA when it names one, 1-based: from the
//!   `n`-th on, or the `n`-th to the `m`-th (default: from the first on).

use crate::shown;
use std::fmt;

/// A spec that could not be parsed; the message names the variable and the bad part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IbSpecError(pub String);

impl fmt::Display for IbSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for IbSpecError {}

pub const HCAS_ENV: &str = "NCCL_SMOKE_SIM_IB_HCAS";
pub const IB_FAULT_ENV: &str = "NCCL_SMOKE_SIM_IB_FAULT";
/// The most HCAs one host may have (a DGX has 8 compute and 2 storage HCAs; a guess at a bound).
pub const MAX_HCAS: usize = 32;

/// A port's link layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    Infiniband,
    Ethernet,
}

/// One port rate, as `ibv_port_attr.active_speed` codes it (rdma-core `enum ibv_port_speed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speed {
    Edr,
    Hdr,
    Ndr,
    Xdr,
}

impl Speed {
    /// `active_speed` (XDR only fits `active_speed_ex`: 256).
    pub fn code(self) -> u32 {
        match self {
            Speed::Edr => 32,
            Speed::Hdr => 64,
            Speed::Ndr => 128,
            Speed::Xdr => 256,
        }
    }
}

/// One simulated HCA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hca {
    pub name: String,
    pub link: Link,
    pub up: bool,
    pub speed: Speed,
    /// Whether `ibv_reg_dmabuf_mr` is supported.
    pub dmabuf: bool,
}

fn hca_error(msg: String) -> IbSpecError {
    IbSpecError(format!("{HCAS_ENV}: {msg}"))
}

/// A device name as the specs take it.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Parses an HCA list; empty means none.
pub fn parse_hcas(spec: &str) -> Result<Vec<Hca>, IbSpecError> {
    let mut out: Vec<Hca> = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let mut fields = part.split(':');
        let name = fields.next().unwrap_or_default();
        if !valid_name(name) {
            return Err(hca_error(format!(
                "bad device name '{}' in '{}': letters, digits, '_' and '-', under 64 of them",
                shown(name),
                shown(part)
            )));
        }
        if out.iter().any(|h| h.name == name) {
            return Err(hca_error(format!("device '{}' named twice", shown(name))));
        }
        let mut hca = Hca {
            name: name.to_string(),
            link: Link::Infiniband,
            up: true,
            speed: Speed::Ndr,
            dmabuf: false,
        };
        for f in fields {
            match f {
                "ib" => hca.link = Link::Infiniband,
                "roce" => hca.link = Link::Ethernet,
                "down" => hca.up = false,
                "speed=edr" => hca.speed = Speed::Edr,
                "speed=hdr" => hca.speed = Speed::Hdr,
                "speed=ndr" => hca.speed = Speed::Ndr,
                "speed=xdr" => hca.speed = Speed::Xdr,
                "dmabuf" => hca.dmabuf = true,
                other => {
                    return Err(hca_error(format!(
                        "unknown option '{}' in '{}': expected ib, roce, down, dmabuf, \
                         or speed=edr|hdr|ndr|xdr",
                        shown(other),
                        shown(part)
                    )));
                }
            }
        }
        out.push(hca);
        if out.len() > MAX_HCAS {
            return Err(hca_error(format!("more than {MAX_HCAS} devices")));
        }
    }
    Ok(out)
}

/// The HCAs of [`HCAS_ENV`]: unset is one InfiniBand HCA, `mlx5_0`.
pub fn hcas_from_env() -> Result<Vec<Hca>, IbSpecError> {
    match std::env::var(HCAS_ENV) {
        Ok(s) => parse_hcas(&s),
        Err(std::env::VarError::NotPresent) => parse_hcas("mlx5_0"),
        Err(std::env::VarError::NotUnicode(_)) => Err(hca_error("value is not valid UTF-8".into())),
    }
}

/// What an IB fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IbKind {
    /// The verb fails with this errno.
    Errno(i32),
    Hang,
    Crash,
    /// A work request completes with this `ibv_wc_status`.
    Status(u32),
    /// An asynchronous event (`ibv_event_type`) is raised.
    Event(AsyncEvent),
}

/// The asynchronous events a fault can raise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncEvent {
    QpFatal,
    PortError,
    DeviceFatal,
}

impl AsyncEvent {
    /// rdma-core `enum ibv_event_type`.
    pub fn code(self) -> u32 {
        match self {
            AsyncEvent::QpFatal => 1,
            AsyncEvent::PortError => 10,
            AsyncEvent::DeviceFatal => 8,
        }
    }
}

/// One IB fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IbFault {
    /// A verb's name, `completion` or `async`.
    pub what: String,
    /// The HCA it is aimed at; every one when `None`.
    pub hca: Option<String>,
    pub rank: Option<u32>,
    /// The calls (1-based, inclusive) it strikes.
    pub from: u64,
    pub to: u64,
    pub kind: IbKind,
}

impl IbFault {
    /// Whether the `call`-th call (1-based) of `what` on `rank`, on the HCA named `hca` (`None`:
    /// a call on no HCA), is struck; `call` counts the calls on that HCA when the fault names
    /// one, else all of them.
    pub fn strikes(&self, what: &str, rank: Option<u32>, hca: Option<&str>, call: u64) -> bool {
        self.what == what
            && (self.rank.is_none() || self.rank == rank)
            && (self.hca.is_none() || self.hca.as_deref() == hca)
            && (self.from..=self.to).contains(&call)
    }
}

/// The verbs a fault may name: those the stand-in exports.
pub const VERBS: &[&str] = &[
    "ibv_get_device_list",
    "ibv_open_device",
    "ibv_close_device",
    "ibv_query_device",
    "ibv_query_port",
    "ibv_query_gid",
    "ibv_query_qp",
    "ibv_alloc_pd",
    "ibv_dealloc_pd",
    "ibv_reg_mr",
    "ibv_reg_mr_iova2",
    "ibv_reg_dmabuf_mr",
    "ibv_dereg_mr",
    "ibv_create_cq",
    "ibv_destroy_cq",
    "ibv_create_qp",
    "ibv_modify_qp",
    "ibv_destroy_qp",
    "ibv_post_send",
    "ibv_post_recv",
    "ibv_poll_cq",
];

/// errno names a fault may use (Linux numbers).
const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", 1),
    ("ENOENT", 2),
    ("EIO", 5),
    ("EAGAIN", 11),
    ("ENOMEM", 12),
    ("EACCES", 13),
    ("EFAULT", 14),
    ("EBUSY", 16),
    ("ENODEV", 19),
    ("EINVAL", 22),
    ("ENOSPC", 28),
    ("EPROTONOSUPPORT", 93),
    ("EOPNOTSUPP", 95),
    ("ENETDOWN", 100),
    ("ENETUNREACH", 101),
    ("ECONNRESET", 104),
    ("ETIMEDOUT", 110),
];

/// `ibv_wc_status` names (rdma-core `enum ibv_wc_status`, in order from 0).
pub const WC_STATUS: &[&str] = &[
    "IBV_WC_SUCCESS",
    "IBV_WC_LOC_LEN_ERR",
    "IBV_WC_LOC_QP_OP_ERR",
    "IBV_WC_LOC_EEC_OP_ERR",
    "IBV_WC_LOC_PROT_ERR",
    "IBV_WC_WR_FLUSH_ERR",
    "IBV_WC_MW_BIND_ERR",
    "IBV_WC_BAD_RESP_ERR",
    "IBV_WC_LOC_ACCESS_ERR",
    "IBV_WC_REM_INV_REQ_ERR",
    "IBV_WC_REM_ACCESS_ERR",
    "IBV_WC_REM_OP_ERR",
    "IBV_WC_RETRY_EXC_ERR",
    "IBV_WC_RNR_RETRY_EXC_ERR",
    "IBV_WC_LOC_RDD_VIOL_ERR",
    "IBV_WC_REM_INV_RD_REQ_ERR",
    "IBV_WC_REM_ABORT_ERR",
    "IBV_WC_INV_EECN_ERR",
    "IBV_WC_INV_EEC_STATE_ERR",
    "IBV_WC_FATAL_ERR",
    "IBV_WC_RESP_TIMEOUT_ERR",
    "IBV_WC_GENERAL_ERR",
];

/// The errno named `s` (its Linux name, as `EINVAL`, or a positive number).
pub fn errno_of(s: &str) -> Option<i32> {
    ERRNOS
        .iter()
        .find(|(n, _)| *n == s)
        .map(|(_, v)| *v)
        .or_else(|| s.parse::<i32>().ok().filter(|v| (1..4096).contains(v)))
}

fn fault_error(msg: String) -> IbSpecError {
    IbSpecError(format!("{IB_FAULT_ENV}: {msg}"))
}

fn parse_fault(part: &str) -> Result<IbFault, IbSpecError> {
    let (head, how) = match part.split_once(':') {
        Some((h, k)) => (h, Some(k)),
        None => (part, None),
    };
    let (head, range) = match head.split_once('#') {
        Some((h, r)) => (h, Some(r)),
        None => (head, None),
    };
    let (what, rank) = match head.split_once('@') {
        Some((w, r)) => {
            let rank = r.parse::<u32>().ok().filter(|r| *r <= crate::MAX_RANK);
            let rank = rank.ok_or_else(|| {
                fault_error(format!(
                    "bad rank '{}' in '{}': expected an integer from 0 to {}",
                    shown(r),
                    shown(part),
                    crate::MAX_RANK
                ))
            })?;
            (w, Some(rank))
        }
        None => (head, None),
    };
    let (what, hca) = match what.split_once('/') {
        Some((w, h)) if valid_name(h) => (w, Some(h.to_string())),
        Some((_, h)) => {
            return Err(fault_error(format!(
                "bad HCA '{}' in '{}': letters, digits, '_' and '-', under 64 of them",
                shown(h),
                shown(part)
            )));
        }
        None => (what, None),
    };
    let (from, to) = match range {
        None => (1, u64::MAX),
        Some(r) => {
            let bad = || {
                fault_error(format!(
                    "bad call range '#{}' in '{}': expected #N (from the N-th call on) or \
                     #N..M, 1-based",
                    shown(r),
                    shown(part)
                ))
            };
            let num = |s: &str| s.parse::<u64>().ok().filter(|n| *n >= 1);
            match r.split_once("..") {
                None => (num(r).ok_or_else(bad)?, u64::MAX),
                Some((a, b)) => {
                    let (a, b) = (num(a).ok_or_else(bad)?, num(b).ok_or_else(bad)?);
                    if b < a {
                        return Err(bad());
                    }
                    (a, b)
                }
            }
        }
    };
    let kind = match what {
        "completion" => {
            let status = match how {
                None => 12,
                Some(h) => WC_STATUS
                    .iter()
                    .position(|n| *n == h)
                    .map(|p| p as u32)
                    .or_else(|| h.parse::<u32>().ok())
                    .filter(|s| (1..WC_STATUS.len() as u32).contains(s))
                    .ok_or_else(|| {
                        fault_error(format!(
                            "bad completion status '{}' in '{}': expected a failing \
                             ibv_wc_status, 1 to {} or its name (IBV_WC_RETRY_EXC_ERR)",
                            shown(h),
                            shown(part),
                            WC_STATUS.len() - 1
                        ))
                    })?,
            };
            IbKind::Status(status)
        }
        "async" => IbKind::Event(match how.unwrap_or("qp-fatal") {
            "qp-fatal" => AsyncEvent::QpFatal,
            "port-error" => AsyncEvent::PortError,
            "device-fatal" => AsyncEvent::DeviceFatal,
            other => {
                return Err(fault_error(format!(
                    "bad event '{}' in '{}': expected qp-fatal, port-error or device-fatal",
                    shown(other),
                    shown(part)
                )));
            }
        }),
        verb if VERBS.contains(&verb) => match how.unwrap_or("EIO") {
            "hang" => IbKind::Hang,
            "crash" => IbKind::Crash,
            e => IbKind::Errno(errno_of(e).ok_or_else(|| {
                fault_error(format!(
                    "bad errno '{}' in '{}': expected hang, crash, a number, or one of {}",
                    shown(e),
                    shown(part),
                    ERRNOS
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?),
        },
        other => {
            return Err(fault_error(format!(
                "unknown fault '{}' in '{}': expected completion, async, or a verb: {}",
                shown(other),
                shown(part),
                VERBS.join(", ")
            )));
        }
    };
    Ok(IbFault {
        what: what.to_string(),
        hca,
        rank,
        from,
        to,
        kind,
    })
}

/// Parses an IB fault list; empty means none.
pub fn parse_ib_faults(spec: &str) -> Result<Vec<IbFault>, IbSpecError> {
    if spec.len() > crate::MAX_SPEC_LEN {
        return Err(fault_error(format!(
            "{} bytes long, more than the {} a fault list may be",
            spec.len(),
            crate::MAX_SPEC_LEN
        )));
    }
    let faults: Vec<IbFault> = spec
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(parse_fault)
        .collect::<Result<_, _>>()?;
    if faults.len() > crate::MAX_FAULTS {
        return Err(fault_error(format!(
            "more than {} faults in one list",
            crate::MAX_FAULTS
        )));
    }
    Ok(faults)
}

/// The faults of [`IB_FAULT_ENV`]; unset means none.
pub fn ib_faults_from_env() -> Result<Vec<IbFault>, IbSpecError> {
    match std::env::var(IB_FAULT_ENV) {
        Ok(s) => parse_ib_faults(&s),
        Err(std::env::VarError::NotPresent) => Ok(Vec::new()),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(fault_error("value is not valid UTF-8".into()))
        }
    }
}

/// Both specs of the environment, checked (the harness does, whatever its backend: the real
/// libnccl loads this stand-in too): the first error.
pub fn check_env() -> Result<(), IbSpecError> {
    check(&hcas_from_env()?, &ib_faults_from_env()?)
}

/// A fault aimed at an HCA the host does not have never strikes: said as an error.
pub fn check(hcas: &[Hca], faults: &[IbFault]) -> Result<(), IbSpecError> {
    for f in faults {
        if let Some(h) = &f.hca
            && !hcas.iter().any(|x| &x.name == h)
        {
            let have: Vec<&str> = hcas.iter().map(|x| x.name.as_str()).collect();
            return Err(fault_error(format!(
                "the fault on '{}' names HCA '{}', which {HCAS_ENV} does not have ({})",
                f.what,
                shown(h),
                if have.is_empty() {
                    "it has none".to_string()
                } else {
                    have.join(", ")
                }
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
