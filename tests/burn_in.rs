//! Burn-in (`--repeat N`, `--duration`): an element flipped on one rank once every 10 passes
//! of a 100-pass run is laid to exactly that rank's GPU and host; `--duration` runs passes until
//! its time is up; Ctrl-C names the GPU that went wrong so far; and a run killed at any moment
//! leaves a results file that reads back with its tally.

mod common;
use common::*;
use nccl_smoke::report::results::{self, ResultsDoc, Status};
use nccl_smoke::stage::Stage;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// 2 ranks of the simulation, all_reduce from 8 B to 4 KiB (10 sizes), 3 iterations.
const SWEEP: &[&str] = &[
    "run",
    "--backend",
    "sim",
    "-e",
    "4K",
    "--patterns",
    "all_reduce",
    "-n",
    "3",
    "-w",
    "1",
    "--timeout",
    "10",
];

/// One element of rank 1's 1 KiB receive buffer flipped in every 10th run of 1 KiB operations.
const FLAKY: (&str, &str) = ("NCCL_SMOKE_SIM_FAULT", "verify@1:flip=1024/10");

fn launch(extra: &[&str], json: &Path) -> Command {
    let mut cmd = Command::new(bin());
    cmd.args(["launch", "-n", "2"])
        .args(SWEEP)
        .args(extra)
        .arg("--json")
        .arg(json)
        .env_remove("NCCL_SMOKE_SIM_FAULT");
    cmd
}

#[test]
fn a_hundred_passes_name_the_one_gpu_that_flips_an_element_every_tenth() {
    require_sim();
    let dir = scratch("burn-in-flaky");
    let json = dir.join("run.json");
    let mut cmd = launch(&["--repeat", "100"], &json);
    cmd.env(FLAKY.0, FLAKY.1);
    let o = bounded(cmd, 300);
    let t = text(&o);
    assert_eq!(code(&o), Stage::Verify.exit_code() as i32, "{t}");
    let doc = results::load(&json).unwrap();
    let tally = doc.burn_in.as_ref().expect("no burn-in tally");
    assert_eq!(tally.passes, 100, "{t}");
    let gpu1 = &doc.fingerprint.ranks[1].device;
    let r1 = &tally.ranks[1];
    assert_eq!((r1.rank, r1.gpu.as_str()), (1, gpu1.uuid.as_str()));
    assert_eq!(r1.bus_id, gpu1.bus_id);
    assert_eq!((r1.wrong_samples, r1.wrong_elements), (10, 10), "{t}");
    assert!(
        r1.wrong_passes.windows(2).all(|w| w[1] - w[0] == 10),
        "{:?}",
        r1.wrong_passes
    );
    assert_eq!(tally.ranks[0].wrong_samples, 0, "{t}");
    assert_eq!(r1.samples, 1000, "{t}");
    // Named at the end: the GPU and its host, in the tally's line and the failure's evidence.
    let line = format!(
        "# burn-in: wrong data: rank 1 (host {}) GPU {} [{}]: 10 wrong element(s) in 10 of 1000",
        doc.fingerprint.ranks[1].host, gpu1.uuid, gpu1.bus_id
    );
    assert!(t.contains(&line), "no '{line}':\n{t}");
    assert!(t.contains("wrong data from 1 GPU(s)"), "{t}");
    assert!(
        t.contains(&format!("#   evidence: burn-in: GPU {} ", gpu1.uuid)),
        "{t}"
    );
    assert_eq!(doc.verdict.ranks, vec![1], "{:?}", doc.verdict);
    // Every size is one row of 100 repeats, its wrong elements summed.
    assert_eq!(doc.results.len(), 10);
    assert!(doc.results.iter().all(|r| r.repeats.len() == 100));
    let wrong: u64 = doc.results.iter().map(|r| r.wrong).sum();
    assert_eq!(wrong, 10);
}

