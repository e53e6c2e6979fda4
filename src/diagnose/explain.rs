//! `nccl-smoke explain`: the classifier applied offline to NCCL logs from any job.
//!
//! Logs are read as bytes, line by line, with a cap on line length, so truncated or huge input
//! gives a result in bounded memory. Input that is not text (NUL or control bytes at its
//! start) is refused with an error, and a size and time cap bound what one file may cost.
//!
//! Each log yields its findings (one per signature family and process), the processes it
//! shows (host, pid, rank, NCCL version, the last operation seen), and [`job_verdict`] joins
//! the logs of one job into one verdict: the root cause and the ranks that share it, the ranks
//! that only report consequences, and for hangs the ranks that fell silent first.

use super::classify::{self, Category, Finding, LineKind, Severity};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::time::Instant;

/// Longest line kept; the rest of a longer line is skipped.
const MAX_LINE: usize = 64 * 1024;
/// How much of a file's start is checked for binary content.
const SNIFF: usize = 8 * 1024;

/// Bounds on what one log may cost.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Stop after this many bytes.
    pub max_bytes: u64,
    /// Stop at this instant (checked between lines).
    pub deadline: Option<Instant>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: u64::MAX,
            deadline: None,
        }
    }
}

/// Who printed a line: NCCL's `host:pid:tid [dev]` prefix, a wrapper's rank tag, the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Who {
    pub file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
}

impl Who {
    /// "rank 3 (host a, pid 7)", "host a, pid 7", or the file.
    pub fn describe(&self) -> String {
        let mut at = Vec::new();
        if let Some(h) = &self.host {
            at.push(format!("host {h}"));
        }
        if let Some(p) = self.pid {
            at.push(format!("pid {p}"));
        }
        match (self.rank, at.is_empty()) {
            (Some(r), true) => format!("rank {r} ({})", self.file),
            (Some(r), false) => format!("rank {r} ({})", at.join(", ")),
            (None, false) => at.join(", "),
            (None, true) => self.file.clone(),
        }
    }

    /// The same process, whatever file it came from: rank where known, else host and pid.
    fn process_key(&self) -> (Option<u32>, Option<String>, Option<u32>, String) {
        if self.rank.is_some() {
            (self.rank, None, None, String::new())
        } else if self.pid.is_some() {
            (None, self.host.clone(), self.pid, String::new())
        } else {
            (None, None, None, self.file.clone())
        }
    }
}

/// A finding located in a log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Located {
    pub file: String,
    /// 1-based line number.
    pub line: u64,
    /// Host, pid and CUDA device from NCCL's line prefix (`host:pid:tid [dev] NCCL …`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<u32>,
    /// The rank, from NCCL's init lines for this host:pid or from a wrapper's rank tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    pub stage: String,
    pub category: Category,
    pub severity: Severity,
    pub signature: String,
    pub cause: String,
    pub hint: String,
    pub evidence: String,
    #[serde(skip)]
    pub exit_code: u8,
}

impl Located {
    pub fn who(&self) -> Who {
        Who {
            file: self.file.clone(),
            host: self.host.clone(),
            pid: self.pid,
            rank: self.rank,
        }
    }
}

/// The last collective operation one process was seen in.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LastOp {
    #[serde(flatten)]
    pub who: Who,
    /// PyTorch's sequence number of the operation the watchdog timed out on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed_out_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// PyTorch's "last enqueued work" / "last completed work".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_enqueued: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_completed: Option<u64>,
    /// NCCL's own opCount from NCCL_DEBUG_SUBSYS=COLL lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_op_count: Option<u64>,
}

/// What one log gave.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LogSummary {
    pub file: String,
    pub lines: u64,
    /// Lines that looked like NCCL's (`NCCL INFO|WARN|…`).
    pub nccl_lines: u64,
    /// Lines cut at the length cap.
    pub truncated_lines: u64,
    pub findings: Vec<Located>,
    /// NCCL version per process (from NCCL's own version line).
    pub versions: BTreeMap<String, BTreeSet<Who>>,
    /// The largest communicator size seen (`nranks N`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nranks: Option<u32>,
    /// Every process the log shows, with its last operation where one was seen.
    pub processes: Vec<LastOp>,
    /// Why reading stopped early (size or time cap), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// Replaces control characters (terminal escapes included) with '?', so that what a log
/// contains can be printed safely.
pub fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() && c != '\t' { '?' } else { c })
        .collect()
}

