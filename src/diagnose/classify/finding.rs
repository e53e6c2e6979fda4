//! What a classification yields: a finding, its category (the family of failure) and its
//! severity.

use crate::stage::Stage;
use serde::Serialize;

/// What family of failure a finding belongs to. The job-level verdict groups ranks by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    /// Launcher / MPI (Open MPI, HCOLL) before NCCL runs.
    Mpi,
    /// CUDA driver / runtime (driver too old, no device, CUDA error in NCCL's wrappers).
    Cuda,
    /// GPU memory exhausted while NCCL allocated its buffers.
    Oom,
    /// Bootstrap: interfaces, the root's socket, rank check-in.
    Bootstrap,
    /// Communicator setup: invalid usage, configuration.
    Init,
    /// Topology detection and graph search (NCCL's `graph/`): XML, paths, rings and trees.
    Topology,
    /// Ranks run different NCCL versions.
    VersionMismatch,
    /// P2P transport: importing a peer's buffer (cuMem / CUDA IPC), peer access.
    BufferImport,
    /// Shared-memory transport (/dev/shm).
    Shm,
    /// NVLink SHARP (NVLS) multicast.
    Nvls,
    /// NCCL's proxy service.
    Proxy,
    /// A process out of file descriptors (EMFILE).
    OpenFiles,
    /// Socket network transport and NCCL's socket layer.
    NetSocket,
    /// InfiniBand / RoCE network transport.
    NetIb,
    /// GPUDirect RDMA / GDRCopy.
    Gdr,
    /// NCCL's RAS subsystem (2.24+).
    Ras,
    /// An NCCL error code surfaced by a wrapper, with no line naming its cause.
    NcclError,
    /// A peer failed or exited first: ncclRemoteError, connection closed by the peer.
    RemoteError,
    /// An operation that did not complete: watchdog timeout, test timeout.
    Hang,
    /// An operation failed while it ran: a kernel launch or a CUDA error after init.
    Run,
    /// The collectives ran and delivered wrong values (nccl-tests' `Out of bounds values : N
    /// FAILED`).
    WrongData,
}

impl Category {
    /// Failures that only ever come from the rank's own node: a rank whose log shows one failed
    /// on its own, even when the error its call returned blames a peer.
    pub fn is_local(self) -> bool {
        matches!(self, Category::OpenFiles | Category::Oom | Category::Shm)
    }

    pub fn name(self) -> &'static str {
        match self {
            Category::Mpi => "mpi",
            Category::Cuda => "cuda",
            Category::Oom => "oom",
            Category::Bootstrap => "bootstrap",
            Category::Init => "init",
            Category::Topology => "topology",
            Category::VersionMismatch => "version-mismatch",
            Category::BufferImport => "buffer-import",
            Category::Shm => "shm",
            Category::Nvls => "nvls",
            Category::Proxy => "proxy",
            Category::OpenFiles => "open-files",
            Category::NetSocket => "net-socket",
            Category::NetIb => "net-ib",
            Category::Gdr => "gdr",
            Category::Ras => "ras",
            Category::NcclError => "nccl-error",
            Category::RemoteError => "remote-error",
            Category::Hang => "hang",
            Category::Run => "run",
            Category::WrongData => "wrong-data",
        }
    }
}

/// How much a finding says about the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Harmless on its own (a library NCCL can do without); never fails a verdict.
    Note,
    /// Explains a slow run, not a failed one.
    Advice,
    /// What a rank reports when another rank failed first.
    Consequence,
    /// An operation that never completed; the ranks that fell silent first are the suspects.
    Hang,
    /// A failure on this rank.
    Fail,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Advice => "advice",
            Severity::Consequence => "consequence",
            Severity::Hang => "hang",
            Severity::Fail => "fail",
        }
    }
}

/// What a signature stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub stage: Stage,
    pub cause: &'static str,
    pub hint: &'static str,
    /// The line that matched.
    pub evidence: String,
    pub category: Category,
    pub severity: Severity,
    /// The signature's id (stable; used by the coverage listing and the corpus test).
    pub signature: &'static str,
}
