//! `explain` on the logs the real libnccl printed over the stand-in libibverbs while IB faults
//! were acted out on rank 1 (tests/fixtures/stand-in-logs/SOURCES.md, "Over the stand-in
//! libibverbs"): from the logs alone, rank 1 and NCCL's InfiniBand transport, with NCCL's own
//! WARN line as evidence, never rank 0 (which only saw its connections close) and never PASS;
//! and no failure where NCCL had none (a retried `ibv_modify_qp`, a host without HCAs).

mod common;
use common::*;
use std::path::PathBuf;

fn explain(case: &str, version: &str) -> (i32, String) {
    let files: Vec<String> = ["rank0", "rank1"]
        .iter()
        .map(|r| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join(format!(
                    "tests/fixtures/stand-in-logs/{case}_{version}.{r}.log"
                ))
                .display()
                .to_string()
        })
        .collect();
    let mut args = vec!["explain"];
    args.extend(files.iter().map(String::as_str));
    let o = run1(&args, &[]);
    (code(&o), text(&o))
}

#[test]
fn each_ib_fault_is_named_on_rank_1_from_the_logs() {
    // (case, NCCL's words on rank 1 for 2.19.3 and for 2.32.3)
    let cases = [
        (
            "ib-dmabuf-reg",
            "Call to ibv_reg_dmabuf_mr failed with error Operation not supported",
            "Call to ibv_reg_dmabuf_mr failed with error Operation not supported",
        ),
        (
            "ib-dmabuf-export",
            "transport/net.cc:766 NCCL WARN Cuda failure 801",
            "(recvProxyConnect) NCCL WARN Cuda failure 801",
        ),
        (
            "ib-modify-qp-timeout",
            "Call to ibv_modify_qp failed with error Connection timed out errno 110",
            "",
        ),
        (
            "ib-modify-qp",
            "Call to ibv_modify_qp failed with error Invalid argument errno 22",
            "Call to ibv_modify_qp failed with 22 Invalid argument",
        ),
        (
            "ib-completion",
            "Got completion from peer",
            "Got CQE with error",
        ),
        (
            "ib-qp-fatal",
            "Got async event : local work queue catastrophic error",
            "Got CQE with error",
        ),
    ];
    for (case, old, new) in cases {
        // (2.32.3 retries the timeout and connects: `what_is_not_a_failure_is_not_called_one`.)
        for (version, words) in [("2.19.3", old), ("2.32.3", new)] {
            if words.is_empty() {
                continue;
            }
            let (c, t) = explain(case, version);
            let what = format!("{case} {version}");
            // A failed work request (a completion error, a work queue's fatal event) is an
            // operation's, in NCCL's data path (ncclIbTest): run. The run that printed these
            // logs says connect:net, for it knows that this was the pattern's first operation
            // (tests/real_nccl_ib.rs); a log alone does not tell the first from a later one.
            let data_path = matches!(case, "ib-completion" | "ib-qp-fatal");
            let (want, stage) = if data_path {
                (22, "run")
            } else {
                (21, "connect:net")
            };
            assert_eq!(c, want, "{what}: {t}");
            let at = t.find("VERDICT ").unwrap_or_else(|| panic!("{what}: {t}"));
            let block = &t[at..];
            // GPU memory given to the NIC through DMA-BUF is GPUDirect RDMA's.
            let category = if case.starts_with("ib-dmabuf") {
                "gdr"
            } else {
                "net-ib"
            };
            assert!(
                block.starts_with(&format!("VERDICT FAIL at {stage} [{category}]")),
                "{what}: {block}"
            );
            let mut lines = block.lines().skip(1);
            let on = lines.next().unwrap_or_default();
            assert!(
                on.starts_with("  root cause on: rank 1 (host vm, ") && !on.contains("rank 0"),
                "{what}: {block}"
            );
            let evidence = lines.next().unwrap_or_default();
            assert!(evidence.contains(words), "{what}: {block}");
            // Both ranks' logs are here: the address rank 0 names is theirs (NCCL's "Using" lines).
            assert!(!block.contains("its log is not here"), "{what}: {block}");
        }
    }
}

#[test]
fn what_is_not_a_failure_is_not_called_one() {
    // 2.32 retried an ibv_modify_qp that timed out, and connected.
    // (Its log has advice, GPU Direct RDMA Disabled: explain exits with that finding's code.)
    let (c, t) = explain("ib-modify-qp-timeout", "2.32.3");
    assert_ne!(c, 21, "{t}");
    assert!(
        t.contains("VERDICT NO FAILURE FOUND") && !t.contains("connect:net on rank 1"),
        "{t}"
    );
    // 2.32.3 could not read the RoCE GID types and ran over sockets: advice, on every rank.
    let (_, t) = explain("ib-roce-gid-types", "2.32.3");
    assert!(t.contains("VERDICT NO FAILURE FOUND, with advice"), "{t}");
    for rank in ["rank 0", "rank 1"] {
        assert!(
            t.lines().any(
                |l| l.starts_with(&format!("FINDING connect:net on {rank},"))
                    && l.ends_with("[net-ib]")
            ),
            "{rank}: {t}"
        );
    }
    // No HCA: NCCL ran over sockets, which its log alone cannot call wrong (a run knows
    // whether NCCL_IB_HCA asked for InfiniBand: tests/real_nccl_ib.rs).
    for version in ["2.19.3", "2.32.3"] {
        let (c, t) = explain("ib-no-hca", version);
        assert_ne!(c, 21, "{version}: {t}");
        assert!(t.contains("VERDICT NO FAILURE FOUND"), "{version}: {t}");
        for rank in ["rank 0", "rank 1"] {
            assert!(
                t.lines()
                    .any(|l| l.starts_with(&format!("NOTE connect:net on {rank},"))
                        && l.ends_with("[net-ib]")),
                "{version} {rank}: {t}"
            );
        }
    }
}

#[test]
fn roce_gid_types_unreadable_fail_2_23_on_every_rank() {
    let (c, t) = explain("ib-roce-gid-types", "2.23.4");
    assert_eq!(c, 21, "{t}");
    let at = t.find("VERDICT ").unwrap_or_else(|| panic!("{t}"));
    let block = &t[at..];
    assert!(
        block.starts_with("VERDICT FAIL at connect:net [net-ib]")
            && block.contains("root cause on: rank 0 (host vm, ")
            && block.contains("rank 1 (host vm, ")
            && block.contains("failed in ncclIbRoceGetVersionNum")
            && block.contains("NCCL_IB_GID_INDEX"),
        "{block}"
    );
}
