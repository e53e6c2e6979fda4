//! Signatures of known failures in NCCL's error text and log lines, and in the words of the
//! programs that wrap NCCL (PyTorch, nccl-tests, Open MPI).
//!
//! Each signature is a set of phrases taken from one failure's format string, with the NCCL
//! release tag and source path it follows and the releases that print it (checked with
//! `git grep` over NVIDIA/nccl's tags v2.16.2-1 … v2.30.7-1), and the finding it stands for:
//! the stage to name, the likely cause and what to try. A WARN line that no phrase names is
//! still placed by the source file NCCL printed in its prefix (`transport/shm.cc:114 NCCL
//! WARN …`): the location signatures. Phrases that are too common to name a cause alone (a
//! socket error, an NCCL error name) only count on WARN lines and error text, never on
//! arbitrary output.
//!
//! `scripts/nccl-warn-strings.py` lists one release's WARN format strings; the coverage test
//! (`tests/nccl_warn_coverage.rs`) classifies each and commits the listing, so the next release
//! is a diff.

use crate::stage::Stage;
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use serde::Serialize;
use std::sync::OnceLock;

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
    /// Communicator setup: invalid usage, topology, configuration.
    Init,
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

/// Which lines a signature may match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// NCCL WARN lines and the error text a wrapper prints after "Last error:".
    Warn,
    /// Any line that is not an NCCL INFO/TRACE line (wrapper messages, launcher output).
    Any,
    /// INFO lines too (advice, benign notes).
    Info,
}

/// How a signature recognises its lines.
enum Match {
    /// Any of these phrases (ASCII case-insensitive).
    Phrases(&'static [&'static str]),
    /// A WARN line whose source file (from NCCL's prefix) contains one of these.
    Location(&'static [&'static str]),
}

struct Signature {
    id: &'static str,
    category: Category,
    stage: Stage,
    severity: Severity,
    scope: Scope,
    what: Match,
    /// The NCCL tag and path whose format string the phrases follow (or the wrapper's source;
    /// "guess" where no source was checked).
    #[allow(dead_code)]
    source: &'static str,
    /// NCCL releases that print it (from tag v2.16.2-1 to v2.30.7-1).
    #[allow(dead_code)]
    releases: &'static str,
    cause: &'static str,
    hint: &'static str,
}

const HINT_DEBUG: &str = "rerun with NCCL_DEBUG=INFO (NCCL_DEBUG_FILE=nccl.%h.%p for one file per rank) and \
                          run `nccl-smoke explain` on the logs of every rank";

