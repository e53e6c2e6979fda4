//! `nccl-smoke doctor`: what will break on this node, before a byte moves.
//!
//! Every file-system fact is read under a root (`--sysroot`, default `/`) so tests can build
//! fixture nodes. Library facts (driver, NCCL) come from loading them, as a run would.

use crate::ffi::cuda::{self, Device, Driver};
use crate::ffi::nccl::Nccl;
use crate::ffi::os;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Skipped,
    Warn,
    Fail,
}

/// One check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Stable identifier, e.g. `dev-shm`.
    pub id: String,
    pub status: Status,
    /// The value read and where from.
    pub evidence: String,
    /// What to do about a warn or fail (or why a check was skipped).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hint: String,
}

/// Looks up an environment variable (the real environment, or a map in tests).
pub type EnvLookup = Box<dyn Fn(&str) -> Option<String>>;

/// The node as doctor sees it.
pub struct Node {
    pub root: PathBuf,
    /// Environment lookup (the real one, or a map in tests).
    pub env: EnvLookup,
    /// Libraries to load: (nccl, cuda); `None` = by soname.
    pub libs: (Option<String>, Option<String>),
    /// Ranks expected on this node (for /dev/shm sizing).
    pub local_ranks: u32,
}

fn check(id: &str, status: Status, evidence: impl Into<String>, hint: impl Into<String>) -> Check {
    Check {
        id: id.into(),
        status,
        evidence: evidence.into(),
        hint: hint.into(),
    }
}

