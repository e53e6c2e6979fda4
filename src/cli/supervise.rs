//! Each rank is two processes: the one the launcher started (the supervisor) and a worker it
//! spawns to do the work. The worker touches MPI, NCCL and the driver; the supervisor touches
//! none of them, so it survives whatever they do. It follows the worker's stages over a Unix
//! socket and, when the worker stops making progress within the stage's deadline or dies of a
//! signal, names the stage, the rank and the host, kills the worker and exits with the stage's
//! code. A hang or a segfault inside a library becomes a verdict instead of a silent job.

use super::RunArgs;
use super::backend::{self, SIM_LINK_DIR_ENV};
use super::status::{self, JobView, Uplink};
use crate::bootstrap::launcher;
use crate::error::{self, Failure, Who};
use crate::ffi::os;
use crate::progress::{Event, SOCKET_ENV};
use crate::report::results::{self, RankRecord, Status, Verdict};
use crate::stage::{Stage, StageRecord, exit};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// Set in the worker's environment.
const WORKER_ENV: &str = "NCCL_SMOKE_WORKER";
/// Where the worker finds the run folder (NCCL logs, socket).
pub const RUN_DIR_ENV: &str = "NCCL_SMOKE_RUN_DIR";
/// The supervisor's own deadline trails the worker's, so that the worker, which can abort the
/// communicator and say more, reports first when it can.
const GRACE: Duration = Duration::from_millis(1000);
/// In stages where a rank waits on the others, a little more: the rank that is stuck on its
/// own (in its driver, say) then reports before the ranks that are only waiting for it.
const WAITING_GRACE: Duration = Duration::from_millis(900);

/// How long rank 0 waits, after a pass, for the other ranks' end reports.
const SETTLE: Duration = Duration::from_secs(2);
/// How long a rank whose worker failed stays before exiting (see `spawn_and_watch`).
const LINGER: Duration = Duration::from_millis(700);

/// Whether a rank in this stage is waiting for other ranks (the worker also says so per step,
/// e.g. inside MPI_Init or the first barrier of the launch stage).
fn waits_on_others(stage: Stage) -> bool {
    !matches!(
        stage,
        Stage::Launch | Stage::NcclLoad | Stage::Driver | Stage::Device | Stage::Alloc
    )
}

pub fn is_worker() -> bool {
    std::env::var_os(WORKER_ENV).is_some()
}

/// What the watch loop hears: the worker's events, or a signal that wakes it.
enum Msg {
    Event(Event),
    Wake,
}

/// What the supervisor knows of its worker.
struct Watch {
    stage: Stage,
    /// The last step the worker announced within the stage.
    step: Option<String>,
    /// Whether that step waits on other ranks.
    waiting: bool,
    rank: Option<u32>,
    host: String,
    since: Instant,
    results: Option<PathBuf>,
    failed: Option<Failure>,
    /// Other ranks: the line to rank 0's supervisor, once its address is known.
    uplink: Option<Uplink>,
    /// Rank 0: every rank's reports.
    job: Option<Arc<Mutex<JobView>>>,
    /// Rank 0: how many of the other ranks' failures are printed, and in the results file.
    announced: usize,
    recorded: usize,
    /// The stages left behind, timed, and when the current one was entered.
    history: Vec<StageRecord>,
    entered: Instant,
}

pub fn supervise(args: &RunArgs) -> u8 {
    let host = os::hostname();
    let view = launcher::from_env();
    let rank = view.as_ref().and_then(|v| v.rank);
    let who = Who { rank, host };
    if rank.unwrap_or(0) == 0
        && let Some(p) = &args.json
        && let Err(msg) = results::check_writable(p)
    {
        eprintln!("nccl-smoke: {msg}");
        return exit::USAGE;
    }
    // Pids are reused quickly; the time makes the folder this run's own.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let run_dir =
        std::env::temp_dir().join(format!("nccl-smoke.{}.{nanos:09}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&run_dir) {
        return say(Failure::new(
            Stage::Launch,
            &who,
            format!("cannot create {}: {e}", run_dir.display()),
        ));
    }
    let code = match spawn_and_watch(args, &who, &run_dir, view.map(|v| v.size)) {
        Ok(code) => code,
        Err(f) => say(f),
    };
    // Keep NCCL's logs of a failed run for the operator; a clean run leaves nothing behind.
    if code == exit::PASS {
        let _ = std::fs::remove_dir_all(&run_dir);
    } else if has_logs(&run_dir) {
        eprintln!(
            "nccl-smoke: NCCL logs of this rank kept in {}",
            run_dir.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    code
}

fn has_logs(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".log"))
        })
        .unwrap_or(false)
}

