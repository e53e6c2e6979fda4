//! Which library files a run (and `doctor`) loads: one resolution for both.
//!
//! The real backend leaves the choice to the dynamic linker (or `--nccl-lib`). The simulation
//! backend gathers its two libraries into a private folder under every name the loaders try
//! (`libcuda.so`, `libcuda.so.1`, `libnccl.so.2`), which goes first on the worker's
//! `LD_LIBRARY_PATH`: even on a GPU node, where a real `libcuda.so` is on the search path,
//! cudarc then finds the simulation and never the real driver.

use std::path::{Path, PathBuf};

/// Which libraries were asked for.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LibChoice {
    /// nccl-smoke's CPU simulation of libnccl and libcuda instead of the node's.
    pub sim: bool,
    /// The libnccl to load (default: libnccl.so.2 through the dynamic linker).
    pub nccl_lib: Option<String>,
    /// Where the simulation libraries are (default: next to the nccl-smoke binary).
    pub sim_dir: Option<PathBuf>,
}

/// The library files to load: `None` means "by soname, through the dynamic linker".
#[derive(Debug, Clone, PartialEq)]
pub struct Libraries {
    pub nccl: Option<String>,
    pub cuda: Option<String>,
}

/// Where the built simulation libraries are: `--sim-dir`, else next to the binary (a cargo
/// target folder), else `../lib/nccl-smoke` beside it (an installed layout).
fn sim_source_dir(sim_dir: Option<&Path>) -> Result<PathBuf, String> {
    let has_libs = |d: &Path| {
        ["libnccl.so.2", "libnccl.so"]
            .iter()
            .any(|f| d.join(f).exists())
            && ["libcuda.so.1", "libcuda.so"]
                .iter()
                .any(|f| d.join(f).exists())
    };
    if let Some(d) = sim_dir {
        return if has_libs(d) {
            Ok(d.to_path_buf())
        } else {
            Err(format!(
                "--sim-dir {}: no simulation libraries there (libnccl.so[.2] and libcuda.so[.1])",
                d.display()
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
                "--backend sim: the simulation libraries were not found next to {} \
                 (build them with `cargo build --release`, or pass --sim-dir)",
                exe.display()
            )
        })
}

fn first_existing(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    names.iter().map(|n| dir.join(n)).find(|p| p.exists())
}

/// Makes `dir`, the private folder of links for the simulation, and returns it.
pub fn prepare_sim_dir(sim_dir: Option<&Path>, dir: &Path) -> Result<PathBuf, String> {
    let src = sim_source_dir(sim_dir)?;
    let nccl = first_existing(&src, &["libnccl.so.2", "libnccl.so"]).unwrap_or_default();
    let cuda = first_existing(&src, &["libcuda.so.1", "libcuda.so"]).unwrap_or_default();
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (nccl, cuda) = (canon(&nccl), canon(&cuda));
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let links = [
        ("libnccl.so.2", &nccl),
        ("libnccl.so", &nccl),
        ("libcuda.so.1", &cuda),
        ("libcuda.so", &cuda),
    ];
    for (name, target) in links {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(target, &link)
            .map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    }
    Ok(dir.to_path_buf())
}

/// The library files to load for `choice`: the node's libnccl (or `--nccl-lib`) and driver
/// through the dynamic linker, or the simulation's, linked in the folder `links` gives (called
/// only for the simulation).
pub fn resolve(
    choice: &LibChoice,
    links: impl FnOnce() -> Result<PathBuf, String>,
) -> Result<Libraries, String> {
    if !choice.sim {
        return Ok(Libraries {
            nccl: choice.nccl_lib.clone(),
            cuda: None,
        });
    }
    let dir = links()?;
    let path = |n: &str| dir.join(n).display().to_string();
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
            None => prepare_sim_dir(
                choice.sim_dir.as_deref(),
                &std::env::temp_dir().join(format!("nccl-smoke-sim.{}", std::process::id())),
            ),
        }
    })
}
