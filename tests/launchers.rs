//! The same 4-rank simulated run through every launcher nccl-smoke supports without a cluster
//! scheduler — mpirun (MPI), `nccl-smoke launch`, torchrun-style variables, Slurm's variables
//! without srun's MPI support, a Kubernetes indexed Job's — and the absences the TCP rendezvous
//! must name within the launch deadline: a rank that never starts, a wrong MASTER_PORT, rank 0
//! absent, two processes claiming one rank. (srun and sbatch on a real Slurm cluster:
//! tests/slurm.rs.)

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A port nothing listens on for as long as the socket returned lives: bound, never listening,
/// so a connection to it is refused and no other process can take it meanwhile (a port merely
/// found free was once taken by another test's listener, which then answered the rank).
fn refused_port() -> (socket2::Socket, u16) {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
    s.bind(&any.into()).unwrap();
    let port = s.local_addr().unwrap().as_socket().unwrap().port();
    (s, port)
}

fn sim_args(json: &Path, launch_s: &str) -> Vec<String> {
    [
        "run",
        "--backend",
        "sim",
        "-e",
        "16K",
        "-n",
        "3",
        "-w",
        "1",
        "--patterns",
        "all_reduce,send_recv_ring",
        "--stage-timeout",
        &format!("launch={launch_s}"),
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([json.display().to_string()])
    .collect()
}

fn hostname() -> String {
    let out = Command::new("hostname").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("no results file {}: {e}", p.display()));
    serde_json::from_str(&text).unwrap()
}

/// What must be the same whatever launched the job: verdict, rank count, and per row the
/// pattern, size, count and that every element was verified.
/// A results row's pattern, size, count, wrong elements and whether it was checked.
type Row = (String, u64, u64, u64, bool);

fn essence(doc: &Value) -> (String, usize, Vec<Row>) {
    let rows = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["pattern"].as_str().unwrap().to_string(),
                r["size_bytes"].as_u64().unwrap(),
                r["count"].as_u64().unwrap(),
                r["wrong"].as_u64().unwrap(),
                r["checked"].as_bool().unwrap(),
            )
        })
        .collect();
    (
        doc["verdict"]["status"].as_str().unwrap().to_string(),
        doc["fingerprint"]["ranks"].as_array().unwrap().len(),
        rows,
    )
}

fn all_passed(outs: &[Output]) {
    for (i, o) in outs.iter().enumerate() {
        assert_eq!(code(o), 0, "process {i}:\n{}", text(o));
    }
}

