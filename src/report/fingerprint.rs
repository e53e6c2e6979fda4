//! The environment a run measured: enough to tell two runs apart (say, before and after a
//! driver upgrade) and to see at a glance what a node was running.

use crate::ffi::cuda::{self, DeviceInfo, Driver};
use crate::ffi::nccl::{Capabilities, Nccl};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One rank's place in the job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankInfo {
    pub rank: u32,
    pub host: String,
    pub local_rank: u32,
    pub pid: u32,
    pub device: DeviceInfo,
    /// What the rank was started with (compared across ranks before NCCL's init,
    /// `diagnose::consistency`); absent in results from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<RankSetup>,
}

/// What a rank was started with, as far as ranks of one job must agree on it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankSetup {
    /// NCCL's version and the file it was loaded from.
    pub nccl: String,
    pub nccl_path: String,
    /// The CUDA driver's version (the CUDA version it supports).
    pub driver: String,
    /// The operator's `NCCL_*`, `UCX_*` and Open MPI transport variables
    /// ([`env_snapshot`]).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Each RDMA device's firmware (`/sys/class/infiniband/DEV/fw_ver`).
    #[serde(default)]
    pub nic_firmware: BTreeMap<String, String>,
    /// The NVIDIA kernel driver's version (`570.86.15`, from `/proc/driver/nvidia/version`);
    /// empty where the node has none (the simulation) or in results from before it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_driver: String,
    /// Each RDMA port (`mlx5_0/1`): its rate, link layer and state, from
    /// `/sys/class/infiniband/DEV/ports/N/`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rdma_ports: BTreeMap<String, RdmaPort>,
}

/// One RDMA port as the kernel describes it (`Documentation/ABI/stable/sysfs-class-infiniband`
/// in the Linux tree: `rate`, `link_layer`, `state`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RdmaPort {
    /// `400 Gb/sec (4X NDR)`.
    pub rate: String,
    /// `InfiniBand` or `Ethernet` (RoCE).
    pub link_layer: String,
    /// `ACTIVE`, `DOWN`, `INIT`, … (the name, without the kernel's number).
    pub state: String,
}

impl RdmaPort {
    /// The link rate in Gb/s (`400` for `400 Gb/sec (4X NDR)`), when the kernel gave one.
    pub fn gbps(&self) -> Option<f64> {
        let (n, unit) = self.rate.trim().split_once(' ')?;
        unit.starts_with("Gb/sec")
            .then(|| n.parse::<f64>().ok())
            .flatten()
    }

    /// Whether the port carries traffic (`ACTIVE`).
    pub fn active(&self) -> bool {
        self.state == "ACTIVE"
    }

    /// `400 Gb/sec (4X NDR), InfiniBand, ACTIVE`.
    pub fn line(&self) -> String {
        format!("{}, {}, {}", self.rate, self.link_layer, self.state)
    }
}

/// The NCCL library that ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NcclInfo {
    /// Dotted version, e.g. "2.19.3".
    pub version: String,
    /// `NCCL_VERSION_CODE`, e.g. 21903.
    pub version_code: i32,
    /// Absolute path of the library file.
    pub path: String,
    pub capabilities: Capabilities,
    /// The simulation's marker text when the library is nccl-smoke's simulation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<String>,
}

/// The CUDA driver that ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverInfo {
    /// CUDA version the driver supports, e.g. "12.8".
    pub cuda_version: String,
    /// `cuDriverGetVersion`, e.g. 12080.
    pub version_code: i32,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<String>,
}

impl From<&Nccl> for NcclInfo {
    fn from(n: &Nccl) -> NcclInfo {
        NcclInfo {
            version: n.version(),
            version_code: n.version_code,
            path: n.path.clone(),
            capabilities: n.caps,
            simulated: n.simulated.clone(),
        }
    }
}

impl From<&Driver> for DriverInfo {
    fn from(d: &Driver) -> DriverInfo {
        DriverInfo {
            cuda_version: cuda::version_string(d.version),
            version_code: d.version,
            path: d.path.clone(),
            simulated: d.simulated.clone(),
        }
    }
}

