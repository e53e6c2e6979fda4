//! From a failed step to its likely cause and what to try: plain functions of who failed, the
//! error, and the facts of the node, so that every mapping is testable without a running rank.
//! The worker's failures are here; the supervisor's (a hang, a crash, a stop) in [`ends`].

pub mod data;
pub mod ends;

use super::classify;
use crate::comm::CommError;
use crate::error::{Failure, Kind, Who};
use crate::ffi::cuda::{self, CudaError};
use crate::ffi::nccl::NcclError;
use crate::stage::{PEER_MARGIN, Stage};
use std::time::Duration;

pub use data::{coverage_failure, timer_failure, verify_failures};
pub use ends::{Hang, crashed, ended_by_rank0, hung, rank0_gone, stopped_by_launcher};

/// Facts of this node that bear on a finding.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeFacts {
    /// The CUDA driver's and NCCL's versions, once known.
    pub cuda: Option<String>,
    pub nccl: Option<String>,
    /// `/dev/shm`: total and free bytes (`None`: it is missing).
    pub shm: Option<(u64, u64)>,
}

impl NodeFacts {
    /// This node's facts, with the versions the run has learnt.
    pub fn here(cuda: Option<String>, nccl: Option<String>) -> NodeFacts {
        NodeFacts {
            cuda,
            nccl,
            shm: crate::ffi::os::fs_space("/dev/shm"),
        }
    }
}

/// libnccl could not be loaded, or is too old.
pub fn nccl_load_failure(who: &Who, e: &NcclError) -> Failure {
    let f = Failure::new(Stage::NcclLoad, who, e);
    match e {
        NcclError::NotFound { .. } => f
            .cause("libnccl could not be loaded from that path or the library search path")
            .hint("install NCCL (e.g. the nvidia-nccl-cu12 wheel), or point --nccl-lib / NCCL_SMOKE_NCCL_LIB at libnccl.so.2"),
        NcclError::MissingSymbol { .. } => f
            .cause("this libnccl is older than nccl-smoke supports")
            .hint("use NCCL 2.7.3 or newer (--nccl-lib)"),
        NcclError::Call { .. } => f,
    }
}

/// The CUDA driver library could not be loaded or initialised.
pub fn driver_failure(who: &Who, e: &CudaError) -> Failure {
    let f = Failure::new(Stage::Driver, who, e);
    if matches!(e, CudaError::TwoDrivers { .. }) {
        return f
            .cause("cudarc bound a different CUDA driver library from the one nccl-smoke and NCCL use")
            .hint("remove the CUDA toolkit's stubs/ folder (or the second driver) from LD_LIBRARY_PATH: the driver libcuda.so.1 of the node's NVIDIA install must be the only one found");
    }
    match e.code_name() {
        None => f
            .cause(format!(
                "no usable NVIDIA driver library ({}) on this node or in this container",
                cuda::DRIVER_SONAME
            ))
            .hint("install the NVIDIA driver; in a container, run with the NVIDIA container toolkit \
                   (--gpus all / runtimeClassName: nvidia) so the driver library is mounted"),
        Some("CUDA_ERROR_NO_DEVICE") => f
            .cause("the driver sees no GPU")
            .hint("check CUDA_VISIBLE_DEVICES and that the container/pod was given GPUs (nvidia-smi -L)"),
        Some("CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE" | "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH") => f
            .cause("the user-space driver library does not match the kernel module")
            .hint("make the container's libcuda match the host driver (NVIDIA container toolkit), or reboot after a driver upgrade"),
        Some(_) => f.hint("nvidia-smi and dmesg show the driver's state"),
    }
}

/// NCCL's CUDA runtime asked nccl-smoke's stand-in driver for export tables (`tables`, as
/// `sim_driver_lacking` names them) that it lacks. When NCCL then failed with a CUDA error
/// (`ncclUnhandledCudaError`, a `Cuda failure` WARN), that follows from the missing table, so
/// it is the cause whatever the step (cudart asks for the tables when it first initialises,
/// FACTS.md); NCCL's own error stays the failure's error. Any other failure only gets the
/// fact as evidence: the runtime went on without the table (the 2.19.3 wheel's cudart goes on
/// without CONTEXT_CHECKS, and the run then fails at verify as every run on the stand-in does).
pub fn lacking_tables(f: Failure, tables: &str) -> Failure {
    let cuda_failed = std::iter::once(&f.error)
        .chain(&f.evidence)
        .any(|l| l.contains("UnhandledCudaError") || l.contains("Cuda failure"));
    let mut f = if cuda_failed {
        f.cause(format!(
            "NCCL's CUDA runtime asked nccl-smoke's stand-in CUDA driver for export table(s) it \
             lacks: {tables}; this libnccl's runtime is newer than the stand-in knows, so the \
             failure says nothing about NCCL"
        ))
        .hint(
            "run a release the stand-in was checked with (the nvidia-nccl-cu12 wheels 2.19.3 to \
             2.32.3), or teach sim/cuda the table: its slots as ZLUDA's dark_api documents them, \
             found with NCCL_SMOKE_SIM_CUDA_TRACE=1",
        )
    } else {
        f
    };
    f.evidence.push(format!(
        "simulated CUDA driver: cuGetExportTable was asked for {tables} and answered \
         CUDA_ERROR_INVALID_VALUE{}",
        if cuda_failed {
            ""
        } else {
            "; NCCL's CUDA runtime went on without it"
        }
    ));
    f
}

