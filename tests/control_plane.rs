//! `--backend control-plane`: the REAL libnccl.so.2 of every nvidia-nccl-cu12 release
//! `scripts/setup.sh` unpacked (`.deps/nccl/<version>/`), on nccl-smoke's stand-in CUDA driver
//! and NVML, with 2 and 4 ranks, blocking and non-blocking, over P2P/CUMEM, P2P/IPC, SHM and
//! NET/Socket. Each run must end with `CONTROL PLANE OK`, exit code 27 and the label
//! `REAL NCCL <version> · SIMULATED GPUS`, never PASS; and the transports the harness reports
//! must be the ones NCCL itself printed in its INFO log (read here from the log files, not from
//! the harness). Also: the ordinary real path on the stand-in driver never says PASS, and bad
//! input is refused. The cases run one after another (2 cores); each is bounded.

mod common;
mod stand_in;
use common::*;
use stand_in::control_plane_args;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const CONTROL_PLANE_OK: i32 = 27;
const NCCL_LOAD: i32 = 11;
const FINALIZE: i32 = 24;

/// The transports asked for, by the family NCCL prints and the variables that ask for it.
const TRANSPORTS: [(&str, &[(&str, &str)]); 4] = [
    ("P2P/CUMEM", &[]),
    ("P2P/IPC", &[("NCCL_CUMEM_ENABLE", "0")]),
    ("SHM", &[("NCCL_P2P_DISABLE", "1")]),
    (
        "NET/Socket",
        &[
            ("NCCL_P2P_DISABLE", "1"),
            ("NCCL_SHM_DISABLE", "1"),
            ("NCCL_IB_DISABLE", "1"),
            ("NCCL_SOCKET_IFNAME", "lo"),
        ],
    ),
];

fn minor(version: &str) -> u32 {
    version
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

/// The distinct transports NCCL printed (`… NCCL INFO Channel CC/I : A[a] -> B[b] … via X`)
/// in the log files under `dir`.
fn nccl_printed(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path())
            .unwrap_or_else(|err| panic!("NCCL log {}: {err}", e.path().display()));
        for l in text.lines() {
            if l.contains(" NCCL INFO Channel ")
                && l.contains(" -> ")
                && let Some((_, via)) = l.split_once(" via ")
            {
                out.insert(via.trim().to_string());
            }
        }
    }
    out
}

/// The transports the harness's verdict line names.
fn harness_said(t: &str) -> BTreeSet<String> {
    let line = t
        .lines()
        .find(|l| l.starts_with("CONTROL PLANE OK — "))
        .unwrap_or_else(|| panic!("no CONTROL PLANE OK line:\n{t}"));
    let list = line
        .split("transports: ")
        .nth(1)
        .and_then(|s| s.split(';').next())
        .unwrap_or_else(|| panic!("no transports in {line}"));
    list.split(", ").map(str::to_string).collect()
}

struct Case<'a> {
    version: &'a str,
    lib: &'a Path,
    np: u32,
    blocking: bool,
    family: &'a str,
    env: &'a [(&'a str, &'a str)],
}

/// One control-plane run with NCCL's INFO log in a folder of the test's own; returns the
/// output, the log folder and the results file.
fn control_plane(c: &Case) -> (std::process::Output, PathBuf, PathBuf) {
    let dir = scratch("control-plane");
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let log_file = logs.join("nccl.%h.%p.log").display().to_string();
    let json = dir.join("r.json");
    let mut env: Vec<(&str, &str)> = vec![
        ("NCCL_DEBUG", "INFO"),
        ("NCCL_DEBUG_SUBSYS", "INIT,NET"),
        ("NCCL_DEBUG_FILE", &log_file),
    ];
    env.extend_from_slice(c.env);
    if !c.blocking {
        env.push(("NCCL_COMM_BLOCKING", "0"));
    }
    let mut args = control_plane_args(c.lib, "10");
    args.extend(["--json", json.to_str().unwrap()]);
    let o = mpirun(c.np, &args, &env, 90);
    (o, logs, json)
}

fn what(c: &Case) -> String {
    format!(
        "{} {} ranks {} {}",
        c.version,
        c.np,
        if c.blocking {
            "blocking"
        } else {
            "non-blocking"
        },
        c.family
    )
}

/// Every release, 2 and 4 ranks, blocking and non-blocking, every transport.
#[test]
fn every_release_gets_through_init_and_connect_on_every_transport() {
    let wheels = wheel_nccls();
    let mut ok = 0;
    for (version, lib) in &wheels {
        for np in [2, 4] {
            for blocking in [true, false] {
                for (family, env) in TRANSPORTS {
                    let c = Case {
                        version,
                        lib,
                        np,
                        blocking,
                        family,
                        env,
                    };
                    ok += check_case(&c) as u32;
                }
            }
        }
    }
    eprintln!(
        "{ok} control-plane runs ended CONTROL PLANE OK over {} release(s)",
        wheels.len()
    );
}

