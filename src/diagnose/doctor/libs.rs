//! The libraries a run loads: `nccl`, `nccl-search-path`, `cuda-driver` and `gpus`.

use super::{Check, Node, Status, check, list_or_none, verdict};
use crate::ffi::cuda::{self, CudaError, DeviceInfo, Driver};
use crate::ffi::nccl::Nccl;
use std::path::PathBuf;

/// Where the dynamic linker looks after LD_LIBRARY_PATH and ld.so.conf.
const DEFAULT_LIB_DIRS: [&str; 4] = ["/lib64", "/usr/lib64", "/lib", "/usr/lib"];

const NO_GPU_HINT: &str =
    "no GPU visible: check CUDA_VISIBLE_DEVICES and the GPUs given to the container";

impl Node {
    pub(super) fn nccl(&self, out: &mut Vec<Check>) -> Option<Nccl> {
        match Nccl::load(self.libs.0.as_deref()) {
            Ok(n) => {
                out.push(nccl_verdict(&n));
                Some(n)
            }
            Err(e) => {
                out.push(check(
                    "nccl",
                    Status::Fail,
                    e.to_string(),
                    "install NCCL (or `pip install nvidia-nccl-cu12`, found in site-packages/nvidia/nccl/lib), or point --nccl-lib / NCCL_SMOKE_NCCL_LIB at a libnccl.so.2",
                ));
                None
            }
        }
    }

    /// Several libnccl builds on the search path: which one a job gets depends on the order.
    pub(super) fn nccl_copies(&self, out: &mut Vec<Check>, loaded: Option<&str>) {
        let dirs = self.library_dirs();
        let copies = self.nccl_files(&dirs);
        let evidence = format!(
            "libnccl files on the library search path ({} folders): {}; doctor loaded: {}",
            dirs.len(),
            list_or_none(&copies),
            loaded.unwrap_or("none")
        );
        let status = if copies.len() > 1 {
            Status::Warn
        } else {
            Status::Ok
        };
        out.push(verdict(
            "nccl-search-path",
            status,
            evidence,
            "several libnccl builds are on the search path; a job gets the first one its \
             LD_LIBRARY_PATH and ld.so.conf order finds: remove the stale ones or pin one",
        ));
    }

    /// LD_LIBRARY_PATH, then ld.so.conf (with its includes), then the default folders.
    fn library_dirs(&self) -> Vec<String> {
        let ld_path = (self.env)("LD_LIBRARY_PATH").unwrap_or_default();
        let mut dirs: Vec<String> = ld_path
            .split(':')
            .filter(|d| !d.is_empty())
            .map(String::from)
            .collect();
        dirs.extend(self.ld_so_conf("/etc/ld.so.conf", 0));
        dirs.extend(DEFAULT_LIB_DIRS.iter().map(|d| d.to_string()));
        let mut unique: Vec<String> = Vec::new();
        for d in dirs {
            if !unique.contains(&d) {
                unique.push(d);
            }
        }
        unique
    }

