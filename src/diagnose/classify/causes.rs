//! The first part of the signature table: root causes named by their own phrases, from local
//! resources and CUDA through GPU memory to the transports within a node (the rest is in
//! `network`).

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
    // A CUDA call of the NVLS transport: multicast objects and their memory (cuMulticast*,
    // cuMemCreate/Map for the multicast buffers), which need the fabric manager and driver
    // support; placed above the CUDA codes so that `nvls.cc … Cuda failure 3 'initialization
    // error'` is the NVLS setup failing, not CUDA missing (CUDA worked to get this far).
    Signature {
        id: "nvls-cuda",
        category: Category::Nvls,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::PhrasesIn {
            files: &["transport/nvls.c"],
            phrases: &["Cuda failure", "CUDA failure"],
        },
        source: "NVIDIA/nccl v2.19.3-1 (49 CUCHECKs), v2.26.2-1 src/transport/nvls.cc (CUCHECK(cuMulticastCreate), \
                 cuMulticastAddDevice, cuMemCreate/cuMemMap of the multicast buffers), called from ncclNvlsSetup and \
                 ncclNvlsBufferSetup during init (src/init.cc)",
        releases: "2.17-2.30",
        cause: "a CUDA call of NCCL's NVLink SHARP (NVLS) setup failed: the multicast objects or their memory could \
                not be created or bound (the fabric manager, the driver or the IMEX/multicast configuration does not \
                support it on this system)",
        hint: "NCCL_NVLS_ENABLE=0 to run without NVLS; check nvidia-fabricmanager (and IMEX on multi-node NVLink) and \
               the driver version",
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
];
