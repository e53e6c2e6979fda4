//! What the real library prints, and returns, for each failure this library reproduces, in
//! the words of the release it reports (learned from NCCL's sources, 2.19 to 2.28, and
//! public issue threads; the texts are NCCL's, the code that prints them is not).
//!
//! A WARN names its `file.cc:line`; the lines after it are NCCL's error-propagation trail
//! (`file.cc:line -> code`, at INFO).

use crate::log::{self, sys};
use crate::{
    INTERNAL_ERROR, INVALID_ARGUMENT, INVALID_USAGE, REMOTE_ERROR, SYSTEM_ERROR,
    UNHANDLED_CUDA_ERROR,
};
use std::net::SocketAddrV4;

/// One log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Warn {
        site: String,
        msg: String,
    },
    Info {
        flags: u64,
        msg: String,
    },
    /// `site -> code` at INFO.
    Ret {
        site: String,
        code: u32,
    },
}

/// A failure: the result code and what is logged for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub code: u32,
    pub lines: Vec<Line>,
}

impl Report {
    pub fn new(code: u32) -> Report {
        Report {
            code,
            lines: Vec::new(),
        }
    }

    fn warn(mut self, site: impl Into<String>, msg: impl Into<String>) -> Report {
        self.lines.push(Line::Warn {
            site: site.into(),
            msg: msg.into(),
        });
        self
    }

    fn info(mut self, flags: u64, msg: impl Into<String>) -> Report {
        self.lines.push(Line::Info {
            flags,
            msg: msg.into(),
        });
        self
    }

    /// Adds the propagation trail through `sites`, with this report's code.
    fn trail(mut self, sites: &[&str]) -> Report {
        for s in sites {
            self.lines.push(Line::Ret {
                site: s.to_string(),
                code: self.code,
            });
        }
        self
    }

    pub fn emit(&self, dev: i32) {
        for l in &self.lines {
            match l {
                Line::Warn { site, msg } => log::warn(dev, site, msg),
                Line::Info { flags, msg } => log::info(dev, *flags, msg),
                Line::Ret { site, code } => log::ret(dev, site, *code),
            }
        }
    }

    /// The WARN texts, for tests.
    #[cfg(test)]
    pub fn warnings(&self) -> Vec<String> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                Line::Warn { site, msg } => Some(format!("{site} NCCL WARN {msg}")),
                _ => None,
            })
            .collect()
    }
}

/// `2.19`-era line numbers before 2.24, `2.28` ones from then on.
fn at(v: i32, old: &str, new: &str) -> String {
    if v < 22400 { old } else { new }.to_string()
}

/// `socketTryAccept`'s WARN (`src/misc/socket.cc`, v2.19.3-1 line 415, v2.28.3-1 line 458).
pub fn accept_failed(err: &str) -> String {
    format!("socketTryAccept: Accept failed: {err}")
}

pub fn accept_failed_site(v: i32) -> String {
    at(v, "misc/socket.cc:415", "misc/socket.cc:458")
}

/// NCCL's `addr<port>` form of a socket address.
pub fn sock(a: SocketAddrV4) -> String {
    format!("{}<{}>", a.ip(), a.port())
}

// ---------------------------------------------------------------------------------------------
// Bootstrap and sockets

/// `NCCL_SOCKET_IFNAME` names no interface (or there is none): ncclInternalError up to 2.23,
/// ncclInvalidUsage from 2.24.
pub fn no_interface(v: i32) -> Report {
    let code = if v >= 22400 {
        INVALID_USAGE
    } else {
        INTERNAL_ERROR
    };
    Report::new(code)
        .warn(
            at(v, "bootstrap.cc:48", "bootstrap.cc:114"),
            "Bootstrap : no socket interface found",
        )
        .trail(&[&at(v, "init.cc:1570", "init.cc:1911")])
}

/// The bootstrap interface, logged once per process.
pub fn bootstrap_using(v: i32, name: &str, addr: std::net::Ipv4Addr) -> Line {
    let flags = if v >= 22300 {
        sys::BOOTSTRAP
    } else {
        sys::INIT
    };
    let sep = if v >= 22600 {
        "Bootstrap:"
    } else {
        "Bootstrap :"
    };
    Line::Info {
        flags,
        msg: format!("{sep} Using {name}:{addr}<0>"),
    }
}

