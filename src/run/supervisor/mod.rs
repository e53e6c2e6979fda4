//! Each rank is two processes: the one the launcher started (the supervisor) and a worker it
//! spawns to do the work. The worker touches MPI, NCCL and the driver; the supervisor touches
//! none of them, so it survives whatever they do. It follows the worker's stages over a Unix
//! socket and, when the worker stops making progress within the stage's deadline or dies of a
//! signal, names the stage, the rank and the host, kills the worker and exits with the stage's
//! code. A hang or a segfault inside a library becomes a verdict instead of a silent job.

mod conclude;
mod first_meeting;
mod recorder;
mod state;
mod timing;
mod watch;

use super::status::{self, JobView};
use super::worker_line::{self, Msg};
use super::{Plan, env, kept_logs, libs};
use crate::bootstrap::launcher;
use crate::error::{Failure, Who};
use crate::ffi::os;
use crate::stage::{Stage, exit};
use recorder::say_line;
use state::OWN_FAILURE;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use timing::LINGER;
use watch::watch;

pub fn supervise(plan: &Plan) -> u8 {
    let host = os::hostname();
    let view = launcher::from_env();
    let rank = view.as_ref().and_then(|v| v.rank);
    let who = Who { rank, host };
    if rank.unwrap_or(0) == 0
        && let Err(msg) = (plan.json.as_deref())
            .map_or(Ok(()), crate::report::results::check_writable)
            .and_then(|()| plan.exports.check_writable())
    {
        // Under a launcher rank 0 runs on a node of its choosing (mpirun: the first host of
        // the hostfile, an MPIJob's first worker), not where the command was typed.
        let on = match &view {
            Some(_) => format!(
                " (rank 0, host {}: rank 0 writes the results file, so that folder must exist, writable, on \
                 the host rank 0 runs on)",
                who.host
            ),
            None => String::new(),
        };
        say_err!("nccl-smoke: {msg}{on}");
        return exit::USAGE;
    }
    // Run folders of ranks that are gone (killed before they could clean up) go first.
    kept_logs::sweep_leftovers(&std::env::temp_dir());
    // Pids are reused quickly; the time makes the folder this run's own.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let run_dir = std::env::temp_dir().join(format!(
        "{}{}.{nanos:09}",
        kept_logs::RUN_DIR_PREFIX,
        std::process::id()
    ));
    if let Err(e) = std::fs::create_dir_all(&run_dir) {
        return say(Failure::new(
            Stage::Launch,
            &who,
            format!("cannot create {}: {e}", run_dir.display()),
        ));
    }
    let code = match spawn_and_watch(plan, &who, &run_dir, view.map(|v| v.size)) {
        Ok(code) => code,
        Err(f) => say(f),
    };
    // Keep NCCL's logs of this rank's own failure for the operator, where the results are kept;
    // a clean, cancelled or stopped rank leaves nothing behind.
    if code != exit::PASS && OWN_FAILURE.load(Ordering::SeqCst) && has_logs(&run_dir) {
        let out = plan.kept_logs.keep(&run_dir, rank, &who.host);
        for p in &out.kept {
            say_err!("nccl-smoke: NCCL log of this rank kept in {}", p.display());
        }
        if !out.errors.is_empty() {
            // Not lost: left in the run folder, which is then not removed.
            say_err!(
                "nccl-smoke: {}; NCCL logs of this rank left in {}",
                out.errors.join("; "),
                run_dir.display()
            );
            return code;
        }
    }
    let _ = std::fs::remove_dir_all(&run_dir);
    code
}

pub(super) fn has_logs(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".log"))
        })
        .unwrap_or(false)
}

pub(super) fn say(f: Failure) -> u8 {
    say_line(&f.to_string());
    f.exit_code()
}

pub(super) fn spawn_and_watch(
    plan: &Plan,
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
    env::hand_over(plan, run_dir).map_err(|e| Failure::new(Stage::Launch, who, e))?;
    let sim_links = match plan.libs.stand_ins() {
        Some(which) => Some(
            libs::prepare_links(which, plan.libs.sim_dir.as_deref(), &run_dir.join("lib"))
                .map_err(|e| Failure::new(Stage::NcclLoad, who, e))?,
        ),
        None => None,
    };
    // Rank 0 takes every rank's status reports (see `status`).
    let mut status_port = None;
    // `isolate` has its own coordinator, and a rank gone there is a finding, not the job's end.
    let job = if who.rank.unwrap_or(0) == 0
        && plan.isolate.is_none()
        && let Ok(listener) = crate::bootstrap::tcp::listen_wide(([0, 0, 0, 0], 0).into())
        && let Ok(addr) = listener.local_addr()
    {
        status_port = Some(addr.port());
        let view = Arc::new(Mutex::new(JobView {
            nranks: nranks.unwrap_or(1),
            ..Default::default()
        }));
        status::serve(listener, view.clone());
        if let Some(key) = launcher::job_key(|k| std::env::var(k).ok()) {
            worker_line::answer_status_port_locally(&key, addr.port());
        }
        Some(view)
    } else {
        None
    };
    let vars = env::ForWorker {
        run_dir: run_dir.to_path_buf(),
        socket: sock.clone(),
        status_port,
        sim_links,
        rank: who.rank,
    }
    .vars(|k| std::env::var(k).ok());
    let mut cmd = Command::new(exe);
    // Its own process group: a launcher's or a terminal's signal reaches the supervisor, which
    // records the end and then stops the worker (the worker dies with it in any case).
    cmd.process_group(0)
        .args(std::env::args_os().skip(1))
        .envs(vars);
    crate::ffi::os::dies_with_this_process(&mut cmd);
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
    if job.is_some() {
        // Rank 0's supervisor holds one descriptor per rank (`status::serve`). Raised only now,
        // after the worker started: the worker keeps the limit the job was given, which is
        // part of what a run checks (a low `ulimit -n` is a field failure of its own).
        let want = u64::from(nranks.unwrap_or(1)) + 256;
        if let Some(got) = crate::ffi::os::raise_fd_limit(want)
            && got < want
        {
            say_err!(
                "nccl-smoke: rank 0's supervisor may open {got} descriptors (ulimit -Hn), fewer \
                 than the {want} its status line needs for this job's ranks: ranks it cannot \
                 take are reported as never heard from; raise the hard limit on rank 0's node"
            );
        }
    }
    worker_line::read_worker(listener, tx);
    let code = watch(plan, who, child, rx, job, &term);
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
