//! Bad flags and files: a clear message and exit code 2, before any library is touched.

mod common;
use common::*;

fn usage_error(args: &[&str], needle: &str) {
    let mut full = vec!["run"];
    full.extend_from_slice(args);
    let o = run1(&full, &[]);
    let t = text(&o);
    assert_eq!(code(&o), 2, "{args:?}: {t}");
    assert!(t.contains(needle), "{args:?} should say '{needle}':\n{t}");
    assert!(!t.contains("panicked"), "{t}");
    // Nothing was loaded: no library line was printed.
    assert!(!t.contains("# nccl:"), "{t}");
}

#[test]
fn nonsense_sizes() {
    usage_error(&["-b", "lots"], "'lots' is not a size");
    usage_error(&["-e", "12Q"], "not a size");
    usage_error(
        &["-b", "1M", "-e", "1K"],
        "-b/--minbytes (1048576) is larger than -e/--maxbytes (1024)",
    );
    usage_error(&["-f", "0.5"], "-f/--stepfactor");
}

#[test]
fn unknown_pattern_datatype_op() {
    usage_error(
        &["--patterns", "all_reduce,broadcastish"],
        "unknown pattern 'broadcastish'",
    );
    usage_error(&["-d", "float17"], "float17");
    usage_error(&["-o", "xor"], "xor");
}

#[test]
fn unwritable_json_path() {
    usage_error(
        &["--json", "/nonexistent-dir/results.json"],
        "--json /nonexistent-dir/results.json: cannot write there",
    );
}

#[test]
fn bad_fault_spec_under_sim() {
    let o = run1(
        &["run", "--backend", "sim"],
        &[("NCCL_SMOKE_SIM_FAULT", "init@x")],
    );
    let t = text(&o);
    assert_eq!(code(&o), 2, "{t}");
    assert!(t.contains("bad rank 'x'"), "{t}");
}