#[test]
fn one_run_through_every_launcher_gives_the_same_results_with_its_source_recorded() {
    require_sim();
    let dir = scratch("launchers");
    let mut docs: Vec<(&str, Value)> = Vec::new();

    // mpirun: MPI finds the ranks.
    let json = dir.join("mpirun.json");
    let o = mpirun(
        4,
        &sim_args(&json, "60")
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &[],
        120,
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    docs.push(("mpi", read_json(&json)));

    // nccl-smoke launch -n 4.
    let json = dir.join("launch.json");
    let mut cmd = Command::new(bin());
    cmd.args(["launch", "-n", "4"]).args(sim_args(&json, "60"));
    let o = bounded(cmd, 120);
    assert_eq!(code(&o), 0, "{}", text(&o));
    docs.push(("nccl-smoke launch", read_json(&json)));

    // torchrun-style variables.
    let json = dir.join("torchrun.json");
    let port = free_port();
    let ranks = (0..4).map(|r| torchrun(r, 4, port)).collect();
    all_passed(&start_world(ranks, &sim_args(&json, "60")));
    docs.push(("torchrun-style", read_json(&json)));

    // Slurm's variables, as srun --mpi=none sets them: the rendezvous is on the step's first
    // node (this host), on a port derived from the job and step ids.
    let json = dir.join("slurm.json");
    let job = (std::process::id() % 100_000).to_string();
    let ranks = (0..4)
        .map(|r| {
            vars(&[
                ("SLURM_PROCID", r.to_string()),
                ("SLURM_STEP_NUM_TASKS", "4".into()),
                ("SLURM_LOCALID", r.to_string()),
                ("SLURM_STEP_NODELIST", hostname()),
                ("SLURM_JOB_ID", job.clone()),
                ("SLURM_STEP_ID", "0".into()),
            ])
        })
        .collect();
    all_passed(&start_world(ranks, &sim_args(&json, "60")));
    docs.push(("Slurm srun", read_json(&json)));

    // A Kubernetes indexed Job: JOB_COMPLETION_INDEX, and the manifest's WORLD_SIZE and address.
    let json = dir.join("indexed.json");
    let port = free_port().to_string();
    let ranks = (0..4)
        .map(|r| {
            vars(&[
                ("JOB_COMPLETION_INDEX", r.to_string()),
                ("WORLD_SIZE", "4".into()),
                ("MASTER_ADDR", "localhost".into()),
                ("MASTER_PORT", port.clone()),
            ])
        })
        .collect();
    all_passed(&start_world(ranks, &sim_args(&json, "60")));
    docs.push(("Kubernetes indexed Job", read_json(&json)));

    // A build without the `mpi` feature, under mpirun (Open MPI's variables, loopback
    // rendezvous) and under `nccl-smoke launch`.
    let no_mpi = build_without_mpi();
    let json = dir.join("no-mpi-mpirun.json");
    let sim_dir = bin().parent().unwrap().display().to_string();
    let cmd = mpirun_command_of(
        &no_mpi,
        4,
        &sim_args(&json, "60"),
        &[("NCCL_SMOKE_SIM_DIR", &sim_dir)],
    );
    let o = bounded(cmd, 120);
    assert_eq!(code(&o), 0, "{}", text(&o));
    docs.push(("Open MPI", read_json(&json)));
    let json = dir.join("no-mpi-launch.json");
    let mut cmd = Command::new(&no_mpi);
    cmd.args(["launch", "-n", "4"])
        .args(sim_args(&json, "60"))
        .env("NCCL_SMOKE_SIM_DIR", bin().parent().unwrap());
    let o = bounded(cmd, 120);
    assert_eq!(code(&o), 0, "{}", text(&o));
    docs.push(("nccl-smoke launch", read_json(&json)));

    let reference = essence(&docs[0].1);
    assert_eq!(reference.0, "PASS");
    assert_eq!(reference.1, 4);
    assert_eq!(reference.2.len(), 2 * 12, "2 patterns × 8 B..16 KiB");
    for (want, doc) in &docs {
        assert_eq!(essence(doc), reference, "{want} differs from mpirun");
        let boot = &doc["fingerprint"]["bootstrap"];
        let (kind, source) = (
            boot["kind"].as_str().unwrap(),
            boot["source"].as_str().unwrap(),
        );
        if *want == "mpi" {
            assert_eq!(kind, "mpi", "{boot}");
            assert!(source.contains("Open MPI"), "{boot}");
        } else {
            assert_eq!(kind, "env", "{boot}");
            assert!(source.starts_with(want), "{want}: {boot}");
            assert!(boot["rendezvous"].as_str().is_some(), "{boot}");
        }
        // Local ranks as the launcher meant them: all four ranks on this one host.
        let locals: Vec<u64> = doc["fingerprint"]["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["local_rank"].as_u64().unwrap())
            .collect();
        assert_eq!(locals, [0, 1, 2, 3], "{want}");
    }
    assert!(leftovers_after_grace(&dir.display().to_string()).is_empty());
}

/// nccl-smoke built without the `mpi` feature (scripts/setup.sh builds it first; this only
/// brings it up to date), in `<target>/no-mpi`.
fn build_without_mpi() -> std::path::PathBuf {
    let target = bin().parent().unwrap().parent().unwrap().join("no-mpi");
    let o = bounded(
        {
            let mut c = Command::new(env!("CARGO"));
            c.current_dir(env!("CARGO_MANIFEST_DIR")).args([
                "build",
                "--release",
                "--no-default-features",
                "-p",
                "nccl-smoke",
                "--bin",
                "nccl-smoke",
                "--target-dir",
            ]);
            c.arg(&target);
            c
        },
        600,
    );
    assert_eq!(
        code(&o),
        0,
        "cargo build --no-default-features:\n{}",
        text(&o)
    );
    let b = target.join("release/nccl-smoke");
    let ldd = Command::new("ldd").arg(&b).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&ldd.stdout).contains("libmpi"),
        "the build without MPI links libmpi"
    );
    b
}

