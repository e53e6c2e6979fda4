//! The results file: one versioned JSON document, rewritten after every measured size so a
//! crash or a kill leaves everything that completed. `compare` reads it back.

use super::fingerprint::Fingerprint;
use crate::bench::SizeResult;
use crate::error::Failure;
use crate::stage::Stage;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Schema identifier; bumped when a field changes meaning.
pub const SCHEMA: &str = "nccl-smoke/results/v1";

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Pass,
    Fail,
    /// Still running, or killed before it could say.
    Incomplete,
    /// Stopped by a signal to the launcher (Ctrl-C, SIGTERM) before any rank failed; every
    /// size measured until then is kept.
    Cancelled,
}

/// The run's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub status: Status,
    /// The line printed at the end of the run.
    pub line: String,
    /// The process exit code this verdict gives.
    pub exit_code: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// Failures of other ranks that only followed from the verdict's (a peer that vanished,
    /// a wait that ran out), one line each: `rank R (host H) at STAGE: error`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consequences: Vec<String>,
    /// The ranks the verdict names (those that failed alike, first to fail first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<u32>,
}

/// How a supervisor's failure begins when the launcher stopped its rank.
pub const STOPPED: &str = "stopped by the launcher";
/// How rank 0's own failure begins when its supervisor ended the job because another rank
/// vanished or stopped answering (the launcher cannot know).
pub const ENDED_BY_RANK0: &str = "stopped by rank 0's supervisor";

/// How much a failure says about its own rank, most causal first. The job's verdict names the
/// failures of the most causal kind present, never the ranks that only saw their consequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Blame {
    /// The rank failed on its own: an error of its own, a crash, a kill, a stopped process, a
    /// supervisor that vanished or stopped answering.
    Own,
    /// A wait on other ranks ran out, with no sign of a peer leaving: one of them may be
    /// stuck without saying so.
    Waited,
    /// A peer went away first (`ncclRemoteError`, connections closed by the remote peer): the
    /// peer's own failure is the cause.
    Peer,
    /// The launcher stopped the rank (another rank failed, or the job was cancelled).
    Stopped,
}

/// Classifies `f` by its words: the error texts that nccl-smoke's own layers and NCCL give for
/// a peer that went first, and for a wait that ran out.
pub fn blame(f: &Failure) -> Blame {
    const CLOSED: &str = "Connection closed by remote peer";
    if f.error.starts_with(STOPPED) || f.error.starts_with(ENDED_BY_RANK0) {
        return Blame::Stopped;
    }
    if f.own_evidence {
        return Blame::Own;
    }
    if f.error.contains("ncclRemoteError")
        || f.error.contains(CLOSED)
        || f.error.contains("(see rank 0's verdict)")
        || f.evidence.iter().any(|l| l.contains(CLOSED))
    {
        return Blame::Peer;
    }
    if f.error.contains("did not complete within") || f.error.contains(WAITED_MARK) {
        return Blame::Waited;
    }
    Blame::Own
}

/// Words a supervisor puts in a hang report when its worker was waiting on other ranks.
pub const WAITED_MARK: &str = "while waiting on other ranks";

/// The job's verdict from every failure known, in arrival order: the failures of the most
/// causal kind (see [`Blame`]), the first of them and the ranks that failed alike in one line,
/// and every other failure listed as a consequence. `None` when there is none.
pub fn job_verdict(failures: &[Failure]) -> Option<Verdict> {
    let level = failures.iter().map(blame).min()?;
    let culprits: Vec<Failure> = failures
        .iter()
        .filter(|f| blame(f) == level)
        .cloned()
        .collect();
    let groups = crate::error::group(&culprits);
    let g = groups.first()?;
    let named = |f: &Failure| {
        blame(f) == level && crate::error::group(&[g.first.clone(), f.clone()]).len() == 1
    };
    let mut consequences = Vec::new();
    for f in failures.iter().filter(|f| !named(f)) {
        let rank = f.rank.map(|r| r.to_string()).unwrap_or_else(|| "?".into());
        let line = format!("rank {rank} (host {}) at {}: {}", f.host, f.stage, f.error);
        if !consequences.contains(&line) {
            consequences.push(line);
        }
    }
    Some(Verdict {
        status: Status::Fail,
        line: g.to_string(),
        exit_code: g.first.exit_code(),
        stage: Some(g.first.stage),
        consequences,
        ranks: g.ranks.iter().flatten().copied().collect(),
    })
}

