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
    /// The RDMA ports every host has active, when every host has the same number at one link
    /// rate.
    pub nics: Option<Nics>,
}

/// Each host's active RDMA ports ([`crate::report::fingerprint::RdmaPort`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Nics {
    /// How many, on every host.
    pub per_node: u32,
    /// Their link rate, Gb/s.
    pub gbps: f64,
}

impl Nics {
    /// The hosts' active ports, from the first rank of each host that reported its setup:
    /// `None` when a host has none, or their count or rate differs between ports or hosts.
    fn of(ranks: &[RankInfo]) -> Option<Nics> {
        let mut seen: Vec<&str> = Vec::new();
        let mut all: Option<Nics> = None;
        for r in ranks {
            if seen.contains(&r.host.as_str()) {
                continue;
            }
            seen.push(&r.host);
            let rates: Vec<f64> = r
                .setup
                .as_ref()?
                .rdma_ports
                .values()
                .filter(|p| p.active())
                .map(|p| p.gbps())
                .collect::<Option<_>>()?;
            let gbps = *rates.first()?;
            if rates.iter().any(|&g| g != gbps) {
                return None;
            }
            let here = Nics {
                per_node: rates.len() as u32,
                gbps,
            };
            match all {
                Some(a) if a != here => return None,
                _ => all = Some(here),
            }
        }
        all
    }
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
            nics: Nics::of(ranks),
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
        let nics = match self.nics {
            Some(n) if self.nodes.is_some_and(|h| h > 1) => {
                format!(", {} RDMA port(s) of {} Gb/s per host", n.per_node, n.gbps)
            }
            _ => String::new(),
        };
        format!("{} ranks of {gpu}{shape}{nics}", self.ranks)
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
        if let Some(names) = &self.gpu_any
            && !sys.gpu.as_ref().is_some_and(|g| {
                names
                    .iter()
                    .any(|n| g.trim().eq_ignore_ascii_case(n.trim()))
            })
        {
            return Some(format!("for {}", names.join(" or ")));
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
        if let Some(n) = self.min_nodes
            && sys.nodes.is_none_or(|h| h < n)
        {
            return Some(format!("on {n} or more hosts"));
        }
        if let Some(rate) = self.nic_gbps
            && !sys.nics.is_some_and(|n| n.gbps == rate)
        {
            return Some(format!(
                "with active RDMA ports of {rate} Gb/s, the same number on every host"
            ));
        }
        if self.per_nic
            && sys
                .nics
                .is_none_or(|n| sys.gpus_per_node.is_none_or(|g| n.per_node > g))
        {
            return Some("with at most one active RDMA port per GPU on every host".into());
        }
        None
    }

