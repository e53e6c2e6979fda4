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
use crate::error::{Failure, Who};
use crate::ffi::os;
use crate::progress::{Event, SOCKET_ENV};
use crate::report::results::{self, ENDED_BY_RANK0, RankRecord, Status, Verdict};
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

/// One line on stderr; a closed stderr (the launcher went first) is no reason to stop, nor to
/// panic as `eprintln!` would.
macro_rules! say_err {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// Set in the worker's environment.
const WORKER_ENV: &str = "NCCL_SMOKE_WORKER";
/// Where the worker finds the run folder (NCCL logs, socket).
pub const RUN_DIR_ENV: &str = "NCCL_SMOKE_RUN_DIR";
/// The supervisor's own deadline trails the worker's, so that the worker, which can abort the
/// communicator and say more, reports first when it can.
const GRACE: Duration = Duration::from_millis(1000);
/// A wait on other ranks runs this much past the stage's deadline, so that a rank stuck on its
/// own (a stopped worker, named at the deadline; one stuck in a library outside a wait on
/// others, at deadline + `GRACE`) reports before the ranks that are only waiting for it. The
/// worker's own waits use it (`run.rs`).
pub const PEER_MARGIN: Duration = Duration::from_millis(1500);
/// The supervisor's backstop for a rank waiting on others trails the worker's own wait by this
/// much, so that the worker's verdict, in the library's words, comes first when it can; the
/// total (deadline + 1.9 s) stays within deadline + 2 s.
const WAITING_BACKSTOP: Duration = Duration::from_millis(400);

/// How long rank 0 waits, after a pass, for the other ranks' end reports.
const SETTLE: Duration = Duration::from_secs(2);
/// How long a supervisor whose worker ended with a code not its own waits for the launcher's
/// signal (Open MPI sends SIGCONT, then SIGTERM a second later).
const LAUNCHER_SIGNAL_WAIT: Duration = Duration::from_millis(1500);

/// Whether `code` is one nccl-smoke's worker exits with.
fn ours(code: u8) -> bool {
    code <= exit::WRITE_FAILED
        || Stage::ALL.iter().any(|s| s.exit_code() == code)
        || code == exit::CANCELLED
        || code == exit::BELOW_EXPECTED
}

/// How long rank 0 of a cancelled job waits for the other ranks' ends.
const CANCEL_SETTLE: Duration = Duration::from_millis(300);
/// Whether this rank failed on its own (not stopped, not cancelled): its run folder is kept.
static OWN_FAILURE: AtomicBool = AtomicBool::new(false);

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
    /// The work under way is expected to take this long before the next beat.
    budget: Duration,
    /// Since when the worker has been seen stopped (SIGSTOP), if it is.
    stopped_since: Option<Instant>,
    results: Option<PathBuf>,
    failed: Option<Failure>,
    /// Other ranks: the line to rank 0's supervisor, once its address is known.
    uplink: Option<Uplink>,
    /// Rank 0: every rank's reports.
    job: Option<Arc<Mutex<JobView>>>,
    /// Rank 0: how many of the other ranks' failures are printed, and in the results file.
    announced: usize,
    recorded: usize,
    /// Rank 0: the verdict line printed last.
    said: Option<String>,
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
        say_err!("nccl-smoke: {msg}");
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
    // Keep NCCL's logs of this rank's own failure for the operator; a clean, cancelled or
    // stopped rank leaves nothing behind.
    if code == exit::PASS || !OWN_FAILURE.load(Ordering::SeqCst) {
        let _ = std::fs::remove_dir_all(&run_dir);
    } else if has_logs(&run_dir) {
        say_err!(
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
    let launcher_pid = std::os::unix::process::parent_id();
    let mut last_turn = Instant::now();
    let mut w = Watch {
        stage: Stage::Launch,
        step: None,
        waiting: false,
        rank: who.rank,
        host: who.host.clone(),
        since: Instant::now(),
        budget: Duration::ZERO,
        stopped_since: None,
        results: None,
        failed: None,
        uplink: None,
        job,
        announced: 0,
        recorded: 0,
        said: None,
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
        if std::os::unix::process::parent_id() != launcher_pid {
            // The launcher died without signalling (a second Ctrl-C makes mpirun exit at
            // once): nothing will stop this rank but itself.
            term.store(true, Ordering::SeqCst);
        }
        if term.load(Ordering::SeqCst)
            && let Some(job) = &w.job
            && let Ok(mut v) = job.lock()
        {
            // First of all, so that no rank takes rank 0's closing line for its death.
            v.say_bye();
        }
        if let Some(u) = w.uplink.as_mut() {
            u.keep_alive();
        }
        let gap = last_turn.elapsed();
        last_turn = Instant::now();
        if let Some(job) = &w.job
            && let Ok(mut v) = job.lock()
        {
            if gap > status::SELF_STOPPED {
                v.forgive_gap();
            }
            v.name_unresponsive(|s| args.deadline(s));
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
                    if w.failed.is_none() && !ours(code) {
                        // Not one of nccl-smoke's codes, and no verdict: the MPI library ends
                        // the process this way when its launcher goes away (Open MPI: 195 after
                        // Ctrl-C). The launcher's SIGTERM follows within a second or so.
                        let start = Instant::now();
                        while start.elapsed() < LAUNCHER_SIGNAL_WAIT && !term.load(Ordering::SeqCst)
                        {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        if term.load(Ordering::SeqCst) {
                            let f = stopped_by_launcher(&w, who);
                            let code = f.exit_code();
                            return conclude(args, &mut w, Some(f), code, term);
                        }
                    }
                    return conclude(args, &mut w, None, code, term);
                }
                let sig = status.signal().unwrap_or(0);
                let stopped = term.load(Ordering::SeqCst)
                    || sig == signal_hook::consts::SIGTERM
                    || sig == signal_hook::consts::SIGINT;
                if !stopped && let Some(given) = w.failed.clone() {
                    // The worker gave its verdict, then died on its way out: the verdict stands.
                    say_err!(
                        "nccl-smoke: the worker died of {} after reporting its failure",
                        os::signal_name(sig)
                    );
                    return conclude(args, &mut w, None, given.exit_code(), term);
                }
                let f = if stopped {
                    stopped_by_launcher(&w, who)
                } else {
                    crashed(&w, who, sig)
                };
                let code = f.exit_code();
                return conclude(args, &mut w, Some(f), code, term);
            }
            Ok(None) => {}
            Err(e) => {
                let f = Failure::new(
                    w.stage,
                    &who_at(&w, who),
                    format!("lost track of the worker: {e}"),
                );
                let code = f.exit_code();
                return conclude(args, &mut w, Some(f), code, term);
            }
        }
        if term.load(Ordering::SeqCst) {
            // The launcher gives a second or so before SIGKILL. The worker, which the
            // launcher's signal did not reach (it has its own process group), is killed first
            // (its results are on disk after every size, and nothing may outlive the job) and
            // reaped after this rank's end is recorded.
            let _ = child.kill();
            let f = stopped_by_launcher(&w, who);
            let code = f.exit_code();
            let code = conclude(args, &mut w, Some(f), code, term);
            let _ = child.wait();
            return code;
        }
        // Rank 0: a rank that vanished or stopped answering is one the launcher knows nothing
        // about; rank 0 ends the job, so that it does not wait on that rank for ever.
        if w.failed.is_none()
            && let Some(job) = &w.job
            && job.lock().map(|v| v.has_gone_rank()).unwrap_or(false)
        {
            stop_worker(&mut child);
            let f = Failure::new(
                w.stage,
                &who_at(&w, who),
                format!(
                    "{ENDED_BY_RANK0} during the {} stage: another rank is gone",
                    w.stage
                ),
            );
            let code = f.exit_code();
            return conclude(args, &mut w, Some(f), code, term);
        }
        // Another rank: rank 0's supervisor vanished or stopped answering, so nobody would
        // record this job's verdict; this rank names it.
        let limit = args.deadline(w.stage);
        if let Some(gone) = w.uplink.as_ref().and_then(|u| u.rank0_gone(limit)) {
            stop_worker(&mut child);
            let f = rank0_gone(&w, who, gone, limit);
            let code = f.exit_code();
            return conclude(args, &mut w, Some(f), code, term);
        }
        let stopped_now = worker_stopped(child.id());
        match (stopped_now, w.stopped_since) {
            (true, None) => w.stopped_since = Some(Instant::now()),
            (false, Some(_)) => w.stopped_since = None,
            _ => {}
        }
        let deadline = args.deadline(w.stage);
        let quiet = deadline + w.budget;
        // A stopped worker is the culprit, not a waiter: it is named at its own deadline, before
        // the ranks waiting on it give up (their waits allow `PEER_MARGIN` more).
        let stuck_stopped = w.stopped_since.is_some_and(|t| t.elapsed() > deadline)
            || (stopped_now && w.since.elapsed() > quiet);
        let slack = if waits_on_others(w.stage) || w.waiting {
            PEER_MARGIN + WAITING_BACKSTOP
        } else {
            GRACE
        };
        if w.failed.is_none() && (stuck_stopped || w.since.elapsed() > quiet + slack) {
            stop_worker(&mut child);
            let f = hung(&w, who, deadline, stuck_stopped);
            let code = f.exit_code();
            return conclude(args, &mut w, Some(f), code, term);
        }
    }
}

/// Kills the worker (also when it is stopped) and reaps it.
fn stop_worker(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Whether the process `pid` is stopped (SIGSTOP, SIGTSTP, or held by a tracer): the state
/// letter of `/proc/PID/stat`, `T` or `t`.
fn worker_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
        })
        .is_some_and(|c| c == 'T' || c == 't')
}

