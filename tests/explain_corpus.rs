//! `explain` measured on real logs it was not written against: the corpus of
//! tests/fixtures/explain-corpus (one log per public thread, split by thread into a development
//! and a held-out half before any rule was written; scripts/explain-corpus.py) and the logs of
//! tests/fixtures/real-logs (development).
//!
//! The README's table is this test's measurement: the test recomputes it and fails when the
//! README says something else, so a rule that loses a held-out log shows in the diff. No log
//! whose thread established a failure may get PASS.

use nccl_smoke::diagnose::classify::Severity;
use nccl_smoke::diagnose::explain::{JobVerdict, explain_reader, job_verdict};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

struct Row {
    path: PathBuf,
    split: String,
    expect: String,
    stage: String,
    family: String,
    /// The first and the second (blind) reading named this category.
    agreed: bool,
}

/// The family name of the rows whose two readings agree (scripts/explain-corpus.py's AGREE).
const AGREE: &str = "readings agree";

/// SECOND-READING.tsv: file → (first category, second category, decision).
fn second_reading() -> BTreeMap<String, (String, String, String)> {
    let text =
        std::fs::read_to_string(fixtures().join("explain-corpus/SECOND-READING.tsv")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            assert!(c.len() >= 5, "SECOND-READING.tsv row needs 5 columns: {l}");
            (
                c[0].to_string(),
                (c[1].to_string(), c[2].to_string(), c[4].to_string()),
            )
        })
        .collect()
}

fn rows() -> Vec<Row> {
    let mut out = Vec::new();
    let real = std::fs::read_to_string(fixtures().join("real-logs/INDEX.tsv")).unwrap();
    for l in real
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let c: Vec<&str> = l.split('\t').collect();
        out.push(Row {
            path: fixtures().join("real-logs").join(c[0]),
            split: "dev".into(),
            expect: c[1].strip_prefix("advice:").unwrap_or(c[1]).into(),
            stage: String::new(),
            family: "known".into(),
            agreed: false,
        });
    }
    let idx = std::fs::read_to_string(fixtures().join("explain-corpus/INDEX.tsv")).unwrap();
    let second = second_reading();
    for l in idx
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let c: Vec<&str> = l.split('\t').collect();
        assert!(c.len() >= 8, "INDEX.tsv row needs 8 columns: {l}");
        assert!(
            matches!(c[1], "dev" | "held-out"),
            "{}: split {}",
            c[0],
            c[1]
        );
        out.push(Row {
            path: fixtures().join("explain-corpus/logs").join(c[0]),
            split: c[1].into(),
            expect: c[2].into(),
            stage: c[3].into(),
            family: c[5].into(),
            agreed: second.get(c[0]).is_some_and(|(_, _, d)| d == "agree"),
        });
    }
    out
}

/// The category the verdict names (the advice's for a slow run, `hang` for a hang).
fn category(v: &JobVerdict) -> Option<String> {
    if v.status == "hang" {
        return Some("hang".into());
    }
    if v.status == "advice" {
        return v
            .notes
            .iter()
            .find(|n| n.severity == Severity::Advice)
            .map(|n| n.category.name().to_string());
    }
    v.root_cause.as_ref().map(|r| r.category.name().to_string())
}

fn right(row: &Row, v: &JobVerdict) -> bool {
    let failed = matches!(
        v.status.as_str(),
        "fail" | "hang" | "consequences-only" | "unknown"
    );
    match row.expect.as_str() {
        "healthy" => !failed,
        "hang" => v.status == "hang" || category(v).as_deref() == Some("hang"),
        want => category(v).as_deref() == Some(want),
    }
}

fn verdict(path: &Path) -> JobVerdict {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let s = explain_reader(&path.display().to_string(), &bytes[..])
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    job_verdict(std::slice::from_ref(&s))
}

