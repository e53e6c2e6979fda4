//! `compare`: real simulated runs with repeats (a slow link regresses beyond the noise; a run
//! is never a regression of itself), real nccl-tests logs on either side (matched with a
//! nccl-smoke run, malformed and truncated logs refused with file and line), and the plot
//! rendered to PNG.

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// A simulated 2-rank sweep from 256 KiB to 4 MiB with `--repeat 5`.
fn sweep(json: &Path, env: &[(&str, &str)]) {
    let args = [
        "run",
        "--backend",
        "sim",
        "-b",
        "256K",
        "-e",
        "4M",
        "-n",
        "5",
        "-w",
        "1",
        "--repeat",
        "5",
        "--json",
    ];
    let mut all: Vec<&str> = args.to_vec();
    all.push(json.to_str().unwrap());
    let o = mpirun(2, &all, env, 180);
    assert_eq!(code(&o), 0, "{}", text(&o));
}

fn compare(args: &[&str]) -> (i32, String) {
    let mut all = vec!["compare"];
    all.extend_from_slice(args);
    let o = run1(&all, &[]);
    (code(&o), text(&o))
}

fn fixture(name: &str) -> String {
    let p: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests/fixtures/nccl-tests",
        name,
    ]
    .iter()
    .collect();
    p.display().to_string()
}

