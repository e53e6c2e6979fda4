//! The results file: one versioned JSON document, rewritten after every measured size so a
//! crash or a kill leaves everything that completed. `compare` reads it back.

use super::fingerprint::Fingerprint;
use crate::bench::SizeResult;
use crate::error::Failure;
use crate::stage::{Stage, exit};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::SystemTime;

/// Schema identifier; bumped when a field changes meaning.
pub const SCHEMA: &str = "nccl-smoke/results/v1";

/// Schema identifier of the report `doctor --json` prints, whose `fingerprint` is a run's.
pub const DOCTOR_SCHEMA: &str = "nccl-smoke/doctor/v1";

pub use super::verdict::{Blame, RankState, Status, Verdict, blame, job_verdict};
pub use crate::error::{ENDED_BY_RANK0, STOPPED, WAITED_MARK};

/// Sweep settings, as given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub patterns: Vec<String>,
    pub minbytes: usize,
    pub maxbytes: usize,
    /// `-f`, when sizes grow by a factor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stepfactor: Option<f64>,
    /// `-i`, when sizes grow by a fixed step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stepbytes: Option<usize>,
    pub iters: u32,
    pub warmup_iters: u32,
    pub check: bool,
    /// `--data-on`: where data was filled and checked (absent in results from before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_on: Option<crate::bench::DataOn>,
    /// Whether the communicator was blocking, as nccl-tests makes it (`false` with
    /// `NCCL_COMM_BLOCKING=0`: its times include waiting out `ncclInProgress`); absent when the
    /// run ended before NCCL was loaded, or in results from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_blocking: Option<bool>,
    pub datatype: String,
    pub op: String,
}

pub use crate::stage::StageRecord;

/// One rank's state and walk through the stages, as rank 0 learned it over the status line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankRecord {
    pub rank: u32,
    pub host: String,
    /// `finished` (exit 0), `failed` (named by the verdict), `consequence` (failed only because
    /// the verdict's ranks did: a peer vanished, a wait ran out), `stopped` (by the launcher,
    /// after another rank failed), `cancelled` (rank 0 of a cancelled job), `running` (still
    /// going when rank 0 wrote this), `lost` (connection dropped without an end report: the
    /// supervisor or its host died), `unresponsive` (its supervisor stopped answering) or
    /// `silent` (never reported).
    pub state: RankState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<u8>,
    /// The last stage it was known to be in, and the step within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// Its stages with their durations, when it reported its end.
    #[serde(default)]
    pub stages: Vec<StageRecord>,
}

/// The whole results document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultsDoc {
    /// Always [`SCHEMA`].
    pub schema: String,
    pub tool_version: String,
    /// RFC 3339, UTC.
    pub started_at: String,
    /// Tells this run's file from an earlier run's at the same path (host, pid, start time).
    #[serde(default)]
    pub run_id: String,
    /// "nccl" for a real run, "SIMULATED" for the simulation backend, "REAL NCCL `<version>` ·
    /// SIMULATED GPUS" for the real libnccl on nccl-smoke's stand-in driver.
    pub backend: String,
    /// True when any library that ran is nccl-smoke's simulation: numbers are CPU numbers.
    pub simulated: bool,
    /// Which libraries were nccl-smoke's stand-ins (`libnccl`, `libcuda`, `libnvidia-ml`,
    /// `gpus`); empty for a real run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub simulated_parts: Vec<String>,
    /// `--backend control-plane`: the transports NCCL chose, from its own INFO lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<crate::report::control_plane::ControlPlane>,
    /// The command line of rank 0.
    pub command: Vec<String>,
    pub config: RunConfig,
    pub fingerprint: Fingerprint,
    /// Rank 0's walk through the stages.
    pub stages: Vec<StageRecord>,
    /// Every rank's state and stages (written by rank 0's supervisor as ranks report).
    #[serde(default)]
    pub ranks: Vec<RankRecord>,
    /// One entry per measured size, in the order measured.
    pub results: Vec<SizeResult>,
    /// Failures known to rank 0.
    pub failures: Vec<Failure>,
    /// Findings that did not fail the run but explain a slow one (e.g. GPUDirect RDMA off).
    #[serde(default)]
    pub warnings: Vec<Failure>,
    pub verdict: Verdict,
    /// `nccl-smoke isolate`: every round's groups and the verdict per host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolate: Option<crate::report::isolate::IsolateReport>,
    /// Where a rank that failed on its own keeps NCCL's logs (when NCCL_DEBUG made any):
    /// `DIR/nccl-smoke.JOB.rank<RANK>.<HOST>.log` (absent in results from before it). Per run,
    /// not a setting: not in `config`, which two runs of one sweep share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_logs: Option<String>,
    /// `--budget`: the seconds given, and the sizes left unmeasured to fit them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetReport>,
    /// `--repeat N` / `--duration`: wrong elements and slow samples per rank, GPU and host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burn_in: Option<super::burn_in::BurnIn>,
}

