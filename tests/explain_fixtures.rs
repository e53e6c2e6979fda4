//! `explain` over NCCL log fixtures: each known failure at two NCCL versions where the text
//! differs, and healthy logs that must produce no finding.

mod common;
use common::*;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nccl-logs")
        .join(name)
        .display()
        .to_string()
}

fn explain(name: &str) -> (i32, String) {
    let o = run1(&["explain", &fixture(name)], &[]);
    (code(&o), text(&o))
}

#[test]
fn each_signature_is_named_with_its_stage() {
    for (file, stage, code_want) in [
        ("import_2.26.log", "connect:buffer-import", 18),
        ("import_2.28.log", "connect:buffer-import", 18),
        ("shm_2.18.log", "connect:shm", 20),
        ("shm_2.21.log", "connect:shm", 20),
        ("proxy_2.21.log", "connect:proxy", 19),
        ("proxy_2.25.log", "connect:proxy", 19),
        ("net_socket_2.18.log", "connect:net", 21),
        // A completion error is a work request of an operation (ncclIbTest): run.
        ("net_ib_2.20.log", "run", 22),
    ] {
        let (code, t) = explain(file);
        assert_eq!(code, code_want, "{file}: {t}");
        let finding = t
            .lines()
            .find(|l| l.starts_with(&format!("FINDING {stage} on ")))
            .unwrap_or_else(|| panic!("{file}: {t}"));
        assert!(finding.contains("host "), "{file}: {t}");
        assert!(
            t.contains(&format!("VERDICT FAIL at {stage} ")),
            "{file}: {t}"
        );
    }
}

#[test]
fn gdr_disabled_is_advice() {
    let (code, t) = explain("gdr_disabled_2.19.log");
    assert_eq!(code, 22, "{t}");
    assert!(
        t.contains("FINDING run on host ib-node-1, pid 3300, cuda device 0"),
        "{t}"
    );
    assert!(t.contains("nvidia_peermem"), "{t}");
}

/// Healthy logs give no finding. PASS needs the run's end in the log (here NCCL's "Destroy
/// COMPLETE"); a log that stops after init is "no failure seen", exit 37, never a pass.
#[test]
fn healthy_logs_give_no_finding() {
    let (code, t) = explain("healthy_2.27.log");
    assert_eq!(code, 0, "{t}");
    assert!(t.contains("VERDICT PASS"), "{t}");
    assert!(t.contains("Destroy COMPLETE"), "{t}");
    assert!(!t.contains("FINDING"), "{t}");
    let (code, t) = explain("healthy_2.19.log");
    assert_eq!(code, 37, "{t}");
    assert!(t.contains("VERDICT NO FAILURE FOUND"), "{t}");
    assert!(!t.contains("FINDING"), "{t}");
}

