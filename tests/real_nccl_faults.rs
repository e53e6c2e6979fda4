//! Faults acted out by the real libnccl's own code on the stand-in driver, through the
//! ordinary real path (`mpirun … nccl-smoke run --nccl-lib <wheel>`): a driver entry point that
//! fails on one rank (`NCCL_SMOKE_SIM_CUDA_FAULT`, sim/README.md), a rank killed in its first
//! buffer import, a 64 KiB /dev/shm in a private mount namespace (seed 004), a wrong
//! `NCCL_SOCKET_IFNAME` on every rank and on one, and a kernel that never finishes. Each verdict
//! must name the stage, the rank (never a victim), the host and the cause, and quote NCCL's own
//! WARN line where NCCL printed one. `explain` is tested on the logs these runs printed in
//! tests/explain_stand_in.rs.

mod common;
mod stand_in;
use common::*;
use nccl_smoke::report::results;
use stand_in::*;

/// One case: what it sets, and what the verdict must say.
struct Case<'a> {
    version: &'a str,
    env: &'a [(&'a str, &'a str)],
    extra: Extra<'a>,
    args: &'a [&'a str],
    code: i32,
    /// How the job's verdict begins after the backend label.
    verdict: String,
    cause: &'a str,
    /// NCCL's own WARN line (a part of it), quoted as evidence.
    warn: Option<&'a str>,
}

/// Runs `c` with 2 ranks and checks its verdict; returns the output.
fn check(c: &Case) -> String {
    let libs = lib_dir();
    let lib = wheel(c.version);
    let mut args = vec!["run", "--nccl-lib", lib.to_str().unwrap(), "-e", "64K"];
    args.extend_from_slice(c.args);
    let o = real_run_with(2, &args, c.env, &libs, 180, &c.extra);
    let t = text(&o);
    let v = c.version;
    assert_eq!(code(&o), c.code, "{v}: {t}");
    let line = verdict(&t);
    let head = format!("VERDICT: [REAL NCCL {v} · SIMULATED GPUS] {}", c.verdict);
    assert!(line.starts_with(&head), "{v}: wanted {head}\n{line}\n{t}");
    assert!(line.contains(c.cause), "{v}: {line}");
    if let Some(w) = c.warn {
        assert!(
            t.lines()
                .any(|l| l.starts_with("#   evidence: ") && l.contains(w)),
            "{v}: NCCL's WARN '{w}' not quoted:\n{t}"
        );
    }
    assert!(!t.contains("panicked"), "{t}");
    t
}

/// The verdict names rank 1 alone, never rank 0 (the victim).
fn rank_0_not_blamed(t: &str, version: &str) {
    let v = verdict(t);
    assert!(!v.contains("on rank 0 (host"), "{version}: {v}");
    assert!(!v.contains("on ranks 0"), "{version}: {v}");
    assert!(!v.contains(" on all "), "{version}: {v}");
}

#[test]
fn cu_mem_create_out_of_memory_on_rank_1_is_named_at_init() {
    for (version, warn) in [
        (
            "2.19.3",
            "include/alloc.h:102 NCCL WARN Cuda failure 2 'out of memory'",
        ),
        (
            "2.32.3",
            "include/alloc.h:334 (ncclCuMemAlloc) NCCL WARN Cuda failure 2 'out of memory'",
        ),
    ] {
        let t = check(&Case {
            version,
            env: &[(
                "NCCL_SMOKE_SIM_CUDA_FAULT",
                "cuMemCreate@1:CUDA_ERROR_OUT_OF_MEMORY",
            )],
            extra: Extra::default(),
            args: &["--timeout", "20"],
            code: 16,
            verdict: "FAIL at init on rank 1 (host ".into(),
            cause: "likely cause: GPU memory ran out while NCCL allocated its buffers",
            warn: Some(warn),
        });
        rank_0_not_blamed(&t, version);
    }
}

