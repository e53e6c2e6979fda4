//! nccl-smoke under Slurm, on a single-node cluster of its own (scripts/slurm/cluster.sh in a
//! scratch folder, stopped by a guard even when an assertion fails): `srun --mpi=pmix`,
//! `srun --mpi=none` (ranks from Slurm's environment), the shipped batch script under
//! `sbatch --wait`, a fault on one task, and the shipped HealthCheckProgram draining and resuming
//! the node. The three healthy runs must give the same sweep on
//! the same four ranks, every size verified; the failing one must name the rank and give the
//! init stage's exit code. Needs slurm-wlm and munge (scripts/setup.sh installs them) and root.

mod common;
use common::*;
use nccl_smoke::report::results::{self, RankState, ResultsDoc, Status};
use nccl_smoke::stage::Stage;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The whole tier's budget, cluster start and stop included.
const TIER_LIMIT: Duration = Duration::from_secs(180);
/// One srun or sbatch, bounded.
const STEP_LIMIT_S: u32 = 60;
const NTASKS: usize = 4;

/// The sweep every case runs: short, two patterns, checked.
const SWEEP: &[&str] = &[
    "--backend",
    "sim",
    "--patterns",
    "all_reduce,all_to_all",
    "-e",
    "64K",
    "-f",
    "4",
    "-n",
    "5",
    "-w",
    "1",
    "--timeout",
    "10",
];

/// A running test cluster; dropping it stops every daemon cluster.sh started.
struct Cluster {
    dir: PathBuf,
    /// (daemon, PID) as cluster.sh recorded them.
    daemons: Vec<(String, u32)>,
    stopped: bool,
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        let missing: Vec<&str> = ["srun", "sbatch", "slurmctld", "slurmd", "munged"]
            .into_iter()
            .filter(|b| !on_path(b))
            .collect();
        assert!(
            missing.is_empty(),
            "Slurm is not installed (missing {}): run scripts/setup.sh, which installs slurm-wlm \
             and munge",
            missing.join(", ")
        );
        // The guard exists before the start, so a start that fails half-way is cleaned up.
        let mut c = Cluster {
            dir: dir.to_path_buf(),
            daemons: Vec::new(),
            stopped: false,
        };
        let o = c.script("start");
        assert_eq!(code(&o), 0, "cluster.sh start failed:\n{}", text(&o));
        for d in ["munged", "slurmctld", "slurmd"] {
            let f = dir.join("run").join(format!("{d}.pid"));
            let pid = std::fs::read_to_string(&f)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()))
                .trim()
                .parse()
                .unwrap();
            c.daemons.push((d.to_string(), pid));
        }
        c
    }

    fn script(&self, verb: &str) -> Output {
        let mut cmd = Command::new("bash");
        cmd.arg(Path::new(ROOT).join("scripts/slurm/cluster.sh"))
            .arg(verb)
            .arg(&self.dir);
        bounded(cmd, 90)
    }

    fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }

    /// A Slurm client command aimed at this cluster only: no Slurm or launcher variables of
    /// whatever job runs the tests, Open MPI over TCP (nothing left in /dev/shm).
    fn command(&self, program: &str, cwd: &Path) -> Command {
        let mut cmd = Command::new(program);
        for (k, _) in std::env::vars() {
            if [
                "SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "PMIX_", "PMI_", "OMPI_",
            ]
            .iter()
            .any(|p| k.starts_with(p))
            {
                cmd.env_remove(k);
            }
        }
        cmd.current_dir(cwd)
            .env("SLURM_CONF", self.conf())
            .env("OMPI_MCA_btl", "self,tcp")
            .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
        cmd
    }

    /// `srun --mpi=MPI -O -n 4 nccl-smoke run SWEEP --json JSON extra…`, with `export`
    /// (`--export=ALL,K=V`) when given.
    fn srun(&self, mpi: &str, json: &Path, export: Option<&str>) -> Output {
        let mut cmd = self.command("srun", &self.dir);
        cmd.arg(format!("--mpi={mpi}"))
            .args(["-O", "-n", &NTASKS.to_string(), "--immediate=30"]);
        if let Some(e) = export {
            cmd.arg(format!("--export=ALL,{e}"));
        }
        cmd.arg(bin())
            .arg("run")
            .args(SWEEP)
            .arg("--json")
            .arg(json);
        bounded(cmd, STEP_LIMIT_S)
    }

    /// `sbatch --wait` of scripts/slurm/nccl-smoke.sbatch from `cwd`, 4 tasks on the node, the
    /// sweep passed through NCCL_SMOKE_ARGS; `env` added.
    fn sbatch(&self, cwd: &Path, env: &[(&str, &str)]) -> Output {
        let mut cmd = self.command("sbatch", cwd);
        cmd.args([
            "--wait",
            "--parsable",
            "-N",
            "1",
            &format!("--ntasks-per-node={NTASKS}"),
        ])
        .arg(Path::new(ROOT).join("scripts/slurm/nccl-smoke.sbatch"))
        .env("NCCL_SMOKE", bin())
        .env("NCCL_SMOKE_ARGS", SWEEP.join(" "));
        for (k, v) in env {
            cmd.env(k, v);
        }
        bounded(cmd, STEP_LIMIT_S)
    }

    /// Stops the cluster (once) and returns cluster.sh's output.
    fn stop(&mut self) -> Output {
        self.stopped = true;
        self.script("stop")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.stopped {
            let o = self.stop();
            if code(&o) != 0 {
                eprintln!("cluster.sh stop failed:\n{}", text(&o));
            }
        }
    }
}