    fn ld_so_conf(&self, file: &str, depth: u32) -> Vec<String> {
        let Some(text) = self.read(file) else {
            return Vec::new();
        };
        let mut dirs = Vec::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            match line.split_once(char::is_whitespace) {
                Some(("include", pattern)) if depth < 2 => {
                    for f in self.conf_files(pattern.trim()) {
                        dirs.extend(self.ld_so_conf(&f, depth + 1));
                    }
                }
                _ if line.is_empty() || line.starts_with("include") => {}
                _ => dirs.push(line.to_string()),
            }
        }
        dirs
    }

    /// An ld.so.conf include: a file, or `folder/prefix*suffix` as every such file uses.
    fn conf_files(&self, pattern: &str) -> Vec<String> {
        let pattern = if pattern.starts_with('/') {
            pattern.to_string()
        } else {
            format!("/etc/{pattern}")
        };
        let Some((dir, file)) = pattern.rsplit_once('/') else {
            return Vec::new();
        };
        match file.split_once('*') {
            None => vec![pattern.clone()],
            Some((pre, suf)) => self
                .list(dir)
                .into_iter()
                .filter(|n| n.starts_with(pre) && n.ends_with(suf))
                .map(|n| format!("{dir}/{n}"))
                .collect(),
        }
    }

    /// Distinct libnccl files (after symbolic links) in `dirs`, in search order.
    fn nccl_files(&self, dirs: &[String]) -> Vec<String> {
        let root = std::fs::canonicalize(&self.root).unwrap_or_else(|_| self.root.clone());
        let mut seen: Vec<PathBuf> = Vec::new();
        for dir in dirs {
            for name in self.list(dir) {
                if name != "libnccl.so" && !name.starts_with("libnccl.so.") {
                    continue;
                }
                let file = self.path(&format!("{dir}/{name}"));
                if let Ok(real) = std::fs::canonicalize(file)
                    && !seen.contains(&real)
                {
                    seen.push(real);
                }
            }
        }
        seen.iter()
            .map(|p| match p.strip_prefix(&root) {
                Ok(rel) => format!("/{}", rel.display()),
                Err(_) => p.display().to_string(),
            })
            .collect()
    }

    pub(super) fn driver(&self, out: &mut Vec<Check>) -> (Option<Driver>, Vec<DeviceInfo>) {
        let visible = (self.env)("CUDA_VISIBLE_DEVICES");
        let driver = match Driver::load(self.libs.1.as_deref()) {
            Ok(d) => d,
            Err(e) => {
                out.extend(driver_failed(&e, visible.as_deref()));
                return (None, Vec::new());
            }
        };
        out.push(check(
            "cuda-driver",
            Status::Ok,
            format!(
                "CUDA {} ({}) at {}{}",
                cuda::version_string(driver.version),
                driver.version,
                driver.path,
                driver
                    .simulated
                    .as_deref()
                    .map(|s| format!(" [{s}]"))
                    .unwrap_or_default()
            ),
            "",
        ));
        let count = driver.device_count().unwrap_or(0);
        let mut gpus = Vec::new();
        let mut lines = Vec::new();
        for i in 0..count {
            match DeviceInfo::query(i) {
                Ok(g) => {
                    lines.push(format!("{i}: {} {} {}", g.name, g.uuid, g.bus_id));
                    gpus.push(g);
                }
                Err(e) => lines.push(format!("{i}: cannot query: {e}")),
            }
        }
        out.push(gpus_verdict(count, visible.as_deref(), &lines.join("; ")));
        (Some(driver), gpus)
    }
}

fn nccl_verdict(n: &Nccl) -> Check {
    let c = n.caps;
    let evidence = format!(
        "NCCL {} at {}{}{}; non-blocking init {}, ncclGetLastError {}, finalize {}, native AlltoAll {}",
        n.version(),
        n.path,
        n.simulated
            .as_deref()
            .map(|s| format!(" [{s}]"))
            .unwrap_or_default(),
        if n.from_pip_wheel {
            " (a pip wheel's copy, where PyTorch finds it; the dynamic linker alone finds none, so \
             nccl-tests needs LD_LIBRARY_PATH to name this folder)"
        } else {
            ""
        },
        c.init_rank_config,
        c.last_error,
        c.finalize,
        c.alltoall
    );
    let status = if c.init_rank_config {
        Status::Ok
    } else {
        Status::Warn
    };
    verdict(
        "nccl",
        status,
        evidence,
        "NCCL before 2.14.3 has no non-blocking init: a hung ncclCommInitRank cannot be aborted, \
         only killed; use NCCL >= 2.14.3",
    )
}

/// The `cuda-driver` and `gpus` checks when the driver did not load or initialise.
fn driver_failed(e: &CudaError, visible: Option<&str>) -> [Check; 2] {
    let no_device = e.code_name() == Some("CUDA_ERROR_NO_DEVICE");
    let hint = match e {
        CudaError::NotFound { .. } => {
            "install the NVIDIA driver; in containers use the NVIDIA container toolkit so libcuda.so.1 is mounted"
        }
        _ if no_device => "the driver loaded but found no GPU: see the gpus check",
        _ => "the driver loaded but failed: check nvidia-smi and the kernel log (NVRM lines)",
    };
    let gpus = if no_device {
        check(
            "gpus",
            Status::Fail,
            format!(
                "cuInit found no device (CUDA_VISIBLE_DEVICES={})",
                visible.unwrap_or("unset")
            ),
            NO_GPU_HINT,
        )
    } else {
        check(
            "gpus",
            Status::Skipped,
            "no driver",
            "fix cuda-driver first",
        )
    };
    [
        check("cuda-driver", Status::Fail, e.to_string(), hint),
        gpus,
    ]
}

