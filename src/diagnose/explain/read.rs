//! Reading one log: bounded line reads, the binary check, and the per-line state that turns
//! NCCL's lines into findings and last operations.

use super::evidence;
use super::prefix::{
    nccl_version, number_after, parse_prefix, unreached_host, word_after, wrapper_rank,
};
use super::summary::{LastOp, Limits, Located, LogSummary, Quoted, UNEXPLAINED_KEPT, Who, clean};
use crate::diagnose::classify::{self, Category, Finding, LineKind, Severity};
use crate::stage::Stage;
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read};
use std::time::Instant;

/// Longest line kept; the rest of a longer line is skipped.
const MAX_LINE: usize = 64 * 1024;
/// How much of a file's start is checked for binary content.
const SNIFF: usize = 8 * 1024;
/// How many of the last NCCL lines are kept to place a crash by its process's last step.
const RECENT: usize = 256;

mod inferred;
mod input;
mod quoted;
mod trace;
use inferred::stage_of;
use input::{looks_binary, read_capped_line};
use quoted::xla_last_warn;
use trace::socket_layer;

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

/// A process by what NCCL's prefix and a wrapper's tag say: host, pid, rank.
type ProcKey = (Option<String>, Option<u32>, Option<u32>);

/// A process by NCCL's prefix alone: host, pid.
type HostPid = (Option<String>, Option<u32>);

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
    /// (category, severity, host, pid, rank) already reported.
    seen: std::collections::HashSet<(Category, Severity, ProcKey)>,
    /// Processes (host, pid) whose init completed ("Init COMPLETE"); whose net plugin's failed.
    init_done: std::collections::HashSet<(Option<String>, u32)>,
    plugin_init_failed: std::collections::HashSet<(Option<String>, u32)>,
    /// A nccl-tests results header was read and its footer not yet.
    in_sweep: bool,
    /// Per process: the finding of its last WARN from NCCL's shared socket layer
    /// (`misc/socket.cc`, `include/socket.h`), whose caller (bootstrap, the IB or socket
    /// transport, the proxy) the error-return traces after it name.
    socket_warn: HashMap<HostPid, usize>,
    /// Processes that printed a channel over NCCL's socket transport (`… via NET/Socket/…`,
    /// src/transport/net.cc).
    socket_transport: std::collections::HashSet<HostPid>,
    /// Inside an Open MPI help block (between two lines of dashes).
    help_block: Option<HelpBlock>,
    /// nccl-tests' `maxBytes N` from its first line: a row at that size is the sweep's last.
    max_bytes: Option<u64>,
    /// The network NCCL said it uses (`NCCL INFO Using network IB`, src/init.cc since v2.6.4-1):
    /// the net transport's failures are that network's.
    network: Option<Category>,
    /// Per process (host, pid): the first of NCCL's error-return traces (`file:line -> N`,
    /// NCCLCHECK in src/include/checks.h since v2.4) and its line number.
    traces: Vec<(HostPid, String, u64)>,
    /// Per process whose first trace is in NCCL's shared socket layer: the first later frame
    /// that names the socket's user (bootstrap, proxy, IB transport), as that frame's line.
    trace_callers: HashMap<HostPid, String>,
    /// The last [`RECENT`] NCCL lines and their numbers (buffers reused): where a process
    /// that crashed was last.
    recent: VecDeque<(u64, String)>,
    /// A line outside NCCL's own named a call that creates a communicator (a traceback
    /// through ncclCommInitRank or init_process_group): see `wrapper_errors_at_init`.
    init_call: bool,
    /// A crash no NCCL line of its process placed: its finding, for the first stack frame
    /// after it that names an NCCL source file.
    unplaced_crash: Option<usize>,
    /// Per process: its last connect retry (`Call to connect returned …, retrying`,
    /// `socketPollConnect: connect returned …, retrying`), cleared by any later NCCL line of
    /// that process.
    retrying: HashMap<HostPid, (String, u64)>,
}