/// Root causes first, consequences last: when shared memory or a socket fails, NCCL's proxy
/// reports the failure too ("[Proxy Service N] Failed to execute operation Connect"), so the
/// generic proxy phrases come after the transports they relay. A line is named by the first
/// signature that matches it; a job by its most severe finding, then the earliest signature.
const SIGNATURES: &[Signature] = &[
    // ---------------------------------------------------------------- local resources
    // Field report 003: first, since the socket WARNs that carry it would otherwise name the
    // network.
    Signature {
        id: "open-files",
        category: Category::OpenFiles,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&["Too many open files"]),
        source: "strerror(EMFILE) in the socket layer's WARNs: socketTryAccept ('Accept failed: %s'), \
                 socketStartConnect, ncclSocketInit; src/misc/socket.cc v2.19.3-1 and v2.28.3-1",
        releases: "2.16-2.30",
        cause: "a process ran out of file descriptors (EMFILE): NCCL opens sockets per peer and per \
                channel (its proxy more), and raises its soft open-files limit only as far as the hard one",
        hint: "raise the hard open-files limit where the ranks run (ulimit -Hn; systemd LimitNOFILE; \
               the container runtime's nofile ulimit), to 65536 or more; `nccl-smoke doctor` checks it",
    },
    // ---------------------------------------------------------------- CUDA driver / runtime
    Signature {
        id: "cuda-driver-too-old",
        category: Category::Cuda,
        stage: Stage::Driver,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "driver version is insufficient for CUDA runtime version",
            "CUDA Driver version found is",
            "CUDA_ERROR_INSUFFICIENT_DRIVER",
        ]),
        source: "NVIDIA/nccl v2.30.7-1 src/misc/cudawrap.cc (\"CUDA Driver version found is %d. Minimum requirement is %d\"); \
                 v2.19.3-1 src/include/cudawrap.h and src/include/checks.h print CUDA's own error string (\"Cuda failure '%s'\")",
        releases: "2.16-2.30 (CUDA's error string through \"Cuda failure\"); \"CUDA Driver version found\" 2.16-2.30",
        cause: "the CUDA driver is older than the CUDA runtime this NCCL (or the framework around it) was built for",
        hint: "upgrade the GPU driver, or use a build of NCCL/PyTorch for the driver's CUDA version (nvidia-smi shows \
               the highest CUDA version the driver supports); in containers, check the host driver, not the image",
    },
    Signature {
        id: "cuda-no-device",
        category: Category::Cuda,
        stage: Stage::Driver,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Cuda failure 'initialization error'",
            "Cuda failure 3 'initialization error'",
            "no CUDA-capable device is detected",
            "'system not yet initialized'",
            "Failed to find CUDA library",
            "Failed to load CUDA missing symbol",
            "cuDriverGetVersion failed",
            "CUDA some PFN functions not found",
        ]),
        source: "NVIDIA/nccl v2.30.7-1 src/misc/cudawrap.cc (\"Failed to find CUDA library %s\", \"Failed to load CUDA missing \
                 symbol cuInit\"); CUDA error strings through v2.19.3-1 src/include/checks.h \"Cuda failure '%s'\"",
        releases: "2.16-2.30",
        cause: "NCCL could not initialise CUDA on this rank: no visible GPU, a driver that is not loaded (or a fabric \
                manager that is not running on NVSwitch systems), or a CUDA context created before fork()",
        hint: "check nvidia-smi and CUDA_VISIBLE_DEVICES on that host; on NVSwitch systems the nvidia-fabricmanager \
               service must run; do not initialise CUDA in a parent process before forking the ranks",
    },
    // ---------------------------------------------------------------- GPU memory
    Signature {
        id: "oom",
        category: Category::Oom,
        stage: Stage::Alloc,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Cuda failure 'out of memory'",
            "Cuda failure 2 'out of memory'",
            "Failed to CUDA calloc",
            "Failed to CUDA malloc",
            "Failed to CUDA host alloc",
            "CUDA out of memory",
            "CUDA error: out of memory",
            "CUDA_ERROR_OUT_OF_MEMORY",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/include/alloc.h (\"Failed to CUDA calloc %ld bytes\"), CUDA's error string \
                 through src/include/checks.h; PyTorch's \"CUDA out of memory\" (guess: text from public logs)",
        releases: "2.16-2.30",
        cause: "GPU memory ran out while NCCL allocated its buffers (communicator init or the first operation \
                through a new peer); the application holds most of the GPU",
        hint: "leave memory for NCCL (each communicator needs buffers per peer and channel): create communicators \
               before the model fills the GPU, lower NCCL_BUFFSIZE or NCCL_NCHANNELS_PER_NET_PEER, or use fewer \
               communicators; check nvidia-smi for other processes on the GPU",
    },
    // ---------------------------------------------------------------- P2P buffer import
    // Seed 000: cuMem handle import across containers, driver 570 UMD.
    Signature {
        id: "p2p-import",
        category: Category::BufferImport,
        stage: Stage::ConnectImport,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "cuMemImportFromShareableHandle",
            "ImportShareableBuffer",
            "failed to open CUDA IPC handle",
            "cudaIpcOpenMemHandle",
            "cudaIpcGetMemHandle failed",
            "failed to peer with device",
            "peer access is not supported between these two devices",
            "P2P is disabled between NVLINK connected GPUs",
            "invalid IPC peerRank",
            "invalid IPC peerIndex",
        ]),
        source: "NVIDIA/nccl v2.26.2-1 src/transport/p2p.cc (ncclP2pImportShareableBuffer → cuMemImportFromShareableHandle, \
                 \"failed to peer with device %d(=%lx): %d %s\"); \"failed to open CUDA IPC handle : %d %s\" is \
                 src/transport/p2p.cu/.cc of releases before 2.16 (seen in public logs of 2.3-2.8)",
        releases: "\"failed to peer with device\" 2.16-2.30; \"cudaIpcGetMemHandle failed\" 2.16-2.30; \
                   cuMem import 2.19-2.30 (CUDA error through \"Cuda failure\"); \"failed to open CUDA IPC handle\" before 2.16",
        cause: "importing a peer GPU's buffer for the P2P transport failed (cuMem/IPC handle import or peer access); \
                seen with the 570-series driver when ranks in separate containers each see their GPU as device 0, \
                with GPUs that cannot peer (no P2P between them, IOMMU/ACS, virtualised PCIe), and with ranks that \
                do not share an IPC namespace",
        hint: "upgrade the GPU driver; run the ranks of one host in one container (or share --ipc=host and --pid=host); \
               meanwhile NCCL_CUMEM_ENABLE=0 (legacy IPC) or NCCL_P2P_DISABLE=1 (SHM fallback); on bare metal check \
               ACS/IOMMU settings (nvidia-smi topo -p2p r)",
    },
    // ---------------------------------------------------------------- shared memory
    // Seed 004: /dev/shm too small (Kubernetes default 64 MB).
    Signature {
        id: "shm-segment",
        category: Category::Shm,
        stage: Stage::ConnectShm,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "shared memory segment",
            "failed to extend /dev/shm",
            "Call to posix_fallocate failed",
            "shmOpen",
            "shm_open",
            "proxy ops shm unlink failed",
            "failed to create shared memory file",
            "Error: failed to extend",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/shmutils.cc (\"Error while %s shared memory segment %s (size %ld)\", \
                 \"Error: failed to extend %s to %ld bytes\"); include/shm.h \"Call to posix_fallocate failed\" before 2.12",
        releases: "2.16-2.30",
        cause: "NCCL's shared-memory transport could not create, grow or attach its segment: /dev/shm is too small \
                or full (a container's default is 64 MB), or the segment was removed under it (systemd RemoveIPC)",
        hint: "mount a memory-backed emptyDir at /dev/shm (Kubernetes) or raise --shm-size / use --ipc=host (Docker); \
               remove stale /dev/shm/nccl-* files; NCCL_SHM_DISABLE=1 avoids the transport at a bandwidth cost",
    },
    // ---------------------------------------------------------------- NVLS
    Signature {
        id: "nvls",
        category: Category::Nvls,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "NVLink SHARP (NVLS) Multicast",
            "NCCL_NVLS_ENABLE has been set",
        ]),
        source: "NVIDIA/nccl v2.30.7-1 src/transport/nvls.cc (\"Failed to bind NVLink SHARP (NVLS) Multicast memory …\")",
        releases: "2.19-2.30",
        cause: "NCCL could not set up NVLink SHARP multicast memory (NVLS): the fabric manager, the driver or the \
                IMEX/multicast configuration does not support it on this system",
        hint: "NCCL_NVLS_ENABLE=0 to run without NVLS; check nvidia-fabricmanager and the driver version",
    },
    // ---------------------------------------------------------------- bootstrap
    Signature {
        id: "bootstrap-no-interface",
        category: Category::Bootstrap,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Bootstrap : no socket interface found",
            "No usable listening interface found",
            "NET/Socket : no interface found",
            "verify NCCL_OOB_NET_IFNAME",
            "No interface found in the same subnet",
            "Socket creation failed : Address family not supported",
            "is neither AF_INET",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/bootstrap.cc (\"Bootstrap : no socket interface found\", \"NET/Socket : No usable \
                 listening interface found\"); v2.30.7-1 src/misc/socket.cc (\"ncclSocketInit: connecting to address %s with \
                 family %d is neither AF_INET(%d) nor AF_INET6(%d)\")",
        releases: "2.16-2.30",
        cause: "NCCL found no usable network interface for its bootstrap: NCCL_SOCKET_IFNAME names an interface that \
                does not exist (or has no address) on this host, or the container has only loopback",
        hint: "set NCCL_SOCKET_IFNAME to an interface that exists on every host and reaches the others (ip -br addr), \
               e.g. NCCL_SOCKET_IFNAME=eth0 or a prefix such as ^docker,lo to exclude; give the container host networking",
    },
    Signature {
        id: "bootstrap-root",
        category: Category::Bootstrap,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Bootstrap Root : mismatch in rank count",
            "has already checked in",
            "Bootstrap Root : mismatch in info",
            "Invalid NCCL_COMM_ID",
            "improper usage of ncclCommInitRank",
            "Message truncated : received",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/bootstrap.cc (\"Bootstrap Root : mismatch in rank count from procs %d : %d\", \
                 \"Bootstrap Root : rank %d of %d ranks has already checked in\")",
        releases: "2.16-2.30",
        cause: "the ranks that met at the bootstrap root disagree: two jobs share one unique id or NCCL_COMM_ID \
                (a reused port, a stale rank from a previous attempt), or ranks were given different world sizes",
        hint: "give every job its own unique id (MASTER_PORT); make sure restarted jobs kill the old ranks first; \
               check that every rank got the same world size and a distinct rank",
    },
    // ---------------------------------------------------------------- proxy (seed 003)
    Signature {
        id: "proxy-service-accept",
        category: Category::Proxy,
        stage: Stage::ConnectProxy,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Accept failed Resource temporarily unavailable",
            "Could not receive type from localRank",
            "Too many connections",
            "Failed to create CUDA context on device",
            "Failed to set CUDA device",
        ]),
        source: "NVIDIA/nccl v2.21.5-1 src/proxy.cc (\"[Service thread] Accept failed %s\", \"[Service thread] Could not \
                 receive type from localRank %d, res=%u, closed=%d\")",
        releases: "2.16-2.30",
        cause: "NCCL's proxy service could not accept or serve a local rank's connection: typically ranks not bound \
                to their own GPU before init, or sends and receives that do not pair up",
        hint: "set each rank's device before communicator init (one GPU per local rank); make every send match a \
               receive on the peer; check NCCL_* settings and open-file limits (ulimit -n)",
    },
    // ---------------------------------------------------------------- InfiniBand / RoCE
    Signature {
        id: "net-ib-completion-error",
        category: Category::NetIb,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Got completion from peer",
            "Got CQE with error",
            "NET/IBP:Got completion",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/transport/net_ib.cc (\"NET/IB : Got completion from peer %s with error %d, opcode %d, \
                 len %d, vendor err %d (%s)\"); v2.30.7-1 src/transport/net_ib/p2p.cc (\"NET/IB: Got completion from peer %s \
                 with status=%s(%d) opcode=%s(%d) vendor_err=%u …\")",
        releases: "2.16-2.30",
        cause: "an InfiniBand/RoCE work request failed on the wire: status 12 (retry exceeded) or 5 (flushed) means the \
                peer's port, a cable, a switch or the RoCE configuration dropped traffic; status 4 (protection error) \
                with vendor err 81 points at GPUDirect RDMA registration (peer memory / ACS / IOMMU)",
        hint: "check the named peer's link (ibstat, ibdiagnet, port counters), NCCL_IB_HCA and NCCL_IB_GID_INDEX (RoCE), \
               and PCIe ACS/IOMMU for GPUDirect; NCCL_IB_RETRY_CNT / NCCL_IB_TIMEOUT only hide a flaky link",
    },
    Signature {
        id: "net-ib-setup",
        category: Category::NetIb,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Call to ibv_modify_qp failed",
            "ibv_modify_qp failed",
            "ibv_create_qp failed",
            "ibv_reg_mr failed",
            "ibv_reg_dmabuf_mr failed",
            "NET/IB : Unable to open device",
            "NET/IB : Unable to query",
            "Attempted to connect incompatible devices",
            "device is incompatible with the local",
            "NET/IB : No IP interface found",
            "mlx5dv_create_qp failed",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/ibvwrap.cc (\"Call to ibv_modify_qp failed with %d %s\"), v2.30.7-1 \
                 src/transport/net_ib/init.cc and connect.cc (\"NET/IB : Unable to open device %s\", \"NET/IB : Attempted to \
                 connect incompatible devices …\")",
        releases: "2.16-2.30 (incompatible devices 2.21-2.30)",
        cause: "NCCL could not set up an InfiniBand/RoCE connection: a port that is down, a GID index or RoCE version that \
                the peers do not share, or a locked-memory limit too low to register buffers",
        hint: "check ibstat/ibv_devinfo on both ends, NCCL_IB_HCA, NCCL_IB_GID_INDEX (RoCE) and `ulimit -l` (unlimited); \
               NCCL_IB_DISABLE=1 falls back to sockets to confirm",
    },
    // ---------------------------------------------------------------- sockets
    Signature {
        id: "net-socket-connect",
        category: Category::NetSocket,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Phrases(&[
            "socketStartConnect",
            "socketPollConnect",
            "Connection refused",
            "No route to host",
            "Connection timed out",
            "Net : Connect to",
            "socketTryAccept",
            "socketFinalizeAccept",
            "NET/Socket : peer",
            "NET/Socket : socket progress error",
            " connect to ",
            "exceeded error retry count",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/socket.cc (\"socketStartConnect: Connect to %s failed : %s\", \
                 \"socketPollConnect: Connect to %s returned %d(%s) errno %d(%s)\", \"socketFinalizeAccept: wrong type %d != %d\")",
        releases: "2.16-2.30",
        cause: "a TCP connection between ranks could not be made: the address NCCL picked is not reachable from the peer \
                (wrong interface, a docker/virtual bridge, a firewall), or a stray connection reached NCCL's port",
        hint: "check NCCL_SOCKET_IFNAME names an interface that exists on every host and reaches the peers (exclude \
               docker0, virbr0, lo); open the firewall between the hosts; test with nc between the named addresses",
    },
    // ---------------------------------------------------------------- GPUDirect RDMA / GDRCopy
    Signature {
        id: "gdr-failure",
        category: Category::Gdr,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Phrases(&[
            "gdr_pin_buffer",
            "gdr_map(",
            "GDRCOPY lib wrapper not initialized",
            "NET: GDR Flush only supported",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/gdrwrap.cc (\"gdr_pin_buffer(addr %lx, size %zi) failed: %d\")",
        releases: "2.16-2.30",
        cause: "GPUDirect RDMA through GDRCopy failed to pin or map GPU memory",
        hint: "check the gdrdrv module and GDRCopy version on that host; NCCL_GDRCOPY_ENABLE=0 runs without it",
    },
    // ---------------------------------------------------------------- RAS
    Signature {
        id: "ras-version-mismatch",
        category: Category::VersionMismatch,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "NCCL version mismatch with remote peer",
            "Mismatched NCCL version detected",
            "compiled with too old version of NCCL",
        ]),
        source: "NVIDIA/nccl v2.30.7-1 src/ras/ras.cc (\"NCCL version mismatch with remote peer %s (local: %s, remote %s)\"), \
                 src/init.cc (\"Mismatched NCCL version detected : rank %d version %d rank %d version %d\")",
        releases: "RAS 2.24-2.30; init check 2.16-2.30",
        cause: "ranks of one job run different NCCL versions (different images or a library picked up from \
                LD_LIBRARY_PATH on some hosts)",
        hint: "run every rank from the same image/environment; check which libnccl each host loads \
               (NCCL_DEBUG=VERSION prints it)",
    },
    Signature {
        id: "ras-warning",
        category: Category::Ras,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&["ras/"]),
        source: "NVIDIA/nccl v2.30.7-1 src/ras/ (ras.cc, rasnet.cc, client_support.cc)",
        releases: "2.24-2.30",
        cause: "NCCL's RAS subsystem reported a problem with its peers (a process it considers dead or unreachable)",
        hint: "query RAS (ncclras) while the job runs to see which ranks are missing; NCCL_RAS_ENABLE=0 disables it",
    },
    // ---------------------------------------------------------------- init / usage
    Signature {
        id: "init-usage",
        category: Category::Init,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Duplicate GPU detected",
            "Multiple Ranks are using the same GPU",
            "Invalid rank requested",
            "Invalid device count requested",
            "Attempt to use communicator before the previous operation returned ncclSuccess",
            "Detected mixed local Net device counts",
            "ncclConfig_t argument not initialized",
            "Invalid config",
            "Trying to send to self without a matching recv",
            "Trying to recv to self without a matching send",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/init.cc (\"Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx\", \
                 \"Invalid rank requested : %d/%d\"); v2.30.7-1 src/init.cc (\"Multiple Ranks are using the same GPU/Partition\")",
        releases: "2.16-2.30 (\"Multiple Ranks are using the same GPU\" 2.28-2.30)",
        cause: "the application used NCCL in a way it does not allow: two ranks on one GPU, a rank or device number out of \
                range, or a communicator used after an earlier error",
        hint: "give each rank its own GPU (set the device from LOCAL_RANK before init); check world size and ranks",
    },
    // ---------------------------------------------------------------- Open MPI / HCOLL (seed 001)
    Signature {
        id: "mpi-hcoll",
        category: Category::Mpi,
        stage: Stage::Launch,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "hcoll",
            "Error: coll_hcoll_module",
            "ORTE was unable to reliably start",
            "PRTE has lost communication with a remote daemon",
            "ORTE has lost communication with a remote daemon",
            "mpirun was unable to launch",
            "There are not enough slots available",
        ]),
        source: "Open MPI 4.x help texts (help-orte-runtime, help-mpi-api) and HCOLL (guess: texts seen in public logs, \
                 not NCCL)",
        releases: "not NCCL: Open MPI 4.x/5.x",
        cause: "the launcher failed before or around NCCL: Open MPI could not start or keep its daemons, or a rank \
                aborted through MPI; HCOLL (Mellanox collectives in Open MPI) is known to hang over a container's RDMA setup",
        hint: "with HCOLL: mpirun -mca coll_hcoll_enable 0 (and -mca btl tcp,self); set NCCL_IB_HCA, \
               NCCL_SOCKET_IFNAME and UCX_NET_DEVICES; for a peer that disconnected, read that rank's own log first",
    },
    // ---------------------------------------------------------------- location signatures
    // A WARN line no phrase names is placed by the source file in NCCL's prefix.
    Signature {
        id: "loc-p2p",
        category: Category::BufferImport,
        stage: Stage::ConnectImport,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&["transport/p2p.c"]),
        source: "NVIDIA/nccl v2.19.3-1, v2.30.7-1 src/transport/p2p.cc",
        releases: "2.16-2.30",
        cause: "NCCL's P2P transport (CUDA IPC / cuMem between GPUs of one host) failed",
        hint: "NCCL_P2P_DISABLE=1 confirms (SHM fallback); NCCL_CUMEM_ENABLE=0 tries legacy IPC; check the driver \
               and that the ranks of one host share their IPC namespace",
    },
    Signature {
        id: "loc-shm",
        category: Category::Shm,
        stage: Stage::ConnectShm,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&["transport/shm.c", "shmutils.c", "include/shm.h"]),
        source: "NVIDIA/nccl v2.19.3-1 src/transport/shm.cc, src/misc/shmutils.cc",
        releases: "2.16-2.30",
        cause: "NCCL's shared-memory transport failed",
        hint: "check /dev/shm size and free space in the container; NCCL_SHM_DISABLE=1 confirms",
    },
    Signature {
        id: "loc-nvls",
        category: Category::Nvls,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&["transport/nvls.c"]),
        source: "NVIDIA/nccl v2.19.3-1 src/transport/nvls.cc",
        releases: "2.17-2.30",
        cause: "NVLink SHARP (NVLS) setup failed",
        hint: "NCCL_NVLS_ENABLE=0 to run without NVLS; check nvidia-fabricmanager and the driver",
    },
    Signature {
        id: "loc-ipc-socket",
        category: Category::Proxy,
        stage: Stage::ConnectProxy,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&["ipcsocket", "socket_pair"]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/ipcsocket.cc; v2.30.7-1 src/os/linux_ipcsocket.cc (\"UDS: …\")",
        releases: "2.16-2.30",
        cause: "the Unix-domain socket NCCL's proxy uses to pass cuMem/IPC handles between local ranks failed",
        hint: "the ranks of one host must share a filesystem namespace for abstract sockets (same container or \
               --ipc=host/--pid=host); NCCL_CUMEM_ENABLE=0 avoids handle passing",
    },
    Signature {
        id: "loc-bootstrap",
        category: Category::Bootstrap,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&["bootstrap.c"]),
        source: "NVIDIA/nccl v2.19.3-1, v2.30.7-1 src/bootstrap.cc",
        releases: "2.16-2.30",
        cause: "NCCL's bootstrap (ranks finding each other through the root's socket) failed",
        hint: "check NCCL_SOCKET_IFNAME and that every host reaches rank 0's address; one unique id per job",
    },
    Signature {
        id: "loc-net-ib",
        category: Category::NetIb,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&[
            "net_ib",
            "ib_plugin",
            "ibvwrap",
            "ibvcore",
            "ibvsymbols",
            "mlx5dv",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/transport/net_ib.cc, v2.30.7-1 src/transport/net_ib/*.cc, src/misc/ibvwrap.cc",
        releases: "2.16-2.30",
        cause: "NCCL's InfiniBand/RoCE transport failed",
        hint: "check ibstat on both ends, NCCL_IB_HCA and NCCL_IB_GID_INDEX; NCCL_IB_DISABLE=1 falls back to sockets",
    },
    Signature {
        id: "loc-gdr",
        category: Category::Gdr,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&["gdrwrap"]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/gdrwrap.cc",
        releases: "2.16-2.30",
        cause: "GDRCopy (GPUDirect RDMA copies) failed",
        hint: "NCCL_GDRCOPY_ENABLE=0 runs without it; check the gdrdrv module",
    },
    Signature {
        id: "loc-cuda",
        category: Category::Cuda,
        stage: Stage::Driver,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&["cudawrap", "nvmlwrap"]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/cudawrap.cc, src/misc/nvmlwrap.cc",
        releases: "2.16-2.30",
        cause: "NCCL's CUDA driver / NVML wrapper failed",
        hint: "check the driver (nvidia-smi) and that libcuda matches the kernel module",
    },
    Signature {
        id: "loc-alloc",
        category: Category::Oom,
        stage: Stage::Alloc,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&["include/alloc.h", "allocator.c", "mem_manager.c"]),
        source: "NVIDIA/nccl v2.19.3-1 src/include/alloc.h; v2.30.7-1 src/allocator.cc, src/mem_manager.cc",
        releases: "2.16-2.30",
        cause: "NCCL could not allocate or map memory for its buffers",
        hint: "leave GPU and host memory for NCCL; check `ulimit -l` and the other processes on the GPU",
    },
    Signature {
        id: "loc-net-socket",
        category: Category::NetSocket,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&["misc/socket.c", "net_socket", "include/socket.h"]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/socket.cc, src/transport/net_socket.cc",
        releases: "2.16-2.30",
        cause: "NCCL's socket layer failed",
        hint: "check NCCL_SOCKET_IFNAME and that the hosts reach each other on it",
    },
    Signature {
        id: "loc-net",
        category: Category::NetSocket,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&[
            "transport/net.c",
            "transport/coll_net",
            "plugin/net",
            "net_v",
            "net.cc",
            "gin/",
            "rma/",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/transport/net.cc, src/transport/coll_net.cc; v2.30.7-1 src/plugin/net.cc",
        releases: "2.16-2.30",
        cause: "NCCL's network transport (or its net plugin) failed",
        hint: "check the network plugin (NCCL_NET_PLUGIN), NCCL_SOCKET_IFNAME and NCCL_IB_HCA",
    },
    Signature {
        id: "loc-init",
        category: Category::Init,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&[
            "init.c",
            "graph/",
            "enqueue.c",
            "group.c",
            "argcheck",
            "transport.c",
            "channel.c",
            "register",
            "collectives.c",
            "misc/utils.c",
            "misc/param.c",
            "dev_runtime",
            "symmetric",
            "mnnvl",
            "tuner",
            "plugin/",
            "misc/strongstream",
            "ce_coll",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/init.cc, src/graph/*.cc, src/enqueue.cc, src/group.cc, src/misc/argcheck.cc",
        releases: "2.16-2.30",
        cause: "NCCL's communicator setup or an argument check failed",
        hint: HINT_DEBUG,
    },
    // ---------------------------------------------------------------- wrappers' words
    Signature {
        id: "wrapper-nccl-error",
        category: Category::NcclError,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "unhandled system error",
            "unhandled cuda error",
            "internal error - please report this issue",
            "ncclInternalError",
            "ncclInvalidUsage",
            "ncclInvalidArgument",
            "ncclUnhandledCudaError",
            "ncclSystemError",
            "Test NCCL failure",
            "Test CUDA failure",
            "NCCL failure common.cu",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/init.cc ncclGetErrorString (\"unhandled system error\", \"unhandled cuda error\", \
                 \"internal error\"); PyTorch torch/csrc/distributed/c10d NCCLUtils (\"NCCL error in: …\", guess: from public \
                 logs); nccl-tests src/common.cu (\"Test NCCL failure %s:%d '%s'\", guess: from public logs)",
        releases: "2.16-2.30 (error strings)",
        cause: "NCCL returned an error to the program around it, and no line in this log names its cause",
        hint: "rerun with NCCL_DEBUG=WARN (or INFO) in every rank's environment: NCCL then prints the WARN line that \
               names the cause, which `nccl-smoke explain` recognises",
    },
    // ---------------------------------------------------------------- hangs
    Signature {
        id: "hang-watchdog",
        category: Category::Hang,
        stage: Stage::Run,
        severity: Severity::Hang,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Watchdog caught collective operation timeout",
            "ProcessGroupNCCL's watchdog got stuck",
            "Test timeout",
            "NCCL timeout",
            "timed out after",
        ]),
        source: "PyTorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (\"Watchdog caught collective operation timeout: \
                 WorkNCCL(SeqNum=…, OpType=…) ran for N milliseconds before timing out\", guess: from public logs); \
                 nccl-tests (\"Test timeout\", guess)",
        releases: "not NCCL: PyTorch 1.x-2.x",
        cause: "a collective did not complete: some rank never joined it (stuck in other code, crashed, or behind on \
                an earlier operation) or a link stopped moving data",
        hint: "the ranks that fell silent first are the suspects: look at their last operation and at their host \
               (GPU errors in dmesg/nvidia-smi, Xid); NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=COLL logs each operation",
    },
    // ---------------------------------------------------------------- consequences
    Signature {
        id: "remote-error",
        category: Category::RemoteError,
        stage: Stage::Run,
        severity: Severity::Consequence,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "remote process exited or there was a network error",
            "ncclRemoteError",
            "Connection closed by remote peer",
            "Connection reset by peer",
            "Broken pipe",
            "Socket recv failed while polling",
            "Failed to execute operation",
            "Error encountered progressing operation",
            "commReclaim: cleanup comm",
            "Comm %p is in abort state",
            "is in abort state",
            "peer closed",
            "MPI_ABORT was invoked",
            "An MPI communication peer process has unexpectedly disconnected",
            "exited with non-zero status",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/socket.cc (\"socketProgress: Connection closed by remote peer %s\"), \
                 src/proxy.cc (\"[Proxy Service %d] Failed to execute operation %s from rank %d, retcode %d\", \"Socket recv \
                 failed while polling for opId=%p\"), src/init.cc ncclGetErrorString (ncclRemoteError)",
        releases: "2.16-2.30 (ncclRemoteError since 2.13)",
        cause: "a peer rank failed or exited first (or the network between them broke); this rank reports the \
                consequence, not the cause",
        hint: "read the log of the peer this rank names (or the first rank that failed): its own finding is the cause",
    },
    // ---------------------------------------------------------------- generic proxy / CUDA
    Signature {
        id: "loc-proxy",
        category: Category::Proxy,
        stage: Stage::ConnectProxy,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Location(&["proxy.c"]),
        source: "NVIDIA/nccl v2.19.3-1, v2.30.7-1 src/proxy.cc",
        releases: "2.16-2.30",
        cause: "an operation of NCCL's proxy service failed",
        hint: "set each rank's device before communicator init; make every send match a receive; \
               rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,PROXY for the step before",
    },
    Signature {
        id: "cuda-failure",
        category: Category::Cuda,
        stage: Stage::Driver,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Phrases(&["Cuda failure", "CUDA error:", "CUDA failure"]),
        source: "NVIDIA/nccl v2.19.3-1 src/include/checks.h (\"Cuda failure '%s'\"), src/include/cudawrap.h (\"Cuda failure %d '%s'\")",
        releases: "2.16-2.30",
        cause: "a CUDA call inside NCCL failed (the CUDA error string says which)",
        hint: "check dmesg for Xid errors and nvidia-smi on that host; a sticky error (e.g. 'an illegal memory access') \
               usually comes from the application's own kernels",
    },
    // ---------------------------------------------------------------- advice (seed 002)
    // GPUDirect RDMA off, so inter-node traffic bounces through host memory.
    Signature {
        id: "gdr-disabled",
        category: Category::Gdr,
        stage: Stage::Run,
        severity: Severity::Advice,
        scope: Scope::Info,
        what: Match::Phrases(&["GPU Direct RDMA Disabled"]),
        source: "NVIDIA/nccl v2.19.3-1 src/transport/net_ib.cc (\"NET/IB : GPU Direct RDMA Disabled for HCA %d '%s' (%s)\", INFO)",
        releases: "2.16-2.30",
        cause: "NCCL moves network data without GPUDirect RDMA (through host memory), so inter-node bandwidth \
                is low; NCCL before 2.23.4 only looks for the legacy peer-memory paths \
                (/sys/kernel/mm/memory_peers/nv_mem*/version) and misses the nvidia_peermem module",
        hint: "load nvidia_peermem (modprobe nvidia_peermem) and use NCCL >= 2.23.4; check NCCL_NET_GDR_LEVEL, \
               NCCL_IB_DISABLE=0 and NCCL_IB_HCA",
    },
    // ---------------------------------------------------------------- benign notes
    Signature {
        id: "note-no-ibverbs",
        category: Category::NetIb,
        stage: Stage::ConnectNet,
        severity: Severity::Note,
        scope: Scope::Info,
        what: Match::Phrases(&[
            "Failed to open libibverbs",
            "NET/IB : No device found",
            "Plugin load returned",
            "Plugin load (libnccl-net.so) returned",
            "No plugin found",
            "failed to IPC register userbuff",
            "Cannot get incoming CPU",
            "Maximum retry reached for",
            "couldn't load driver",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/ibvwrap.cc (\"Failed to open libibverbs.so[.1]\"), src/transport/net_ib.cc \
                 (\"NET/IB : No device found.\"), src/nccl_net / plugin loading messages",
        releases: "2.16-2.30",
        cause: "NCCL looked for an optional library or device and did without it (no InfiniBand on this node, no net \
                plugin): harmless unless you expected InfiniBand",
        hint: "ignore unless the job should use InfiniBand/RoCE; then install rdma-core (libibverbs) in the image",
    },
];

/// The signature table's ids, in priority order (for the coverage listing and tests).
pub fn signature_ids() -> impl Iterator<Item = &'static str> {
    SIGNATURES.iter().map(|s| s.id)
}

/// What kind of line a classifier sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// `… NCCL INFO …` / `… NCCL TRACE …`.
    Info,
    /// `… NCCL WARN …`, or error text a wrapper printed after "Last error:".
    Warn,
    /// Anything else (wrapper, launcher, application output).
    Other,
}

impl LineKind {
    /// The kind of one line by NCCL's level word.
    pub fn of(line: &str) -> LineKind {
        static NCCL: OnceLock<memchr::memmem::Finder<'static>> = OnceLock::new();
        let finder = NCCL.get_or_init(|| memchr::memmem::Finder::new(b" NCCL "));
        let Some(at) = finder.find(line.as_bytes()) else {
            return LineKind::Other;
        };
        let rest = &line.as_bytes()[at + 6..];
        if rest.starts_with(b"INFO") || rest.starts_with(b"TRACE") || rest.starts_with(b"CALL") {
            LineKind::Info
        } else if rest.starts_with(b"WARN") {
            LineKind::Warn
        } else {
            LineKind::Other
        }
    }
}

struct Matcher {
    ac: AhoCorasick,
    /// For each pattern of `ac`, the signature it belongs to.
    owner: Vec<usize>,
}

/// The phrases of every signature (for WARN and other lines), or of the signatures that
/// also read INFO lines (most lines of an INFO log: a much smaller automaton).
fn matcher(info_only: bool) -> &'static Matcher {
    static ALL: OnceLock<Matcher> = OnceLock::new();
    static INFO: OnceLock<Matcher> = OnceLock::new();
    let cell = if info_only { &INFO } else { &ALL };
    cell.get_or_init(|| {
        let mut patterns = Vec::new();
        let mut owner = Vec::new();
        for (i, sig) in SIGNATURES.iter().enumerate() {
            if info_only && sig.scope != Scope::Info {
                continue;
            }
            if let Match::Phrases(ps) = sig.what {
                for p in ps {
                    patterns.push(*p);
                    owner.push(i);
                }
            }
        }
        let ac = AhoCorasickBuilder::new()
            // INFO lines are NCCL's own text, in NCCL's own case: exact matching lets the
            // automaton skip ahead with a fast prefilter.
            .ascii_case_insensitive(!info_only)
            .match_kind(MatchKind::LeftmostFirst)
            .build(&patterns)
            .expect("the signature phrases form a valid automaton");
        Matcher { ac, owner }
    })
}

