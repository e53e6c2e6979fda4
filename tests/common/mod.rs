//! Helpers for tests that start real processes: mpirun, the built binary, the libraries.
#![allow(dead_code)]

mod world;
#[allow(unused_imports)]
pub use world::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nccl-smoke"))
}

/// The real libnccl.so.2 of every nvidia-nccl-cu12 release scripts/setup.sh unpacked
/// (`.deps/nccl/<version>/`), as (version, path), oldest first.
pub fn wheel_nccls() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/nccl");
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(&root)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| {
                    let v = e.file_name().to_string_lossy().into_owned();
                    (v, e.path().join("nvidia/nccl/lib/libnccl.so.2"))
                })
                .filter(|(_, p)| p.exists())
                .collect()
        })
        .unwrap_or_default();
    out.sort_by_key(|(v, _)| {
        v.split('.')
            .map(|n| n.parse::<u32>().unwrap_or(0))
            .collect::<Vec<_>>()
    });
    assert!(
        !out.is_empty(),
        "no NCCL wheel under {}: run scripts/setup.sh first",
        root.display()
    );
    out
}

/// The oldest real libnccl.so.2 set up.
pub fn wheel_nccl() -> PathBuf {
    wheel_nccls().remove(0).1
}

/// Fails loudly when the simulation libraries were not built beside the binary.
pub fn require_sim() {
    let dir = bin().parent().unwrap().to_path_buf();
    assert!(
        dir.join("libnccl.so").exists() && dir.join("libcuda.so").exists(),
        "simulation libraries missing in {}: run `cargo build --release --workspace` first",
        dir.display()
    );
}

