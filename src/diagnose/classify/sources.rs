//! NCCL's own structure: which source file a WARN line comes from places it in a stage and a
//! subsystem. The table (`nccl-sources.tsv`) lists every file under NVIDIA/nccl's `src/` that
//! calls `WARN(` in any release tag from v2.4 on; `scripts/nccl-source-stages.py` generates it
//! from the source tree, so a new release is one regeneration.

use crate::stage::Stage;
use std::sync::LazyLock;

/// The generated table, as committed.
pub const TABLE_TSV: &str = include_str!("nccl-sources.tsv");

/// One row: a file relative to NCCL's `src/`, its stage, and the location signature that
/// carries its subsystem's cause and hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub path: &'static str,
    pub stage: Stage,
    pub subsystem: &'static str,
    pub first_tag: &'static str,
    pub last_tag: &'static str,
}

/// The data lines of a generated table: neither its `#` header nor blank.
pub(super) fn data_lines(tsv: &'static str) -> impl Iterator<Item = &'static str> {
    tsv.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
}

/// The table's rows; a row that does not parse is a build defect, caught by the unit test.
pub static SOURCES: LazyLock<Vec<SourceFile>> = LazyLock::new(|| {
    data_lines(TABLE_TSV)
        .filter_map(|l| {
            let c: Vec<&'static str> = l.split('\t').collect();
            Some(SourceFile {
                path: c.first()?,
                stage: Stage::parse(c.get(1)?)?,
                subsystem: c.get(2)?,
                first_tag: c.get(3)?,
                last_tag: c.get(4)?,
            })
        })
        .collect()
});

/// The row for the file NCCL printed in a WARN prefix (`transport/p2p.cc:243`, or with the
/// build's directory in front, or only the file's name as some builds print it). An exact path
/// first; then a printed path that ends in a row's path; then a printed file name that ends a
/// row's path (the shortest such path: `p2p.cc` is `transport/p2p.cc`, not
/// `transport/net_ib/p2p.cc`).
pub fn lookup(printed: &str) -> Option<&'static SourceFile> {
    let path = printed.rsplit_once(':').map_or(printed, |(p, _)| p);
    let path = path.trim_start_matches("./");
    let path = path.split_once("/src/").map_or(path, |(_, rest)| rest);
    let rows = &*SOURCES;
    if let Some(r) = rows.iter().find(|r| r.path == path) {
        return Some(r);
    }
    if let Some(r) = rows
        .iter()
        .filter(|r| {
            path.len() > r.path.len()
                && path.ends_with(r.path)
                && path.as_bytes()[path.len() - r.path.len() - 1] == b'/'
        })
        .max_by_key(|r| r.path.len())
    {
        return Some(r);
    }
    // A path in another tree is another program's file, unless that tree is NCCL's own as a
    // build system lays it out (Bazel's `external/nccl_archive/_virtual_includes/include_hdrs/
    // alloc.h` in TensorFlow and XLA builds): then its file name places it.
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    if !dir.is_empty() && !dir.to_ascii_lowercase().contains("nccl") {
        return None;
    }
    rows.iter()
        .filter(|r| r.path.rsplit('/').next() == Some(name))
        .min_by_key(|r| r.path.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_parses() {
        let rows = data_lines(TABLE_TSV).count();
        assert!(rows > 100, "{rows}");
        assert_eq!(SOURCES.len(), rows);
    }

    #[test]
    fn printed_paths_find_their_row() {
        for (printed, want) in [
            ("transport/p2p.cc:243", "transport/p2p.cc"),
            ("/build/nccl/src/transport/shm.cc:114", "transport/shm.cc"),
            ("p2p.cc:10", "transport/p2p.cc"),
            ("shm.cc:114", "transport/shm.cc"),
            ("include/alloc.h:178", "include/alloc.h"),
            (
                "transport/net_ib/connect.cc:99",
                "transport/net_ib/connect.cc",
            ),
            ("graph/xml.cc:431", "graph/xml.cc"),
        ] {
            assert_eq!(lookup(printed).map(|r| r.path), Some(want), "{printed}");
        }
        assert_eq!(lookup("nccl_ofi_rdma.c:123"), None);
        assert_eq!(lookup("vendor/other/p2p.cc:1"), None);
        assert_eq!(
            lookup("bazel-out/k8-opt/bin/external/nccl_archive/_virtual_includes/include_hdrs/alloc.h:40")
                .map(|r| r.path),
            Some("include/alloc.h")
        );
        assert_eq!(lookup("enqueue.cc:1").unwrap().stage, Stage::Run);
        assert_eq!(lookup("bootstrap.cc:1").unwrap().stage, Stage::Init);
    }
}
