//! Who the ranks are and how they talk before NCCL exists: rank, size and local rank, the
//! broadcast of the NCCL unique id, and the gathering of per-rank results to rank 0.
//!
//! Two carriers: MPI (feature `mpi`), and nccl-smoke's own TCP rendezvous for jobs without a
//! working MPI, fed by launcher variables (see [`launcher`]). [`Mode`] picks; `auto` decides
//! from the environment before MPI is touched, so that a process no MPI launcher started never
//! sits in `MPI_Init`. A process with no launcher variables at all is a world of one.

pub mod launcher;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod rendezvous;
pub mod single;
pub mod tcp;

use serde::{Deserialize, Serialize};

/// The collective operations nccl-smoke needs from its launcher, all blocking.
pub trait Bootstrap {
    fn rank(&self) -> u32;
    fn size(&self) -> u32;
    /// Rank among the ranks on this host.
    fn local_rank(&self) -> u32;
    /// Ranks on this host.
    fn local_size(&self) -> u32;
    /// What carried the ranks, e.g. "Open MPI v4.1.4" or "single process".
    fn describe(&self) -> String;
    /// The same, for the results file.
    fn info(&self) -> Info;
    fn barrier(&self);
    /// Replaces `buf` on every rank with rank 0's.
    fn broadcast(&self, buf: &mut [u8]);
    /// Rank 0 gets every rank's bytes in rank order; other ranks get `None`.
    fn gather(&self, bytes: &[u8]) -> Option<Vec<Vec<u8>>>;
}

/// Which carrier a run used and where its ranks came from, as the results file records it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Info {
    /// `mpi`, `env` (the TCP rendezvous) or `single`.
    pub kind: String,
    /// The launcher variables believed (or the MPI library, for `mpi`).
    pub source: String,
    /// Rank 0's `host:port` and the variables that gave it (`env` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendezvous: Option<String>,
}

/// `--bootstrap` (its values are the command line's, as `DataType`'s are). `Auto`: the explicit
/// `NCCL_SMOKE_BOOTSTRAP` first; then MPI when built with it and an MPI launcher's variables
/// are present; then the TCP rendezvous from launcher variables; then a world of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Mode {
    #[default]
    Auto,
    Mpi,
    Env,
}

/// Gathers one serialisable value per rank to rank 0.
pub fn gather_json<T: serde::Serialize + serde::de::DeserializeOwned>(
    boot: &dyn Bootstrap,
    mine: &T,
) -> Option<Vec<T>> {
    let bytes = serde_json::to_vec(mine).unwrap_or_default();
    let all = boot.gather(&bytes)?;
    Some(
        all.iter()
            .filter_map(|b| serde_json::from_slice(b).ok())
            .collect(),
    )
}

/// Whether `mode` will initialise MPI in this environment (decided before touching it).
pub fn uses_mpi(mode: Mode, get: impl Fn(&str) -> Option<String>) -> bool {
    match mode {
        Mode::Mpi => true,
        Mode::Env => false,
        Mode::Auto => {
            cfg!(feature = "mpi") && get(tcp::ADDR_ENV).is_none() && launcher::mpi_launched(get)
        }
    }
}

/// Joins the job within `deadline` (the launch stage's).
pub fn init(mode: Mode, deadline: std::time::Duration) -> Result<Box<dyn Bootstrap>, String> {
    let get = |k: &str| std::env::var(k).ok();
    if uses_mpi(mode, get) {
        return mpi_init();
    }
    match launcher::resolve(get)? {
        Some(world) => Ok(Box::new(tcp::Tcp::join(&world, deadline)?)),
        None if mode == Mode::Env => Err(
            "--bootstrap env: no launcher variables (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, \
             SLURM_PROCID/SLURM_STEP_NUM_TASKS under srun, OMPI_COMM_WORLD_* under mpirun, \
             JOB_COMPLETION_INDEX/WORLD_SIZE in an indexed Job)"
                .into(),
        ),
        None => Ok(Box::new(single::Single)),
    }
}

#[cfg(feature = "mpi")]
fn mpi_init() -> Result<Box<dyn Bootstrap>, String> {
    match mpi::Mpi::init() {
        Some(m) => Ok(Box::new(m)),
        None => Err("MPI_Init failed or MPI was already initialised".into()),
    }
}

#[cfg(not(feature = "mpi"))]
fn mpi_init() -> Result<Box<dyn Bootstrap>, String> {
    Err("--bootstrap mpi: this nccl-smoke was built without MPI (feature `mpi`)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_uses_mpi_only_under_an_mpi_launcher() {
        let none = |_: &str| None;
        assert!(!uses_mpi(Mode::Auto, none));
        let slurm = |k: &str| (k == "SLURM_PROCID").then(|| "0".to_string());
        assert!(!uses_mpi(Mode::Auto, slurm));
        let pmix = |k: &str| (k == "PMIX_RANK").then(|| "0".to_string());
        assert_eq!(uses_mpi(Mode::Auto, pmix), cfg!(feature = "mpi"));
        assert!(!uses_mpi(Mode::Env, pmix));
        assert!(uses_mpi(Mode::Mpi, none));
        // nccl-smoke launch's explicit address wins over MPI markers.
        let both = |k: &str| matches!(k, "PMIX_RANK" | "NCCL_SMOKE_BOOTSTRAP").then(|| "x".into());
        assert!(!uses_mpi(Mode::Auto, both));
    }
}