/// NCCL's line prefix: `host:pid:tid [dev] NCCL LEVEL …`.
/// Launchers often put a timestamp or a rank tag before NCCL's own prefix, so the prefix is
/// found as the `host:pid:tid` word followed by a `[dev]` word, wherever it starts.
pub fn parse_prefix(line: &str) -> (Option<String>, Option<u32>, Option<u32>) {
    let Some(nccl_at) = line.find(" NCCL ") else {
        return (None, None, None);
    };
    let words: Vec<&str> = line[..nccl_at].split_whitespace().collect();
    for pair in words.windows(2) {
        let Some(device) = pair[1]
            .strip_prefix('[')
            .and_then(|w| w.strip_suffix(']'))
            .and_then(|d| d.parse::<u32>().ok())
        else {
            continue;
        };
        let mut parts = pair[0].rsplitn(3, ':');
        let tid = parts.next().and_then(|t| t.parse::<u64>().ok());
        let pid = parts.next().and_then(|p| p.parse::<u32>().ok());
        if let (Some(_), Some(pid)) = (tid, pid) {
            let host = parts
                .next()
                .filter(|h| !h.is_empty())
                .map(|h| clean(h.rsplit(':').next().unwrap_or(h)));
            return (host, Some(pid), Some(device));
        }
    }
    (None, None, None)
}

/// A rank a wrapper names: PyTorch's `[rank3]:` / `[Rank 3]` / `Rank 3]`, Open MPI's
/// `--tag-output` `[1,3]<stdout>:`.
pub fn wrapper_rank(line: &str) -> Option<u32> {
    fn digits(s: &str) -> Option<u32> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().ok()
    }
    let head = &line[..line.len().min(160)];
    if let Some(i) = head.find("[rank") {
        return digits(&head[i + 5..]);
    }
    if let Some(i) = head.find("Rank ") {
        let r = digits(&head[i + 5..]);
        if r.is_some()
            && head[i + 5..]
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .starts_with(']')
        {
            return r;
        }
    }
    if head.starts_with("[1,") || head.starts_with("[0,") {
        let rest = &head[3..];
        if let Some(close) = rest.find("]<std") {
            return rest[..close].parse().ok();
        }
    }
    None
}

/// A substring search built once (`str::contains` rebuilds its searcher on every call).
macro_rules! has {
    ($line:expr, $needle:literal) => {{
        static F: std::sync::OnceLock<memchr::memmem::Finder<'static>> = std::sync::OnceLock::new();
        F.get_or_init(|| memchr::memmem::Finder::new($needle))
            .find($line.as_bytes())
            .is_some()
    }};
}

fn number_after(line: &str, key: &str) -> Option<u64> {
    let at = line.find(key)? + key.len();
    let s = line[at..].trim_start();
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

fn word_after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(key)? + key.len();
    let s = &line[at..];
    let end = s
        .find(|c: char| c == ',' || c == ')' || c.is_whitespace())
        .unwrap_or(s.len());
    Some(&s[..end]).filter(|w| !w.is_empty())
}

/// NCCL's own version line: `… NCCL INFO NCCL version 2.19.3+cuda12.3` or a bare
/// `NCCL version 2.18.1+cuda12.1` (not a wrapper's ", NCCL version 2.14.3" in an error text).
fn nccl_version(line: &str) -> Option<&str> {
    let at = line.find("NCCL version ")?;
    let before = line[..at].trim_end();
    if !(before.is_empty() || before.ends_with("NCCL INFO") || before.ends_with(']')) {
        return None;
    }
    let v = &line[at + "NCCL version ".len()..];
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let v = &v[..end];
    (v.split('.').count() == 3 && v.split('.').all(|p| !p.is_empty())).then_some(v)
}

/// Reads one log with no caps but the line length (for tests and small inputs).
pub fn explain_reader(file: &str, input: impl Read) -> std::io::Result<LogSummary> {
    explain_reader_limited(file, input, Limits::default())
}