/// What `--budget` did to the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetReport {
    pub seconds: f64,
    /// Per pattern (and pass), the sizes dropped: each the rest of its pattern.
    pub dropped: Vec<Dropped>,
}

/// The sizes of one pattern `--budget` dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dropped {
    pub pattern: String,
    /// Bytes, as the size column would have said them.
    pub sizes: Vec<usize>,
    /// Rank 0's estimate of the first one's time, and what was left of the pattern's share.
    pub expected_s: f64,
    pub left_s: f64,
}

impl ResultsDoc {
    /// A results document with nothing measured and no verdict yet: rank 0's, as its worker opens
    /// it once the launch stage is done, or as its supervisor writes it when the job ended before.
    pub fn fresh(
        config: &RunConfig,
        host: &str,
        backing: &super::backing::Backing,
        fingerprint: Fingerprint,
    ) -> ResultsDoc {
        let now = SystemTime::now();
        ResultsDoc {
            schema: SCHEMA.into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            started_at: humantime::format_rfc3339_seconds(now).to_string(),
            run_id: format!(
                "{host}-{}-{}",
                std::process::id(),
                now.duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or_default()
            ),
            backend: backing.backend(),
            simulated: backing.simulated(),
            simulated_parts: backing.parts(),
            control_plane: None,
            command: std::env::args().collect(),
            config: config.clone(),
            fingerprint,
            stages: Vec::new(),
            ranks: Vec::new(),
            results: Vec::new(),
            failures: Vec::new(),
            warnings: Vec::new(),
            verdict: Verdict {
                status: Status::Incomplete,
                line: "INCOMPLETE: the run has not finished".into(),
                exit_code: exit::INTERNAL,
                stage: None,
                consequences: Vec::new(),
                ranks: Vec::new(),
            },
            isolate: None,
            nccl_logs: None,
            budget: None,
            burn_in: None,
        }
    }
}

/// A status as the results file spells it (`PASS`, `CONTROL_PLANE_OK`, ...).
pub fn status_name(s: Status) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Why a results file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read results file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not an nccl-smoke results file: {detail}")]
    Format { path: String, detail: String },
}

/// Reads a results file, checking its schema.
pub fn load(path: &Path) -> Result<ResultsDoc, ReadError> {
    let value = read_json(path, &[SCHEMA])?;
    serde_json::from_value(value).map_err(|e| format_error(path, e.to_string()))
}

fn format_error(path: &Path, detail: String) -> ReadError {
    ReadError::Format {
        path: path.display().to_string(),
        detail,
    }
}

/// Reads `path` as a JSON document whose `schema` is one of `schemas`.
fn read_json(path: &Path, schemas: &[&str]) -> Result<serde_json::Value, ReadError> {
    let text = read_bounded(path).map_err(|source| ReadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let value: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| format_error(path, e.to_string()))?;
    match value.get("schema").and_then(|s| s.as_str()) {
        Some(s) if schemas.contains(&s) => Ok(value),
        Some(other) => {
            let known: Vec<String> = schemas.iter().map(|s| format!("'{s}'")).collect();
            Err(format_error(
                path,
                format!(
                    "schema '{other}', this nccl-smoke reads {}",
                    known.join(" and ")
                ),
            ))
        }
        None => Err(format_error(path, "no \"schema\" field".into())),
    }
}

