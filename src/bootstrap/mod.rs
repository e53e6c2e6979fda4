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
pub mod tree;

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
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum Mode {
    #[default]
    Auto,
    Mpi,
    Env,
}

impl Mode {
    /// `--bootstrap`'s long help: the sources, in the order they are believed.
    pub fn help() -> String {
        let families: Vec<&str> = launcher::FAMILIES.iter().map(|f| f.label).collect();
        format!(
            "How the ranks find each other. `mpi`: MPI_Init (a build with the `mpi` feature, \
             started by mpirun or `srun --mpi=pmix`). `env`: nccl-smoke's own TCP rendezvous: rank \
             0 listens, the others connect within the launch deadline; rank, world size and local \
             rank come from the first of: {}. Rank 0's address is NCCL_SMOKE_BOOTSTRAP=host:port, \
             else MASTER_ADDR and MASTER_PORT, else under srun the step's first node (port from \
             SLURM_STEP_RESV_PORTS, or derived from the job and step ids), else under mpirun on one \
             host loopback. `auto` (default): `env` when NCCL_SMOKE_BOOTSTRAP is set, `mpi` when \
             built with MPI and an MPI launcher's variables are present ({}), else `env` when \
             launcher variables are present, else a single rank. The choice is recorded in the \
             results (fingerprint.bootstrap).",
            families.join("; "),
            launcher::MPI_MARKERS.join(", ")
        )
    }
}

/// A rank's value that could not be gathered: never dropped, always named.
#[derive(Debug, Clone, PartialEq)]
pub struct GatherError {
    pub rank: u32,
    pub what: String,
}

impl std::fmt::Display for GatherError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {}'s {}", self.rank, self.what)
    }
}

/// Marks a value its rank could not encode; the rest of the message is why.
const UNENCODABLE: u8 = b'!';

/// Gathers one serialisable value per rank to rank 0: `Ok(Some(all))` there, in rank order,
/// `Ok(None)` on the other ranks. A value that its rank could not encode, or that rank 0
/// cannot read, or a rank missing from the gather, is an error naming the rank: a result
/// silently dropped here once turned a run whose collectives never ran into a PASS.
pub fn gather_json<T: serde::Serialize + serde::de::DeserializeOwned>(
    boot: &dyn Bootstrap,
    mine: &T,
) -> Result<Option<Vec<T>>, GatherError> {
    let bytes = serde_json::to_vec(mine).unwrap_or_else(|e| {
        let mut b = vec![UNENCODABLE];
        b.extend_from_slice(e.to_string().as_bytes());
        b
    });
    let Some(all) = boot.gather(&bytes) else {
        return Ok(None);
    };
    decode_all(&all, boot.size()).map(Some)
}

/// Reads every rank's gathered bytes (see [`gather_json`]).
fn decode_all<T: serde::de::DeserializeOwned>(
    all: &[Vec<u8>],
    nranks: u32,
) -> Result<Vec<T>, GatherError> {
    if all.len() != nranks as usize {
        return Err(GatherError {
            rank: all.len().min(nranks as usize) as u32,
            what: format!("value is missing: {} values for {nranks} ranks", all.len()),
        });
    }
    all.iter()
        .enumerate()
        .map(|(rank, b)| {
            let rank = rank as u32;
            if b.first() == Some(&UNENCODABLE) {
                return Err(GatherError {
                    rank,
                    what: format!(
                        "value could not be encoded: {}",
                        String::from_utf8_lossy(&b[1..])
                    ),
                });
            }
            serde_json::from_slice(b).map_err(|e| GatherError {
                rank,
                what: format!("value ({} bytes) could not be read: {e}", b.len()),
            })
        })
        .collect()
}

/// Whether `mode` will initialise MPI in this environment (decided before touching it).
pub fn uses_mpi(mode: Mode, get: impl Fn(&str) -> Option<String>) -> bool {
    match mode {
        Mode::Mpi => true,
        Mode::Env => false,
        Mode::Auto => {
            cfg!(feature = "mpi")
                && get(rendezvous::ADDR_ENV).is_none()
                && launcher::mpi_launched(get)
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

#[cfg(test)]
mod gather_tests {
    use super::*;

    #[test]
    fn nothing_is_dropped_a_bad_value_names_its_rank() {
        let ok: Vec<Vec<u8>> = vec![b"1.5".to_vec(), b"2".to_vec()];
        assert_eq!(decode_all::<f64>(&ok, 2).unwrap(), [1.5, 2.0]);
        let null = vec![b"1".to_vec(), b"null".to_vec()];
        let e = decode_all::<f64>(&null, 2).unwrap_err();
        assert_eq!(e.rank, 1);
        assert!(
            e.to_string()
                .starts_with("rank 1's value (4 bytes) could not be read"),
            "{e}"
        );
        let short = vec![b"1".to_vec()];
        assert_eq!(decode_all::<f64>(&short, 3).unwrap_err().rank, 1);
        let bad = vec![b"1".to_vec(), b"!NaN is not JSON".to_vec()];
        let e = decode_all::<f64>(&bad, 2).unwrap_err();
        assert_eq!(
            (e.rank, e.what.as_str()),
            (1, "value could not be encoded: NaN is not JSON")
        );
    }
}