/// Reads one log and classifies each NCCL WARN line and error line; one finding per distinct
/// (signature family, process) so a log that repeats itself does not drown the report.
/// Binary input is an error (`InvalidData`); the size and time caps stop reading and say so in
/// [`LogSummary::stopped`].
pub fn explain_reader_limited(
    file: &str,
    input: impl Read,
    limits: Limits,
) -> std::io::Result<LogSummary> {
    let mut reader = BufReader::with_capacity(256 * 1024, input);
    let file = clean(file);
    {
        let head = reader.fill_buf()?;
        if looks_binary(&head[..head.len().min(SNIFF)]) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a text log: its first bytes are binary (NUL or control characters)",
            ));
        }
    }
    let mut st = State {
        summary: LogSummary {
            file: file.clone(),
            ..LogSummary::default()
        },
        ..State::default()
    };
    let mut buf = Vec::new();
    let mut bytes: u64 = 0;
    loop {
        buf.clear();
        let n = read_capped_line(&mut reader, &mut buf, &mut st.summary.truncated_lines)?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        st.summary.lines += 1;
        let line = match std::str::from_utf8(&buf) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(&buf),
        };
        st.line(line.trim_end());
        if bytes >= limits.max_bytes {
            st.summary.stopped = Some(format!("stopped after {bytes} bytes (size cap)"));
            break;
        }
        if st.summary.lines.is_multiple_of(4096)
            && let Some(d) = limits.deadline
            && Instant::now() >= d
        {
            st.summary.stopped = Some(format!(
                "stopped after {bytes} bytes, {} lines (time cap)",
                st.summary.lines
            ));
            break;
        }
    }
    Ok(st.finish())
}

/// Whether the start of a file is not text: a NUL byte, or many control bytes other than
/// tab, newline, carriage return, form feed and escape (colored logs).
fn looks_binary(head: &[u8]) -> bool {
    if head.is_empty() {
        return false;
    }
    if head.contains(&0) {
        return true;
    }
    let odd = head
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b))
        .count();
    odd * 10 > head.len()
}

/// A process by what NCCL's prefix and a wrapper's tag say: host, pid, rank.
type ProcKey = (Option<String>, Option<u32>, Option<u32>);

#[derive(Default)]
struct State {
    summary: LogSummary,
    /// host:pid → rank, from NCCL's init lines.
    ranks: HashMap<(Option<String>, u32), u32>,
    /// Processes by key, in order of appearance.
    procs: Vec<LastOp>,
    proc_index: HashMap<ProcKey, usize>,
    /// `host:pid` prefix text → index in `procs` (the opCount fast path).
    by_prefix: HashMap<String, usize>,
    /// The previous line ended in "Last error:": this one is NCCL's error text.
    after_last_error: bool,
    /// (category, host, pid, rank) already reported.
    seen: std::collections::HashSet<(Category, ProcKey)>,
}

impl State {
    fn proc_mut(
        &mut self,
        host: Option<String>,
        pid: Option<u32>,
        rank: Option<u32>,
    ) -> &mut LastOp {
        let key = (host.clone(), pid, rank);
        let i = match self.proc_index.get(&key) {
            Some(&i) => i,
            None => {
                self.procs.push(LastOp {
                    who: Who {
                        file: self.summary.file.clone(),
                        host,
                        pid,
                        rank,
                    },
                    ..LastOp::default()
                });
                self.proc_index.insert(key, self.procs.len() - 1);
                self.procs.len() - 1
            }
        };
        &mut self.procs[i]
    }

    fn line(&mut self, line: &str) {
        let mut kind = LineKind::of(line);
        if kind != LineKind::Other {
            self.summary.nccl_lines += 1;
        }
        if kind == LineKind::Other && self.after_last_error {
            kind = LineKind::Warn;
        }
        self.after_last_error = line.ends_with("Last error:");
        if kind == LineKind::Info {
            self.info(line);
        } else if has!(line, "NCCL version ") {
            self.version(line);
        }
        if kind != LineKind::Info {
            self.wrapper_progress(line);
        }
        if let Some(f) = classify::classify_line(line, kind) {
            self.add(f, line);
        }
    }