/// Ranks of the job share a GPU where this NCCL does not allow it: named before init, with the
/// ranks and hosts, instead of NCCL's "Duplicate GPU detected" from inside init (rank 0, which
/// has every rank's device).
pub fn shared_gpu_failure(
    who: &Who,
    shared: &[crate::diagnose::preflight::SharedGpu],
    nccl_version: &str,
) -> Failure {
    let list: Vec<String> = shared.iter().map(ToString::to_string).collect();
    let from = crate::diagnose::preflight::SHARED_GPU_FROM.1;
    Failure::new(Stage::Device, who, list.join("; "))
        .cause(format!(
            "more than one rank on a GPU: NCCL {nccl_version} refuses that at init (\"Duplicate \
             GPU detected\", src/init.cc); only NCCL {from} and later allow it, with \
             NCCL_MULTI_RANK_GPU_ENABLE=1"
        ))
        .hint(
            "start one rank per GPU (mpirun -np / srun --ntasks-per-node = GPUs per node, \
             --gpus-per-task=1), or bind each local rank to its own GPU (CUDA_VISIBLE_DEVICES from \
             the local rank, or --device)",
        )
}

/// `-d` names a type this NCCL does not have (the 8-bit floats before 2.24), said before
/// NCCL is asked to move it (it would answer `ncclInvalidArgument`, "invalid type").
pub fn type_too_new(
    who: &Who,
    dtype: crate::elements::DataType,
    nccl_version: &str,
    since: i32,
) -> Failure {
    let since = crate::ffi::nccl::version_string(since);
    Failure::new(
        Stage::NcclLoad,
        who,
        format!("-d {}: NCCL {nccl_version} has no such type", dtype.name()),
    )
    .cause(format!(
        "the 8-bit float types (ncclFloat8e4m3, ncclFloat8e5m2) came with NCCL {since} \
         (src/nccl.h.in, v2.24.3-1)"
    ))
    .hint(format!(
        "use NCCL {since} or later (--nccl-lib PATH), or another -d"
    ))
}

/// An 8-bit float reduction on a GPU before Hopper: NCCL refuses it at enqueue ("FP8
/// reduction support begins with sm90 capable devices.", `taskAppend`, `src/enqueue.cc`
/// v2.24.3-1 to v2.28.9-1), so it is named before init, with the GPU. Copies of 8-bit floats
/// (all-to-all, send/recv) work on any GPU, and still run.
pub fn fp8_reduction_unsupported(
    who: &Who,
    dtype: crate::elements::DataType,
    pattern: &str,
    gpu: &crate::ffi::cuda::DeviceInfo,
) -> Failure {
    let (major, minor) = gpu.compute_capability.unwrap_or((0, 0));
    Failure::new(
        Stage::Device,
        who,
        format!(
            "-d {} with {pattern}: GPU {} ({}, {}) has compute capability {major}.{minor}",
            dtype.name(),
            gpu.ordinal,
            gpu.name,
            gpu.uuid
        ),
    )
    .cause(
        "NCCL reduces 8-bit floats only on compute capability 9.0 (Hopper) and later (\"FP8 \
         reduction support begins with sm90 capable devices.\", src/enqueue.cc)",
    )
    .hint(
        "leave the reducing patterns out of --patterns for this type (all-to-all and send/recv \
         copy 8-bit floats on any GPU), or run on Hopper or later",
    )
}

/// `ncclGetUniqueId` failed (rank 0): `log` is this process's NCCL WARN lines, whose words
/// name the cause when a signature knows them (NCCL's "Bootstrap : no socket interface
/// found", `bootstrapNetInit` in `src/bootstrap.cc` v2.19.3-1 and v2.28.3-1, is the usual
/// one); otherwise the hint says what the call needs.
pub fn unique_id_failure(who: &Who, e: &NcclError, log: Vec<String>) -> Failure {
    let mut f = Failure::new(Stage::UniqueId, who, e);
    f.evidence = log;
    match finding(&mut f) {
        Some(found) => f.cause(found.cause).hint(found.hint),
        None => {
            f.hint("ncclGetUniqueId needs a usable network interface: check NCCL_SOCKET_IFNAME")
        }
    }
}

