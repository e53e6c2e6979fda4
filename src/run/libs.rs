//! Which library files a run (and `doctor`) loads: one resolution for both.
//!
//! The real backend leaves the choice to the dynamic linker (or `--nccl-lib`). The simulation
//! backend gathers its two libraries into a private folder under every name the loaders try
//! (`libcuda.so`, `libcuda.so.1`, `libnccl.so.2`), which goes first on the worker's
//! `LD_LIBRARY_PATH`: even on a GPU node, where a real `libcuda.so` is on the search path,
//! cudarc then finds the simulation and never the real driver. The control-plane backend does
//! the same with the stand-in driver and NVML only, under the names the real libnccl opens.

use std::path::{Path, PathBuf};

/// Which libraries were asked for.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct LibChoice {
    /// nccl-smoke's CPU simulation of libnccl and libcuda instead of the node's.
    pub sim: bool,
    /// The libnccl to load (default: libnccl.so.2 through the dynamic linker).
    pub nccl_lib: Option<String>,
    /// Where the simulation libraries are (default: next to the nccl-smoke binary).
    pub sim_dir: Option<PathBuf>,
    /// The real libnccl on nccl-smoke's stand-in CUDA driver and NVML: init and connect only
    /// (`--backend control-plane`).
    pub control_plane: bool,
}

impl LibChoice {
    /// The stand-ins this choice links first on the worker's library path, if any.
    pub fn stand_ins(&self) -> Option<StandIns> {
        if self.sim {
            Some(StandIns::Sim)
        } else if self.control_plane {
            Some(StandIns::Gpus)
        } else {
            None
        }
    }
}

/// The library files to load: `None` means "by soname, through the dynamic linker".
#[derive(Debug, Clone, PartialEq)]
pub struct Libraries {
    pub nccl: Option<String>,
    pub cuda: Option<String>,
}

/// Which of nccl-smoke's stand-in libraries a run links into its private folder, and under
/// which names: the files a build makes (first existing wins) and the names the loaders try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StandIns {
    /// `--backend sim`: the simulated libnccl and CUDA driver.
    Sim,
    /// `--backend control-plane`: the stand-in CUDA driver and NVML, under the names the real
    /// libnccl's CUDA runtime opens (`libcuda.so` for 2.19, `libcuda.so.1` later,
    /// `libnvidia-ml.so.1`); libnccl stays the real one.
    Gpus,
}

type Library = (&'static [&'static str], &'static [&'static str]);
const NCCL: Library = (
    &["libnccl.so.2", "libnccl.so"],
    &["libnccl.so.2", "libnccl.so"],
);
const CUDA: Library = (
    &["libcuda.so.1", "libcuda.so"],
    &["libcuda.so.1", "libcuda.so"],
);
const NVML: Library = (
    &["libnvidia-ml.so.1", "libnvidia_ml.so"],
    &["libnvidia-ml.so.1"],
);

impl StandIns {
    fn libraries(self) -> &'static [Library] {
        match self {
            StandIns::Sim => &[NCCL, CUDA],
            StandIns::Gpus => &[CUDA, NVML],
        }
    }

    fn flag(self) -> &'static str {
        match self {
            StandIns::Sim => "--backend sim",
            StandIns::Gpus => "--backend control-plane",
        }
    }

    fn wanted(self) -> String {
        let names: Vec<String> = self
            .libraries()
            .iter()
            .map(|(files, _)| files.join(" or "))
            .collect();
        names.join(", ")
    }
}

/// Where the built stand-ins are: `--sim-dir`, else next to the binary (a cargo target
/// folder), else `../lib/nccl-smoke` beside it (an installed layout).
fn sim_source_dir(which: StandIns, sim_dir: Option<&Path>) -> Result<PathBuf, String> {
    let has_libs = |d: &Path| {
        which
            .libraries()
            .iter()
            .all(|(files, _)| files.iter().any(|f| d.join(f).exists()))
    };
    if let Some(d) = sim_dir {
        return if has_libs(d) {
            Ok(d.to_path_buf())
        } else {
            Err(format!(
                "--sim-dir {}: the stand-in libraries {} needs are not there ({})",
                d.display(),
                which.flag(),
                which.wanted()
            ))
        };
    }
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot locate nccl-smoke itself: {e}"))?;
    let bin_dir = exe.parent().unwrap_or(Path::new("."));
    let candidates = [
        bin_dir.to_path_buf(),
        bin_dir.join("../lib/nccl-smoke"),
        // `cargo test` runs binaries from target/<profile>/deps' parent.
        bin_dir.join(".."),
    ];
    candidates
        .iter()
        .find(|d| has_libs(d))
        .cloned()
        .ok_or_else(|| {
            format!(
                "{}: the stand-in libraries ({}) were not found next to {} (build them with \
                 `cargo build --release --workspace`, or pass --sim-dir)",
                which.flag(),
                which.wanted(),
                exe.display()
            )
        })
}

fn first_existing(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    names.iter().map(|n| dir.join(n)).find(|p| p.exists())
}

/// Makes `dir`, the private folder of links to the stand-ins `which` names, and returns it.
pub fn prepare_links(
    which: StandIns,
    sim_dir: Option<&Path>,
    dir: &Path,
) -> Result<PathBuf, String> {
    let src = sim_source_dir(which, sim_dir)?;
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (files, names) in which.libraries() {
        let target = canon(&first_existing(&src, files).unwrap_or_default());
        for name in names.iter() {
            let link = dir.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&target, &link)
                .map_err(|e| format!("cannot link {}: {e}", link.display()))?;
        }
    }
    Ok(dir.to_path_buf())
}

