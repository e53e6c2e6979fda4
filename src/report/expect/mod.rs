//! `run --expect FILE|auto`: bus bandwidth floors per pattern and size, the way health checks
//! use published figures (Azure's NHC checks `all_reduce` at 16 GiB on an 8-GPU node against
//! one number). The file is JSON (schema [`SCHEMA`]):
//!
//! ```json
//! { "schema": "nccl-smoke/expect/v1",
//!   "floors": [ { "name": "8x H100 SXM", "pattern": "all_reduce", "gpu": "NVIDIA H100 80GB HBM3",
//!                 "gpus_per_node": 8, "nodes": 1, "size": "16G", "busbw_gbs": 460.0,
//!                 "source": "https://…" } ] }
//! ```
//!
//! A floor applies to the rows of its pattern of exactly `size` bytes, or of `min_size` bytes
//! and more (up to `max_size` when given); with `ranks`, `gpu` (the GPU's whole name),
//! `gpus_per_node` or `nodes`, only to a run of that shape ([`system`]). `auto` takes the
//! built-in table's rows for the system the ranks report; a file is one's own fleet's figures
//! (examples in `deploy/expect/`).

pub mod system;

use crate::bench::{SizeResult, sweep};
use serde::{Deserialize, Serialize};
use std::path::Path;
pub use system::System;

/// Schema identifier of an expectations file.
pub const SCHEMA: &str = "nccl-smoke/expect/v1";

/// One floor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Floor {
    /// What the figure is for, e.g. the node type.
    #[serde(default)]
    pub name: Option<String>,
    /// nccl-smoke's pattern name.
    pub pattern: String,
    /// Only for runs of this many ranks.
    #[serde(default)]
    pub ranks: Option<u32>,
    /// Exactly this size (the size suffixes of -b/-e).
    #[serde(default)]
    pub size: Option<String>,
    /// Every size from this one up.
    #[serde(default)]
    pub min_size: Option<String>,
    /// With `min_size`: every size up to this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<String>,
    /// Only for runs whose every GPU has this name, as the driver reports it (case aside;
    /// `nvidia-smi --query-gpu=name`), e.g. `NVIDIA H100 80GB HBM3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// Only for runs whose every GPU has one of these names (as `gpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_any: Option<Vec<String>>,
    /// Only for runs with this many ranks on every host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_node: Option<u32>,
    /// Only for runs on this many hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    /// What else the figure assumes and nccl-smoke does not detect: NVLink / NVSwitch
    /// generation, NICs, the provider's topology file and settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assumes: Option<String>,
    /// Only for runs on at least this many hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_nodes: Option<u32>,
    /// Only for runs whose every host has the same number of active RDMA ports, every one at
    /// this link rate in Gb/s (`/sys/class/infiniband/*/ports/*/rate`: 400 for NDR).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_gbps: Option<f64>,
    /// `busbw_gbs` is per active RDMA port of a host: the floor is that many times it (for at
    /// most one port per GPU).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_nic: bool,
    /// `busbw_gbs` is a peak its source says a healthy system reaches: the floor is this many
    /// percent below it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below_peak_pct: Option<f64>,
    /// The floor, GB/s of bus bandwidth (with `per_nic` or `below_peak_pct`, the figure the
    /// floor is made from).
    pub busbw_gbs: f64,
    /// Where the figure comes from.
    pub source: String,
}

/// An expectations file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectations {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Free text: what the figures are and are not.
    #[serde(default)]
    pub note: Option<String>,
    pub floors: Vec<Floor>,
}

impl Floor {
    /// ` for NAME`, or nothing for a floor without a name.
    fn for_name(&self) -> String {
        self.name
            .as_ref()
            .map(|n| format!(" for {n}"))
            .unwrap_or_default()
    }
}

/// A row below its floor.
#[derive(Debug, Clone, PartialEq)]
pub struct Shortfall {
    pub floor: Floor,
    pub pattern: String,
    pub size_bytes: usize,
    /// The row's bus bandwidth (the median of its repeats), GB/s.
    pub busbw_gbs: f64,
    /// The rank with the largest time.
    pub slowest_rank: u32,
}

