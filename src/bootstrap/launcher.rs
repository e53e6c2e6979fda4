//! What the launcher's environment says about this process, read before any MPI call: which
//! launcher started it, its rank, the world's size, and — for ranks that meet over
//! nccl-smoke's own TCP rendezvous instead of MPI — where rank 0 listens.

use super::rendezvous;

/// The world's size, this process's rank and its local rank, as `nccl-smoke launch` sets them
/// (rank 0's address is [`rendezvous::ADDR_ENV`]).
pub const SIZE_ENV: &str = "NCCL_SMOKE_WORLD_SIZE";
pub const RANK_ENV: &str = "NCCL_SMOKE_RANK";
pub const LOCAL_RANK_ENV: &str = "NCCL_SMOKE_LOCAL_RANK";

/// A family of launcher variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// Names the launcher and its variables, e.g. "Slurm srun (SLURM_PROCID, SLURM_STEP_NUM_TASKS)".
    pub label: &'static str,
    pub size: &'static str,
    pub rank: &'static str,
    pub local_rank: &'static str,
    /// Where rank 0 listens when nothing more explicit says (see [`rendezvous::address`]).
    pub rendezvous: rendezvous::Default,
}

use rendezvous::Default as At;

impl Family {
    /// What the rendezvous needs to know of this family to find rank 0's address.
    pub fn asking(&self) -> rendezvous::Asking<'static> {
        rendezvous::Asking {
            label: self.label,
            size: self.size,
            default: self.rendezvous,
        }
    }

    /// Whether another family reads the same size variable (`WORLD_SIZE`: torchrun-style and
    /// an indexed Job), so that the size alone does not say the family is present.
    fn shares_size(&self) -> bool {
        FAMILIES
            .iter()
            .any(|f| f.size == self.size && f.rank != self.rank)
    }
}

/// Launcher variable families, in the order they are believed. The explicit `nccl-smoke
/// launch` variables first; then MPI launchers' (whose ranks, when nccl-smoke is built with
/// MPI, MPI itself gives). torchrun-style variables come before Slurm's because srun never sets
/// them: seen beside Slurm's, they come from a launcher nested inside the step (`srun torchrun`),
/// whose world is the one the process belongs to. A Kubernetes indexed Job sets only
/// `JOB_COMPLETION_INDEX`; its manifest sets `WORLD_SIZE` and the address.
pub const FAMILIES: &[Family] = &[
    Family {
        label: "nccl-smoke launch (NCCL_SMOKE_RANK, NCCL_SMOKE_WORLD_SIZE)",
        size: SIZE_ENV,
        rank: RANK_ENV,
        local_rank: LOCAL_RANK_ENV,
        rendezvous: At::Explicit,
    },
    Family {
        label: "Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)",
        size: "OMPI_COMM_WORLD_SIZE",
        rank: "OMPI_COMM_WORLD_RANK",
        local_rank: "OMPI_COMM_WORLD_LOCAL_RANK",
        rendezvous: At::LocalJob {
            local_size: "OMPI_COMM_WORLD_LOCAL_SIZE",
            job_ids: &["OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"],
        },
    },
    Family {
        label: "PMI (PMI_RANK, PMI_SIZE)",
        size: "PMI_SIZE",
        rank: "PMI_RANK",
        local_rank: "MPI_LOCALRANKID",
        rendezvous: At::LocalJob {
            local_size: "MPI_LOCALNRANKS",
            job_ids: &["PMI_KVSNAME", "PMI_JOBID"],
        },
    },
    Family {
        label: "torchrun-style (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)",
        size: "WORLD_SIZE",
        rank: "RANK",
        local_rank: "LOCAL_RANK",
        rendezvous: At::Explicit,
    },
    Family {
        label: "Slurm srun (SLURM_PROCID, SLURM_STEP_NUM_TASKS)",
        size: "SLURM_STEP_NUM_TASKS",
        rank: "SLURM_PROCID",
        local_rank: "SLURM_LOCALID",
        rendezvous: At::SlurmStep,
    },
    Family {
        label: "Kubernetes indexed Job (JOB_COMPLETION_INDEX, WORLD_SIZE)",
        size: "WORLD_SIZE",
        rank: "JOB_COMPLETION_INDEX",
        local_rank: "LOCAL_RANK",
        rendezvous: At::Explicit,
    },
];

/// Variables whose presence says an MPI launcher started this process (Open MPI's mpirun,
/// PMIx — mpirun or `srun --mpi=pmix` — or a PMI-1/2 launcher such as MPICH's Hydra or
/// `srun --mpi=pmi2`): with `--bootstrap auto` an MPI build then lets MPI find the ranks.
pub const MPI_MARKERS: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"];