#[test]
fn a_duration_runs_passes_until_it_is_up() {
    require_sim();
    let dir = scratch("burn-in-duration");
    let json = dir.join("run.json");
    let o = bounded(launch(&["--duration", "2s"], &json), 120);
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    let doc = results::load(&json).unwrap();
    let passes = doc.burn_in.as_ref().expect("no tally").passes;
    assert!(passes >= 2, "{passes} pass(es) in 2 s:\n{t}");
    assert!(
        t.contains(&format!("median of {passes} repeats")),
        "{passes}:\n{t}"
    );
    assert!(doc.results.iter().all(|r| r.repeats.len() as u64 == passes));
    assert_eq!(doc.verdict.status, Status::Pass);
    // A burn-in with --budget is refused, as is --duration with --repeat.
    for clash in [
        &["--duration", "2s", "--budget", "10s"][..],
        &["--duration", "2s", "--repeat", "3"][..],
    ] {
        let o = run1(&[&["run", "--backend", "sim"][..], clash].concat(), &[]);
        assert_eq!(code(&o), 2, "{clash:?}: {}", text(&o));
        assert!(text(&o).contains("cannot be used with"), "{}", text(&o));
    }
}

/// A burn-in started in its own process group, output to `out`.
fn start(json: &Path, out: &Path) -> (Child, std::path::PathBuf) {
    require_sim();
    let mut cmd = launch(&["--duration", "60s"], json);
    cmd.env(FLAKY.0, FLAKY.1)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(Stdio::null());
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    (cmd.spawn().unwrap(), out.to_path_buf())
}

/// Waits until the results file holds a tally with `passes` passes done.
fn wait_for_passes(json: &Path, passes: u64, child: &mut Child) -> ResultsDoc {
    let start = Instant::now();
    loop {
        if let Ok(d) = results::load(json)
            && d.burn_in.as_ref().is_some_and(|b| b.passes >= passes)
        {
            return d;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60) && child.try_wait().unwrap().is_none(),
            "the burn-in did not reach {passes} passes"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_names_the_gpu_that_went_wrong_so_far() {
    let dir = scratch("burn-in-ctrl-c");
    let json = dir.join("run.json");
    let (mut child, out) = start(&json, &dir.join("out.txt"));
    // Pass 10 holds the first flipped element (the 10th run of 1 KiB operations).
    wait_for_passes(&json, 11, &mut child);
    signal("-INT", &child.id().to_string());
    let status = child.wait().unwrap();
    let t = std::fs::read_to_string(&out).unwrap();
    assert_eq!(status.code(), Some(130), "{t}");
    let doc = results::load(&json).unwrap();
    assert_eq!(doc.verdict.status, Status::Cancelled, "{t}");
    let gpu1 = &doc.fingerprint.ranks[1].device.uuid;
    assert!(
        t.lines()
            .any(|l| l.starts_with("# burn-in: wrong data: rank 1 ") && l.contains(gpu1.as_str())),
        "Ctrl-C did not name rank 1's GPU:\n{t}"
    );
    assert!(t.contains("CANCELLED — "), "{t}");
}

#[test]
fn a_burn_in_killed_at_any_moment_leaves_a_file_that_reads_back() {
    for (i, after_ms) in [300u64, 1200, 2500].into_iter().enumerate() {
        let dir = scratch(&format!("burn-in-kill-{i}"));
        let json = dir.join("run.json");
        let (mut child, _) = start(&json, &dir.join("out.txt"));
        std::thread::sleep(Duration::from_millis(after_ms));
        signal("-KILL", &format!("-{}", child.id()));
        let _ = child.wait();
        let doc = match results::load(&json) {
            Ok(d) => d,
            // Killed before rank 0 opened its file: nothing was measured, nothing is lost.
            Err(_) if !json.exists() => continue,
            Err(e) => panic!("killed after {after_ms} ms: {e}"),
        };
        // Whatever a supervisor that outlived its worker by a moment made of it: not a pass.
        assert_ne!(doc.verdict.status, Status::Pass, "after {after_ms} ms");
        if let Some(b) = &doc.burn_in {
            // The tally and the rows were sent together: no pass counted that has no row.
            let most = doc.results.iter().map(|r| r.repeats.len() as u64).max();
            assert!(most.unwrap_or(0) >= b.passes, "after {after_ms} ms: {b:?}");
            let samples: u64 = b.ranks.iter().map(|r| r.samples).sum();
            let rows: u64 = doc.results.iter().map(|r| r.repeats.len() as u64).sum();
            assert_eq!(samples, rows * 2, "after {after_ms} ms");
        }
    }
}
