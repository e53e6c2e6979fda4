//! `run --expect FILE`: bus bandwidth floors per pattern and size, the way health checks use
//! published figures (Azure's NHC checks `all_reduce` at 16 GiB on an 8-GPU node against one
//! number). The file is JSON (schema [`SCHEMA`]):
//!
//! ```json
//! { "schema": "nccl-smoke/expect/v1",
//!   "floors": [ { "name": "8x H100 SXM", "pattern": "all_reduce", "ranks": 8,
//!                 "size": "16G", "busbw_gbs": 460.0, "source": "https://…" } ] }
//! ```
//!
//! A floor applies to the rows of its pattern of exactly `size` bytes, or of `min_size` bytes
//! and more; with `ranks`, only to a run of that many ranks. Figures are examples to adapt to
//! one's own fleet (see `deploy/expect/`), never built-in truth.

use crate::bench::{SizeResult, sweep};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Schema identifier of an expectations file.
pub const SCHEMA: &str = "nccl-smoke/expect/v1";

/// One floor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// The floor, GB/s of bus bandwidth.
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
    /// `all_reduce 1048576 B: bus bandwidth 0.17 GB/s below the floor 30 GB/s for NAME
    /// (source: …)`.
    pub fn what(&self) -> String {
        format!(
            "{} {} B: bus bandwidth {:.2} GB/s below the floor {} GB/s{} (source: {})",
            self.pattern,
            self.size_bytes,
            self.busbw_gbs,
            self.floor.busbw_gbs,
            self.floor
                .name
                .as_ref()
                .map(|n| format!(" for {n}"))
                .unwrap_or_default(),
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
        let bad = |m: String| format!("{}: floors[{i}]: {m}", path.display());
        if f.size.is_some() == f.min_size.is_some() {
            return Err(bad("give one of \"size\" and \"min_size\"".into()));
        }
        sizes(f).map_err(bad)?;
        if !(f.busbw_gbs.is_finite() && f.busbw_gbs > 0.0) {
            return Err(bad(format!("busbw_gbs {} is no bandwidth", f.busbw_gbs)));
        }
        crate::patterns::select(std::slice::from_ref(&f.pattern)).map_err(bad)?;
    }
    Ok(exp)
}

/// The sizes a floor covers: (smallest, exact).
fn sizes(f: &Floor) -> Result<(usize, bool), String> {
    match (&f.size, &f.min_size) {
        (Some(s), _) => Ok((sweep::parse_size(s)?, true)),
        (None, Some(s)) => Ok((sweep::parse_size(s)?, false)),
        (None, None) => Err("no size".into()),
    }
}

/// The rows of a run of `nranks` ranks that fall below a floor of `exp`, in row order.
pub fn check(exp: &Expectations, rows: &[SizeResult], nranks: u32) -> Vec<Shortfall> {
    let mut out = Vec::new();
    for r in rows {
        for f in &exp.floors {
            let Ok((from, exact)) = sizes(f) else {
                continue;
            };
            let size_ok = if exact {
                r.size_bytes == from
            } else {
                r.size_bytes >= from
            };
            let applies = f.pattern == r.pattern && size_ok && f.ranks.is_none_or(|n| n == nranks);
            if applies && r.busbw_gbs < f.busbw_gbs {
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

/// Floors of `exp` that no row of the run met the conditions of (another rank count, a size
/// not swept): said so that a check that tested nothing does not pass in silence.
pub fn unchecked(exp: &Expectations, rows: &[SizeResult], nranks: u32) -> Vec<String> {
    exp.floors
        .iter()
        .filter(|f| {
            let Ok((from, exact)) = sizes(f) else {
                return true;
            };
            f.ranks.is_some_and(|n| n != nranks)
                || !rows.iter().any(|r| {
                    r.pattern == f.pattern
                        && if exact {
                            r.size_bytes == from
                        } else {
                            r.size_bytes >= from
                        }
                })
        })
        .map(|f| {
            let size = f.size.clone().or(f.min_size.clone()).unwrap_or_default();
            format!(
                "{} {size}{}",
                f.pattern,
                f.ranks
                    .map(|n| format!(" on {n} ranks"))
                    .unwrap_or_default()
            )
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
mod tests {
    use super::*;

    fn floors(json: &str) -> Expectations {
        serde_json::from_str(json).unwrap()
    }

    fn row(pattern: &str, size: usize, busbw: f64) -> SizeResult {
        let mut r = super::super::repeats::tests::measured(size, 100.0, 0);
        r.pattern = pattern.into();
        r.busbw_gbs = busbw;
        r.slowest_rank = 1;
        r
    }

    const EXP: &str = r#"{"schema":"nccl-smoke/expect/v1","floors":[
        {"name":"8x H100","pattern":"all_reduce","ranks":8,"size":"16G","busbw_gbs":460.0,"source":"https://example/azure"},
        {"pattern":"all_to_all","min_size":"1M","busbw_gbs":1.0,"source":"ours"}]}"#;

    #[test]
    fn rows_below_a_floor_that_applies_fall_short_and_name_their_hosts() {
        let e = floors(EXP);
        let rows = vec![
            row("all_reduce", 16 << 30, 455.0),
            row("all_reduce", 8 << 30, 10.0),
            row("all_to_all", 1 << 19, 0.5),
            row("all_to_all", 1 << 20, 0.9),
            row("all_to_all", 1 << 21, 1.1),
        ];
        let short = check(&e, &rows, 8);
        let found: Vec<(&str, usize)> = short
            .iter()
            .map(|s| (s.pattern.as_str(), s.size_bytes))
            .collect();
        assert_eq!(
            found,
            vec![("all_reduce", 16 << 30), ("all_to_all", 1 << 20)]
        );
        assert!(
            check(&e, &rows, 4)
                .iter()
                .all(|s| s.pattern == "all_to_all")
        );
        let hosts = ["a".to_string(), "b".to_string(), "a".to_string()];
        assert_eq!(
            describe(&short[..1], &hosts),
            vec![format!(
                "all_reduce {} B: bus bandwidth 455.00 GB/s below the floor 460 GB/s for 8x H100 \
                 (source: https://example/azure); slowest rank 1 on host b; host(s) a, b",
                16u64 << 30
            )]
        );
        assert_eq!(
            unchecked(&e, &rows, 4),
            vec!["all_reduce 16G on 8 ranks".to_string()]
        );
        assert!(unchecked(&e, &rows, 8).is_empty());
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let write = |text: &str| {
            let p = dir.path().join("e.json");
            std::fs::write(&p, text).unwrap();
            load(&p)
        };
        assert!(write(EXP).is_ok());
        let both = EXP.replace(r#""min_size":"1M""#, r#""min_size":"1M","size":"2M""#);
        assert!(write(&both).unwrap_err().contains("floors[1]: give one of"));
        let typo = EXP.replace("busbw_gbs\":1.0", "busbw\":1.0");
        assert!(write(&typo).unwrap_err().contains("unknown field"));
        let pattern = EXP.replace("all_to_all", "all_to_none");
        assert!(write(&pattern).unwrap_err().contains("floors[1]"));
        let size = EXP.replace("16G", "lots");
        assert!(write(&size).unwrap_err().contains("floors[0]"));
        assert!(write("{").unwrap_err().contains("e.json:1:"));
    }
}