/// Makes the rank table agree with the verdict: a rank that failed only as a consequence of
/// the verdict's ranks is marked `consequence`, not `failed`.
pub fn agree(doc: &mut ResultsDoc) {
    if doc.verdict.status != Status::Fail || doc.verdict.ranks.is_empty() {
        return;
    }
    for r in &mut doc.ranks {
        let named = doc.verdict.ranks.contains(&r.rank);
        if r.state == "failed" && !named {
            r.state = "consequence".into();
        } else if named && ["stopped", "running", "cancelled"].contains(&r.state.as_str()) {
            // Named by another rank (it stopped answering), then stopped by the launcher.
            r.state = "failed".into();
        }
    }
}

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
    pub state: String,
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
    /// "nccl" for a real run, "SIMULATED" for the simulation backend.
    pub backend: String,
    /// True when any library that ran is nccl-smoke's simulation: numbers are CPU numbers.
    pub simulated: bool,
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
}

/// The document on disk, saved atomically (write, then rename).
pub struct ResultsFile {
    path: PathBuf,
    pub doc: ResultsDoc,
}

impl ResultsFile {
    pub fn new(path: &Path, doc: ResultsDoc) -> ResultsFile {
        ResultsFile {
            path: path.to_path_buf(),
            doc,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the document, keeping the failures another writer (rank 0's supervisor, which
    /// hears of other ranks' failures) has added to the file meanwhile.
    pub fn save(&self) -> std::io::Result<()> {
        locked(&self.path, || {
            let mut doc = self.doc.clone();
            // An earlier run's file at the same path is replaced, not merged.
            if let Ok(disk) = load(&self.path)
                && disk.run_id == doc.run_id
            {
                merge_failures(&mut doc, &disk);
            }
            save(&self.path, &doc)
        })
    }
}

/// Adds to `doc` the failures and rank table `other` (the file as it is now) has and it
/// lacks. The verdict is the job's, from every failure now known ([`job_verdict`]): a later
/// failure of a peer that only saw the culprit vanish never takes it over, and a more causal
/// one that arrives later does. A cancelled or failed verdict in the file stands over a
/// verdict without failures.
fn merge_failures(doc: &mut ResultsDoc, other: &ResultsDoc) {
    for f in &other.failures {
        if !doc.failures.contains(f) {
            doc.failures.push(f.clone());
        }
    }
    if let Some(v) = job_verdict(&doc.failures) {
        doc.verdict = v;
    } else if matches!(other.verdict.status, Status::Fail | Status::Cancelled) {
        doc.verdict = other.verdict.clone();
    }
    if doc.ranks.is_empty() {
        doc.ranks = other.ranks.clone();
    }
    agree(doc);
}

/// Reads, changes and writes the file as one step with respect to [`ResultsFile::save`].
pub fn amend(path: &Path, change: impl FnOnce(&mut ResultsDoc)) -> Result<(), ReadError> {
    locked(path, || {
        let mut doc = load(path)?;
        change(&mut doc);
        save(path, &doc).map_err(|source| ReadError::Io {
            path: path.display().to_string(),
            source,
        })
    })
}

/// Runs `f` holding an advisory lock on the folder of `path` (the file itself is replaced on
/// every save, so it cannot carry the lock). Without the lock (a file system that refuses
/// it) `f` runs anyway: a lost merge is better than a lost write.
fn locked<T>(path: &Path, f: impl FnOnce() -> T) -> T {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let guard = std::fs::File::open(dir).ok().filter(|d| d.lock().is_ok());
    let out = f();
    drop(guard);
    out
}

/// Writes `doc` to `path` atomically, never replacing anything but a regular file (see
/// [`super::output`]).
pub fn save(path: &Path, doc: &ResultsDoc) -> std::io::Result<()> {
    let text = serde_json::to_vec_pretty(doc).map_err(std::io::Error::other)?;
    super::output::write_atomic(path, &text)
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
    super::output::check_target(path, "--json")
}

/// The largest results file read: a sweep of 100000 sizes (the most `run` makes) is far
/// smaller.
pub const MAX_READ: u64 = 256 << 20;
/// How long reading one results file may take (a pipe whose writer stalls).
pub const READ_TIME: std::time::Duration = std::time::Duration::from_secs(10);

/// Reads `path` whole, bounded in size and time: a regular file up to [`MAX_READ`] bytes, or a
/// pipe (`<(…)`) read without blocking until it ends, within [`READ_TIME`]. Devices, folders
/// and sockets are refused without reading; a FIFO with no writer reads as empty.
pub fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let m = std::fs::metadata(path)?;
    let t = m.file_type();
    if !(t.is_file() || t.is_fifo()) {
        let what = if t.is_dir() {
            "a folder"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(std::io::Error::other(format!("it is {what}")));
    }
    if t.is_file() && m.len() > MAX_READ {
        return Err(std::io::Error::other(format!(
            "it is {} bytes, more than the {} MiB a results file can be",
            m.len(),
            MAX_READ >> 20
        )));
    }
    // Non-blocking, so that neither opening a FIFO nor reading a stalled pipe can hang.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let start = std::time::Instant::now();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if out.len() as u64 > MAX_READ {
                    return Err(std::io::Error::other(format!(
                        "more than the {} MiB a results file can be",
                        MAX_READ >> 20
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if start.elapsed() > READ_TIME {
            return Err(std::io::Error::other(format!(
                "still not at its end after {} s",
                READ_TIME.as_secs()
            )));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_save_keeps_this_runs_added_failures_and_replaces_an_earlier_runs_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        let who = crate::error::Who {
            rank: Some(2),
            host: "h2".into(),
        };
        let mut earlier = sample_doc();
        earlier.run_id = "earlier".into();
        save(&path, &earlier).unwrap();
        amend(&path, |d| {
            d.failures
                .push(Failure::new(Stage::Device, &who, "from the earlier run"));
            d.verdict.status = Status::Fail;
        })
        .unwrap();
        let mine = ResultsFile::new(&path, sample_doc());
        mine.save().unwrap();
        let back = load(&path).unwrap();
        assert!(back.failures.is_empty() && back.verdict.status != Status::Fail);
        // The supervisor adds another rank's failure; the worker's next save keeps it.
        amend(&path, |d| {
            d.failures.push(Failure::new(Stage::Device, &who, "rank 2"));
            d.verdict.status = Status::Fail;
        })
        .unwrap();
        mine.save().unwrap();
        let back = load(&path).unwrap();
        assert_eq!(back.failures.len(), 1);
        assert_eq!(back.verdict.status, Status::Fail);
    }

    fn at(rank: u32, stage: Stage, error: &str) -> Failure {
        let who = crate::error::Who {
            rank: Some(rank),
            host: format!("h{rank}"),
        };
        Failure::new(stage, &who, error)
    }

    const REMOTE: &str =
        "ncclCommGetAsyncError returned ncclRemoteError (6): remote process exited";

    #[test]
    fn the_verdict_names_the_culprit_whatever_arrives_first() {
        let culprit = at(
            1,
            Stage::Run,
            "the worker died of SIGKILL (Killed) during the run stage",
        );
        let victims = [at(0, Stage::Run, REMOTE), at(2, Stage::Run, REMOTE)];
        for order in [
            vec![culprit.clone(), victims[0].clone(), victims[1].clone()],
            vec![victims[0].clone(), victims[1].clone(), culprit.clone()],
            vec![victims[1].clone(), culprit.clone(), victims[0].clone()],
        ] {
            let v = job_verdict(&order).unwrap();
            assert!(
                v.line
                    .starts_with("FAIL at run on rank 1 (host h1): the worker died of SIGKILL"),
                "{}",
                v.line
            );
            assert_eq!(v.ranks, vec![1]);
            assert_eq!(v.exit_code, Stage::Run.exit_code());
            let mut named: Vec<&str> = v.consequences.iter().map(|c| &c[..6]).collect();
            named.sort();
            assert_eq!(named, vec!["rank 0", "rank 2"], "{:?}", v.consequences);
        }
    }

    #[test]
    fn a_stuck_rank_outranks_the_waits_that_ran_out_and_stopped_ranks_count_last() {
        let waited = at(
            0,
            Stage::Run,
            "timed iterations of all_reduce 8 bytes did not complete within 5.9 s",
        );
        let stuck = at(
            2,
            Stage::Run,
            "no progress for 4.1 s in the run stage: the worker is stopped (SIGSTOP)",
        );
        let stopped = at(1, Stage::Run, &format!("{STOPPED} during the run stage"));
        let v = job_verdict(&[stopped.clone(), waited.clone(), stuck.clone()]).unwrap();
        assert_eq!(v.ranks, vec![2], "{}", v.line);
        // With no failure of a rank's own, the waits are the verdict; with nothing else, the stop.
        assert_eq!(
            job_verdict(&[stopped.clone(), waited]).unwrap().ranks,
            vec![0]
        );
        assert_eq!(
            job_verdict(std::slice::from_ref(&stopped)).unwrap().ranks,
            vec![1]
        );
        assert!(job_verdict(&[]).is_none());
        let hung_waiting = at(
            3,
            Stage::Init,
            &format!("no progress for 7 s in the init stage {WAITED_MARK}"),
        );
        assert_eq!(blame(&hung_waiting), Blame::Waited);
    }

    #[test]
    fn ranks_failing_alike_share_the_verdict_and_the_table_agrees() {
        let fs = [
            at(2, Stage::ConnectProxy, "proxy connect failed on port 4711"),
            at(0, Stage::ConnectProxy, REMOTE),
            at(1, Stage::ConnectProxy, "proxy connect failed on port 4712"),
        ];
        let v = job_verdict(&fs).unwrap();
        assert!(
            v.line.starts_with("FAIL at connect:proxy on ranks 1, 2 "),
            "{}",
            v.line
        );
        assert_eq!(v.ranks, vec![2, 1]);
        assert_eq!(v.consequences.len(), 1);
        let mut doc = sample_doc();
        doc.verdict = v;
        doc.ranks = (0..3)
            .map(|rank| RankRecord {
                rank,
                host: format!("h{rank}"),
                state: "failed".into(),
                exit_code: Some(19),
                stage: Some(Stage::ConnectProxy),
                step: None,
                stages: vec![],
            })
            .collect();
        agree(&mut doc);
        let states: Vec<&str> = doc.ranks.iter().map(|r| r.state.as_str()).collect();
        assert_eq!(states, ["consequence", "failed", "failed"]);
    }

    #[test]
    fn a_later_save_lets_a_more_causal_failure_take_the_verdict() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        let mine = ResultsFile::new(&path, sample_doc());
        mine.save().unwrap();
        amend(&path, |d| d.failures.push(at(0, Stage::Run, REMOTE))).unwrap();
        amend(&path, |d| {
            d.failures
                .push(at(1, Stage::Run, "the worker died of SIGKILL"))
        })
        .unwrap();
        mine.save().unwrap();
        let back = load(&path).unwrap();
        assert_eq!(back.verdict.status, Status::Fail);
        assert_eq!(back.verdict.ranks, vec![1], "{}", back.verdict.line);
    }

    pub(crate) fn sample_doc() -> ResultsDoc {
        ResultsDoc {
            schema: SCHEMA.into(),
            tool_version: "0.1.0".into(),
            started_at: "2026-11-22T00:00:00Z".into(),
            run_id: "h-1-0".into(),
            backend: "SIMULATED".into(),
            simulated: true,
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
        }
    }

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("results-test.{}.{name}", std::process::id()))
    }

    #[test]
    fn documents_round_trip() {
        let p = tmp("rt.json");
        save(&p, &sample_doc()).unwrap();
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
/// doctor report (`doctor --json`, schema [`crate::diagnose::doctor::SCHEMA`]), so that two
/// of either kind can be compared with [`super::fingerprint::diff`].
pub fn load_fingerprint(path: &Path) -> Result<Fingerprint, ReadError> {
    let mut value = read_json(path, &[SCHEMA, crate::diagnose::doctor::SCHEMA])?;
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