#[test]
fn cu_ipc_open_mem_handle_failure_on_rank_1_is_a_buffer_import() {
    for (version, warn) in [
        (
            "2.19.3",
            "transport/p2p.cc:267 NCCL WARN Cuda failure 'invalid resource handle'",
        ),
        (
            "2.32.3",
            "transport/p2p.cc:322 (ncclP2pImportShareableBuffer) NCCL WARN Cuda failure 'invalid resource handle'",
        ),
    ] {
        let t = check(&Case {
            version,
            env: &[
                ("NCCL_CUMEM_ENABLE", "0"),
                (
                    "NCCL_SMOKE_SIM_CUDA_FAULT",
                    "cuIpcOpenMemHandle@1:CUDA_ERROR_INVALID_HANDLE",
                ),
            ],
            extra: Extra::default(),
            args: &["--timeout", "20"],
            code: 18,
            verdict: "FAIL at connect:buffer-import on rank 1 (host ".into(),
            cause: "likely cause: importing a peer GPU's buffer for the P2P transport failed",
            warn: Some(warn),
        });
        rank_0_not_blamed(&t, version);
    }
}

/// 2.19 imports inside `ncclCommInitRank`, 2.32 at the first collective: rank 1 dies there,
/// and rank 0, which only sees it go, is not blamed.
#[test]
fn a_rank_killed_in_its_first_import_is_blamed_alone() {
    for (version, code, stage) in [("2.19.3", 16, "init"), ("2.32.3", 17, "connect")] {
        let t = check(&Case {
            version,
            env: &[(
                "NCCL_SMOKE_SIM_CUDA_FAULT",
                "cuMemImportFromShareableHandle@1:crash",
            )],
            extra: Extra::default(),
            args: &["--timeout", "20"],
            code,
            verdict: format!("FAIL at {stage} on rank 1 (host "),
            cause: "the worker died of SIGABRT",
            warn: None,
        });
        rank_0_not_blamed(&t, version);
    }
}

/// Seed 004: a pod's /dev/shm too small, here 64 KiB in a private mount namespace (the rest of
/// the machine keeps its own). With P2P off (and cuMem off, which 2.23 and later need for
/// NCCL to use /dev/shm there), NCCL creates its shared-memory segments inside
/// `ncclCommInitRank`, and every rank of the host fails alike: one line names both when both
/// reports reached rank 0 before it concluded, else rank 0 alone (itself a culprit: its own
/// segment failed); never a victim.
#[test]
fn seed_004_a_64_kib_dev_shm_is_named_on_every_rank_of_the_host() {
    for (version, warn) in [
        (
            "2.19.3",
            "misc/shmutils.cc:113 NCCL WARN Error while creating shared memory segment",
        ),
        (
            "2.23.4",
            "misc/shmutils.cc:129 NCCL WARN Error while creating shared memory segment",
        ),
        (
            "2.32.3",
            "os/linux.cc:862 (ncclOsShmOpen) NCCL WARN Error while creating shared memory segment",
        ),
    ] {
        let t = check(&Case {
            version,
            env: &[("NCCL_CUMEM_ENABLE", "0"), ("NCCL_P2P_DISABLE", "1")],
            extra: Extra {
                rank_env: &[],
                before: Some((
                    &["unshare", "-m", "--propagation", "private"],
                    "mount -t tmpfs -o size=64k tmpfs /dev/shm",
                )),
            },
            args: &["--timeout", "20"],
            code: 20,
            verdict: "FAIL at connect:shm on ".into(),
            cause: "/dev/shm is too small or full",
            warn: Some(warn),
        });
        let v = verdict(&t);
        assert!(
            v.contains("connect:shm on all 2 ranks (host ")
                || v.contains("connect:shm on rank 0 (host "),
            "{version}: {v}"
        );
        assert!(
            v.contains("[this node: /dev/shm 64 KiB, "),
            "{version}: {t}"
        );
    }
}