/// A launcher's view of this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LauncherView {
    /// Which variable family spoke.
    pub source: &'static str,
    pub rank: Option<u32>,
    pub size: u32,
    pub local_rank: Option<u32>,
}

/// A complete family: the process's place in the world and where rank 0 listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvWorld {
    pub family: Family,
    pub rank: u32,
    pub size: u32,
    pub local_rank: Option<u32>,
    /// `host:port`.
    pub address: String,
    /// Which variables gave the address, e.g. "MASTER_ADDR, MASTER_PORT".
    pub address_from: String,
}

fn number(get: &impl Fn(&str) -> Option<String>, name: &str) -> Result<Option<u32>, String> {
    match get(name) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse::<u32>()
            .map(Some)
            .map_err(|_| format!("{name}='{v}' is not a non-negative integer")),
    }
}

/// Reads the launcher variables through `get` (the environment, or a map in tests): the first
/// family whose size variable is set. Lenient: it serves the supervisor, which only labels the
/// rank, and the MPI cross-check.
pub fn read(get: impl Fn(&str) -> Option<String>) -> Option<LauncherView> {
    let num = |k: &str| get(k).and_then(|v| v.trim().parse::<u32>().ok());
    FAMILIES.iter().find_map(|f| {
        let rank = num(f.rank);
        // A shared size variable alone belongs to whichever family also has its rank variable.
        if f.shares_size() && rank.is_none() {
            return None;
        }
        Some(LauncherView {
            source: f.label,
            size: num(f.size)?,
            rank,
            local_rank: num(f.local_rank),
        })
    })
}

/// The launcher's view of this process from the real environment.
pub fn from_env() -> Option<LauncherView> {
    read(|k| std::env::var(k).ok())
}

/// What names this job, the same on every rank and on no other job: the launcher's own job id
/// (PMIx's namespace: Open MPI 5's mpirun and `srun --mpi=pmix`; Open MPI 4's job id; Slurm's
/// job and step), else where its ranks meet (`nccl-smoke launch`'s rendezvous, torchrun's
/// rendezvous id or address). `None`: nothing the ranks share names it.
pub fn job_key(get: impl Fn(&str) -> Option<String>) -> Option<String> {
    let set = |k: &str| get(k).filter(|v| !v.trim().is_empty());
    set("PMIX_NAMESPACE")
        .or_else(|| set("OMPI_MCA_ess_base_jobid").map(|j| format!("ompi.{j}")))
        .or_else(|| {
            let job = set("SLURM_JOB_ID")?;
            Some(format!("slurm.{job}.{}", set("SLURM_STEP_ID")?))
        })
        .or_else(|| set(rendezvous::ADDR_ENV).map(|a| format!("launch.{a}")))
        .or_else(|| set("TORCHELASTIC_RUN_ID").map(|r| format!("torchrun.{r}")))
        .or_else(|| {
            Some(format!(
                "torchrun.{}:{}",
                set("MASTER_ADDR")?,
                set("MASTER_PORT")?
            ))
        })
}

/// Whether an MPI launcher started this process (see [`MPI_MARKERS`]).
pub fn mpi_launched(get: impl Fn(&str) -> Option<String>) -> bool {
    MPI_MARKERS.iter().any(|k| get(k).is_some())
}

