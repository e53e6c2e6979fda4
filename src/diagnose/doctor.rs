//! `nccl-smoke doctor`: what will break on this node, before a byte moves.
//!
//! Every file-system fact is read under a root (`--sysroot`, default `/`) so tests can build
//! fixture nodes; that includes this process's limits and capabilities, read from
//! `<root>/proc/self/limits` and `<root>/proc/self/status`. Library facts (driver, NCCL) come
//! from loading them, as a run would.

use crate::ffi::cuda::{self, CudaError, DeviceInfo, Driver};
use crate::ffi::nccl::{self, Nccl};
use crate::ffi::os;
use serde::{Deserialize, Serialize};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

/// `schema` of the report `doctor --json` prints.
pub const SCHEMA: &str = "nccl-smoke/doctor/v1";

/// Below this hard open-files limit a many-rank all-to-all runs out of descriptors (NCCL
/// raises its soft limit to the hard one, and opens sockets per peer and channel).
pub const OPEN_FILES_WANTED: u64 = 65_536;
/// Below this hard open-files limit even small jobs do.
pub const OPEN_FILES_MIN: u64 = 1024;
/// Below this memlock limit NCCL's InfiniBand transport cannot register its buffers.
pub const MEMLOCK_MIN: u64 = 64 << 20;
/// `CAP_IPC_LOCK` in the CapEff mask: it lifts the memlock limit.
const CAP_IPC_LOCK: u64 = 1 << 14;
/// The initial (host) IPC namespace, as `/proc/self/ns/ipc` names it (`PROC_IPC_INIT_INO`).
const HOST_IPC_NS: &str = "ipc:[4026531839]";
/// Where the dynamic linker looks after LD_LIBRARY_PATH and ld.so.conf.
const DEFAULT_LIB_DIRS: [&str; 4] = ["/lib64", "/usr/lib64", "/lib", "/usr/lib"];

const NO_GPU_HINT: &str =
    "no GPU visible: check CUDA_VISIBLE_DEVICES and the GPUs given to the container";

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

/// What doctor found, and the libraries it loaded (for the report's fingerprint).
pub struct Examination {
    pub checks: Vec<Check>,
    pub nccl: Option<Nccl>,
    pub driver: Option<Driver>,
    /// The devices the driver shows, in ordinal order.
    pub gpus: Vec<DeviceInfo>,
}

fn check(id: &str, status: Status, evidence: impl Into<String>, hint: impl Into<String>) -> Check {
    Check {
        id: id.into(),
        status,
        evidence: evidence.into(),
        hint: hint.into(),
    }
}