fn rank0_gone(w: &Watch, who: &Who, closed: bool, limit: Duration) -> Failure {
    let host = w
        .uplink
        .as_ref()
        .map(|u| u.rank0_host.clone())
        .unwrap_or_default();
    let me = who_at(w, who).rank_label();
    let rank0 = Who {
        rank: Some(0),
        host,
    };
    let f = if closed {
        Failure::new(
            w.stage,
            &rank0,
            format!(
                "its supervisor is gone: the status line to it closed without a word during the {} \
                 stage (seen by {me})",
                w.stage
            ),
        )
        .cause("rank 0's supervisor was killed (SIGKILL, the OOM killer), or its host went down")
    } else {
        Failure::new(
            w.stage,
            &rank0,
            format!(
                "its supervisor stopped answering: nothing from it for more than {:.0} s during the \
                 {} stage (seen by {me})",
                limit.as_secs_f64(),
                w.stage
            ),
        )
        .cause("rank 0's supervisor process is stopped (SIGSTOP, a debugger), or its host is overloaded or cut off")
    };
    f.hint("check rank 0's host: the process's state (ps -o stat,pid,cmd), the kernel log (dmesg)")
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
            w.budget = Duration::ZERO;
        }
        Event::Beat => {
            w.since = Instant::now();
            w.budget = Duration::ZERO;
        }
        Event::Budget { secs } => {
            // Bounded: a day of expected work is no deadline at all.
            w.budget = Duration::try_from_secs_f64(secs.clamp(0.0, 86_400.0)).unwrap_or_default();
            return;
        }
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
        Event::Ended { .. } | Event::Alive => return,
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

