//! `--budget`: a sweep that cannot fit drops its largest sizes, names them (on screen and in
//! the results), and still passes on what it measured and checked; one that fits drops
//! nothing; a budget that is no duration is refused.

mod common;
use common::*;
use nccl_smoke::report::results;
use std::path::Path;

/// 2 ranks of the simulation, 8 B to 16 MiB (about 6 s of sweep on one core), with `budget`.
fn run(name: &str, budget: &str) -> (std::process::Output, results::ResultsDoc) {
    let dir = scratch(name);
    let json = dir.join("run.json");
    let o = mpirun(
        2,
        &[
            "run",
            "--backend",
            "sim",
            "-e",
            "16M",
            "--budget",
            budget,
            "--json",
            json.to_str().unwrap(),
        ],
        &[],
        120,
    );
    let doc = results::load(Path::new(&json)).unwrap_or_else(|e| panic!("{e}\n{}", text(&o)));
    (o, doc)
}

#[test]
fn a_sweep_too_long_for_its_budget_drops_its_largest_sizes_and_says_which() {
    let (o, doc) = run("budget-tight", "2s");
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    let budget = doc.budget.as_ref().expect("no budget in the results");
    assert_eq!(budget.seconds, 2.0);
    assert!(
        !budget.dropped.is_empty(),
        "nothing dropped under 2 s:\n{t}"
    );
    for d in &budget.dropped {
        let measured: Vec<usize> = doc
            .results
            .iter()
            .filter(|r| r.pattern == d.pattern)
            .map(|r| r.size_bytes)
            .collect();
        // The rest of the pattern, from the first size that did not fit: none measured, each
        // larger than every size that was.
        assert!(
            d.sizes.windows(2).all(|w| w[0] < w[1]) && *d.sizes.last().unwrap() == 16 << 20,
            "{d:?}"
        );
        assert!(
            measured.iter().all(|m| *m < d.sizes[0]),
            "{}: measured {measured:?}, dropped {:?}",
            d.pattern,
            d.sizes
        );
        assert!(d.expected_s > d.left_s, "{d:?}");
        let said = format!("# --budget: {} ", d.pattern);
        assert!(t.contains(&said), "no '{said}' line:\n{t}");
    }
    let dropped: usize = budget.dropped.iter().map(|d| d.sizes.len()).sum();
    let verdict = &doc.verdict.line;
    assert!(verdict.starts_with("PASS"), "{verdict}");
    assert!(
        verdict.contains(&format!(
            "({dropped} pattern × size(s) left unmeasured to fit --budget 2 s)"
        )),
        "{verdict}"
    );
    // Every size that was measured was checked: the claim is about them alone.
    assert!(doc.results.iter().all(|r| r.checked && r.wrong == 0));
}

#[test]
fn a_sweep_that_fits_drops_nothing() {
    let (o, doc) = run("budget-ample", "10m");
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    let budget = doc.budget.expect("no budget in the results");
    assert!(budget.dropped.is_empty(), "{:?}\n{t}", budget.dropped);
    assert!(!t.contains("# --budget:"), "{t}");
    assert!(
        !doc.verdict.line.contains("unmeasured"),
        "{}",
        doc.verdict.line
    );
}

#[test]
fn a_budget_that_is_no_duration_is_refused() {
    let o = run1(&["run", "--backend", "sim", "--budget", "soon"], &[]);
    let t = text(&o);
    assert_eq!(code(&o), 2, "{t}");
    assert!(
        t.contains("--budget") && t.contains("'soon' is not a duration"),
        "{t}"
    );
}