/// `ok` with no hint, else `status` with `hint`.
fn verdict(id: &str, status: Status, evidence: String, hint: &str) -> Check {
    let hint = if status == Status::Ok { "" } else { hint };
    check(id, status, evidence, hint)
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
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

    fn has_ib(&self) -> bool {
        !self.list("/sys/class/infiniband").is_empty()
    }

    /// Runs every check.
    pub fn checks(&self) -> Vec<Check> {
        self.examine().checks
    }

    /// Runs every check and keeps what was loaded.
    pub fn examine(&self) -> Examination {
        let mut out = Vec::new();
        let nccl = self.nccl(&mut out);
        self.nccl_copies(&mut out, nccl.as_ref().map(|n| n.path.as_str()));
        let (driver, gpus) = self.driver(&mut out);
        let nccl_version = nccl.as_ref().map(|n| n.version_code);
        self.peermem(&mut out, nccl_version);
        self.infiniband(&mut out);
        self.socket_ifname(&mut out);
        self.dev_shm(&mut out);
        self.memlock(&mut out);
        self.open_files(&mut out);
        self.mpi(&mut out);
        self.ucx_net_devices(&mut out);
        self.container(&mut out);
        self.known_bad(&mut out, nccl_version);
        Examination {
            checks: out,
            nccl,
            driver,
            gpus,
        }
    }

    fn nccl(&self, out: &mut Vec<Check>) -> Option<Nccl> {
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
                    "install NCCL or point --nccl-lib at libnccl.so.2",
                ));
                None
            }
        }
    }

    /// Several libnccl builds on the search path: which one a job gets depends on the order.
    fn nccl_copies(&self, out: &mut Vec<Check>, loaded: Option<&str>) {
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

    fn driver(&self, out: &mut Vec<Check>) -> (Option<Driver>, Vec<DeviceInfo>) {
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

    fn peermem(&self, out: &mut Vec<Check>, nccl_version: Option<i32>) {
        let legacy = [
            "/sys/kernel/mm/memory_peers/nv_mem/version",
            "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
        ];
        let modern = "/sys/module/nvidia_peermem/version";
        let has_legacy = legacy.iter().any(|p| self.path(p).exists());
        let has_modern = self.path(modern).exists();
        let has_ib = self.has_ib();
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
                    nccl::version_string(v)
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
        let mut any_active = false;
        for d in &devices {
            for port in self.list(&format!("/sys/class/infiniband/{d}/ports")) {
                let state = self
                    .read(&format!("/sys/class/infiniband/{d}/ports/{port}/state"))
                    .unwrap_or_default();
                let state = state.trim().to_string();
                any_active |= state.contains("ACTIVE");
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
        let c = match hca.as_deref() {
            Some(h) if !hca_selects_any(h, &devices) => check(
                "infiniband",
                Status::Fail,
                evidence,
                "NCCL_IB_HCA selects no InfiniBand device on this node: fix the names (ibv_devices lists them)",
            ),
            None if !devices.is_empty() && !any_active => check(
                "infiniband",
                Status::Warn,
                evidence,
                "no InfiniBand port is ACTIVE: check cabling and the subnet manager (ibstat)",
            ),
            _ => check("infiniband", Status::Ok, evidence, ""),
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
        let selected = select_ifaces(&spec, &ifaces);
        let down: Vec<String> = selected
            .iter()
            .filter(|i| {
                self.read(&format!("/sys/class/net/{i}/operstate"))
                    .is_some_and(|s| s.trim() == "down")
            })
            .cloned()
            .collect();
        let evidence = format!(
            "NCCL_SOCKET_IFNAME={spec}; interfaces: {}; selected: {}; down: {}",
            ifaces.join(", "),
            list_or_none(&selected),
            list_or_none(&down)
        );
        let c = if selected.is_empty() {
            check(
                "socket-ifname",
                Status::Fail,
                evidence,
                "NCCL_SOCKET_IFNAME matches no interface here: NCCL's bootstrap will fail ('no socket interface found')",
            )
        } else if down.len() == selected.len() {
            check(
                "socket-ifname",
                Status::Warn,
                evidence,
                "every interface NCCL_SOCKET_IFNAME selects is down (operstate): bring it up or select another",
            )
        } else {
            check("socket-ifname", Status::Ok, evidence, "")
        };
        out.push(c);
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
        let mounts = self.path("/proc/self/mounts");
        let text = std::fs::read_to_string(&mounts).unwrap_or_default();
        match shm_mount_size(&text) {
            // The mount's size is the limit; the free space is the file system's, within it.
            Ok(Some(size)) => out.push(shm_verdict(size, free.min(size), self.local_ranks)),
            Ok(None) => out.push(shm_verdict(total, free, self.local_ranks)),
            Err(bad) => out.push(check(
                "dev-shm",
                Status::Skipped,
                format!("{}: {bad}", mounts.display()),
                "could not read the size of /dev/shm: check `df -h /dev/shm`",
            )),
        }
    }

    /// A row of `<root>/proc/self/limits` as (soft, hard), or evidence of why not.
    fn limit(&self, row: &str) -> Result<(u64, u64), String> {
        let path = self.path("/proc/self/limits");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        parse_limit(&text, row).ok_or_else(|| {
            let line = text.lines().find(|l| l.starts_with(row)).unwrap_or("");
            format!("{}: no readable '{row}' row ('{line}')", path.display())
        })
    }

    /// CAP_IPC_LOCK from `<root>/proc/self/status`; `None` when unreadable.
    fn cap_ipc_lock(&self) -> Option<bool> {
        let caps = parse_cap_eff(&self.read("/proc/self/status")?)?;
        Some(caps & CAP_IPC_LOCK != 0)
    }

    fn memlock(&self, out: &mut Vec<Check>) {
        match self.limit("Max locked memory") {
            Ok((soft, _)) => out.push(memlock_verdict(soft, self.has_ib(), self.cap_ipc_lock())),
            Err(e) => out.push(check(
                "memlock",
                Status::Skipped,
                e,
                "could not read the locked-memory limit: check `ulimit -l` where the job runs",
            )),
        }
    }

    fn open_files(&self, out: &mut Vec<Check>) {
        match self.limit("Max open files") {
            Ok((soft, hard)) => out.push(open_files_verdict(soft, hard)),
            Err(e) => out.push(check(
                "open-files",
                Status::Skipped,
                e,
                "could not read the open-files limit: check `ulimit -Hn` where the job runs",
            )),
        }
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
        if enabled && self.has_ib() && self.in_container() {
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

    /// UCX_NET_DEVICES against the devices this node has (`mlx5_0:1` = InfiniBand port,
    /// a bare name = network interface or InfiniBand device).
    fn ucx_net_devices(&self, out: &mut Vec<Check>) {
        let Some(spec) = (self.env)("UCX_NET_DEVICES") else {
            out.push(check(
                "ucx-net-devices",
                Status::Ok,
                "UCX_NET_DEVICES unset: UCX uses every device",
                "",
            ));
            return;
        };
        let entries: Vec<&str> = spec
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "all")
            .collect();
        let missing: Vec<String> = entries
            .iter()
            .filter(|e| !self.net_device_exists(e))
            .map(|e| e.to_string())
            .collect();
        let evidence = format!(
            "UCX_NET_DEVICES={spec}; not on this node: {}",
            list_or_none(&missing)
        );
        let c = if missing.is_empty() {
            check("ucx-net-devices", Status::Ok, evidence, "")
        } else if missing.len() == entries.len() {
            check(
                "ucx-net-devices",
                Status::Fail,
                evidence,
                "UCX_NET_DEVICES names no device on this node: UCX (and MPI over it) finds no transport; \
                 `ucx_info -d` lists the names (mlx5_0:1, eth0)",
            )
        } else {
            check(
                "ucx-net-devices",
                Status::Warn,
                evidence,
                "UCX skips the devices that are not here: fix the list so every node uses the devices meant",
            )
        };
        out.push(c);
    }

    fn net_device_exists(&self, entry: &str) -> bool {
        match entry.split_once(':') {
            Some((dev, port)) => self
                .path(&format!("/sys/class/infiniband/{dev}/ports/{port}"))
                .exists(),
            None => {
                self.path(&format!("/sys/class/net/{entry}")).exists()
                    || self
                        .path(&format!("/sys/class/infiniband/{entry}"))
                        .exists()
            }
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

    /// "host", "private (ipc:[…])" or "unknown", from `<root>/proc/self/ns/ipc`.
    fn ipc_namespace(&self) -> String {
        match std::fs::read_link(self.path("/proc/self/ns/ipc")) {
            Ok(t) if t.as_os_str() == HOST_IPC_NS => "host".into(),
            Ok(t) => format!("private ({})", t.display()),
            Err(_) => "unknown".into(),
        }
    }

    fn container(&self, out: &mut Vec<Check>) {
        let inside = self.in_container();
        let kube = (self.env)("KUBERNETES_SERVICE_HOST").is_some();
        let cap_ipc_lock = self.cap_ipc_lock();
        let evidence = format!(
            "container: {}{}; IPC namespace: {}; IPC_LOCK capability: {}",
            if inside { "yes" } else { "no" },
            if kube { " (Kubernetes)" } else { "" },
            self.ipc_namespace(),
            match cap_ipc_lock {
                Some(true) => "yes",
                Some(false) => "no",
                None => "unknown",
            }
        );
        let rdma_wanted = (self.env)("NCCL_IB_HCA").is_some() || self.has_ib();
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

    /// The driver branch (570 for 570.86.15) from `/proc/driver/nvidia/version`.
    fn driver_branch(&self) -> Option<u32> {
        let t = self.read("/proc/driver/nvidia/version")?;
        t.split_whitespace()
            .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
            .and_then(|v| v.split('.').next()?.parse::<u32>().ok())
    }

    /// Known-bad combinations from [`KNOWN_BAD`].
    fn known_bad(&self, out: &mut Vec<Check>, nccl_version: Option<i32>) {
        let branch = self.driver_branch();
        let evidence = format!(
            "driver branch: {}; NCCL: {}",
            branch
                .map(|b| b.to_string())
                .unwrap_or_else(|| "unknown".into()),
            nccl_version
                .map(nccl::version_string)
                .unwrap_or_else(|| "unknown".into())
        );
        let inside = self.in_container();
        let hit = branch.zip(nccl_version).and_then(|(b, v)| {
            KNOWN_BAD.iter().find(|k| {
                k.branches.contains(&b) && k.nccl.contains(&v) && (inside || !k.containers_only)
            })
        });
        match hit {
            Some(k) => out.push(check("known-issues", Status::Warn, evidence, k.hint)),
            None => out.push(check("known-issues", Status::Ok, evidence, "")),
        }
    }
}

/// A driver × NCCL combination known to fail, and what to do about it.
struct KnownBad {
    /// Driver branches affected (570 for 570.86.15).
    branches: RangeInclusive<u32>,
    /// NCCL version codes affected.
    nccl: RangeInclusive<i32>,
    /// Only seen between containers on one node.
    containers_only: bool,
    hint: &'static str,
}

const KNOWN_BAD: [KnownBad; 1] = [KnownBad {
    // Field report 000: NCCL 2.19+ uses cuMem handles for P2P by default.
    branches: 570..=570,
    nccl: 21900..=i32::MAX,
    containers_only: true,
    hint: "driver 570 fails cuMem buffer import between containers on one node ('invalid device ordinal' in \
           ncclP2pImportShareableBuffer): upgrade the driver, or NCCL_CUMEM_ENABLE=0 / NCCL_P2P_DISABLE=1",
}];

fn nccl_verdict(n: &Nccl) -> Check {
    let c = n.caps;
    let evidence = format!(
        "NCCL {} at {}{}; non-blocking init {}, ncclGetLastError {}, finalize {}, native AlltoAll {}",
        n.version(),
        n.path,
        n.simulated
            .as_deref()
            .map(|s| format!(" [{s}]"))
            .unwrap_or_default(),
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

/// Whether `NCCL_IB_HCA` (`mlx5`, `=mlx5_0:1`, `^mlx5_1`) selects any of `devices`.
pub fn hca_selects_any(spec: &str, devices: &[String]) -> bool {
    let exclude = spec.starts_with('^');
    let exact = spec.trim_start_matches('^').starts_with('=');
    let wanted: Vec<&str> = spec
        .trim_start_matches(['^', '='])
        .split(',')
        .map(|s| s.split(':').next().unwrap_or("").trim())
        .filter(|s| !s.is_empty())
        .collect();
    let matches = |d: &String| {
        wanted
            .iter()
            .any(|w| if exact { d == w } else { d.starts_with(w) })
    };
    devices.iter().any(|d| matches(d) != exclude)
}

/// The interfaces `NCCL_SOCKET_IFNAME` (`eth`, `=eth0`, `^docker,lo`) selects from `ifaces`.
pub fn select_ifaces(spec: &str, ifaces: &[String]) -> Vec<String> {
    let exclude = spec.starts_with('^');
    let body = spec.trim_start_matches('^');
    let exact = body.starts_with('=');
    let wanted: Vec<&str> = body
        .trim_start_matches('=')
        .split(',')
        .filter(|s| !s.is_empty())
        .collect();
    ifaces
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
        .cloned()
        .collect()
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
    verdict(
        "dev-shm",
        status,
        evidence,
        "mount a memory-backed emptyDir at /dev/shm (Kubernetes) or raise --shm-size (Docker)",
    )
}

/// The `size=` of the last `/dev/shm` mount in a mounts table (`/proc/self/mounts`), in
/// bytes. `Ok(None)`: no such mount or no absolute size (then statvfs is the source).
pub fn shm_mount_size(mounts: &str) -> Result<Option<u64>, String> {
    let Some(options) = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[1] == "/dev/shm").then(|| f[3].to_string())
        })
        .next_back()
    else {
        return Ok(None);
    };
    let Some(size) = options.split(',').find_map(|o| o.strip_prefix("size=")) else {
        return Ok(None);
    };
    if size.ends_with('%') {
        return Ok(None);
    }
    parse_size(size)
        .map(Some)
        .ok_or_else(|| format!("/dev/shm mount has an unreadable size '{size}' ({options})"))
}

/// A tmpfs size option: bytes, or with a k/m/g/t suffix (`65536k`, `64m`).
fn parse_size(s: &str) -> Option<u64> {
    let (digits, shift) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 10),
        (i, 'm' | 'M') => (&s[..i], 20),
        (i, 'g' | 'G') => (&s[..i], 30),
        (i, 't' | 'T') => (&s[..i], 40),
        _ => (s, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// A row of `/proc/<pid>/limits` (e.g. "Max open files") as (soft, hard); `u64::MAX` is
/// unlimited. `None` when the row is absent or not numbers.
pub fn parse_limit(limits: &str, row: &str) -> Option<(u64, u64)> {
    let rest = limits.lines().find_map(|l| l.strip_prefix(row))?;
    let mut fields = rest.split_whitespace();
    let value = |f: Option<&str>| match f? {
        "unlimited" => Some(u64::MAX),
        n => n.parse::<u64>().ok(),
    };
    Some((value(fields.next())?, value(fields.next())?))
}

/// The effective capability mask (`CapEff:` in `/proc/<pid>/status`).
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

fn human_bytes(v: u64) -> String {
    match v {
        u64::MAX => "unlimited".into(),
        v if v >= 1 << 20 => format!("{} MiB", v >> 20),
        v => format!("{} KiB", v >> 10),
    }
}

/// memlock (soft limit, bytes) for NCCL's InfiniBand transport, which pins its buffers;
/// CAP_IPC_LOCK lifts the limit.
pub fn memlock_verdict(soft: u64, has_ib: bool, ipc_lock: Option<bool>) -> Check {
    let evidence = format!(
        "memlock (ulimit -l): {}; IPC_LOCK capability: {}; InfiniBand devices: {}",
        human_bytes(soft),
        ipc_lock.map_or("unknown", |c| if c { "yes" } else { "no" }),
        if has_ib { "yes" } else { "none" }
    );
    let status = if !has_ib || soft == u64::MAX || ipc_lock == Some(true) {
        Status::Ok
    } else if soft < MEMLOCK_MIN {
        Status::Fail
    } else {
        Status::Warn
    };
    verdict(
        "memlock",
        status,
        evidence,
        "NCCL's InfiniBand transport pins its buffers (ibv_reg_mr fails past the limit): set \
         ulimit -l unlimited (docker --ulimit memlock=-1, LimitMEMLOCK=infinity) or grant IPC_LOCK",
    )
}

/// The open-files limit. NCCL raises its soft limit to the hard one, so the hard one counts;
/// an all-to-all opens sockets per peer and channel.
pub fn open_files_verdict(soft: u64, hard: u64) -> Check {
    let show = |v: u64| {
        if v == u64::MAX {
            "unlimited".to_string()
        } else {
            v.to_string()
        }
    };
    let evidence = format!(
        "open files (ulimit -n): soft {}, hard {} (NCCL raises the soft limit to the hard one); \
         about {OPEN_FILES_WANTED} wanted for a many-rank all-to-all",
        show(soft),
        show(hard)
    );
    let status = if hard < OPEN_FILES_MIN {
        Status::Fail
    } else if hard < OPEN_FILES_WANTED {
        Status::Warn
    } else {
        Status::Ok
    };
    verdict(
        "open-files",
        status,
        evidence,
        "NCCL's proxy and socket transport run out of descriptors ('Accept failed Resource \
         temporarily unavailable', 'Too many open files', connection closed): raise the hard \
         limit (ulimit -Hn, docker --ulimit nofile=, LimitNOFILE=)",
    )
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
    use proptest::prelude::*;

    /// A fixture node, removed when dropped.
    struct Fixture(tempfile::TempDir);

    impl std::ops::Deref for Fixture {
        type Target = Path;
        fn deref(&self) -> &Path {
            self.0.path()
        }
    }

    /// A fixture node: `files` written under a fresh root, plus an empty `dev/shm`.
    fn fixture(files: &[(&str, &str)]) -> Fixture {
        let root = bare_fixture(files);
        std::fs::create_dir_all(root.join("dev/shm")).unwrap();
        root
    }

    fn bare_fixture(files: &[(&str, &str)]) -> Fixture {
        let root = Fixture(
            tempfile::Builder::new()
                .prefix("doctor-fixture.")
                .tempdir()
                .unwrap(),
        );
        for (p, content) in files {
            let f = root.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, content).unwrap();
        }
        root
    }

    fn symlink(root: &Path, link: &str, target: &str) {
        let l = root.join(link);
        std::fs::create_dir_all(l.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, l).unwrap();
    }

    fn find<'a>(checks: &'a [Check], id: &str) -> &'a Check {
        checks.iter().find(|c| c.id == id).unwrap()
    }

    /// Runs one check method on a fixture node and returns its single result.
    fn one(node: &Node, f: fn(&Node, &mut Vec<Check>)) -> Check {
        let mut out = Vec::new();
        f(node, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        out.remove(0)
    }

    fn limits(memlock: &str, nofile: &str) -> String {
        format!(
            "Limit                     Soft Limit           Hard Limit           Units     \n\
             Max processes             96365                96365                processes \n\
             Max open files            {nofile}                files     \n\
             Max locked memory         {memlock}                bytes     \n"
        )
    }

    const IB_ACTIVE: (&str, &str) = ("sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
    /// CapEff of a default Docker container (no IPC_LOCK) and of root on a host.
    const CAPS_NO_IPC_LOCK: &str = "Name:\tx\nCapEff:\t00000000a80425fb\n";
    const CAPS_ALL: &str = "CapEff:\t000001ffffffffff\n";

    #[test]
    fn every_check_has_an_id_and_evidence() {
        let checks = node_for_tests(&fixture(&[]), vec![]).checks();
        let ids: Vec<&str> = checks.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "nccl",
                "nccl-search-path",
                "cuda-driver",
                "gpus",
                "gpudirect-rdma",
                "infiniband",
                "socket-ifname",
                "dev-shm",
                "memlock",
                "open-files",
                "mpi-hcoll",
                "ucx-net-devices",
                "container",
                "known-issues"
            ]
        );
        assert!(checks.iter().all(|c| !c.evidence.is_empty()), "{checks:?}");
    }

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

    #[test]
    fn seed_002_peermem_present_but_old_nccl() {
        let root = fixture(&[("sys/module/nvidia_peermem/version", "1.0"), IB_ACTIVE]);
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
        out.clear();
        node_for_tests(&fixture(&[IB_ACTIVE]), vec![]).peermem(&mut out, Some(22304));
        assert_eq!(
            out[0].status,
            Status::Warn,
            "no module at all: {:?}",
            out[0]
        );
        assert!(out[0].hint.contains("modprobe nvidia_peermem"));
    }

    #[test]
    fn infiniband_ports_and_nccl_ib_hca() {
        let root = fixture(&[
            IB_ACTIVE,
            ("sys/class/infiniband/mlx5_1/ports/1/state", "1: DOWN"),
        ]);
        let status = |env| one(&node_for_tests(&root, env), Node::infiniband).status;
        assert_eq!(status(vec![]), Status::Ok);
        assert_eq!(status(vec![("NCCL_IB_HCA", "mlx5")]), Status::Ok);
        assert_eq!(status(vec![("NCCL_IB_HCA", "=mlx5_1:1")]), Status::Ok);
        assert_eq!(status(vec![("NCCL_IB_HCA", "=mlx4_0")]), Status::Fail);
        assert_eq!(status(vec![("NCCL_IB_HCA", "^mlx5")]), Status::Fail);
        let down = fixture(&[("sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN")]);
        let c = one(&node_for_tests(&down, vec![]), Node::infiniband);
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(c.evidence.contains("mlx5_0/1 1: DOWN") && c.hint.contains("ibstat"));
        let none = one(&node_for_tests(&fixture(&[]), vec![]), Node::infiniband);
        assert_eq!(none.status, Status::Ok);
    }

    #[test]
    fn socket_ifname_is_checked_against_what_exists_and_is_up() {
        let root = fixture(&[
            ("sys/class/net/eth0/operstate", "up\n"),
            ("sys/class/net/eth1/operstate", "down\n"),
            ("sys/class/net/lo/operstate", "unknown\n"),
        ]);
        let status = |v| {
            let env = vec![("NCCL_SOCKET_IFNAME", v)];
            one(&node_for_tests(&root, env), Node::socket_ifname).status
        };
        assert_eq!(status("eth"), Status::Ok);
        assert_eq!(status("^docker"), Status::Ok);
        assert_eq!(status("ib0"), Status::Fail);
        assert_eq!(status("=eth1"), Status::Warn);
        let c = one(&node_for_tests(&root, vec![]), Node::socket_ifname);
        assert_eq!(c.status, Status::Ok);
        assert!(
            c.evidence.contains("unset; interfaces: eth0, eth1, lo"),
            "{c:?}"
        );
    }

    fn shm_with(mount_options: &str) -> Check {
        let mounts = format!("proc /proc proc rw 0 0\nshm /dev/shm tmpfs {mount_options} 0 0\n");
        let root = fixture(&[("proc/self/mounts", &mounts)]);
        one(&node_for_tests(&root, vec![]), Node::dev_shm)
    }

    #[test]
    fn seed_004_pod_with_64_mb_dev_shm() {
        let c = shm_with("rw,nosuid,nodev,noexec,relatime,size=65536k");
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c.evidence.contains("64 MiB total") && c.hint.contains("emptyDir"));
        assert_eq!(shm_with("rw,size=800m").status, Status::Warn);
        assert_eq!(shm_with("rw,size=16g").status, Status::Ok);
        assert_eq!(shm_verdict(8 << 30, 8 << 30, 8).status, Status::Ok);
        assert_eq!(shm_verdict(1 << 30, 200 << 20, 2).status, Status::Warn);
    }

    #[test]
    fn dev_shm_missing_or_unreadable() {
        let c = one(&node_for_tests(&bare_fixture(&[]), vec![]), Node::dev_shm);
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c.evidence.contains("does not exist"));
        let c = shm_with("rw,size=lots");
        assert_eq!(c.status, Status::Skipped, "{c:?}");
        assert!(c.evidence.contains("unreadable size 'lots'"), "{c:?}");
        // No size option: the file system's own numbers (whatever the test machine has).
        let c = shm_with("rw,nosuid");
        assert!(c.evidence.contains("MiB total"), "{c:?}");
        assert_eq!(
            shm_mount_size("shm /dev/shm tmpfs rw,size=50% 0 0"),
            Ok(None)
        );
        assert_eq!(shm_mount_size(""), Ok(None));
    }

    fn memlock_on(files: &[(&str, &str)]) -> Check {
        one(&node_for_tests(&fixture(files), vec![]), Node::memlock)
    }

    #[test]
    fn memlock_with_infiniband() {
        let small = limits("65536                65536", "1048576              1048576");
        let mid = limits("134217728            134217728", "1048576 1048576");
        let unlimited = limits("unlimited            unlimited", "1048576 1048576");
        let status = |l: &str, caps: &str| {
            memlock_on(&[
                ("proc/self/limits", l),
                ("proc/self/status", caps),
                IB_ACTIVE,
            ])
            .status
        };
        assert_eq!(status(&small, CAPS_NO_IPC_LOCK), Status::Fail);
        assert_eq!(status(&mid, CAPS_NO_IPC_LOCK), Status::Warn);
        assert_eq!(status(&unlimited, CAPS_NO_IPC_LOCK), Status::Ok);
        assert_eq!(status(&small, CAPS_ALL), Status::Ok, "IPC_LOCK lifts it");
        let c = memlock_on(&[("proc/self/limits", &small)]);
        assert_eq!(c.status, Status::Ok, "no InfiniBand: {c:?}");
        assert!(c.evidence.contains("64 KiB"), "{c:?}");
    }

    #[test]
    fn limits_that_cannot_be_read_are_skipped_with_evidence() {
        let garbage = "Max locked memory  lots  of\nMax open files  -1  x\n\u{0}\u{ff}";
        let root = fixture(&[("proc/self/limits", garbage)]);
        let node = node_for_tests(&root, vec![]);
        for f in [Node::memlock, Node::open_files] {
            let c = one(&node, f);
            assert_eq!(c.status, Status::Skipped, "{c:?}");
            assert!(c.evidence.contains("no readable") && c.evidence.contains("proc/self/limits"));
        }
        let c = one(&node_for_tests(&fixture(&[]), vec![]), Node::open_files);
        assert_eq!(c.status, Status::Skipped, "{c:?}");
        assert!(c.evidence.contains("cannot read"), "{c:?}");
    }

    #[test]
    fn seed_003_proxy_accept_fails_on_a_1024_descriptor_limit() {
        let l = limits("unlimited unlimited", "1024                 1024");
        let c = one(
            &node_for_tests(&fixture(&[("proc/self/limits", &l)]), vec![]),
            Node::open_files,
        );
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(c.evidence.contains("soft 1024, hard 1024"), "{c:?}");
        assert!(c.hint.contains("Resource temporarily unavailable"), "{c:?}");
        let status = |soft, hard| open_files_verdict(soft, hard).status;
        assert_eq!(status(256, 512), Status::Fail);
        assert_eq!(
            status(1024, 1 << 20),
            Status::Ok,
            "NCCL raises soft to hard"
        );
        assert_eq!(status(u64::MAX, u64::MAX), Status::Ok);
    }

    #[test]
    fn seed_001_hcoll_in_a_container_with_rdma() {
        let root = fixture(&[
            (".dockerenv", ""),
            IB_ACTIVE,
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
    fn hcoll_installed_is_on_unless_disabled() {
        let root = fixture(&[IB_ACTIVE, ("opt/mellanox/hcoll/lib/libhcoll.so.1", "")]);
        let kube = vec![("KUBERNETES_SERVICE_HOST", "10.0.0.1")];
        assert_eq!(
            one(&node_for_tests(&root, kube), Node::mpi).status,
            Status::Warn
        );
        let bare = one(&node_for_tests(&root, vec![]), Node::mpi);
        assert_eq!(bare.status, Status::Ok, "not in a container: {bare:?}");
    }

    #[test]
    fn ucx_net_devices_against_this_node() {
        let root = fixture(&[IB_ACTIVE, ("sys/class/net/eth0/operstate", "up")]);
        let status = |v: Option<&'static str>| {
            let env = v.map(|v| vec![("UCX_NET_DEVICES", v)]).unwrap_or_default();
            one(&node_for_tests(&root, env), Node::ucx_net_devices).status
        };
        assert_eq!(status(None), Status::Ok);
        assert_eq!(status(Some("mlx5_0:1")), Status::Ok);
        assert_eq!(status(Some("mlx5_0:1,eth0")), Status::Ok);
        assert_eq!(status(Some("all")), Status::Ok);
        assert_eq!(status(Some("mlx5_0:1,mlx5_3:1")), Status::Warn);
        assert_eq!(status(Some("mlx5_0:2,ib0")), Status::Fail);
        let env = vec![("UCX_NET_DEVICES", "mlx5_3:1")];
        let c = one(&node_for_tests(&root, env), Node::ucx_net_devices);
        assert!(c.evidence.contains("not on this node: mlx5_3:1"), "{c:?}");
    }

    #[test]
    fn container_ipc_namespace_and_ipc_lock() {
        let root = fixture(&[
            (".dockerenv", ""),
            IB_ACTIVE,
            ("proc/self/status", CAPS_NO_IPC_LOCK),
        ]);
        symlink(&root, "proc/self/ns/ipc", "ipc:[4026532290]");
        let c = one(&node_for_tests(&root, vec![]), Node::container);
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(
            c.evidence
                .contains("IPC namespace: private (ipc:[4026532290])"),
            "{c:?}"
        );
        assert!(c.hint.contains("IPC_LOCK"));
        let root = fixture(&[
            (".dockerenv", ""),
            IB_ACTIVE,
            ("proc/self/status", CAPS_ALL),
        ]);
        symlink(&root, "proc/self/ns/ipc", HOST_IPC_NS);
        let c = one(&node_for_tests(&root, vec![]), Node::container);
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert!(c.evidence.contains("IPC namespace: host"), "{c:?}");
        let host = fixture(&[IB_ACTIVE, ("proc/self/status", CAPS_NO_IPC_LOCK)]);
        let c = one(&node_for_tests(&host, vec![]), Node::container);
        assert_eq!(c.status, Status::Ok, "not a container: {c:?}");
    }

    #[test]
    fn seed_000_driver_570_in_containers() {
        let version = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Thu Jan 1\n";
        let root = fixture(&[(".dockerenv", ""), ("proc/driver/nvidia/version", version)]);
        let mut out = Vec::new();
        node_for_tests(&root, vec![]).known_bad(&mut out, Some(22602));
        assert_eq!(out[0].status, Status::Warn, "{:?}", out[0]);
        assert!(out[0].hint.contains("NCCL_CUMEM_ENABLE=0"));
        node_for_tests(&root, vec![]).known_bad(&mut out, None);
        node_for_tests(&root, vec![]).known_bad(&mut out, Some(21805));
        let host = fixture(&[("proc/driver/nvidia/version", version)]);
        node_for_tests(&host, vec![]).known_bad(&mut out, Some(22602));
        let newer = version.replace("570.86.15", "575.51.03");
        let root = fixture(&[(".dockerenv", ""), ("proc/driver/nvidia/version", &newer)]);
        node_for_tests(&root, vec![]).known_bad(&mut out, Some(22602));
        let s: Vec<Status> = out.iter().map(|c| c.status).collect();
        assert_eq!(
            s,
            [Status::Warn, Status::Ok, Status::Ok, Status::Ok, Status::Ok],
            "{out:?}"
        );
    }

    #[test]
    fn parsers_read_real_formats() {
        let l = limits("8388608              8388608", "20000                20000");
        assert_eq!(parse_limit(&l, "Max open files"), Some((20000, 20000)));
        assert_eq!(
            parse_limit(&l, "Max locked memory"),
            Some((8 << 20, 8 << 20))
        );
        assert_eq!(parse_limit(&l, "Max stack size"), None);
        assert_eq!(parse_cap_eff(CAPS_NO_IPC_LOCK), Some(0xa80425fb));
        assert_eq!(parse_cap_eff("CapEff:\tzz\n"), None);
        assert_eq!(
            shm_mount_size("tmpfs /dev/shm tmpfs rw,relatime,size=24684092k 0 0\n"),
            Ok(Some(24684092 << 10))
        );
        assert_eq!(parse_size("64m"), Some(64 << 20));
        assert_eq!(parse_size("99999999999999999999g"), None);
        assert_eq!(parse_size(""), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn parsers_never_panic(text in "\\PC{0,200}", row in "[A-Za-z ]{0,20}") {
            let _ = parse_limit(&text, &row);
            let _ = parse_cap_eff(&text);
            let _ = shm_mount_size(&text);
            let _ = parse_size(&text);
            let _ = select_ifaces(&text, &["eth0".into(), "lo".into()]);
            let _ = hca_selects_any(&text, &["mlx5_0".into()]);
        }

        #[test]
        fn garbage_node_files_give_checks_not_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
            size in "[0-9a-z%]{0,12}",
        ) {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let mounts = format!("shm /dev/shm tmpfs rw,size={size} 0 0\n{text}");
            let root = fixture(&[
                ("proc/self/limits", text.as_str()),
                ("proc/self/status", text.as_str()),
                ("proc/self/mounts", mounts.as_str()),
                ("proc/driver/nvidia/version", text.as_str()),
                ("etc/ld.so.conf", text.as_str()),
            ]);
            let checks = node_for_tests(&root, vec![]).checks();
            prop_assert_eq!(checks.len(), 14);
            prop_assert!(checks.iter().all(|c| !c.evidence.is_empty()));
        }
    }
}
