//! The last part of the signature table: wrappers' words, hangs, consequences, generic proxy and
//! CUDA phrases, advice and benign notes.

use super::finding::{Category, Severity};
use super::signature::{Match, Scope, Signature};
use crate::stage::Stage;

pub(super) const SIGNATURES: &[Signature] = &[
    // ---------------------------------------------------------------- a process that crashed
    Signature {
        id: "bus-error",
        category: Category::Shm,
        stage: Stage::ConnectShm,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "] Caught signal 7 ",
            "Bus error (core dumped)",
            "Signal: Bus error",
            "Unexpected bus error encountered",
            "insufficient shared memory (shm)",
        ]),
        source: "not NCCL: a process killed by SIGBUS, as UCX (\"[host:pid :0:tid] Caught signal 7 (Bus error: …)\"), \
                 Open MPI's opal backtrace (\"Signal: Bus error (7)\"), the shell and PyTorch's DataLoader \
                 (\"ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared \
                 memory (shm)\") report it (guess: texts from public logs). On x86 Linux a user process gets SIGBUS \
                 for a page of a mapped file the kernel cannot back (mmap(2)): a tmpfs (/dev/shm) that is full. \
                 NCCL maps its shared-memory transport's segments from /dev/shm (src/misc/shmutils.cc; \
                 posix_fallocate since v2.4.8-1 catches a full /dev/shm at creation, not pages another \
                 process's use takes later)",
        releases: "any",
        cause: "the process died on SIGBUS: a shared-memory page (/dev/shm, NCCL's SHM transport or the \
                framework's own workers) that the kernel could not back, almost always a /dev/shm too small \
                for the job (Docker's default is 64 MB)",
        hint: "give the container a larger /dev/shm (docker run --shm-size=…, or --ipc=host; in Kubernetes a \
               memory-backed emptyDir at /dev/shm); `nccl-smoke doctor --local-ranks N` checks its size",
    },
    Signature {
        id: "crash",
        category: Category::Run,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "*** Process received signal ***",
            "] Caught signal 11",
            "] Caught signal 4 ",
            "Signal: Segmentation fault",
            "Fatal Python error: Segmentation fault",
            "Segmentation fault (core dumped)",
            "(SIGSEGV) received by PID",
        ]),
        source: "not NCCL: the crash reports of the layers around it: Open MPI's opal backtrace \
                 (\"[host:pid] *** Process received signal ***\", \"Signal: Segmentation fault (11)\"), UCX's \
                 (\"[host:pid :0:tid] Caught signal 11 (Segmentation fault: …)\"), CPython's faulthandler, the shell, \
                 torchelastic (\"Signal 11 (SIGSEGV) received by PID\") (guess: texts from public logs). The process's \
                 last NCCL line before it places the crash (explain's reader)",
        releases: "any",
        cause: "the process died on a signal (a segmentation fault, bus error, illegal instruction, or an abort: the \
                crash report's next lines name it) and no line names why",
        hint: "get the crash's stack (ulimit -c unlimited, or gdb -batch -ex bt on the core); rerun with \
               NCCL_DEBUG=INFO to see NCCL's last step before it; a crash inside libnccl is worth a report with \
               that stack and the NCCL version",
    },
    // ---------------------------------------------------------------- an earlier error, not named
    Signature {
        id: "comm-async-error",
        category: Category::NcclError,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Attempt to use communicator before the previous operation returned ncclSuccess",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 to v2.30.7-1 src/init.cc ncclCommEnsureReady: every collective checks the \
                 communicator's asynchronous error first, and prints this when it is not ncclSuccess (an earlier \
                 operation failed, or a non-blocking init or call has not finished: ncclInProgress)",
        releases: "2.14-2.30",
        cause: "the communicator already held an error from an earlier operation (an asynchronous failure, or a \
                non-blocking call not finished), so NCCL refused this one: the first failure happened before, and no \
                line in this log names it",
        hint: "look for the first WARN of this rank (and of its peers) before this line; rerun with NCCL_DEBUG=WARN \
               in every rank; with non-blocking communicators, poll ncclCommGetAsyncError until it leaves \
               ncclInProgress before the next call",
    },
    // ---------------------------------------------------------------- wrappers' words
    Signature {
        id: "nccl-tests-cuda",
        category: Category::Cuda,
        stage: Stage::Device,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&["Test CUDA failure"]),
        source: "NVIDIA/nccl-tests src/common.h CUDACHECK (\"%s: Test CUDA failure %s:%d '%s'\", the host, the \
                 test's own file and line, and cudaGetErrorString's text): a CUDA runtime call of the test itself \
                 (cudaSetDevice, cudaMalloc, cudaStreamCreate, cudaDeviceSynchronize), not one inside NCCL",
        releases: "not NCCL: nccl-tests 2.x",
        cause: "a CUDA call of nccl-tests itself failed, with the CUDA error quoted at the end of the line: before the \
                results table, the GPU could not be used at all (no device node or nvidia_uvm module in a \
                container, a driver that does not match, a device index the host does not have)",
        hint: "run nvidia-smi and a one-line CUDA program in the same container and allocation; under Slurm/pyxis \
               or Kubernetes check that the GPUs and /dev/nvidia-uvm are passed in (modprobe nvidia_uvm on the host)",
    },
    // NCCL's result codes that name their cause by themselves (ncclResult_t, src/nccl.h.in):
    // ncclInvalidArgument (4) and ncclInvalidUsage (5) are the caller's; placed above the generic
    // codes so that a wrapper's line that quotes one ("Test NCCL failure … 'invalid usage'") is
    // read by it. ncclUnhandledCudaError (1) stays generic: measured as its own CUDA finding, it
    // lost a held-out log, and the thread's cause was as often NCCL's as the driver's.
    Signature {
        id: "wrapper-invalid-usage",
        category: Category::Init,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "invalid usage (run with NCCL_DEBUG",
            "invalid argument (run with NCCL_DEBUG",
            ", invalid usage, NCCL version",
            ", invalid argument, NCCL version",
            "failed: invalid usage",
            "failed: invalid argument",
            "'invalid usage'",
            "'invalid argument'",
            "ncclInvalidUsage",
            "ncclInvalidArgument",
            "NCCL Error 4:",
            "NCCL Error 5:",
            "Reason=4:invalid argument",
            "Reason=5:invalid usage",
        ]),
        source: "NVIDIA/nccl src/nccl.h.in (ncclInvalidArgument = 4, ncclInvalidUsage = 5) and src/init.cc \
                 ncclGetErrorString (\"invalid argument\", \"invalid usage\", v2.4.8-1 to v2.30.7-1, with \" (run with \
                 NCCL_DEBUG=WARN for details)\" from 2.16), as PyTorch, XLA and nccl-tests quote them, and RAPIDS \
                 RAFT's RAFT_NCCL_TRY (\"call='…', Reason=4:invalid argument\", guess: the format from a public log)",
        releases: "2.4-2.30 (error string)",
        cause: "NCCL refused how it was called (ncclInvalidArgument / ncclInvalidUsage), and no line in this log says \
                what it refused: ranks that disagree on the communicator (a rank outside 0..nranks-1, two ranks on one \
                GPU, different unique ids), a bad buffer, count or datatype, or calls in an order NCCL forbids",
        hint: "rerun with NCCL_DEBUG=WARN in every rank's environment: NCCL's WARN names the argument it refused; \
               check that each rank's device, rank and world size come from the launcher (LOCAL_RANK, RANK, \
               WORLD_SIZE) and that all ranks run the same collective sequence",
    },
    Signature {
        id: "wrapper-nccl-error",
        category: Category::NcclError,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "unhandled system error",
            "unhandled cuda error",
            "ncclUnhandledCudaError",
            "NCCL Error 1:",
            "internal error - please report this issue",
            ", internal error, NCCL version",
            "failed: internal error",
            "'internal error'",
            "ncclInternalError",
            "ncclSystemError",
            "Test NCCL failure",
            "NCCL failure common.cu",
            "NCCL Error 2:",
            "NCCL Error 3:",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/init.cc ncclGetErrorString (\"unhandled system error\", \"unhandled cuda error\", \
                 \"internal error\", \"invalid usage (run with NCCL_DEBUG=WARN for details)\"; v2.4.8-1 to v2.14.3-1 \
                 print \"internal error\", \"invalid usage\", \"invalid argument\" bare, matched only where a wrapper \
                 quotes them: PyTorch's \", NCCL version\", XLA's \"failed: \", nccl-tests' quotes); PyTorch torch/csrc/distributed/c10d NCCLUtils (\"NCCL error in: …\", guess: from public \
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
            "Heartbeat monitor timed out",
            "failure detected by watchdog at work sequence id",
            "ProcessGroupNCCL's watchdog got stuck",
            "waiting for remainder of ranks",
            "Stalled ops:",
            "Caught collective operation timeout",
            "milliseconds before timing out",
            "DUE TO TIME LIMIT",
            "No available shared memory broadcast block found",
            "Test timeout",
            "NCCL timeout",
            "timed out after",
        ]),
        source: "PyTorch 1.x torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (\"[Rank %d] Caught collective operation timeout: \
                 WorkNCCL(…) ran for %d milliseconds before timing out\"), Horovod's stall inspector (\"waiting for \
                 remainder of ranks\", \"Stalled ops\"), Slurm's slurmstepd (\"CANCELLED AT … DUE TO TIME LIMIT\"), vLLM's \
                 shm_broadcast (\"No available shared memory broadcast block found in %d second\") (guess: texts from public \
                 logs); PyTorch 2.x (\"Watchdog caught collective operation timeout: \
                 WorkNCCL(SeqNum=…, OpType=…) ran for N milliseconds before timing out\", \"failure detected by watchdog at work \
                 sequence id: %d\", and \"Heartbeat monitor timed out!\" \
                 when the watchdog thread itself stopped beating, stuck in a CUDA or NCCL call; guess: from public logs); \
                 nccl-tests (\"Test timeout\", guess)",
        releases: "not NCCL: PyTorch 1.x-2.x",
        cause: "a collective did not complete: some rank never joined it (stuck in other code, crashed, or behind on \
                an earlier operation) or a link stopped moving data",
        hint: "the ranks that fell silent first are the suspects: look at their last operation and at their host \
               (GPU errors in dmesg/nvidia-smi, Xid); NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=COLL logs each operation",
    },
    Signature {
        id: "ras-count-mismatch",
        category: Category::Hang,
        stage: Stage::Run,
        severity: Severity::Hang,
        scope: Scope::Any,
        what: Match::Phrases(&["Communicator ranks have different "]),
        source: "NVIDIA/nccl v2.26.2-1, v2.30.7-1 src/ras/client_support.cc (rasClientRunComms: \"  Communicator ranks \
                 have different %s operation counts\", under a communicator whose status column says MISMATCH)",
        releases: "RAS 2.24-2.30",
        cause: "NCCL's RAS found the ranks of one communicator at different counts of the same collective while it \
                ran: the ranks with the lower count never joined the next operation, and the others wait for them",
        hint: "the ranks at the lower count are the suspects (RAS lists them with their hosts below that line): \
               look at what those processes do (py-spy dump, gdb bt) and at their host (dmesg, Xid)",
    },
    // nccl-tests' footer for wrong values (read by explain, which builds this finding itself).
    Signature {
        id: "nccl-tests-wrong-data",
        category: Category::WrongData,
        stage: Stage::Verify,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[]),
        source: "NVIDIA/nccl-tests src/util.cu (\"# %-20s : %d %s\", \"Out of bounds values\", errors, \"FAILED\")",
        releases: "nccl-tests 2.x",
        cause: "the collectives completed but delivered wrong values (the #wrong column counts them per size): \
                a GPU, NVLink or NIC corrupting data, or a bug in the NCCL build or its plugin",
        hint: "the rows with #wrong > 0 name the sizes; rerun on subsets of hosts (`nccl-smoke isolate`) to find the \
               host or link; check dmesg for Xid 48/63/64/74/79 and the NICs' error counters",
    },
    // Connect retries a log ends in (read by explain, which builds this finding itself).
    Signature {
        id: "connect-retries",
        category: Category::Bootstrap,
        stage: Stage::Init,
        severity: Severity::Fail,
        scope: Scope::Info,
        what: Match::Phrases(&[]),
        source: "NVIDIA/nccl v2.4.8-1 … v2.19.3-1 src/misc/socket.cc / include/socket.h (\"Call to connect returned %s, \
                 retrying\"), v2.19.3-1 … v2.30.7-1 socketPollConnect (\"socketPollConnect: connect returned %s, retrying \
                 (%d/%d) after sleep for %d msec\"): INFO lines, so a log can end in them with no WARN",
        releases: "2.4-2.30",
        cause: "a rank kept retrying to connect to another rank's address and the log ends there: that address is not \
                reachable from this host (NCCL_SOCKET_IFNAME=lo or a container-only interface across nodes, a \
                firewall, the wrong interface picked) or the other rank never started",
        hint: "check the address in NCCL's 'Bootstrap : Using' line on every host: it must be one the other hosts \
               reach; set NCCL_SOCKET_IFNAME to that interface; open the ports between the hosts",
    },
    // ---------------------------------------------------------------- consequences
    // The proxy thread relays the failure of an operation it ran for a local rank: a peer's
    // (a connection closed under it) or its own transport's, which the process's error-return
    // traces then name (`transport/net_ib.cc:664 -> 2` after it); alone it says no more than
    // that a peer may have failed.
    Signature {
        id: "proxy-relay",
        category: Category::RemoteError,
        stage: Stage::Run,
        severity: Severity::Consequence,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "Failed to execute operation",
            "Error encountered progressing operation",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/proxy.cc (\"[Proxy Service %d] Failed to execute operation %s from rank %d, \
                 retcode %d\", \"[Service thread] Error encountered progressing operation=%s, res=%d, closing \
                 connection\")",
        releases: "2.12-2.30",
        cause: "NCCL's proxy thread could not finish an operation (Connect, Setup) for a rank of this process, and no \
                line of this process names why: a peer that failed or exited first is the usual reason",
        hint: "read the log of the peer this rank connects to (or the first rank that failed); rerun with \
               NCCL_DEBUG=INFO to see the transport's own error-return trace after this line",
    },
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
            "commReclaim: cleanup comm",
            "Comm %p is in abort state",
            "is in abort state",
            "peer closed",
            "MPI_ABORT was invoked",
            "An MPI communication peer process has unexpectedly disconnected",
            "exited with non-zero status",
            "ChildFailedError",
            "mpirun noticed that process rank",
            "mpirun has exited due to process rank",
            "terminated normally, but 1 process returned",
            "ActorDiedError",
            "The actor died unexpectedly",
            "Exited with exit code",
        ]),
        source: "NVIDIA/nccl v2.19.3-1 src/misc/socket.cc (\"socketProgress: Connection closed by remote peer %s\"), \
                 src/proxy.cc (\"[Proxy Service %d] Failed to execute operation %s from rank %d, retcode %d\", \"Socket recv \
                 failed while polling for opId=%p\"), src/init.cc ncclGetErrorString (ncclRemoteError); torchrun's \
                 ChildFailedError and Ray's ActorDiedError / \"The actor died unexpectedly\" (guess: texts from public logs); \
                 SchedMD/slurm srun (\"srun: error: %s: task %s: Exited with exit code %d\")",
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
    // The sockets transport never has GPUDirect RDMA: its "Disabled" is no advice (a note,
    // placed first so that it outranks the advice below).
    Signature {
        id: "note-socket-no-gdr",
        category: Category::NetSocket,
        stage: Stage::Run,
        severity: Severity::Note,
        scope: Scope::Info,
        what: Match::Phrases(&["NET/Socket : GPU Direct RDMA Disabled"]),
        source: "NVIDIA/nccl v2.19.3-1 src/graph/topo.cc (\"NET/%s : GPU Direct RDMA %s for HCA %d '%s'\", INFO, \
                 printed for every network, sockets included); v2.30.7-1 src/graph/topo.cc",
        releases: "2.19-2.30",
        cause: "NCCL's sockets transport reports GPUDirect RDMA as disabled, as it always is for sockets",
        hint: "nothing to do for sockets; InfiniBand/RoCE needs NCCL_IB_HCA to select an active HCA",
    },
    Signature {
        id: "gdr-disabled",
        category: Category::Gdr,
        stage: Stage::Run,
        severity: Severity::Advice,
        scope: Scope::Info,
        what: Match::Phrases(&["GPU Direct RDMA Disabled"]),
        source: "NVIDIA/nccl v2.19.3-1 src/graph/topo.cc (\"NET/%s : GPU Direct RDMA %s for HCA %d '%s'\", INFO) and \
                 src/graph/paths.cc (\"GPU Direct RDMA Disabled for GPU %lx / HCA %d (distance %d > %d)\", INFO); \
                 gdrSupport is the peer-memory check or DMA-BUF (topo.cc)",
        releases: "2.16-2.30",
        cause: "NCCL moves network data without GPUDirect RDMA (through host memory), so inter-node bandwidth \
                is low: NCCL found neither a peer-memory module where it looks (before 2.23.4 only the \
                /sys/kernel/mm/memory_peers/ paths, missing a loaded nvidia_peermem) nor DMA-BUF (driver, kernel \
                and rdma-core support, NCCL_DMABUF_ENABLE not 0), or the GPU and HCA are further apart than \
                NCCL_NET_GDR_LEVEL allows",
        hint: "`nccl-smoke doctor` on the node says which, for this NCCL; load nvidia_peermem with NCCL >= 2.23.4, \
               or use DMA-BUF (kernel 5.12+, rdma-core 34+, the open GPU kernel module); check NCCL_NET_GDR_LEVEL \
               and NCCL_IB_HCA",
    },
    // ---------------------------------------------------------------- benign notes
    Signature {
        id: "note-rma-socket-no-gdrcopy",
        category: Category::NetSocket,
        stage: Stage::Init,
        severity: Severity::Note,
        scope: Scope::Any,
        what: Match::Phrases(&["rma_socket requires GDRCopy"]),
        source: "observed in the 2.32.3 wheel's log (transport/rma_socket.cc:32, ncclRmaSocketProxyInit: \
                 \"RMA/Socket : rma_socket requires GDRCopy; and GDR Copy is not available\"), printed by \
                 every run on a host without GDRCopy; its tag is not in the source read, so benign is a guess",
        releases: "2.32",
        cause: "NCCL's RMA-over-sockets transport is off without GDRCopy; nothing else changes",
        hint: "nothing to do unless that transport is wanted (install GDRCopy)",
    },
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
            "requires GDRCopy; and GDR Copy is not available",
        ]),
        source: "NVIDIA/nccl 2.32.3 wheel, transport/rma_socket.cc:32 (\"RMA/Socket : rma_socket requires GDRCopy; and GDR \
                 Copy is not available\", a WARN printed on every healthy 2.32.3 run without GDRCopy, seen in \
                 tests/fixtures/stand-in-logs); NVIDIA/nccl v2.19.3-1 src/misc/ibvwrap.cc (\"Failed to open libibverbs.so[.1]\"), src/transport/net_ib.cc \
                 (\"NET/IB : No device found.\"), src/nccl_net / plugin loading messages",
        releases: "2.16-2.30",
        cause: "NCCL looked for an optional library or device and did without it (no InfiniBand on this node, no net \
                plugin): harmless unless you expected InfiniBand",
        hint: "ignore unless the job should use InfiniBand/RoCE; then install rdma-core (libibverbs) in the image",
    },
];
