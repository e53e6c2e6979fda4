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
