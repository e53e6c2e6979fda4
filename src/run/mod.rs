//! The run engine: one rank's supervisor and worker, the status line between ranks, and rank
//! 0's results file. `cli` builds a [`Plan`] and hands it here.
//!
//! - [`worker`](mod@worker): the stage walk (with [`evidence`], what a failure carries);
//! - [`recorder`]: rank 0's results file and console;
//! - [`supervisor`]: spawns the worker with its environment, takes the launcher's signals;
//! - [`watch`]: the supervisor's watch loop, and [`conclude`], the end of a rank;
//! - [`status`] and [`uplink`]: the side channel between the ranks' supervisors;
//! - [`link`]: worker → supervisor;
//! - [`env`](mod@env): the variables passed from supervisor to worker.

/// One line on stderr; a closed stderr (the launcher went first) is no reason to stop, nor to
/// panic as `eprintln!` would.
macro_rules! say_err {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub mod conclude;
pub mod control_plane;
pub mod env;
pub mod evidence;
pub mod expect;
pub mod isolate;
pub mod libs;
pub mod link;
pub mod plan;
pub mod recorder;
pub mod status;
pub mod supervisor;
pub mod uplink;
pub mod watch;
pub mod worker;

pub use plan::{Plan, Settings};
pub use supervisor::supervise;
pub use worker::worker;