    /// This floor as judged on `sys`: a figure per NIC times the hosts' active ports, and a
    /// peak less its margin, made one figure, with how it was made in its name. Unchanged
    /// when it has neither.
    pub fn resolved(&self, sys: &System) -> Floor {
        if !self.per_nic && self.below_peak_pct.is_none() {
            return self.clone();
        }
        let mut f = self.clone();
        let mut how = Vec::new();
        if self.per_nic
            && let Some(n) = sys.nics
        {
            f.busbw_gbs *= n.per_node as f64;
            how.push(format!("{} NICs × {} GB/s", n.per_node, self.busbw_gbs));
        }
        if let Some(p) = self.below_peak_pct {
            how.push(format!("less {p} % of {} GB/s", f.busbw_gbs));
            f.busbw_gbs *= 1.0 - p / 100.0;
        }
        // 8 × 48 less 10 % is 345.6, not 345.59999999999997; a small figure keeps its digits.
        f.busbw_gbs = (f.busbw_gbs * 1e6).round() / 1e6;
        f.per_nic = false;
        f.below_peak_pct = None;
        let name = self.name.clone().unwrap_or_else(|| "the network".into());
        f.name = Some(format!("{name} ({})", how.join(", ")));
        f
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
            let node = f.gpu.is_some() && f.gpus_per_node.is_some() && f.nodes.is_some();
            let network = f.gpu_any.is_some()
                && f.min_nodes.is_some_and(|n| n >= 2)
                && f.nic_gbps.is_some()
                && f.per_nic;
            assert!(
                node || network,
                "floors[{i}]: a built-in figure names its system"
            );
        }
    }

    /// `nodes` hosts of 8 H100s, each with `ports` active RDMA ports at `rate`.
    fn cluster(nodes: u32, ports: u32, rate: &str) -> Vec<RankInfo> {
        use crate::report::fingerprint::{RankSetup, RdmaPort};
        (0..nodes * 8)
            .map(|r| {
                let mut info = rank(r, &format!("n{}", r / 8), "NVIDIA H100 80GB HBM3");
                let rdma_ports = (0..ports)
                    .map(|p| {
                        let port = RdmaPort {
                            rate: rate.into(),
                            link_layer: "InfiniBand".into(),
                            state: "ACTIVE".into(),
                        };
                        (format!("mlx5_{p}/1"), port)
                    })
                    .collect();
                info.setup = Some(RankSetup {
                    rdma_ports,
                    ..RankSetup::default()
                });
                info
            })
            .collect()
    }

    #[test]
    fn hosts_with_ndr_ports_get_the_per_nic_floor_times_their_ports() {
        let sys = System::of(&cluster(2, 8, "400 Gb/sec (4X NDR)"));
        assert_eq!(
            sys.nics,
            Some(Nics {
                per_node: 8,
                gbps: 400.0
            })
        );
        assert!(
            sys.describe()
                .ends_with("8 RDMA port(s) of 400 Gb/s per host")
        );
        let fit = fitting(&built_in(), &sys);
        assert_eq!(fit.floors.len(), 1, "{:?}", fit.floors);
        let f = &fit.floors[0].resolved(&sys);
        // 8 × 48 GB/s = 384, less 10 %.
        assert_eq!(f.busbw_gbs, 345.6);
        assert!(
            f.name
                .as_deref()
                .unwrap()
                .ends_with("(8 NICs × 48 GB/s, less 10 % of 384 GB/s)"),
            "{:?}",
            f.name
        );
        // HDR ports: the 200 Gb/s row; a host with a port down or one more port, one host, or
        // more ports than GPUs: none.
        let hdr = System::of(&cluster(3, 4, "200 Gb/sec (4X HDR)"));
        let fit = fitting(&built_in(), &hdr);
        assert_eq!(fit.floors.len(), 1);
        assert_eq!(fit.floors[0].resolved(&hdr).busbw_gbs, 86.4);
        let mut uneven = cluster(2, 8, "400 Gb/sec (4X NDR)");
        let last = uneven.last_mut().unwrap().setup.as_mut().unwrap();
        last.rdma_ports.get_mut("mlx5_7/1").unwrap().state = "DOWN".into();
        // Only the first rank of a host is read: rank 8 speaks for host n1.
        uneven[8].setup = uneven[15].setup.clone();
        let sys = System::of(&uneven);
        assert_eq!(sys.nics, None);
        assert!(fitting(&built_in(), &sys).floors.is_empty());
        assert!(
            fitting(
                &built_in(),
                &System::of(&cluster(1, 8, "400 Gb/sec (4X NDR)"))
            )
            .floors
            .iter()
            .all(|f| f.nodes == Some(1))
        );
        let many = System::of(&cluster(2, 9, "400 Gb/sec (4X NDR)"));
        assert!(fitting(&built_in(), &many).floors.is_empty());
        let other = built_in()
            .floors
            .into_iter()
            .find(|f| f.nic_gbps == Some(400.0))
            .unwrap();
        assert_eq!(
            other.mismatch(&many).as_deref(),
            Some("with at most one active RDMA port per GPU on every host")
        );
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
