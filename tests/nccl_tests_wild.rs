//! `compare`'s reader over nccl-tests outputs collected from public sources
//! (tests/fixtures/nccl-tests-wild, whose INDEX.tsv gives each file's source and a
//! hand-written expectation): each file is read with the program, the data rows, the datatype
//! and the rank count its INDEX row says, or, where the file holds no table, refused with a
//! message that says what is missing.

use nccl_smoke::report::nccl_tests::{pattern_of, read_side};
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl-tests-wild")
}

/// One INDEX row: file, program(s), rank count ('?': the file does not say), datatype, rows.
struct Expect {
    file: String,
    programs: Vec<String>,
    ranks: Option<usize>,
    dtype: String,
    rows: usize,
}

fn index() -> Vec<Expect> {
    let text = std::fs::read_to_string(dir().join("INDEX.tsv")).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let (f, p, r, d, n) = (
        col("file"),
        col("program"),
        col("ranks"),
        col("datatype"),
        col("rows"),
    );
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            Expect {
                file: c[f].to_string(),
                programs: c[p].split(',').map(|s| pattern_of(s.trim())).collect(),
                ranks: c[r].parse().ok(),
                dtype: c[d].to_string(),
                rows: c[n].parse().unwrap(),
            }
        })
        .collect()
}

/// What is wrong with reading `e`'s file, if anything.
fn check(e: &Expect) -> Option<String> {
    let got = read_side(&dir().join(&e.file), None);
    if e.rows == 0 {
        return match got {
            Ok(s) => Some(format!(
                "read {} row(s) from a file with none",
                s.rows.len()
            )),
            Err(err) if err.to_string().len() > e.file.len() + 10 => None,
            Err(err) => Some(format!("refused without saying why: {err}")),
        };
    }
    let s = match got {
        Ok(s) => s,
        Err(err) => return Some(format!("refused: {err}")),
    };
    let mut wrong = Vec::new();
    let rows: usize = s.rows.iter().map(|r| r.times_us.len()).sum();
    if rows != e.rows {
        wrong.push(format!("{rows} rows, {} expected", e.rows));
    }
    let mut patterns: Vec<String> = s.rows.iter().map(|r| r.pattern.clone()).collect();
    patterns.dedup();
    patterns.sort();
    patterns.dedup();
    let mut want = e.programs.clone();
    want.sort();
    if patterns != want {
        wrong.push(format!("programs {patterns:?}, {want:?} expected"));
    }
    if let Some(r) = s
        .rows
        .iter()
        .find(|r| !r.kind.starts_with(&format!("{}/", e.dtype)))
    {
        wrong.push(format!("type {}, {} expected", r.kind, e.dtype));
    }
    if let Some(n) = e.ranks
        && s.ranks != n
    {
        wrong.push(format!("{} ranks, {n} expected", s.ranks));
    }
    (!wrong.is_empty()).then(|| wrong.join("; "))
}

#[test]
fn the_corpus_is_read_as_its_index_says() {
    let all = index();
    assert!(all.len() >= 30, "{} files", all.len());
    let mut misses = Vec::new();
    for e in &all {
        if let Some(w) = check(e) {
            misses.push(format!("{}: {w}", e.file));
        }
    }
    for m in &misses {
        eprintln!("miss: {m}");
    }
    let ok = all.len() - misses.len();
    eprintln!("corpus: {ok} of {} read as INDEX.tsv says", all.len());
    assert!(
        ok * 100 >= all.len() * 95,
        "{ok} of {} read right:\n{}",
        all.len(),
        misses.join("\n")
    );
}

