//! The second part of the signature table: root causes named by their own phrases, from
//! NCCL's bootstrap and proxy through the networks (InfiniBand, sockets, GPUDirect RDMA) and
//! RAS to init misuse and the MPI layers under the launcher.

use super::finding::{Category, Severity};
use super::signature::{Match, Scope, Signature};
use crate::stage::Stage;

pub(super) const SIGNATURES: &[Signature] = &[
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
    // ---------------------------------------------------------------- InfiniBand / RoCE
    // Ahead of the proxy: an InfiniBand connection is an operation the proxy runs for its rank,
    // and what the proxy says after it failed ("Could not receive type from localRank", "Failed
    // to execute operation Connect") only reports that (observed with the real 2.19.3 over the
    // libibverbs stand-in, tests/fixtures/stand-in-logs).
    // RoCE GID types unreadable: fatal where NCCL prints from net_ib.cc (2.21-2.28), advice
    // from net_ib/connect.cc (2.32.3 goes over sockets); the sources say what was observed.
    Signature {
        id: "net-ib-roce-gid-type",
        category: Category::NetIb,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::PhrasesIn {
            files: &["transport/net_ib.cc"],
            phrases: &["failed in ncclIbRoceGetVersionNum"],
        },
        source: "NVIDIA/nccl v2.21.5-1 … v2.28.9-1 src/transport/net_ib.cc ncclIbRoceGetVersionNum (\"NET/IB: open \
                 failed in ncclIbRoceGetVersionNum: %s\", \"read failed …\"; it reads \
                 /sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d), NCCLCHECK'd by ncclIbGetGidIndex in \
                 ncclIbConnect/ncclIbAccept; observed with the real 2.23.4 and 2.28.9",
        releases: "2.21-2.28",
        cause: "NCCL chooses the RoCE GID index itself (NCCL_IB_GID_INDEX unset) and could not read the GID \
                types from sysfs (/sys/class/infiniband/<hca>/ports/<port>/gid_attrs/types/), so the connection \
                failed: typically a container that does not see the host's /sys/class/infiniband entries",
        hint: "set NCCL_IB_GID_INDEX to the RoCE v2 GID of the interface the job uses (show_gids, or the host's \
               /sys/class/infiniband/<hca>/ports/1/gid_attrs/types/*; often 3), or give the container the \
               host's /sys/class/infiniband",
    },
    Signature {
        id: "net-ib-roce-gid-type-unread",
        category: Category::NetIb,
        stage: Stage::ConnectNet,
        severity: Severity::Advice,
        scope: Scope::Warn,
        what: Match::PhrasesIn {
            files: &["net_ib/connect.cc"],
            phrases: &["failed in ncclIbRoceGetVersionNum"],
        },
        source: "NVIDIA/nccl v2.30.7-1 src/transport/net_ib/connect.cc ncclIbRoceGetVersionNum (same text); observed \
                 with the real 2.32.3 (its ncclIbGidInfoQuery at init): it warns, leaves the RoCE HCA out and \
                 connects via NET/Socket. Guess: 2.29 to 2.31, whose files are the same but which were not run \
                 here, may still fail the connection as 2.28 does (v2.30.7-1 NCCLCHECKs ncclIbGetGidIndex in \
                 ncclIbListen and ncclIbConnect)",
        releases: "2.29-2.32 (2.32.3 observed)",
        cause: "NCCL could not read the RoCE GID types from sysfs \
                (/sys/class/infiniband/<hca>/ports/<port>/gid_attrs/types/) to choose a GID index itself \
                (NCCL_IB_GID_INDEX unset): 2.32 leaves the HCA out and its network goes over sockets, many \
                times slower; releases up to 2.28 fail the connection instead, and a failed run with this line \
                failed for this reason (typically a container that does not see the host's /sys/class/infiniband)",
        hint: "set NCCL_IB_GID_INDEX to the RoCE v2 GID of the interface the job uses (show_gids; often 3), or \
               give the container the host's /sys/class/infiniband",
    },
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
        hint: "NCCL_DMABUF_ENABLE=0 registers through nvidia_peermem instead when it is loaded (else the network \
               goes through host memory, slower); or use a kernel (5.12+), rdma-core/OFED and GPU driver that \
               register dmabuf memory",
    },
    // CUCHECK's "Cuda failure %d '%s'" in transport/net.cc comes only from
    // cuMemGetHandleForAddressRange (v2.19.3-1 lines 766 and 909, v2.30.7-1 sendProxyConnect,
    // recvProxyConnect and the buffer registrations); its CUDACHECK lines print "Cuda failure
    // '%s'" without a number, hence the digits.
    Signature {
        id: "dmabuf-export-failed",
        category: Category::Gdr,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::PhrasesIn {
            files: &["transport/net.cc"],
            phrases: &[
                "Cuda failure 1",
                "Cuda failure 2",
                "Cuda failure 3",
                "Cuda failure 4",
                "Cuda failure 5",
                "Cuda failure 6",
                "Cuda failure 7",
                "Cuda failure 8",
                "Cuda failure 9",
            ],
        },
        source: "NVIDIA/nccl v2.19.3-1 src/transport/net.cc:766,909 (CUCHECK(cuMemGetHandleForAddressRange(…, \
                 CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)) before regMrDmaBuf, when init found DMA-BUF: \
                 \"DMA-BUF is available on GPU device %d\", src/init.cc dmaBufSupported); v2.30.7-1 the same; \
                 the driver-side causes are a guess from NVIDIA's GPU Operator documentation (DMA-BUF with the \
                 open GPU kernel module)",
        releases: "2.16-2.30",
        cause: "the GPU driver would not export this rank's network buffer as a DMA-BUF for the NIC \
                (cuMemGetHandleForAddressRange failed), although NCCL had found DMA-BUF support (driver attribute, \
                kernel and rdma-core): a driver or kernel module without DMA-BUF export for this memory (e.g. the \
                proprietary kernel module where the open one is needed)",
        hint: "NCCL_DMABUF_ENABLE=0 registers through nvidia_peermem instead when it is loaded (else the network \
               goes through host memory, slower); or install the open GPU kernel module of a driver that exports \
               DMA-BUF (nvidia-smi -q | grep -i 'kernel module')",
    },
    Signature {
        id: "net-ib-completion-error",
        category: Category::NetIb,
        stage: Stage::Run,
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
                 len %d, vendor err %d (%s)\", in ncclIbTest: a work request of an operation, hence run; connect \
                 exchanges queue pair numbers over a socket and posts none); v2.30.7-1 src/transport/net_ib/p2p.cc \
                 (\"NET/IB: Got completion from peer %s with status=%s(%d) opcode=%s(%d) vendor_err=%u …\")",
        releases: "2.16-2.30",
        cause: "an InfiniBand/RoCE work request failed on the wire: status 12 (retry exceeded) or 5 (flushed) means the \
                peer's port, a cable, a switch or the RoCE configuration dropped traffic; status 4 (protection error) \
                with vendor err 81 points at GPUDirect RDMA registration (peer memory / ACS / IOMMU)",
        hint: "check the named peer's link (ibstat, ibdiagnet, port counters), NCCL_IB_HCA and NCCL_IB_GID_INDEX (RoCE), \
               and PCIe ACS/IOMMU for GPUDirect; NCCL_IB_RETRY_CNT / NCCL_IB_TIMEOUT only hide a flaky link",
    },
    Signature {
        id: "net-ib-async-fatal",
        category: Category::NetIb,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "async fatal event",
            "Got async event : local work queue catastrophic error",
            "Got async event : local catastrophic error",
            "Got async event : CQ error",
            "Got async event : invalid request local work queue error",
            "Got async event : local access violation work queue error",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/transport/net_ib.cc (ncclIbAsyncThreadMain: \"NET/IB : Got async event : %s\", \
                 the event named by rdma-core's ibv_event_type_str); v2.30.7-1 src/transport/net_ib/common.cc (\"NET/IB : \
                 %s:%d async fatal event on QP (%p) qpn=%u … : %s\", on CQ, and for the device); placed at run: the \
                 thread starts in ncclIbInit, but a work queue or CQ error needs posted work (guess: a device-wide \
                 catastrophic error can come at any time)",
        releases: "2.19-2.30",
        cause: "this rank's HCA raised a fatal asynchronous event: a queue pair, a completion queue or the whole device \
                went into the error state (a local access or protocol error, or an HCA or firmware fault), and every \
                transfer on it fails from then on",
        hint: "check this host's HCA: `ibv_devinfo`, `dmesg` (mlx5_core errors, firmware health) and its firmware \
               version; a queue pair error right after GPU buffers were registered points at GPUDirect RDMA \
               (nvidia_peermem or DMA-BUF, PCIe ACS)",
    },
    // ibv_modify_qp's errno in NCCL's own words (v2.30.7-1 ibvwrap.cc printIbModifyQpHint).
    Signature {
        id: "net-ib-modify-qp-timeout",
        category: Category::NetIb,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Call to ibv_modify_qp failed with error Connection timed out",
            "Call to ibv_modify_qp failed with 110 Connection timed out",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/ibvwrap.cc (\"Call to ibv_modify_qp failed with error %s errno %d\"); \
                 v2.30.7-1 src/misc/ibvwrap.cc (\"Call to ibv_modify_qp failed with %d %s, on dev …\", retried on \
                 ETIMEDOUT from v2.24.3-1, IBV_MQP_RETRY_ERRNO; printIbModifyQpHint: \"In many cases this error \
                 occurs when NICs are not cross-rail connected\"); observed with the real 2.19.3 (fails init) and \
                 2.32.3 (retries, connects) over the libibverbs stand-in",
        releases: "2.16-2.30 (retried from 2.24)",
        cause: "moving a queue pair to the peer timed out (ETIMEDOUT): the HCA found no path to the peer's port, \
                most often NICs on different rails that are not cross-connected (NCCL 2.24 and later retry it \
                before giving up)",
        hint: "NCCL_CROSS_NIC=0 keeps each ring on one rail (NCCL's own hint); check the rail wiring and the \
               switches between the two ports (ibtracert, ibdiagnet)",
    },
    Signature {
        id: "net-ib-modify-qp-einval",
        category: Category::NetIb,
        stage: Stage::ConnectNet,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Call to ibv_modify_qp failed with error Invalid argument",
            "Call to ibv_modify_qp failed with 22 Invalid argument",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/ibvwrap.cc (\"Call to ibv_modify_qp failed with error %s errno %d\"); \
                 v2.30.7-1 src/misc/ibvwrap.cc (\"… failed with %d %s, on dev %s:%d, curr state %s, next state %s, \
                 local GID index %d …\"; printIbModifyQpHint: \"In many cases this error occurs when the incorrect \
                 GID index is forced by NCCL_IB_GID_INDEX\"); observed with the real 2.19.3 and 2.32.3",
        releases: "2.16-2.30",
        cause: "the HCA refused the queue pair's address (EINVAL), most often a GID index forced by \
                NCCL_IB_GID_INDEX that this port does not have or that the peer does not share",
        hint: "unset NCCL_IB_GID_INDEX (or -1 from 2.21) for NCCL's own choice, or set it to the RoCE v2 GID both \
               ends have (show_gids); check the port's MTU and the peer's link layer (ibv_devinfo)",
    },
    Signature {
        id: "net-ib-device-init",
        category: Category::NetIb,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "NET/IB : Unable to open device",
            "NET/IB : Unable to query",
            "NET/IB : No IP interface found",
            "Call to ibv_open_device failed",
            "Call to ibv_get_device_list failed",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/transport/net_ib.cc ncclIbInit (\"NET/IB : No IP interface found.\", \
                 \"NET/IB : Unable to open device %s\", \"NET/IB : Unable to query device %s\", \"… query port %d\") and \
                 src/misc/ibvwrap.cc (\"Call to %s failed\" for ibv_open_device, ibv_get_device_list); v2.30.7-1 \
                 src/transport/net_ib/init.cc the same: the network's init, inside ncclCommInitRank",
        releases: "2.4-2.30",
        cause: "NCCL could not open or query an InfiniBand/RoCE device while it listed the host's NICs at init: \
                the device node is missing in the container (/dev/infiniband), the port is not initialised, or \
                the HCA's driver is not loaded",
        hint: "ibv_devinfo inside the container must list the HCA and its ports (Kubernetes: the RDMA device \
               plugin's resource, or a privileged pod); NCCL_IB_HCA picks the devices to use; NCCL_IB_DISABLE=1 \
               falls back to sockets to confirm",
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
            "Attempted to connect incompatible devices",
            "device is incompatible with the local",
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
];