/// A connect that failed outright (not a refusal that is retried): ncclSystemError.
pub fn connect_failed(v: i32, addr: SocketAddrV4, err: &str) -> Report {
    let msg = if v >= 22700 {
        format!(
            "socketStartConnect: connect to {} failed : {err}",
            sock(addr)
        )
    } else {
        format!(
            "socketStartConnect: Connect to {} failed : {err}",
            sock(addr)
        )
    };
    Report::new(SYSTEM_ERROR)
        .warn(at(v, "misc/socket.cc:484", "misc/socket.cc:596"), msg)
        .trail(&[
            &at(v, "misc/socket.cc:564", "misc/socket.cc:668"),
            &at(v, "bootstrap.cc:274", "bootstrap.cc:360"),
        ])
}

/// A peer that kept refusing (or timing out) until the retries ran out: ncclRemoteError.
pub fn connect_exhausted(v: i32, addr: SocketAddrV4, err: &str, attempts: u32) -> Report {
    let msg = if v >= 22700 {
        format!(
            "socketStartConnect: connect to {} returned {err}, exceeded error retry count after {attempts} attempts",
            sock(addr)
        )
    } else if v >= 22400 {
        format!(
            "socketStartConnect: connect returned {err}, exceeded error retry count ({attempts})"
        )
    } else {
        format!("socketStartConnect: exceeded retries ({attempts})")
    };
    Report::new(REMOTE_ERROR)
        .warn(at(v, "misc/socket.cc:467", "misc/socket.cc:582"), msg)
        .trail(&[&at(v, "misc/socket.cc:564", "misc/socket.cc:668")])
}

/// The peer closed the connection (EOF, or a reset seen as a close): ncclRemoteError.
pub fn closed_by_peer(v: i32, host: &str, port: u16) -> Report {
    Report::new(REMOTE_ERROR)
        .warn(
            at(v, "misc/socket.cc:50", "misc/socket.cc:71"),
            format!("socketProgress: Connection closed by remote peer {host}<{port}>"),
        )
        .trail(&[&at(v, "misc/socket.cc:792", "misc/socket.cc:891")])
}

/// A send or receive that failed otherwise (`err` is strerror's text): NCCL's socket
/// transport gives up on the connection. ncclSystemError here (the run goes on).
pub fn transfer_failed(v: i32, send: bool, addr: SocketAddrV4, err: &str) -> Report {
    let msg = if v >= 22400 {
        let dir = if send { "send to" } else { "recv from" };
        format!(
            "socketProgressOpt: Call to {dir} {} failed : {err}",
            sock(addr)
        )
    } else {
        format!(
            "socketProgressOpt: Call to recv from {} failed : {err}",
            sock(addr)
        )
    };
    Report::new(SYSTEM_ERROR)
        .warn(at(v, "misc/socket.cc:30", "misc/socket.cc:46"), msg)
        .warn(
            at(
                v,
                "transport/net_socket.cc:216",
                "transport/net_socket.cc:266",
            ),
            "NET/Socket : socket progress error",
        )
}

/// A message longer than the receive posted for it: ncclInvalidUsage.
pub fn truncated(v: i32, addr: SocketAddrV4, got: u64, want: usize) -> Report {
    let healthy = if v >= 22400 {
        "in a healthy state"
    } else {
        "in healthy state"
    };
    Report::new(INVALID_USAGE).warn(
        at(v, "transport/net_socket.cc:485", "transport/net_socket.cc:565"),
        format!(
            "NET/Socket : peer {} message truncated : receiving {got} bytes instead of {want}. If you believe your socket network is {healthy}, there may be a mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks",
            sock(addr)
        ),
    )
}

/// The root saw ranks disagree on the number of ranks.
pub fn root_mismatch(v: i32, nranks: u32, theirs: u32) -> String {
    if v >= 22300 {
        format!(
            "Bootstrap Root : mismatch in info from procs, nranks {nranks} vs {theirs}, nroots 1 vs 1, iroot 0 vs 0"
        )
    } else {
        format!("Bootstrap Root : mismatch in rank count from procs {nranks} : {theirs}")
    }
}

pub fn root_duplicate(rank: u32, nranks: u32) -> String {
    format!("Bootstrap Root : rank {rank} of {nranks} ranks has already checked in")
}

pub fn root_site(v: i32, duplicate: bool) -> String {
    match (v >= 22400, duplicate) {
        (false, false) => "bootstrap.cc:130",
        (false, true) => "bootstrap.cc:135",
        (true, false) => "bootstrap.cc:312",
        (true, true) => "bootstrap.cc:319",
    }
    .to_string()
}

// ---------------------------------------------------------------------------------------------
// Argument checks

pub fn null_arg(op: &str, what: &str) -> Report {
    Report::new(INVALID_ARGUMENT).warn(
        "misc/argcheck.cc:30",
        format!("{op} : {what} argument is NULL"),
    )
}

