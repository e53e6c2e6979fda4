//! Every mapper, from made-up errors and node facts: no rank, no library.

use super::*;
use crate::error::Severity;

fn who() -> Who {
    Who {
        rank: Some(3),
        host: "node7".into(),
    }
}

/// A failure as another process reads it back: its kind from its words.
fn read_back(f: &Failure) -> Failure {
    serde_json::from_value(serde_json::to_value(f).unwrap()).unwrap()
}

#[test]
fn a_missing_or_old_libnccl_is_named() {
    let e = NcclError::NotFound {
        path: "libnccl.so.2".into(),
        detail: "not found".into(),
    };
    let f = nccl_load_failure(&who(), &e);
    assert_eq!(f.stage, Stage::NcclLoad);
    assert!(f.cause.unwrap().contains("could not be loaded"));
    let e = NcclError::MissingSymbol {
        path: "x".into(),
        version: "2.3.7".into(),
        symbol: "ncclCommInitRankConfig",
        since: "2.14",
    };
    assert!(
        nccl_load_failure(&who(), &e)
            .hint
            .unwrap()
            .contains("2.7.3")
    );
}

#[test]
fn driver_failures_say_which_driver_problem() {
    let e = CudaError::NotFound {
        tried: "libcuda.so.1".into(),
        detail: "no such file".into(),
    };
    let f = driver_failure(&who(), &e);
    assert!(f.cause.unwrap().contains("no usable NVIDIA driver library"));
    let e = CudaError::Call {
        call: "cuInit",
        code: 100,
        name: "CUDA_ERROR_NO_DEVICE".into(),
        message: "no CUDA-capable device is detected".into(),
    };
    assert_eq!(
        driver_failure(&who(), &e).cause.as_deref(),
        Some("the driver sees no GPU")
    );
    let e = CudaError::TwoDrivers {
        ours: "a".into(),
        cudarc: "b".into(),
    };
    assert!(driver_failure(&who(), &e).hint.unwrap().contains("stubs/"));
}

#[test]
fn a_wait_that_ran_out_says_how_its_limit_was_made() {
    let e = CommError::Timeout {
        what: "first all_reduce (connect)".into(),
        after_s: 6.5,
        notes: Vec::new(),
    };
    let f = comm_failure(
        &who(),
        Stage::Connect,
        &e,
        Duration::from_secs(5),
        vec![],
        &NodeFacts::default(),
    );
    assert!(
        f.error
            .contains("did not complete within 6.5 s (the connect deadline of 5 s, + 1.5 s")
    );
    assert_eq!(f.kind, Kind::Waited);
    assert_eq!(read_back(&f).kind, Kind::Waited);
    assert!(f.cause.unwrap().contains("a peer stopped"));
}

#[test]
fn a_peer_that_closed_its_connections_goes_first() {
    let e = CommError::Timeout {
        what: "first all_reduce (connect)".into(),
        after_s: 5.0,
        notes: Vec::new(),
    };
    let log = vec![
        "h:1:2 [3] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer h<4>"
            .to_string(),
    ];
    let f = comm_failure(
        &who(),
        Stage::Connect,
        &e,
        Duration::from_secs(5),
        log,
        &NodeFacts::default(),
    );
    assert!(peer_first(&f));
    assert_eq!(f.kind, Kind::PeerGone);
    assert_eq!(read_back(&f).kind, Kind::PeerGone);
    assert!(f.hint.unwrap().contains("first FAIL line of another rank"));
}

#[test]
fn a_shared_memory_failure_is_split_out_with_the_nodes_dev_shm() {
    let e = CommError::Timeout {
        what: "x".into(),
        after_s: 1.0,
        notes: Vec::new(),
    };
    let log = vec!["vm:1:1 [1] misc/shmutils.cc:131 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x (size 9637888), error: No space left on device (28)".to_string()];
    let node = NodeFacts {
        shm: Some((64 << 20, 1 << 20)),
        ..NodeFacts::default()
    };
    let f = comm_failure(
        &who(),
        Stage::Connect,
        &e,
        Duration::from_secs(5),
        log,
        &node,
    );
    assert_eq!(f.stage, Stage::ConnectShm);
    assert!(
        f.cause
            .as_deref()
            .unwrap()
            .ends_with(" [this node: /dev/shm 64 MiB, 1 MiB free]"),
        "{f}"
    );
}

#[test]
fn node_facts_go_with_the_stages_they_explain() {
    let node = NodeFacts {
        cuda: Some("12.8".into()),
        nccl: None,
        shm: None,
    };
    assert_eq!(
        context_for(Stage::ConnectImport, &node),
        " [this node: CUDA driver 12.8, NCCL unknown]"
    );
    assert_eq!(
        context_for(Stage::ConnectShm, &node),
        " [this node: /dev/shm is missing]"
    );
    assert_eq!(context_for(Stage::Init, &node), "");
}

fn hang(waiting: bool, stopped: bool) -> Failure {
    hung(&Hang {
        who: who(),
        stage: Stage::Init,
        step: Some("in ncclCommInitRank"),
        waiting,
        quiet: Duration::from_millis(7100),
        deadline: Duration::from_secs(5),
        budget: Duration::ZERO,
        stopped,
    })
}

#[test]
fn a_hang_says_whether_the_rank_waited_on_others() {
    let f = hang(true, false);
    assert_eq!(
        f.error,
        "no progress for 7.1 s in the init stage, in ncclCommInitRank while waiting on other \
         ranks (deadline 5 s): it hung; the worker was killed"
    );
    assert_eq!((f.kind, read_back(&f).kind), (Kind::Waited, Kind::Waited));
    assert!(f.cause.unwrap().contains("not every rank joined"));
    let f = hang(false, true);
    assert_eq!((f.kind, read_back(&f).kind), (Kind::Hung, Kind::Hung));
    assert!(f.cause.unwrap().contains("stopped from outside"));
}