    /// INFO lines: version, communicator membership, NCCL's own operation counter.
    fn info(&mut self, line: &str) {
        if has!(line, "NCCL version ") {
            self.version(line);
        } else if has!(line, " nranks ")
            && (has!(line, "Init COMPLETE") || has!(line, "Init START"))
        {
            let (host, pid, _) = parse_prefix(line);
            if let (Some(pid), Some(rank)) = (pid, number_after(line, " rank ")) {
                let rank = rank as u32;
                self.ranks.entry((host.clone(), pid)).or_insert(rank);
                self.proc_mut(host, Some(pid), None);
            }
            if let Some(n) = number_after(line, " nranks ") {
                let n = n as u32;
                self.summary.nranks = Some(self.summary.nranks.map_or(n, |m| m.max(n)));
            }
        } else if has!(line, ": opCount ")
            && let Some(at) = line.find(": opCount ")
        {
            let hex = line[at + 10..].split_whitespace().next().unwrap_or("");
            if let Ok(count) = u64::from_str_radix(hex, 16) {
                // The same process prints most of these lines: find it by its prefix's text
                // before parsing the prefix.
                let word = line
                    .split_whitespace()
                    .find(|w| w.matches(':').count() >= 2);
                let key = word.and_then(|w| w.rsplit_once(':')).map(|(hp, _)| hp);
                let idx = match key.and_then(|k| self.by_prefix.get(k)) {
                    Some(&i) => i,
                    None => {
                        let (host, pid, _) = parse_prefix(line);
                        self.proc_mut(host.clone(), pid, None);
                        let i = self.proc_index[&(host, pid, None)];
                        if let Some(k) = key {
                            self.by_prefix.insert(k.to_string(), i);
                        }
                        i
                    }
                };
                let p = &mut self.procs[idx];
                p.nccl_op_count = Some(count);
                let op = line[..at].rsplit(' ').next().unwrap_or("");
                if !op.is_empty() && p.op.as_deref() != Some(op) {
                    p.op = Some(op.to_string());
                }
            }
        }
    }

    fn version(&mut self, line: &str) {
        if let Some(v) = nccl_version(line) {
            let (host, pid, _) = parse_prefix(line);
            let who = Who {
                file: self.summary.file.clone(),
                host,
                pid,
                rank: wrapper_rank(line),
            };
            self.summary
                .versions
                .entry(v.to_string())
                .or_default()
                .insert(who);
        }
    }

    /// PyTorch's watchdog and work-status lines: the sequence number each rank is stuck on.
    fn wrapper_progress(&mut self, line: &str) {
        let timeout = has!(line, "Watchdog caught collective operation timeout");
        let status = has!(line, "last enqueued") || has!(line, "last completed");
        if !(timeout || status) {
            return;
        }
        let Some(rank) = wrapper_rank(line) else {
            return;
        };
        let p = self.proc_mut(None, None, Some(rank));
        if timeout {
            if let Some(seq) = number_after(line, "SeqNum=") {
                p.timed_out_seq = Some(p.timed_out_seq.map_or(seq, |s| s.min(seq)));
            }
            if let Some(op) = word_after(line, "OpType=") {
                p.op = Some(clean(op));
            }
        }
        if let Some(n) = number_after(line, "last enqueued NCCL work:")
            .or_else(|| number_after(line, "last enqueued work:"))
        {
            p.last_enqueued = Some(p.last_enqueued.map_or(n, |m| m.max(n)));
        }
        if let Some(n) = number_after(line, "last completed NCCL work:")
            .or_else(|| number_after(line, "last completed work:"))
        {
            p.last_completed = Some(p.last_completed.map_or(n, |m| m.max(n)));
        }
    }

    fn add(&mut self, f: Finding, line: &str) {
        let (host, pid, device) = parse_prefix(line);
        let rank = wrapper_rank(line);
        if !self.seen.insert((f.category, (host.clone(), pid, rank))) {
            return;
        }
        let line_no = self.summary.lines;
        self.summary.findings.push(Located {
            file: self.summary.file.clone(),
            line: line_no,
            host,
            pid,
            device,
            rank,
            stage: f.stage.name().to_string(),
            category: f.category,
            severity: f.severity,
            signature: f.signature.to_string(),
            cause: f.cause.to_string(),
            hint: f.hint.to_string(),
            evidence: clean(&f.evidence),
            exit_code: f.stage.exit_code(),
        });
    }

    fn finish(mut self) -> LogSummary {
        let rank_of = |host: &Option<String>, pid: Option<u32>| {
            pid.and_then(|p| self.ranks.get(&(host.clone(), p)).copied())
        };
        for f in &mut self.summary.findings {
            if f.rank.is_none() {
                f.rank = rank_of(&f.host, f.pid);
            }
        }
        for p in &mut self.procs {
            if p.who.rank.is_none() {
                p.who.rank = rank_of(&p.who.host, p.who.pid);
            }
        }
        let versions = std::mem::take(&mut self.summary.versions);
        self.summary.versions = versions
            .into_iter()
            .map(|(v, whos)| {
                let whos = whos
                    .into_iter()
                    .map(|mut w| {
                        if w.rank.is_none() {
                            w.rank = rank_of(&w.host, w.pid);
                        }
                        w
                    })
                    .collect();
                (v, whos)
            })
            .collect();
        self.summary.processes = self.procs;
        self.summary
    }
}