fn say(f: Failure) -> u8 {
    say_line(&f.to_string());
    f.exit_code()
}

fn spawn_and_watch(
    args: &RunArgs,
    who: &Who,
    run_dir: &Path,
    nranks: Option<u32>,
) -> Result<u8, Failure> {
    let sock = run_dir.join("supervisor.sock");
    let listener = UnixListener::bind(&sock).map_err(|e| {
        Failure::new(
            Stage::Launch,
            who,
            format!("cannot listen on {}: {e}", sock.display()),
        )
    })?;
    let exe = std::env::current_exe().map_err(|e| {
        Failure::new(
            Stage::Launch,
            who,
            format!("cannot locate nccl-smoke itself: {e}"),
        )
    })?;
    let mut cmd = Command::new(exe);
    // Its own process group: a launcher's or a terminal's signal reaches the supervisor, which
    // records the end and then stops the worker (the worker dies with it in any case).
    cmd.process_group(0)
        .args(std::env::args_os().skip(1))
        .env(WORKER_ENV, "1")
        .env(SOCKET_ENV, &sock)
        .env(RUN_DIR_ENV, run_dir);
    if std::env::var_os("NCCL_DEBUG").is_none() {
        // NCCL's own words are the best evidence: its warnings, and the INIT/NET lines that say
        // which transports it chose. They go to a file per process, not the user's screen.
        cmd.env("NCCL_DEBUG", "INFO")
            .env("NCCL_DEBUG_SUBSYS", "INIT,NET")
            .env("NCCL_DEBUG_FILE", run_dir.join("nccl.%h.%p.log"))
            .env(
                crate::report::fingerprint::INJECTED_ENV,
                "NCCL_DEBUG,NCCL_DEBUG_SUBSYS,NCCL_DEBUG_FILE",
            );
    }
    if args.libs.backend == super::Backend::Sim {
        let dir = backend::prepare_sim_dir(args.libs.sim_dir.as_deref(), &run_dir.join("lib"))
            .map_err(|e| Failure::new(Stage::NcclLoad, who, e))?;
        let old = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
        let ld = if old.is_empty() {
            dir.display().to_string()
        } else {
            format!("{}:{old}", dir.display())
        };
        cmd.env("LD_LIBRARY_PATH", ld).env(SIM_LINK_DIR_ENV, &dir);
        if let Some(r) = who.rank {
            cmd.env(nccl_smoke_fault::RANK_ENV, r.to_string());
        }
    }
    // Rank 0 takes every rank's status reports (see status.rs).
    let job = if who.rank.unwrap_or(0) == 0
        && let Ok(listener) = TcpListener::bind("0.0.0.0:0")
        && let Ok(addr) = listener.local_addr()
    {
        cmd.env(status::PORT_ENV, addr.port().to_string());
        let view = Arc::new(Mutex::new(JobView {
            nranks: nranks.unwrap_or(1),
            ..Default::default()
        }));
        status::serve(listener, view.clone());
        Some(view)
    } else {
        None
    };
    let (tx, rx) = mpsc::channel();
    // A launcher tearing the job down (another rank failed) sends SIGTERM, and Open MPI's
    // follows with SIGKILL as soon as another rank has gone: note it and wake the watch at
    // once, so that this rank's end is recorded in the moments it has.
    let term = Arc::new(AtomicBool::new(false));
    let signals = [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT];
    for sig in signals {
        let _ = signal_hook::flag::register(sig, term.clone());
    }
    if let Ok(mut it) = signal_hook::iterator::Signals::new(signals) {
        let wake = tx.clone();
        std::thread::spawn(move || {
            for _ in it.forever() {
                let _ = wake.send(Msg::Wake);
            }
        });
    }
    let child = cmd.spawn().map_err(|e| {
        Failure::new(
            Stage::Launch,
            who,
            format!("cannot start the worker process: {e}"),
        )
    })?;
    std::thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if let Ok(ev) = serde_json::from_str::<Event>(&line)
                    && tx.send(Msg::Event(ev)).is_err()
                {
                    break;
                }
            }
        }
    });
    let code = watch(args, who, child, rx, job, &term);
    if code != exit::PASS && !term.load(Ordering::SeqCst) {
        // This rank's exit makes the launcher tear the job down; linger a moment first, so
        // that rank 0 has read this rank's end over the status line before the launcher stops
        // it, and so that the peers' MPI, which notices the worker gone without MPI_Finalize,
        // has told the launcher so (Open MPI's mpirun can crash when such a message arrives
        // mid-teardown).
        std::thread::sleep(LINGER);
    }
    Ok(code)
}