impl Node {
    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }

    fn read(&self, p: &str) -> Option<String> {
        std::fs::read_to_string(self.path(p)).ok()
    }

    fn list(&self, p: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.path(p))
            .map(|it| {
                it.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// Runs every check.
    pub fn checks(&self) -> Vec<Check> {
        let mut out = Vec::new();
        let nccl = self.nccl(&mut out);
        self.driver(&mut out);
        self.peermem(&mut out, nccl.as_ref().map(|n| n.version_code));
        self.infiniband(&mut out);
        self.socket_ifname(&mut out);
        self.dev_shm(&mut out);
        self.limits(&mut out);
        self.mpi(&mut out);
        self.container(&mut out);
        self.known_bad(&mut out, nccl.as_ref().map(|n| n.version_code));
        out
    }

    fn nccl(&self, out: &mut Vec<Check>) -> Option<Nccl> {
        match Nccl::load(self.libs.0.as_deref()) {
            Ok(n) => {
                let c = n.caps;
                out.push(check(
                    "nccl",
                    Status::Ok,
                    format!(
                        "NCCL {} at {}{}; non-blocking init {}, ncclGetLastError {}, finalize {}, native AlltoAll {}",
                        n.version(),
                        n.path,
                        n.simulated.as_deref().map(|s| format!(" [{s}]")).unwrap_or_default(),
                        c.init_rank_config,
                        c.last_error,
                        c.finalize,
                        c.alltoall
                    ),
                    "",
                ));
                Some(n)
            }
            Err(e) => {
                out.push(check(
                    "nccl",
                    Status::Fail,
                    e.to_string(),
                    "install NCCL or point --nccl-lib at libnccl.so.2",
                ));
                None
            }
        }
    }

    fn driver(&self, out: &mut Vec<Check>) {
        let driver = match Driver::load(self.libs.1.as_deref()) {
            Ok(d) => d,
            Err(e) => {
                out.push(check(
                    "cuda-driver",
                    Status::Fail,
                    e.to_string(),
                    "install the NVIDIA driver; in containers use the NVIDIA container toolkit so libcuda.so.1 is mounted",
                ));
                out.push(check(
                    "gpus",
                    Status::Skipped,
                    "no driver",
                    "fix cuda-driver first",
                ));
                return;
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
        let visible = (self.env)("CUDA_VISIBLE_DEVICES");
        let mut gpus = Vec::new();
        for i in 0..count {
            match Device::open(i) {
                Ok(d) => gpus.push(format!(
                    "{}: {} {} {}",
                    i, d.info.name, d.info.uuid, d.info.bus_id
                )),
                Err(e) => gpus.push(format!("{i}: cannot open: {e}")),
            }
        }
        let evidence = format!(
            "{count} visible (CUDA_VISIBLE_DEVICES={}): {}",
            visible.as_deref().unwrap_or("unset"),
            gpus.join("; ")
        );
        let listed = visible
            .as_deref()
            .map(|v| v.split(',').filter(|s| !s.trim().is_empty()).count() as i32);
        let (status, hint) = match (count, listed) {
            (0, _) => (
                Status::Fail,
                "no GPU visible: check CUDA_VISIBLE_DEVICES and the GPUs given to the container",
            ),
            (n, Some(l)) if l > n => (
                Status::Warn,
                "CUDA_VISIBLE_DEVICES lists more devices than the driver shows: an entry is invalid and the list stops there",
            ),
            _ => (Status::Ok, ""),
        };
        out.push(check("gpus", status, evidence, hint));
    }

    fn peermem(&self, out: &mut Vec<Check>, nccl_version: Option<i32>) {
        let legacy = [
            "/sys/kernel/mm/memory_peers/nv_mem/version",
            "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
        ];
        let modern = "/sys/module/nvidia_peermem/version";
        let has_legacy = legacy.iter().any(|p| self.path(p).exists());
        let has_modern = self.path(modern).exists();
        let has_ib = !self.list("/sys/class/infiniband").is_empty();
        let evidence = format!(
            "legacy nv_mem: {}; {modern}: {}; InfiniBand devices: {}",
            if has_legacy { "present" } else { "absent" },
            if has_modern { "present" } else { "absent" },
            if has_ib { "yes" } else { "none" }
        );
        let c = match (has_ib, has_legacy, has_modern, nccl_version) {
            (false, ..) => check(
                "gpudirect-rdma",
                Status::Skipped,
                evidence,
                "no InfiniBand device on this node",
            ),
            (true, false, true, Some(v)) if v < 22304 => check(
                "gpudirect-rdma",
                Status::Warn,
                format!(
                    "{evidence}; NCCL {} only looks for the legacy paths",
                    crate::ffi::nccl::version_string(v)
                ),
                "NCCL before 2.23.4 will log 'GPU Direct RDMA Disabled' and run slowly: use NCCL >= 2.23.4",
            ),
            (true, false, false, _) => check(
                "gpudirect-rdma",
                Status::Warn,
                evidence,
                "no peer-memory module: load nvidia_peermem (modprobe nvidia_peermem) for GPUDirect RDMA",
            ),
            _ => check("gpudirect-rdma", Status::Ok, evidence, ""),
        };
        out.push(c);
    }

    fn infiniband(&self, out: &mut Vec<Check>) {
        let devices = self.list("/sys/class/infiniband");
        let mut states = Vec::new();
        let mut active = Vec::new();
        for d in &devices {
            for port in self.list(&format!("/sys/class/infiniband/{d}/ports")) {
                let state = self
                    .read(&format!("/sys/class/infiniband/{d}/ports/{port}/state"))
                    .unwrap_or_default();
                let state = state.trim().to_string();
                if state.contains("ACTIVE") {
                    active.push(d.clone());
                }
                states.push(format!("{d}/{port} {state}"));
            }
        }
        let hca = (self.env)("NCCL_IB_HCA");
        let evidence = format!(
            "{}; NCCL_IB_HCA={}",
            if states.is_empty() {
                "no InfiniBand devices".to_string()
            } else {
                states.join(", ")
            },
            hca.as_deref().unwrap_or("unset")
        );
        let c = if let Some(h) = hca.as_deref() {
            let wanted: Vec<&str> = h
                .trim_start_matches(['^', '='])
                .split(',')
                .map(|s| s.split(':').next().unwrap_or("").trim())
                .filter(|s| !s.is_empty())
                .collect();
            let exclude = h.starts_with('^');
            let exact = h.trim_start_matches('^').starts_with('=');
            let matches = |d: &String| {
                wanted
                    .iter()
                    .any(|w| if exact { d == w } else { d.starts_with(w) })
            };
            let usable = devices.iter().any(|d| matches(d) != exclude);
            if usable {
                check("infiniband", Status::Ok, evidence, "")
            } else {
                check(
                    "infiniband",
                    Status::Fail,
                    evidence,
                    "NCCL_IB_HCA selects no InfiniBand device on this node: fix the names (ibv_devices lists them)",
                )
            }
        } else if !devices.is_empty() && active.is_empty() {
            check(
                "infiniband",
                Status::Warn,
                evidence,
                "no InfiniBand port is ACTIVE: check cabling and the subnet manager (ibstat)",
            )
        } else {
            check("infiniband", Status::Ok, evidence, "")
        };
        out.push(c);
    }

    fn socket_ifname(&self, out: &mut Vec<Check>) {
        let ifaces = self.list("/sys/class/net");
        let Some(spec) = (self.env)("NCCL_SOCKET_IFNAME") else {
            out.push(check(
                "socket-ifname",
                Status::Ok,
                format!(
                    "NCCL_SOCKET_IFNAME unset; interfaces: {}",
                    ifaces.join(", ")
                ),
                "",
            ));
            return;
        };
        let exclude = spec.starts_with('^');
        let body = spec.trim_start_matches('^');
        let exact = body.starts_with('=');
        let wanted: Vec<&str> = body
            .trim_start_matches('=')
            .split(',')
            .filter(|s| !s.is_empty())
            .collect();
        let selected: Vec<&String> = ifaces
            .iter()
            .filter(|i| i.as_str() != "lo" || !exclude)
            .filter(|i| {
                wanted.iter().any(|w| {
                    if exact {
                        i.as_str() == *w
                    } else {
                        i.starts_with(w)
                    }
                }) != exclude
            })
            .collect();
        let evidence = format!(
            "NCCL_SOCKET_IFNAME={spec}; interfaces: {}; selected: {}",
            ifaces.join(", "),
            if selected.is_empty() {
                "none".into()
            } else {
                selected
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
        if selected.is_empty() {
            out.push(check("socket-ifname", Status::Fail, evidence, "NCCL_SOCKET_IFNAME matches no interface here: NCCL's bootstrap will fail ('no socket interface found')"));
        } else {
            out.push(check("socket-ifname", Status::Ok, evidence, ""));
        }
    }

    fn dev_shm(&self, out: &mut Vec<Check>) {
        let dir = self.path("/dev/shm");
        let Some((total, free)) = os::fs_space(&dir.display().to_string()) else {
            out.push(check(
                "dev-shm",
                Status::Fail,
                format!("{} does not exist", dir.display()),
                "NCCL's shared-memory transport needs /dev/shm",
            ));
            return;
        };
        out.push(shm_verdict(total, free, self.local_ranks));
    }

    fn limits(&self, out: &mut Vec<Check>) {
        let memlock = os::rlimit_memlock();
        let has_ib = !self.list("/sys/class/infiniband").is_empty();
        let evidence = format!(
            "memlock: {}",
            memlock
                .map(|v| if v == u64::MAX {
                    "unlimited".into()
                } else {
                    format!("{} KiB", v >> 10)
                })
                .unwrap_or_else(|| "unknown".into())
        );
        let c = match memlock {
            Some(v) if has_ib && v != u64::MAX && v < (64 << 20) => check(
                "memlock",
                Status::Warn,
                evidence,
                "RDMA registers memory: raise ulimit -l to unlimited (and grant IPC_LOCK in containers)",
            ),
            _ => check("memlock", Status::Ok, evidence, ""),
        };
        out.push(c);
    }

    fn mpi(&self, out: &mut Vec<Check>) {
        let hcoll = (self.env)("OMPI_MCA_coll_hcoll_enable").or_else(|| {
            [
                "/etc/openmpi/openmpi-mca-params.conf",
                "/opt/hpcx/ompi/etc/openmpi-mca-params.conf",
            ]
            .iter()
            .filter_map(|p| self.read(p))
            .flat_map(|t| t.lines().map(str::to_string).collect::<Vec<_>>())
            .find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == "coll_hcoll_enable").then(|| v.trim().to_string())
            })
        });
        let has_hcoll_lib = self.path("/opt/mellanox/hcoll").exists();
        let has_ib = !self.list("/sys/class/infiniband").is_empty();
        let evidence = format!(
            "coll_hcoll_enable={}; HCOLL installed: {}; UCX_NET_DEVICES={}",
            hcoll.as_deref().unwrap_or("unset"),
            if has_hcoll_lib { "yes" } else { "no" },
            (self.env)("UCX_NET_DEVICES").as_deref().unwrap_or("unset")
        );
        let enabled = hcoll
            .as_deref()
            .map(|v| v.trim() != "0")
            .unwrap_or(has_hcoll_lib);
        if enabled && has_ib && self.in_container() {
            out.push(check(
                "mpi-hcoll",
                Status::Warn,
                evidence,
                "HCOLL over container RDMA is known to hang at MPI start: mpirun -mca coll_hcoll_enable 0 (and -mca btl tcp,self)",
            ));
        } else {
            out.push(check("mpi-hcoll", Status::Ok, evidence, ""));
        }
    }

    fn in_container(&self) -> bool {
        self.path("/.dockerenv").exists()
            || self.path("/run/.containerenv").exists()
            || (self.env)("KUBERNETES_SERVICE_HOST").is_some()
            || self.read("/proc/1/cgroup").is_some_and(|c| {
                c.contains("kubepods") || c.contains("docker") || c.contains("containerd")
            })
    }

    fn container(&self, out: &mut Vec<Check>) {
        let inside = self.in_container();
        let kube = (self.env)("KUBERNETES_SERVICE_HOST").is_some();
        let cap_ipc_lock = self
            .read("/proc/self/status")
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("CapEff:"))
                    .map(|l| l[7..].trim().to_string())
            })
            .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
            .map(|caps| caps & (1 << 14) != 0);
        let evidence = format!(
            "container: {}{}; IPC_LOCK capability: {}",
            if inside { "yes" } else { "no" },
            if kube { " (Kubernetes)" } else { "" },
            match cap_ipc_lock {
                Some(true) => "yes",
                Some(false) => "no",
                None => "unknown",
            }
        );
        let rdma_wanted =
            (self.env)("NCCL_IB_HCA").is_some() || !self.list("/sys/class/infiniband").is_empty();
        if inside && rdma_wanted && cap_ipc_lock == Some(false) {
            out.push(check(
                "container",
                Status::Warn,
                evidence,
                "RDMA in a container needs the IPC_LOCK capability",
            ));
        } else {
            out.push(check("container", Status::Ok, evidence, ""));
        }
    }

    /// Known-bad combinations: (driver branch, NCCL range) → issue and fix.
    fn known_bad(&self, out: &mut Vec<Check>, nccl_version: Option<i32>) {
        let branch = self.read("/proc/driver/nvidia/version").and_then(|t| {
            t.split_whitespace()
                .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
                .and_then(|v| v.split('.').next()?.parse::<u32>().ok())
        });
        let evidence = format!(
            "driver branch: {}; NCCL: {}",
            branch
                .map(|b| b.to_string())
                .unwrap_or_else(|| "unknown".into()),
            nccl_version
                .map(crate::ffi::nccl::version_string)
                .unwrap_or_else(|| "unknown".into())
        );
        match (branch, nccl_version) {
            (Some(570), Some(v)) if v >= 21900 && self.in_container() => out.push(check(
                "known-issues",
                Status::Warn,
                evidence,
                "driver 570 fails cuMem buffer import between containers on one node ('invalid device ordinal' in \
                 ncclP2pImportShareableBuffer): upgrade the driver, or NCCL_CUMEM_ENABLE=0 / NCCL_P2P_DISABLE=1",
            )),
            _ => out.push(check("known-issues", Status::Ok, evidence, "")),
        }
    }
}

