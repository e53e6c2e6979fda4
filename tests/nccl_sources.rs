//! The generated source-file table (`src/diagnose/classify/nccl-sources.tsv`, made by
//! `scripts/nccl-source-stages.py` from NVIDIA/nccl): it was read from every release tag from
//! v2.4 on, every WARN-printing file of the committed WARN listings (v2.19.3-1, v2.30.7-1) has a
//! row, and a WARN line no phrase names is placed by its file at the row's stage and subsystem.

use nccl_smoke::diagnose::classify::sources::{SOURCES, TABLE_TSV, lookup};
use nccl_smoke::diagnose::classify::{LineKind, classify_line};
use std::collections::BTreeSet;
use std::path::PathBuf;

fn tags_read() -> Vec<&'static str> {
    TABLE_TSV
        .lines()
        .find_map(|l| l.strip_prefix("# tags read: "))
        .expect("the table names the tags it was generated from")
        .split_whitespace()
        .collect()
}

#[test]
fn the_table_was_read_from_every_release_from_2_4_on() {
    let tags = tags_read();
    for want in [
        "v2.4.2-1",
        "v2.19.3-1",
        "v2.21.5-1",
        "v2.23.4-1",
        "v2.28.9-1",
        "v2.30.7-1",
    ] {
        assert!(tags.contains(&want), "{want} missing from the tags read");
    }
    // In release order, no gaps of a minor version from 2.4 to the newest.
    let minors: BTreeSet<u32> = tags
        .iter()
        .map(|t| {
            t.strip_prefix("v2.")
                .and_then(|r| r.split('.').next()?.parse().ok())
                .unwrap_or_else(|| panic!("tag {t} is not v2.MINOR.PATCH-BUILD"))
        })
        .collect();
    let (lo, hi) = (*minors.first().unwrap(), *minors.last().unwrap());
    assert_eq!(lo, 4);
    assert_eq!(
        minors.len() as u32,
        hi - lo + 1,
        "a minor release is missing: {minors:?}"
    );
}

#[test]
fn every_warn_file_of_the_listed_releases_has_a_stage() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl-warns");
    for tag in ["v2.19.3-1", "v2.30.7-1"] {
        let listing = std::fs::read_to_string(dir.join(format!("{tag}.tsv"))).unwrap();
        let files: BTreeSet<&str> = listing
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .filter_map(|(loc, _)| loc.rsplit_once(':'))
            .map(|(path, _)| path.strip_prefix("src/").unwrap_or(path))
            .collect();
        assert!(files.len() > 30, "{tag}: {}", files.len());
        for f in files {
            assert!(
                SOURCES.iter().any(|r| r.path == f),
                "{tag}: {f} prints a WARN and has no row"
            );
        }
    }
}

/// A WARN with words no signature knows, from each file of the table: placed by the file, at
/// the row's stage, by the row's location signature.
#[test]
fn an_unknown_warn_is_placed_by_its_file() {
    assert!(SOURCES.len() > 100);
    for row in SOURCES.iter() {
        let line = format!(
            "host-a:100:101 [0] {}:77 NCCL WARN zzz something new happened",
            row.path
        );
        let f = classify_line(&line, LineKind::of(&line))
            .unwrap_or_else(|| panic!("{}: no finding", row.path));
        assert_eq!(f.signature, row.subsystem, "{}", row.path);
        assert_eq!(f.stage, row.stage, "{}", row.path);
        assert_eq!(lookup(&format!("{}:77", row.path)), Some(row));
    }
}