fn watch(
    args: &RunArgs,
    who: &Who,
    mut child: Child,
    rx: mpsc::Receiver<Msg>,
    job: Option<Arc<Mutex<JobView>>>,
    term: &AtomicBool,
) -> u8 {
    let mut w = Watch {
        stage: Stage::Launch,
        step: None,
        waiting: false,
        rank: who.rank,
        host: who.host.clone(),
        since: Instant::now(),
        results: None,
        failed: None,
        uplink: None,
        job,
        announced: 0,
        recorded: 0,
        history: Vec::new(),
        entered: Instant::now(),
    };
    loop {
        while let Ok(msg) = rx.recv_timeout(Duration::from_millis(50)) {
            match msg {
                Msg::Event(ev) => apply(&mut w, ev),
                Msg::Wake => break,
            }
        }
        record_remote_failures(&mut w);
        match child.try_wait() {
            Ok(Some(status)) => {
                // Drain what the worker said just before it ended.
                while let Ok(msg) = rx.try_recv() {
                    if let Msg::Event(ev) = msg {
                        apply(&mut w, ev);
                    }
                }
                if let Some(code) = status.code() {
                    let code = code.clamp(0, 255) as u8;
                    return conclude(&mut w, None, code);
                }
                let sig = status.signal().unwrap_or(0);
                let stopped = term.load(Ordering::SeqCst)
                    || sig == signal_hook::consts::SIGTERM
                    || sig == signal_hook::consts::SIGINT;
                if !stopped && let Some(given) = w.failed.clone() {
                    // The worker gave its verdict, then died on its way out: the verdict stands.
                    eprintln!(
                        "nccl-smoke: the worker died of {} after reporting its failure",
                        os::signal_name(sig)
                    );
                    return conclude(&mut w, None, given.exit_code());
                }
                let f = if stopped {
                    stopped_by_launcher(&w, who)
                } else {
                    crashed(&w, who, sig)
                };
                let code = f.exit_code();
                return conclude(&mut w, Some(f), code);
            }
            Ok(None) => {}
            Err(e) => {
                let f = Failure::new(
                    w.stage,
                    &who_at(&w, who),
                    format!("lost track of the worker: {e}"),
                );
                let code = f.exit_code();
                return conclude(&mut w, Some(f), code);
            }
        }
        if term.load(Ordering::SeqCst) {
            // The launcher gives a second or so before SIGKILL: record first, then stop the
            // worker (which the launcher's signal did not reach: it has its own process group).
            let f = stopped_by_launcher(&w, who);
            let code = f.exit_code();
            let code = conclude(&mut w, Some(f), code);
            let _ = child.kill();
            let _ = child.wait();
            return code;
        }
        let deadline = args.deadline(w.stage);
        let slack = if waits_on_others(w.stage) || w.waiting {
            GRACE + WAITING_GRACE
        } else {
            GRACE
        };
        if w.failed.is_none() && w.since.elapsed() > deadline + slack {
            let _ = child.kill();
            let _ = child.wait();
            let f = hung(&w, who, deadline);
            let code = f.exit_code();
            return conclude(&mut w, Some(f), code);
        }
    }
}

fn apply(w: &mut Watch, ev: Event) {
    match &ev {
        Event::Stage { stage, rank } => {
            if *stage != w.stage {
                w.history.push(StageRecord {
                    stage: w.stage,
                    seconds: w.entered.elapsed().as_secs_f64(),
                    ok: true,
                });
                w.entered = Instant::now();
            }
            w.stage = *stage;
            w.step = None;
            w.waiting = false;
            w.rank = rank.or(w.rank);
            w.since = Instant::now();
        }
        Event::Beat => w.since = Instant::now(),
        Event::Step { what, waiting } => {
            w.step = Some(what.clone());
            w.waiting = *waiting;
        }
        Event::Results { path } => w.results = Some(PathBuf::from(path)),
        Event::Failed { failure } => w.failed = Some(failure.clone()),
        Event::StatusAddr { addrs } => {
            if let Some(rank) = w.rank.filter(|r| *r != 0)
                && w.uplink.is_none()
            {
                w.uplink = Uplink::connect(addrs, rank, &w.host);
                let now = Event::Stage {
                    stage: w.stage,
                    rank: w.rank,
                };
                if let Some(u) = w.uplink.as_mut() {
                    u.send(&now);
                }
            }
            return;
        }
        Event::Ended { .. } => return,
    }
    if let Some(u) = w.uplink.as_mut() {
        u.send(&ev);
    }
}

