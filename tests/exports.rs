//! `--csv` and `--prometheus` on real processes (mpirun, the simulation): the files agree with
//! the results document, the Prometheus file passes Prometheus' own checker (`promtool check
//! metrics`, which `scripts/setup.sh` installs), a failure is named by stage in both, and an
//! unwritable file is refused before any rank starts.

mod common;
use common::*;
use nccl_smoke::report::results::{self, ResultsDoc};
use nccl_smoke::stage::{Stage, exit};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Prometheus' checker: `PROMTOOL`, else the one setup unpacked, else on PATH.
fn promtool() -> PathBuf {
    if let Some(p) = std::env::var_os("PROMTOOL") {
        return p.into();
    }
    let deps = Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/prometheus/usr/bin/promtool");
    if deps.exists() {
        return deps;
    }
    PathBuf::from("promtool")
}

/// `promtool check metrics` on `file`: its complaints, or why it could not run.
fn promtool_check(file: &Path) -> Result<(), String> {
    let input = std::fs::File::open(file).map_err(|e| e.to_string())?;
    let o = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(input)
        .output()
        .map_err(|e| {
            format!(
                "cannot run {} ({e}): run scripts/setup.sh, or set PROMTOOL",
                promtool().display()
            )
        })?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", text(&o), o.status))
    }
}