/// A fresh scratch folder for one test. The first call of a test binary removes the scratch
/// folders of test processes that are gone (their pid is in the name), so that a day of test
/// runs does not fill the temp directory.
pub fn scratch(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(|| {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix("nccl-smoke-test.")
                .and_then(|r| r.split('.').next())
                .and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(|p| !nccl_smoke::ffi::os::pid_alive(p)) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    });
    let d = std::env::temp_dir().join(format!(
        "nccl-smoke-test.{}.{}.{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst),
        name
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `mpirun -np N nccl-smoke <args>` (Open MPI, as root allowed, oversubscribed), bounded
/// by `limit_s` seconds of wall time so a broken test cannot hang the suite. mpirun gets a
/// process group of its own: when it tears a job down it may signal its whole group.
///
/// Open MPI 4.1's mpirun itself sometimes dies of SIGSEGV while tearing down a job whose
/// processes ended without MPI_Finalize (in `PMIx_server_finalize`, or in
/// `pmix_server_log_fn` when a peer's help message arrives mid-teardown) — after every rank has
/// given its verdict. Such a run says nothing about nccl-smoke, so it is run again, up to
/// [`LAUNCHER_RETRIES`] times (a rank hung in teardown and then killed, as the fault matrix's
/// finalize hangs are, makes it likely: two crashes in a row were seen); the ranks' own crashes
/// are never retried.
pub fn mpirun(np: u32, args: &[&str], env: &[(&str, &str)], limit_s: u32) -> Output {
    let mut out = mpirun_once(np, args, env, limit_s);
    for attempt in 1..=LAUNCHER_RETRIES {
        if !launcher_crashed(&out) {
            break;
        }
        eprintln!(
            "mpirun itself crashed (Open MPI teardown); running the case again ({attempt} of \
             {LAUNCHER_RETRIES}):\n{}",
            text(&out)
        );
        out = mpirun_once(np, args, env, limit_s);
    }
    out
}

/// How many times [`mpirun`] runs a case again after mpirun itself crashed.
pub const LAUNCHER_RETRIES: u32 = 3;

/// `kill SIG -- TARGET` by bash's builtin: a negative target is a process group. Not procps'
/// `kill` (4.0.2 here), which took `kill -KILL -PGID` for more than that group: the test
/// machine's other processes died with it.
pub fn signal(sig: &str, target: &str) {
    assert!(
        target
            .trim_start_matches('-')
            .parse::<u32>()
            .is_ok_and(|p| p > 1),
        "not a pid or process group: {target}"
    );
    let _ = Command::new("bash")
        .args(["-c", &format!("kill {sig} -- {target}")])
        .status();
}

/// Whether mpirun died of a signal with its own frames in the backtrace Open MPI printed.
pub fn launcher_crashed(o: &Output) -> bool {
    let err = String::from_utf8_lossy(&o.stderr);
    o.status.code().is_none()
        && err.contains("*** Process received signal ***")
        && err
            .lines()
            .any(|l| l.contains("mpirun(+") || l.contains("libopen-rte.so"))
}

/// `mpirun` of the built binary on `np` local ranks, as root, over TCP (no shared-memory
/// BTL: nothing of Open MPI's is left in /dev/shm), with `env` set and forwarded.
pub fn mpirun_command<S: AsRef<std::ffi::OsStr>>(
    np: u32,
    args: &[S],
    env: &[(&str, &str)],
) -> Command {
    mpirun_command_of(&bin(), np, args, env)
}

/// [`mpirun_command`] of another build of nccl-smoke.
pub fn mpirun_command_of<S: AsRef<std::ffi::OsStr>>(
    binary: &Path,
    np: u32,
    args: &[S],
    env: &[(&str, &str)],
) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.arg("--oversubscribe")
        .arg("--bind-to")
        .arg("none")
        .arg("-np")
        .arg(np.to_string());
    for (k, _) in env {
        cmd.arg("-x").arg(k);
    }
    cmd.arg(binary).args(args);
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_btl", "self,tcp")
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// `run` arguments for a simulated all_reduce sweep long enough to be interrupted while it is
/// under way (64 KiB to 64 MiB), writing `json`.
pub fn long_sweep_args(json: &str) -> Vec<String> {
    [
        "run",
        "--backend",
        "sim",
        "--patterns",
        "all_reduce",
        "-b",
        "64K",
        "-e",
        "64M",
        "-n",
        "20",
        "-w",
        "1",
        "--json",
        json,
    ]
    .map(String::from)
    .to_vec()
}

fn mpirun_once(np: u32, args: &[&str], env: &[(&str, &str)], limit_s: u32) -> Output {
    bounded(mpirun_command(np, args, env), limit_s)
}

/// Runs `cmd` in its own process group; kills the group after `limit_s` seconds.
///
/// Never blocks past its bound: every process `cmd` starts is noted while it runs (a worker
/// has a process group of its own, and a launcher's ranks may too), so that all of them are
/// killed at the limit, and the output is read only until a grace period after `cmd` ended.
/// Anything `cmd` started that still holds its output open then was left behind: it is
/// killed, and the test fails naming it (a run must leave nothing running).
pub fn bounded(mut cmd: Command, limit_s: u32) -> Output {
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    cmd.process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    let mut child = cmd
        .spawn()
        .expect("could not start (is openmpi-bin installed? run scripts/setup.sh)");
    let pid = child.id();
    let out = Drain::start(child.stdout.take().unwrap());
    let err = Drain::start(child.stderr.take().unwrap());
    let start = Instant::now();
    let mut family = Family::default();
    let mut noted = start;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        // Twice a second: reading /proc is not free on a loaded two-core machine.
        if noted.elapsed() >= Duration::from_millis(500) {
            family.note(pid);
            noted = Instant::now();
        }
        if start.elapsed().as_secs() >= u64::from(limit_s) {
            family.note(pid);
            // The group, and the process itself by its pid: procps' `kill -KILL -PGID` left
            // a hung mpirun alive here (14 minutes past its 90 s bound, the suite waiting on it).
            signal("-KILL", &format!("-{pid}"));
            let _ = child.kill();
            family.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let grace = Instant::now() + Duration::from_secs(20);
    while !(out.done() && err.done()) && Instant::now() < grace {
        std::thread::sleep(Duration::from_millis(50));
    }
    if !(out.done() && err.done()) {
        let left: Vec<String> = family
            .alive()
            .map(|(pid, line)| format!("{pid} {line}"))
            .collect();
        family.kill();
        panic!(
            "{:?} ended {} but processes it started still held its output open 20 s later \
             (killed now): {left:#?}\n--- its output so far ---\n{}\n--- stderr ---\n{}",
            cmd.get_program(),
            status,
            String::from_utf8_lossy(&out.take()),
            String::from_utf8_lossy(&err.take())
        );
    }
    Output {
        status,
        stdout: out.take(),
        stderr: err.take(),
    }
}

/// A pipe read to its end on a thread of its own, which can be given up on.
struct Drain {
    buf: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Drain {
    fn start(mut from: impl std::io::Read + Send + 'static) -> Drain {
        let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (b, d) = (buf.clone(), done.clone());
        std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            loop {
                match from.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => b.lock().unwrap().extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            d.store(true, Ordering::SeqCst);
        });
        Drain { buf, done }
    }

    fn done(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }

    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.buf.lock().unwrap())
    }
}

/// Every process seen descending from a command while it ran: (pid, command line).
#[derive(Default)]
struct Family(std::collections::BTreeMap<u32, String>);

impl Family {
    /// Adds the descendants of `root` living now (from /proc's parent links).
    fn note(&mut self, root: u32) {
        let mut parent_of = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // pid (comm) state ppid ...: comm may hold spaces and parentheses.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
        let mut frontier = vec![root];
        while let Some(p) = frontier.pop() {
            for &(c, pp) in &parent_of {
                if pp == p && !self.0.contains_key(&c) {
                    self.0.insert(c, cmdline(c));
                    frontier.push(c);
                }
            }
        }
    }

    /// Those still alive with the command line they had (a reused pid is left alone).
    fn alive(&self) -> impl Iterator<Item = (&u32, &String)> {
        self.0
            .iter()
            .filter(|(pid, line)| !line.is_empty() && cmdline(**pid) == **line)
    }

    fn kill(&self) {
        for (pid, _) in self.alive() {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
        }
    }
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

/// Runs the binary directly (one rank, no launcher).
pub fn run1(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin());
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    bounded(cmd, 120)
}

pub fn text(o: &Output) -> String {
    format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Processes whose command line mentions `tag` (a test's unique scratch path).
pub fn leftovers(tag: &str) -> Vec<String> {
    let out = Command::new("pgrep").arg("-af").arg(tag).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains("pgrep"))
        .map(String::from)
        .collect()
}

/// Waits briefly for processes to go (killed ranks take a moment), then returns what is left.
pub fn leftovers_after_grace(tag: &str) -> Vec<String> {
    for _ in 0..50 {
        if leftovers(tag).is_empty() {
            return Vec::new();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    leftovers(tag)
}

/// [`sim_run`]'s arguments: the simulation, a short sweep, 4 s deadlines.
pub const SIM_RUN: &[&str] = &[
    "run",
    "--backend",
    "sim",
    "-e",
    "64K",
    "-n",
    "3",
    "-w",
    "1",
    "--timeout",
    "4",
];

/// `mpirun -np N nccl-smoke run --backend sim` with a short sweep and 4 s deadlines, plus
/// `extra` arguments and `env`; bounded to 90 s.
pub fn sim_run(np: u32, extra: &[&str], env: &[(&str, &str)]) -> Output {
    require_sim();
    let mut args = SIM_RUN.to_vec();
    args.extend_from_slice(extra);
    mpirun(np, &args, env, 90)
}

/// `mpirun -np N nccl-smoke run --backend sim -b FROM -e TO -n 1 -w 0` plus `extra` arguments
/// and `env`: one timed iteration per size, no warm-up; bounded to `limit_s`.
pub fn one_pass(
    np: u32,
    (from, to): (&str, &str),
    extra: &[&str],
    env: &[(&str, &str)],
    limit_s: u32,
) -> Output {
    require_sim();
    let mut args = vec![
        "run",
        "--backend",
        "sim",
        "-b",
        from,
        "-e",
        to,
        "-n",
        "1",
        "-w",
        "0",
    ];
    args.extend_from_slice(extra);
    mpirun(np, &args, env, limit_s)
}

/// Every launcher variable a test process could inherit: each rank gets only its own.
pub const LAUNCHER_VARS: &[&str] = &[
    "NCCL_SMOKE_BOOTSTRAP",
    "NCCL_SMOKE_RANK",
    "NCCL_SMOKE_WORLD_SIZE",
    "NCCL_SMOKE_LOCAL_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "PMI_SIZE",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_PROCID",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_LOCALID",
    "SLURM_STEP_NODELIST",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "JOB_COMPLETION_INDEX",
];