fn on_path(b: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .any(|d| d.join(b).is_file())
}

/// Whether `pid` is still a process (a zombie waiting for its reaper counts as gone).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Every string the document gives under a key naming the launcher or the bootstrap.
fn bootstrap_description(v: &Value) -> String {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let k = k.to_ascii_lowercase();
                    if k.contains("launcher") || k.contains("bootstrap") {
                        match x {
                            Value::String(s) => out.push(s.clone()),
                            other => out.push(other.to_string()),
                        }
                    } else {
                        walk(x, out);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out.join(" | ")
}

/// What two healthy runs of the same sweep must share: settings, rows (pattern, sizes, counts,
/// type, reduction) and ranks.
#[derive(Debug, PartialEq)]
struct Shape {
    config: results::RunConfig,
    rows: Vec<Value>,
    ranks: Vec<u32>,
    backend: String,
}

/// Reads a healthy run's results file, checks it is a verified 4-rank PASS, and returns its
/// shape and its bootstrap description.
fn healthy(json: &Path, case: &str, out: &str) -> (Shape, String) {
    let doc: ResultsDoc =
        results::load(json).unwrap_or_else(|e| panic!("{case}: {e}\noutput:\n{out}"));
    let raw: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!(
        doc.verdict.status,
        Status::Pass,
        "{case}: {:?}",
        doc.verdict
    );
    assert_eq!(doc.verdict.exit_code, 0, "{case}");
    assert!(doc.simulated, "{case}: not labelled simulated");
    assert!(doc.failures.is_empty(), "{case}: {:?}", doc.failures);
    assert_eq!(doc.fingerprint.ranks.len(), NTASKS, "{case}: ranks");
    assert_eq!(doc.ranks.len(), NTASKS, "{case}: rank table");
    for r in &doc.ranks {
        assert_eq!(r.state, RankState::Finished, "{case}: rank {}", r.rank);
    }
    assert!(!doc.results.is_empty(), "{case}: no rows");
    for r in &doc.results {
        assert!(
            r.checked && r.wrong == 0,
            "{case}: {} {} B",
            r.pattern,
            r.size_bytes
        );
        assert_eq!(r.rank_avg_us.len(), NTASKS, "{case}: per-rank times");
    }
    let mut ranks: Vec<u32> = doc.fingerprint.ranks.iter().map(|r| r.rank).collect();
    ranks.sort();
    let rows = raw["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let pick = |k: &str| r.get(k).cloned().unwrap_or(Value::Null);
            Value::Array(
                [
                    "pattern",
                    "size_bytes",
                    "count",
                    "dtype",
                    "redop",
                    "requested_bytes",
                ]
                .map(pick)
                .to_vec(),
            )
        })
        .collect();
    let shape = Shape {
        config: doc.config.clone(),
        rows,
        ranks,
        backend: doc.backend.clone(),
    };
    (shape, bootstrap_description(&raw))
}