/// NCCL's WARN when `NCCL_SOCKET_IFNAME` matches no interface, per release
/// (`bootstrapNetInit`, src/bootstrap.cc).
const NO_INTERFACE: [(&str, &str); 2] = [
    (
        "2.19.3",
        "bootstrap.cc:48 NCCL WARN Bootstrap : no socket interface found",
    ),
    (
        "2.32.3",
        "bootstrap.cc:129 (bootstrapNetInit) NCCL WARN Bootstrap : no socket interface found",
    ),
];

#[test]
fn a_wrong_socket_ifname_on_every_rank_fails_the_unique_id() {
    for (version, warn) in NO_INTERFACE {
        let t = check(&Case {
            version,
            env: &[("NCCL_SOCKET_IFNAME", "nosuch0")],
            extra: Extra::default(),
            args: &["--timeout", "20"],
            code: 15,
            verdict: "FAIL at unique-id on rank 0 (host ".into(),
            cause: "likely cause: NCCL found no usable network interface for its bootstrap",
            warn: Some(warn),
        });
        assert!(
            t.contains("probe: NCCL_SOCKET_IFNAME=nosuch0 selects no interface"),
            "{version}: {t}"
        );
    }
}

#[test]
fn a_wrong_socket_ifname_on_rank_1_only_is_named_on_rank_1() {
    for (version, warn) in NO_INTERFACE {
        let t = check(&Case {
            version,
            env: &[],
            extra: Extra {
                rank_env: &[(1, "NCCL_SOCKET_IFNAME", "nosuch0")],
                before: None,
            },
            args: &["--timeout", "20"],
            code: 16,
            verdict: "FAIL at init on rank 1 (host ".into(),
            cause: "likely cause: NCCL found no usable network interface for its bootstrap",
            warn: Some(warn),
        });
        rank_0_not_blamed(&t, version);
    }
}

