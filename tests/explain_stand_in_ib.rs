//! `explain` on the logs the real libnccl printed over the stand-in libibverbs while IB faults
//! were acted out on rank 1 (tests/fixtures/stand-in-logs/SOURCES.md, "Over the stand-in
//! libibverbs"): from the logs alone, rank 1 and NCCL's InfiniBand transport, with NCCL's own
//! WARN line as evidence, never rank 0 (which only saw its connections close) and never PASS.

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
        for (version, words) in [("2.19.3", old), ("2.32.3", new)] {
            let (c, t) = explain(case, version);
            let what = format!("{case} {version}");
            assert_eq!(c, 21, "{what}: {t}");
            let at = t.find("VERDICT ").unwrap_or_else(|| panic!("{what}: {t}"));
            let block = &t[at..];
            assert!(
                block.starts_with("VERDICT FAIL at connect:net [net-ib]"),
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
        }
    }
}