/// The source file NCCL printed before its level word: `transport/p2p.cc:275 NCCL WARN` or
/// `transport/p2p.cc:275 (func) NCCL WARN` (2.28+).
fn warn_location(line: &str) -> Option<&str> {
    let at = line.find(" NCCL WARN")?;
    line[..at]
        .split_whitespace()
        .rev()
        .take(3)
        .find(|w| w.contains(':') && (w.contains(".c") || w.contains(".h")))
}

fn applies(sig: &Signature, kind: LineKind) -> bool {
    match (sig.scope, kind) {
        (Scope::Info, _) => true,
        (_, LineKind::Info) => false,
        (Scope::Any, _) => true,
        (Scope::Warn, k) => k == LineKind::Warn,
    }
}

/// Phrases so general that the source file of a WARN line says more.
const WEAK: &[&str] = &["cuda-failure", "wrapper-nccl-error"];

/// The signature that names one line, if any (the first in table order).
pub fn classify_line(line: &str, kind: LineKind) -> Option<Finding> {
    let m = matcher(kind == LineKind::Info);
    let mut best: Option<usize> = None;
    for hit in m.ac.find_iter(line) {
        let i = m.owner[hit.pattern().as_usize()];
        if best.is_some_and(|b| b <= i) {
            continue;
        }
        if applies(&SIGNATURES[i], kind) {
            best = Some(i);
        }
    }
    // A WARN line's source file names its transport more precisely than a generic phrase
    // ("Cuda failure" in transport/p2p.cc is a P2P failure), but never overrides a specific
    // phrase, a consequence or a benign note.
    let weak = best.is_none_or(|b| WEAK.contains(&SIGNATURES[b].id));
    if kind == LineKind::Warn
        && weak
        && let Some(loc) = warn_location(line)
    {
        let loc_hit = SIGNATURES.iter().position(|s| match s.what {
            Match::Location(paths) => paths.iter().any(|p| loc.contains(p)),
            Match::Phrases(_) => false,
        });
        if let Some(i) = loc_hit
            && (best.is_none() || SIGNATURES[i].category != Category::Init)
        {
            best = Some(i);
        }
    }
    best.map(|i| finding(&SIGNATURES[i], line))
}

