//! `nccl-smoke explain`: the classifier applied offline to NCCL logs from any job.
//!
//! Logs are read as bytes, line by line, with a cap on line length, so binary, truncated or
//! huge input gives a result in bounded memory instead of an error or a panic.

use super::classify::{self, Finding};
use serde::Serialize;
use std::io::{BufRead, BufReader, Read};

/// Longest line kept; the rest of a longer line is skipped.
const MAX_LINE: usize = 64 * 1024;

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
    pub stage: String,
    pub cause: String,
    pub hint: String,
    pub evidence: String,
    #[serde(skip)]
    pub exit_code: u8,
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
            let host = parts.next().filter(|h| !h.is_empty()).map(String::from);
            return (host, Some(pid), Some(device));
        }
    }
    (None, None, None)
}

/// Reads one log and classifies each NCCL WARN line and error line; one finding per distinct
/// (stage, host, pid) so a log that repeats itself does not drown the report.
pub fn explain_reader(file: &str, input: impl Read) -> std::io::Result<LogSummary> {
    let mut reader = BufReader::new(input);
    let mut summary = LogSummary {
        file: file.to_string(),
        ..LogSummary::default()
    };
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = read_capped_line(&mut reader, &mut buf, &mut summary.truncated_lines)?;
        if n == 0 {
            break;
        }
        summary.lines += 1;
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end();
        if line.contains(" NCCL ") {
            summary.nccl_lines += 1;
        }
        if let Some(f) = classify::classify([line]).or_else(|| classify::advise([line])) {
            let line_no = summary.lines;
            add(&mut summary, f, line_no, line);
        }
    }
    Ok(summary)
}

fn add(summary: &mut LogSummary, f: Finding, line_no: u64, line: &str) {
    let (host, pid, device) = parse_prefix(line);
    let stage = f.stage.name().to_string();
    if summary
        .findings
        .iter()
        .any(|l| l.stage == stage && l.host == host && l.pid == pid)
    {
        return;
    }
    summary.findings.push(Located {
        file: summary.file.clone(),
        line: line_no,
        host,
        pid,
        device,
        stage,
        cause: f.cause.to_string(),
        hint: f.hint.to_string(),
        evidence: f.evidence,
        exit_code: f.stage.exit_code(),
    });
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
            return Ok(consumed);
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
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
    }

    #[test]
    fn one_finding_per_stage_and_process() {
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
        log.extend_from_slice(b"\nh:1:1 [0] NCCL WARN NET/IB : No device found.\n");
        let s = explain_reader("big.log", &log[..]).unwrap();
        assert_eq!((s.lines, s.truncated_lines), (2, 1));
        assert_eq!(s.findings[0].stage, "connect:net");
    }

    proptest! {
        #[test]
        fn any_bytes_give_a_result(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let s = explain_reader("fuzz", &bytes[..]).unwrap();
            prop_assert!(s.lines <= bytes.len() as u64 + 1);
        }
    }
}