/// Makes `dir`, the private folder of links for the simulation, and returns it.
pub fn prepare_sim_dir(sim_dir: Option<&Path>, dir: &Path) -> Result<PathBuf, String> {
    prepare_links(StandIns::Sim, sim_dir, dir)
}

/// The library files to load for `choice`: the node's libnccl (or `--nccl-lib`) and driver
/// through the dynamic linker, or the simulation's, linked in the folder `links` gives (called
/// only for the simulation).
pub fn resolve(
    choice: &LibChoice,
    links: impl FnOnce() -> Result<PathBuf, String>,
) -> Result<Libraries, String> {
    let Some(which) = choice.stand_ins() else {
        return Ok(Libraries {
            nccl: choice.nccl_lib.clone(),
            cuda: None,
        });
    };
    let dir = links()?;
    let path = |n: &str| dir.join(n).display().to_string();
    if which == StandIns::Gpus {
        // The real libnccl (`--nccl-lib`, else the usual resolution); the stand-in driver.
        return Ok(Libraries {
            nccl: choice.nccl_lib.clone(),
            cuda: Some(path("libcuda.so.1")),
        });
    }
    Ok(Libraries {
        nccl: Some(
            choice
                .nccl_lib
                .clone()
                .unwrap_or_else(|| path("libnccl.so.2")),
        ),
        cuda: Some(path("libcuda.so.1")),
    })
}

/// The libraries a worker loads: the simulation's from the folder its supervisor made.
pub fn for_worker(choice: &LibChoice) -> Result<Libraries, String> {
    resolve(choice, || {
        match std::env::var_os(super::env::SIM_LINK_DIR) {
            Some(d) => Ok(PathBuf::from(d)),
            // Started without a supervisor (debugging): a folder of its own.
            None => prepare_links(
                choice.stand_ins().unwrap_or(StandIns::Sim),
                choice.sim_dir.as_deref(),
                &std::env::temp_dir().join(format!("nccl-smoke-sim.{}", std::process::id())),
            ),
        }
    })
}
/// `--backend`'s long help (the backends are which libraries run), with the simulation's fault grammar (from the parser's own list).
pub fn backends_help() -> String {
    let wheres: Vec<&str> = nccl_smoke_fault::Where::ALL
        .iter()
        .map(|w| w.name())
        .collect();
    format!(
        "Libraries to run against: `nccl`, the node's libnccl and CUDA driver; `sim`, \
         nccl-smoke's CPU simulation of both (real processes and bytes, no GPU; every result is \
         labelled SIMULATED). With `sim`, faults are injected with \
         {}=WHERE[@RANK][:KIND][,…]: WHERE one of {}; RANK the rank it strikes (default: every \
         rank); KIND error (default: the return code and log lines the real library gives), \
         hang, crash, slow=F (transfers F times slower, 1 to {}), corrupt (one received \
         element flipped), or at verify a data fault: nothing (the receive buffer is never \
         written), partial, flip, nan or peer (another rank's data), each with an optional \
         =BYTES. E.g. `shm@1:error`, `net@1:slow=1.5`, `init@0:hang`, `verify@1:nothing`. See \
         sim/README.md.\n\n\
         `control-plane`: the REAL libnccl (--nccl-lib, else the usual resolution; NCCL 2.19 or \
         later) on nccl-smoke's stand-in CUDA driver and NVML, which go first on the ranks' \
         library path. Every rank walks launch, nccl-load, driver, device, unique-id, init, alloc \
         and connect for every selected pattern (the first collectives of each size make NCCL \
         build its transports, lazily per algorithm from 2.22), reads which transport NCCL chose \
         per peer and channel from NCCL's own INFO lines, then tears the communicator down with \
         ncclCommAbort (ncclCommFinalize would wait for work no kernel will ever do). What it proves: NCCL's \
         own bootstrap, network interface choice, init, topology, transport setup (P2P, SHM, \
         NET/Socket), proxies, /dev/shm use and error texts work on this machine with the very \
         release you deploy: on a CPU login node or in an image build, without a GPU. What it \
         cannot: no kernel runs (they are recorded, not executed), so no data is moved or \
         checked and no time or bandwidth is measured; the run stage and the data check are \
         skipped. It ends with `CONTROL PLANE OK` and exit code {} (never PASS), or FAIL at the \
         stage that failed with NCCL's WARN lines quoted. Every line is labelled `REAL NCCL \
         <version> · SIMULATED GPUS`; the sweep's largest size defaults to 1M.",
        nccl_smoke_fault::FAULT_ENV,
        wheres.join(", "),
        nccl_smoke_fault::MAX_SLOW,
        crate::stage::exit::CONTROL_PLANE_OK
    )
}
/// A library path: never empty (dlopen of "" is the program itself, not a library).
pub fn parse_lib_path(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        return Err(
            "the path is empty: name a libnccl.so.2 file, or leave --nccl-lib and \
                    NCCL_SMOKE_NCCL_LIB unset to let the dynamic linker find libnccl.so.2"
                .into(),
        );
    }
    Ok(s.to_string())
}