/// One case's assertions; true when it ended CONTROL PLANE OK.
fn check_case(c: &Case) -> bool {
    let (o, logs, json) = control_plane(c);
    let t = text(&o);
    let name = what(c);
    let label = format!("REAL NCCL {} · SIMULATED GPUS", c.version);
    assert!(!t.contains("PASS"), "{name}: a PASS without a kernel:\n{t}");
    assert!(!t.contains("panicked"), "{name}:\n{t}");
    assert!(
        t.contains(&format!("# {label} run: ")),
        "{name}: header label\n{t}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["backend"], label.as_str(), "{name}");
    assert_eq!(doc["simulated"], true, "{name}");
    assert!(
        doc["simulated_parts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "libcuda"),
        "{name}: {}",
        doc["simulated_parts"]
    );
    if minor(c.version) == 23 && c.family == "NET/Socket" {
        // NCCL 2.23.4's own ncclCommAbort waits forever for network proxy work no kernel will
        // ever do (FACTS: `ncclProxyProgressDestroy`), blocking or not: the hang is named at
        // the teardown, within its deadline, and the run is no OK.
        assert_eq!(code(&o), FINALIZE, "{name}:\n{t}");
        assert!(
            t.contains(&format!("VERDICT: [{label}] FAIL at finalize on ")),
            "{name}:\n{t}"
        );
        assert!(t.contains("in ncclCommAbort"), "{name}:\n{t}");
        assert!(!t.contains("CONTROL PLANE OK"), "{name}:\n{t}");
        assert_eq!(doc["verdict"]["status"], "FAIL", "{name}");
        return false;
    }
    assert_eq!(code(&o), CONTROL_PLANE_OK, "{name}:\n{t}");
    let verdict = t
        .lines()
        .find(|l| l.starts_with("CONTROL PLANE OK — "))
        .unwrap_or_else(|| panic!("{name}: no verdict\n{t}"));
    assert!(
        verdict.starts_with(&format!(
            "CONTROL PLANE OK — {label} — init and connect of "
        )),
        "{name}: {verdict}"
    );
    assert!(
        verdict.contains(&format!("on {} rank(s), 1 host(s)", c.np))
            && verdict.ends_with("no kernel ran: no data checked, no bandwidth measured"),
        "{name}: {verdict}"
    );
    assert_eq!(doc["verdict"]["status"], "CONTROL_PLANE_OK", "{name}");
    assert_eq!(doc["verdict"]["exit_code"], CONTROL_PLANE_OK, "{name}");

    // The transports: what NCCL printed, in its own log, is what the harness says.
    let printed = nccl_printed(&logs);
    let said = harness_said(&t);
    assert!(!printed.is_empty(), "{name}: NCCL printed no connection");
    assert_eq!(said, printed, "{name}:\n{t}");
    let from_json: BTreeSet<String> = doc["control_plane"]["transports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(from_json, printed, "{name}");
    // And it is the family asked for; except that with 4 ranks NCCL 2.23 and later choose
    // SHM even where P2P is allowed (no NVLink in the stand-in NVML; FACTS.md).
    let family = if c.np == 4 && minor(c.version) >= 23 && c.family.starts_with("P2P") {
        "SHM"
    } else {
        c.family
    };
    assert!(
        printed.iter().all(|v| v.starts_with(family)),
        "{name}: NCCL chose {printed:?}, not {family}"
    );
    // Every ordered pair of ranks that NCCL printed is in the results file.
    let links = doc["control_plane"]["links"].as_array().unwrap();
    assert!(links.len() >= c.np as usize, "{name}: {links:?}");
    true
}

/// The collectives beyond all-reduce and all-to-all: every release's own ncclAllGather,
/// ncclReduceScatter, ncclBroadcast, ncclReduce, and ncclGather and ncclScatter (native from
/// 2.28.3, grouped sends and receives before) take nccl-smoke's arguments (root 0) and connect
/// their ranks, on 3 ranks (an odd count: no pairing hides a wrong count or root).
#[test]
fn every_release_connects_the_collectives_beyond_all_reduce() {
    let patterns = "all_gather,reduce_scatter,broadcast,reduce,gather,scatter";
    for (version, lib) in wheel_nccls() {
        let mut args = control_plane_args(&lib, "10");
        args.extend(["--patterns", patterns]);
        let o = mpirun(3, &args, &[], 90);
        let t = text(&o);
        assert_eq!(code(&o), CONTROL_PLANE_OK, "{version}:\n{t}");
        let want = format!(
            "CONTROL PLANE OK — REAL NCCL {version} · SIMULATED GPUS — init and connect of \
             {} on 3 rank(s)",
            patterns.replace(',', ", ")
        );
        assert!(t.lines().any(|l| l.starts_with(&want)), "{version}:\n{t}");
    }
}

/// The ordinary real path (no backend flag), pointed at the stand-in driver: the collectives
/// never run, so every data type and every pattern fails at verify, "wrote nothing", labelled;
/// never PASS.
#[test]
fn the_ordinary_real_path_on_simulated_gpus_never_passes() {
    let (version, lib) = wheel_nccls().pop().unwrap();
    let dir = stand_in::lib_dir();
    let ld = dir.display().to_string();
    let label = format!("REAL NCCL {version} · SIMULATED GPUS");
    for dtype in ["float", "half", "bfloat16", "double", "int32"] {
        let json = dir.join(format!("{dtype}.json"));
        let o = mpirun(
            2,
            &[
                "run",
                "--nccl-lib",
                lib.to_str().unwrap(),
                "--patterns",
                "all_reduce,all_to_all,send_recv_ring,send_recv_pairwise",
                "-d",
                dtype,
                "-b",
                "1K",
                "-e",
                "4K",
                "-n",
                "1",
                "-w",
                "0",
                "--timeout",
                "10",
                "--json",
                json.to_str().unwrap(),
            ],
            &[("LD_LIBRARY_PATH", &ld)],
            90,
        );
        let t = text(&o);
        assert_eq!(code(&o), 23, "{dtype}: want FAIL at verify\n{t}");
        assert!(!t.contains("PASS"), "{dtype}:\n{t}");
        assert!(
            t.contains(&format!("VERDICT: [{label}] FAIL at verify on ")),
            "{dtype}:\n{t}"
        );
        assert!(t.contains("wrote nothing"), "{dtype}:\n{t}");
        assert!(t.contains(&format!("# {label} run: ")), "{dtype}:\n{t}");
        for p in [
            "all_reduce",
            "all_to_all",
            "send_recv_ring",
            "send_recv_pairwise",
        ] {
            assert!(
                t.contains(&format!("# {p}, 2 ranks — {label}")),
                "{dtype}: {p}'s table\n{t}"
            );
            // One evidence line per pattern: its sizes with the same finding share it.
            assert!(
                t.lines()
                    .any(|l| l.contains(&format!("evidence: {p} 1024 B"))
                        && l.contains("the collective wrote nothing")),
                "{dtype}: {p}\n{t}"
            );
        }
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(doc["backend"], label.as_str(), "{dtype}");
        assert_eq!(doc["verdict"]["status"], "FAIL", "{dtype}");
        assert!(
            doc["verdict"]["line"]
                .as_str()
                .unwrap()
                .starts_with(&format!("[{label}] FAIL at verify")),
            "{dtype}: {}",
            doc["verdict"]["line"]
        );
    }
}

/// Bad input: a file that is not a libnccl, and nccl-smoke's own simulation of libnccl where
/// the real one is needed: each is refused at nccl-load, with the reason.
#[test]
fn bad_libraries_are_refused_at_nccl_load() {
    let dir = scratch("bad-lib");
    let not_nccl = dir.join("libnccl.so.2");
    std::fs::write(&not_nccl, b"not a shared library\n").unwrap();
    let o = mpirun(
        2,
        &[
            "run",
            "--backend",
            "control-plane",
            "--nccl-lib",
            not_nccl.to_str().unwrap(),
            "--timeout",
            "10",
        ],
        &[],
        60,
    );
    let t = text(&o);
    assert_eq!(code(&o), NCCL_LOAD, "{t}");
    assert!(t.contains("FAIL at nccl-load on rank 0"), "{t}");
    assert!(t.contains(not_nccl.to_str().unwrap()), "{t}");
    assert!(
        !t.contains("PASS") && !t.contains("CONTROL PLANE OK"),
        "{t}"
    );

    let sim = bin().parent().unwrap().join("libnccl.so");
    let o = mpirun(
        2,
        &[
            "run",
            "--backend",
            "control-plane",
            "--nccl-lib",
            sim.to_str().unwrap(),
            "--timeout",
            "10",
        ],
        &[],
        60,
    );
    let t = text(&o);
    assert_eq!(code(&o), NCCL_LOAD, "{t}");
    assert!(
        t.contains("--backend control-plane needs the real libnccl"),
        "{t}"
    );
    assert!(
        !t.contains("PASS") && !t.contains("CONTROL PLANE OK"),
        "{t}"
    );
}

/// What needs measurements is refused before any rank starts.
#[test]
fn measurements_are_refused_on_simulated_gpus() {
    let lib = wheel_nccl();
    for extra in [&["--repeat", "3"][..], &["--expect", "/dev/null"][..]] {
        let mut args = vec![
            "run",
            "--backend",
            "control-plane",
            "--nccl-lib",
            lib.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = run1(&args, &[]);
        let t = text(&o);
        assert_eq!(code(&o), 2, "{extra:?}: {t}");
        assert!(
            t.contains("--backend control-plane runs init and connect only"),
            "{t}"
        );
    }
}