/// Reads up to a newline; keeps at most [`MAX_LINE`] bytes of it. Returns bytes consumed.
fn read_capped_line(
    r: &mut impl BufRead,
    out: &mut Vec<u8>,
    truncated: &mut u64,
) -> std::io::Result<usize> {
    let mut consumed = 0;
    let mut cut = false;
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            if cut {
                *truncated += 1;
            }
            return Ok(consumed);
        }
        let (take, done) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = MAX_LINE.saturating_sub(out.len());
        if take > room {
            cut = true;
        }
        out.extend_from_slice(&chunk[..take.min(room)]);
        r.consume(take);
        consumed += take;
        if done {
            if cut {
                *truncated += 1;
            }
            return Ok(consumed);
        }
    }
}

/// A hang: the operation the waiting ranks timed out on and the ranks that fell silent first.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HangReport {
    /// Ranks that reported a timeout, with the operation they waited on.
    pub waiting: Vec<LastOp>,
    /// Ranks that fell silent first: behind the others, or never reporting while others did.
    pub silent_first: Vec<Who>,
    /// In words.
    pub summary: String,
}

/// One verdict for a job's logs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct JobVerdict {
    /// "fail", "hang", "consequences-only", "advice" or "ok".
    pub status: String,
    /// The finding that names the cause (the most severe, then the table's order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_cause: Option<Located>,
    /// Processes that report the root cause's family themselves (for a hang: the silent ones).
    pub culprits: Vec<Who>,
    /// Processes that only report consequences (a peer closed, ncclRemoteError, timeouts).
    pub consequences_only: Vec<Who>,
    /// Failures of another family elsewhere in the job (a second problem, or a later step).
    pub other_failures: Vec<Located>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hang: Option<HangReport>,
    /// NCCL version → the processes that report it.
    pub versions: BTreeMap<String, Vec<Who>>,
    pub version_mismatch: bool,
    /// Benign notes and advice.
    pub notes: Vec<Located>,
    /// The exit code `explain` ends with.
    pub exit_code: u8,
}

/// Joins the logs of one job (one per rank, or one for all) into one verdict.
pub fn job_verdict(summaries: &[LogSummary]) -> JobVerdict {
    let all: Vec<&Located> = summaries.iter().flat_map(|s| &s.findings).collect();
    let mut v = JobVerdict::default();

    // Versions across processes.
    for s in summaries {
        for (ver, whos) in &s.versions {
            v.versions
                .entry(ver.clone())
                .or_default()
                .extend(whos.iter().cloned());
        }
    }
    v.version_mismatch = v.versions.len() > 1;

    let mut failures: Vec<Located> = all
        .iter()
        .filter(|f| f.severity >= Severity::Consequence)
        .map(|f| (*f).clone())
        .collect();
    if v.version_mismatch {
        failures.push(version_finding(&v.versions));
    }
    v.notes = all
        .iter()
        .filter(|f| f.severity < Severity::Consequence)
        .map(|f| (*f).clone())
        .collect();

    let root = failures
        .iter()
        .min_by_key(|f| (key_of(f), f.file.clone(), f.line))
        .cloned();
    let hang = hang_report(summaries);

    match root {
        Some(root) => {
            let root_family = (root.category, root.severity);
            let mut culprits: BTreeSet<Who> = BTreeSet::new();
            let mut others: BTreeMap<(Category, Who), Located> = BTreeMap::new();
            for f in &failures {
                if (f.category, f.severity) == root_family {
                    culprits.insert(f.who());
                } else if f.severity == Severity::Fail {
                    others
                        .entry((f.category, f.who()))
                        .or_insert_with(|| f.clone());
                }
            }
            let culprit_keys: BTreeSet<_> = culprits.iter().map(Who::process_key).collect();
            let failing_keys: BTreeSet<_> = failures
                .iter()
                .filter(|f| f.severity == Severity::Fail)
                .map(|f| f.who().process_key())
                .collect();
            let consequences: BTreeSet<Who> = failures
                .iter()
                .filter(|f| f.severity < Severity::Fail)
                .map(Located::who)
                .filter(|w| {
                    !culprit_keys.contains(&w.process_key())
                        && !failing_keys.contains(&w.process_key())
                })
                .collect();
            v.consequences_only = consequences.into_iter().collect();
            v.other_failures = others.into_values().collect();
            v.status = match root.severity {
                Severity::Fail => "fail",
                Severity::Hang => "hang",
                _ => "consequences-only",
            }
            .to_string();
            if root.severity == Severity::Hang {
                let h = hang.unwrap_or_default();
                // The waiting ranks are victims; the culprits are the ones that went quiet.
                v.culprits = h.silent_first.clone();
                v.hang = Some(h);
            } else {
                v.culprits = culprits.into_iter().collect();
                if let Some(h) = hang {
                    v.hang = Some(h);
                }
            }
            v.exit_code = root.exit_code;
            v.root_cause = Some(root);
        }
        None => {
            if let Some(h) = hang.filter(|h| !h.silent_first.is_empty()) {
                // No error line at all, but the ranks stopped at different operations.
                v.status = "hang".into();
                v.culprits = h.silent_first.clone();
                v.exit_code = crate::stage::Stage::Run.exit_code();
                v.hang = Some(h);
            } else if let Some(a) = v.notes.iter().find(|n| n.severity == Severity::Advice) {
                v.status = "advice".into();
                v.exit_code = a.exit_code;
            } else {
                v.status = "ok".into();
                v.exit_code = crate::stage::exit::PASS;
            }
        }
    }
    v
}