/// Every readable file of the corpus, read once.
fn sides() -> Vec<(String, nccl_smoke::report::compare::Side)> {
    index()
        .into_iter()
        .filter_map(|e| {
            read_side(&dir().join(&e.file), None)
                .ok()
                .map(|s| (e.file, s))
        })
        .collect()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]

    /// Whatever two real logs are compared, at whatever threshold and size floor: a verdict
    /// of no regression (exit 0) has at least one size judged behind it.
    #[test]
    fn no_regression_is_never_a_verdict_on_nothing(
        i in 0usize..1000,
        j in 0usize..1000,
        floor in 0u32..34,
        threshold in 1.0f64..50.0,
    ) {
        use nccl_smoke::report::compare::{Call, Options, Verdict, compare, LEVEL};
        thread_local! {
            static SIDES: Vec<(String, nccl_smoke::report::compare::Side)> = sides();
        }
        SIDES.with(|all| {
            let (a, b) = (&all[i % all.len()], &all[j % all.len()]);
            let opts = Options {
                threshold_pct: threshold,
                min_bytes: 1usize << floor,
                mixed_backends: false,
                level: LEVEL,
            };
            if let Ok(c) = compare(&a.1, &b.1, &opts) {
                let judged = c.rows.iter().filter(|r| r.call != Call::NotJudged).count();
                assert!(
                    c.verdict() != Verdict::NoRegression || judged > 0,
                    "{} vs {}: no regression on nothing",
                    a.0,
                    b.0
                );
                if judged == 0 {
                    assert!(
                        matches!(c.verdict(), Verdict::NothingCompared | Verdict::Regressed),
                        "{} vs {}: {:?} with nothing judged",
                        a.0,
                        b.0,
                        c.verdict()
                    );
                }
            }
        });
    }
}

/// Two real logs of different jobs: every difference the logs hold is reported before the
/// rows (NCCL version, GPU models, host and rank counts).
#[test]
fn environment_differences_are_read_from_real_logs() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_nccl-smoke"))
        .arg("compare")
        .arg(dir().join("all_reduce_perf-nersc-shifter-8rank.log"))
        .arg(dir().join("all_reduce_perf-nccl-tests-issue-309-4node.log"))
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    for want in [
        "# changed: nccl.version: 2.21.5 -> 2.26.2",
        "# changed: gpus: 8 × NVIDIA A100-SXM4-40GB -> 32 × NVIDIA H100 80GB HBM3",
        "# changed: hosts: 2 -> 4",
        "# warning: the runs had 8 and 32 ranks",
        "# warning: the runs had different GPUs (8 × NVIDIA A100-SXM4-40GB against 32 × NVIDIA H100 80GB HBM3)",
    ] {
        assert!(t.contains(want), "no '{want}' in:\n{t}");
    }
}

/// `explain` on every real nccl-tests output of the corpus: the healthy runs are PASS (their
/// `Out of bounds values : 0 OK` footer) with no error line left unexplained (newer releases
/// name a column `error`; Open MPI's vader fallback and libfabric's probe of other vendors'
/// device memory are notes), and the others get what their output shows.
#[test]
fn explain_passes_the_healthy_runs_and_names_the_others() {
    use nccl_smoke::diagnose::explain::{explain_reader, job_verdict};
    let special = [
        // 12 wrong values at some size; srun reports the tasks that exited after it.
        ("all_reduce_perf-cscs-alps-2048rank.log", "fail wrong-data"),
        // The run failed with an NCCL error before its table.
        ("all_reduce_perf-alcf-sophia-failed.log", "fail nccl-error"),
        // GPUDirect RDMA off: advice, not a failure.
        ("reduce_scatter_perf-thomaslie210-gdr-off.log", "advice gdr"),
        // Ends at its last row with no footer and no maxBytes to say the sweep was done.
        ("all_reduce_perf-azureml-gpu-perf-v100.log", "hang -"),
        // Tables under srun's `0:` tag with no header line: nothing to judge.
        ("all_reduce_perf-awsome-dt-p4de.log", "nothing"),
        ("all_reduce_perf-awsome-dt-p5.log", "nothing"),
    ];
    let mut files: Vec<_> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "{}", files.len());
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let s = explain_reader(&name, &std::fs::read(&path).unwrap()[..]).unwrap();
        let got = if s.nothing_to_judge().is_some() {
            "nothing".to_string()
        } else {
            let v = job_verdict(std::slice::from_ref(&s));
            let cat = match (&v.root_cause, v.status.as_str()) {
                (Some(r), _) => r.category.name().to_string(),
                (None, "advice") => v
                    .notes
                    .iter()
                    .find(|n| n.severity.name() == "advice")
                    .map_or("-".into(), |n| n.category.name().to_string()),
                _ => "-".into(),
            };
            if v.status == "pass" {
                assert_eq!(s.unexplained_total, 0, "{name}: {:?}", s.unexplained);
                "pass".into()
            } else {
                format!("{} {cat}", v.status)
            }
        };
        let want = special
            .iter()
            .find(|(f, _)| *f == name)
            .map_or("pass", |(_, w)| *w);
        assert_eq!(got, want, "{name}");
    }
}

