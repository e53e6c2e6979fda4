//! Who the ranks are and how they talk before NCCL exists: rank, size and local rank, the
//! broadcast of the NCCL unique id, and the gathering of per-rank results to rank 0.
//!
//! MPI (feature `mpi`) is the normal path. Without MPI, a job of one rank runs on its own, and
//! a size-1 world under a launcher that started several ranks is refused with the classic
//! diagnosis: a binary built against another MPI than the `mpirun` that started it.

pub mod launcher;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod single;
pub mod tcp;

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
    fn barrier(&self);
    /// Replaces `buf` on every rank with rank 0's.
    fn broadcast(&self, buf: &mut [u8]);
    /// Rank 0 gets every rank's bytes in rank order; other ranks get `None`.
    fn gather(&self, bytes: &[u8]) -> Option<Vec<Vec<u8>>>;
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

/// `nccl-smoke launch`'s TCP star when its variables are set, else MPI (or, built without
/// MPI, a world of one).
pub fn init_bootstrap(deadline: std::time::Duration) -> Result<Box<dyn Bootstrap>, String> {
    if tcp::Tcp::requested() {
        return Ok(Box::new(tcp::Tcp::init(deadline)?));
    }
    mpi_or_single()
}

#[cfg(feature = "mpi")]
fn mpi_or_single() -> Result<Box<dyn Bootstrap>, String> {
    match mpi::Mpi::init() {
        Some(m) => Ok(Box::new(m)),
        None => Err("MPI_Init failed or MPI was already initialised".into()),
    }
}

#[cfg(not(feature = "mpi"))]
fn mpi_or_single() -> Result<Box<dyn Bootstrap>, String> {
    Ok(Box::new(single::Single))
}
