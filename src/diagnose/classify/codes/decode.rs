//! What a code in a line means: ibv_wc_status numbers from NCCL's completion errors, errno
//! texts, NCCL's result names, each with its source.

/// What a code in a line means, in one sentence with its source: ibv_wc_status numbers from
/// NCCL's `Got completion … with error N`, errno texts, NCCL's result names. `None` when the
/// line has no code we know.
pub fn decode(line: &str) -> Option<String> {
    if let Some(n) = completion_status(line) {
        let (name, meaning) = wc_status(n)?;
        return Some(format!(
            "ibv_wc_status {n} {name}: {meaning} (rdma-core libibverbs/verbs.h)"
        ));
    }
    ERRNO
        .iter()
        .find(|(text, ..)| line.contains(text))
        .map(|(text, name, meaning)| format!("errno {name} '{text}': {meaning}"))
        .or_else(|| {
            NCCL_RESULT
                .iter()
                .find(|(name, text, _)| line.contains(name) || line.contains(text))
                .map(|(name, _, meaning)| format!("{name}: {meaning} (NVIDIA/nccl src/nccl.h.in)"))
        })
}

/// The status number of `NET/IB : Got completion from peer … with error N` (NVIDIA/nccl
/// v2.19.3-1 src/transport/net_ib.cc, `"… with status=%d opcode=%d …"` in 2.30: both read).
fn completion_status(line: &str) -> Option<u32> {
    if !line.contains("Got completion") {
        return None;
    }
    for key in ["with error ", "status=", "with status "] {
        if let Some(at) = line.find(key) {
            // 2.19: `with error 12`; 2.30: `status=IBV_WC_RETRY_EXC_ERR(12)`.
            let rest = &line[at + key.len()..];
            let rest = match rest.split_once('(') {
                Some((name, n)) if name.starts_with("IBV_WC_") && !name.contains(' ') => n,
                _ => rest,
            };
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse() {
                return Some(n);
            }
        }
    }
    None
}

/// A work completion that failed on the wire, as this rank's own HCA reported it: its status
/// and what it means, and the peer address NCCL names (`… from peer 10.0.0.2<59342> …`).
/// A flushed request (status 5) only follows an earlier error on its queue pair: a caller
/// prefers any other status to it.
pub fn path_fault(line: &str) -> Option<PathFault> {
    let status = completion_status(line)?;
    let peer = line
        .split_once("from peer ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .map(str::to_string);
    // A status rdma-core's table here lacks is still a failed work request, by its number.
    let (name, meaning) = wc_status(status).unwrap_or(("ibv_wc_status", "a failed work request"));
    Some(PathFault {
        status,
        name,
        meaning,
        peer,
        line: line.to_string(),
    })
}

/// See [`path_fault`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathFault {
    pub status: u32,
    pub name: &'static str,
    pub meaning: &'static str,
    pub peer: Option<String>,
    /// The line it was read from.
    pub line: String,
}

/// The name and meaning of `ibv_wc_status` `n` ([`IBV_WC_STATUS`]).
fn wc_status(n: u32) -> Option<(&'static str, &'static str)> {
    IBV_WC_STATUS
        .iter()
        .find(|(code, ..)| *code == n)
        .map(|(_, name, m)| (*name, *m))
}

/// `enum ibv_wc_status` (rdma-core libibverbs/verbs.h), with what each means between two
/// NCCL ranks.
const IBV_WC_STATUS: &[(u32, &str, &str)] = &[
    (
        1,
        "IBV_WC_LOC_LEN_ERR",
        "a receive buffer was smaller than the message (local length error)",
    ),
    (
        2,
        "IBV_WC_LOC_QP_OP_ERR",
        "the local queue pair rejected the work request",
    ),
    (
        4,
        "IBV_WC_LOC_PROT_ERR",
        "local protection error: the memory region was not registered for this access (GPUDirect RDMA registration, nvidia_peermem/dmabuf)",
    ),
    (
        5,
        "IBV_WC_WR_FLUSH_ERR",
        "work request flushed: the queue pair had already failed; a consequence of an earlier error",
    ),
    (
        9,
        "IBV_WC_REM_INV_REQ_ERR",
        "the remote side rejected the request as invalid",
    ),
    (
        10,
        "IBV_WC_REM_ACCESS_ERR",
        "remote access error: the peer's memory key or registration was refused",
    ),
    (
        11,
        "IBV_WC_REM_OP_ERR",
        "the remote side could not complete the operation",
    ),
    (
        12,
        "IBV_WC_RETRY_EXC_ERR",
        "transport retry counter exceeded: the peer never acknowledged (link down or flapping, peer process gone, routing or PFC/ECN trouble on RoCE)",
    ),
    (
        13,
        "IBV_WC_RNR_RETRY_EXC_ERR",
        "receiver-not-ready retries exceeded: the peer posted no receive in time",
    ),
    (
        15,
        "IBV_WC_REM_ABORT_ERR",
        "the remote side aborted the operation",
    ),
];

