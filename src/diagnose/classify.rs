//! Signatures of known failures in NCCL's error text and log lines.
//!
//! Each signature is a set of phrases NCCL prints for one failure (learned from NCCL's
//! sources and public issue threads, 2.19 onwards) and the finding it stands for: the stage
//! to name, the likely cause and what to try. The field reports behind each are cited.

use crate::stage::Stage;

/// What a signature stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub stage: Stage,
    pub cause: &'static str,
    pub hint: &'static str,
    /// The line that matched.
    pub evidence: String,
}

struct Signature {
    stage: Stage,
    /// Any of these phrases (case-insensitive) identifies the failure.
    phrases: &'static [&'static str],
    cause: &'static str,
    hint: &'static str,
}

/// Root causes first, consequences last: when shared memory or a socket fails, NCCL's proxy
/// reports the failure too ("[Proxy Service N] Failed to execute operation Connect"), so the
/// generic proxy phrases come after the transports they relay. The first signature that any
/// line matches wins.
const SIGNATURES: &[Signature] = &[
    // Seed 000: cuMem handle import across containers, driver 570 UMD.
    Signature {
        stage: Stage::ConnectImport,
        phrases: &[
            "cuMemImportFromShareableHandle",
            "ImportShareableBuffer",
            "invalid device ordinal",
            "cudaIpcOpenMemHandle",
        ],
        cause: "importing a peer GPU's buffer for the P2P transport failed (cuMem/IPC handle import); \
                seen with the 570-series driver when ranks in separate containers each see their GPU as device 0",
        hint: "upgrade the GPU driver; meanwhile NCCL_CUMEM_ENABLE=0 (legacy IPC) or NCCL_P2P_DISABLE=1 (SHM fallback)",
    },
    // Seed 004: /dev/shm too small (Kubernetes default 64 MB).
    Signature {
        stage: Stage::ConnectShm,
        phrases: &[
            "shared memory segment",
            "failed to extend /dev/shm",
            "shmOpen",
            "shm_open",
        ],
        cause: "NCCL's shared-memory transport could not create, grow or attach its segment: /dev/shm is \
                too small or full (a pod's default is 64 MB)",
        hint: "mount a memory-backed emptyDir at /dev/shm (Kubernetes) or raise --shm-size (Docker); \
               NCCL_SHM_DISABLE=1 avoids the transport at a bandwidth cost",
    },
    // Seed 003: the proxy service itself cannot accept or serve a local rank.
    Signature {
        stage: Stage::ConnectProxy,
        phrases: &[
            "Accept failed Resource temporarily unavailable",
            "Could not receive type from localRank",
        ],
        cause: "NCCL's proxy service could not accept or serve a local rank's connection: typically ranks \
                not bound to their own GPU before init, or sends and receives that do not pair up",
        hint: "set each rank's device before communicator init (one GPU per local rank); make every send \
               match a receive on the peer; check NCCL_* settings and open-file limits (ulimit -n)",
    },
    Signature {
        stage: Stage::ConnectNet,
        phrases: &[
            "NET/IB",
            "NET/Socket",
            "NET/Plugin",
            "ibv_",
            "socketStartConnect",
            "socketProgress",
            "Connection reset by peer",
            "Connection refused",
            "Connection closed by remote peer",
            "No route to host",
        ],
        cause: "the network transport between ranks failed (socket or InfiniBand)",
        hint: "check NCCL_SOCKET_IFNAME and NCCL_IB_HCA name interfaces that exist and reach the peers; \
               firewall rules; IB port state (ibstat)",
    },
    Signature {
        stage: Stage::ConnectProxy,
        phrases: &[
            "[Proxy Service",
            "proxy call",
            "proxyConnect",
            "Resource temporarily unavailable",
        ],
        cause: "an operation of NCCL's proxy service failed",
        hint: "set each rank's device before communicator init; make every send match a receive; \
               rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,PROXY for the step before",
    },
];

/// Lines that do not fail a run but explain a slow one.
const ADVISORIES: &[Signature] = &[
    // Seed 002: GPUDirect RDMA off, so inter-node traffic bounces through host memory.
    Signature {
        stage: Stage::Run,
        phrases: &["GPU Direct RDMA Disabled"],
        cause: "NCCL moves network data without GPUDirect RDMA (through host memory), so inter-node bandwidth \
                is low; NCCL before 2.23.4 only looks for the legacy peer-memory paths \
                (/sys/kernel/mm/memory_peers/nv_mem*/version) and misses the nvidia_peermem module",
        hint: "load nvidia_peermem (modprobe nvidia_peermem) and use NCCL >= 2.23.4; check NCCL_NET_GDR_LEVEL, \
               NCCL_IB_DISABLE=0 and NCCL_IB_HCA",
    },
];

/// The first advisory (a cause of slowness, not a failure) among `lines`.
pub fn advise<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<Finding> {
    find(ADVISORIES, lines)
}

/// The first finding among `lines` (error text first, then log lines).
/// NCCL's INFO and TRACE lines describe healthy progress ("NET/IB : Using mlx5_0"), so they
/// never count as failure evidence; only WARN lines and error texts do.
pub fn classify<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<Finding> {
    find(
        SIGNATURES,
        lines
            .into_iter()
            .filter(|l| !l.contains(" NCCL INFO ") && !l.contains(" NCCL TRACE ")),
    )
}

fn find<'a>(table: &[Signature], lines: impl IntoIterator<Item = &'a str>) -> Option<Finding> {
    let lines: Vec<&str> = lines.into_iter().collect();
    table.iter().find_map(|sig| {
        lines.iter().find_map(|line| {
            let lower = line.to_lowercase();
            sig.phrases
                .iter()
                .any(|p| lower.contains(&p.to_lowercase()))
                .then(|| Finding {
                    stage: sig.stage,
                    cause: sig.cause,
                    hint: sig.hint,
                    evidence: line.trim().to_string(),
                })
        })
    })
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
}
