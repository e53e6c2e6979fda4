//! The supervisor's findings, when its worker could not give its own: a hang, a crash, a stop
//! by the launcher, a rank 0 that went away.

use crate::error::{
    CRASHED_MARK, ENDED_BY_RANK0, Failure, HUNG_MARK, Kind, STOPPED, WAITED_MARK, Who,
};
use crate::ffi::os;
use crate::stage::Stage;
use std::time::Duration;

/// What a supervisor knows of a worker that made no progress.
#[derive(Debug, Clone)]
pub struct Hang<'a> {
    /// The worker's rank (as last known) and host.
    pub who: Who,
    pub stage: Stage,
    /// The last step it announced within the stage.
    pub step: Option<&'a str>,
    /// Whether it was waiting on other ranks (by its stage, or by its step).
    pub waiting: bool,
    /// How long it has made no progress.
    pub quiet: Duration,
    /// The stage's deadline, and the time the work under way was expected to take.
    pub deadline: Duration,
    pub budget: Duration,
    /// Whether the worker is stopped (SIGSTOP, SIGTSTP, a debugger).
    pub stopped: bool,
}

/// The worker made no progress within its stage's deadline and was killed.
pub fn hung(h: &Hang) -> Failure {
    let waited = if h.stopped {
        ": the worker is stopped (SIGSTOP, SIGTSTP or a debugger holds it)".to_string()
    } else if h.waiting {
        format!(" {WAITED_MARK}")
    } else {
        String::new()
    };
    let budget = if h.budget.is_zero() || h.stopped {
        String::new()
    } else {
        format!(
            " + {:.1} s expected for the work under way",
            h.budget.as_secs_f64()
        )
    };
    let f = Failure::new(
        h.stage,
        &h.who,
        format!(
            "no progress for {:.1} s in the {} stage{}{waited} (deadline {:.0} s{budget}): {HUNG_MARK}",
            h.quiet.as_secs_f64(),
            h.stage,
            h.step.map(|s| format!(", {s}")).unwrap_or_default(),
            h.deadline.as_secs_f64()
        ),
    )
    .kind(if h.waiting && !h.stopped {
        Kind::Waited
    } else {
        Kind::Hung
    });
    if h.stopped {
        return f
            .cause("the worker process was stopped from outside nccl-smoke; the other ranks wait for it")
            .hint("look for a debugger, a job-control stop (Ctrl-Z) or a scheduler that suspends processes");
    }
    match h.stage {
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

/// The worker died of signal `sig` during `stage`.
pub fn crashed(who: &Who, stage: Stage, sig: i32) -> Failure {
    let f = Failure::new(
        stage,
        who,
        format!(
            "{CRASHED_MARK}{} during the {stage} stage",
            os::signal_name(sig)
        ),
    )
    .kind(Kind::Crashed);
    if sig == libc::SIGKILL {
        // Nothing inside a library raises SIGKILL: it came from outside.
        return f
            .cause("the worker was killed from outside nccl-smoke: the kernel's OOM killer, an operator, or the scheduler")
            .hint("dmesg shows an OOM kill; check the job's memory limit and the scheduler's events");
    }
    let culprit = match stage {
        Stage::Launch => "the MPI library",
        Stage::Driver | Stage::Device | Stage::Alloc => "the CUDA driver",
        _ => "libnccl or the CUDA driver",
    };
    f.cause(format!("a crash inside {culprit}"))
        .hint("a core dump (ulimit -c unlimited) and NCCL_DEBUG=INFO show where")
}

/// The launcher stopped this rank (another rank failed, or the job was cancelled).
pub fn stopped_by_launcher(who: &Who, stage: Stage) -> Failure {
    Failure::new(
        stage,
        who,
        format!(
            "{STOPPED} during the {stage} stage (another rank failed, or the job was cancelled)"
        ),
    )
    .kind(Kind::Stopped)
}

/// Rank 0's supervisor ends the job and stops its own worker, for `why`: another rank vanished
/// or stopped answering (which the launcher cannot know), or another rank failed on its own
/// and the ranks failing alike have had their moment to report.
pub fn ended_by_rank0(who: &Who, stage: Stage, why: &str) -> Failure {
    Failure::new(
        stage,
        who,
        format!("{ENDED_BY_RANK0} during the {stage} stage: {why}"),
    )
    .kind(Kind::Stopped)
}

/// Another rank's supervisor (`seen_by`) lost rank 0's: the status line to it closed
/// (`closed`), or it said nothing for more than `limit`.
pub fn rank0_gone(
    rank0_host: String,
    seen_by: &str,
    stage: Stage,
    closed: bool,
    limit: Duration,
) -> Failure {
    let rank0 = Who {
        rank: Some(0),
        host: rank0_host,
    };
    let f = if closed {
        Failure::new(
            stage,
            &rank0,
            format!(
                "its supervisor is gone: the status line to it closed without a word during the {stage} \
                 stage (seen by {seen_by})"
            ),
        )
        .cause("rank 0's supervisor was killed (SIGKILL, the OOM killer), or its host went down")
    } else {
        Failure::new(
            stage,
            &rank0,
            format!(
                "its supervisor stopped answering: nothing from it for more than {:.0} s during the \
                 {stage} stage (seen by {seen_by})",
                limit.as_secs_f64()
            ),
        )
        .cause("rank 0's supervisor process is stopped (SIGSTOP, a debugger), or its host is overloaded or cut off")
    };
    f.hint("check rank 0's host: the process's state (ps -o stat,pid,cmd), the kernel log (dmesg)")
}