/// Checks that `path` can be written, before any rank touches a GPU: a new path or a regular
/// file, in a folder where nccl-smoke can create one.
pub fn check_writable(path: &Path) -> Result<(), String> {
    super::atomic_file::check_target(path, "--json")
}

pub use super::atomic_file::{MAX_READ, READ_TIME, read_bounded};

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A document on disk, as the writer leaves it.
    fn put(path: &Path, doc: &ResultsDoc) {
        std::fs::write(path, serde_json::to_vec_pretty(doc).unwrap()).unwrap();
    }
    use proptest::prelude::*;

    /// A wrong element that is NaN (the value a collective that never ran leaves in a float
    /// buffer), next to ±inf and −0: the file written and read back is the same document, bit
    /// for bit (serde_json alone would write NaN as `null` and fail to read it back).
    #[test]
    fn a_results_file_with_nan_and_infinities_round_trips_exactly() {
        let row: crate::bench::SizeResult = serde_json::from_value(serde_json::json!({
            "pattern": "all_reduce", "size_bytes": 8, "count": 2, "dtype": "float",
            "time_us": {"avg": 0.0, "p50": 0.0, "p99": 0.0, "max": 0.0},
            "algbw_gbs": 0.0, "busbw_gbs": -0.0, "wrong": 4, "checked": true,
            "slowest_rank": 0, "rank_avg_us": [0.0, 0.0], "checked_elements": 4,
            "first_wrong": [1, {"index": 0, "expected": "-inf", "got": "NaN", "got_hex": "ffffffff"}]
        }))
        .unwrap();
        let mut doc = sample_doc();
        doc.results.push(row);
        let path = tmp("nan.json");
        put(&path, &doc);
        let text = std::fs::read_to_string(&path).unwrap();
        let back = load(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let w = &back.results[0].first_wrong.as_ref().unwrap().1;
        assert!(w.got.is_nan() && w.expected == f64::NEG_INFINITY, "{text}");
        assert!(back.results[0].busbw_gbs.is_sign_negative());
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&doc).unwrap()
        );
    }

    pub(crate) fn sample_doc() -> ResultsDoc {
        ResultsDoc {
            schema: SCHEMA.into(),
            tool_version: "0.1.0".into(),
            started_at: "2026-11-22T00:00:00Z".into(),
            run_id: "h-1-0".into(),
            backend: "SIMULATED".into(),
            simulated: true,
            simulated_parts: vec!["libnccl".into(), "libcuda".into()],
            control_plane: None,
            command: vec!["nccl-smoke".into(), "run".into()],
            config: RunConfig {
                patterns: vec!["all_reduce".into()],
                minbytes: 8,
                maxbytes: 1024,
                stepfactor: Some(2.0),
                stepbytes: None,
                iters: 5,
                warmup_iters: 1,
                check: true,
                data_on: Some(crate::bench::DataOn::Device),
                comm_blocking: Some(true),
                datatype: "float".into(),
                op: "sum".into(),
            },
            fingerprint: Default::default(),
            stages: vec![],
            ranks: vec![],
            results: vec![],
            failures: vec![],
            warnings: vec![],
            verdict: Verdict {
                status: Status::Pass,
                line: "PASS".into(),
                exit_code: 0,
                stage: None,
                consequences: vec![],
                ranks: vec![],
            },
            isolate: None,
            nccl_logs: None,
            budget: None,
            burn_in: None,
        }
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("results-test.{}.{name}", std::process::id()))
    }

    #[test]
    fn documents_round_trip() {
        let p = tmp("rt.json");
        put(&p, &sample_doc());
        assert_eq!(load(&p).unwrap(), sample_doc());
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn wrong_schema_and_garbage_are_named() {
        let p = tmp("bad.json");
        std::fs::write(&p, r#"{"schema":"other/v9"}"#).unwrap();
        assert!(
            load(&p)
                .unwrap_err()
                .to_string()
                .contains("schema 'other/v9'")
        );
        std::fs::write(&p, "not json").unwrap();
        assert!(
            load(&p)
                .unwrap_err()
                .to_string()
                .contains("is not an nccl-smoke results file")
        );
        let _ = std::fs::remove_file(&p);
        assert!(
            load(&p)
                .unwrap_err()
                .to_string()
                .contains("cannot read results file")
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_bytes_give_a_result_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), cut in 0usize..4096) {
            let p = tmp(&format!("fuzz.{cut}.json"));
            std::fs::write(&p, &bytes).unwrap();
            let _ = load(&p);
            // A valid document cut short anywhere must be an error, not a panic.
            let good = serde_json::to_vec(&sample_doc()).unwrap();
            std::fs::write(&p, &good[..cut.min(good.len())]).unwrap();
            let r = load(&p);
            prop_assert!(cut >= good.len() || r.is_err());
            let _ = std::fs::remove_file(&p);
        }
    }
}