/// Everything that identifies the environment of a run (or, in a doctor report, of a node:
/// one rank entry per visible GPU, rank = local rank = ordinal, and no launcher).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Distinct hosts, in rank order of first appearance.
    pub hosts: Vec<String>,
    pub ranks: Vec<RankInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl: Option<NcclInfo>,
    /// What launched the ranks (MPI library version line, or the TCP rendezvous and its
    /// variables).
    pub launcher: String,
    /// How the ranks found each other: carrier, variables believed, rendezvous address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<crate::bootstrap::Info>,
    /// Variables that change NCCL's behaviour, as rank 0 saw them.
    pub env: BTreeMap<String, String>,
}

/// Environment variable in which the supervisor lists the variables it set for its worker
/// (e.g. NCCL_DEBUG pointing into the run folder), which are not the operator's settings.
pub const INJECTED_ENV: &str = "NCCL_SMOKE_INJECTED";

/// Whether a variable belongs in the fingerprint: what changes NCCL's, the GPUs' or MPI's
/// behaviour, not the launcher's own bookkeeping (OMPI_MCA_orte_*, ess, pmix …).
pub fn is_relevant_env(name: &str) -> bool {
    const MCA: [&str; 7] = ["coll_", "btl", "pml", "mtl", "oob", "osc", "plm_"];
    (name.starts_with("NCCL_") && !name.starts_with("NCCL_SMOKE_"))
        || name == "CUDA_VISIBLE_DEVICES"
        || name.starts_with("UCX_")
        || name
            .strip_prefix("OMPI_MCA_")
            .is_some_and(|k| MCA.iter().any(|m| k.starts_with(m)))
}

/// The operator's relevant variables in this process.
pub fn env_snapshot() -> BTreeMap<String, String> {
    let injected = std::env::var(INJECTED_ENV).unwrap_or_default();
    let injected: Vec<&str> = injected.split(',').collect();
    std::env::vars()
        .filter(|(k, _)| is_relevant_env(k) && !injected.contains(&k.as_str()))
        .collect()
}

/// Distinct hosts in order of first appearance.
pub fn hosts_of(ranks: &[RankInfo]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in ranks {
        if !out.contains(&r.host) {
            out.push(r.host.clone());
        }
    }
    out
}

/// One field that differs between two fingerprints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Dotted name: `driver.version`, `nccl.path`, `gpus`, `env.NCCL_IB_HCA`, …
    pub field: String,
    pub before: String,
    pub after: String,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} -> {}", self.field, self.before, self.after)
    }
}

/// Shown for a library or a field that one side does not have.
const NONE: &str = "(none)";
/// Shown for an environment variable one side did not set.
const UNSET: &str = "(unset)";

/// What changed from `before` to `after` (say, across a driver upgrade), field by field in a
/// fixed order, then `env.*` by name. Process ids and rank placement are not compared.
pub fn diff(before: &Fingerprint, after: &Fingerprint) -> Vec<Change> {
    let (b, a) = (fields(before), fields(after));
    let mut names: Vec<&String> = b.iter().map(|(k, _)| k).collect();
    for (k, _) in &a {
        if !names.contains(&k) {
            names.push(k);
        }
    }
    let value = |side: &[(String, String)], name: &str| {
        let absent = if name.starts_with("env.") {
            UNSET
        } else {
            NONE
        };
        side.iter()
            .find(|(k, _)| k == name)
            .map_or(absent.to_string(), |(_, v)| v.clone())
    };
    names
        .into_iter()
        .filter_map(|name| {
            let (x, y) = (value(&b, name), value(&a, name));
            (x != y).then(|| Change {
                field: name.clone(),
                before: x,
                after: y,
            })
        })
        .collect()
}

