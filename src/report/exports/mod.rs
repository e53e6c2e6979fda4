//! Copies of the results document for machines that read files, not terminals: a CSV table
//! (`--csv`) and a Prometheus textfile (`--prometheus`). Both are views of the one document and
//! are written by its one writer ([`super::writer::Writer`]), atomically, each time it writes
//! the document: after every size and at the end, so a run killed mid-way leaves both files
//! consistent with what was measured.

pub mod csv;
pub mod prometheus;

use super::results::ResultsDoc;
use std::path::{Path, PathBuf};

/// Where the machine-readable copies go (each optional).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Exports {
    /// `--csv FILE`: nccl-tests' columns, one row per rank per size, with rank and host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csv: Option<PathBuf>,
    /// `--prometheus FILE`: node-exporter's textfile-collector format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PathBuf>,
}

impl Exports {
    pub fn is_empty(&self) -> bool {
        self.csv.is_none() && self.prometheus.is_none()
    }

    /// Each file with its flag.
    pub fn files(&self) -> impl Iterator<Item = (&'static str, &Path)> {
        [
            ("--csv", self.csv.as_deref()),
            ("--prometheus", self.prometheus.as_deref()),
        ]
        .into_iter()
        .filter_map(|(flag, p)| p.map(|p| (flag, p)))
    }

    /// Checks, before any rank starts, that every file can be written (as `--json` is checked).
    pub fn check_writable(&self) -> Result<(), String> {
        self.files()
            .try_for_each(|(flag, p)| super::atomic_file::check_target(p, flag))
    }

    /// Writes every copy of `doc`, each atomically; the first failure, naming its file (every
    /// file is still tried: one unwritable folder loses no other copy).
    pub fn write(&self, doc: &ResultsDoc) -> std::io::Result<()> {
        let mut first = None;
        for (flag, path) in self.files() {
            let bytes = match flag {
                "--csv" => csv::render(doc),
                _ => prometheus::render(doc),
            };
            let out = bytes.and_then(|b| super::atomic_file::write_atomic(path, &b));
            if let Err(e) = out
                && first.is_none()
            {
                first = Some(std::io::Error::new(
                    e.kind(),
                    format!("{flag} {}: {e}", path.display()),
                ));
            }
        }
        first.map_or(Ok(()), Err)
    }
}

/// The host of `rank`: from the fingerprint (every rank's device), else the rank table.
fn host_of(doc: &ResultsDoc, rank: u32) -> &str {
    doc.fingerprint
        .ranks
        .iter()
        .find(|r| r.rank == rank)
        .map(|r| r.host.as_str())
        .or_else(|| {
            doc.ranks
                .iter()
                .find(|r| r.rank == rank)
                .map(|r| r.host.as_str())
        })
        .unwrap_or("")
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::bench::SizeResult;
    use crate::report::fingerprint::RankInfo;
    use crate::report::results::ResultsDoc;

    /// A passed document of ranks on `hosts` (rank i on `hosts[i]`).
    pub(crate) fn doc_on(hosts: &[&str]) -> ResultsDoc {
        let mut doc = crate::report::results::tests::sample_doc();
        doc.fingerprint.ranks = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| RankInfo::sample(i as u32, h, "NVIDIA H100"))
            .collect();
        doc
    }

    /// A checked row of `pattern` at `size` bytes of float with each rank's mean time (µs).
    pub(crate) fn row(pattern: &str, size: usize, rank_us: &[f64]) -> SizeResult {
        let mean = rank_us.iter().sum::<f64>() / rank_us.len() as f64;
        let mut r = crate::report::repeats::tests::measured(size, mean, 0);
        r.pattern = pattern.into();
        r.redop = (pattern == "all_reduce").then_some(crate::elements::RedOp::Sum);
        r.rank_avg_us = rank_us.to_vec();
        r
    }
}