/// What NCCL's words in `f`'s error and evidence amount to, if a signature knows them; the
/// line that matched is put first in the evidence (unless it is there already, or is the
/// error itself).
fn finding(f: &mut Failure) -> Option<classify::Finding> {
    let lines = std::iter::once(f.error.as_str()).chain(f.evidence.iter().map(String::as_str));
    let found = classify::classify(lines)?;
    if !f.evidence.contains(&found.evidence) && found.evidence != f.error {
        f.evidence.insert(0, found.evidence.clone());
    }
    Some(found)
}

/// The cause of a completion error on this rank: the network path between it and the peer it
/// names (rdma-core's `ibv_wc_status`; NCCL's WARN in src/transport/net_ib.cc v2.19.3-1,
/// src/transport/net_ib/p2p.cc v2.30.7-1).
fn path_cause(f: Failure, p: &classify::codes::PathFault) -> Failure {
    let peer = p.peer.as_deref().unwrap_or("the peer NCCL's line names");
    let (status, name, meaning) = (p.status, p.name, p.meaning);
    let host = f.host.clone();
    f.cause(format!(
        "the network path between this rank (host {host}) and peer {peer} failed: this rank's HCA \
         completed a work request with {name} ({status}): {meaning}; a fault on that path (a port, \
         cable or switch, the RoCE fabric's settings) or in the peer's HCA, not this rank's \
         process (if the peer's rank failed on its own, its line names why)"
    ))
    .hint(format!(
        "check both ends of the path to {peer}: `ibstat` (port state, rate), the ports' error \
         counters (`perfquery`, `ibqueryerrors`), the cable and the switch between them, and for \
         RoCE the GID index, PFC and ECN settings; NCCL_IB_TIMEOUT and NCCL_IB_RETRY_CNT only \
         hide a flaky link"
    ))
}

/// NCCL's refusal of every call after an earlier asynchronous error (`ncclCommEnsureReady`,
/// src/init.cc v2.19.3-1) says nothing of its own: `error` names the earlier error beside it.
fn annotate_refusal(error: &str, first: &str) -> String {
    const REFUSAL: &str =
        "Attempt to use communicator before the previous operation returned ncclSuccess";
    if !error.contains(REFUSAL) || first.contains(REFUSAL) {
        return error.to_string();
    }
    error.replacen(
        REFUSAL,
        &format!(
            "{REFUSAL} (NCCL's refusal after an earlier error: {})",
            first.trim()
        ),
        1,
    )
}

/// A failure caused by a peer going away first (its sockets closed; a wait that ran out while a
/// peer closed its connections): that peer's own verdict names the cause.
pub fn peer_first(f: &Failure) -> bool {
    f.kind == Kind::PeerGone && !f.own_evidence
}

