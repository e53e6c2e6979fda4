//! `nccl-smoke doctor`: what will break on this node, before a byte moves.
//!
//! Every file-system fact is read under a root (`--sysroot`, default `/`) so tests can build
//! fixture nodes; that includes this process's limits and capabilities, read from
//! `<root>/proc/self/limits` and `<root>/proc/self/status`. Library facts (driver, NCCL) come
//! from loading them, as a run would.
//!
//! One file per area: `libs` (NCCL, its copies on the search path, the driver, the GPUs),
//! `network` (GPUDirect RDMA, InfiniBand, socket interfaces, UCX devices), `resources`
//! (/dev/shm, memlock, open files), `container`, `mpi` (HCOLL), `known` (known-bad
//! driver × NCCL combinations); `parse` reads the node's text files.

mod container;
#[cfg(test)]
mod fixtures;
pub mod gdr;
mod known;
mod libs;
mod mpi;
mod network;
mod parse;
mod resources;

pub use libs::gpus_verdict;
pub use network::{hca_selects_any, select_ifaces};
pub use parse::{parse_cap_eff, parse_limit, shm_mount_size};
pub use resources::{
    MEMLOCK_MIN, NCCL_SHM_SEGMENT, OPEN_FILES_MIN, OPEN_FILES_WANTED, memlock_verdict,
    open_files_verdict, shm_verdict,
};

use crate::ffi::cuda::{DeviceInfo, Driver};
use crate::ffi::nccl::Nccl;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Every check's id, in the order `checks()` runs them and the report lists them.
pub const CHECK_IDS: [&str; 14] = [
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
    "known-issues",
];

/// `schema` of the report `doctor --json` prints (kept with the results file's, which shares
/// its fingerprint).
pub use crate::report::results::DOCTOR_SCHEMA as SCHEMA;

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
    /// The checks of what this process may use on the node that a run needs before it starts
    /// (`dev-shm` for its local ranks, `open-files`), without loading any library.
    pub fn resource_checks(&self) -> Vec<Check> {
        let mut out = Vec::new();
        self.dev_shm(&mut out);
        self.open_files(&mut out);
        out
    }

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

    /// Whether the node has an RDMA device: in sysfs, or (on the real node) as libibverbs
    /// lists them, which is how NCCL finds them.
    fn has_ib(&self) -> bool {
        !self.list("/sys/class/infiniband").is_empty()
            || (self.root == Path::new("/")
                && crate::ffi::ibverbs::device_names().is_ok_and(|d| !d.is_empty()))
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
        let ordinals: Vec<i32> = gpus.iter().map(|g| g.ordinal).collect();
        self.peermem(&mut out, nccl_version, &ordinals);
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
    use fixtures::fixture;
    use proptest::prelude::*;

    #[test]
    fn every_check_has_an_id_and_evidence() {
        let checks = node_for_tests(&fixture(&[]), vec![]).checks();
        let ids: Vec<&str> = checks.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, CHECK_IDS);
        assert!(checks.iter().all(|c| !c.evidence.is_empty()), "{checks:?}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
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
