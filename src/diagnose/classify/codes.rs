//! Causes from codes, not phrases: CUDA errors by their number's string (what
//! `cudaGetErrorString` / `cuGetErrorString` print, which NCCL's `"Cuda failure %d '%s'"`,
//! nccl-tests' `"Test CUDA failure %s:%d '%s'"` and PyTorch's `"CUDA error: %s"` all quote),
//! each with what it means and its usual cause in a collective job.
//!
//! Source: the CUDA Runtime API's `enum cudaError` (driver_types.h); the numbers are checked
//! against cudarc 0.19's generated bindings (`cudaErrorIllegalAddress = 700`, …). The strings
//! are CUDA's, as public logs quote them; a signature whose string we have not seen in a log
//! says "guess" in its source.
//!
//! A code that names a cause by itself (an illegal address, a missing kernel image) wins over
//! the source file of the WARN that relayed it. A code that says little (`invalid argument`,
//! `unknown error`) is weak: the file NCCL printed names the subsystem first
//! (`transport/nvls.cc … Cuda failure 1 'invalid argument'` is an NVLS failure).

use super::finding::{Category, Severity};
use super::signature::{Match, Scope, Signature};
use crate::stage::Stage;

/// Ids of the code signatures that yield to a WARN line's source file.
pub(super) const WEAK: &[&str] = &["cuda-weak-code"];

const SRC: &str = "CUDA Runtime API enum cudaError (driver_types.h), numbers as in cudarc 0.19's bindings; the \
                   string is what NCCL's CUDACHECK/CUCHECK (src/include/checks.h, cudawrap.h, v2.4-v2.30) quote";