#[test]
fn srun_pmix_srun_env_sbatch_and_a_fault() {
    require_sim();
    let t0 = Instant::now();
    let dir = scratch("slurm");
    let tag = dir.display().to_string();
    let mut cluster = Cluster::start(&dir.join("cluster"));
    eprintln!("cluster up in {:.1}s", t0.elapsed().as_secs_f64());

    // a. srun with Slurm's PMIx server: nccl-smoke's MPI takes its ranks from it.
    let a_json = dir.join("A.json");
    let o = cluster.srun("pmix", &a_json, None);
    let a_out = text(&o);
    assert_eq!(code(&o), 0, "a (srun --mpi=pmix):\n{a_out}");
    assert!(
        a_out.contains("PASS [SIMULATED] — 2 patterns × "),
        "a:\n{a_out}"
    );
    let (a, a_boot) = healthy(&a_json, "a (srun --mpi=pmix)", &a_out);
    eprintln!(
        "a: srun --mpi=pmix done at {:.1}s, bootstrap: {a_boot}",
        t0.elapsed().as_secs_f64()
    );
    assert!(a_boot.contains("Open MPI"), "a: bootstrap {a_boot}");

    // c. The shipped batch script; its exit code is the verdict's.
    let c_dir = dir.join("batch");
    std::fs::create_dir_all(&c_dir).unwrap();
    let o = cluster.sbatch(&c_dir, &[]);
    let job = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let c_log = std::fs::read_to_string(c_dir.join(format!("nccl-smoke-{job}.out")))
        .unwrap_or_else(|e| format!("(no job output: {e})"));
    assert_eq!(
        code(&o),
        0,
        "c (sbatch):\n{}\njob output:\n{c_log}",
        text(&o)
    );
    let c_json = c_dir.join(format!("results/nccl-smoke-{job}.json"));
    assert!(c_json.is_file(), "c: no {}:\n{c_log}", c_json.display());
    let (c, c_boot) = healthy(&c_json, "c (sbatch)", &c_log);
    eprintln!(
        "c: sbatch job {job} done at {:.1}s, bootstrap: {c_boot}",
        t0.elapsed().as_secs_f64()
    );
    assert!(c_boot.contains("Open MPI"), "c: bootstrap {c_boot}");
    assert_eq!(a, c, "a (srun) and c (sbatch) differ");

    // d. An init error on task 2, exported through srun. Slurm's PMIx plugin kills the step
    // (SIGKILL) once the failed rank ends, so srun's own status is not the verdict's code; the
    // verdict and its code are in the output and the results file, and the batch script
    // returns that code.
    let init = Stage::Init.exit_code() as i32;
    let d_json = dir.join("D.json");
    let o = cluster.srun("pmix", &d_json, Some("NCCL_SMOKE_SIM_FAULT=init@2"));
    let d_out = text(&o);
    assert_ne!(code(&o), 0, "d (srun, fault):\n{d_out}");
    assert!(
        d_out.contains("FAIL at init on rank 2 (host "),
        "d: rank 2 not named:\n{d_out}"
    );
    let doc = results::load(&d_json).unwrap_or_else(|e| panic!("d: {e}\n{d_out}"));
    assert_eq!(doc.verdict.status, Status::Fail, "d");
    assert_eq!(doc.verdict.stage, Some(Stage::Init), "d");
    assert_eq!(doc.verdict.ranks, vec![2], "d");
    assert_eq!(doc.verdict.exit_code as i32, init, "d");
    let d_dir = dir.join("batch-fault");
    std::fs::create_dir_all(&d_dir).unwrap();
    let o = cluster.sbatch(&d_dir, &[("NCCL_SMOKE_SIM_FAULT", "init@2")]);
    let job = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let d_log = std::fs::read_to_string(d_dir.join(format!("nccl-smoke-{job}.out")))
        .unwrap_or_else(|e| format!("(no job output: {e})"));
    assert_eq!(
        code(&o),
        init,
        "d (sbatch, fault): not the init stage's code:\n{}\njob output:\n{d_log}",
        text(&o)
    );
    assert!(
        d_log.contains("FAIL at init on rank 2 (host "),
        "d:\n{d_log}"
    );
    eprintln!(
        "d: fault: srun and sbatch done at {:.1}s, exit {init}",
        t0.elapsed().as_secs_f64()
    );

    // b. srun without MPI: each task takes its rank from SLURM_PROCID and meets the others
    // over TCP on the step's first node.
    let b_json = dir.join("B.json");
    let o = cluster.srun("none", &b_json, None);
    let b_out = text(&o);
    assert_eq!(
        code(&o),
        0,
        "b (srun --mpi=none, ranks from Slurm's environment):\n{b_out}"
    );
    let (b, b_boot) = healthy(&b_json, "b (srun --mpi=none)", &b_out);
    eprintln!(
        "b: srun --mpi=none done at {:.1}s, bootstrap: {b_boot}",
        t0.elapsed().as_secs_f64()
    );
    assert!(b_boot.contains("Slurm"), "b: bootstrap {b_boot}");
    assert_eq!(a, b, "a (srun --mpi=pmix) and b (srun --mpi=none) differ");

    // e. The shipped HealthCheckProgram, as slurmd runs it (outside any job, `launch` on the
    // node's GPUs): a failing node is drained with the verdict, and resumed once it passes.
    let e_dir = dir.join("healthcheck");
    let prom = e_dir.join("nccl_smoke.prom");
    let healthcheck = |fault: Option<&str>| {
        let mut cmd = cluster.command("bash", &dir);
        cmd.arg(Path::new(ROOT).join("scripts/slurm/healthcheck.sh"))
            .env("NCCL_SMOKE", bin())
            .env("NCCL_SMOKE_ARGS", SWEEP.join(" "))
            .env("NCCL_SMOKE_GPUS", NTASKS.to_string())
            .env("NCCL_SMOKE_DIR", &e_dir)
            .env("NCCL_SMOKE_PROM", &prom)
            .env_remove("NCCL_SMOKE_SIM_FAULT");
        if let Some(f) = fault {
            cmd.env("NCCL_SMOKE_SIM_FAULT", f);
        }
        bounded(cmd, STEP_LIMIT_S)
    };
    let node = || {
        let mut cmd = cluster.command("scontrol", &dir);
        cmd.args(["show", "node"]);
        text(&bounded(cmd, 30))
    };
    let o = healthcheck(Some("init@2"));
    let shown = node();
    assert_eq!(code(&o), init, "e (health check, fault):\n{}", text(&o));
    assert!(
        shown.contains("DRAIN")
            && shown.contains(&format!(
                "Reason=nccl-smoke: exit {init}: VERDICT: FAIL at init on rank 2 (host "
            )),
        "e: the node is not drained with the verdict:\n{shown}"
    );
    let metrics = std::fs::read_to_string(&prom).unwrap_or_default();
    assert!(
        metrics.contains("nccl_smoke_failed_stage{stage=\"init\"} 1"),
        "e: {metrics}"
    );
    let o = healthcheck(None);
    let shown = node();
    assert_eq!(code(&o), 0, "e (health check):\n{}", text(&o));
    assert!(
        !shown.contains("DRAIN") && !shown.contains("Reason=nccl-smoke"),
        "e: the node was not resumed after a pass:\n{shown}"
    );
    let metrics = std::fs::read_to_string(&prom).unwrap_or_default();
    assert!(
        metrics.contains("nccl_smoke_verdict{status=\"PASS\"} 1"),
        "e: {metrics}"
    );
    eprintln!(
        "e: health check drained and resumed the node by {:.1}s",
        t0.elapsed().as_secs_f64()
    );

    // Nothing left: the daemons (by the PIDs cluster.sh recorded), nor any nccl-smoke.
    let daemons = cluster.daemons.clone();
    let o = cluster.stop();
    assert_eq!(code(&o), 0, "cluster.sh stop:\n{}", text(&o));
    for (d, pid) in &daemons {
        assert!(!alive(*pid), "{d} (pid {pid}) still runs after stop");
    }
    let left = leftovers_after_grace(&bin().display().to_string());
    assert!(left.is_empty(), "nccl-smoke processes left: {left:?}");
    let left = leftovers_after_grace(&tag);
    assert!(
        left.is_empty(),
        "processes of the test cluster left: {left:?}"
    );

    let took = t0.elapsed();
    eprintln!("slurm tier: {:.1}s", took.as_secs_f64());
    assert!(took < TIER_LIMIT, "the Slurm tier took {took:?}");
}