fn key_of(f: &Located) -> (std::cmp::Reverse<Severity>, usize) {
    let ids: Vec<&str> = classify::signature_ids().collect();
    (
        std::cmp::Reverse(f.severity),
        ids.iter()
            .position(|i| *i == f.signature)
            .unwrap_or(usize::MAX),
    )
}

fn version_finding(versions: &BTreeMap<String, Vec<Who>>) -> Located {
    let listing: Vec<String> = versions
        .iter()
        .map(|(ver, whos)| {
            let mut names: Vec<String> = whos.iter().map(Who::describe).collect();
            names.dedup();
            let more = names.len().saturating_sub(4);
            names.truncate(4);
            let tail = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!("{ver} on {}{tail}", names.join("; "))
        })
        .collect();
    let line = "h:0:0 [0] NCCL WARN Mismatched NCCL version detected";
    let f = classify::classify_line(line, LineKind::Warn)
        .expect("the version-mismatch signature names its own words");
    Located {
        file: String::new(),
        line: 0,
        host: None,
        pid: None,
        device: None,
        rank: None,
        stage: f.stage.name().to_string(),
        category: f.category,
        severity: f.severity,
        signature: f.signature.to_string(),
        cause: f.cause.to_string(),
        hint: f.hint.to_string(),
        evidence: format!(
            "ranks report different NCCL versions: {}",
            listing.join(" | ")
        ),
        exit_code: f.stage.exit_code(),
    }
}

