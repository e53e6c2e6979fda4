//! The families around NCCL, each in its own words: net plugins (aws-ofi-nccl), the MPI
//! layers (UCX, UCC), PyTorch's rendezvous store and torchrun, JAX's coordination service,
//! Slurm and the kernel's OOM killer. NCCL's own WARN lines are read elsewhere; a line of a
//! family nothing here knows is still quoted by `explain` as an unexplained error line.

use super::finding::{Category, Severity};
use super::signature::{Match, Scope, Signature};
use crate::stage::Stage;

pub(super) const SIGNATURES: &[Signature] = &[
    // ---------------------------------------------------------------- net plugins
    Signature {
        id: "ofi-peer-gone",
        category: Category::RemoteError,
        stage: Stage::Run,
        severity: Severity::Consequence,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Invalid receiver queue pair number",
            "Receiver connection aborted",
        ]),
        source: "ofiwg/libfabric prov/efa/src/efa_errno.h (EFA completion status 9, REMOTE_ERROR_BAD_DEST_QPN: \
                 \"Invalid receiver queue pair number (QPN). This error is typically caused by a crashed peer\"; \
                 8, REMOTE_ERROR_ABORT: \"Receiver connection aborted\"), which aws-ofi-nccl quotes in its NET/OFI \
                 completion WARN",
        releases: "not NCCL: libfabric's EFA provider, through aws-ofi-nccl",
        cause: "the peer's end of the EFA connection is gone: that process crashed or was killed (often the host's \
                or the container's memory limit: the OOM killer) while this rank was sending to it",
        hint: "read the peer's own log and the host's kernel log (dmesg: 'Out of memory: Killed process') on the \
               host this line names as the peer; raise the container's memory limit if the OOM killer took it",
    },
    Signature {
        id: "ofi-register",
        category: Category::NetIb,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "NET/OFI Unable to register memory",
            "Unable to register memory (type",
        ]),
        source: "aws/aws-ofi-nccl src/nccl_ofi_rdma.c / nccl_ofi_sendrecv.c (\"Unable to register memory (type = %d) for \
                 device %d. RC: %d, Error: %s\"; guess: text from public logs)",
        releases: "not NCCL: aws-ofi-nccl 1.x",
        cause: "the OFI net plugin (EFA) could not register a buffer with libfabric: the locked-memory limit \
                (ulimit -l) is too low in the container, or GPU memory registration (dmabuf / nvidia_peermem) is not \
                available to the EFA driver",
        hint: "run with ulimit -l unlimited (Kubernetes: the EFA device plugin and a privileged or IPC_LOCK pod); \
               check FI_EFA_USE_DEVICE_RDMA and the aws-ofi-nccl version against the EFA installer's",
    },
    Signature {
        id: "ofi-init-failure",
        category: Category::NetIb,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "aws-ofi-nccl initialization failed",
            "Unable to find a protocol that worked",
        ]),
        source: "aws/aws-ofi-nccl src/nccl_ofi_net.cpp nccl_net_ofi_create_plugin (\"Unable to find a protocol that \
                 worked.  Failing initialization.\", PACKAGE_NAME \" initialization failed\"), called from the \
                 plugin's init, which NCCL calls at communicator init (NVIDIA/nccl v2.19.3-1 src/net.cc ncclNetInit)",
        releases: "not NCCL: aws-ofi-nccl 1.x",
        cause: "the OFI net plugin (libfabric, EFA on AWS) failed to initialise: no libfabric provider it can use \
                (no EFA device in the container, or a libfabric too old for the plugin)",
        hint: "fi_info -p efa on the host and in the container (Kubernetes: the EFA device plugin's resource); the \
               plugin, libfabric and EFA driver versions must match (the EFA installer's); NCCL_NET=Socket confirms \
               the rest works without the plugin",
    },
    Signature {
        id: "ofi-failure",
        category: Category::NetIb,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "NET/OFI",
            "Libfabric EFA provider",
            "Libfabric error",
            "EFA internal error",
        ]),
        source: "aws/aws-ofi-nccl (WARN lines through NCCL's logger prefixed \"NET/OFI\"; guess: from public logs)",
        releases: "not NCCL: aws-ofi-nccl 1.x",
        cause: "the OFI net plugin (libfabric, EFA on AWS) failed: no usable provider, a fabric call refused, or an \
                EFA device missing in the container",
        hint: "fi_info -p efa on the host and in the container; the plugin, libfabric and EFA driver versions must \
               match (the EFA installer's); NCCL_NET=Socket confirms the rest works without the plugin",
    },
    Signature {
        id: "net-plugin-version",
        // The plugin against the system's libraries, not NCCL against NCCL: the network it
        // would drive (EFA, RDMA) is what is missing.
        category: Category::NetIb,
        stage: Stage::NcclLoad,
        severity: Severity::Advice,
        scope: Scope::Info,
        what: Match::Phrases(&["' not found (required by"]),
        source: "the dynamic loader's message for a missing symbol version (glibc dlerror: \"version `X' not found \
                 (required by LIB)\"), which NCCL quotes when it cannot load a net plugin (NVIDIA/nccl v2.19.3-1 \
                 src/net.cc, \"NET/Plugin : dlerror=%s\"; 2.2x+ \"Plugin load returned %d : %s\")",
        releases: "2.4-2.30",
        cause: "a net plugin (libnccl-net.so: aws-ofi-nccl, gIB, SHARP) is there but could not load: it was built \
                against a newer library (libfabric, glibc) than the one installed; NCCL goes on with its internal \
                network, so an EFA/RDMA fabric the plugin drives is not used",
        hint: "install the plugin built for this image's libfabric/glibc (or the libfabric it needs); NCCL_DEBUG=INFO \
               then shows 'Using network' with the plugin's name",
    },
    Signature {
        id: "nccl-symbol-missing",
        category: Category::VersionMismatch,
        stage: Stage::NcclLoad,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&["undefined symbol: nccl", "undefined symbol: pncclComm"]),
        source: "the dynamic loader's message for a symbol no loaded library defines (glibc dlerror: \"undefined \
                 symbol: %s\"); every public NCCL function is named nccl… (NVIDIA/nccl src/nccl.h.in)",
        releases: "any",
        cause: "a program (PyTorch's libtorch_cuda, a plugin) was built against a newer NCCL than the libnccl.so.2 \
                the loader found first: the function it names is missing from that older library (two NCCL \
                packages installed, or LD_LIBRARY_PATH pointing at an old copy)",
        hint: "find which libnccl.so.2 is loaded (ldd on the library that fails, or NCCL_DEBUG=VERSION) and keep one \
               NCCL: uninstall the other nvidia-nccl-cuXX package or fix LD_LIBRARY_PATH",
    },
    Signature {
        id: "ibverbs-no-provider",
        category: Category::NetIb,
        stage: Stage::Init,
        severity: Severity::Advice,
        scope: Scope::Any,
        what: Match::Phrases(&["no userspace device-specific driver found for"]),
        source: "linux-rdma/rdma-core libibverbs/init.c (\"Warning: no userspace device-specific driver found for %s\", \
                 printed with the \"libibverbs: \" prefix for an RDMA device in /sys/class/infiniband_verbs that no \
                 installed provider library claims), when NCCL lists the devices in ncclIbInit (NVIDIA/nccl \
                 v2.19.3-1 src/transport/net_ib.cc, ibv_get_device_list): at init",
        releases: "not NCCL: rdma-core's libibverbs",
        cause: "the node has an RDMA device (InfiniBand/RoCE) but this image lacks its userspace provider (libmlx5 for \
                Mellanox/NVIDIA NICs, part of rdma-core): NCCL cannot open the HCA and goes without InfiniBand",
        hint: "install rdma-core with the provider (ibverbs-providers on Debian/Ubuntu, libibverbs and its providers on \
               RHEL) in the container; ibv_devinfo inside it must list the HCA",
    },
    Signature {
        id: "net-not-found",
        category: Category::Init,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Phrases(&["Error: network ", "Failed to initialize any NET plugin"]),
        source: "NVIDIA/nccl v2.19.3-1 src/net.cc ncclNetInit (\"Error: network %s not found.\": no enabled network \
                 has the name NCCL_NET or the config's netName gives; src/plugin/net.cc from v2.26.2-1); v2.28.9-1 \
                 src/plugin/net.cc (\"Failed to initialize any NET plugin\")",
        releases: "2.4-2.30",
        cause: "NCCL_NET (or the communicator's netName) asks for a network that no loaded plugin and no built-in \
                transport provides: the plugin that brings it failed to load or to initialise (an earlier \
                NET/Plugin line says why), or that network found no device on this host",
        hint: "read the NET/Plugin lines before this one (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET); check \
               NCCL_NET_PLUGIN and that the plugin's libraries load in this container (ldd libnccl-net.so)",
    },
    Signature {
        id: "ofi-benign",
        category: Category::NetIb,
        stage: Stage::ConnectNet,
        severity: Severity::Note,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "FI_HMEM_ZE",
            "libze_loader",
            "FI_HMEM_ROCR",
            "FI_HMEM_NEURON",
            "FI_HMEM_SYNAPSEAI",
        ]),
        source: "ofiwg/libfabric src/hmem.c (ofi_hmem_init: \"Failed to initialize hmem iface %s\" for each device \
                 memory interface it probes: ZE is Intel's Level Zero, ROCR AMD's, NEURON and SYNAPSEAI other \
                 vendors'; seen in tests/fixtures/nccl-tests-wild on NVIDIA nodes that passed)",
        releases: "not NCCL: libfabric 1.x",
        cause: "libfabric probed device-memory interfaces of other vendors' accelerators and found none: harmless on \
                NVIDIA GPUs",
        hint: "harmless; FI_HMEM=cuda limits the probe to CUDA",
    },
    // ---------------------------------------------------------------- MPI layers
    // ---------------------------------------------------------------- debuggers
    Signature {
        id: "cuda-gdb-api-error",
        category: Category::Cuda,
        stage: Stage::Run,
        severity: Severity::Note,
        scope: Scope::Any,
        what: Match::Phrases(&["Cuda API error detected:"]),
        source: "cuda-gdb's API failure report (set cuda api_failures, default ignore: \"warning: Cuda API error \
                 detected: %s returned (0x%x)\"; guess: text from public logs)",
        releases: "not NCCL: cuda-gdb",
        cause: "cuda-gdb reports every CUDA call that returned an error, the ones the program expects and handles \
                included (cudaDeviceEnablePeerAccess returning 704, peer access already enabled, or 217 between GPUs \
                without P2P, where NCCL falls back): not a failure by itself",
        hint: "harmless unless the run then fails; `set cuda api_failures stop` in cuda-gdb stops at the call",
    },
    Signature {
        id: "hang-stack",
        category: Category::Hang,
        stage: Stage::Run,
        severity: Severity::Hang,
        scope: Scope::Any,
        what: Match::Phrases(&[
            " in testStreamSynchronize",
            " in cudaStreamSynchronize",
            " in cuStreamSynchronize",
            " in sched_yield ()",
        ]),
        source: "gdb's backtrace frames (\"#N 0x… in FUNC (…)\") of a process interrupted or attached while it \
                 waited: NVIDIA/nccl-tests src/common.cu testStreamSynchronize polls cudaStreamQuery and yields \
                 until the collective completes; the CUDA runtime's and driver's stream synchronisation (guess: \
                 frames from public logs)",
        releases: "not NCCL: gdb, nccl-tests, CUDA",
        cause: "the process was stopped while it waited for a GPU stream, in a collective that never completed: a \
                peer that never joined it, or a transport that moves no data (P2P between GPUs broken by PCIe ACS or \
                the IOMMU, a network path that drops packets)",
        hint: "take the same stack on every rank: a rank elsewhere is the one the others wait for; NCCL_P2P_DISABLE=1 \
               (or NCCL_SHM_DISABLE=1) tells a broken intra-node path apart; check ACS (lspci -vvv | grep ACSCtl) \
               and the IOMMU (iommu=pt)",
    },
    Signature {
        id: "cuda-family",
        category: Category::Cuda,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        // Read by its family's marks (`classify::family_finding`), not by phrases.
        what: Match::Phrases(&[]),
        source: "PyTorch c10/cuda/CUDAException (\"CUDA error: %s\" with cudaGetErrorString's text) and its driver-API \
                 check (\"CUDA driver error: %s\"); the CUDA runtime's cudaError_t and the driver's CUresult names",
        releases: "not NCCL: CUDA and PyTorch",
        cause: "a CUDA call failed with an error no signature names (quoted as the evidence): the GPU, its driver or \
                the program, not NCCL's transports",
        hint: "rerun with CUDA_LAUNCH_BLOCKING=1 to see the call; check nvidia-smi, the kernel log (dmesg: NVRM Xid) \
               and that the driver matches the CUDA the program was built for",
    },
    Signature {
        id: "gpu-xid",
        category: Category::Cuda,
        stage: Stage::Device,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&["NVRM: Xid", "GPU has fallen off the bus"]),
        source: "the NVIDIA kernel driver's log line (\"NVRM: Xid (PCI:…): N, …\") documented in NVIDIA's Xid error \
                 catalogue (79: the GPU has fallen off the bus; 48: double-bit ECC; 13/31/43: an application's fault)",
        releases: "not NCCL: the NVIDIA kernel driver",
        cause: "the GPU's driver reported a fault (an Xid) in the kernel log: a GPU off the bus (79), an uncorrectable \
                ECC error (48), or a fault of the program running on it",
        hint: "look the Xid number up in NVIDIA's Xid catalogue; 79 and 48 need the node drained and the GPU \
               checked (nvidia-smi -q, a reset or RMA); run `nccl-smoke isolate` to find the host",
    },
    Signature {
        id: "launch-ssh",
        category: Category::Mpi,
        stage: Stage::Launch,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "ssh: connect to host",
            "Could not resolve hostname",
            "Host key verification failed",
            "Permission denied (publickey",
            "orted: command not found",
            "prted: command not found",
        ]),
        source: "OpenSSH's client (\"ssh: connect to host %s port %s: %s\", \"ssh: Could not resolve hostname %s: %s\", \
                 \"Host key verification failed.\", \"Permission denied (publickey…)\"), which Open MPI's rsh launcher \
                 runs to start orted (PRRTE: prted) on each node, and the remote shell's \"command not found\"",
        releases: "not NCCL: OpenSSH, Open MPI 4.x/5.x",
        cause: "mpirun could not start its daemon on a node over ssh: nothing listens on that node's ssh port (sshd \
                not running, an MPIJob worker not ready), the name does not resolve, the key or host key is refused, \
                or Open MPI is not on the remote PATH",
        hint: "from the launcher, `ssh NODE true` must succeed without a prompt: sshd running on the node (an MPIJob \
               worker's command and readiness probe), the names in the hostfile resolvable, the job's key in \
               ~/.ssh with StrictHostKeyChecking no; and orted on the PATH of a non-interactive shell",
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
    Signature {
        id: "mpi-family",
        category: Category::Mpi,
        stage: Stage::Launch,
        severity: Severity::Fail,
        scope: Scope::Any,
        // Read by its family's marks (`classify::family_finding`), not by phrases.
        what: Match::Phrases(&[]),
        source: "Open MPI's and PRRTE's components print their name in their errors (ORTE_ERROR_LOG, mca_*, btl_*, \
                 pml_*, oob_*, orted, prterun, mpirun, MPI_*), PMIx and Slurm's srun/slurmstepd theirs (open-mpi/ompi \
                 v4.1.x orte/ and opal/ help texts; guess: which words mark the family)",
        releases: "not NCCL: Open MPI 4.x-5.x, PMIx, Slurm",
        cause: "the MPI layer or the launcher (Open MPI, PMIx, Slurm) reported an error no signature names: quoted as \
                the evidence",
        hint: "read the quoted line and the block around it; run a plain MPI hello-world with the same launcher, \
               hosts and environment to tell the launcher's failure from NCCL's",
    },
    Signature {
        id: "mpi-ucx-ucc",
        category: Category::Mpi,
        stage: Stage::Launch,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "UCX  ERROR",
            "UCX ERROR",
            "UCC  ERROR",
            "UCC ERROR",
            "TL_SHM ERROR",
            "TL_UCP ERROR",
            "TL_CUDA ERROR",
            "TL_NCCL ERROR",
            "CL_BASIC ERROR",
            "pml_ucx.c",
        ]),
        source: "openucx/ucx and openucx/ucc log macros (\"[time] [host:pid:tid] file:line UCX  ERROR …\", UCC's \
                 component tags TL_SHM/TL_UCP; guess: formats from public logs)",
        releases: "not NCCL: UCX 1.x, UCC 1.x under Open MPI 4.1+/5.x",
        cause: "Open MPI's UCX transport or UCC collectives failed beside NCCL (UCC's shared-memory team could not \
                attach to a peer's segment, UCX could not reach a peer or register memory)",
        hint: "take UCC out of the job (mpirun -mca coll ^ucc, or UCC_TLS=^shm) or UCX (-mca pml ob1 -mca btl \
               tcp,self); in containers give the ranks one IPC namespace (--ipc=host) and a large /dev/shm",
    },
    Signature {
        id: "mpi-benign",
        category: Category::Mpi,
        stage: Stage::Launch,
        severity: Severity::Note,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "help-btl-vader.txt",
            "vader shared memory BTL will fall back",
            "There was an error initializing an OpenFabrics device",
            "help-mpi-btl-openib.txt",
            "orte_base_help_aggregate",
        ]),
        source: "Open MPI 4.x help texts help-btl-vader.txt (xpmem-make-failed: \"The vader shared memory BTL will fall \
                 back on another single-copy mechanism\") and help-mpi-btl-openib.txt (guess: texts from public logs, \
                 e.g. tests/fixtures/nccl-tests-wild)",
        releases: "not NCCL: Open MPI 4.x",
        cause: "Open MPI's own transports fell back (no xpmem for vader's single copy, an OpenFabrics device its openib \
                BTL could not use): Open MPI's messages only, NCCL's traffic does not go through them",
        hint: "harmless for NCCL; quiet them with -mca btl_vader_single_copy_mechanism none or -mca btl ^openib",
    },
    // ---------------------------------------------------------------- launchers' rendezvous
    Signature {
        id: "gloo-connect",
        category: Category::Bootstrap,
        stage: Stage::Launch,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&["connectFullMesh failed", "gloo/transport/tcp/device.cc"]),
        source: "PyTorch torch/csrc/distributed/c10d/ProcessGroupGloo.cpp (\"Gloo connectFullMesh failed with …\") and \
                 facebookincubator/gloo gloo/transport/tcp/device.cc (an enforce on the two ranks' address families, \
                 ss_family 2 is IPv4 and 10 IPv6): the CPU process group torch and vLLM set up beside NCCL's",
        releases: "not NCCL: PyTorch 1.x-2.x with Gloo",
        cause: "the ranks' Gloo connections (torch's CPU process group, made at init beside NCCL) could not be made: a \
                rank advertised an address the others cannot reach (the loopback from /etc/hosts, a docker bridge), or \
                one rank chose IPv4 and another IPv6",
        hint: "set GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) to the interface that routes between the nodes, and \
               make each host's name resolve to that address, not 127.0.x.x",
    },
    Signature {
        id: "rendezvous",
        category: Category::Bootstrap,
        stage: Stage::Launch,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "DistNetworkError",
            "RendezvousTimeoutError",
            "RendezvousConnectionError",
            "RendezvousClosedError",
            "The client socket has timed out after",
            "Failed to connect to coordination service",
            "coordination service",
            "Barrier timed out",
            "DistStoreError",
            "store based barrier",
            "Socket Timeout",
            "The server socket has failed to listen on any local network address",
            "Error initializing torch.distributed using",
        ]),
        source: "PyTorch torch/csrc/distributed/c10d TCPStore (\"The client socket has timed out after %dms while trying to \
                 connect to (%s, %d)\", DistNetworkError; \"The server socket has failed to listen on any local network \
                 address\" when MASTER_PORT is taken; \"Socket Timeout\" of older releases) and torch.distributed.elastic.rendezvous; JAX/XLA's \
                 coordination service (guess: texts from public logs)",
        releases: "not NCCL: PyTorch 1.x-2.x, JAX",
        cause: "the ranks could not meet at the launcher's rendezvous (torch's TCPStore at MASTER_ADDR:MASTER_PORT, \
                JAX's coordinator) before NCCL started: a wrong or unreachable address, a port in use or blocked, a \
                rank that never started",
        hint: "check MASTER_ADDR/MASTER_PORT (JAX: coordinator_address) from every node (nc -zv ADDR PORT), the \
               firewall between nodes, and that every rank was started",
    },
    Signature {
        id: "ray-unique-id",
        category: Category::Hang,
        stage: Stage::UniqueId,
        severity: Severity::Hang,
        scope: Scope::Any,
        what: Match::Phrases(&["Unable to get the NCCLUniqueID from the store"]),
        source: "ray-project/ray python/ray/util/collective/collective_group/nccl_collective_group.py \
                 (_rendezvous: \"Unable to get the NCCLUniqueID from the store\" after its timeout; the store actor \
                 warns \"The NCCL ID has not been set yet for store …\" at each poll)",
        releases: "not NCCL: Ray 1.x-2.x",
        cause: "the ranks of a Ray collective group waited for rank 0 to publish the NCCL unique id and it never \
                did: rank 0 never created the group (or crashed first), or the actors disagree on the group's name \
                or world size",
        hint: "check that every actor calls create_collective_group / init_collective_group with the same group \
               name and world size, and that rank 0's actor started and is alive (ray logs of that actor)",
    },
    Signature {
        id: "torch-unique-id-store",
        category: Category::Bootstrap,
        stage: Stage::UniqueId,
        severity: Severity::Consequence,
        scope: Scope::Any,
        what: Match::Phrases(&["retrieving ncclUniqueId from"]),
        source: "PyTorch 2.x torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp broadcastUniqueNCCLID (\"[%d] is setting \
                 up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '%s', but \
                 store->get('%s') got error: \" and the store's own error; guess: text from public logs)",
        releases: "not NCCL: PyTorch 2.x",
        cause: "this rank could not fetch the NCCL unique id that rank 0 publishes in the c10d store: rank 0's store \
                went away (rank 0 crashed or exited: 'Connection reset by peer') or rank 0 never published it (it \
                had not reached this communicator's creation: a timeout)",
        hint: "read rank 0's own log first: its failure (or what kept it from creating the same process group) is \
               the cause; check that every rank creates the same groups in the same order",
    },
    Signature {
        id: "mpi-rank-killed",
        category: Category::Mpi,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&["exited on signal 9 (Killed)"]),
        source: "open-mpi/ompi v4.1.x orte/mca/errmgr/base/help-errmgr-base.txt (\"%s noticed that process rank %s \
                 with PID %s on node %s exited on signal %d (%s).\"): the launcher names the first rank that died",
        releases: "not NCCL: Open MPI 4.x-5.x",
        cause: "the launcher reports that this rank was killed (SIGKILL, from outside the process: the kernel's OOM \
                killer, a scheduler's limit, or an operator) and no line of the rank says why",
        hint: "look at that node's kernel log (dmesg: 'Out of memory: Killed process') and the scheduler's record of \
               the job (memory or time limit); the other ranks' errors follow from it",
    },
    // ---------------------------------------------------------------- the host's memory
    Signature {
        id: "host-oom",
        category: Category::Oom,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "out-of-memory handler",
            "oom-kill",
            "oom_kill",
            "Out of memory: Killed process",
            "OOMKilled",
        ]),
        source: "Linux kernel OOM killer and Slurm's cgroup plugin (\"Some of your processes may have been killed by the \
                 cgroup out-of-memory handler\"), Kubernetes' OOMKilled (guess: texts from public logs)",
        releases: "not NCCL",
        cause: "the host (or the job's cgroup) ran out of memory and the kernel killed a rank; the others then see it \
                vanish",
        hint: "raise the job's memory request (--mem, the pod's limit) or lower host memory use (data loader workers, \
               pinned memory); NCCL's own host buffers grow with ranks per node and channels",
    },
];
