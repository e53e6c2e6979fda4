//! nccl-tests' own failure lines placed by the call they name. `Test NCCL failure common.cu:958
//! '…'` carries the file and line of the CUDACHECK/NCCLCHECK that failed (NVIDIA/nccl-tests
//! src/common.h, `__FILE__`/`__LINE__`); the generated table (`nccl-tests-checks.tsv`, from
//! `scripts/nccl-tests-checks.py`, every commit of nccl-tests that changed `src/`) says which call
//! that line is in each commit and so its stage. A line whose calls differ in stage between
//! commits is not in the table and places nothing.

use crate::stage::Stage;
use std::collections::HashMap;
use std::sync::LazyLock;

/// The generated table, as committed.
pub const TABLE_TSV: &str = include_str!("nccl-tests-checks.tsv");

/// One row: the call(s) found at a file's line by one kind of check, and their stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub stage: Stage,
    /// The calls (comma-separated) at that line over the commits read.
    pub calls: &'static str,
}

/// Which check printed the line: its words, and whether NCCLCHECK quoted ncclGetLastError after
/// a slash (`'unhandled cuda error / '`), which only some commits do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Cuda,
    Nccl,
    NcclLastError,
}

impl Kind {
    fn parse(s: &str) -> Option<Kind> {
        match s {
            "CUDA" => Some(Kind::Cuda),
            "NCCL" => Some(Kind::Nccl),
            "NCCL /" => Some(Kind::NcclLastError),
            _ => None,
        }
    }
}

type Key = (String, u32, Kind);

/// The table's rows by file name, line and check; a row that does not parse is a build defect,
/// caught by the unit test.
static CHECKS: LazyLock<HashMap<Key, Check>> = LazyLock::new(|| {
    super::sources::data_lines(TABLE_TSV)
        .filter_map(|l| {
            let c: Vec<&'static str> = l.split('\t').collect();
            let key = (
                c.first()?.to_string(),
                c.get(1)?.parse().ok()?,
                Kind::parse(c.get(2)?)?,
            );
            let check = Check {
                stage: Stage::parse(c.get(3)?)?,
                calls: c.get(4)?,
            };
            Some((key, check))
        })
        .collect()
});

/// The row for an nccl-tests failure line (`HOST: Test NCCL failure common.cu:958 'internal
/// error / '`, `Test CUDA failure common.cu:732 'invalid device ordinal'`, before 2019 `NCCL
/// failure common.cu:874 '…'`), if the line is one and its check is placed: a `file:line` of
/// the table, which NCCL's own "Cuda failure 'out of memory'" never is.
pub fn placed(line: &str) -> Option<&'static Check> {
    // "Test …" since nccl-tests cbe7f65 (2019-03); plain "NCCL failure %s:%d '%s'" and "Cuda
    // failure %s:%d '%s'" before it (src/common.h, b188a15, 2017-08).
    let (kind, rest) = [
        ("Test CUDA failure ", Kind::Cuda),
        ("Test NCCL failure ", Kind::Nccl),
        ("NCCL failure ", Kind::Nccl),
        ("Cuda failure ", Kind::Cuda),
    ]
    .iter()
    .find_map(|(words, kind)| Some((*kind, line.split_once(words)?.1)))?;
    let (at, quoted) = rest.split_once(' ').unwrap_or((rest, ""));
    let (path, no) = at.rsplit_once(':')?;
    let name = path.rsplit('/').next()?;
    let no: u32 = no.parse().ok()?;
    let kind = if kind == Kind::Nccl && quoted.contains(" / ") {
        Kind::NcclLastError
    } else {
        kind
    };
    CHECKS.get(&(name.to_string(), no, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_parses() {
        let rows = crate::diagnose::classify::sources::data_lines(TABLE_TSV).count();
        assert!(rows > 1000, "{rows}");
        assert_eq!(CHECKS.len(), rows);
    }

    #[test]
    fn the_first_format_is_placed_and_nccls_own_words_are_not() {
        let c = placed("NCCL failure common.cu:874 'unhandled system error'").unwrap();
        assert_eq!(c.stage, Stage::UniqueId);
        assert!(
            placed("h:1:1 [0] include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'").is_none()
        );
        assert!(placed("h:1:1 [0] NCCL WARN Cuda failure 1 'invalid argument'").is_none());
    }

    #[test]
    fn failure_lines_find_their_call() {
        // all_reduce.cu's one NCCLCHECK is the collective in every commit.
        let c =
            placed("node1: Test NCCL failure all_reduce.cu:44 'unhandled cuda error / '").unwrap();
        assert_eq!((c.stage, c.calls), (Stage::Run, "ncclAllReduce"));
        let c = placed("h: Test NCCL failure /src/nccl-tests/src/all_reduce.cu:44 'x'").unwrap();
        assert_eq!(c.stage, Stage::Run);
        // The same file and line through CUDACHECK is another row (or none).
        assert_ne!(
            placed("h: Test CUDA failure all_reduce.cu:44 'x'").map(|c| c.calls),
            Some("ncclAllReduce")
        );
        assert_eq!(placed("h: Test failure common.cu:915"), None);
        assert_eq!(placed("h: Test NCCL failure common.cu:x 'y'"), None);
        assert_eq!(placed("no such line"), None);
    }
}