impl Shortfall {
    /// `all_reduce 1048576 B: bus bandwidth 0.17 GB/s, 99.4 % below the floor 30 GB/s for NAME
    /// (source: …)`.
    pub fn what(&self) -> String {
        format!(
            "{} {} B: bus bandwidth {:.2} GB/s, {:.1} % below the floor {} GB/s{} (source: {})",
            self.pattern,
            self.size_bytes,
            self.busbw_gbs,
            below_by(self.busbw_gbs, self.floor.busbw_gbs),
            self.floor.busbw_gbs,
            self.floor.for_name(),
            self.floor.source
        )
    }
}

/// Reads and checks an expectations file: the schema, each floor's size and figure.
pub fn load(path: &Path) -> Result<Expectations, String> {
    let bytes = super::atomic_file::read_bounded(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let exp: Expectations = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{}:{}: {e}", path.display(), e.line()))?;
    if exp.schema != SCHEMA {
        return Err(format!(
            "{}: schema '{}', expected '{SCHEMA}'",
            path.display(),
            exp.schema
        ));
    }
    for (i, f) in exp.floors.iter().enumerate() {
        check_floor(f).map_err(|m| format!("{}: floors[{i}]: {m}", path.display()))?;
    }
    Ok(exp)
}

/// The expectations `--expect` names: `auto` is the built-in table ([`system::built_in`]),
/// anything else a file.
pub fn load_arg(arg: &Path) -> Result<Expectations, String> {
    if arg.as_os_str() == AUTO {
        return Ok(system::built_in());
    }
    load(arg)
}

/// The `--expect` value that picks the built-in floors for the detected system.
pub const AUTO: &str = "auto";

/// One floor's sizes, figure and pattern, checked.
pub(crate) fn check_floor(f: &Floor) -> Result<(), String> {
    if f.size.is_some() == f.min_size.is_some() {
        return Err("give one of \"size\" and \"min_size\"".into());
    }
    if f.max_size.is_some() && f.min_size.is_none() {
        return Err("\"max_size\" goes with \"min_size\"".into());
    }
    let (lo, hi) = sizes(f)?;
    if hi < lo {
        return Err(format!("max_size is below min_size ({hi} < {lo} bytes)"));
    }
    if !(f.busbw_gbs.is_finite() && f.busbw_gbs > 0.0) {
        return Err(format!("busbw_gbs {} is no bandwidth", f.busbw_gbs));
    }
    if let Some(p) = f.below_peak_pct
        && !(0.0..100.0).contains(&p)
    {
        return Err(format!("below_peak_pct {p} is not a percentage below 100"));
    }
    if let Some(r) = f.nic_gbps
        && !(r.is_finite() && r > 0.0)
    {
        return Err(format!("nic_gbps {r} is no link rate"));
    }
    crate::patterns::select(std::slice::from_ref(&f.pattern))?;
    Ok(())
}

/// The sizes a floor covers, in bytes: (smallest, largest).
fn sizes(f: &Floor) -> Result<(usize, usize), String> {
    match (&f.size, &f.min_size) {
        (Some(s), _) => {
            let n = sweep::parse_size(s)?;
            Ok((n, n))
        }
        (None, Some(s)) => Ok((
            sweep::parse_size(s)?,
            match &f.max_size {
                Some(m) => sweep::parse_size(m)?,
                None => usize::MAX,
            },
        )),
        (None, None) => Err("no size".into()),
    }
}

/// How far `busbw` is below `floor`, in percent of the floor.
pub fn below_by(busbw: f64, floor: f64) -> f64 {
    100.0 * (floor - busbw) / floor
}

/// Does the floor cover this row (its pattern and size)?
fn covers(f: &Floor, r: &SizeResult) -> bool {
    sizes(f).is_ok_and(|(lo, hi)| f.pattern == r.pattern && (lo..=hi).contains(&r.size_bytes))
}

/// `8G`, `1M-16M`, `1M and up`: the sizes a floor covers, as its file wrote them.
pub fn size_range(f: &Floor) -> String {
    match (&f.size, &f.min_size, &f.max_size) {
        (Some(s), _, _) => s.clone(),
        (None, Some(lo), Some(hi)) => format!("{lo}-{hi}"),
        (None, Some(lo), None) => format!("{lo} and up"),
        _ => String::new(),
    }
}

/// One floor's verdict over the rows it covers.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    pub floor: Floor,
    /// Rows it covered.
    pub rows: usize,
    /// The lowest bus bandwidth among them (GB/s) and its size.
    pub lowest: (f64, usize),
    /// The rows below it.
    pub below: usize,
}

