//! Ranks that were started differently: another NCCL, another driver, other `NCCL_*`, `UCX_*` or
//! Open MPI transport settings, another GPU model, other NIC firmware. NCCL checks little of this
//! itself (2.31 and later compare some settings at init; older releases hang or fail in ways that
//! look like network faults, NVIDIA/nccl issue #1634), so every rank's setup is gathered before
//! NCCL's init, and rank 0 names each difference: which ranks and hosts, and what differs.

pub use crate::report::fingerprint::RankSetup;
use crate::report::fingerprint::{RankInfo, RdmaPort};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A field the ranks are compared on: its name, and its value on one rank.
type Field = (String, Value);

/// A field's value on one rank.
type Value = Box<dyn Fn(&RankInfo, &RankSetup) -> String>;

/// Variables that differ between ranks by design: each rank's own GPU.
const PER_RANK: &[&str] = &["CUDA_VISIBLE_DEVICES"];

/// One thing the ranks disagree on: its name, and each value with the ranks and hosts that have it
/// (the value rank 0 has first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mismatch {
    pub what: String,
    pub groups: Vec<(String, Vec<u32>, Vec<String>)>,
}

impl Mismatch {
    /// `NCCL version: 2.19.3 on ranks 0-1 (host a); 2.21.5 on rank 2 (host b)`.
    pub fn line(&self) -> String {
        let groups: Vec<String> = self
            .groups
            .iter()
            .map(|(value, ranks, hosts)| {
                let which = if ranks.len() == 1 {
                    format!("rank {}", ranks[0])
                } else {
                    format!("ranks {}", spans(ranks))
                };
                let on = if hosts.len() == 1 { "host" } else { "hosts" };
                format!("{value} on {which} ({on} {})", hosts.join(", "))
            })
            .collect();
        format!("{}: {}", self.what, groups.join("; "))
    }
}