/// The table scripts/explain-corpus.py prints with `--markdown`.
fn table() -> (String, Vec<String>) {
    // (split, family) -> [right, logs, stage right, stage labelled]
    let mut by: BTreeMap<(String, String), [u32; 4]> = BTreeMap::new();
    let mut passed_failures = Vec::new();
    for row in rows() {
        let v = verdict(&row.path);
        let ok = right(&row, &v);
        let mut keys = vec![
            (row.split.clone(), "all".to_string()),
            (row.split.clone(), row.family.clone()),
        ];
        if row.agreed {
            keys.push((row.split.clone(), AGREE.to_string()));
        }
        for key in keys {
            let e = by.entry(key).or_default();
            e[0] += ok as u32;
            e[1] += 1;
            if !row.stage.is_empty() && row.expect != "healthy" {
                e[3] += 1;
                e[2] += (v.stage.as_deref() == Some(row.stage.as_str())) as u32;
            }
        }
        if row.expect != "healthy" && (v.status == "pass" || v.exit_code == 0) {
            passed_failures.push(row.path.display().to_string());
        }
    }
    let mut keys: Vec<_> = by.keys().cloned().collect();
    keys.sort_by_key(|(split, fam)| (split != "held-out", fam != "all", fam != AGREE, fam.clone()));
    let mut out = String::from(
        "| half | family | logs | category right | stage right (of labelled) |\n|---|---|---|---|---|\n",
    );
    for k in keys {
        let [ok, n, sok, sn] = by[&k];
        let stage = if sn > 0 {
            format!("{sok}/{sn}")
        } else {
            "-".into()
        };
        let pct = 100.0 * ok as f64 / n as f64;
        out.push_str(&format!(
            "| {} | {} | {n} | {ok} ({pct:.0} %) | {stage} |\n",
            k.0, k.1
        ));
    }
    (out, passed_failures)
}

#[test]
fn no_failed_run_is_a_pass_and_the_readme_table_is_measured() {
    let rows = rows();
    let held = rows.iter().filter(|r| r.split == "held-out").count();
    assert!(rows.len() >= 100, "{} logs", rows.len());
    assert!(
        held * 2 >= rows.len() - 10,
        "held-out {held} of {}",
        rows.len()
    );
    let (table, passed) = table();
    assert!(
        passed.is_empty(),
        "PASS (exit 0) for failed runs: {passed:?}"
    );
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap();
    let block = readme
        .split("<!-- explain-corpus -->\n")
        .nth(1)
        .and_then(|b| b.split("<!-- /explain-corpus -->").next())
        .expect("README has the explain-corpus table between its markers");
    assert_eq!(
        block, table,
        "the README's table is not what explain measures now: run scripts/explain-corpus.py eval --markdown"
    );
}

/// Every corpus log was read twice; INDEX.tsv holds the label the readings settled on: both
/// readings' when they agree, the one the third reading chose otherwise.
#[test]
fn every_label_is_the_one_the_readings_settled_on() {
    let idx = std::fs::read_to_string(fixtures().join("explain-corpus/INDEX.tsv")).unwrap();
    let second = second_reading();
    let mut n = 0;
    for l in idx
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let c: Vec<&str> = l.split('\t').collect();
        let (first, other, decision) = second
            .get(c[0])
            .unwrap_or_else(|| panic!("{}: no second reading", c[0]));
        let want = match decision.as_str() {
            "agree" => {
                assert_eq!(first, other, "{}", c[0]);
                first
            }
            "first" | "both" => first,
            "second" => other,
            d => panic!("{}: decision {d}", c[0]),
        };
        assert_eq!(c[2], want, "{}: label vs the readings", c[0]);
        n += 1;
    }
    assert_eq!(
        n,
        second.len(),
        "SECOND-READING.tsv has rows INDEX.tsv has not"
    );
}

/// The split is the thread's alone: a thread's SHA-256 below 0xC0 in its first byte is held
/// out. Recomputed here so that no log moves between halves by hand.
#[test]
fn the_split_is_by_thread() {
    let idx = std::fs::read_to_string(fixtures().join("explain-corpus/INDEX.tsv")).unwrap();
    for l in idx
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let c: Vec<&str> = l.split('\t').collect();
        let first = sha256_first_byte(c[4].as_bytes());
        let want = if first < 0xC0 { "held-out" } else { "dev" };
        assert_eq!(c[1], want, "{}: {}", c[0], c[4]);
    }
}

fn sha256_first_byte(msg: &[u8]) -> u8 {
    use sha2::Digest;
    sha2::Sha256::digest(msg)[0]
}
