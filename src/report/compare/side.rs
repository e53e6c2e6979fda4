//! One run as `compare` sees it, whatever file it came from: [`Measured`] rows gathered
//! into a [`Side`], read from a nccl-smoke results file here (nccl-tests logs in
//! `report::nccl_tests`).

use crate::report::results::{ResultsDoc, Status};

/// One pattern and size of one run, its repeats as measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// nccl-smoke's pattern name.
    pub pattern: String,
    pub size_bytes: usize,
    /// Element type and reduction, e.g. `float/sum` (`float/-` when the pattern reduces
    /// nothing): sizes of another type are other rows.
    pub kind: String,
    /// Time per iteration of each repeat, µs.
    pub times_us: Vec<f64>,
    /// Bus bandwidth of each repeat, GB/s.
    pub busbw_gbs: Vec<f64>,
    /// Wrong elements over all repeats.
    pub wrong: u64,
}

/// One run as `compare` sees it, whatever file it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// What kind of file: `nccl-smoke`, `nccl-tests text`, `nccl-tests JSON`.
    pub source: String,
    /// When it ran, when the file says.
    pub started_at: Option<String>,
    pub ranks: usize,
    pub simulated: bool,
    pub fingerprint: Option<crate::report::fingerprint::Fingerprint>,
    /// The NCCL version the file names.
    pub nccl_version: Option<String>,
    /// The run's own failure line, when it failed.
    pub failed: Option<String>,
    pub rows: Vec<Measured>,
    /// The GPU model of each rank, in rank order, where the file names them.
    pub gpus: Vec<String>,
    /// The hosts the ranks ran on, where the file names them.
    pub hosts: Vec<String>,
    /// What reading the file found worth saying: where the program name came from, a log cut
    /// short, rows that could not be read.
    pub notes: Vec<String>,
}

/// Said of a run whose communicator was non-blocking.
pub const NON_BLOCKING_NOTE: &str = "its communicator was non-blocking (NCCL_COMM_BLOCKING=0): \
     every call was waited out of ncclInProgress before the next, a cost nccl-tests' blocking \
     loop does not pay, so its small-size times are not comparable with nccl-tests' or with a \
     blocking run's";

/// The element type and reduction key of a row.
pub fn kind(dtype: &str, redop: Option<&str>) -> String {
    format!("{dtype}/{}", redop.unwrap_or("-"))
}

/// Adds one measurement to `rows`, as a further repeat of a row with the same pattern, size
/// and kind when there is one (a log that holds several runs of one sweep).
pub fn add_measurement(rows: &mut Vec<Measured>, m: Measured) {
    match rows
        .iter_mut()
        .find(|r| r.pattern == m.pattern && r.size_bytes == m.size_bytes && r.kind == m.kind)
    {
        Some(r) => {
            r.times_us.extend(m.times_us);
            r.busbw_gbs.extend(m.busbw_gbs);
            r.wrong += m.wrong;
        }
        None => rows.push(m),
    }
}

impl Side {
    /// A nccl-smoke results file.
    pub fn from_results(doc: &ResultsDoc) -> Side {
        let rows = doc
            .results
            .iter()
            .map(|r| {
                let (times_us, busbw_gbs) = if r.repeats.is_empty() {
                    (vec![r.time_us.avg], vec![r.busbw_gbs])
                } else {
                    (
                        r.repeats.iter().map(|x| x.time_us).collect(),
                        r.repeats.iter().map(|x| x.busbw_gbs).collect(),
                    )
                };
                Measured {
                    pattern: r.pattern.clone(),
                    // The size asked, where the file keeps it: a pattern rounds it by the rank
                    // count (pairwise at 4 ranks: 64 B → 48 B), so runs of different shapes
                    // would otherwise never line up.
                    size_bytes: r.requested_bytes.unwrap_or(r.size_bytes),
                    kind: kind(r.dtype.name(), r.redop.map(|o| o.name())),
                    times_us,
                    busbw_gbs,
                    wrong: r.wrong,
                }
            })
            .collect();
        Side {
            source: "nccl-smoke".into(),
            started_at: Some(doc.started_at.clone()),
            ranks: doc.fingerprint.ranks.len(),
            simulated: doc.simulated,
            fingerprint: Some(doc.fingerprint.clone()),
            nccl_version: doc.fingerprint.nccl.as_ref().map(|n| n.version.clone()),
            failed: (doc.verdict.status == Status::Fail).then(|| doc.verdict.line.clone()),
            rows,
            gpus: doc
                .fingerprint
                .ranks
                .iter()
                .map(|r| r.device.name.clone())
                .collect(),
            hosts: doc.fingerprint.hosts.clone(),
            notes: match doc.config.comm_blocking {
                Some(false) => vec![NON_BLOCKING_NOTE.into()],
                _ => Vec::new(),
            },
        }
    }

    /// The GPU models, counted: `8 × NVIDIA H100 80GB HBM3`, models in first-seen order.
    pub fn gpu_models(&self) -> Option<String> {
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for g in &self.gpus {
            match counts.iter_mut().find(|(m, _)| *m == g.as_str()) {
                Some((_, n)) => *n += 1,
                None => counts.push((g.as_str(), 1)),
            }
        }
        (!counts.is_empty()).then(|| {
            counts
                .iter()
                .map(|(m, n)| format!("{n} × {m}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
    }

    /// The fewest repeats any of its rows has.
    pub fn repeats(&self) -> usize {
        self.rows
            .iter()
            .map(|r| r.times_us.len())
            .min()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_blocking_run_says_its_times_are_not_comparable() {
        let mut doc = crate::report::results::tests::sample_doc();
        assert!(Side::from_results(&doc).notes.is_empty());
        doc.config.comm_blocking = Some(false);
        assert_eq!(Side::from_results(&doc).notes, vec![NON_BLOCKING_NOTE]);
    }

    #[test]
    fn a_results_file_with_repeats_gives_its_repeats() {
        let mut doc = crate::report::results::tests::sample_doc();
        let mut r = crate::report::repeats::tests::measured(1 << 20, 100.0, 0);
        crate::report::repeats::record(&mut doc.results, r.clone(), 2);
        r.time_us.avg = 110.0;
        crate::report::repeats::record(&mut doc.results, r, 2);
        let s = Side::from_results(&doc);
        assert_eq!(s.rows[0].times_us, vec![100.0, 110.0]);
        assert_eq!(s.repeats(), 2);
    }

    /// Rows are keyed by the size asked when the file has it, the size measured otherwise.
    #[test]
    fn rows_match_on_the_size_asked() {
        let mut doc = crate::report::results::tests::sample_doc();
        let mut r = crate::report::repeats::tests::measured(48, 10.0, 0);
        r.requested_bytes = Some(64);
        doc.results = vec![r.clone()];
        assert_eq!(Side::from_results(&doc).rows[0].size_bytes, 64);
        r.requested_bytes = None;
        doc.results = vec![r];
        assert_eq!(Side::from_results(&doc).rows[0].size_bytes, 48);
    }
}