/// Runs a 4-rank torchrun-style world with the given ranks (rank number, port), launch
/// deadline 3 s; checks that no process is left behind; returns the outputs and the wall time.
fn absent(name: &str, ranks: &[(u32, u16)]) -> (Vec<Output>, Duration) {
    require_sim();
    let dir = scratch(name);
    let args = sim_args(&dir.join("r.json"), "3");
    let world = ranks
        .iter()
        .map(|&(r, port)| torchrun(r, 4, port))
        .collect();
    let start = Instant::now();
    let outs = start_world(world, &args);
    let took = start.elapsed();
    let tag = dir.display().to_string();
    assert!(
        leftovers_after_grace(&tag).is_empty(),
        "processes left behind: {:?}",
        leftovers(&tag)
    );
    (outs, took)
}

/// The verdict line each process printed.
fn fail_line(o: &Output) -> String {
    let t = text(o);
    t.lines()
        .find(|l| l.contains("FAIL at launch"))
        .unwrap_or_else(|| panic!("no launch failure in:\n{t}"))
        .to_string()
}

/// Within the 3 s launch deadline plus the worker's start and the supervisor's grace.
const BOUND: Duration = Duration::from_secs(12);

#[test]
fn a_rank_that_never_starts_is_named_by_rank_0_and_its_peers() {
    let port = free_port();
    let (outs, took) = absent("never-starts", &[(0, port), (1, port), (2, port)]);
    assert!(took < BOUND, "took {took:?}");
    for o in &outs {
        assert_eq!(code(o), 10, "launch's exit code:\n{}", text(o));
        let l = fail_line(o);
        assert!(l.contains("rank 3 never connected to rank 0"), "{l}");
    }
    assert!(fail_line(&outs[0]).contains("on rank 0"));
    // Ranks 1 and 2, failing on rank 0's host before the ranks met, reported there.
    let t0 = text(&outs[0]);
    let heard = [
        "# job: rank 1 (host ",
        "# job: rank 2 (host ",
        "# job: rank 3: no status line",
    ];
    assert!(heard.iter().all(|l| t0.contains(l)), "{t0}");
}

#[test]
fn a_wrong_master_port_is_named_on_both_sides() {
    let (_held, wrong) = refused_port();
    let port = free_port();
    let (outs, took) = absent("wrong-port", &[(0, port), (1, port), (2, wrong), (3, port)]);
    assert!(took < BOUND, "took {took:?}");
    let l = fail_line(&outs[2]);
    assert!(
        l.contains(&format!("could not reach rank 0 at 127.0.0.1:{wrong}"))
            && l.contains("MASTER_ADDR, MASTER_PORT"),
        "{l}"
    );
    assert!(fail_line(&outs[0]).contains("rank 2 never connected"));
    assert!(fail_line(&outs[3]).contains(&format!(
        "rank 0 at 127.0.0.1:{port} ended the rendezvous: rank 2 never connected"
    )));
}

#[test]
fn rank_0_absent_is_named_by_every_rank() {
    let port = free_port();
    let (outs, took) = absent("no-rank-0", &[(1, port), (2, port), (3, port)]);
    assert!(took < BOUND, "took {took:?}");
    for o in &outs {
        assert_eq!(code(o), 10);
        assert!(fail_line(o).contains("rank 0 is not running there"));
    }
}