fn stopped_by_launcher(w: &Watch, who: &Who) -> Failure {
    Failure::new(
        w.stage,
        &who_at(w, who),
        format!(
            "{} during the {} stage (another rank failed, or the job was cancelled)",
            status::STOPPED,
            w.stage
        ),
    )
}

fn who_at(w: &Watch, who: &Who) -> Who {
    Who {
        rank: w.rank,
        host: who.host.clone(),
    }
}

fn hung(w: &Watch, who: &Who, deadline: Duration) -> Failure {
    let f = Failure::new(
        w.stage,
        &who_at(w, who),
        format!(
            "no progress for {:.0} s in the {} stage{} (deadline {:.0} s): it hung; the worker was killed",
            w.since.elapsed().as_secs_f64(),
            w.stage,
            w.step
                .as_deref()
                .map(|s| format!(", {s}"))
                .unwrap_or_default(),
            deadline.as_secs_f64()
        ),
    );
    match w.stage {
        Stage::Launch => f
            .cause("the first MPI collective did not complete: a rank never arrived, or MPI's collective \
                    layer hangs (Open MPI HCOLL over container RDMA is a known case)")
            .hint("mpirun -mca coll_hcoll_enable 0 -mca btl tcp,self; check UCX_NET_DEVICES, \
                   NCCL_SOCKET_IFNAME and NCCL_IB_HCA name devices that exist in the pod"),
        Stage::Init | Stage::UniqueId => f
            .cause("not every rank joined the communicator: a rank is missing, or the bootstrap network \
                    between hosts is unreachable")
            .hint("check that NCCL_SOCKET_IFNAME names an interface that reaches every host; look for a rank \
                   that failed earlier"),
        Stage::Connect | Stage::ConnectImport | Stage::ConnectProxy | Stage::ConnectShm | Stage::ConnectNet => f
            .cause("transport setup between ranks never completed")
            .hint("rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,SHM,NET and look at the last lines per rank"),
        Stage::Finalize => f
            .cause("communicator teardown hung")
            .hint("a peer may have died or never finalized; NCCL_DEBUG=INFO shows which"),
        _ => f.hint("rerun with NCCL_DEBUG=INFO to see where the library stopped"),
    }
}

fn crashed(w: &Watch, who: &Who, sig: i32) -> Failure {
    let culprit = match w.stage {
        Stage::Launch => "the MPI library",
        Stage::Driver | Stage::Device | Stage::Alloc => "the CUDA driver",
        _ => "libnccl or the CUDA driver",
    };
    Failure::new(
        w.stage,
        &who_at(w, who),
        format!(
            "the worker died of {} during the {} stage",
            os::signal_name(sig),
            w.stage
        ),
    )
    .cause(format!("a crash inside {culprit}"))
    .hint("a core dump (ulimit -c unlimited) and NCCL_DEBUG=INFO show where")
}