/// /dev/shm against a rough need: one 9.2 MiB segment per local peer in each direction, and
/// never less than 256 MiB (a pod's 64 MB default fails NCCL's SHM transport in the field).
pub fn shm_verdict(total: u64, free: u64, local_ranks: u32) -> Check {
    let n = local_ranks.max(1) as u64;
    let need =
        (n * n.saturating_sub(1) * 2 * crate::diagnose::probe::NCCL_SHM_SEGMENT).max(256 << 20);
    let evidence = format!(
        "/dev/shm: {} MiB total, {} MiB free; about {} MiB wanted for {n} local ranks",
        total >> 20,
        free >> 20,
        need >> 20
    );
    let status = if free < need / 2 {
        Status::Fail
    } else if free < need {
        Status::Warn
    } else {
        Status::Ok
    };
    let hint = if status == Status::Ok {
        ""
    } else {
        "mount a memory-backed emptyDir at /dev/shm (Kubernetes) or raise --shm-size (Docker)"
    };
    check("dev-shm", status, evidence, hint)
}

/// The worst status among checks.
pub fn worst(checks: &[Check]) -> Status {
    checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok)
}

/// A fixture node's root, for tests.
pub fn node_for_tests(root: &Path, env: Vec<(&'static str, &'static str)>) -> Node {
    Node {
        root: root.to_path_buf(),
        env: Box::new(move |k| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }),
        libs: (
            Some("/nonexistent/libnccl.so.2".into()),
            Some("/nonexistent/libcuda.so.1".into()),
        ),
        local_ranks: 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(files: &[(&str, &str)]) -> PathBuf {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!(
            "doctor-fixture.{}.{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&root);
        for (p, content) in files {
            let f = root.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, content).unwrap();
        }
        std::fs::create_dir_all(root.join("dev/shm")).unwrap();
        root
    }

    fn find<'a>(checks: &'a [Check], id: &str) -> &'a Check {
        checks.iter().find(|c| c.id == id).unwrap()
    }

    #[test]
    fn missing_libraries_fail_with_hints_not_panics() {
        let root = fixture(&[]);
        let checks = node_for_tests(&root, vec![]).checks();
        assert_eq!(find(&checks, "nccl").status, Status::Fail);
        assert_eq!(find(&checks, "cuda-driver").status, Status::Fail);
        assert_eq!(find(&checks, "gpus").status, Status::Skipped);
        assert_eq!(worst(&checks), Status::Fail);
    }

    #[test]
    fn seed_002_peermem_present_but_old_nccl() {
        let root = fixture(&[
            ("sys/module/nvidia_peermem/version", "1.0"),
            ("sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE"),
        ]);
        let node = node_for_tests(&root, vec![]);
        let mut out = Vec::new();
        node.peermem(&mut out, Some(21903));
        assert_eq!(out[0].status, Status::Warn, "{:?}", out[0]);
        assert!(out[0].hint.contains("2.23.4"));
        out.clear();
        node.peermem(&mut out, Some(22304));
        assert_eq!(out[0].status, Status::Ok);
        out.clear();
        node_for_tests(&fixture(&[]), vec![]).peermem(&mut out, Some(21903));
        assert_eq!(out[0].status, Status::Skipped);
    }

    #[test]
    fn seed_001_hcoll_in_a_container_with_rdma() {
        let root = fixture(&[
            (".dockerenv", ""),
            ("sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE"),
            (
                "etc/openmpi/openmpi-mca-params.conf",
                "coll_hcoll_enable = 1\n",
            ),
        ]);
        let mut out = Vec::new();
        node_for_tests(&root, vec![]).mpi(&mut out);
        assert_eq!(out[0].status, Status::Warn, "{:?}", out[0]);
        assert!(out[0].hint.contains("coll_hcoll_enable 0"));
        out.clear();
        node_for_tests(&root, vec![("OMPI_MCA_coll_hcoll_enable", "0")]).mpi(&mut out);
        assert_eq!(out[0].status, Status::Ok);
    }

    #[test]
    fn seed_000_driver_570_in_containers() {
        let root = fixture(&[
            (".dockerenv", ""),
            (
                "proc/driver/nvidia/version",
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Thu Jan 1\n",
            ),
        ]);
        let mut out = Vec::new();
        node_for_tests(&root, vec![]).known_bad(&mut out, Some(22602));
        assert_eq!(out[0].status, Status::Warn, "{:?}", out[0]);
        assert!(out[0].hint.contains("NCCL_CUMEM_ENABLE=0"));
        out.clear();
        node_for_tests(&root, vec![]).known_bad(&mut out, Some(22602).filter(|_| false));
        assert_eq!(out[0].status, Status::Ok);
    }

    #[test]
    fn seed_004_pod_with_64_mb_dev_shm() {
        let c = shm_verdict(64 << 20, 64 << 20, 8);
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c.evidence.contains("64 MiB total") && c.hint.contains("emptyDir"));
        assert_eq!(shm_verdict(8 << 30, 8 << 30, 8).status, Status::Ok);
        assert_eq!(shm_verdict(1 << 30, 200 << 20, 2).status, Status::Warn);
    }

    #[test]
    fn ib_hca_and_socket_ifname_are_checked_against_what_exists() {
        let root = fixture(&[
            ("sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE"),
            ("sys/class/net/eth0/mtu", "1500"),
            ("sys/class/net/lo/mtu", "65536"),
        ]);
        let mut out = Vec::new();
        node_for_tests(&root, vec![("NCCL_IB_HCA", "mlx5")]).infiniband(&mut out);
        node_for_tests(&root, vec![("NCCL_IB_HCA", "=mlx4_0")]).infiniband(&mut out);
        node_for_tests(&root, vec![("NCCL_SOCKET_IFNAME", "eth")]).socket_ifname(&mut out);
        node_for_tests(&root, vec![("NCCL_SOCKET_IFNAME", "ib0")]).socket_ifname(&mut out);
        node_for_tests(&root, vec![("NCCL_SOCKET_IFNAME", "^docker")]).socket_ifname(&mut out);
        let s: Vec<Status> = out.iter().map(|c| c.status).collect();
        assert_eq!(
            s,
            [
                Status::Ok,
                Status::Fail,
                Status::Ok,
                Status::Fail,
                Status::Ok
            ],
            "{out:?}"
        );
    }
}
