//! The run engine: one rank's supervisor and worker, the status line between ranks, and rank
//! 0's results file. `cli` builds a [`Plan`] and hands it here.
//!
//! - [`worker`](mod@worker): the stage walk, what a failure carries, the worker's part of rank
//!   0's results file and console;
//! - [`supervisor`]: spawns the worker with its environment, takes the launcher's signals,
//!   watches the worker, concludes the rank and, on rank 0, the job;
//! - [`nccl_ras`]: asking NCCL's RAS service about a communicator;
//! - [`status`] (rank 0's side) and [`rank0_line`] (every other rank's): the side channel
//!   between the ranks' supervisors;
//! - [`worker_line`]: worker → supervisor;
//! - [`env`](mod@env): the variables passed from supervisor to worker.

/// One line on stderr; a closed stderr (the launcher went first) is no reason to stop, nor to
/// panic as `eprintln!` would.
macro_rules! say_err {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub mod env;
pub mod isolate;
pub mod kept_logs;
pub mod launch;
pub mod libs;
pub mod nccl_ras;
pub mod plan;
pub mod rank0_line;
pub mod status;
pub mod supervisor;
pub mod worker;
pub mod worker_line;

use crate::stage::exit;
pub use plan::{Plan, Settings};
pub use supervisor::supervise;
pub use worker::worker;

/// `run` and `isolate`: the supervisor, which builds the plan (`plan`, from the command line),
/// or, in the process it spawns, the worker, which runs the plan its supervisor handed over.
pub fn start(plan: impl FnOnce() -> Result<Plan, String>) -> u8 {
    let plan = if env::is_worker() {
        match env::handed_plan() {
            Ok(plan) => return worker(&plan),
            Err(msg) => Err(msg),
        }
    } else {
        plan()
    };
    match plan {
        Err(msg) => {
            eprintln!("nccl-smoke: {msg}");
            exit::USAGE
        }
        Ok(plan) => supervise(&plan),
    }
}