/// Reads the environment fingerprint of a run's results file (schema [`SCHEMA`]) or of a
/// doctor report (`doctor --json`, schema [`DOCTOR_SCHEMA`]), so that two
/// of either kind can be compared with [`super::fingerprint::diff`].
pub fn load_fingerprint(path: &Path) -> Result<Fingerprint, ReadError> {
    let mut value = read_json(path, &[SCHEMA, DOCTOR_SCHEMA])?;
    let fp = value
        .get_mut("fingerprint")
        .map(serde_json::Value::take)
        .ok_or_else(|| format_error(path, "no \"fingerprint\" field".into()))?;
    serde_json::from_value(fp).map_err(|e| format_error(path, format!("fingerprint: {e}")))
}

#[cfg(test)]
mod load_fingerprint_tests {
    use super::*;
    use crate::report::fingerprint::{DriverInfo, diff};

    fn write(name: &str, text: &str) -> tempfile::TempPath {
        let f = tempfile::Builder::new()
            .prefix(name)
            .tempfile()
            .unwrap()
            .into_temp_path();
        std::fs::write(&f, text).unwrap();
        f
    }

    fn with_driver(code: i32) -> Fingerprint {
        Fingerprint {
            hosts: vec!["n1".into()],
            driver: Some(DriverInfo {
                cuda_version: crate::ffi::cuda::version_string(code),
                version_code: code,
                path: "/usr/lib/libcuda.so.1".into(),
                simulated: None,
            }),
            ..Fingerprint::default()
        }
    }

    fn doc(schema: &str, fp: &Fingerprint) -> String {
        serde_json::json!({"schema": schema, "status": "ok", "fingerprint": fp}).to_string()
    }

    #[test]
    fn results_and_doctor_files_both_give_their_fingerprint() {
        let run = write("run.", &doc(SCHEMA, &with_driver(12080)));
        let node = write("doctor.", &doc("nccl-smoke/doctor/v1", &with_driver(12090)));
        let before = load_fingerprint(&run).unwrap();
        let after = load_fingerprint(&node).unwrap();
        assert_eq!(before, with_driver(12080));
        let changes = diff(&before, &after);
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert_eq!(changes[0].field, "driver.version");
    }

    #[test]
    fn other_files_are_named_not_read() {
        let cases = [
            (
                r#"{"schema":"other/v9","fingerprint":{}}"#,
                "schema 'other/v9'",
            ),
            (
                r#"{"schema":"nccl-smoke/doctor/v1"}"#,
                "no \"fingerprint\" field",
            ),
            (r#"{"fingerprint":{}}"#, "no \"schema\" field"),
            (
                r#"{"schema":"nccl-smoke/results/v1","fingerprint":3}"#,
                "fingerprint: ",
            ),
            ("not json", "is not an nccl-smoke results file"),
        ];
        for (text, needle) in cases {
            let f = write("bad.", text);
            let e = load_fingerprint(&f).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
        let missing = Path::new("/nonexistent-dir/doctor.json");
        let e = load_fingerprint(missing).unwrap_err().to_string();
        assert!(e.contains("cannot read results file"), "{e}");
    }
}