/// A kernel on rank 1 that never finishes (its stream never drains), well into the sweep: rank
/// 0, whose kernels "finish" at once, waits for rank 1 at the next gather. The hang is named
/// within the deadline, on rank 1, in the step where it stopped: by rank 1's own supervisor
/// when it gives up first, else by rank 0, which names the rank that never arrived; from NCCL
/// 2.24 what the real NCCL RAS said is in its evidence when rank 0 named it.
#[test]
fn a_kernel_that_never_finishes_is_named_on_its_rank_with_ras() {
    for version in ["2.19.3", "2.32.3"] {
        let dir = scratch(&format!("stuck-kernel.{version}"));
        let json = dir.join("run.json");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ras = format!("127.0.0.1:{port}");
        let t = check(&Case {
            version,
            env: &[
                (
                    "NCCL_SMOKE_SIM_CUDA_FAULT",
                    "cuLaunchKernel@1#400:hang,cuLaunchKernelEx@1#400:hang",
                ),
                ("NCCL_RAS_ADDR", &ras),
            ],
            extra: Extra::default(),
            args: &["--timeout", "10", "--json", json.to_str().unwrap()],
            code: 22,
            verdict: "FAIL at run on rank 1 (host ".into(),
            cause: "B: its iterations",
            warn: None,
        });
        rank_0_not_blamed(&t, version);
        let named_by_rank0 = verdict(&t).contains("it never got past run (");
        let doc = results::load(&json).unwrap_or_else(|e| panic!("{e}\n{t}"));
        assert_eq!(doc.verdict.ranks, vec![1], "{t}");
        let ras_lines: Vec<&String> = doc
            .failures
            .iter()
            .filter(|f| f.rank == Some(1))
            .flat_map(|f| &f.evidence)
            .filter(|l| l.starts_with("NCCL RAS: "))
            .collect();
        if version == "2.19.3" {
            assert!(ras_lines.is_empty(), "no RAS before 2.24: {ras_lines:?}");
        } else if named_by_rank0 {
            assert!(!ras_lines.is_empty(), "{version}: RAS not asked:\n{t}");
            assert!(
                ras_lines.iter().any(|l| l.contains("communicator 0x")),
                "{ras_lines:?}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A CUDA runtime newer than the stand-in (acted out by hiding a table it has): the table the
/// runtime asked for and did not get is the cause, named by UUID and name, not NCCL's
/// "unhandled cuda error" alone. A table the runtime can do without is only evidence.
#[test]
fn a_driver_table_the_runtime_needs_and_the_stand_in_lacks_is_named() {
    for version in ["2.19.3", "2.32.3"] {
        check(&Case {
            version,
            env: &[(
                "NCCL_SMOKE_SIM_CUDA_HIDE_TABLES",
                "TOOLS_RUNTIME_CALLBACK_HOOKS",
            )],
            extra: Extra::default(),
            args: &["--timeout", "20"],
            code: 16,
            verdict: "FAIL at init on ".into(),
            cause: "likely cause: NCCL's CUDA runtime asked nccl-smoke's stand-in CUDA driver \
                    for export table(s) it lacks: {A094798C-2E74-2E74-93F2-0800200C0A66} \
                    (TOOLS_RUNTIME_CALLBACK_HOOKS)",
            warn: Some("NCCL WARN Cuda failure 'invalid argument'"),
        });
    }
    // 2.19.3's runtime goes on without CONTEXT_CHECKS: the run ends as every run on the
    // stand-in does (no kernel ran), and the missing table is evidence, not the cause.
    let t = check(&Case {
        version: "2.19.3",
        env: &[("NCCL_SMOKE_SIM_CUDA_HIDE_TABLES", "CONTEXT_CHECKS")],
        extra: Extra::default(),
        args: &["--timeout", "20"],
        code: 23,
        verdict: "FAIL at verify on rank 0 (host ".into(),
        cause: "the collective wrote nothing into the receive buffer",
        warn: None,
    });
    assert!(!verdict(&t).contains("export table"), "{t}");
    assert!(
        t.contains(
            "(CONTEXT_CHECKS) and answered CUDA_ERROR_INVALID_VALUE; NCCL's CUDA runtime went on \
             without it"
        ),
        "{t}"
    );
}

/// Two ranks on one GPU: named before init, with the ranks and the host, where this NCCL would
/// refuse them ("Duplicate GPU detected" inside init); NCCL 2.30.3 and later with
/// NCCL_MULTI_RANK_GPU_ENABLE=1 accept them, and the real 2.32.3 then gets through init and
/// connect (the run ends at verify, as every run on the stand-in does).
#[test]
fn two_ranks_on_one_gpu_are_named_before_init_unless_nccl_allows_them() {
    let t = check(&Case {
        version: "2.19.3",
        env: &[("NCCL_SMOKE_SIM_GPUS", "1")],
        extra: Extra::default(),
        args: &["--timeout", "20"],
        code: 13,
        verdict: "FAIL at device on rank 0 (host ".into(),
        cause: "likely cause: more than one rank on a GPU: NCCL 2.19.3 refuses that at init \
                (\"Duplicate GPU detected\", src/init.cc); only NCCL 2.30.3 and later allow it, \
                with NCCL_MULTI_RANK_GPU_ENABLE=1",
        warn: None,
    });
    let v = verdict(&t);
    assert!(
        v.contains("ranks 0, 1 on ") && v.contains(" share GPU 0 (GPU-"),
        "{v}"
    );
    check(&Case {
        version: "2.32.3",
        env: &[
            ("NCCL_SMOKE_SIM_GPUS", "1"),
            ("NCCL_MULTI_RANK_GPU_ENABLE", "1"),
        ],
        extra: Extra::default(),
        args: &["--timeout", "20"],
        code: 23,
        verdict: "FAIL at verify on ".into(),
        cause: "the collective wrote nothing into the receive buffer",
        warn: None,
    });
}