pub fn bad_type(v: i32, op: &str, dtype: i32) -> Report {
    Report::new(INVALID_ARGUMENT).warn(
        at(v, "misc/argcheck.cc:43", "misc/argcheck.cc:52"),
        format!("{op} : invalid type {dtype}"),
    )
}

pub fn bad_op(v: i32, op: &str, redop: i32) -> Report {
    Report::new(INVALID_ARGUMENT).warn(
        at(v, "misc/argcheck.cc:50", "misc/argcheck.cc:61"),
        format!("{op} : invalid reduction operation {redop}"),
    )
}

/// Send/Recv take the peer as NCCL's `root`.
pub fn bad_peer(v: i32, op: &str, peer: i64, nranks: usize) -> Report {
    Report::new(INVALID_ARGUMENT).warn(
        at(v, "misc/argcheck.cc:39", "misc/argcheck.cc:48"),
        format!("{op} : invalid root {peer} (root should be in the 0..{nranks} range)"),
    )
}

pub fn not_ready(v: i32) -> Report {
    Report::new(INVALID_ARGUMENT).warn(
        at(v, "init.cc:303", "init.cc:362"),
        "Attempt to use communicator before the previous operation returned ncclSuccess",
    )
}

pub fn self_unmatched(send: bool) -> Report {
    let msg = if send {
        "Trying to send to self without a matching recv"
    } else {
        "Trying to recv to self without a matching send"
    };
    Report::new(INVALID_USAGE).warn(
        if send {
            "enqueue.cc:1053"
        } else {
            "enqueue.cc:1057"
        },
        msg,
    )
}

pub fn not_in_group(v: i32) -> Report {
    Report::new(INVALID_USAGE).warn(
        at(v, "group.cc:372", "group.cc:657"),
        "ncclGroupEnd: not in a group call.",
    )
}

pub fn invalid_rank(v: i32, rank: i32, nranks: i32) -> Report {
    Report::new(INVALID_ARGUMENT).warn(
        at(v, "init.cc:1621", "init.cc:1916"),
        format!("Invalid rank requested : {rank}/{nranks}"),
    )
}

pub fn bad_config(v: i32) -> Report {
    Report::new(INVALID_ARGUMENT).warn(
        at(v, "init.cc:1531", "init.cc:1748"),
        "ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER",
    )
}

/// No CUDA driver in the process: the runtime's cudaErrorInsufficientDriver.
pub fn no_driver(v: i32) -> Report {
    Report::new(UNHANDLED_CUDA_ERROR).warn(
        at(v, "init.cc:1674", "init.cc:1981"),
        "Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'",
    )
}

/// The driver refused the host function that carries an operation (`rc` is its CUresult).
pub fn launch_failed(v: i32, rc: u32) -> Report {
    let what = match rc {
        0 => "CUDA driver version is insufficient for CUDA runtime version",
        201 => "invalid device context",
        400 => "invalid resource handle",
        _ => "unspecified launch failure",
    };
    Report::new(UNHANDLED_CUDA_ERROR)
        .warn(
            at(v, "enqueue.cc:1210", "enqueue.cc:1570"),
            format!("Cuda failure '{what}'"),
        )
        .trail(&[&at(v, "group.cc:104", "group.cc:281")])
}

/// A handle that is no live communicator of this library.
pub fn corrupted() -> Report {
    Report::new(INVALID_ARGUMENT).warn(
        "misc/argcheck.cc:39",
        "Error: corrupted comm object detected",
    )
}

/// A null buffer for a non-empty operation.
pub fn bad_pointer(op: &str, what: &str) -> Report {
    Report::new(INVALID_ARGUMENT).warn(
        "misc/argcheck.cc:14",
        format!("{op} : {what} (nil) is not a valid pointer"),
    )
}

/// `NCCL_SMOKE_SIM_FAULT` does not parse (the simulation's own failure).
pub fn bad_fault_spec(msg: &str) -> Report {
    Report::new(INVALID_USAGE).warn("nccl-smoke-sim.cc:0", msg)
}

/// The listening socket for a unique id or a rank cannot be opened.
pub fn listen_failed(err: &str) -> Report {
    Report::new(SYSTEM_ERROR).warn("misc/socket.cc:408", format!("Call to bind failed: {err}"))
}

/// The bytes given to init are no unique id of this library.
pub fn bad_unique_id() -> Report {
    Report::new(INVALID_ARGUMENT).warn(
        "bootstrap.cc:0",
        "Bootstrap : the unique id was not made by ncclGetUniqueId of this library",
    )
}

mod injected;
pub use injected::*;

#[cfg(test)]
mod tests;
