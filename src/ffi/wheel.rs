//! Where pip puts `libnccl.so.2`: the `nvidia-nccl-cu12` and `nvidia-nccl-cu13` wheels (the
//! ones PyTorch depends on) both unpack it to `site-packages/nvidia/nccl/lib/` (the CUDA 13
//! wheels of other NVIDIA libraries moved to `nvidia/cu13/lib`, NCCL's did not:
//! NVIDIA/cuml#7304). The dynamic linker never looks there, so a node whose only NCCL came
//! with PyTorch has none "installed" as far as `dlopen("libnccl.so.2")` can tell.
//!
//! Looked up without starting Python: the active virtual environment, the active conda
//! environment, then the user and system site folders.

use std::path::{Path, PathBuf};

/// The file inside a site-packages folder.
const IN_SITE: &str = "nvidia/nccl/lib/libnccl.so.2";

/// Existing wheel copies of `libnccl.so.2` under `root` (the file-system root; a test gives a
/// scratch folder), most specific environment first, no duplicates.
pub fn nccl_candidates(root: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let under_root = |p: &str| root.join(p.trim_start_matches('/'));
    let mut prefixes: Vec<PathBuf> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = env(var).filter(|v| !v.is_empty()) {
            prefixes.push(under_root(&v));
        }
    }
    if let Some(home) = env("HOME").filter(|h| !h.is_empty()) {
        prefixes.push(under_root(&home).join(".local"));
    }
    for p in ["/usr/local", "/usr", "/opt/conda"] {
        prefixes.push(under_root(p));
    }
    let mut found: Vec<PathBuf> = Vec::new();
    let mut push = |p: PathBuf| {
        if p.is_file() && !found.contains(&p) {
            found.push(p);
        }
    };
    for prefix in prefixes {
        for lib in ["lib", "lib64"] {
            for python in pythons(&prefix.join(lib)) {
                for site in ["site-packages", "dist-packages"] {
                    push(python.join(site).join(IN_SITE));
                }
            }
        }
        // Debian's system Python: /usr/lib/python3/dist-packages.
        push(prefix.join("lib/python3/dist-packages").join(IN_SITE));
    }
    found
}

/// `python3.*` folders in `lib`, newest first.
fn pythons(lib: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(lib) else {
        return Vec::new();
    };
    let mut dirs: Vec<(u32, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let minor = name.strip_prefix("python3.")?.parse::<u32>().ok()?;
            Some((minor, e.path()))
        })
        .collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.0));
    dirs.into_iter().map(|(_, p)| p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, rel: &str) -> PathBuf {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"").unwrap();
        p
    }

    #[test]
    fn the_active_venv_comes_before_the_system_site() {
        let root = tempfile::tempdir().unwrap();
        let sys = put(
            root.path(),
            "usr/local/lib/python3.11/dist-packages/nvidia/nccl/lib/libnccl.so.2",
        );
        let venv = put(
            root.path(),
            "srv/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
        );
        let env = |k: &str| (k == "VIRTUAL_ENV").then(|| "/srv/venv".to_string());
        assert_eq!(nccl_candidates(root.path(), &env), vec![venv, sys]);
    }

    #[test]
    fn user_site_debian_site_and_newest_python_first() {
        let root = tempfile::tempdir().unwrap();
        let old = put(
            root.path(),
            "home/u/.local/lib/python3.9/site-packages/nvidia/nccl/lib/libnccl.so.2",
        );
        let new = put(
            root.path(),
            "home/u/.local/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
        );
        let debian = put(
            root.path(),
            "usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2",
        );
        let env = |k: &str| (k == "HOME").then(|| "/home/u".to_string());
        assert_eq!(nccl_candidates(root.path(), &env), vec![new, old, debian]);
    }

    #[test]
    fn nothing_there_is_nothing_found() {
        let root = tempfile::tempdir().unwrap();
        put(
            root.path(),
            "usr/lib/python3.11/site-packages/nvidia/cu13/lib/libcublas.so.13",
        );
        assert!(nccl_candidates(root.path(), &|_| None).is_empty());
    }
}