/// A communicator failure in `stage` (init, connect, run, finalize), with "connect" split by
/// NCCL's own words: `deadline` is the stage's, `log` this process's NCCL WARN lines. The
/// probes that repeat the step (a /dev/shm segment, a TCP reach) are the caller's to add.
pub fn comm_failure(
    who: &Who,
    stage: Stage,
    e: &CommError,
    deadline: Duration,
    log: Vec<String>,
    node: &NodeFacts,
) -> Failure {
    let mut f = Failure::new(stage, who, e);
    if let CommError::Timeout { what, after_s, .. } = e {
        // The user set the deadline; say how the wait's limit was made of it.
        let deadline = deadline.as_secs_f64();
        f.error = format!(
            "{what} did not complete within {after_s:.1} s (the {stage} deadline of {deadline} s, \
             + {:.1} s for a stuck peer to report first{}); the communicator was aborted",
            PEER_MARGIN.as_secs_f64(),
            if *after_s > deadline + PEER_MARGIN.as_secs_f64() + 0.05 {
                ", + the time this size's iterations are expected to take"
            } else {
                ""
            }
        );
    }
    f.evidence = log;
    f.kind = Kind::read(&f.error, &f.evidence);
    // This rank's own log may show it failed first (out of file descriptors, say) while the
    // call it made returned only what its peers did next.
    let own = classify::classify(f.evidence.iter().map(String::as_str));
    // The rank's own HCA going into error (a fatal asynchronous event) is its own failure too.
    f.own_evidence = own.is_some_and(|x| {
        x.severity == classify::Severity::Fail
            && (x.category.is_local() || x.signature == "net-ib-async-fatal")
    });
    // A work completion that failed on the wire is this rank's own HCA reporting the path to a
    // peer it names (NCCL's `Got completion from peer … with error 12`, then ncclRemoteError):
    // nothing says the peer exited; the path between the two did not deliver.
    // A flushed request (5) only follows an earlier error on its queue pair: any other first.
    let faults: Vec<_> = std::iter::once(&f.error)
        .chain(&f.evidence)
        .filter_map(|l| classify::codes::path_fault(l))
        .collect();
    let path = faults
        .iter()
        .find(|p| p.status != 5)
        .or(faults.first())
        .cloned();
    if path.is_some() {
        f.own_evidence = true;
    }
    if peer_first(&f) {
        return f
            .cause("a peer rank closed its connections: it failed or exited first, and its own verdict names why")
            .hint("look for the first FAIL line of another rank");
    }
    if let Some(found) = finding(&mut f) {
        // "connect" is split by the transport that failed; other stages keep their name, but
        // for a buffer import, which only a transport's connect does: NCCL without runtime
        // connect (before 2.22, or NCCL_RUNTIME_CONNECT=0) connects its ring and tree inside
        // ncclCommInitRank (`ncclTransportP2pSetup` in `initTransportsRank`, src/init.cc
        // v2.19.3-1), so seed 000 fails there as init.
        // A network finding of the data path (a completion error, a fatal HCA event: their
        // signatures say run, where a log shows them) in the connect stage, whose first
        // operation is this pattern's, is the network transport's.
        let network = matches!(
            found.category,
            classify::Category::NetIb | classify::Category::NetSocket
        );
        let refined = match stage {
            Stage::Connect if network && found.stage == Stage::Run => Some(Stage::ConnectNet),
            Stage::Connect => matches!(
                found.stage,
                Stage::ConnectImport | Stage::ConnectProxy | Stage::ConnectShm | Stage::ConnectNet
            )
            .then_some(found.stage),
            // Likewise the shared-memory transport's segments (observed: with P2P off, 2.19.3,
            // 2.23.4 and 2.32.3 all create them inside ncclCommInitRank).
            Stage::Init => matches!(found.stage, Stage::ConnectImport | Stage::ConnectShm)
                .then_some(found.stage),
            _ => None,
        };
        if let Some(s) = refined {
            f.stage = s;
        }
        let cause = format!("{}{}", found.cause, context_for(f.stage, node));
        f = f.cause(cause).hint(found.hint);
        // A flushed request is only the wake of an earlier error: a fatal event on this rank's
        // HCA, when the log has one, is that error; any other completion error names its path.
        let fatal = path
            .as_ref()
            .is_none_or(|p| p.status == 5)
            .then(|| {
                f.evidence.iter().find_map(|l| {
                    classify::classify(std::iter::once(l.as_str()))
                        .filter(|x| x.signature == "net-ib-async-fatal")
                })
            })
            .flatten();
        let named = if let Some(x) = fatal {
            f.evidence.retain(|l| *l != x.evidence);
            f.evidence.insert(0, x.evidence.clone());
            f = f.cause(x.cause).hint(x.hint);
            x.evidence
        } else if let Some(p) = path {
            f = path_cause(f, &p);
            p.line
        } else {
            found.evidence.clone()
        };
        f.error = annotate_refusal(&f.error, &named);
    } else if let CommError::Timeout { .. } = e {
        f = f
            .cause("an operation did not complete: a peer stopped, or a link hangs")
            .hint("rerun with NCCL_DEBUG=INFO; the ranks that did not report are the suspects");
    } else if e
        .nccl()
        .and_then(NcclError::last_error)
        .is_some_and(|l| l.contains("driver version is insufficient"))
    {
        f = f
            .cause("the CUDA driver is older than the CUDA runtime this libnccl was built for")
            .hint("upgrade the driver, or use an NCCL build for the driver's CUDA version");
    }
    f
}

/// Facts of this node that bear on a finding at `stage`: the versions for a buffer-import
/// failure (a driver bug), the size of /dev/shm for a shared-memory one.
pub fn context_for(stage: Stage, node: &NodeFacts) -> String {
    match stage {
        Stage::ConnectImport => format!(
            " [this node: CUDA driver {}, NCCL {}]",
            node.cuda.as_deref().unwrap_or("unknown"),
            node.nccl.as_deref().unwrap_or("unknown")
        ),
        Stage::ConnectShm => match node.shm {
            Some((total, free)) => {
                // A 64 KiB /dev/shm (seen in pods) must not read as 0 MiB.
                let size = |b: u64| {
                    if b < 1 << 20 {
                        format!("{} KiB", b >> 10)
                    } else {
                        format!("{} MiB", b >> 20)
                    }
                };
                format!(
                    " [this node: /dev/shm {}, {} free]",
                    size(total),
                    size(free)
                )
            }
            None => " [this node: /dev/shm is missing]".into(),
        },
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests;
