//! The public corpus: real NCCL log excerpts from public issue threads
//! (tests/fixtures/real-logs/INDEX.tsv names each one's thread and the cause the thread
//! established). Each excerpt goes through `explain`'s reader and the job verdict; the verdict's
//! category must be the one the thread established (or, where the excerpt holds no line naming
//! it, what the excerpt can establish, as the index says). Healthy logs must never get a
//! failure.

use nccl_smoke::diagnose::classify::Severity;
use nccl_smoke::diagnose::explain::{JobVerdict, explain_reader, job_verdict};
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real-logs")
}

struct Entry {
    file: String,
    expect: String,
    url: String,
    /// A miss the index documents (fifth column, "known miss: why").
    known_miss: bool,
}

fn index() -> Vec<Entry> {
    std::fs::read_to_string(dir().join("INDEX.tsv"))
        .expect("INDEX.tsv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert!(cols.len() >= 4, "INDEX.tsv row needs 4 columns: {l}");
            assert!(cols[2].starts_with("https://github.com/"), "{l}");
            Entry {
                file: cols[0].into(),
                expect: cols[1].into(),
                url: cols[2].into(),
                known_miss: cols.get(4).is_some_and(|c| c.starts_with("known miss:")),
            }
        })
        .collect()
}

/// The verdict in the index's words.
fn verdict_word(v: &JobVerdict) -> String {
    match (&v.root_cause, v.status.as_str()) {
        (Some(r), _) if r.severity == Severity::Hang => "hang".into(),
        (Some(r), _) => r.category.name().into(),
        (None, "hang") => "hang".into(),
        (None, "advice") => {
            let a = v
                .notes
                .iter()
                .find(|n| n.severity == Severity::Advice)
                .unwrap();
            format!("advice:{}", a.category.name())
        }
        _ => "healthy".into(),
    }
}

#[test]
fn the_corpus_is_classified_as_its_threads_established() {
    let entries = index();
    assert!(entries.len() >= 40, "only {} excerpts", entries.len());
    let mut misses = Vec::new();
    let mut false_fail = Vec::new();
    let mut categories = std::collections::BTreeSet::new();
    for e in &entries {
        let text =
            std::fs::read(dir().join(&e.file)).unwrap_or_else(|err| panic!("{}: {err}", e.file));
        let s =
            explain_reader(&e.file, &text[..]).unwrap_or_else(|err| panic!("{}: {err}", e.file));
        assert!(s.lines > 0, "{} is empty", e.file);
        let v = job_verdict(std::slice::from_ref(&s));
        let got = verdict_word(&v);
        categories.insert(e.expect.clone());
        if e.expect == "healthy"
            && (v.root_cause.is_some() || v.status == "hang" || v.status == "fail")
        {
            false_fail.push(format!("{} ({}): {got}", e.file, e.url));
        }
        assert_eq!(
            got != e.expect,
            e.known_miss,
            "{}: the index says known miss = {}, but explain gave {got}",
            e.file,
            e.known_miss
        );
        if got != e.expect {
            misses.push(format!(
                "{} ({}): expected {}, got {got}; evidence: {:?}",
                e.file,
                e.url,
                e.expect,
                v.root_cause.as_ref().map(|r| r.evidence.clone())
            ));
        }
    }
    let hit = entries.len() - misses.len();
    eprintln!(
        "corpus: {} excerpts, {hit} classified as established ({:.1} %), {} categories",
        entries.len(),
        100.0 * hit as f64 / entries.len() as f64,
        categories.len()
    );
    assert!(
        false_fail.is_empty(),
        "healthy logs with a failure:\n{}",
        false_fail.join("\n")
    );
    assert!(
        hit * 100 >= entries.len() * 95,
        "hit rate below 95 %:\n{}",
        misses.join("\n")
    );
    for needed in [
        "buffer-import",
        "cuda",
        "bootstrap",
        "shm",
        "proxy",
        "net-socket",
        "net-ib",
        "oom",
        "remote-error",
        "hang",
        "mpi",
        "init",
        "nvls",
        "nccl-error",
        "healthy",
        "advice:gdr",
    ] {
        assert!(categories.contains(needed), "no excerpt of {needed}");
    }
    // Print the misses even when the rate is met, so they stay visible.
    for m in &misses {
        eprintln!("miss: {m}");
    }
}

#[test]
fn the_issue_examples_are_found() {
    for (file, want) in [
        ("import-horovod-785.log", "buffer-import"),
        ("cuda-cuml-5961.log", "cuda"),
        ("bootstrap-mambatree-14.log", "bootstrap"),
        ("hang-llamafactory-7396.log", "hang"),
    ] {
        let text = std::fs::read(dir().join(file)).unwrap();
        let v = job_verdict(&[explain_reader(file, &text[..]).unwrap()]);
        assert_eq!(verdict_word(&v), want, "{file}: {v:?}");
        assert_ne!(v.exit_code, 0, "{file}");
    }
}

#[test]
fn a_silent_rank_is_named_not_the_waiting_ones() {
    let file = "hang-pytorch-118369.log";
    let text = std::fs::read(dir().join(file)).unwrap();
    let v = job_verdict(&[explain_reader(file, &text[..]).unwrap()]);
    assert_eq!(v.status, "hang");
    let ranks: Vec<Option<u32>> = v.culprits.iter().map(|w| w.rank).collect();
    assert_eq!(ranks, [Some(7)], "{v:?}");
}
