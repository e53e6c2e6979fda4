//! `explain` on the logs the real libnccl printed while tests/real_nccl_faults.rs's faults
//! were acted out on the stand-in driver (tests/fixtures/stand-in-logs/SOURCES.md): the same
//! rank and cause as the run, from the logs alone; and never a PASS from logs whose rank was
//! killed or hung, which leave no WARN line.

mod common;
use common::*;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/stand-in-logs")
        .join(name)
        .display()
        .to_string()
}

/// `explain` over the ranks' logs of case `case` on NCCL `version` (`ifname-all` has rank 0's
/// only: rank 1 never called NCCL): (exit code, output).
fn explain(case: &str, version: &str) -> (i32, String) {
    let mut files = vec![fixture(&format!("{case}_{version}.rank0.log"))];
    if case != "ifname-all" {
        files.push(fixture(&format!("{case}_{version}.rank1.log")));
    }
    for f in &files {
        assert!(std::path::Path::new(f).exists(), "{f} missing");
    }
    let mut args = vec!["explain"];
    args.extend(files.iter().map(String::as_str));
    let o = run1(&args, &[]);
    (code(&o), text(&o))
}

/// The VERDICT block: the verdict line and what follows it.
fn block(t: &str) -> &str {
    let at = t
        .find("VERDICT ")
        .unwrap_or_else(|| panic!("no verdict:\n{t}"));
    &t[at..]
}

#[test]
fn each_fault_is_named_on_its_rank_from_the_logs() {
    // (case, versions, verdict head, root cause on, NCCL's words)
    let cases: &[(&str, &[&str], &str, &str, &str)] = &[
        (
            // NCCL's own allocation failed inside its init: explain's stage for memory that
            // could not be had is alloc, whoever asked for it.
            "oom",
            &["2.19.3", "2.32.3"],
            "VERDICT FAIL at alloc [oom]",
            "root cause on: rank 1 (host vm, ",
            "Cuda failure 2 'out of memory'",
        ),
        (
            "ipc",
            &["2.19.3", "2.32.3"],
            "VERDICT FAIL at connect:buffer-import [buffer-import]",
            "root cause on: rank 1 (host vm, ",
            "Cuda failure 'invalid resource handle'",
        ),
        (
            "ifname-one",
            &["2.19.3", "2.32.3"],
            "VERDICT FAIL at init [bootstrap]",
            "root cause on: host vm, pid ",
            "Bootstrap : no socket interface found",
        ),
        (
            "ifname-all",
            &["2.19.3", "2.32.3"],
            "VERDICT FAIL at init [bootstrap]",
            "root cause on: host vm, pid ",
            "Bootstrap : no socket interface found",
        ),
        (
            "shm",
            &["2.19.3", "2.23.4", "2.32.3"],
            "VERDICT FAIL at connect:shm [shm]",
            "root cause on: rank 0 (host vm, ",
            "NCCL WARN Error: failed to extend /dev/shm/nccl-",
        ),
    ];
    for (case, versions, head, on, words) in cases {
        for version in *versions {
            let (rc, t) = explain(case, version);
            let b = block(&t);
            assert!(b.starts_with(head), "{case} {version}: {t}");
            assert!(b.contains(on), "{case} {version}: {t}");
            assert!(b.contains(words), "{case} {version}: {t}");
            assert_ne!(rc, 0, "{case} {version}: a failure exits non-zero\n{t}");
            if *case == "shm" {
                // Both ranks ran out of /dev/shm: both are named.
                assert!(b.contains("; rank 1 (host vm, "), "{case} {version}: {t}");
            } else {
                assert!(
                    !b.contains("root cause on: rank 0"),
                    "{case} {version}: {t}"
                );
            }
        }
    }
}

/// The logs of the ifname-one case: rank 1's alone holds the failure.
#[test]
fn the_rank_whose_interface_is_wrong_is_the_one_with_the_warn() {
    for version in ["2.19.3", "2.32.3"] {
        let r1 =
            std::fs::read_to_string(fixture(&format!("ifname-one_{version}.rank1.log"))).unwrap();
        let r0 =
            std::fs::read_to_string(fixture(&format!("ifname-one_{version}.rank0.log"))).unwrap();
        assert!(r1.contains("no socket interface found"), "{version}");
        assert!(!r0.contains("no socket interface found"), "{version}");
    }
}

/// A rank killed in its first import, or whose kernel never finishes, prints no WARN: the logs
/// alone show no failure, and explain says so instead of a PASS.
#[test]
fn logs_of_a_killed_or_hung_rank_are_never_a_pass() {
    for case in ["killed", "stuck-kernel"] {
        for version in ["2.19.3", "2.32.3"] {
            let (_, t) = explain(case, version);
            let b = block(&t);
            assert!(!b.starts_with("VERDICT PASS"), "{case} {version}: {t}");
            assert!(
                b.starts_with("VERDICT NO FAILURE FOUND"),
                "{case} {version}: {t}"
            );
            assert!(b.contains("not a PASS"), "{case} {version}: {t}");
        }
    }
}
