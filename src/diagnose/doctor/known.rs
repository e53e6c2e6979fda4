//! The `known-issues` check: driver × NCCL combinations known to fail.

use super::{Check, Node, Status, check};
use crate::ffi::nccl;
use std::ops::RangeInclusive;

impl Node {
    /// The driver branch (570 for 570.86.15) from `/proc/driver/nvidia/version`.
    fn driver_branch(&self) -> Option<u32> {
        let t = self.read("/proc/driver/nvidia/version")?;
        t.split_whitespace()
            .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
            .and_then(|v| v.split('.').next()?.parse::<u32>().ok())
    }

    /// Known-bad combinations from [`KNOWN_BAD`].
    pub(super) fn known_bad(&self, out: &mut Vec<Check>, nccl_version: Option<i32>) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::doctor::fixtures::fixture;
    use crate::diagnose::doctor::node_for_tests;

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
}
