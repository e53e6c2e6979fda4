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
fn an_empty_library_path_is_refused_before_any_load() {
    // dlopen("") opens the program itself: it must never be taken for a libnccl.
    usage_error(&["--nccl-lib", ""], "the path is empty");
    let o = run1(&["doctor"], &[("NCCL_SMOKE_NCCL_LIB", "")]);
    let t = text(&o);
    assert_eq!(code(&o), 2, "{t}");
    assert!(t.contains("the path is empty"), "{t}");
    assert!(!t.contains("ncclGetVersion"), "{t}");
}

#[test]
fn unwritable_json_path() {
    usage_error(
        &["--json", "/nonexistent-dir/results.json"],
        "--json /nonexistent-dir/results.json: cannot create a file in /nonexistent-dir",
    );
}

/// `--json` at a character device, a FIFO, a symbolic link or a folder: refused before any
/// library is loaded, and what is there is left as it was (a FIFO is not even opened, so
/// nothing hangs).
#[test]
fn json_refuses_anything_but_a_regular_file_or_a_new_path() {
    use std::os::unix::fs::FileTypeExt;
    let dir = scratch("json-targets");
    let fifo = mkfifo(&dir);
    let kept = dir.join("kept.json");
    std::fs::write(&kept, "an earlier file").unwrap();
    let link = dir.join("link.json");
    std::os::unix::fs::symlink(&kept, &link).unwrap();
    let folder = dir.join("folder");
    std::fs::create_dir(&folder).unwrap();
    // A character device of our own (the null device's numbers): mknod needs root; as root the
    // case runs, elsewhere the other three still do.
    let dev = dir.join("null");
    let have_dev = std::process::Command::new("mknod")
        .arg(&dev)
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|s| s.success());
    let mut cases = vec![
        (fifo.clone(), "a FIFO"),
        (link.clone(), "a symbolic link"),
        (folder.clone(), "a folder"),
    ];
    if have_dev {
        cases.push((dev.clone(), "a character device"));
    }
    for (p, what) in &cases {
        let start = std::time::Instant::now();
        usage_error(
            &["--backend", "sim", "--json", p.to_str().unwrap()],
            &format!("that is {what}"),
        );
        assert!(start.elapsed().as_secs() < 10, "{what}: took too long");
    }
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "an earlier file");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    if have_dev {
        assert!(
            std::fs::symlink_metadata(&dev)
                .unwrap()
                .file_type()
                .is_char_device()
        );
    }
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Numbers out of range, and control characters in what is quoted back: exit 2, a message
/// naming the flag, no raw control character.
#[test]
fn hostile_numbers_and_text() {
    usage_error(&["--timeout", "1e30"], "from 0.1 to 86400");
    usage_error(&["--stage-timeout", "init=1e30"], "from 0.1 to 86400");
    usage_error(&["-e", "2048G"], "-e/--maxbytes");
    let o = run1(&["run", "-b", "\u{1b}[31mlots"], &[]);
    let t = text(&o);
    assert_eq!(code(&o), 2, "{t}");
    assert!(!t.contains('\u{1b}'), "{t:?}");
    let o = run1(
        &["run", "--backend", "sim"],
        &[("NCCL_SMOKE_SIM_FAULT", "net:slow=1e308")],
    );
    let t = text(&o);
    assert_eq!(code(&o), 2, "{t}");
    assert!(t.contains("bad slow factor '1e308'"), "{t}");
}

/// `compare` reads a device, a FIFO with no writer, and a folder as what they are: exit 2
/// within seconds, never reading without end.
#[test]
fn compare_reads_are_bounded() {
    let dir = scratch("compare-bounded");
    let fifo = mkfifo(&dir);
    for other in ["/dev/zero", fifo.to_str().unwrap(), dir.to_str().unwrap()] {
        let start = std::time::Instant::now();
        let o = run1(&["compare", other, other], &[]);
        let t = text(&o);
        assert_eq!(code(&o), 2, "{other}: {t}");
        assert!(t.contains("nccl-smoke compare: "), "{other}: {t}");
        assert!(start.elapsed().as_secs() < 10, "{other}: took too long");
    }
    let _ = std::fs::remove_dir_all(&dir);
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

/// The libibverbs stand-in's specs are checked before any rank starts, whatever the backend.
#[test]
fn bad_simulated_hca_and_ib_fault_specs() {
    for (var, spec, says) in [
        (
            "NCCL_SMOKE_SIM_IB_HCAS",
            "mlx5_0:fast",
            "NCCL_SMOKE_SIM_IB_HCAS: unknown option 'fast' in 'mlx5_0:fast'",
        ),
        (
            "NCCL_SMOKE_SIM_IB_FAULT",
            "ibv_modify_qp:EWHAT",
            "NCCL_SMOKE_SIM_IB_FAULT: bad errno 'EWHAT'",
        ),
        (
            "NCCL_SMOKE_SIM_IB_FAULT",
            "async/mlx5_3@1:port-error",
            "names HCA 'mlx5_3', which NCCL_SMOKE_SIM_IB_HCAS does not have (mlx5_0)",
        ),
    ] {
        let o = run1(&["run", "--backend", "sim"], &[(var, spec)]);
        let t = text(&o);
        assert_eq!(code(&o), 2, "{var}: {t}");
        assert!(t.contains(says), "{var}: {t}");
    }
}

/// A FIFO named `fifo` in `dir`, with no writer.
fn mkfifo(dir: &std::path::Path) -> std::path::PathBuf {
    let fifo = dir.join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    fifo
}

#[test]
fn compare_help_lists_every_exit_code_compare_returns() {
    let o = run1(&["compare", "--help"], &[]);
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    for want in [
        "0 no regression",
        "2 bad input",
        "3 the --plot file could not be written",
        "30 regressed",
        "33 inconclusive",
        "34 malformed input",
        "35 nothing compared",
    ] {
        assert!(t.contains(want), "compare --help lacks '{want}':\n{t}");
    }
}

#[test]
fn compare_refuses_empty_binary_and_huge_files_at_once() {
    let dir = scratch("compare-odd-files");
    let empty = dir.join("all_reduce_perf.empty.log");
    std::fs::write(&empty, b"").unwrap();
    let binary = dir.join("all_reduce_perf.bin.log");
    let bytes: Vec<u8> = (0..65536u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&binary, &bytes).unwrap();
    // 1 GiB, sparse: refused by its size before a byte is read.
    let huge = dir.join("all_reduce_perf.huge.log");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    for (file, code_wanted, says) in [
        (&empty, 2, "it is empty"),
        (&binary, 34, "no nccl-tests results table in this file"),
        (&huge, 2, "more than the 256 MiB"),
    ] {
        let start = std::time::Instant::now();
        let f = file.to_str().unwrap();
        let o = run1(&["compare", f, f], &[]);
        let t = text(&o);
        assert_eq!(code(&o), code_wanted, "{f}: {t}");
        assert!(t.contains(says), "{f}: {t}");
        assert!(!t.contains("panicked"), "{t}");
        assert!(start.elapsed().as_secs() < 10, "{f}: took too long");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