impl Judged {
    /// `all_reduce 8G-16G for 8x H100 (…): lowest 431.20 GB/s at 8589934592 B, 2 of 2 size(s)
    /// BELOW FLOOR 460 GB/s by up to 6.3 % (source: …)`, or `…: PASS (floor 460 GB/s; source: …)`.
    pub fn line(&self) -> String {
        let head = format!(
            "{} {}{}: lowest {:.2} GB/s at {} B",
            self.floor.pattern,
            size_range(&self.floor),
            self.floor.for_name(),
            self.lowest.0,
            self.lowest.1
        );
        if self.below == 0 {
            format!(
                "{head}: PASS (floor {} GB/s; source: {})",
                self.floor.busbw_gbs, self.floor.source
            )
        } else {
            format!(
                "{head}, {} of {} size(s) BELOW FLOOR {} GB/s by up to {:.1} % (source: {})",
                self.below,
                self.rows,
                self.floor.busbw_gbs,
                below_by(self.lowest.0, self.floor.busbw_gbs),
                self.floor.source
            )
        }
    }
}

/// The floors of `exp` that fit `sys`, each as judged there ([`Floor::resolved`]: a figure per
/// NIC times the hosts' ports, a peak less its margin), in file order.
fn applying(exp: &Expectations, sys: &System) -> Vec<Floor> {
    exp.floors
        .iter()
        .filter(|f| f.mismatch(sys).is_none())
        .map(|f| f.resolved(sys))
        .collect()
}

/// Per floor of `exp` that fits `sys` and covers at least one row: its verdict, in file order.
pub fn judge(exp: &Expectations, rows: &[SizeResult], sys: &System) -> Vec<Judged> {
    applying(exp, sys)
        .into_iter()
        .filter_map(|f| {
            let mine: Vec<&SizeResult> = rows.iter().filter(|r| covers(&f, r)).collect();
            let low = mine
                .iter()
                .min_by(|a, b| a.busbw_gbs.total_cmp(&b.busbw_gbs))?;
            Some(Judged {
                rows: mine.len(),
                lowest: (low.busbw_gbs, low.size_bytes),
                below: mine.iter().filter(|r| r.busbw_gbs < f.busbw_gbs).count(),
                floor: f,
            })
        })
        .collect()
}

/// The rows of a run on `sys` that fall below a floor of `exp`, in row order.
pub fn check(exp: &Expectations, rows: &[SizeResult], sys: &System) -> Vec<Shortfall> {
    let floors = applying(exp, sys);
    let mut out = Vec::new();
    for r in rows {
        for f in &floors {
            if covers(f, r) && r.busbw_gbs < f.busbw_gbs {
                out.push(Shortfall {
                    floor: f.clone(),
                    pattern: r.pattern.clone(),
                    size_bytes: r.size_bytes,
                    busbw_gbs: r.busbw_gbs,
                    slowest_rank: r.slowest_rank,
                });
            }
        }
    }
    out
}

/// Floors of `exp` that no row of the run met the conditions of (another system, a size not
/// swept): said so that a check that tested nothing does not pass in silence.
pub fn unchecked(exp: &Expectations, rows: &[SizeResult], sys: &System) -> Vec<String> {
    exp.floors
        .iter()
        .filter_map(|f| {
            let why = f.mismatch(sys);
            if why.is_none() && rows.iter().any(|r| covers(f, r)) {
                return None;
            }
            Some(format!(
                "{} {}{}",
                f.pattern,
                size_range(f),
                why.map(|w| format!(" {w}")).unwrap_or_default()
            ))
        })
        .collect()
}

/// One line per shortfall, naming the slowest rank's host and every host of the run
/// (`hosts[rank]` is rank's host).
pub fn describe(shortfalls: &[Shortfall], hosts: &[String]) -> Vec<String> {
    let mut all: Vec<&str> = Vec::new();
    for h in hosts {
        if !all.contains(&h.as_str()) {
            all.push(h);
        }
    }
    shortfalls
        .iter()
        .map(|s| {
            let host = hosts
                .get(s.slowest_rank as usize)
                .map(String::as_str)
                .unwrap_or("?");
            format!(
                "{}; slowest rank {} on host {host}; host(s) {}",
                s.what(),
                s.slowest_rank,
                all.join(", ")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests;
