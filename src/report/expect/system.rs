//! The system a run's floors are chosen for, and which floors fit it: `run --expect auto` takes
//! the rows of the built-in table ([`BUILT_IN`], `floors.json` beside this file) whose GPU
//! name, GPUs per node and node count are this run's. What the figures also assume (NVLink or
//! NVSwitch generation, NICs, the provider's topology and settings) is described in each row
//! and not detected: a row names its source, and the verdict quotes it.

use super::{Expectations, Floor};
use crate::report::fingerprint::RankInfo;

/// The built-in floors, schema [`super::SCHEMA`]: every figure with its public source.
pub const BUILT_IN: &str = include_str!("floors.json");

/// What the floors' conditions are matched against.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct System {
    /// Ranks in the run (or the group, under `isolate`).
    pub ranks: u32,
    /// The GPU name every rank reported (`None` when they differ or are not known).
    pub gpu: Option<String>,
    /// Ranks on each host, when every host has the same number.
    pub gpus_per_node: Option<u32>,
    /// Hosts in the run.
    pub nodes: Option<u32>,
}

impl System {
    /// Only the rank count is known (an `isolate` group): floors that ask for a GPU model or a
    /// node shape do not apply.
    pub fn ranks_only(ranks: u32) -> System {
        System {
            ranks,
            ..System::default()
        }
    }

    /// The system of a run's ranks, as each reported its host and device.
    pub fn of(ranks: &[RankInfo]) -> System {
        let mut per_host: Vec<(&str, u32)> = Vec::new();
        for r in ranks {
            match per_host.iter_mut().find(|(h, _)| *h == r.host) {
                Some((_, n)) => *n += 1,
                None => per_host.push((&r.host, 1)),
            }
        }
        let first = ranks.first().map(|r| r.device.name.clone());
        let gpu = first.filter(|g| ranks.iter().all(|r| &r.device.name == g));
        let gpus_per_node = per_host
            .first()
            .map(|(_, n)| *n)
            .filter(|n| per_host.iter().all(|(_, m)| m == n));
        System {
            ranks: ranks.len() as u32,
            gpu,
            gpus_per_node,
            nodes: (!per_host.is_empty()).then_some(per_host.len() as u32),
        }
    }

    /// `8 ranks of NVIDIA H100 80GB HBM3, 8 per host on 1 host`.
    pub fn describe(&self) -> String {
        let gpu = self
            .gpu
            .as_deref()
            .unwrap_or("GPUs that differ or are not known");
        let shape = match (self.gpus_per_node, self.nodes) {
            (Some(g), Some(n)) => format!(", {g} per host on {n} host(s)"),
            (None, Some(n)) => format!(", unevenly on {n} host(s)"),
            _ => String::new(),
        };
        format!("{} ranks of {gpu}{shape}", self.ranks)
    }
}

impl Floor {
    /// Why this floor's figure is not for `sys` (its rank count, GPU model, GPUs per node or node
    /// count differ, or are not known), or `None` when it is.
    pub fn mismatch(&self, sys: &System) -> Option<String> {
        if let Some(n) = self.ranks
            && n != sys.ranks
        {
            return Some(format!("on {n} ranks"));
        }
        if let Some(want) = &self.gpu
            && !sys
                .gpu
                .as_ref()
                .is_some_and(|g| g.trim().eq_ignore_ascii_case(want.trim()))
        {
            return Some(format!("for {want}"));
        }
        if let Some(n) = self.gpus_per_node
            && sys.gpus_per_node != Some(n)
        {
            return Some(format!("with {n} GPUs per host"));
        }
        if let Some(n) = self.nodes
            && sys.nodes != Some(n)
        {
            return Some(format!("on {n} host(s)"));
        }
        None
    }
}

/// The built-in table, read and checked.
pub fn built_in() -> Expectations {
    let exp: Expectations =
        serde_json::from_str(BUILT_IN).expect("the built-in floors parse (unit-tested)");
    exp
}

/// The floors of `exp` whose figure is for `sys`.
pub fn fitting(exp: &Expectations, sys: &System) -> Expectations {
    Expectations {
        floors: exp
            .floors
            .iter()
            .filter(|f| f.mismatch(sys).is_none())
            .cloned()
            .collect(),
        ..exp.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(rank: u32, host: &str, gpu: &str) -> RankInfo {
        RankInfo::sample(rank, host, gpu)
    }

    #[test]
    fn every_built_in_floor_checks_and_cites_a_public_source() {
        let exp = built_in();
        assert!(exp.floors.len() >= 4);
        for (i, f) in exp.floors.iter().enumerate() {
            super::super::check_floor(f).unwrap_or_else(|e| panic!("floors[{i}]: {e}"));
            assert!(
                f.source.starts_with("https://"),
                "floors[{i}]: {}",
                f.source
            );
            assert!(
                f.gpu.is_some() && f.gpus_per_node.is_some() && f.nodes.is_some(),
                "floors[{i}]: a built-in figure names its system"
            );
        }
    }

    #[test]
    fn an_eight_gpu_h100_node_gets_its_row_and_nothing_else_does() {
        let h100: Vec<RankInfo> = (0..8)
            .map(|r| rank(r, "a", "NVIDIA H100 80GB HBM3"))
            .collect();
        let sys = System::of(&h100);
        assert_eq!(
            (sys.gpus_per_node, sys.nodes, sys.ranks),
            (Some(8), Some(1), 8)
        );
        let fit = fitting(&built_in(), &sys);
        assert!(!fit.floors.is_empty());
        assert!(
            fit.floors
                .iter()
                .all(|f| f.gpu.as_deref() == Some("NVIDIA H100 80GB HBM3"))
        );
        // A name is a whole name: an H200 NVL is not the H200 SXM of its row.
        let nvl: Vec<RankInfo> = (0..8).map(|r| rank(r, "a", "NVIDIA H200 NVL")).collect();
        assert!(fitting(&built_in(), &System::of(&nvl)).floors.is_empty());
        // Four of them on each of two hosts, a simulated GPU, mixed GPUs: no row.
        let two: Vec<RankInfo> = (0..8)
            .map(|r| rank(r, if r < 4 { "a" } else { "b" }, "NVIDIA H100 80GB HBM3"))
            .collect();
        assert!(fitting(&built_in(), &System::of(&two)).floors.is_empty());
        let sim: Vec<RankInfo> = (0..8)
            .map(|r| rank(r, "a", "NVIDIA Simulated GPU (nccl-smoke SIMULATED)"))
            .collect();
        assert!(fitting(&built_in(), &System::of(&sim)).floors.is_empty());
        let mut mixed = h100.clone();
        mixed[3].device.name = "NVIDIA A100-SXM4-80GB".into();
        let sys = System::of(&mixed);
        assert_eq!(sys.gpu, None);
        assert!(fitting(&built_in(), &sys).floors.is_empty());
        assert!(sys.describe().contains("differ"));
    }
}