/// The compared fields of a fingerprint as (name, text).
fn fields(fp: &Fingerprint) -> Vec<(String, String)> {
    let opt = |v: Option<String>| v.unwrap_or_else(|| NONE.into());
    let (d, n) = (fp.driver.as_ref(), fp.nccl.as_ref());
    let mut out = vec![
        ("hosts", fp.hosts.join(", ")),
        ("ranks", fp.ranks.len().to_string()),
        ("gpus", gpu_models(&fp.ranks)),
        ("gpu_uuids", gpu_uuids(&fp.ranks)),
        (
            "driver.version",
            opt(d.map(|d| format!("{} ({})", d.cuda_version, d.version_code))),
        ),
        ("driver.path", opt(d.map(|d| d.path.clone()))),
        ("driver.simulated", opt(d.and_then(|d| d.simulated.clone()))),
        (
            "nccl.version",
            opt(n.map(|n| format!("{} ({})", n.version, n.version_code))),
        ),
        ("nccl.path", opt(n.map(|n| n.path.clone()))),
        (
            "nccl.capabilities",
            opt(n.map(|n| capabilities(&n.capabilities))),
        ),
        ("nccl.simulated", opt(n.and_then(|n| n.simulated.clone()))),
        ("launcher", fp.launcher.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect::<Vec<_>>();
    out.extend(fp.env.iter().map(|(k, v)| (format!("env.{k}"), v.clone())));
    out
}

/// Distinct GPUs (by UUID) counted by model: "8 x NVIDIA H100 80GB HBM3".
fn gpu_models(ranks: &[RankInfo]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    let mut models: BTreeMap<&str, usize> = BTreeMap::new();
    for r in ranks {
        if !seen.contains(&r.device.uuid.as_str()) {
            seen.push(&r.device.uuid);
            *models.entry(r.device.name.as_str()).or_default() += 1;
        }
    }
    let parts: Vec<String> = models.iter().map(|(m, n)| format!("{n} x {m}")).collect();
    parts.join(", ")
}

fn gpu_uuids(ranks: &[RankInfo]) -> String {
    let mut uuids: Vec<&str> = ranks.iter().map(|r| r.device.uuid.as_str()).collect();
    uuids.sort();
    uuids.dedup();
    uuids.join(", ")
}

fn capabilities(c: &Capabilities) -> String {
    let all = [
        (c.init_rank_config, "non-blocking init"),
        (c.last_error, "ncclGetLastError"),
        (c.finalize, "ncclCommFinalize"),
        (c.alltoall, "native ncclAlltoAll"),
    ];
    let have: Vec<&str> = all.iter().filter(|(on, _)| *on).map(|(_, n)| *n).collect();
    if have.is_empty() {
        NONE.into()
    } else {
        have.join(", ")
    }
}

#[cfg(test)]
impl RankInfo {
    /// A rank for unit tests: local rank 0 on `host` with one 80 GB GPU named `gpu` (UUID
    /// `GPU-<rank>`), nothing recorded of its setup.
    pub(crate) fn sample(rank: u32, host: &str, gpu: &str) -> RankInfo {
        RankInfo {
            rank,
            host: host.into(),
            local_rank: 0,
            pid: 1,
            device: DeviceInfo {
                ordinal: 0,
                name: gpu.into(),
                uuid: format!("GPU-{rank}"),
                bus_id: "0000:18:00.0".into(),
                total_mem: 80 << 30,
                compute_capability: Some((9, 0)),
            },
            setup: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(uuid: &str, name: &str) -> DeviceInfo {
        DeviceInfo {
            ordinal: 0,
            name: name.into(),
            uuid: uuid.into(),
            bus_id: "0000:18:00.0".into(),
            total_mem: 80 << 30,
            compute_capability: Some((9, 0)),
        }
    }

    fn rank(rank: u32, device: DeviceInfo) -> RankInfo {
        RankInfo {
            rank,
            host: "n1".into(),
            local_rank: rank,
            pid: 100 + rank,
            device,
            setup: None,
        }
    }

    fn sample() -> Fingerprint {
        Fingerprint {
            hosts: vec!["n1".into()],
            ranks: vec![rank(0, gpu("GPU-a", "H100")), rank(1, gpu("GPU-b", "H100"))],
            driver: Some(DriverInfo {
                cuda_version: "12.8".into(),
                version_code: 12080,
                path: "/usr/lib/libcuda.so.570.86.15".into(),
                simulated: None,
            }),
            nccl: Some(NcclInfo {
                version: "2.26.2".into(),
                version_code: 22602,
                path: "/usr/lib/libnccl.so.2.26.2".into(),
                capabilities: Capabilities {
                    init_rank_config: true,
                    last_error: true,
                    finalize: true,
                    alltoall: false,
                    split: true,
                    gather_scatter: false,
                },
                simulated: None,
            }),
            launcher: "Open MPI v4.1.4".into(),
            bootstrap: None,
            env: [("NCCL_IB_HCA".to_string(), "mlx5".to_string())].into(),
        }
    }

    #[test]
    fn identical_fingerprints_have_no_changes() {
        assert_eq!(diff(&sample(), &sample()), []);
        assert_eq!(diff(&Fingerprint::default(), &Fingerprint::default()), []);
    }

    #[test]
    fn a_driver_upgrade_is_named_alone() {
        let mut after = sample();
        if let Some(d) = after.driver.as_mut() {
            d.cuda_version = "12.9".into();
            d.version_code = 12090;
        }
        let changes = diff(&sample(), &after);
        assert_eq!(
            changes,
            [Change {
                field: "driver.version".into(),
                before: "12.8 (12080)".into(),
                after: "12.9 (12090)".into(),
            }]
        );
        assert_eq!(
            changes[0].to_string(),
            "driver.version: 12.8 (12080) -> 12.9 (12090)"
        );
    }

    #[test]
    fn nccl_gpus_and_env_changes_are_named() {
        let mut after = sample();
        after.nccl = None;
        after.ranks[1].device = gpu("GPU-c", "H200");
        after.ranks[0].pid = 7;
        after.env.remove("NCCL_IB_HCA");
        after.env.insert("NCCL_P2P_DISABLE".into(), "1".into());
        let changes = diff(&sample(), &after);
        let fields: Vec<&str> = changes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "gpus",
                "gpu_uuids",
                "nccl.version",
                "nccl.path",
                "nccl.capabilities",
                "env.NCCL_IB_HCA",
                "env.NCCL_P2P_DISABLE"
            ],
            "{changes:?}"
        );
        assert_eq!(changes[0].before, "2 x H100");
        assert_eq!(changes[0].after, "1 x H100, 1 x H200");
        assert_eq!(changes[2].after, NONE);
        assert_eq!(changes[5].after, UNSET);
        assert_eq!(changes[6].before, UNSET);
    }

    #[test]
    fn ranks_sharing_a_gpu_count_it_once() {
        let mut fp = sample();
        fp.ranks.push(rank(2, gpu("GPU-a", "H100")));
        assert_eq!(gpu_models(&fp.ranks), "2 x H100");
        assert_eq!(gpu_uuids(&fp.ranks), "GPU-a, GPU-b");
        let changes = diff(&sample(), &fp);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].field, "ranks");
    }

    #[test]
    fn relevant_env_is_nccl_cuda_ucx_and_ompi_mca() {
        assert!(is_relevant_env("NCCL_SOCKET_IFNAME"));
        assert!(is_relevant_env("CUDA_VISIBLE_DEVICES"));
        assert!(is_relevant_env("OMPI_MCA_coll_hcoll_enable"));
        assert!(is_relevant_env("OMPI_MCA_btl_tcp_if_include"));
        assert!(!is_relevant_env("OMPI_MCA_orte_hnp_uri"));
        assert!(!is_relevant_env("NCCL_SMOKE_RUN_DIR"));
        assert!(!is_relevant_env("HOME"));
        assert!(!is_relevant_env("OMPI_COMM_WORLD_RANK"));
    }
}