#[test]
fn a_slow_link_regresses_beyond_the_noise_and_a_run_never_regresses_against_itself() {
    require_sim();
    let dir = scratch("compare");
    let (a, b, svg) = (dir.join("a.json"), dir.join("b.json"), dir.join("c.svg"));
    sweep(&a, &[]);
    sweep(
        &b,
        &[
            ("NCCL_SMOKE_SIM_FAULT", "net:slow=4"),
            ("NCCL_SMOKE_SIM_DRIVER_VERSION", "13000"),
        ],
    );
    let doc = nccl_smoke::report::results::load(&a).unwrap();
    assert!(doc.results.iter().all(|r| r.repeats.len() == 5));
    assert!(doc.results.iter().all(|r| r.spread_pct.is_some()));
    let (a_s, b_s, svg_s) = (
        a.display().to_string(),
        b.display().to_string(),
        svg.display().to_string(),
    );
    let (rc, t) = compare(&[&a_s, &b_s, "--plot", &svg_s]);
    assert_eq!(rc, 30, "{t}");
    assert!(
        t.contains("# changed: driver.version: 12.8 (12080) -> 13.0 (13000)"),
        "{t}"
    );
    assert!(
        t.contains("bus bandwidth down beyond 5% and beyond the noise at"),
        "{t}"
    );
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.contains("<svg") && picture.contains("all_reduce (second run)"));
    assert!(picture.contains("regressed (beyond threshold and noise)"));
    assert!(picture.contains("1 MiB"), "ticks in binary units");
    render_png(&svg);

    let (rc, t) = compare(&[&a_s, &a_s]);
    assert_ne!(rc, 30, "a run regressed against itself:\n{t}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Renders `svg` to PNG with rsvg-convert (Debian's librsvg2-bin, installed by
/// scripts/setup.sh) and checks that the picture is a non-empty PNG of the chart's size.
fn render_png(svg: &Path) {
    let png = svg.with_extension("png");
    let out = std::process::Command::new("rsvg-convert")
        .arg("-o")
        .arg(&png)
        .arg(svg)
        .output()
        .expect("rsvg-convert (librsvg2-bin) is needed: run scripts/setup.sh");
    assert!(out.status.success(), "{out:?}");
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // IHDR: width and height, big-endian, at bytes 16..24.
    let dim = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    assert_eq!((dim(16), dim(20)), (960, 600));
    assert!(bytes.len() > 10_000, "{} bytes", bytes.len());
}

#[test]
fn real_nccl_tests_logs_compare_and_repeated_logs_give_repeats() {
    let (a, b) = (
        fixture("all_reduce_perf.rtx5090-2rank.default.3reps.txt"),
        fixture("all_reduce_perf.rtx5090-2rank.nthreads4.3reps.txt"),
    );
    let (rc, t) = compare(&[&a, &b]);
    assert_eq!(rc, 33, "3 repeats a side cannot give a 95% interval:\n{t}");
    assert!(
        t.contains("(nccl-tests text, 2 rank(s), 3 repeat(s))"),
        "{t}"
    );
    assert!(
        t.contains("too few for a noise band at 95% (4 a side at least)"),
        "{t}"
    );
    let (rc, t) = compare(&[&a, &b, "--confidence", "90"]);
    assert!(
        t.contains("90% interval") && !t.contains("too few for a noise band"),
        "{t}"
    );
    assert!([0, 30, 33].contains(&rc), "{t}");
    // The constructed -J file holds rep 1 of the same log: same figures, other format.
    let (rc, t) = compare(&[
        &fixture("all_reduce_perf.rtx5090-2rank.rep1.CONSTRUCTED.json"),
        &a,
    ]);
    assert!(
        t.contains("(nccl-tests JSON, 2026-03-10 00:00:00, 2 rank(s), 1 repeat(s))"),
        "{t}"
    );
    assert!(
        t.contains("     1048576       0.240       0.240     +0.0%"),
        "{t}"
    );
    assert_eq!(rc, 0, "{t}");
}

#[test]
fn a_nccl_tests_log_matches_a_nccl_smoke_run() {
    require_sim();
    let dir = scratch("compare-mixed");
    let run = dir.join("run.json");
    sweep(&run, &[]);
    let run = run.display().to_string();
    let log = fixture("all_reduce_perf.a100-16rank.txt");
    let (rc, t) = compare(&[&log, &run]);
    assert_eq!(rc, 2, "{t}");
    assert!(
        t.contains("one run is SIMULATED and the other is not"),
        "{t}"
    );
    let (rc, t) = compare(&[&log, &run, "--mixed-backends"]);
    assert!([0, 30, 33].contains(&rc), "{t}");
    assert!(t.contains("# warning: the runs had 16 and 2 ranks"), "{t}");
    // all_reduce rows match by pattern and size; the other patterns are in one run only.
    assert!(t.contains("\n     1048576 "), "{t}");
    assert!(
        t.contains("# only in the second run: all_to_all 262144 B"),
        "{t}"
    );
    assert!(t.contains("# only in the first run: all_reduce 8 B"), "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn malformed_and_truncated_logs_are_refused_with_file_and_line() {
    let dir = scratch("compare-bad");
    let good = std::fs::read_to_string(fixture("all_reduce_perf.a100-16rank.txt")).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let cut: String = good.lines().take(30).map(|l| format!("{l}\n")).collect();
    let cut = write("all_reduce_perf.cut.txt", &cut);
    // A log cut short (a job's time limit): its complete rows are read, and the verdict says
    // where it was cut.
    // (Its 7 rows are all below 1 MiB: nothing judged, which is never a pass.)
    let (rc, t) = compare(&[&cut, &cut]);
    assert_eq!(rc, 35, "{t}");
    assert!(
        t.contains(
            "#   first run: the log is cut short: it ends inside a results table at line 30"
        ),
        "{t}"
    );
    assert!(
        t.lines().any(|l| l.starts_with("NOTHING COMPARED — ")
            && l.ends_with("(the first run's log was cut short at line 30; the second run's log was cut short at line 30)")),
        "{t}"
    );
    let torn = write(
        "all_reduce_perf.torn.txt",
        &good.replace(
            "    85.58   12.25   22.97      0    84.50   12.41   23.27      0",
            "    85.58   12",
        ),
    );
    // A torn row: skipped and named; the rows around it are read.
    let (rc, t) = compare(&[&torn, &torn]);
    assert_eq!(rc, 0, "{t}");
    assert!(
        t.contains("1 row(s) could not be read and were skipped: line 41: row cut short"),
        "{t}"
    );
    // Every row torn: refused, naming the first.
    let shreds: String = good
        .lines()
        .map(|l| {
            if l.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
                format!("{}\n", &l[..l.len().min(40)])
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let shreds = write("all_reduce_perf.shreds.txt", &shreds);
    let (rc, t) = compare(&[&shreds, &shreds]);
    assert_eq!(rc, 34, "{t}");
    assert!(
        t.contains("all_reduce_perf.shreds.txt:") && t.contains(": row cut short"),
        "{t}"
    );
    let json = std::fs::read_to_string(fixture(
        "all_reduce_perf.rtx5090-2rank.rep1.CONSTRUCTED.json",
    ))
    .unwrap();
    let half = write("half.json", &json[..json.len() / 2]);
    let (rc, t) = compare(&[&half, &half]);
    assert_eq!(rc, 34, "{t}");
    assert!(t.contains("half.json:1: the JSON ends early"), "{t}");
    // A log that does not name its program: refused, then read when named.
    let abci = fixture("abci-a100-16rank-sharp.log");
    let (rc, t) = compare(&[&abci, &abci]);
    assert_eq!(rc, 34, "{t}");
    assert!(
        t.contains("abci-a100-16rank-sharp.log:25: this log does not say which"),
        "{t}"
    );
    let (rc, t) = compare(&[&abci, &abci, "--nccl-tests-pattern", "all_reduce_perf"]);
    assert!(
        t.contains("(nccl-tests text, 16 rank(s), 1 repeat(s))"),
        "{t}"
    );
    assert!(t.contains("  2147483648     105.460     105.460"), "{t}");
    assert_eq!(rc, 0, "{t}");
    let (rc, t) = compare(&[&dir.join("missing.txt").display().to_string(), &abci]);
    assert_eq!(rc, 2, "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A real `-J` file (nccl-tests with per-iteration timing, 2 ranks on two T4s, one process):
/// read, compared with itself and with a nccl-smoke run of the same size and type (rows meet on
/// pattern, size and type); cut short, refused.
#[test]
fn a_real_nccl_tests_json_file_compares_with_a_text_log_and_a_run() {
    require_sim();
    let real = fixture("all_reduce_perf.t4-2gpu.real.json");
    let (rc, t) = compare(&[&real, &real]);
    assert_eq!(rc, 0, "{t}");
    assert!(
        t.contains("(nccl-tests JSON, 2026-08-21 03:26:03, 2 rank(s), 1 repeat(s))"),
        "one process driving 2 GPUs is 2 ranks:\n{t}"
    );
    assert!(t.contains("   134217728       5.731       5.731"), "{t}");
    // Against a nccl-smoke run of the same size.
    let dir = scratch("compare-real-json");
    let run = dir.join("run.json");
    let o = mpirun(
        2,
        &[
            "run",
            "--backend",
            "sim",
            "--patterns",
            "all_reduce",
            "-b",
            "128M",
            "-e",
            "128M",
            "-d",
            "half",
            "-n",
            "2",
            "-w",
            "1",
            "--json",
            run.to_str().unwrap(),
        ],
        &[],
        180,
    );
    assert_eq!(code(&o), 0, "{}", text(&o));
    let run = run.display().to_string();
    let (rc, t) = compare(&[&real, &run, "--mixed-backends"]);
    assert!(t.contains("\n   134217728 "), "{t}");
    assert!([0, 30, 33].contains(&rc), "a verdict:\n{t}");
    // Cut short: refused with the file.
    let text = std::fs::read_to_string(&real).unwrap();
    let cut = dir.join("cut.json");
    std::fs::write(&cut, &text[..text.len() - 400]).unwrap();
    let cut = cut.display().to_string();
    let (rc, t) = compare(&[&cut, &real]);
    assert_eq!(rc, 34, "{t}");
    assert!(t.contains("cut.json:1: the JSON ends early"), "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Nothing judged is never a pass: two real nccl-tests outputs with no size and type in common,
/// or whose common sizes are all below `--min-bytes`, end NOTHING COMPARED with exit 35 and say
/// why.
#[test]
fn nothing_in_common_is_never_no_regression() {
    let (a, b) = (
        fixture("all_reduce_perf.rtx5090-2rank.default.3reps.txt"),
        fixture("all_reduce_perf.t4-2gpu.real.json"),
    );
    let (rc, t) = compare(&[&a, &b]);
    assert_eq!(rc, 35, "{t}");
    assert!(
        t.contains(
            "NOTHING COMPARED — the runs have no pattern, size and data type in common: the \
             first holds all_reduce 1048576..134217728 B (8 size(s))"
        ),
        "{t}"
    );
    assert!(!t.contains("NO REGRESSION"), "{t}");
    let c = fixture("all_reduce_perf.rtx5090-2rank.nthreads4.3reps.txt");
    let (rc, t) = compare(&[&a, &c, "--min-bytes", "1G"]);
    assert_eq!(rc, 35, "{t}");
    assert!(
        t.contains("NOTHING COMPARED — the 8 size(s) both runs hold are all below --min-bytes"),
        "{t}"
    );
}