/// `0-3, 6, 8-9`.
fn spans(ranks: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            ranks[i].to_string()
        } else {
            format!("{}-{}", ranks[i], ranks[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

/// A value a rank could not read (an older supervisor, no NVIDIA driver loaded).
fn or_unknown(v: &str) -> String {
    if v.is_empty() {
        "(unknown)".into()
    } else {
        v.into()
    }
}

/// One field per key any rank has in the map `map` picks from its setup (but the variables
/// that differ per rank by design): named by `name`, its value shown by `show`, or `missing`.
fn keyed<V: 'static>(
    with: &[(&RankInfo, &RankSetup)],
    map: fn(&RankSetup) -> &BTreeMap<String, V>,
    name: fn(&str) -> String,
    show: fn(&V) -> String,
    missing: &'static str,
) -> Vec<Field> {
    let mut keys: Vec<&String> = with
        .iter()
        .flat_map(|(_, s)| map(s).keys())
        .filter(|k| !PER_RANK.contains(&k.as_str()))
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| {
            let key = k.clone();
            let value: Value =
                Box::new(move |_, s| map(s).get(&key).map(show).unwrap_or_else(|| missing.into()));
            (name(k), value)
        })
        .collect()
}

/// Everything the ranks of `infos` disagree on (ranks without a setup are left out: their
/// supervisor's build did not gather one).
pub fn mismatches(infos: &[RankInfo]) -> Vec<Mismatch> {
    let with: Vec<(&RankInfo, &RankSetup)> = infos
        .iter()
        .filter_map(|r| r.setup.as_ref().map(|s| (r, s)))
        .collect();
    let mut fields: Vec<Field> = vec![
        ("NCCL version".into(), Box::new(|_, s| s.nccl.clone())),
        ("NCCL library".into(), Box::new(|_, s| s.nccl_path.clone())),
        ("CUDA driver".into(), Box::new(|_, s| s.driver.clone())),
        (
            "NVIDIA kernel driver".into(),
            Box::new(|_, s| or_unknown(&s.kernel_driver)),
        ),
        ("GPU model".into(), Box::new(|r, _| r.device.name.clone())),
    ];
    fields.extend(keyed(
        &with,
        |s| &s.env,
        |k| k.to_string(),
        String::clone,
        "(unset)",
    ));
    fields.extend(keyed(
        &with,
        |s| &s.nic_firmware,
        |n| format!("{n} firmware"),
        String::clone,
        "(no such device)",
    ));
    // A port trained at a lower rate, or down, on one host: slow or failing NCCL traffic that
    // looks like the network's.
    fields.extend(keyed(
        &with,
        |s| &s.rdma_ports,
        |p| format!("RDMA port {p}"),
        RdmaPort::line,
        "(no such port)",
    ));
    fields
        .iter()
        .filter_map(|(what, value)| {
            let mut groups: Vec<(String, Vec<u32>, Vec<String>)> = Vec::new();
            for (r, s) in &with {
                let v = value(r, s);
                match groups.iter_mut().find(|g| g.0 == v) {
                    Some(g) => {
                        g.1.push(r.rank);
                        if !g.2.contains(&r.host) {
                            g.2.push(r.host.clone());
                        }
                    }
                    None => groups.push((v, vec![r.rank], vec![r.host.clone()])),
                }
            }
            (groups.len() > 1).then(|| Mismatch {
                what: what.clone(),
                groups,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(rank: u32, host: &str, nccl: &str, env: &[(&str, &str)]) -> RankInfo {
        RankInfo {
            setup: Some(RankSetup {
                nccl: nccl.into(),
                nccl_path: "/usr/lib/libnccl.so.2".into(),
                driver: "12.8".into(),
                env: env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..RankSetup::default()
            }),
            ..RankInfo::sample(rank, host, "NVIDIA H100")
        }
    }

    #[test]
    fn a_difference_names_its_ranks_and_hosts() {
        let infos = vec![
            rank(
                0,
                "a",
                "2.19.3",
                &[("NCCL_IB_HCA", "mlx5_0"), ("CUDA_VISIBLE_DEVICES", "0")],
            ),
            rank(
                1,
                "a",
                "2.19.3",
                &[("NCCL_IB_HCA", "mlx5_0"), ("CUDA_VISIBLE_DEVICES", "1")],
            ),
            rank(2, "b", "2.21.5", &[("CUDA_VISIBLE_DEVICES", "0")]),
            rank(
                3,
                "b",
                "2.19.3",
                &[("NCCL_IB_HCA", "mlx5_0"), ("CUDA_VISIBLE_DEVICES", "1")],
            ),
        ];
        let m = mismatches(&infos);
        let lines: Vec<String> = m.iter().map(Mismatch::line).collect();
        assert_eq!(
            lines,
            vec![
                "NCCL version: 2.19.3 on ranks 0-1, 3 (hosts a, b); 2.21.5 on rank 2 (host b)",
                "NCCL_IB_HCA: mlx5_0 on ranks 0-1, 3 (hosts a, b); (unset) on rank 2 (host b)",
            ]
        );
    }

    #[test]
    fn a_kernel_driver_or_a_port_that_differs_is_named() {
        use crate::report::fingerprint::RdmaPort;
        let port = |rate: &str, state: &str| RdmaPort {
            rate: rate.into(),
            link_layer: "InfiniBand".into(),
            state: state.into(),
        };
        let mut infos: Vec<RankInfo> = ["a", "b", "c"]
            .iter()
            .enumerate()
            .map(|(i, h)| rank(i as u32, h, "2.21.5", &[]))
            .collect();
        for (i, (driver, rate, state)) in [
            ("570.86.15", "400 Gb/sec (4X NDR)", "ACTIVE"),
            ("570.86.15", "200 Gb/sec (4X HDR)", "ACTIVE"),
            ("570.124.06", "400 Gb/sec (4X NDR)", "DOWN"),
        ]
        .into_iter()
        .enumerate()
        {
            let s = infos[i].setup.as_mut().unwrap();
            s.kernel_driver = driver.into();
            s.rdma_ports.insert("mlx5_0/1".into(), port(rate, state));
        }
        let lines: Vec<String> = mismatches(&infos).iter().map(Mismatch::line).collect();
        assert_eq!(
            lines,
            vec![
                "NVIDIA kernel driver: 570.86.15 on ranks 0-1 (hosts a, b); 570.124.06 on rank 2 (host c)",
                "RDMA port mlx5_0/1: 400 Gb/sec (4X NDR), InfiniBand, ACTIVE on rank 0 (host a); \
                 200 Gb/sec (4X HDR), InfiniBand, ACTIVE on rank 1 (host b); \
                 400 Gb/sec (4X NDR), InfiniBand, DOWN on rank 2 (host c)",
            ]
        );
    }

    #[test]
    fn agreeing_ranks_and_old_ranks_give_nothing() {
        let infos = vec![rank(0, "a", "2.19.3", &[]), rank(1, "b", "2.19.3", &[])];
        assert!(mismatches(&infos).is_empty());
        let mut old = rank(2, "c", "2.30.7", &[]);
        old.setup = None;
        assert!(mismatches(&[infos[0].clone(), old]).is_empty());
    }
}