/// An Open MPI help block being read (between two lines of dashes): the unexplained count,
/// the quotes kept and the findings when it began, and whether a line of it was a known benign
/// note. A block that is a known note takes its other lines with it ("Error code: 2" of an
/// xpmem fallback).
struct HelpBlock {
    unexplained_total: u64,
    unexplained_kept: usize,
    findings: usize,
    benign: bool,
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
            self.remember(line);
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
        self.init_call |= kind == LineKind::Other && inferred::names_init_call(line);
        self.plugin_init(line);
        let mut found = classify::classify_line(line, kind);
        // XLA quotes NCCL's last WARN (ncclGetLastError) after its own generic words: that
        // text names the cause the way PyTorch's "Last error:" line does.
        if kind == LineKind::Other
            && let Some(quoted) = xla_last_warn(line)
            && let Some(mut q) = classify::classify_line(quoted, LineKind::Warn)
            && found
                .as_ref()
                .is_none_or(|f| classify::is_generic(f.signature))
        {
            q.evidence = line.to_string();
            found = Some(q);
        }
        if found.is_none() && (evidence::wrong_values(line) || evidence::wrong_row(line)) {
            found = classify::wrong_data_finding(line);
        }
        let named = found.is_some();
        let note = found
            .as_ref()
            .is_some_and(|f| f.severity <= Severity::Advice);
        if let Some(f) = found {
            let crash = matches!(f.signature, "crash" | "bus-error");
            let relocate = f.signature == "crash";
            let before = self.summary.findings.len();
            self.add(f, line);
            if crash && self.summary.findings.len() > before {
                self.place_crash(line, relocate);
            }
        } else {
            self.place_crash_by_frame(line);
        }
        self.evidence(line, kind, named);
        self.help_block(line, note);
    }

    /// Open MPI's help blocks: a line of dashes opens and closes each.
    fn help_block(&mut self, line: &str, note: bool) {
        let body = line.rsplit_once(">:").map_or(line, |(_, b)| b).trim();
        let dashes = body.len() >= 20 && body.bytes().all(|b| b == b'-');
        match (&mut self.help_block, dashes) {
            (None, true) => {
                self.help_block = Some(HelpBlock {
                    unexplained_total: self.summary.unexplained_total,
                    unexplained_kept: self.summary.unexplained.len(),
                    findings: self.summary.findings.len(),
                    benign: false,
                })
            }
            (Some(block), true) => {
                if block.benign {
                    self.summary.unexplained_total = block.unexplained_total;
                    self.summary.unexplained.truncate(block.unexplained_kept);
                    // The family's generic findings inside a benign block are its notes.
                    for f in &mut self.summary.findings[block.findings..] {
                        if f.signature == "mpi-family" {
                            f.severity = Severity::Note;
                        }
                    }
                }
                self.help_block = None;
            }
            (Some(block), false) => block.benign |= note,
            (None, false) => {}
        }
    }

    /// Completion, an open nccl-tests sweep, and error lines no signature named.
    fn evidence(&mut self, line: &str, kind: LineKind, named: bool) {
        let quote = |s: &Self| Quoted {
            file: s.summary.file.clone(),
            line: s.summary.lines,
            text: clean(line.trim()),
        };
        if evidence::completion(line) {
            if self.summary.completed.is_none() {
                self.summary.completed = Some(quote(self));
            }
            // A communicator destroyed after the sweep's last row (nccl-tests destroys its
            // communicators once the sweep is over): the log does not end inside the sweep,
            // whether or not the footer made it into the paste.
            self.in_sweep = false;
            self.summary.sweep_open = None;
        }
        self.summary.addresses.extend(evidence::own_addresses(line));
        if kind != LineKind::Info {
            let start = evidence::nccl_tests_start(line);
            if start || evidence::sweep_header(line) {
                if start {
                    self.max_bytes = super::prefix::number_after(line, "maxBytes ");
                }
                self.in_sweep = true;
                self.summary.sweep_open = Some(quote(self));
            } else if evidence::sweep_footer(line) {
                self.in_sweep = false;
                self.summary.sweep_open = None;
            } else if self.in_sweep
                && let Some(size) = evidence::sweep_row(line)
            {
                // The row at maxBytes is the last: a log that ends there lost only its footer.
                self.summary.sweep_open = if self.max_bytes.is_some_and(|m| size >= m) {
                    None
                } else {
                    Some(quote(self))
                };
            }
        }
        let error = match kind {
            LineKind::Warn => true,
            LineKind::Other => evidence::error_like(line),
            LineKind::Info => false,
        };
        if error
            && !named
            && kind == LineKind::Other
            && let Some(f) = classify::family_finding(line)
        {
            self.add(f, line);
            return;
        }
        if error && !named {
            self.summary.unexplained_total += 1;
            if self.summary.unexplained.len() < UNEXPLAINED_KEPT {
                self.summary.unexplained.push(quote(self));
            }
        }
    }

    fn remember(&mut self, line: &str) {
        // Full: the oldest line's buffer is reused; until then a new one is made.
        let full = self.recent.len() == RECENT;
        let mut slot = full
            .then(|| self.recent.pop_front())
            .flatten()
            .unwrap_or_default();
        slot.0 = self.summary.lines;
        slot.1.clear();
        slot.1.push_str(line);
        self.recent.push_back(slot);
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
        let no = self.summary.lines;
        self.add_at(f, line, no);
    }

    fn add_at(&mut self, f: Finding, line: &str, line_no: u64) {
        let (host, pid, device) = parse_prefix(line);
        let host = host.or_else(|| unreached_host(line));
        let rank = wrapper_rank(line);
        // One finding per family, severity and process: a benign note of a family (no
        // libibverbs) must not hide a failure of the same family on the same process.
        if !self
            .seen
            .insert((f.category, f.severity, (host.clone(), pid, rank)))
        {
            return;
        }
        // The generic net transport's finding belongs to the network NCCL chose.
        let mut f = f;
        if f.signature == "loc-net"
            && let Some(net) = self.network
        {
            f.category = net;
        }
        let stage = stage_of(&f, line, || {
            pid.is_some_and(|p| self.init_done.contains(&(host.clone(), p)))
        });
        self.summary.findings.push(Located {
            file: self.summary.file.clone(),
            line: line_no,
            host,
            pid,
            device,
            rank,
            stage: stage.name().to_string(),
            category: f.category,
            severity: f.severity,
            signature: f.signature.to_string(),
            cause: f.cause.to_string(),
            hint: f.hint.to_string(),
            evidence: clean(&f.evidence),
            code: classify::codes::decode(line),
            exit_code: stage.exit_code(),
        });
        // A failure NCCL's shared socket layer reports: the return traces after it name its
        // caller (`trace_or_retry`).
        let socket_layer = matches!(f.severity, Severity::Fail | Severity::Consequence)
            && LineKind::of(line) == LineKind::Warn
            && socket_layer(line);
        if socket_layer {
            let found = self.summary.findings.len() - 1;
            let who = &self.summary.findings[found];
            self.socket_warn.insert((who.host.clone(), who.pid), found);
        }
    }

    fn finish(mut self) -> LogSummary {
        self.silent_failures();
        self.refusals_without_caller();
        self.plugin_behind_missing_network();
        self.wrapper_errors_at_init();
        self.network_at_plugin_init();
        self.unique_id_callers();
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

#[cfg(test)]
mod tests;
