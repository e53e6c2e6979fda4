use super::*;
use crate::stage::Stage;

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

/// NCCL 2.19.3 prints seed 000 without the function's name (the real wheel on the stand-in
/// driver), and its proxy complains next: the import is the finding.
#[test]
fn seed_000_on_2_19_outranks_the_proxy() {
    let f = classify([
            "vm:4534:4555 [1] proxy.cc:1533 NCCL WARN [Service thread] Could not receive type from localRank 0, res=3, closed=0",
            "vm:4534:4549 [1] transport/p2p.cc:243 NCCL WARN Cuda failure 101 'invalid device ordinal'",
        ])
        .unwrap();
    assert_eq!(
        (f.signature, f.stage),
        ("p2p-import-cuda", Stage::ConnectImport)
    );
    // A specific phrase earlier in the table still wins on a line from that file, and the
    // generic text from another file is not an import.
    let oom = "h:1:2 [0] transport/p2p.cc:201 NCCL WARN Cuda failure 2 'out of memory'";
    assert_eq!(classify_line(oom, LineKind::Warn).unwrap().signature, "oom");
    let other = "h:1:2 [0] misc/cudawrap.cc:90 NCCL WARN Cuda failure 101 'invalid device ordinal'";
    assert_ne!(
        classify_line(other, LineKind::Warn).unwrap().stage,
        Stage::ConnectImport
    );
}

/// The families around NCCL, each by its own source's words: the loader, libfabric's EFA
/// provider, libibverbs, PMIx, nccl-tests' CUDACHECK, PyTorch's CUDA checks.
#[test]
fn the_families_around_nccl_name_their_own_failures() {
    let cases = [
        (
            "ImportError: /x/torch/lib/libtorch_cuda.so: undefined symbol: ncclMemFree",
            "nccl-symbol-missing",
            Category::VersionMismatch,
            Severity::Fail,
        ),
        (
            "[1,2]<stdout>:n:199:263 [2] process_err_completion:1562 NCCL WARN NET/OFI Request 0x1 completed with error. RC: 5. Error: Invalid receiver queue pair number (QPN)",
            "ofi-peer-gone",
            Category::RemoteError,
            Severity::Consequence,
        ),
        (
            "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0",
            "ibverbs-no-provider",
            Category::NetIb,
            Severity::Advice,
        ),
        (
            "[node1:08575] PMIX ERROR: ERROR in file gds_ds12_lock_pthread.c at line 168",
            "pmix-lock-noise",
            Category::Mpi,
            Severity::Note,
        ),
        (
            "node1: Test CUDA failure common.cu:1045 'unknown error'",
            "nccl-tests-cuda",
            Category::Cuda,
            Severity::Fail,
        ),
        (
            "[rank0]: RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:276] ss1.ss_family == ss2.ss_family. 2 vs 10",
            "gloo-connect",
            Category::Bootstrap,
            Severity::Fail,
        ),
        (
            "RuntimeError: No CUDA GPUs are available",
            "cuda-no-device",
            Category::Cuda,
            Severity::Fail,
        ),
        (
            "RuntimeError: The NVIDIA driver on your system is too old (found version 10010).",
            "cuda-driver-too-old",
            Category::Cuda,
            Severity::Fail,
        ),
    ];
    for (line, id, category, severity) in cases {
        let f = classify_line(line, LineKind::of(line)).unwrap_or_else(|| panic!("{line}"));
        assert_eq!(
            (f.signature, f.category, f.severity),
            (id, category, severity),
            "{line}"
        );
    }
    // Family readers: CUDA's and the MPI layer's marks, as words ("orted" is not in
    // "supported").
    let family = |l: &str| family_finding(l).map(|f| f.signature);
    assert_eq!(
        family("RuntimeError: CUDA error: invalid argument"),
        Some("cuda-family")
    );
    assert_eq!(
        family("[node1:01234] orted: lost connection to mpirun"),
        Some("mpi-family")
    );
    assert_eq!(family("RuntimeError: operation not supported"), None);
    assert_eq!(family("the communicator was aborted"), None);
    let xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.";
    assert_eq!(
        classify_line(xid, LineKind::Other).unwrap().signature,
        "gpu-xid"
    );
    // The specific CUDA code still wins over nccl-tests' generic CUDACHECK line.
    let ordinal = "node1: Test CUDA failure common.cu:892 'invalid device ordinal'";
    assert_eq!(
        classify_line(ordinal, LineKind::Other).unwrap().signature,
        "cuda-invalid-device"
    );
}

