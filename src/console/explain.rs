//! What `nccl-smoke explain` prints: each log's findings, the job's verdict, or the JSON
//! report; and the exit code.

use crate::diagnose::classify::Severity;
use crate::diagnose::explain::{self, JobVerdict, Limits, LogSummary, Who, clean};
use crate::stage::exit;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What `--json` prints.
#[derive(Serialize)]
struct Report<'a> {
    schema: &'static str,
    files: &'a [LogSummary],
    errors: &'a [FileError],
    /// `null` when no input could be read as a log: nothing was judged.
    verdict: Option<&'a JobVerdict>,
}

#[derive(Serialize)]
struct FileError {
    file: String,
    error: String,
}

/// What `nccl-smoke explain` reads: the files, and how much of each and for how long.
pub struct Inputs<'a> {
    pub logs: &'a [PathBuf],
    pub json: bool,
    pub max_bytes: u64,
    pub time_limit: Duration,
}

/// Reads and judges the logs of `inputs`, prints the findings and the job's verdict, and
/// returns the exit code: the verdict's, or `USAGE` when a file could not be read.
pub fn run(inputs: &Inputs) -> u8 {
    let mut summaries: Vec<LogSummary> = Vec::new();
    let mut errors: Vec<FileError> = Vec::new();
    for path in inputs.logs {
        let name = clean(&path.display().to_string());
        let limits = Limits {
            max_bytes: inputs.max_bytes,
            deadline: Some(Instant::now() + inputs.time_limit),
        };
        match read_one(path, &name, limits, inputs.time_limit) {
            Ok(s)
                if s.stopped.is_none()
                    && let Some(why) = s.nothing_to_judge() =>
            {
                errors.push(FileError {
                    file: name,
                    error: why.to_string(),
                });
            }
            Ok(s) => {
                if let Some(why) = &s.stopped {
                    errors.push(FileError {
                        file: name.clone(),
                        error: format!("{why}; the findings cover what was read"),
                    });
                }
                summaries.push(s);
            }
            Err(e) => errors.push(FileError {
                file: name,
                error: e,
            }),
        }
    }
    for e in &errors {
        eprintln!("nccl-smoke explain: {}: {}", e.file, e.error);
    }
    let verdict = explain::job_verdict(&summaries);
    // Nothing read is nothing judged: no verdict, not a pass.
    let judged = !summaries.is_empty();
    if inputs.json {
        let report = Report {
            schema: "nccl-smoke/explain/3",
            files: &summaries,
            errors: &errors,
            verdict: judged.then_some(&verdict),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else if judged {
        print_text(&summaries, &verdict);
    } else {
        println!("# explain: no input could be read and judged as a log (above): no verdict");
    }
    if errors.is_empty() {
        verdict.exit_code
    } else {
        exit::USAGE
    }
}

/// Reads one file (or stdin) on a worker thread, so that a FIFO with no writer or a pipe that
/// never ends cannot hold `explain` past the time limit.
fn read_one(
    path: &Path,
    name: &str,
    limits: Limits,
    limit: Duration,
) -> Result<LogSummary, String> {
    if name != "-" {
        match std::fs::metadata(path) {
            Err(e) => return Err(format!("cannot read: {e}")),
            Ok(m) if m.is_dir() => {
                return Err(
                    "is a directory: give the log files in it (e.g. DIR/nccl.*)".to_string()
                );
            }
            Ok(_) => {}
        }
    }
    let (tx, rx) = mpsc::channel();
    let path = path.to_path_buf();
    let label = name.to_string();
    std::thread::spawn(move || {
        let r = if label == "-" {
            explain::explain_reader_limited("(stdin)", std::io::stdin().lock(), limits)
        } else {
            std::fs::File::open(&path)
                .and_then(|f| explain::explain_reader_limited(&label, f, limits))
        };
        let _ = tx.send(r);
    });
    match rx.recv_timeout(limit + Duration::from_secs(1)) {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData => Err(e.to_string()),
        Ok(Err(e)) => Err(format!("cannot read: {e}")),
        Err(_) => Err(format!(
            "no end of input within {}s (a FIFO with no writer, or a stream that never ends?); \
             see --time-limit",
            limit.as_secs()
        )),
    }
}

fn print_text(summaries: &[LogSummary], v: &JobVerdict) {
    let lines: u64 = summaries.iter().map(|s| s.lines).sum();
    let nccl: u64 = summaries.iter().map(|s| s.nccl_lines).sum();
    println!(
        "# explain: {} file(s), {lines} lines, {nccl} NCCL lines",
        summaries.len()
    );
    for s in summaries {
        if s.lines > 0 && s.nccl_lines == 0 && s.findings.is_empty() {
            println!(
                "# {}: no NCCL log lines (was NCCL_DEBUG set to WARN or INFO?)",
                s.file
            );
        }
        for f in &s.findings {
            let word = match f.severity {
                Severity::Fail | Severity::Advice | Severity::Hang => "FINDING",
                Severity::Consequence => "CONSEQUENCE",
                Severity::Note => "NOTE",
            };
            let mut at = Vec::new();
            if let Some(r) = f.rank {
                at.push(format!("rank {r}"));
            }
            if let Some(h) = &f.host {
                at.push(format!("host {h}"));
            }
            if let Some(p) = f.pid {
                at.push(format!("pid {p}"));
            }
            if let Some(d) = f.device {
                at.push(format!("cuda device {d}"));
            }
            let at = if at.is_empty() {
                String::new()
            } else {
                format!(" on {}", at.join(", "))
            };
            println!(
                "{word} {}{at} ({}:{}) [{}]",
                f.stage,
                f.file,
                f.line,
                f.category.name()
            );
            println!("  evidence: {}", f.evidence);
            if let Some(c) = &f.code {
                println!("  code: {c}");
            }
            if f.severity != Severity::Note {
                println!("  likely cause: {}", f.cause);
                println!("  try: {}", f.hint);
            }
        }
    }
    print_verdict(v);
}

fn names(whos: &[Who]) -> String {
    const SHOWN: usize = 8;
    let mut out: Vec<String> = whos.iter().take(SHOWN).map(Who::describe).collect();
    if whos.len() > SHOWN {
        out.push(format!("and {} more", whos.len() - SHOWN));
    }
    out.join("; ")
}

fn print_verdict(v: &JobVerdict) {
    match (&v.root_cause, v.status.as_str()) {
        (Some(root), _) => {
            let status = match root.severity {
                Severity::Hang => "HANG",
                Severity::Consequence => "FAIL (consequences only)",
                _ => "FAIL",
            };
            println!(
                "VERDICT {status} at {} [{}]",
                root.stage,
                root.category.name()
            );
            if !v.culprits.is_empty() {
                let what = if root.severity == Severity::Hang {
                    "fell silent first"
                } else {
                    "root cause on"
                };
                println!("  {what}: {}", names(&v.culprits));
            }
            println!("  evidence: {}", root.evidence);
            println!("  likely cause: {}", root.cause);
            println!("  try: {}", root.hint);
            if root.severity == Severity::Consequence {
                println!(
                    "  no log here names the cause: the rank that failed first is missing from these logs"
                );
            }
            for p in &v.peers_named {
                if p.in_logs {
                    println!("  a victim names {}: its own log is among these", p.peer);
                } else {
                    println!(
                        "  a victim names {}: its log is not here; its first error is the cause to look for",
                        p.peer
                    );
                }
            }
        }
        (None, "hang") => {
            println!(
                "VERDICT HANG at {} [hang]",
                v.stage.as_deref().unwrap_or("run")
            );
            if !v.culprits.is_empty() {
                println!("  fell silent first: {}", names(&v.culprits));
            }
        }
        (None, "unknown") => {
            println!(
                "VERDICT UNKNOWN: {} error line(s) that no known signature names; not a PASS. \
                 Quoted (read them, and the lines before them):",
                v.unexplained_total
            );
            for q in &v.unexplained {
                println!("  {}:{}: {}", q.file, q.line, q.text);
            }
        }
        (None, "pass") => {
            println!("VERDICT PASS: the log shows a finished run and no failure");
            if let Some(q) = &v.completed {
                println!("  evidence: {}:{}: {}", q.file, q.line, q.text);
            }
        }
        // Logs alone never prove a pass: a rank killed, or hung without a WARN, leaves none.
        (None, "advice") => println!(
            "VERDICT NO FAILURE FOUND, with advice (see the FINDING above): no known failure \
             signature found; not a PASS: a rank killed or hung leaves no WARN line"
        ),
        _ => println!(
            "VERDICT NO FAILURE FOUND: no error line, but nothing shows the run finished (a \
             nccl-tests footer, NCCL's 'Destroy COMPLETE'); not a PASS: a rank killed or hung \
             leaves no WARN line"
        ),
    }
    if v.root_cause.is_some() && v.unexplained_total > 0 {
        const SHOWN: usize = 5;
        println!(
            "  unexplained: {} other error line(s) no signature names:",
            v.unexplained_total
        );
        for q in v.unexplained.iter().take(SHOWN) {
            println!("    {}:{}: {}", q.file, q.line, q.text);
        }
    }
    if let Some(h) = &v.hang {
        println!("  hang: {}", h.summary);
    }
    if !v.consequences_only.is_empty() {
        println!(
            "  only consequences (victims, not the cause): {}",
            names(&v.consequences_only)
        );
    }
    for f in &v.other_failures {
        println!(
            "  also: {} [{}] on {}: {}",
            f.stage,
            f.category.name(),
            f.who().describe(),
            f.evidence
        );
    }
    if v.version_mismatch {
        let listing: Vec<String> = v
            .versions
            .iter()
            .map(|(ver, w)| format!("{ver} ({} process(es))", w.len()))
            .collect();
        println!(
            "  NCCL versions differ across ranks: {}",
            listing.join(", ")
        );
    }
}