/// The value of the one series `series` (name and labels as written) in a Prometheus file.
fn value(prom: &str, series: &str) -> Option<f64> {
    prom.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

struct Files {
    dir: PathBuf,
}

impl Files {
    fn new(name: &str) -> Files {
        Files { dir: scratch(name) }
    }
    fn path(&self, ext: &str) -> String {
        self.dir.join(format!("run.{ext}")).display().to_string()
    }
    fn args(&self) -> Vec<String> {
        ["json", "csv", "prometheus"]
            .iter()
            .flat_map(|f| [format!("--{f}"), self.path(f)])
            .collect()
    }
    fn read(&self, ext: &str) -> String {
        std::fs::read_to_string(self.path(ext)).unwrap_or_default()
    }
    fn doc(&self) -> ResultsDoc {
        results::load(Path::new(&self.path("json"))).unwrap()
    }
}

fn run(np: u32, files: &Files, env: &[(&str, &str)]) -> std::process::Output {
    let args = files.args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    sim_run(np, &args, env)
}

#[test]
fn a_passed_run_writes_csv_and_prometheus_files_that_agree_with_its_results() {
    let f = Files::new("exports-pass");
    let o = run(2, &f, &[]);
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    let doc = f.doc();
    assert!(!doc.results.is_empty(), "{t}");

    // CSV: one row per rank per size, each rank's own time, its host, no wrong element.
    let csv = f.read("csv");
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(
        csv.lines().next(),
        Some("pattern,size,count,type,redop,root,time_us,algbw_gbs,busbw_gbs,wrong,rank,host")
    );
    assert_eq!(rows.len(), doc.results.len() * 2, "{csv}");
    for (i, r) in doc.results.iter().enumerate() {
        for rank in 0..2 {
            let row = &rows[i * 2 + rank];
            assert_eq!(row[0], r.pattern, "{csv}");
            assert_eq!(row[1], r.size_bytes.to_string(), "{csv}");
            let us: f64 = row[6].parse().unwrap();
            // Two decimals: at most half a hundredth off (times ending in 5 at the third
            // decimal, which ns-resolution times often do, sit exactly there; 1e-9 for the
            // float subtraction).
            assert!((us - r.rank_avg_us[rank]).abs() <= 0.005 + 1e-9, "{csv}");
            assert_eq!(row[9], "0", "{csv}");
            assert_eq!(row[10], rank.to_string(), "{csv}");
            assert_eq!(row[11], doc.fingerprint.ranks[rank].host, "{csv}");
        }
    }

    // Prometheus: what promtool accepts, carrying the verdict and every size's figures.
    let prom = f.read("prometheus");
    promtool_check(Path::new(&f.path("prometheus"))).unwrap_or_else(|e| panic!("{e}\n{prom}"));
    assert_eq!(
        value(&prom, r#"nccl_smoke_verdict{status="PASS"}"#),
        Some(1.0),
        "{prom}"
    );
    assert_eq!(value(&prom, "nccl_smoke_exit_code"), Some(0.0), "{prom}");
    assert_eq!(value(&prom, "nccl_smoke_simulated"), Some(1.0), "{prom}");
    for r in &doc.results {
        let series = format!(
            r#"nccl_smoke_bus_bandwidth_bytes_per_second{{pattern="{}",size_bytes="{}",type="{}"}}"#,
            r.pattern,
            r.size_bytes,
            r.dtype.name()
        );
        let v = value(&prom, &series).unwrap_or_else(|| panic!("no {series}:\n{prom}"));
        assert!(
            (v - r.busbw_gbs * 1e9).abs() <= 1e-6 * v.abs().max(1.0),
            "{series}"
        );
    }
    assert!(value(&prom, "nccl_smoke_run_duration_seconds").is_some_and(|s| s > 0.0));
}

#[test]
fn a_failed_run_names_its_stage_and_the_rank_with_wrong_data() {
    // Rank 1 receives one flipped element: the CSV's row of rank 1 counts it, rank 0's none.
    let f = Files::new("exports-flip");
    let o = run(2, &f, &[("NCCL_SMOKE_SIM_FAULT", "verify@1:flip")]);
    let t = text(&o);
    assert_eq!(code(&o), Stage::Verify.exit_code() as i32, "{t}");
    let csv = f.read("csv");
    let wrong: Vec<(String, String)> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r[9] != "0")
        .map(|r| (r[10].to_string(), r[9].to_string()))
        .collect();
    assert!(
        !wrong.is_empty(),
        "no wrong element in the CSV:\n{csv}\n{t}"
    );
    assert!(wrong.iter().all(|(rank, _)| rank == "1"), "{csv}");
    let prom = f.read("prometheus");
    promtool_check(Path::new(&f.path("prometheus"))).unwrap_or_else(|e| panic!("{e}\n{prom}"));
    assert_eq!(
        value(&prom, r#"nccl_smoke_verdict{status="FAIL"}"#),
        Some(1.0),
        "{prom}"
    );
    assert_eq!(
        value(&prom, r#"nccl_smoke_failed_stage{stage="verify"}"#),
        Some(1.0),
        "{prom}"
    );
    assert_eq!(
        value(&prom, "nccl_smoke_exit_code"),
        Some(f64::from(Stage::Verify.exit_code())),
        "{prom}"
    );

    // A failure before anything is measured: the stage is named, the CSV has its header.
    let f = Files::new("exports-init");
    let o = run(2, &f, &[("NCCL_SMOKE_SIM_FAULT", "init@1:error")]);
    assert_eq!(code(&o), Stage::Init.exit_code() as i32, "{}", text(&o));
    let prom = f.read("prometheus");
    assert_eq!(
        value(&prom, r#"nccl_smoke_failed_stage{stage="init"}"#),
        Some(1.0),
        "{prom}"
    );
    assert_eq!(f.read("csv").lines().count(), 1, "{}", f.read("csv"));
}

#[test]
fn an_unwritable_file_is_refused_before_any_rank_starts() {
    let dir = scratch("exports-refused");
    let missing = dir.join("no-such-folder").join("m.prom");
    let o = run1(
        &[
            "run",
            "--backend",
            "sim",
            "--prometheus",
            missing.to_str().unwrap(),
        ],
        &[],
    );
    let t = text(&o);
    assert_eq!(code(&o), exit::USAGE as i32, "{t}");
    assert!(t.contains("--prometheus"), "{t}");
    assert!(!t.contains("# nccl:"), "a rank started:\n{t}");
}