fn finding(sig: &Signature, line: &str) -> Finding {
    Finding {
        stage: sig.stage,
        cause: sig.cause,
        hint: sig.hint,
        evidence: line.trim().to_string(),
        category: sig.category,
        severity: sig.severity,
        signature: sig.id,
    }
}

/// Priority of a finding among others: more severe first, then earlier in the table.
pub fn rank_key(f: &Finding) -> (std::cmp::Reverse<Severity>, usize) {
    let idx = SIGNATURES
        .iter()
        .position(|s| s.id == f.signature)
        .unwrap_or(usize::MAX);
    (std::cmp::Reverse(f.severity), idx)
}

/// The first advisory (a cause of slowness, not a failure) among `lines`.
pub fn advise<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<Finding> {
    lines
        .into_iter()
        .find_map(|l| classify_line(l, LineKind::of(l)).filter(|f| f.severity == Severity::Advice))
}

/// The most telling failure among `lines` (an error text and the WARN lines of one rank):
/// failures before consequences, then the table's order. NCCL's INFO and TRACE lines describe
/// healthy progress ("NET/IB : Using mlx5_0"), so they never count as failure evidence; every
/// other line is read as error text.
pub fn classify<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<Finding> {
    lines
        .into_iter()
        .filter(|l| LineKind::of(l) != LineKind::Info)
        .filter_map(|l| classify_line(l, LineKind::Warn))
        .filter(|f| f.severity >= Severity::Consequence)
        .min_by_key(rank_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_000_import_failure() {
        let f = classify([
            "host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via P2P/CUMEM",
            "host:1:2 [0] transport/p2p.cc:275 NCCL WARN Cuda failure 101 'invalid device ordinal'",
        ])
        .unwrap();
        assert_eq!(f.stage, Stage::ConnectImport);
        assert!(f.evidence.contains("invalid device ordinal"));
    }

    #[test]
    fn seed_003_proxy_failure() {
        let f = classify(["proxy.cc:1473 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable"]).unwrap();
        assert_eq!(f.stage, Stage::ConnectProxy);
    }

    /// EMFILE in a socket WARN is the process's file descriptors, not the network; a closed
    /// connection beside it is what the peers did next.
    #[test]
    fn out_of_file_descriptors_is_not_the_network() {
        let f = classify([
            "socketProgress: Connection closed by remote peer h<1234>",
            "h:1:2 [0] misc/socket.cc:458 NCCL WARN socketTryAccept: Accept failed: Too many open files",
        ])
        .unwrap();
        assert_eq!(f.category, Category::OpenFiles);
        assert_eq!(f.severity, Severity::Fail);
        assert!(f.category.is_local() && !Category::NetSocket.is_local());
    }

    #[test]
    fn seed_004_shm_failure() {
        let f = classify([
            "unhandled system error",
            "shm.cc:114 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Zr3l1 (size 9637888)",
        ])
        .unwrap();
        assert_eq!(f.stage, Stage::ConnectShm);
        assert!(f.evidence.starts_with("shm.cc"));
    }

    #[test]
    fn seed_002_gdr_disabled_is_advice_not_failure() {
        let line = "n1:7:7 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'";
        assert_eq!(classify([line]), None);
        let a = advise([line]).unwrap();
        assert_eq!(a.stage, Stage::Run);
        assert!(a.hint.contains("nvidia_peermem"));
        assert_eq!(
            advise(["NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'"]),
            None
        );
    }

    #[test]
    fn healthy_lines_give_nothing() {
        assert_eq!(
            classify([
                "host:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.2<0>",
                "host:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>",
                "host:1:1 [0] NCCL INFO comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
            ]),
            None
        );
    }

    #[test]
    fn the_issue_examples_are_named() {
        for (line, cat, stage) in [
            (
                "h:1:2 [0] transport/p2p.cu:548 NCCL WARN failed to open CUDA IPC handle : 64 peer access is not supported between these two devices",
                Category::BufferImport,
                Stage::ConnectImport,
            ),
            (
                "h:1:2 [0] misc/cudawrap.cc:182 NCCL WARN Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'",
                Category::Cuda,
                Stage::Driver,
            ),
            (
                "h:1:2 [0] bootstrap.cc:37 NCCL WARN Bootstrap : no socket interface found",
                Category::Bootstrap,
                Stage::Init,
            ),
        ] {
            let f = classify_line(line, LineKind::of(line)).unwrap();
            assert_eq!((f.category, f.stage), (cat, stage), "{line}");
            assert_eq!(f.severity, Severity::Fail);
        }
    }

    #[test]
    fn generic_phrases_need_a_warn_line() {
        let app = "requests.exceptions.ConnectionError: Connection refused";
        assert_eq!(classify_line(app, LineKind::of(app)), None);
        let warn = "h:1:1 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<1> failed : Connection refused";
        assert_eq!(
            classify_line(warn, LineKind::of(warn)).unwrap().category,
            Category::NetSocket
        );
    }

    #[test]
    fn an_unnamed_warn_is_placed_by_its_source_file() {
        let l = "h:1:1 [0] transport/net_ib/connect.cc:99 (ncclIbConnect) NCCL WARN NET/IB : something new";
        let f = classify_line(l, LineKind::of(l)).unwrap();
        assert_eq!((f.signature, f.category), ("loc-net-ib", Category::NetIb));
    }

    #[test]
    fn failures_outrank_consequences() {
        let f = classify([
            "a:1:1 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer b<1>",
            "a:1:1 [0] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
        ])
        .unwrap();
        assert_eq!(f.category, Category::Oom);
        let c = classify(["a:1:1 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer b<1>"]).unwrap();
        assert_eq!(c.severity, Severity::Consequence);
    }

    #[test]
    fn benign_warns_are_notes() {
        let l = "h:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]";
        let f = classify_line(l, LineKind::of(l)).unwrap();
        assert_eq!(f.severity, Severity::Note);
        assert_eq!(classify([l]), None);
    }

    #[test]
    fn signature_ids_are_unique() {
        let mut ids: Vec<_> = signature_ids().collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n);
    }
}