/// The end of this rank: prints the supervisor's own verdict (`own`, when the worker could not
/// give one), tells rank 0's supervisor, and on rank 0 prints the job's state and records every
/// rank's failure in the results file. Returns the exit code.
fn conclude(w: &mut Watch, own: Option<Failure>, code: u8) -> u8 {
    let failure = own.clone().or_else(|| w.failed.clone());
    let stages = walked(w, code == exit::PASS);
    if let Some(u) = w.uplink.as_mut() {
        u.send(&Event::Ended {
            code,
            failure: failure.clone(),
            stages,
        });
    }
    if code == exit::PASS
        && let Some(job) = &w.job
    {
        // Nobody is in a hurry after a pass: let the other ranks' ends arrive for the table.
        let start = Instant::now();
        while start.elapsed() < SETTLE && !job.lock().map(|v| v.all_ended()).unwrap_or(true) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let (job_lines, remote): (Vec<String>, Vec<Failure>) = match (&w.job, code) {
        (Some(job), c) if c != exit::PASS => job
            .lock()
            .map(|v| {
                (
                    v.summary(Some((w.stage, w.step.as_deref()))),
                    v.failures.clone(),
                )
            })
            .unwrap_or_default(),
        _ => Default::default(),
    };
    // The file first: a launcher tearing the job down may close this rank's output before
    // (and kill it soon after) it has printed.
    if let Some(path) = &w.results {
        let state = status::end_state(code, failure.as_ref());
        let table = rank_table(w, state, Some(code), code == exit::PASS);
        record(path, own.as_ref(), &remote, table);
    }
    if let Some(f) = &own {
        say_line(&f.to_string());
    }
    if job_lines.len() > 1 {
        job_lines.iter().for_each(|l| say_line(l));
    }
    let stopped = own.as_ref().is_some_and(status::stopped);
    let job_failures: Vec<Failure> = failure
        .iter()
        .filter(|_| !stopped)
        .chain(&remote)
        .cloned()
        .collect();
    for g in error::group(&job_failures)
        .iter()
        .filter(|g| g.ranks.len() > 1)
    {
        say_line(&format!("# job: {g}"));
    }
    code
}

/// This rank's stages, the current one ending now (`ok`: it ended well).
fn walked(w: &Watch, ok: bool) -> Vec<StageRecord> {
    let mut out = w.history.clone();
    out.push(StageRecord {
        stage: w.stage,
        seconds: w.entered.elapsed().as_secs_f64(),
        ok,
    });
    out
}

/// Rank 0: the results file's per-rank table, this rank in `state` first; empty elsewhere.
fn rank_table(w: &Watch, state: &str, code: Option<u8>, ok: bool) -> Vec<RankRecord> {
    let Some(job) = &w.job else {
        return Vec::new();
    };
    let me = RankRecord {
        rank: w.rank.unwrap_or(0),
        host: w.host.clone(),
        state: state.into(),
        exit_code: code,
        stage: Some(w.stage),
        step: w.step.clone(),
        stages: walked(w, ok),
    };
    job.lock().map(|v| v.records(me)).unwrap_or_default()
}

/// Adds this rank's failure (`own`) and the other ranks' (`remote`, rank 0 only) to the
/// results file, sets its verdict from the job's first failure, and (rank 0) its per-rank
/// table.
fn record(path: &Path, own: Option<&Failure>, remote: &[Failure], table: Vec<RankRecord>) {
    let _ = results::amend(path, |doc| {
        if !table.is_empty() {
            doc.ranks = table;
        }
        // Being stopped because another rank failed is no failure of this rank's own.
        let own_counts = remote.is_empty() || !own.is_some_and(status::stopped);
        for f in own.iter().copied().filter(|_| own_counts).chain(remote) {
            if !doc.failures.contains(f) {
                doc.failures.push(f.clone());
            }
        }
        // The first failure of the job gives the verdict, unless this rank already gave one.
        let first = remote.first().or(own);
        if doc.verdict.status != Status::Fail
            && let Some(f) = first
        {
            doc.verdict = Verdict {
                status: Status::Fail,
                line: f.to_string(),
                exit_code: f.exit_code(),
                stage: Some(f.stage),
            };
        }
        // Ranks that failed alike are named in one verdict line.
        if doc.verdict.status == Status::Fail
            && let Some(g) = error::group(&doc.failures)
                .into_iter()
                .find(|g| Some(g.first.stage) == doc.verdict.stage)
            && g.ranks.len() > 1
        {
            doc.verdict.line = g.to_string();
        }
    });
}

/// Rank 0: another rank's failure goes onto the screen and into the results file as soon as
/// it arrives; when this rank is stopped a moment later, it may not get the chance.
fn record_remote_failures(w: &mut Watch) {
    let Some(job) = &w.job else { return };
    let all: Vec<Failure> = match job.lock() {
        Ok(v) if v.failures.len() > w.announced.min(w.recorded) => v.failures.clone(),
        _ => return,
    };
    for f in &all[w.announced..] {
        let rank = f.rank.map(|r| r.to_string()).unwrap_or_else(|| "?".into());
        say_line(&format!(
            "# job: rank {rank} (host {}) failed at {}; rank 0 recorded it",
            f.host, f.stage
        ));
    }
    w.announced = all.len();
    if let Some(path) = &w.results {
        let table = rank_table(w, "running", None, true);
        record(path, None, &all[w.recorded..], table);
        w.recorded = all.len();
    }
}

/// One line on stdout; a closed stdout (the launcher went first) is no reason to stop.
fn say_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}