#[test]
fn binary_truncated_and_huge_input() {
    let dir = scratch("explain-input");
    let bin = dir.join("binary.log");
    let bytes: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&bin, &bytes).unwrap();
    let o = run1(&["explain", bin.to_str().unwrap()], &[]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("not a text log"), "{}", text(&o));
    // Nothing read is nothing judged: no verdict line at all, and `null` in JSON.
    assert!(!text(&o).contains("VERDICT"), "{}", text(&o));
    assert!(text(&o).contains("no input could be read and judged as a log (above): no verdict"));
    let o = run1(&["explain", "--json", bin.to_str().unwrap()], &[]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["verdict"].is_null(), "{doc}");

    let truncated = dir.join("truncated.log");
    std::fs::write(
        &truncated,
        b"h:1:2 [0] misc/shmutils.cc:132 NCCL WARN Error while creating shared memory seg",
    )
    .unwrap();
    let o = run1(&["explain", truncated.to_str().unwrap()], &[]);
    assert!(!text(&o).contains("panicked"));

    // 100 MB of healthy INFO lines with one failure at the very end.
    let huge = dir.join("huge.log");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&huge).unwrap());
        let line = b"big:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read and some padding to make it long\n";
        for _ in 0..(100 << 20) / line.len() + 1 {
            f.write_all(line).unwrap();
        }
        f.write_all(b"big:1:1 [0] transport/p2p.cc:275 NCCL WARN Cuda failure 101 'invalid device ordinal'\n").unwrap();
    }
    let o = run1(&["explain", huge.to_str().unwrap()], &[]);
    assert_eq!(code(&o), 18, "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// An empty file and text with nothing NCCL, no error and no finished run in it give a clear
/// message and no verdict (exit 2), in text and in JSON.
#[test]
fn empty_and_garbage_text_get_no_verdict() {
    let dir = scratch("explain-nothing");
    let empty = dir.join("empty.log");
    std::fs::write(&empty, b"").unwrap();
    let garbage = dir.join("garbage.log");
    let words: String = (0..5000u32)
        .map(|i| format!("lorem {} ipsum dolor {}\n", i.wrapping_mul(2654435761), i))
        .collect();
    std::fs::write(&garbage, words).unwrap();
    for (file, why) in [
        (&empty, "empty: nothing to judge"),
        (&garbage, "nothing to judge"),
    ] {
        let o = run1(&["explain", file.to_str().unwrap()], &[]);
        let t = text(&o);
        assert_eq!(code(&o), 2, "{t}");
        assert!(t.contains(why), "{t}");
        assert!(!t.contains("VERDICT"), "{t}");
        let o = run1(&["explain", "--json", file.to_str().unwrap()], &[]);
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(doc["verdict"].is_null(), "{doc}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A WARN line nothing names, and a Python traceback of an unknown family: quoted under
/// UNKNOWN (exit 36), never a pass and never dropped.
#[test]
fn errors_nothing_names_are_unknown_and_quoted() {
    let dir = scratch("explain-unknown");
    let log = dir.join("unknown.log");
    std::fs::write(
        &log,
        "h:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n\
         Traceback (most recent call last):\n\
         frobnicator.FluxCapacitorError: the flux is out of phase\n",
    )
    .unwrap();
    let o = run1(&["explain", log.to_str().unwrap()], &[]);
    let t = text(&o);
    assert_eq!(code(&o), 36, "{t}");
    assert!(t.contains("VERDICT UNKNOWN"), "{t}");
    assert!(
        t.contains("FluxCapacitorError: the flux is out of phase"),
        "{t}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unreadable_file_is_a_usage_error_but_others_are_still_read() {
    let o = run1(
        &["explain", "/nonexistent.log", &fixture("shm_2.21.log")],
        &[],
    );
    let t = text(&o);
    assert_eq!(code(&o), 2, "{t}");
    assert!(
        t.contains("/nonexistent.log: cannot read") && t.contains("FINDING connect:shm"),
        "{t}"
    );
}

#[test]
fn directories_dev_zero_and_fifos_are_bounded_errors() {
    let dir = scratch("explain-special");
    let o = run1(&["explain", dir.to_str().unwrap()], &[]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("is a directory"), "{}", text(&o));

    let t0 = std::time::Instant::now();
    let o = run1(&["explain", "/dev/zero"], &[]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("not a text log"), "{}", text(&o));
    assert!(!text(&o).contains("VERDICT"), "{}", text(&o));
    assert!(t0.elapsed().as_secs() < 10);

    // A FIFO nobody writes to: open() itself would block forever.
    let fifo = dir.join("pipe.log");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let t0 = std::time::Instant::now();
        let o = run1(
            &["explain", "--time-limit", "1", fifo.to_str().unwrap()],
            &[],
        );
        assert_eq!(code(&o), 2, "{}", text(&o));
        assert!(
            text(&o).contains("no end of input within 1s"),
            "{}",
            text(&o)
        );
        assert!(t0.elapsed().as_secs() < 10, "{:?}", t0.elapsed());
    } else {
        panic!("mkfifo is needed for this test");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn terminal_escapes_are_not_printed() {
    let dir = scratch("explain-escapes");
    let log = dir.join("esc.log");
    std::fs::write(
        &log,
        "h\x1b]0;pwned\x07:1:2 [0] bootstrap.cc:48 NCCL WARN Bootstrap : no socket interface found \x1b[2J\x1b[31m\n",
    )
    .unwrap();
    let o = run1(&["explain", log.to_str().unwrap()], &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(code(&o), 16, "{out}");
    assert!(!out.contains('\x1b') && !out.contains('\x07'), "{out:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_max_bytes_is_a_usage_error() {
    let o = run1(
        &["explain", "--max-bytes", "lots", &fixture("shm_2.21.log")],
        &[],
    );
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("--max-bytes 'lots' is not a size"),
        "{}",
        text(&o)
    );
}

#[test]
fn one_verdict_for_a_job_names_the_culprit_not_the_victims() {
    let dir = scratch("explain-job");
    let victim = dir.join("nccl.node-a.100");
    std::fs::write(
        &victim,
        "node-a:100:100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n\
         node-a:100:120 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x9 - Init START\n\
         node-a:100:130 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer node-b<4242>\n",
    )
    .unwrap();
    let culprit = dir.join("nccl.node-b.200");
    std::fs::write(
        &culprit,
        "node-b:200:200 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n\
         node-b:200:220 [0] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x9 - Init START\n\
         node-b:200:230 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9637892 bytes, error: No space left on device (28)\n",
    )
    .unwrap();
    let (v, c) = (victim.to_str().unwrap(), culprit.to_str().unwrap());
    let o = run1(&["explain", v, c], &[]);
    let t = text(&o);
    assert_eq!(code(&o), 20, "{t}");
    assert!(t.contains("VERDICT FAIL at connect:shm [shm]"), "{t}");
    assert!(
        t.contains("root cause on: rank 1 (host node-b, pid 200)"),
        "{t}"
    );
    assert!(
        t.contains("only consequences (victims, not the cause): rank 0 (host node-a, pid 100)"),
        "{t}"
    );

    let o = run1(&["explain", "--json", v, c], &[]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["schema"], "nccl-smoke/explain/3");
    assert_eq!(j["verdict"]["status"], "fail");
    assert_eq!(j["verdict"]["root_cause"]["category"], "shm");
    assert_eq!(j["verdict"]["culprits"][0]["rank"], 1);
    assert_eq!(j["verdict"]["consequences_only"][0]["rank"], 0);
    assert_eq!(j["verdict"]["version_mismatch"], false);

    // A rank on another NCCL version is a finding of its own.
    std::fs::write(
        &victim,
        "node-a:100:100 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n",
    )
    .unwrap();
    let o = run1(&["explain", "--json", v, c], &[]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["verdict"]["version_mismatch"], true, "{j}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two ranks on one GPU, as the real NCCL 2.28.9 said it on an H200: named for what it is,
/// on both ranks, at init, with the fix (one rank per GPU).
#[test]
fn duplicate_gpu_from_a_real_gpu_is_named_with_its_fix() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpu-logs");
    let logs: Vec<String> = ["rank0", "rank1"]
        .iter()
        .map(|r| {
            dir.join(format!("duplicate-gpu_2.28.9.{r}.log"))
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut args = vec!["explain"];
    args.extend(logs.iter().map(String::as_str));
    let o = run1(&args, &[]);
    let t = text(&o);
    assert_eq!(code(&o), 16, "{t}");
    assert!(t.contains("VERDICT FAIL at init [init]"), "{t}");
    assert!(
        t.contains("root cause on: rank 0 (host vm, pid 510); rank 1 (host vm, pid 513)"),
        "{t}"
    );
    assert!(
        t.contains("likely cause: two ranks of one communicator are on the same GPU"),
        "{t}"
    );
    assert!(t.contains("start one rank per GPU"), "{t}");
    assert!(
        t.contains("init.cc:904 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60"),
        "{t}"
    );
}