#[test]
fn a_crash_names_the_signal_and_the_library() {
    let f = crashed(&who(), Stage::Driver, libc::SIGSEGV);
    assert!(f.error.starts_with("the worker died of SIGSEGV"), "{f}");
    assert_eq!(f.cause.as_deref(), Some("a crash inside the CUDA driver"));
    assert_eq!((f.kind, read_back(&f).kind), (Kind::Crashed, Kind::Crashed));
    let f = crashed(&who(), Stage::Run, libc::SIGKILL);
    assert!(f.cause.unwrap().contains("OOM killer"));
}

#[test]
fn a_stop_by_the_launcher_is_no_failure_of_the_ranks_own() {
    let f = stopped_by_launcher(&who(), Stage::Run);
    assert!(f.is_stopped() && read_back(&f).is_stopped());
    assert_eq!(
        f.error,
        "stopped by the launcher during the run stage (another rank failed, or the job was cancelled)"
    );
    assert!(read_back(&ended_by_rank0(&who(), Stage::Init, "another rank is gone")).is_stopped());
    let g = rank0_gone(
        "h0".into(),
        "rank 3",
        Stage::Run,
        true,
        Duration::from_secs(5),
    );
    assert_eq!((g.rank, g.kind), (Some(0), Kind::Own));
    assert_eq!(f.severity, Severity::Fail);
}

/// Seed 000 on NCCL 2.19.3 (the real wheel on the stand-in driver): the import fails inside
/// ncclCommInitRank, which connects the ring there; the stage is the import's, and the proxy's
/// complaints that follow do not name it; a shared-memory segment NCCL makes there is the SHM
/// transport's too.
#[test]
fn an_import_failure_inside_init_is_named_buffer_import() {
    let e = CommError::Timeout {
        what: "ncclCommInitRank".into(),
        after_s: 1.0,
        notes: Vec::new(),
    };
    let log = vec![
        "vm:9169:9180 [1] transport/p2p.cc:243 NCCL WARN Cuda failure 101 'invalid device ordinal'".to_string(),
        "vm:9169:9186 [1] proxy.cc:1533 NCCL WARN [Service thread] Could not receive type from localRank 0, res=3, closed=0".to_string(),
        "vm:9169:9186 [1] proxy.cc:1557 NCCL WARN [Proxy Service 1] Failed to execute operation GetFd from rank 0, retcode 3".to_string(),
    ];
    let f = comm_failure(
        &who(),
        Stage::Init,
        &e,
        Duration::from_secs(5),
        log,
        &NodeFacts::default(),
    );
    assert_eq!(f.stage, Stage::ConnectImport, "{f}");
    assert!(
        f.cause
            .as_deref()
            .unwrap()
            .starts_with("importing a peer GPU's buffer"),
        "{f}"
    );
    let shm = vec!["vm:1:1 [1] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 4194304 bytes".to_string()];
    let f = comm_failure(
        &who(),
        Stage::Init,
        &e,
        Duration::from_secs(5),
        shm,
        &NodeFacts::default(),
    );
    // Shared-memory segments made inside init are the SHM transport's too (seed 004 on the
    // real 2.19.3, 2.23.4 and 2.32.3: tests/real_nccl_faults.rs).
    assert_eq!(f.stage, Stage::ConnectShm, "{f}");
    // Other findings inside init keep the stage.
    let oom =
        vec!["vm:1:1 [1] include/alloc.h:102 NCCL WARN Cuda failure 2 'out of memory'".to_string()];
    let f = comm_failure(
        &who(),
        Stage::Init,
        &e,
        Duration::from_secs(5),
        oom,
        &NodeFacts::default(),
    );
    assert_eq!(f.stage, Stage::Init, "{f}");
}

#[test]
fn a_completion_error_is_the_path_to_the_named_peer_not_a_peer_that_left() {
    // The peer's NCCL socket address in NCCL's line names the other end; a flushed request
    // (5) is named only when no other status is there.
    for (status, warn) in [
        (
            "IBV_WC_RETRY_EXC_ERR (12)",
            "h:1:2 [1] transport/net_ib/p2p.cc:788 (ncclIbLogCompletionWithError) NCCL WARN NET/IB: Got completion from peer 10.0.0.2<47608> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129 qp_num=786212  hca mlx5_0",
        ),
        (
            "IBV_WC_WR_FLUSH_ERR (5)",
            "h:1:2 [1] transport/net_ib.cc:1335 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<47608> with error 5, opcode 1, len 32, vendor err 0 (Recv)",
        ),
    ] {
        let e = CommError::Timeout {
            what: "x".into(),
            after_s: 1.0,
            notes: Vec::new(),
        };
        let log = vec![
            warn.to_string(),
            "h:1:2 [1] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer h<4>".to_string(),
        ];
        let f = comm_failure(
            &who(),
            Stage::Connect,
            &e,
            Duration::from_secs(5),
            log,
            &NodeFacts::default(),
        );
        assert!(!peer_first(&f), "{status}: {f:?}");
        assert_eq!(f.stage, Stage::ConnectNet);
        let cause = f.cause.unwrap();
        assert!(
            cause.contains("network path between this rank")
                && cause.contains("peer 10.0.0.2<47608>")
                && cause.contains(status),
            "{cause}"
        );
    }
}
