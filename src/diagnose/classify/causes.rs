//! The first part of the signature table: root causes named by their own phrases, from local
//! resources and CUDA through the transports to the launcher.

use super::finding::{Category, Severity};
use super::signature::{Match, Scope, Signature};
use crate::stage::Stage;

/// A peer GPU's buffer that could not be imported (seed 000).
const IMPORT_CAUSE: &str = "importing a peer GPU's buffer for the P2P transport failed (cuMem/IPC handle import or \
                            peer access); seen with the 570-series driver when ranks in separate containers each see \
                            their GPU as device 0, with GPUs that cannot peer (no P2P between them, IOMMU/ACS, \
                            virtualised PCIe), and with ranks that do not share an IPC namespace";
const IMPORT_HINT: &str = "upgrade the GPU driver; run the ranks of one host in one container (or share --ipc=host \
                           and --pid=host); meanwhile NCCL_CUMEM_ENABLE=0 (legacy IPC) or NCCL_P2P_DISABLE=1 (SHM \
                           fallback); on bare metal check ACS/IOMMU settings (nvidia-smi topo -p2p r)";

pub(super) const SIGNATURES: &[Signature] = &[
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
            "The NVIDIA driver on your system is too old",
        ]),
        source: "NVIDIA/nccl v2.30.7-1 src/misc/cudawrap.cc (\"CUDA Driver version found is %d. Minimum requirement is %d\"); \
                 v2.19.3-1 src/include/cudawrap.h and src/include/checks.h print CUDA's own error string (\"Cuda failure '%s'\"); \
                 PyTorch torch/cuda/__init__.py (\"The NVIDIA driver on your system is too old (found version %d)\")",
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
            "No CUDA GPUs are available",
            "ProcessGroupNCCL is only supported with GPUs, no GPUs found",
            "Found no NVIDIA driver on your system",
            "CUDA driver initialization failed",
        ]),
        source: "NVIDIA/nccl v2.30.7-1 src/misc/cudawrap.cc (\"Failed to find CUDA library %s\", \"Failed to load CUDA missing \
                 symbol cuInit\"); CUDA error strings through v2.19.3-1 src/include/checks.h \"Cuda failure '%s'\"; \
                 PyTorch torch/csrc/cuda and torch/cuda/__init__.py (\"No CUDA GPUs are available\", \"Found no NVIDIA \
                 driver on your system\")",
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
    // ---------------------------------------------------------------- SHM over cuMem host memory
    // CUDA 217 in the SHM transport is not a P2P import: 2.23+ shares host memory between local
    // ranks through cuMem host allocations, which a driver or container can refuse.
    Signature {
        id: "shm-cumem-host",
        category: Category::Shm,
        stage: Stage::ConnectShm,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::PhrasesIn {
            files: &["transport/shm.c", "shmutils.c"],
            phrases: &[
                "peer access is not supported",
                "Cuda failure",
                "CUDA failure",
            ],
        },
        source: "NVIDIA/nccl v2.23.4-1 … v2.30.7-1 src/transport/shm.cc (cuMem host allocations shared with \
                 CUCHECK(cuMemCreate/cuMemExportToShareableHandle/cuMemImportFromShareableHandle) when \
                 NCCL_CUMEM_HOST_ENABLE is on, its default from 2.23)",
        releases: "2.23-2.30",
        cause: "NCCL's shared-memory transport could not share cuMem host memory between the ranks of one host \
                (CUDA refused the host allocation's export or import: an older driver, a container without the \
                capability, or ranks in different IPC/PID namespaces)",
        hint: "NCCL_CUMEM_HOST_ENABLE=0 returns to /dev/shm segments; or upgrade the driver; run the ranks of one \
               host in one container (or with --ipc=host --pid=host)",
    },
    // Ranks that disagree on how host memory is shared: one opens a /dev/shm segment the other
    // never sized (it shares through cuMem), or a different NCCL.
    Signature {
        id: "shm-size-zero",
        category: Category::Shm,
        stage: Stage::ConnectShm,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::PhrasesIn {
            files: &["transport/shm.c", "shmutils.c", "include/shm.h"],
            phrases: &["(size 0)"],
        },
        source: "NVIDIA/nccl v2.19.3-1 src/misc/shmutils.cc (\"Error while %s shared memory segment %s (size %ld)\"); \
                 size 0 is the opening side's (guess: the cause from a public thread, not from the source)",
        releases: "2.16-2.30",
        cause: "a rank tried to open a peer's /dev/shm segment with size 0: the ranks of this host disagree on how \
                they share host memory (different NCCL versions, or NCCL_CUMEM_HOST_ENABLE set on some ranks only), \
                or the segment was already removed; a full /dev/shm is not the cause",
        hint: "run the same NCCL and the same NCCL_CUMEM_HOST_ENABLE on every rank (NCCL_CUMEM_HOST_ENABLE=0 on all \
               forces /dev/shm)",
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
        cause: IMPORT_CAUSE,
        hint: IMPORT_HINT,
    },
    // Seed 000 on NCCL 2.19-2.27: the same failure printed without the function's name, only
    // NCCL's generic CUDA text, placed by its source file. It must outrank what the rank's proxy
    // says next ("Could not receive type from localRank", below), so it is a signature here,
    // not only the location signature `loc-p2p`.
    Signature {
        id: "p2p-import-cuda",
        category: Category::BufferImport,
        stage: Stage::ConnectImport,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::PhrasesIn {
            files: &["transport/p2p.c"],
            phrases: &["Cuda failure"],
        },
        source: "NVIDIA/nccl v2.19.3-1 src/transport/p2p.cc:243 (ncclP2pImportShareableBuffer: \
                 CUCHECK(cuMemImportFromShareableHandle(…)); the other CUCHECK/CUDACHECK calls of the file export, \
                 import, map and grant access to the buffers peers share: lines 201-312), CUCHECK's \
                 \"Cuda failure %d '%s'\" in src/include/cudawrap.h; 2.28+ adds the function's name to the prefix \
                 (`transport/p2p.cc:294 (ncclP2pImportShareableBuffer)`, which `p2p-import` names); seen from the \
                 real 2.19.3 wheel (tests/fixtures/stand-in-logs)",
        releases: "2.19-2.27 without the function's name; 2.28+ with it",
        cause: IMPORT_CAUSE,
        hint: IMPORT_HINT,
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
            "cuMulticastCreate",
            "cuMulticastBindMem",
            "cuMulticastBindAddr",
            "cuMulticastAddDevice",
        ]),
        source: "NVIDIA/nccl v2.30.7-1 src/transport/nvls.cc (\"Failed to bind NVLink SHARP (NVLS) Multicast memory …\"); \
                 v2.19.3-1 and v2.30.7-1 src/transport/nvls.cc CUCHECK(cuMulticastCreate/AddDevice/BindMem/BindAddr), \
                 whose failure names the call",
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
    Signature {
        id: "bootstrap-accept-closed",
        category: Category::Bootstrap,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Phrases(&["Accept failed: Bad file descriptor"]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/socket.cc socketTryAccept (\"socketTryAccept: Accept failed: %s\"), called \
                 by the bootstrap's and the proxy's listening sockets; guess: the closed-socket reading is ours",
        releases: "2.16-2.30",
        cause: "this process's own listening socket was closed while NCCL still accepted on it (EBADF): the \
                communicator was being torn down or aborted by another thread, or the process forked after init",
        hint: "look for the first error of this process before this line; do not fork after NCCL init; with several \
               communicators, do not destroy one while another thread initialises",
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
        id: "dmabuf-unsupported",
        category: Category::Gdr,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&["ibv_reg_dmabuf_mr failed", "ibv_reg_dmabuf_mr"]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/ibvwrap.cc (wrap_ibv_reg_dmabuf_mr: \"Call to ibv_reg_dmabuf_mr failed with \
                 error %s\"), v2.30.7-1 src/misc/ibvwrap.cc",
        releases: "2.16-2.30",
        cause: "registering GPU memory with the NIC through dmabuf failed (Operation not supported: the kernel, the \
                NIC driver or the GPU driver lacks dmabuf support for this path)",
        hint: "NCCL_DMABUF_ENABLE=0 falls back to nvidia_peermem; or use a kernel (5.12+), OFED/rdma-core and GPU \
               driver with dmabuf support, or a newer NCCL that checks support before using it",
    },
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
            "got completion with error",
        ]),
        source: "rdma-core providers/mlx5/cq.c (\"%s: got completion with error:\", the mlx5 provider's own dump of a failed \
                 CQE, printed beside NCCL's line or instead of it); \
                 NVIDIA/nccl v2.19.3-1 src/transport/net_ib.cc (\"NET/IB : Got completion from peer %s with error %d, opcode %d, \
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
        id: "duplicate-gpu",
        category: Category::Init,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Duplicate GPU detected",
            "Multiple Ranks are using the same GPU",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 to v2.28.9-1 src/init.cc (\"Duplicate GPU detected : rank %d and rank %d both \
                 on CUDA device %lx\"; seen on an H200 with 2.28.9 as init.cc:904); v2.30.7-1 src/init.cc (\"Multiple \
                 Ranks are using the same GPU/Partition\", NCCL_PARAM MultiRankGpuEnable, default 0)",
        releases: "2.16-2.30",
        cause: "two ranks of one communicator are on the same GPU (the device number in the line is its PCI bus id): \
                NCCL refuses that, and from 2.30.3 allows it only with NCCL_MULTI_RANK_GPU_ENABLE=1; usually more \
                local ranks (or ranks x -g) than GPUs on that host, or every rank left on device 0",
        hint: "start one rank per GPU (mpirun -np / srun --ntasks-per-node = GPUs per node), and set each rank's \
               device from its local rank (CUDA_VISIBLE_DEVICES or torch.cuda.set_device(LOCAL_RANK)) before init",
    },
    Signature {
        id: "init-usage",
        category: Category::Init,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Invalid rank requested",
            "Invalid device count requested",
            "Detected mixed local Net device counts",
            "ncclConfig_t argument not initialized",
            "Invalid config",
            "Trying to send to self without a matching recv",
            "invalid root",
            "root should be in the",
            "Trying to recv to self without a matching send",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/init.cc (\"Invalid rank requested : %d/%d\")",
        releases: "2.16-2.30",
        cause: "the application used NCCL in a way it does not allow: a rank or device number out of range, a bad \
                config, or a send to itself without its receive",
        hint: "check the world size and each rank's number and device, the root and the config the program passes",
    },
    // ---------------------------------------------------------------- Open MPI / HCOLL (seed 001)
    Signature {
        id: "pmix-lock-noise",
        category: Category::Mpi,
        stage: Stage::Launch,
        severity: Severity::Note,
        scope: Scope::Any,
        what: Match::Phrases(&["gds_ds12_lock_pthread.c"]),
        source: "openpmix/openpmix src/mca/gds/ds12/gds_ds12_lock_pthread.c (PMIX_ERROR_LOG on the shared-memory \
                 data store's rwlock setup and teardown, e.g. pmix_ds12_lock_finalize); open-mpi/ompi issue 7516 and \
                 openpmix issues 1123 and 1716 show jobs that run on after it",
        releases: "not NCCL: PMIx 2.x-3.x (alone, or inside Open MPI 4.x and Slurm)",
        cause: "PMIx's shared-memory data store logged a lock error while setting up or tearing down: the job goes \
                on, and NCCL does not use it",
        hint: "harmless; PMIX_MCA_gds=hash in the job's environment quiets it",
    },
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
            "pmix_init failed",
            "PMI2_Init failed",
            "PMIx_Init failed",
            "Unable to create step",
            "An ORTE daemon has unexpectedly failed",
            "A process or daemon was unable to complete a TCP connection",
            "was unable to find the specified executable",
            "Could not resolve hostname",
            "Host key verification failed",
            "Permission denied (publickey",
            "PMIX ERROR",
            "ORTE_ERROR_LOG",
            "orte_ess_init failed",
            "An error occurred in MPI_Init",
            "MPI_Init failed",
            "It looks like MPI_INIT failed",
            "It looks like orte_init failed",
        ]),
        source: "Open MPI 4.x help texts (help-orte-runtime, help-mpi-api, help-oob-tcp), PMIx/PMI2 and Slurm's srun, \
                 ssh (the launcher's agent) and HCOLL (guess: texts seen in public logs, not NCCL)",
        releases: "not NCCL: Open MPI 4.x/5.x",
        cause: "the launcher failed before or around NCCL: Open MPI could not start or keep its daemons, or a rank \
                aborted through MPI; HCOLL (Mellanox collectives in Open MPI) is known to hang over a container's RDMA setup",
        hint: "with HCOLL: mpirun -mca coll_hcoll_enable 0 (and -mca btl tcp,self); set NCCL_IB_HCA, \
               NCCL_SOCKET_IFNAME and UCX_NET_DEVICES; for a peer that disconnected, read that rank's own log first",
    },
];