/// The ranks that fell silent first, from PyTorch's watchdog lines or NCCL's opCount.
fn hang_report(summaries: &[LogSummary]) -> Option<HangReport> {
    // One entry per process across files (the same rank may appear in several).
    let mut procs: BTreeMap<_, LastOp> = BTreeMap::new();
    for s in summaries {
        for p in &s.processes {
            let e = procs
                .entry(p.who.process_key())
                .or_insert_with(|| p.clone());
            if e.timed_out_seq.is_none() {
                e.timed_out_seq = p.timed_out_seq;
            }
            e.last_enqueued = e.last_enqueued.max(p.last_enqueued);
            e.last_completed = e.last_completed.max(p.last_completed);
            e.nccl_op_count = e.nccl_op_count.max(p.nccl_op_count);
            if e.op.is_none() {
                e.op = p.op.clone();
            }
        }
    }
    let waiting: Vec<LastOp> = procs
        .values()
        .filter(|p| p.timed_out_seq.is_some())
        .cloned()
        .collect();
    if !waiting.is_empty() {
        let top = waiting.iter().filter_map(|p| p.timed_out_seq).max()?;
        // Behind: timed out on an older operation, or never enqueued the one others wait on.
        let mut silent: Vec<Who> = waiting
            .iter()
            .filter(|p| {
                p.timed_out_seq.is_some_and(|s| s < top) || p.last_enqueued.is_some_and(|e| e < top)
            })
            .map(|p| p.who.clone())
            .collect();
        // Ranks the logs show but that never reported a timeout while others did.
        let reported: BTreeSet<Option<u32>> = waiting.iter().map(|p| p.who.rank).collect();
        let mut quiet: BTreeSet<u32> = procs
            .values()
            .filter(|p| p.timed_out_seq.is_none())
            .filter_map(|p| p.who.rank)
            .filter(|r| !reported.contains(&Some(*r)))
            .collect();
        let nranks = summaries.iter().filter_map(|s| s.nranks).max();
        if let Some(n) = nranks
            && reported.iter().all(Option::is_some)
            && n <= 4096
        {
            quiet.extend((0..n).filter(|r| !reported.contains(&Some(*r))));
        }
        for r in quiet {
            if !silent.iter().any(|w| w.rank == Some(r)) {
                silent.push(Who {
                    rank: Some(r),
                    ..Who::default()
                });
            }
        }
        let op = waiting
            .iter()
            .find(|p| p.timed_out_seq == Some(top))
            .and_then(|p| p.op.clone())
            .unwrap_or_else(|| "an operation".into());
        let summary = if silent.is_empty() {
            format!(
                "{} rank(s) timed out waiting on SeqNum={top} ({op}); no rank that reported is behind the others, \
                 so the rank(s) missing from these logs, or the link between them, are the suspects",
                waiting.len()
            )
        } else {
            format!(
                "{} rank(s) timed out waiting on SeqNum={top} ({op}); fell silent first: {}",
                waiting.len(),
                silent
                    .iter()
                    .map(Who::describe)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return Some(HangReport {
            waiting,
            silent_first: silent,
            summary,
        });
    }
    // NCCL's own opCount (NCCL_DEBUG_SUBSYS=COLL): ranks that stopped at an earlier operation.
    let counted: Vec<&LastOp> = procs
        .values()
        .filter(|p| p.nccl_op_count.is_some())
        .collect();
    let max = counted.iter().filter_map(|p| p.nccl_op_count).max()?;
    let min = counted.iter().filter_map(|p| p.nccl_op_count).min()?;
    if counted.len() < 2 || min == max {
        return None;
    }
    let silent: Vec<Who> = counted
        .iter()
        .filter(|p| p.nccl_op_count == Some(min))
        .map(|p| p.who.clone())
        .collect();
    Some(HangReport {
        summary: format!(
            "ranks stopped at different NCCL operations (opCount {min:#x} to {max:#x}); fell silent first: {}",
            silent
                .iter()
                .map(Who::describe)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        waiting: counted
            .iter()
            .filter(|p| p.nccl_op_count == Some(max))
            .map(|p| (*p).clone())
            .collect(),
        silent_first: silent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prefix_gives_host_pid_device() {
        assert_eq!(
            parse_prefix(
                "gpu-node-3:12345:12399 [5] NCCL WARN Cuda failure 'invalid device ordinal'"
            ),
            (Some("gpu-node-3".into()), Some(12345), Some(5))
        );
        assert_eq!(parse_prefix("no prefix here"), (None, None, None));
        assert_eq!(
            parse_prefix("h1:10:11 [0] transport/p2p.cc:275 NCCL WARN Cuda failure 101"),
            (Some("h1".into()), Some(10), Some(0))
        );
        assert_eq!(
            parse_prefix("[2026-03-02 10:11:14] job-1:7:63 [3] proxy.cc:1 NCCL WARN x"),
            (Some("job-1".into()), Some(7), Some(3))
        );
        assert_eq!(
            parse_prefix(
                "[1,0]<stdout>:node-a:163608:163650 [0] transport/p2p.cc:1129 NCCL WARN x"
            ),
            (Some("node-a".into()), Some(163608), Some(0))
        );
    }

    #[test]
    fn wrapper_ranks() {
        assert_eq!(
            wrapper_rank("[rank3]:[E1206 18:44:12] ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog"),
            Some(3)
        );
        assert_eq!(
            wrapper_rank("[E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught"),
            Some(7)
        );
        assert_eq!(
            wrapper_rank("[1,12]<stdout>:host:1:2 [0] NCCL WARN x"),
            Some(12)
        );
        assert_eq!(wrapper_rank("plain line"), None);
    }

    #[test]
    fn one_finding_per_family_and_process() {
        let log = "a:1:1 [0] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x (size 9637888)\n\
                   a:1:1 [0] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-y (size 9637888)\n\
                   b:2:2 [1] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-z (size 9637888)\n";
        let s = explain_reader("x.log", log.as_bytes()).unwrap();
        assert_eq!(s.lines, 3);
        assert_eq!(s.nccl_lines, 3);
        assert_eq!(s.findings.len(), 2);
        assert_eq!(s.findings[0].stage, "connect:shm");
        assert_eq!(s.findings[1].host.as_deref(), Some("b"));
        assert_eq!(s.findings[1].line, 3);
    }

    #[test]
    fn huge_lines_are_cut_not_kept() {
        let mut log = vec![b'x'; MAX_LINE * 3];
        log.extend_from_slice(
            b"\nh:1:1 [0] NCCL WARN NET/IB : Got completion from peer 1.2.3.4<5> with error 12\n",
        );
        let s = explain_reader("big.log", &log[..]).unwrap();
        assert_eq!((s.lines, s.truncated_lines), (2, 1));
        assert_eq!(s.findings[0].stage, "connect:net");
    }

    #[test]
    fn binary_is_refused_and_escapes_are_cleaned() {
        let e = explain_reader("bin", &[0u8, 1, 2, 3, 0, 0][..]).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        let s = explain_reader(
            "esc",
            "h:1:1 [0] NCCL WARN Bootstrap : no socket interface found \x1b[31mred\x1b[0m\x07\n"
                .as_bytes(),
        )
        .unwrap();
        assert!(
            !s.findings[0].evidence.contains('\x1b'),
            "{:?}",
            s.findings[0].evidence
        );
        assert!(!s.findings[0].evidence.contains('\x07'));
    }

    #[test]
    fn the_size_cap_stops_reading() {
        let log = "h:1:1 [0] NCCL INFO x\n".repeat(1000);
        let s = explain_reader_limited(
            "capped",
            log.as_bytes(),
            Limits {
                max_bytes: 100,
                deadline: None,
            },
        )
        .unwrap();
        assert!(s.lines < 10 && s.stopped.is_some(), "{s:?}");
    }

    #[test]
    fn ranks_versions_and_watchdog_across_files() {
        let a = "a:10:10 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n\
                 a:10:20 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 3 cudaDev 0 nvmlDev 0 busId 1000 commId 0x5 - Init COMPLETE\n\
                 [rank0]:[E1 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n";
        let b = "b:11:11 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n\
                 b:11:21 [0] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 3 cudaDev 0 nvmlDev 0 busId 1000 commId 0x5 - Init COMPLETE\n\
                 [rank1]:[E1 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n";
        let c = "c:12:12 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\n\
                 c:12:22 [0] NCCL INFO ncclCommInitRank comm 0x3 rank 2 nranks 3 cudaDev 0 nvmlDev 0 busId 1000 commId 0x5 - Init COMPLETE\n";
        let s: Vec<LogSummary> = [("a", a), ("b", b), ("c", c)]
            .iter()
            .map(|(n, l)| explain_reader(n, l.as_bytes()).unwrap())
            .collect();
        let v = job_verdict(&s);
        assert!(v.version_mismatch);
        // A version mismatch is a failure and outranks the hang it may cause.
        assert_eq!(v.status, "fail");
        assert_eq!(
            v.root_cause.as_ref().unwrap().category,
            Category::VersionMismatch
        );
        let h = v.hang.as_ref().unwrap();
        assert_eq!(h.silent_first.len(), 1, "{h:?}");
        assert_eq!(h.silent_first[0].rank, Some(2));

        // Same versions: the hang is the verdict and rank 2, silent, is the culprit.
        let c2 = c.replace("2.18.1+cuda12.1", "2.19.3+cuda12.3");
        let s2 = vec![
            s[0].clone(),
            s[1].clone(),
            explain_reader("c", c2.as_bytes()).unwrap(),
        ];
        let v2 = job_verdict(&s2);
        assert_eq!(v2.status, "hang");
        assert_eq!(v2.culprits.len(), 1);
        assert_eq!(v2.culprits[0].rank, Some(2));
    }

    #[test]
    fn the_culprit_not_the_victims() {
        let a = "a:1:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1 - Init START\n\
                 a:1:2 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer b<4242>\n";
        let b = "b:2:2 [0] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1 - Init START\n\
                 b:2:3 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9637892 bytes, error: No space left on device (28)\n";
        let s: Vec<LogSummary> = [("a", a), ("b", b)]
            .iter()
            .map(|(n, l)| explain_reader(n, l.as_bytes()).unwrap())
            .collect();
        let v = job_verdict(&s);
        assert_eq!(v.status, "fail");
        assert_eq!(v.root_cause.as_ref().unwrap().category, Category::Shm);
        assert_eq!(v.culprits.len(), 1);
        assert_eq!(v.culprits[0].rank, Some(1));
        assert_eq!(v.consequences_only.len(), 1);
        assert_eq!(v.consequences_only[0].rank, Some(0));
    }

    proptest! {
        #[test]
        fn any_bytes_give_a_result_or_a_clear_error(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            match explain_reader("fuzz", &bytes[..]) {
                Ok(s) => prop_assert!(s.lines <= bytes.len() as u64 + 1),
                Err(e) => prop_assert_eq!(e.kind(), std::io::ErrorKind::InvalidData),
            }
        }
    }
}