fn who_label(f: &Failure) -> String {
    Who {
        rank: f.rank,
        host: f.host.clone(),
    }
    .rank_label()
}

fn who_at(w: &Watch, who: &Who) -> Who {
    Who {
        rank: w.rank,
        host: who.host.clone(),
    }
}

fn hung(w: &Watch, who: &Who, deadline: Duration, stopped: bool) -> Failure {
    let waited = if stopped {
        ": the worker is stopped (SIGSTOP, SIGTSTP or a debugger holds it)".to_string()
    } else if waits_on_others(w.stage) || w.waiting {
        format!(" {}", results::WAITED_MARK)
    } else {
        String::new()
    };
    let budget = if w.budget.is_zero() || stopped {
        String::new()
    } else {
        format!(
            " + {:.1} s expected for the work under way",
            w.budget.as_secs_f64()
        )
    };
    let f = Failure::new(
        w.stage,
        &who_at(w, who),
        format!(
            "no progress for {:.1} s in the {} stage{}{waited} (deadline {:.0} s{budget}): it hung; the \
             worker was killed",
            w.since.elapsed().as_secs_f64(),
            w.stage,
            w.step
                .as_deref()
                .map(|s| format!(", {s}"))
                .unwrap_or_default(),
            deadline.as_secs_f64()
        ),
    );
    if stopped {
        return f
            .cause("the worker process was stopped from outside nccl-smoke; the other ranks wait for it")
            .hint("look for a debugger, a job-control stop (Ctrl-Z) or a scheduler that suspends processes");
    }
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
    let f = Failure::new(
        w.stage,
        &who_at(w, who),
        format!(
            "the worker died of {} during the {} stage",
            os::signal_name(sig),
            w.stage
        ),
    );
    if sig == signal_hook::consts::SIGKILL {
        // Nothing inside a library raises SIGKILL: it came from outside.
        return f
            .cause("the worker was killed from outside nccl-smoke: the kernel's OOM killer, an operator, or the scheduler")
            .hint("dmesg shows an OOM kill; check the job's memory limit and the scheduler's events");
    }
    let culprit = match w.stage {
        Stage::Launch => "the MPI library",
        Stage::Driver | Stage::Device | Stage::Alloc => "the CUDA driver",
        _ => "libnccl or the CUDA driver",
    };
    f.cause(format!("a crash inside {culprit}"))
        .hint("a core dump (ulimit -c unlimited) and NCCL_DEBUG=INFO show where")
}