/// nccl-smoke's counts, size column and busbw factor for all_gather, reduce_scatter,
/// broadcast and reduce, held to real nccl-tests logs of those programs (2 to 1,024 ranks): for
/// every float row, busbw = algbw × the pattern's factor for the log's rank count, within the
/// logs' two printed decimals; and where the log names nccl-tests 2.14 or later (the rounding
/// of all-gather's and reduce-scatter's per-rank count to 16 bytes came with 2.14.0:
/// `(count/nranks) & -(16/eltSize)`, `src/all_gather.cu`), the pattern's layout of the row's
/// size gives the log's size and count columns.
#[test]
fn counts_and_busbw_factors_of_the_other_collectives_match_real_logs() {
    use nccl_smoke::patterns::select;
    let text = std::fs::read_to_string(dir().join("INDEX.tsv")).unwrap();
    let head: Vec<&str> = text.lines().next().unwrap().split('\t').collect();
    let col = head
        .iter()
        .position(|h| *h == "nccl_tests_version")
        .unwrap();
    let rounding = |file: &str| {
        text.lines()
            .map(|l| l.split('\t').collect::<Vec<_>>())
            .find(|c| c[0] == file)
            .and_then(|c| {
                let mut v = c[col].split('.').map(|x| x.parse::<u32>().ok());
                Some((v.next()??, v.next()??))
            })
            .is_some_and(|v| v >= (2, 14))
    };
    let (mut checked, mut counted) = (0, 0);
    for e in index() {
        let [program] = e.programs.as_slice() else {
            continue;
        };
        let (Some(n), true) = (e.ranks, e.dtype == "float") else {
            continue;
        };
        let Ok(p) = select(std::slice::from_ref(program)).map(|ps| ps[0]) else {
            continue;
        };
        if matches!(p.name(), "all_reduce" | "all_to_all" | "send_recv_ring") {
            continue;
        }
        let text = std::fs::read_to_string(dir().join(&e.file)).unwrap();
        for line in text.lines() {
            let t: Vec<&str> = line.split_whitespace().collect();
            let (Some(size), Some(count), Some(&"float")) = (
                t.first().and_then(|s| s.parse::<usize>().ok()),
                t.get(1).and_then(|s| s.parse::<usize>().ok()),
                t.get(2),
            ) else {
                continue;
            };
            // The row ends with the out-of-place and the in-place groups, four columns each
            // (time, algbw, busbw, #wrong or error), whatever precedes them.
            let num = |back: usize| {
                t.len()
                    .checked_sub(back)
                    .and_then(|k| t.get(k))
                    .and_then(|s| s.parse::<f64>().ok())
            };
            let (Some(algbw), Some(busbw)) = (num(7), num(6)) else {
                continue;
            };
            let l = p.layout(size, 4, n as u32);
            let what = format!("{} ({n} ranks): {line}", e.file);
            if rounding(&e.file) {
                assert_eq!(
                    l.size_column(nccl_smoke::elements::DataType::Float),
                    size,
                    "{what}"
                );
                assert_eq!(p.count_column(&l), count, "{what}");
                counted += 1;
            }
            let want = algbw * p.busbw_factor(n as u32);
            assert!(
                (busbw - want).abs() <= 0.011 + 0.002 * busbw,
                "{what}: busbw {busbw}, algbw × factor {want}"
            );
            checked += 1;
        }
    }
    assert!(
        checked > 1000 && counted > 1000,
        "{checked} rows, {counted} counted"
    );
    eprintln!("{checked} rows of real nccl-tests logs checked, {counted} of them for counts");
}
