//! The environment a run measured: enough to tell two runs apart (say, before and after a
//! driver upgrade) and to see at a glance what a node was running.

use crate::ffi::cuda::DeviceInfo;
use crate::ffi::nccl::Capabilities;
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

/// Everything that identifies the environment of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Distinct hosts, in rank order of first appearance.
    pub hosts: Vec<String>,
    pub ranks: Vec<RankInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl: Option<NcclInfo>,
    /// What launched the ranks (MPI library version line).
    pub launcher: String,
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

#[cfg(test)]
mod tests {
    use super::*;

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