pub(super) const SIGNATURES: &[Signature] = &[
    Signature {
        id: "cuda-illegal-address",
        category: Category::Cuda,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "an illegal memory access was encountered",
            "cudaErrorIllegalAddress",
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            "misaligned address",
            "an illegal instruction was encountered",
            "unspecified launch failure",
            "cudaErrorLaunchFailure",
            "CUDA_ERROR_LAUNCH_FAILED",
            "hardware stack error",
        ]),
        source: SRC,
        releases: "700 cudaErrorIllegalAddress, 716 cudaErrorMisalignedAddress, 715 cudaErrorIllegalInstruction, \
                   719 cudaErrorLaunchFailure, 714 cudaErrorHardwareStackError",
        cause: "a GPU kernel faulted (CUDA 700/715/716/719): the error is sticky, so every later CUDA call in the \
                process fails with it, NCCL's included; the faulting kernel is usually the application's own \
                (or a kernel reading a buffer freed while NCCL still used it), less often NCCL's or the GPU itself",
        hint: "CUDA_LAUNCH_BLOCKING=1 (or compute-sanitizer) names the kernel that faulted; check dmesg on that host \
               for Xid 13/31/43 (application) or 48/63/64/79/94/95 (hardware); keep buffers alive until the \
               collective's stream completes",
    },
    Signature {
        id: "cuda-device-assert",
        category: Category::Cuda,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&["device-side assert triggered", "cudaErrorAssert"]),
        source: SRC,
        releases: "710 cudaErrorAssert",
        cause: "a kernel's assert() failed on the GPU (CUDA 710), usually the application's (an index out of \
                range in an embedding or a loss); NCCL only reports the sticky error afterwards",
        hint: "CUDA_LAUNCH_BLOCKING=1 shows the failing kernel and its assert message; fix the application's input",
    },
    Signature {
        id: "cuda-no-kernel-image",
        category: Category::Cuda,
        stage: Stage::NcclLoad,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "no kernel image is available for execution on the device",
            "cudaErrorNoKernelImageForDevice",
            "CUDA_ERROR_NO_BINARY_FOR_GPU",
            "named symbol not found",
            "cudaErrorSymbolNotFound",
            "invalid device function",
            "cudaErrorInvalidDeviceFunction",
            "the provided PTX was compiled with an unsupported toolchain",
        ]),
        source: SRC,
        releases: "209 cudaErrorNoKernelImageForDevice, 500 cudaErrorSymbolNotFound, 98 \
                   cudaErrorInvalidDeviceFunction, 222 cudaErrorUnsupportedPtxVersion",
        cause: "the NCCL (or framework) build has no kernels for this GPU's architecture (CUDA 209/500/98), or its \
                PTX is newer than the driver can compile (222): a build for another CUDA version or GPU generation",
        hint: "use an NCCL/PyTorch build whose CUDA version and architectures (sm_XX) include this GPU, or upgrade \
               the driver; `nccl-smoke doctor` prints the library's and the driver's CUDA versions",
    },
    Signature {
        id: "cuda-invalid-device",
        category: Category::Cuda,
        stage: Stage::Device,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "invalid device ordinal",
            "cudaErrorInvalidDevice",
            "CUDA_ERROR_INVALID_DEVICE",
        ]),
        source: SRC,
        releases: "101 cudaErrorInvalidDevice",
        cause: "a rank asked for a GPU index its host does not have (CUDA 101): more local ranks (times nccl-tests' \
                -g) than visible GPUs, or CUDA_VISIBLE_DEVICES / the launcher's GPU binding leaves each rank one GPU \
                while the program picks device = local rank",
        hint: "match ranks per node × GPUs per rank to the GPUs visible (nvidia-smi -L, CUDA_VISIBLE_DEVICES); with \
               srun --gpus-per-task=1 each task sees only device 0",
    },
    Signature {
        id: "cuda-device-busy",
        category: Category::Cuda,
        stage: Stage::Device,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "busy or unavailable",
            "cudaErrorDevicesUnavailable",
            "CUDA_ERROR_DEVICE_UNAVAILABLE",
            "uncorrectable ECC error encountered",
            "cudaErrorECCUncorrectable",
            "uncorrectable NVLink error",
        ]),
        source: SRC,
        releases: "46 cudaErrorDevicesUnavailable, 214 cudaErrorECCUncorrectable, 220 cudaErrorNvlinkUncorrectable",
        cause: "the GPU refused this process (CUDA 46: compute mode EXCLUSIVE_PROCESS with another process on it, or \
                the GPU is lost) or reported an uncorrectable ECC/NVLink error (214/220): a device problem, not NCCL's",
        hint: "nvidia-smi -q on that host (compute mode, retired pages, Xid in dmesg); drain the node if ECC or NVLink \
               errors repeat",
    },
    Signature {
        id: "cuda-system-not-ready",
        category: Category::Cuda,
        stage: Stage::Driver,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "system not yet initialized",
            "cudaErrorSystemNotReady",
            "CUDA driver is a stub library",
            "cudaErrorStubLibrary",
            "CUDA_ERROR_SYSTEM_NOT_READY",
            "system has unsupported display driver / cuda driver combination",
            "cudaErrorSystemDriverMismatch",
            "forward compatibility was attempted on non supported HW",
            "cudaErrorCompatNotSupportedOnDevice",
        ]),
        source: SRC,
        releases: "802 cudaErrorSystemNotReady, 803 cudaErrorSystemDriverMismatch, 804 \
                   cudaErrorCompatNotSupportedOnDevice, 34 cudaErrorStubLibrary",
        cause: "the driver is not ready for CUDA (802: on NVSwitch systems the fabric manager is not running or not \
                done), or the user-mode and kernel-mode drivers differ (803), or a CUDA forward-compatibility package \
                is used on a GPU that does not support it (804), or the process loaded the CUDA toolkit's stub \
                libcuda instead of the driver's (34)",
        hint: "systemctl status nvidia-fabricmanager (its version must equal the driver's); nvidia-smi and the \
               libcuda the container mounts must come from the same driver",
    },
    Signature {
        id: "cuda-graph-capture",
        category: Category::Cuda,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "operation not permitted when stream is capturing",
            "cudaErrorStreamCaptureUnsupported",
            "operation would make the legacy stream depend on a capturing blocking stream",
            "cudaErrorStreamCaptureImplicit",
            "capturing stream has unjoined work",
            "operation failed due to a previous error during capture",
            "cudaErrorStreamCaptureInvalidated",
        ]),
        source: SRC,
        releases: "900 cudaErrorStreamCaptureUnsupported, 906 cudaErrorStreamCaptureImplicit, 904 \
                   cudaErrorStreamCaptureUnjoined, 901 cudaErrorStreamCaptureInvalidated",
        cause: "a CUDA call that graph capture forbids ran while a CUDA graph was being captured (CUDA 900-906): an \
                NCCL version without capture support for that path, or an allocation/synchronisation inside the \
                captured region",
        hint: "use an NCCL release that supports capture of this operation (2.9.6+; registration in capture 2.19+), \
               or run the first iterations (which set up NCCL's connections) before capturing",
    },
    Signature {
        id: "cuda-driver-shutting-down",
        category: Category::Cuda,
        stage: Stage::Finalize,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Phrases(&["driver shutting down", "cudaErrorCudartUnloading"]),
        source: SRC,
        releases: "4 cudaErrorCudartUnloading",
        cause: "the process was exiting (CUDA's runtime unloading, CUDA 4) while NCCL still made CUDA calls: the \
                communicator was not destroyed before exit, or another thread ended the process",
        hint: "destroy (or abort) communicators before the process exits (torch: dist.destroy_process_group())",
    },
    // Generic codes: the WARN's source file says more (see WEAK).
    Signature {
        id: "cuda-weak-code",
        category: Category::Cuda,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Phrases(&[
            "'invalid argument'",
            "'unknown error'",
            "'operation not supported'",
            "'invalid resource handle'",
            "'invalid device context'",
            "'OS call failed or operation not supported on this OS'",
            "'operation not permitted'",
        ]),
        source: SRC,
        releases: "1 cudaErrorInvalidValue, 999 cudaErrorUnknown, 801 cudaErrorNotSupported, 400 \
                   cudaErrorInvalidResourceHandle, 201 cudaErrorDeviceUninitialized, 304 cudaErrorOperatingSystem, \
                   800 cudaErrorNotPermitted",
        cause: "a CUDA call inside NCCL returned a generic error (invalid argument, unknown, not supported, not \
                permitted): the call that failed, not the code, says which feature (cuMem, multicast, IPC)",
        hint: "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALLOC to see the call; features that need driver \
               and kernel support (NVLS, cuMem, IPC in containers) can be turned off one at a time \
               (NCCL_NVLS_ENABLE=0, NCCL_CUMEM_ENABLE=0)",
    },
];

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

#[cfg(test)]
mod tests;
