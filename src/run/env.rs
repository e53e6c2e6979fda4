//! The one list of environment variables passed from a rank's supervisor to its worker, and
//! what each carries. The worker reads them back here too.

use crate::report::fingerprint::INJECTED_ENV;
use std::ffi::OsString;
use std::path::PathBuf;

/// Set in the worker's environment: this process is the worker.
pub const WORKER: &str = "NCCL_SMOKE_WORKER";
/// Where the worker finds the run folder (NCCL logs, socket).
pub const RUN_DIR: &str = "NCCL_SMOKE_RUN_DIR";
/// The supervisor's Unix socket, where the worker reports (see [`crate::events`]).
pub use crate::events::SOCKET_ENV as SOCKET;
/// Rank 0: the port of its supervisor's status listener, which its worker broadcasts.
pub const STATUS_PORT: &str = "NCCL_SMOKE_STATUS_PORT";
/// The simulation: the folder of library links its supervisor made.
pub const SIM_LINK_DIR: &str = "NCCL_SMOKE_SIM_LINK_DIR";
/// The simulation: this rank, for its faults (`NCCL_SMOKE_SIM_FAULT=…@RANK`).
pub use nccl_smoke_fault::RANK_ENV as SIM_RANK;

/// What a supervisor hands its worker.
#[derive(Debug, Clone, Default)]
pub struct ForWorker {
    pub run_dir: PathBuf,
    pub socket: PathBuf,
    /// Rank 0: its status listener's port.
    pub status_port: Option<u16>,
    /// The simulation: the folder of library links, and the rank when known.
    pub sim_links: Option<PathBuf>,
    pub rank: Option<u32>,
}

impl ForWorker {
    /// Every variable, in order; `get` reads the supervisor's own environment.
    pub fn vars(&self, get: impl Fn(&str) -> Option<String>) -> Vec<(&'static str, OsString)> {
        let mut out: Vec<(&'static str, OsString)> = vec![
            (WORKER, "1".into()),
            (SOCKET, self.socket.clone().into()),
            (RUN_DIR, self.run_dir.clone().into()),
        ];
        if get("NCCL_DEBUG").is_none() {
            // NCCL's own words are the best evidence: its warnings, and the INIT/NET lines that
            // say which transports it chose. They go to a file per process, not the user's
            // screen.
            out.push(("NCCL_DEBUG", "INFO".into()));
            out.push(("NCCL_DEBUG_SUBSYS", "INIT,NET".into()));
            out.push((
                "NCCL_DEBUG_FILE",
                self.run_dir.join("nccl.%h.%p.log").into(),
            ));
            out.push((
                INJECTED_ENV,
                "NCCL_DEBUG,NCCL_DEBUG_SUBSYS,NCCL_DEBUG_FILE".into(),
            ));
        }
        if let Some(dir) = &self.sim_links {
            let old = get("LD_LIBRARY_PATH").unwrap_or_default();
            let ld = if old.is_empty() {
                dir.display().to_string()
            } else {
                format!("{}:{old}", dir.display())
            };
            out.push(("LD_LIBRARY_PATH", ld.into()));
            out.push((SIM_LINK_DIR, dir.clone().into()));
            if let Some(r) = self.rank {
                out.push((SIM_RANK, r.to_string().into()));
            }
        }
        if let Some(port) = self.status_port {
            out.push((STATUS_PORT, port.to_string().into()));
        }
        out
    }
}

/// Whether this process is a worker.
pub fn is_worker() -> bool {
    std::env::var_os(WORKER).is_some()
}

/// The worker's run folder, when its supervisor made one.
pub fn run_dir() -> Option<PathBuf> {
    std::env::var_os(RUN_DIR).map(PathBuf::from)
}

/// The file in the run folder that holds the plan the supervisor built, for its worker.
const PLAN_FILE: &str = "plan.json";

/// The supervisor: writes `plan` into the run folder, where its worker takes it as it is
/// (see [`handed_plan`]): the command line is checked once, and both processes run one plan.
pub fn hand_over(plan: &super::Plan, run_dir: &std::path::Path) -> Result<(), String> {
    let path = run_dir.join(PLAN_FILE);
    let text = serde_json::to_vec(plan).map_err(|e| format!("cannot write the plan: {e}"))?;
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The worker: the plan its supervisor handed over (see [`hand_over`]).
pub fn handed_plan() -> Result<super::Plan, String> {
    let path = run_dir()
        .ok_or_else(|| format!("a worker without {RUN_DIR}: start nccl-smoke run, not its worker"))?
        .join(PLAN_FILE);
    let text = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_slice(&text).map_err(|e| format!("{}: not a plan: {e}", path.display()))
}

/// Rank 0's worker: its supervisor's status port.
pub fn status_port() -> Option<String> {
    std::env::var(STATUS_PORT).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_gets_the_sockets_the_logs_and_the_simulation() {
        let w = ForWorker {
            run_dir: "/tmp/r".into(),
            socket: "/tmp/r/s".into(),
            status_port: Some(4711),
            sim_links: Some("/tmp/r/lib".into()),
            rank: Some(2),
        };
        let vars = w.vars(|k| (k == "LD_LIBRARY_PATH").then(|| "/usr/lib".into()));
        let get = |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert_eq!(get(WORKER), Some("1".into()));
        assert_eq!(get("NCCL_DEBUG"), Some("INFO".into()));
        assert_eq!(get("LD_LIBRARY_PATH"), Some("/tmp/r/lib:/usr/lib".into()));
        assert_eq!(get(SIM_RANK), Some("2".into()));
        assert_eq!(get(STATUS_PORT), Some("4711".into()));
        let quiet = ForWorker::default().vars(|k| (k == "NCCL_DEBUG").then(|| "WARN".into()));
        assert!(quiet.iter().all(|(k, _)| !k.starts_with("NCCL_DEBUG")));
    }
}