#[test]
fn two_processes_claiming_one_rank_are_both_named() {
    // Rank 3 never comes, so the job cannot assemble before both claimants of rank 1 arrive.
    let port = free_port();
    let (outs, took) = absent("two-claim", &[(0, port), (1, port), (1, port), (2, port)]);
    assert!(took < BOUND, "took {took:?}");
    let l = fail_line(&outs[0]);
    assert!(l.contains("two processes claim rank 1: pid "), "{l}");
    assert!(l.matches(" on ").count() >= 2, "both named: {l}");
    // Both claimants are told; rank 2 may have come after rank 0 ended the rendezvous.
    for o in &outs[1..3] {
        assert!(
            fail_line(o).contains("two processes claim rank 1"),
            "{}",
            text(o)
        );
    }
    assert_eq!(code(&outs[3]), 10, "{}", text(&outs[3]));
}

#[test]
fn half_set_launcher_variables_are_refused_with_their_names() {
    require_sim();
    let dir = scratch("half-set");
    let args = sim_args(&dir.join("r.json"), "3");
    let outs = start_world(vec![vars(&[("RANK", "1".into())])], &args);
    let l = fail_line(&outs[0]);
    assert!(l.contains("RANK is set but WORLD_SIZE is not"), "{l}");
    let outs = start_world(
        vec![vars(&[("RANK", "0".into()), ("WORLD_SIZE", "2".into())])],
        &args,
    );
    let l = fail_line(&outs[0]);
    assert!(l.contains("MASTER_ADDR and MASTER_PORT"), "{l}");
}

#[test]
fn verdict_gives_a_results_files_line_and_code() {
    require_sim();
    let dir = scratch("verdict");
    let json = dir.join("r.json");
    let o = run1(
        &[
            "run",
            "--backend",
            "sim",
            "-e",
            "1K",
            "--json",
            json.to_str().unwrap(),
        ],
        &[("NCCL_SMOKE_SIM_FAULT", "init:error")],
    );
    assert_eq!(code(&o), 16, "{}", text(&o));
    let v = run1(&["verdict", json.to_str().unwrap()], &[]);
    assert_eq!(code(&v), 16, "{}", text(&v));
    assert!(
        String::from_utf8_lossy(&v.stdout).starts_with("FAIL at init on rank 0"),
        "{}",
        text(&v)
    );
    let not_results = dir.join("x.json");
    std::fs::write(&not_results, "{}").unwrap();
    let v = run1(&["verdict", not_results.to_str().unwrap()], &[]);
    assert_eq!(code(&v), 2, "{}", text(&v));
    assert!(
        text(&v).contains("not an nccl-smoke results file"),
        "{}",
        text(&v)
    );
}

/// Beyond 9 ranks the TCP bootstrap's stage barrier is a tree (`bootstrap::tree`): ranks 9 to
/// 11 reach rank 0 through ranks 1 and 2, every size's barrier goes through them, and the job
/// says which barrier it ran.
#[test]
fn a_job_beyond_the_fanout_barriers_through_a_tree() {
    let dir = scratch("tree");
    let json = dir.join("tree.json");
    let mut cmd = Command::new(bin());
    cmd.args(["launch", "-n", "12"]).args(sim_args(&json, "60"));
    let o = bounded(cmd, 120);
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    assert!(
        t.contains("; barrier: a tree of fan-out 8, 2 level(s) below rank 0"),
        "{t}"
    );
    let doc = read_json(&json);
    assert_eq!(doc["ranks"].as_array().map(Vec::len), Some(12), "{t}");
    assert!(
        doc["fingerprint"]["launcher"]
            .as_str()
            .is_some_and(|l| l.contains("a tree of fan-out 8")),
        "{doc}"
    );
}