/// errno texts (glibc `strerror`) that NCCL's socket and system calls print.
const ERRNO: &[(&str, &str, &str)] = &[
    (
        "Connection refused",
        "ECONNREFUSED",
        "nothing listens at that address and port (the peer is not up yet, exited, or a firewall rejects)",
    ),
    (
        "No route to host",
        "EHOSTUNREACH",
        "the host cannot route to that address (wrong interface picked, firewall, down link)",
    ),
    (
        "Connection timed out",
        "ETIMEDOUT",
        "no answer from that address (firewall dropping packets, unreachable subnet)",
    ),
    (
        "Connection reset by peer",
        "ECONNRESET",
        "the peer closed the connection abruptly (it exited or crashed)",
    ),
    (
        "Broken pipe",
        "EPIPE",
        "the peer closed the connection before this side finished writing",
    ),
    (
        "Network is unreachable",
        "ENETUNREACH",
        "no route to that network from the interface NCCL picked",
    ),
    (
        "Cannot assign requested address",
        "EADDRNOTAVAIL",
        "the address is not on this host (a stale or wrong interface address)",
    ),
    (
        "Address already in use",
        "EADDRINUSE",
        "another process holds that port",
    ),
    (
        "Too many open files",
        "EMFILE",
        "the process ran out of file descriptors (ulimit -n)",
    ),
    (
        "No space left on device",
        "ENOSPC",
        "the file system (e.g. /dev/shm) is full",
    ),
    (
        "Cannot allocate memory",
        "ENOMEM",
        "the kernel refused memory: for RDMA registration, the locked-memory limit (ulimit -l) or the HCA's resources",
    ),
    (
        "Bad file descriptor",
        "EBADF",
        "a socket was used after it was closed (often after an earlier failure on it)",
    ),
    (
        "Permission denied",
        "EACCES",
        "the operation is not allowed for this user or container",
    ),
    (
        "Operation not permitted",
        "EPERM",
        "the operation needs a privilege the process lacks (container capabilities, IPC namespace)",
    ),
    (
        "Message truncated",
        "EMSGSIZE",
        "a message was larger than the buffer it was received into",
    ),
    (
        "Resource temporarily unavailable",
        "EAGAIN",
        "the call would block or a resource is exhausted for now",
    ),
];

/// `ncclResult_t` names and their texts (NVIDIA/nccl src/nccl.h.in, `ncclGetErrorString` in
/// src/init.cc).
const NCCL_RESULT: &[(&str, &str, &str)] = &[
    (
        "ncclUnhandledCudaError",
        "unhandled cuda error",
        "a CUDA call failed inside NCCL (the WARN before it names the call)",
    ),
    (
        "ncclSystemError",
        "unhandled system error",
        "a system call failed inside NCCL (socket, shared memory, a library)",
    ),
    (
        "ncclInternalError",
        "internal error",
        "NCCL hit an internal inconsistency (often a peer or network failure seen mid-protocol)",
    ),
    (
        "ncclInvalidArgument",
        "invalid argument",
        "an argument to an NCCL call was invalid",
    ),
    (
        "ncclInvalidUsage",
        "invalid usage",
        "NCCL was used wrongly (a call order, a group, a communicator state)",
    ),
    (
        "ncclRemoteError",
        "remote process exited or there was a network error",
        "a peer failed or the network between them broke",
    ),
];