/// The first complete family, for the TCP rendezvous. `Ok(None)`: no launcher variables at
/// all. A family half set (a rank without a size, a size without a rank, a value that is not a
/// number, a rank not below the size) with no complete family after it is an error that names
/// the variables.
pub fn resolve(get: impl Fn(&str) -> Option<String>) -> Result<Option<EnvWorld>, String> {
    let mut partial: Option<String> = None;
    for f in FAMILIES {
        let (size, rank) = match (number(&get, f.size), number(&get, f.rank)) {
            (Ok(s), Ok(r)) => (s, r),
            (Err(e), _) | (_, Err(e)) => {
                partial.get_or_insert(e);
                continue;
            }
        };
        let (size, rank) = match (size, rank) {
            (Some(s), Some(r)) => (s, r),
            (None, None) => continue,
            (Some(_), None) if f.shares_size() => {
                let ranks: Vec<&str> = FAMILIES
                    .iter()
                    .filter(|g| g.size == f.size)
                    .map(|g| g.rank)
                    .collect();
                partial.get_or_insert(format!(
                    "{} is set but neither {} is",
                    f.size,
                    ranks.join(" nor ")
                ));
                continue;
            }
            (Some(_), None) => {
                partial.get_or_insert(format!("{} is set but {} is not", f.size, f.rank));
                continue;
            }
            (None, Some(_)) => {
                partial.get_or_insert(format!("{} is set but {} is not", f.rank, f.size));
                continue;
            }
        };
        if size == 0 || rank >= size {
            return Err(format!(
                "{}={rank} is not below {}={size} ({})",
                f.rank, f.size, f.label
            ));
        }
        let local_rank = number(&get, f.local_rank)?;
        let (address, address_from) = rendezvous::address(f.asking(), &get)?;
        return Ok(Some(EnvWorld {
            family: *f,
            rank,
            size,
            local_rank,
            address,
            address_from,
        }));
    }
    match partial {
        Some(p) => Err(format!("launcher variables incomplete: {p}")),
        None => Ok(None),
    }
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
pub(crate) mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A stand-in environment for tests.
    pub(crate) fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn a_job_is_named_by_its_launcher_first() {
        let both = env(&[
            ("PMIX_NAMESPACE", "1325465601"),
            ("OMPI_MCA_ess_base_jobid", "1325465601"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "0"),
        ]);
        assert_eq!(job_key(both).as_deref(), Some("1325465601"));
        let slurm = env(&[("SLURM_JOB_ID", "77"), ("SLURM_STEP_ID", "3")]);
        assert_eq!(job_key(slurm).as_deref(), Some("slurm.77.3"));
        // A Slurm allocation without a step is not a job's ranks.
        assert_eq!(job_key(env(&[("SLURM_JOB_ID", "77")])), None);
        let torch = env(&[("MASTER_ADDR", "a"), ("MASTER_PORT", "29500")]);
        assert_eq!(job_key(torch).as_deref(), Some("torchrun.a:29500"));
        assert_eq!(job_key(env(&[("PMIX_NAMESPACE", " ")])), None);
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

    #[test]
    fn torchrun_variables_resolve_with_their_address() {
        let w = resolve(env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "29500"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((w.rank, w.size, w.local_rank), (3, 4, Some(1)));
        assert_eq!(w.address, "10.0.0.1:29500");
        assert!(w.family.label.starts_with("torchrun"));
    }

    #[test]
    fn torchrun_inside_a_slurm_step_belongs_to_torchrun() {
        let w = resolve(env(&[
            ("SLURM_PROCID", "1"),
            ("SLURM_STEP_NUM_TASKS", "2"),
            ("SLURM_STEP_NODELIST", "gpu[01-02]"),
            ("SLURM_JOB_ID", "7"),
            ("RANK", "9"),
            ("WORLD_SIZE", "16"),
            ("MASTER_ADDR", "gpu01"),
            ("MASTER_PORT", "29500"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((w.rank, w.size), (9, 16));
    }

    #[test]
    fn an_indexed_job_takes_its_rank_from_the_completion_index() {
        let w = resolve(env(&[
            ("JOB_COMPLETION_INDEX", "2"),
            ("WORLD_SIZE", "4"),
            ("MASTER_ADDR", "smoke-0.smoke"),
            ("MASTER_PORT", "29500"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((w.rank, w.size), (2, 4));
        assert!(
            w.family.label.starts_with("Kubernetes"),
            "{}",
            w.family.label
        );
        assert_eq!(
            read(env(&[("JOB_COMPLETION_INDEX", "2"), ("WORLD_SIZE", "4")]))
                .unwrap()
                .rank,
            Some(2)
        );
    }

    #[test]
    fn half_set_or_inconsistent_variables_are_named() {
        let e = resolve(env(&[("RANK", "1")])).unwrap_err();
        assert!(e.contains("RANK is set but WORLD_SIZE is not"), "{e}");
        let e = resolve(env(&[("WORLD_SIZE", "4")])).unwrap_err();
        assert!(e.contains("WORLD_SIZE"), "{e}");
        let e = resolve(env(&[("RANK", "x"), ("WORLD_SIZE", "4")])).unwrap_err();
        assert!(e.contains("RANK='x'"), "{e}");
        let e = resolve(env(&[
            ("RANK", "4"),
            ("WORLD_SIZE", "4"),
            ("MASTER_ADDR", "a"),
            ("MASTER_PORT", "1"),
        ]))
        .unwrap_err();
        assert!(e.contains("RANK=4 is not below WORLD_SIZE=4"), "{e}");
        let e = resolve(env(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "a"),
        ]))
        .unwrap_err();
        assert!(e.contains("MASTER_PORT"), "{e}");
        assert_eq!(resolve(env(&[])).unwrap(), None);
    }

    #[test]
    fn mpi_launch_is_told_by_its_markers() {
        assert!(mpi_launched(env(&[("PMIX_RANK", "0")])));
        assert!(mpi_launched(env(&[("OMPI_COMM_WORLD_SIZE", "2")])));
        assert!(!mpi_launched(env(&[("SLURM_PROCID", "0"), ("RANK", "0")])));
    }
}
