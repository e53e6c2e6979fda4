//! What the launcher's environment says about this process, read before any MPI call.

/// A launcher's view of this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LauncherView {
    /// Which variable family spoke, e.g. "Open MPI (OMPI_COMM_WORLD_SIZE)".
    pub source: &'static str,
    pub rank: Option<u32>,
    pub size: u32,
    pub local_rank: Option<u32>,
}

/// Launcher variable families, most specific first: (label, size, rank, local rank).
const FAMILIES: &[(&str, &str, &str, &str)] = &[
    (
        "nccl-smoke launch (NCCL_SMOKE_WORLD_SIZE)",
        super::tcp::SIZE_ENV,
        super::tcp::RANK_ENV,
        super::tcp::LOCAL_RANK_ENV,
    ),
    (
        "Open MPI (OMPI_COMM_WORLD_SIZE)",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
    ),
    (
        "PMIx (PMIX_SIZE)",
        "PMIX_SIZE",
        "PMIX_RANK",
        "PMIX_LOCAL_RANK",
    ),
    (
        "MPICH/Hydra PMI (PMI_SIZE)",
        "PMI_SIZE",
        "PMI_RANK",
        "MPI_LOCALRANKID",
    ),
    (
        "Slurm srun (SLURM_STEP_NUM_TASKS)",
        "SLURM_STEP_NUM_TASKS",
        "SLURM_PROCID",
        "SLURM_LOCALID",
    ),
    (
        "torchrun-style (WORLD_SIZE)",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
    ),
];

/// Reads the launcher variables through `get` (the environment, or a map in tests).
pub fn read(get: impl Fn(&str) -> Option<String>) -> Option<LauncherView> {
    let num = |k: &str| get(k).and_then(|v| v.trim().parse::<u32>().ok());
    FAMILIES.iter().find_map(|(source, size, rank, local)| {
        Some(LauncherView {
            source,
            size: num(size)?,
            rank: num(rank),
            local_rank: num(local),
        })
    })
}

/// The launcher's view of this process from the real environment.
pub fn from_env() -> Option<LauncherView> {
    read(|k| std::env::var(k).ok())
}

/// When MPI says the world has one rank but the launcher started more, the binary was built
/// against a different MPI than the launcher: each copy is a world of its own.
pub fn mismatch(mpi_size: u32, view: Option<&LauncherView>) -> Option<String> {
    let view = view?;
    (mpi_size == 1 && view.size > 1).then(|| {
        format!(
            "MPI reports a world of 1 rank, but the launcher started {} ({}): this binary was \
             built against a different MPI than the launcher's, so every copy is rank 0 of its own job",
            view.size, view.source
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn open_mpi_variables_win() {
        let v = read(env(&[
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
            ("SLURM_STEP_NUM_TASKS", "8"),
        ]))
        .unwrap();
        assert_eq!(v.size, 4);
        assert_eq!(v.rank, Some(2));
        assert_eq!(v.local_rank, Some(0));
        assert!(v.source.starts_with("Open MPI"));
    }

    #[test]
    fn slurm_allocation_alone_is_not_a_launch() {
        assert_eq!(read(env(&[("SLURM_NTASKS", "8")])), None);
        let v = read(env(&[("SLURM_STEP_NUM_TASKS", "8"), ("SLURM_PROCID", "5")])).unwrap();
        assert_eq!((v.size, v.rank), (8, Some(5)));
    }

    #[test]
    fn world_of_one_under_a_bigger_launch_is_a_mismatch() {
        let v = read(env(&[("PMI_SIZE", "2"), ("PMI_RANK", "1")])).unwrap();
        let msg = mismatch(1, Some(&v)).unwrap();
        assert!(msg.contains("launcher started 2"), "{msg}");
        assert!(msg.contains("PMI_SIZE"), "{msg}");
        assert_eq!(mismatch(2, Some(&v)), None);
        assert_eq!(mismatch(1, None), None);
    }
}