/// Whether the launcher's signal is a cancellation rather than a teardown after a failure:
/// rank 0 knows every rank (all connected) and no failure anywhere.
fn cancelled(w: &Watch, own: Option<&Failure>, term: &AtomicBool) -> bool {
    term.load(Ordering::SeqCst)
        && own.is_none_or(status::stopped)
        && w.failed.is_none()
        && w.job.as_ref().is_some_and(|j| {
            j.lock()
                .map(|v| v.all_connected() && v.failures.iter().all(status::stopped))
                .unwrap_or(false)
        })
}

/// The end of this rank: prints the supervisor's own verdict (`own`, when the worker could not
/// give one), tells rank 0's supervisor, and on rank 0 prints the job's state and verdict and
/// records every rank's failure in the results file. Returns the exit code: on rank 0, the
/// job's (its verdict's code, or CANCELLED).
fn conclude(
    args: &RunArgs,
    w: &mut Watch,
    mut own: Option<Failure>,
    mut code: u8,
    term: &AtomicBool,
) -> u8 {
    let cancel = w.job.is_some() && cancelled(w, own.as_ref(), term);
    if cancel && let Some(path) = &w.results {
        // The launcher's SIGKILL may follow its SIGTERM within the settle below (under load it
        // did, 3 runs in 5): the file says CANCELLED first, and again with the table after.
        let table = rank_table(w, "cancelled", Some(exit::CANCELLED), false);
        let _ = record(path, own.as_ref(), &[], table, true, w.stage);
    }
    if cancel && let Some(job) = &w.job {
        // The other ranks were signalled too: their ends, for the table, arrive at once (the
        // launcher's SIGKILL follows its SIGTERM by a second or so).
        let start = Instant::now();
        while start.elapsed() < CANCEL_SETTLE && !job.lock().map(|v| v.all_ended()).unwrap_or(true)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // Only this rank's own failure keeps its run folder (NCCL's logs) for the operator.
    OWN_FAILURE.store(
        !cancel
            && own
                .as_ref()
                .or(w.failed.as_ref())
                .is_some_and(|f| !status::stopped(f)),
        Ordering::SeqCst,
    );
    let failure = own.clone().or_else(|| w.failed.clone());
    let stages = walked(w, code == exit::PASS);
    if let Some(u) = w.uplink.as_mut() {
        u.send(&Event::Ended {
            code,
            failure: failure.clone(),
            stages,
        });
        // A pass is only a pass once rank 0 has it: a rank 0 that vanished or stopped
        // answering would leave the job without a verdict.
        if code == exit::PASS
            && let Err(closed) = u.await_ack(args.deadline(Stage::Finalize))
        {
            let f = rank0_gone(
                w,
                &Who {
                    rank: w.rank,
                    host: w.host.clone(),
                },
                closed,
                args.deadline(Stage::Finalize),
            );
            code = f.exit_code();
            own = Some(f);
        }
    }
    if code == exit::PASS
        && let Some(job) = &w.job
    {
        // Nobody is in a hurry after a pass: let the other ranks' ends arrive for the table.
        let start = Instant::now();
        while start.elapsed() < SETTLE && !job.lock().map(|v| v.all_ended()).unwrap_or(true) {
            std::thread::sleep(Duration::from_millis(20));
            if let Ok(mut v) = job.lock() {
                v.name_unresponsive(|s| args.deadline(s));
            }
        }
    }
    let (job_lines, remote): (Vec<String>, Vec<Failure>) = match &w.job {
        Some(job) => job
            .lock()
            .map(|v| {
                let lines = if code != exit::PASS {
                    v.summary(Some((w.stage, w.step.as_deref())))
                } else {
                    Vec::new()
                };
                (lines, v.failures.clone())
            })
            .unwrap_or_default(),
        None => Default::default(),
    };
    let failure = own.clone().or(failure);
    // The job's verdict, on rank 0: the culprit among every failure known.
    let counted: Vec<Failure> = failure
        .iter()
        .filter(|f| !status::stopped(f) || remote.is_empty())
        .chain(&remote)
        .filter(|f| !(cancel && status::stopped(f)))
        .cloned()
        .collect();
    let verdict = w.job.as_ref().and_then(|_| results::job_verdict(&counted));
    let state = if cancel {
        "cancelled"
    } else {
        status::end_state(code, failure.as_ref())
    };
    if cancel {
        code = exit::CANCELLED;
    } else if let Some(v) = &verdict {
        code = v.exit_code;
    }
    // The file first: a launcher tearing the job down may close this rank's output before
    // (and kill it soon after) it has printed.
    let mut write_failed = false;
    if let Some(path) = &w.results {
        let table = rank_table(w, state, Some(code), code == exit::PASS);
        let remote: Vec<Failure> = remote
            .iter()
            .filter(|f| !(cancel && status::stopped(f)))
            .cloned()
            .collect();
        if let Err(e) = record(path, own.as_ref(), &remote, table, cancel, w.stage) {
            // The worker has said so already when its own writes failed.
            if code != exit::WRITE_FAILED {
                say_err!("nccl-smoke: cannot update the results file: {e}");
            }
            write_failed = true;
        }
    }
    match &own {
        // Stopped because of another rank, or by the user: not this rank's failure.
        Some(f) if status::stopped(f) => {
            say_line(&format!("# {} (host {}) {}", who_label(f), f.host, f.error))
        }
        Some(f) => say_line(&f.to_string()),
        None => {}
    }
    if job_lines.len() > 1 {
        job_lines.iter().for_each(|l| say_line(l));
    }
    if cancel {
        say_line(&format!(
            "CANCELLED — the job was stopped by a signal during the {} stage before any rank failed{}",
            w.stage,
            w.results
                .as_ref()
                .map(|p| format!("; every size measured until then is in {}", p.display()))
                .unwrap_or_default()
        ));
    } else if let Some(v) = &verdict {
        say_verdict(w, v, true);
    } else if w.rank.unwrap_or(0) != 0
        && let Some(f) = own.as_ref().filter(|f| f.rank == Some(0))
    {
        // This rank names rank 0, which cannot.
        say_line(&format!("VERDICT: {f}"));
    }
    if let Some(job) = &w.job
        && let Ok(mut v) = job.lock()
    {
        v.say_bye();
    }
    if write_failed && code == exit::PASS {
        code = exit::WRITE_FAILED;
    }
    code
}

/// Rank 0 prints the job's verdict when it is new or changed (`always`: also when unchanged,
/// at the end), with the consequences under it.
fn say_verdict(w: &mut Watch, v: &Verdict, always: bool) {
    if !always && w.said.as_deref() == Some(v.line.as_str()) {
        return;
    }
    if w.said.as_deref() != Some(v.line.as_str()) || always {
        say_line(&format!("VERDICT: {}", v.line));
        for c in &v.consequences {
            say_line(&format!("#   consequence: {c}"));
        }
    }
    w.said = Some(v.line.clone());
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
/// results file, sets its verdict (the job's culprit, see [`results::job_verdict`], or
/// CANCELLED), and (rank 0) its per-rank table.
fn record(
    path: &Path,
    own: Option<&Failure>,
    remote: &[Failure],
    table: Vec<RankRecord>,
    cancel: bool,
    stage: Stage,
) -> Result<(), results::ReadError> {
    results::amend(path, |doc| {
        if !table.is_empty() {
            doc.ranks = table;
        }
        // Being stopped because another rank failed is no failure of this rank's own; being
        // stopped with no failure known anywhere is, unless the job was cancelled.
        let own_counts = !cancel
            && own.is_some_and(|f| {
                !status::stopped(f) || (remote.is_empty() && doc.failures.is_empty())
            });
        for f in own.iter().copied().filter(|_| own_counts).chain(remote) {
            if !doc.failures.contains(f) {
                doc.failures.push(f.clone());
            }
        }
        if let Some(v) = results::job_verdict(&doc.failures) {
            doc.verdict = v;
            results::agree(doc);
        } else if cancel {
            doc.verdict = Verdict {
                status: Status::Cancelled,
                line: format!(
                    "CANCELLED — stopped by a signal during the {stage} stage, before any rank failed; \
                     {} measured size(s) kept",
                    doc.results.len()
                ),
                exit_code: exit::CANCELLED,
                stage: Some(stage),
                consequences: Vec::new(),
                ranks: Vec::new(),
            };
        }
    })
}

/// Rank 0: another rank's failure goes onto the screen and into the results file as soon as
/// it arrives; when this rank is stopped a moment later, it may not get the chance.
fn record_remote_failures(w: &mut Watch) {
    let Some(job) = &w.job else { return };
    // A rank stopped by the launcher is no news: the launcher stops every rank at once (a
    // cancel, or after the failure that will arrive). Such reports count only at the end.
    let all: Vec<Failure> = match job.lock() {
        Ok(v) if v.failures.len() > w.announced.min(w.recorded) => v
            .failures
            .iter()
            .filter(|f| !status::stopped(f))
            .cloned()
            .collect(),
        _ => return,
    };
    if all.len() <= w.announced.min(w.recorded) {
        return;
    }
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
        if let Err(e) = record(path, None, &all[w.recorded..], table, false, w.stage) {
            say_err!("nccl-smoke: cannot update the results file: {e}");
        }
        w.recorded = all.len();
    }
    let mut known = all;
    known.extend(w.failed.clone());
    if let Some(v) = results::job_verdict(&known) {
        say_verdict(w, &v, false);
    }
}

/// One line on stdout; a closed stdout (the launcher went first) is no reason to stop.
fn say_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}