/// `count` devices shown by the driver against `CUDA_VISIBLE_DEVICES`; `listing` describes them.
pub fn gpus_verdict(count: i32, visible: Option<&str>, listing: &str) -> Check {
    let evidence = format!(
        "{count} visible (CUDA_VISIBLE_DEVICES={}): {listing}",
        visible.unwrap_or("unset")
    );
    let listed = visible.map(|v| v.split(',').filter(|s| !s.trim().is_empty()).count());
    if count <= 0 {
        return check("gpus", Status::Fail, evidence, NO_GPU_HINT);
    }
    match listed {
        Some(l) if l > count as usize => check(
            "gpus",
            Status::Warn,
            evidence,
            "CUDA_VISIBLE_DEVICES lists more devices than the driver shows: an entry is invalid or repeated and the list stops there",
        ),
        _ => check("gpus", Status::Ok, evidence, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::doctor::fixtures::{find, fixture, one, symlink};
    use crate::diagnose::doctor::{node_for_tests, worst};

    #[test]
    fn missing_libraries_fail_with_hints_not_panics() {
        let root = fixture(&[]);
        let checks = node_for_tests(&root, vec![]).checks();
        let nccl = find(&checks, "nccl");
        assert_eq!(nccl.status, Status::Fail);
        assert!(
            nccl.evidence.contains("/nonexistent/libnccl.so.2"),
            "{nccl:?}"
        );
        let driver = find(&checks, "cuda-driver");
        assert_eq!(driver.status, Status::Fail);
        assert!(
            driver.hint.contains("install the NVIDIA driver"),
            "{driver:?}"
        );
        assert_eq!(find(&checks, "gpus").status, Status::Skipped);
        assert_eq!(worst(&checks), Status::Fail);
    }

    #[test]
    fn one_libnccl_behind_symlinks_is_ok_two_builds_warn() {
        let files = [
            ("usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5", "elf"),
            ("etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n"),
            (
                "etc/ld.so.conf.d/x86_64-linux-gnu.conf",
                "# multiarch\n/usr/lib/x86_64-linux-gnu\n",
            ),
            ("opt/nccl/lib/libnccl.so.2.19.3", "elf"),
        ];
        let root = fixture(&files);
        symlink(
            &root,
            "usr/lib/x86_64-linux-gnu/libnccl.so.2",
            "libnccl.so.2.21.5",
        );
        symlink(&root, "usr/lib/x86_64-linux-gnu/libnccl.so", "libnccl.so.2");
        symlink(&root, "opt/nccl/lib/libnccl.so.2", "libnccl.so.2.19.3");
        let c = one(&node_for_tests(&root, vec![]), |n, o| {
            n.nccl_copies(o, None)
        });
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert!(
            c.evidence
                .contains("/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5")
        );
        let node = node_for_tests(&root, vec![("LD_LIBRARY_PATH", "/opt/nccl/lib:")]);
        let c = one(&node, |n, o| n.nccl_copies(o, None));
        assert_eq!(c.status, Status::Warn, "{c:?}");
        let first = c.evidence.find("/opt/nccl/lib/libnccl.so.2.19.3");
        let second = c.evidence.find("libnccl.so.2.21.5");
        assert!(first.is_some() && first < second, "search order: {c:?}");
        let c = one(&node_for_tests(&fixture(&[]), vec![]), |n, o| {
            n.nccl_copies(o, None)
        });
        assert_eq!(c.status, Status::Ok);
        assert!(c.evidence.contains("path (4 folders): none"), "{c:?}");
    }

    #[test]
    fn gpus_against_cuda_visible_devices() {
        let ok = gpus_verdict(2, Some("0,1"), "0: GPU; 1: GPU");
        assert_eq!(ok.status, Status::Ok, "{ok:?}");
        let warn = gpus_verdict(2, Some("0,1,7"), "0: GPU; 1: GPU");
        assert_eq!(warn.status, Status::Warn, "{warn:?}");
        assert!(warn.evidence.contains("CUDA_VISIBLE_DEVICES=0,1,7"));
        let fail = gpus_verdict(0, None, "");
        assert_eq!(fail.status, Status::Fail, "{fail:?}");
        assert_eq!(gpus_verdict(8, None, "").status, Status::Ok);
    }
}