#[test]
fn seed_003_proxy_failure() {
    let f = classify([
        "proxy.cc:1473 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable",
    ])
    .unwrap();
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
fn every_nccl_line_format_since_2_4_is_an_nccl_line() {
    for (line, kind) in [
        ("h:1:2 [0] NCCL INFO Bootstrap : Using eth0", LineKind::Info),
        ("h:1:2 [0] misc/socket.cc:49 NCCL WARN x", LineKind::Warn),
        (
            "h:1:2 [0] transport/p2p.cc:243 (p2pMap) NCCL WARN x",
            LineKind::Warn,
        ),
        ("h:1:2 [0] 12.5 ncclSend:3 NCCL TRACE x", LineKind::Info),
        ("h:1:2 NCCL CALL ncclCommInitRank(…)", LineKind::Info),
        (
            "h:1:2 [0] plugin/net.cc:229 (ncclNetPluginInit) NCCL ATTN Failed to initialize NET plugin IB",
            LineKind::Info,
        ),
        ("NCCL version 2.28.9+cuda12.9", LineKind::Info),
        ("[1,0]<stdout>:NCCL version 2.4.8+cuda10.1", LineKind::Info),
        ("[1,0]<stderr>:h:1:2 [0] NCCL INFO x", LineKind::Info),
        (
            "[1,0]<stderr>:NCCL WARN Cuda failure 'out of memory'",
            LineKind::Warn,
        ),
        ("NCCL WARN Cuda failure 'out of memory'", LineKind::Warn),
        (
            "[2025-01-01 10:00:00] h:1:2 [0] NCCL INFO x",
            LineKind::Info,
        ),
        ("h:1:2 [0]NCCL WARN x", LineKind::Warn),
        (
            "RuntimeError: NCCL error in: x.cpp:1, unhandled system error, NCCL version 2.14.3",
            LineKind::Other,
        ),
        ("MYNCCL INFO is not NCCL", LineKind::Other),
    ] {
        assert_eq!(LineKind::of(line), kind, "{line}");
    }
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
    let l =
        "h:1:1 [0] transport/net_ib/connect.cc:99 (ncclIbConnect) NCCL WARN NET/IB : something new";
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
fn ncclresult_texts_before_2_16_are_read_where_a_wrapper_quotes_them() {
    // v2.4.8-1 to v2.14.3-1 ncclGetErrorString: "internal error", "invalid usage" and
    // "invalid argument", without the later "(run with NCCL_DEBUG=…)" tails.
    for (line, category) in [
        (
            "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, internal error, NCCL version 2.14.3",
            Category::NcclError,
        ),
        (
            "RuntimeError: NCCL error in: x.cpp:1, invalid usage, NCCL version 2.10.3",
            Category::Init,
        ),
        (
            "XlaRuntimeError: INTERNAL: nccl_utils.cc:297: NCCL operation ncclCommInitRank(&comm, nranks, id, rank) failed: internal error",
            Category::NcclError,
        ),
        (
            "NCCL failure all_reduce.cu:95 'internal error'",
            Category::NcclError,
        ),
    ] {
        let f = classify([line]).unwrap_or_else(|| panic!("{line}"));
        assert_eq!(f.category, category, "{line}");
    }
    // The bare words alone are no NCCL error.
    assert_eq!(classify(["an internal error in the data loader"]), None);
}

#[test]
fn result_codes_that_name_their_family() {
    // ncclInvalidUsage is the caller's, whichever wrapper quotes it; ncclUnhandledCudaError,
    // ncclSystemError and ncclInternalError say no more than that NCCL failed.
    for (line, category) in [
        (
            "HCA-128: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '",
            Category::NcclError,
        ),
        (
            "INTERNAL: nccl_utils.cc:275: NCCL operation ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled cuda error",
            Category::NcclError,
        ),
        (
            "torch.distributed.DistBackendError: NCCL error in: x.cpp:1, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.20.5",
            Category::Init,
        ),
        (
            "sophia-gpu-04: Test NCCL failure common.cu:1012 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '",
            Category::NcclError,
        ),
    ] {
        let f = classify([line]).unwrap_or_else(|| panic!("{line}"));
        assert_eq!(f.category, category, "{line}");
    }
}

#[test]
fn launcher_and_watchdog_lines_named() {
    // As `explain` reads them: lines of another program, not NCCL's WARNs.
    let other = |l: &str| classify_line(l, LineKind::of(l));
    let f = other("ssh: connect to host node2 port 22: Connection refused").unwrap();
    assert_eq!((f.category, f.stage), (Category::Mpi, Stage::Launch));
    let f = other("bash: orted: command not found").unwrap();
    assert_eq!(f.category, Category::Mpi);
    let f = other(
        "[rank0]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=1",
    )
    .unwrap();
    assert_eq!(f.category, Category::Hang);
}
