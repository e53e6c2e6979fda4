//! Reading one log: bounded line reads, the binary check, and the per-line state that turns
//! NCCL's lines into findings and last operations.

use super::evidence;
use super::prefix::{nccl_version, number_after, parse_prefix, word_after, wrapper_rank};
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
    /// Processes (host, pid) whose communicator init completed ("Init COMPLETE").
    init_done: std::collections::HashSet<(Option<String>, u32)>,
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

/// The stage of a finding: an allocation that NCCL itself reports (an `NCCL WARN` line) failed
/// inside NCCL, not in nccl-smoke's own buffer allocation, so it is at init before this
/// process's "Init COMPLETE", and at connect after it (buffers per peer are made on the first
/// operation through it); `run` names it the same way (a failed `ncclCommInitRank` is init).
/// Other findings keep their signature's stage.
fn own_allocation_stage(stage: Stage, line: &str, init_done: impl FnOnce() -> bool) -> Stage {
    if stage != Stage::Alloc || !line.contains("NCCL WARN") {
        return stage;
    }
    if init_done() {
        Stage::Connect
    } else {
        Stage::Init
    }
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
        if found.is_none() && evidence::wrong_values(line) {
            found = classify::wrong_data_finding(line);
        }
        let named = found.is_some();
        let note = found
            .as_ref()
            .is_some_and(|f| f.severity <= Severity::Advice);
        if let Some(f) = found {
            let crash = f.signature == "crash";
            let before = self.summary.findings.len();
            self.add(f, line);
            if crash && self.summary.findings.len() > before {
                self.place_crash(line);
            }
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
        if self.summary.completed.is_none() && evidence::completion(line) {
            self.summary.completed = Some(quote(self));
        }
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

    /// INFO lines: version, communicator membership, NCCL's own operation counter.
    fn info(&mut self, line: &str) {
        if has!(line, " -> ") || has!(line, "retrying") || !self.retrying.is_empty() {
            self.trace_or_retry(line);
        }
        if has!(line, "Using network ") {
            self.network = network_of(line).or(self.network);
        }
        if has!(line, " via NET/Socket") {
            let (host, pid, _) = parse_prefix(line);
            self.socket_transport.insert((host, pid));
        }
        if has!(line, "NCCL version ") {
            self.version(line);
        } else if has!(line, " nranks ")
            && (has!(line, "Init COMPLETE") || has!(line, "Init START"))
        {
            let (host, pid, _) = parse_prefix(line);
            if let Some(pid) = pid
                && has!(line, "Init COMPLETE")
            {
                self.init_done.insert((host.clone(), pid));
            }
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

    /// NCCL's error-return traces and connect retries (INFO lines that show a failure in
    /// progress when no WARN line says it).
    fn trace_or_retry(&mut self, line: &str) {
        let retry = has!(line, "connect returned") && has!(line, "retrying");
        let code = if retry {
            None
        } else {
            classify::return_trace(line).map(|(_, code)| code)
        };
        if !retry && code.is_none() && self.retrying.is_empty() {
            return;
        }
        let (host, pid, _) = parse_prefix(line);
        let key = (host, pid);
        if retry {
            self.retrying
                .insert(key, (clean(line.trim()), self.summary.lines));
            return;
        }
        self.retrying.remove(&key);
        if code.is_some()
            && let Some(&i) = self.socket_warn.get(&key)
            && let Some(caller) = trace_caller(line)
        {
            // The first frame past the socket layer says whose socket failed, and its
            // subsystem's cause replaces the socket text's guess. A peer that closed a
            // connection is a consequence on the proxy's and the transports' sockets; on the
            // bootstrap's, before any operation, the rendezvous itself failed there (a rank
            // that died in init, or a connection that was not a rank's reaching NCCL's
            // bootstrap port, which misc/socket.cc's socketFinalizeAccept ignores from v2.27.3-1 on).
            let f = &mut self.summary.findings[i];
            if f.severity == Severity::Consequence && caller.0 != Category::Bootstrap {
                self.socket_warn.remove(&key);
                return;
            }
            f.category = caller.0;
            f.stage = caller.1.name().to_string();
            f.exit_code = caller.1.exit_code();
            if f.severity == Severity::Consequence {
                f.cause = format!(
                    "a connection of NCCL's bootstrap closed before the rendezvous finished \
                     (traced back to {}): a rank died or was killed during init, or something \
                     that is not a rank (a port scanner, a health check) connected to the \
                     bootstrap port, which NCCL before 2.27.3 takes for a rank",
                    clean(line.trim())
                );
                f.hint = "read the first error of the other ranks' logs; if none failed, look for \
                          probes of the job's ports (NCCL 2.27.3+ ignores them), and pin the \
                          bootstrap to an interface they do not reach (NCCL_SOCKET_IFNAME)"
                    .to_string();
            } else if let Some(by) = classify::location_finding(line) {
                f.cause = format!(
                    "{}: the call that failed is the socket it uses (the evidence), traced back \
                     to {}",
                    by.cause,
                    clean(line.trim())
                );
                f.hint = by.hint.to_string();
            }
            self.socket_warn.remove(&key);
        }
        if code.is_none_or(|c| c == 0 || c == 7) {
            return;
        }
        // The process's first failing trace is kept; a later one may name the caller of a
        // first that is in the socket layer.
        let first_in_socket_layer = self
            .traces
            .iter()
            .find(|(k, ..)| *k == key)
            .map(|(_, first, _)| socket_layer(first));
        match first_in_socket_layer {
            None => self
                .traces
                .push((key, clean(line.trim()), self.summary.lines)),
            Some(true)
                if !self.trace_callers.contains_key(&key) && trace_caller(line).is_some() =>
            {
                self.trace_callers.insert(key, clean(line.trim()));
            }
            Some(_) => {}
        }
    }

    /// A finding for each process whose log shows NCCL failing without a WARN of its own: the
    /// first error-return trace, placed by its source file; or connect retries the log ends in.
    fn silent_failures(&mut self) {
        let has_failure = |s: &Self, key: &HostPid| {
            s.summary
                .findings
                .iter()
                .any(|f| f.severity >= Severity::Consequence && (f.host.clone(), f.pid) == *key)
        };
        // In the log's order, not the map's (which differs from run to run).
        let mut retrying: Vec<_> = std::mem::take(&mut self.retrying).into_iter().collect();
        retrying.sort_by_key(|(_, (_, no))| *no);
        for (key, (line, no)) in retrying {
            if has_failure(self, &key) {
                continue;
            }
            if let Some(f) = classify::retry_finding(&line) {
                self.add_at(f, &line, no);
            }
        }
        let traces = std::mem::take(&mut self.traces);
        for (key, line, no) in traces {
            if has_failure(self, &key) {
                continue;
            }
            // A failure in the socket layer belongs to the subsystem whose frame follows it
            // (a peer's failure, 6, and a CUDA call's, 1, keep their own reading).
            let own_code = classify::return_trace(&line).is_some_and(|(_, c)| c == 1 || c == 6);
            let by_caller = self
                .trace_callers
                .get(&key)
                .filter(|_| !own_code)
                .and_then(|caller| classify::location_finding(caller));
            if let Some(mut f) = by_caller.or_else(|| classify::trace_finding(&line)) {
                f.evidence = line.clone();
                self.add_at(f, &line, no);
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

    /// A crash (the finding just added) is placed where its process was last: the newest
    /// NCCL line of the same pid (and host, when both say it) that names a subsystem. A crash
    /// report that names no process, or whose process has no such line, stays a crash at run.
    fn place_crash(&mut self, line: &str) {
        let Some((host, pid)) = crash_process(line) else {
            return;
        };
        let place = self.recent.iter().rev().find_map(|(no, l)| {
            let (h, p, _) = parse_prefix(l);
            let same = p == Some(pid)
                && (host.is_none() || h.is_none() || h.as_deref() == host.as_deref());
            if !same {
                return None;
            }
            classify::place_of(l).map(|(c, s)| (c, s, *no, clean(l.trim())))
        });
        let Some(f) = self.summary.findings.last_mut() else {
            return;
        };
        f.host = f.host.take().or(host);
        f.pid = f.pid.or(Some(pid));
        if let Some((category, stage, no, last)) = place {
            f.category = category;
            f.stage = stage.name().to_string();
            f.exit_code = stage.exit_code();
            f.cause = format!(
                "{}; its last NCCL line before the crash (line {no}) places it in {}: {last}",
                f.cause,
                category.name()
            );
        }
    }

    /// A refused connection of the socket layer whose caller no trace names is the
    /// bootstrap's when the process never printed a channel over NCCL's socket transport: the
    /// transports connect to listeners their peer has just announced, the bootstrap to the
    /// root's address from the unique id, which nothing may be listening at yet or any more
    /// (guess: NCCL prints no caller with NCCL_DEBUG=WARN; the order of connects follows
    /// v2.19.3-1 src/bootstrap.cc and src/transport/net_socket.cc).
    fn refusals_without_caller(&mut self) {
        let pending: Vec<(HostPid, usize)> = self.socket_warn.drain().collect();
        for (key, i) in pending {
            if self.socket_transport.contains(&key) {
                continue;
            }
            let f = &mut self.summary.findings[i];
            if f.severity != Severity::Fail || !has!(f.evidence, "Connection refused") {
                continue;
            }
            f.category = Category::Bootstrap;
            f.stage = Stage::Init.name().to_string();
            f.exit_code = Stage::Init.exit_code();
            f.cause = "a rank's connection was refused and no trace names the caller: with no \
                       channel over NCCL's socket transport, it is the bootstrap (the root or a ring \
                       neighbour not listening at the address the unique id gave: not started yet, \
                       already exited, or a stale NCCL_COMM_ID / MASTER_ADDR)"
                .to_string();
            f.hint = "start every rank of the job (and the root first), check that the unique id is \
                      this job's, and that NCCL_SOCKET_IFNAME names an address the other ranks reach"
                .to_string();
        }
    }

    /// A net plugin that could not load is only advice while NCCL goes on with its own
    /// networks; when NCCL_NET then asks for a network that is not there ("Error: network %s
    /// not found.", src/net.cc ncclNetInit), the plugin's failure is what failed the init.
    fn plugin_behind_missing_network(&mut self) {
        let findings = &mut self.summary.findings;
        if !findings.iter().any(|f| f.signature == "net-not-found") {
            return;
        }
        for f in findings
            .iter_mut()
            .filter(|f| f.signature == "net-plugin-version")
        {
            f.severity = Severity::Fail;
            f.cause = format!(
                "{}; and NCCL_NET asks for the network that plugin brings, so the init fails \
                 ('network … not found' follows)",
                f.cause
            );
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
        let no = self.summary.lines;
        self.add_at(f, line, no);
    }

    fn add_at(&mut self, f: Finding, line: &str, line_no: u64) {
        let (host, pid, device) = parse_prefix(line);
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
        let stage = own_allocation_stage(f.stage, line, || {
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

/// The NCCL text XLA quotes in its error status: `… NCCL operation X failed: <error string>.
/// Last NCCL warning(error) log entry (may be unrelated) '<text>'.` (openxla/xla
/// xla/backends/gpu/collectives nccl_errors / nccl_api ToStatus, quoting ncclGetLastError).
fn xla_last_warn(line: &str) -> Option<&str> {
    const MARK: &str = "Last NCCL warning(error) log entry";
    let at = line.find(MARK)?;
    let rest = &line[at + MARK.len()..];
    let rest = rest.strip_prefix(" (may be unrelated)").unwrap_or(rest);
    let rest = rest.trim_start_matches([' ', ':']);
    let body = rest.strip_prefix('\'').unwrap_or(rest);
    let end = body.rfind('\'').unwrap_or(body.len());
    let text = body[..end].trim();
    (!text.is_empty()).then_some(text)
}

/// Whether a WARN or trace line comes from NCCL's shared socket layer (`misc/socket.cc`,
/// `include/socket.h`), not the IPC socket of cuMem handles (`misc/ipcsocket.cc`).
fn socket_layer(line: &str) -> bool {
    !has!(line, "ipcsocket")
        && (has!(line, "socket.h:") || has!(line, "/socket.cc:") || has!(line, " socket.cc:"))
}

/// The process a crash report names: Open MPI's `[host:pid] *** Process received signal ***`,
/// UCX's `[host:pid :0:tid] Caught signal 11 (…)`, torchelastic's `Signal 11 (SIGSEGV)
/// received by PID 1234`.
fn crash_process(line: &str) -> Option<(Option<String>, u32)> {
    if let Some(at) = line.find("received by PID ") {
        let pid = line[at + 16..]
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()?;
        return Some((None, pid));
    }
    let open = line.find('[')?;
    let inner = line[open + 1..].split([']', ' ']).next()?;
    let (host, pid) = inner.rsplit_once(':')?;
    let pid = pid.parse().ok()?;
    Some(((!host.is_empty()).then(|| clean(host)), pid))
}

/// The family of the network in `… NCCL INFO Using network NAME` (NCCL's own IB and Socket,
/// or a plugin's name: `IBext` (NVIDIA's SHARP plugin), `AWS Libfabric`, `gIB`, …): RDMA
/// networks are InfiniBand-like, the rest socket-like.
fn network_of(line: &str) -> Option<Category> {
    let at = line.find("Using network ")?;
    let name = line[at + 14..].trim();
    if name.is_empty() {
        return None;
    }
    // `IB` also names IBext and gIB.
    let rdma = ["IB", "Libfabric", "OFI"].iter().any(|k| name.contains(k));
    Some(if rdma {
        Category::NetIb
    } else {
        Category::NetSocket
    })
}

/// The subsystem a return-trace frame (`transport/net_ib.cc:407 -> 2`) belongs to, when it is
/// one that calls NCCL's socket layer: the IB transport (its out-of-band exchange), the socket
/// transport, the bootstrap or the proxy (src/diagnose/classify/nccl-sources.tsv).
fn trace_caller(line: &str) -> Option<(Category, Stage)> {
    let (printed, _) = classify::return_trace(line)?;
    let row = classify::sources::lookup(printed)?;
    let category = match row.subsystem {
        "loc-net-ib" => Category::NetIb,
        "loc-bootstrap" => Category::Bootstrap,
        "loc-proxy" => Category::Proxy,
        _ => return None,
    };
    Some((category, row.stage))
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn findings_of(log: &str) -> Vec<(String, Category, String)> {
        explain_reader("t.log", log.as_bytes())
            .unwrap()
            .findings
            .into_iter()
            .map(|f| (f.signature, f.category, f.stage))
            .collect()
    }

    /// NCCL's own structure when no WARN names the cause: the first `file:line -> N` trace
    /// places the failure; connect retries the log ends in are a failure to reach the peer; a
    /// socket-layer WARN belongs to the caller the traces after it name; the net transport's
    /// WARN to the network NCCL chose.
    #[test]
    fn traces_retries_callers_and_networks() {
        let traced = "h:1:2 [0] NCCL INFO transport/net_ib.cc:395 -> 2\nh:1:2 [0] NCCL INFO init.cc:300 -> 2\n";
        assert_eq!(
            findings_of(traced),
            vec![("loc-net-ib".into(), Category::NetIb, "connect:net".into())]
        );
        let remote = "h:1:2 [0] NCCL INFO misc/socket.cc:80 -> 6\n";
        assert_eq!(findings_of(remote)[0].1, Category::RemoteError);
        let retries = "h:1:2 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\n\
                       h:1:3 [0] NCCL INFO Call to connect returned Connection refused, retrying\n\
                       h:1:3 [0] NCCL INFO Call to connect returned Connection refused, retrying\n";
        assert_eq!(findings_of(retries)[0].0, "connect-retries");
        let recovered = "h:1:3 [0] NCCL INFO Call to connect returned Connection refused, retrying\n\
                         h:1:3 [0] NCCL INFO Connected all rings\n";
        assert!(findings_of(recovered).is_empty());
        let caller = "h:1:2 [0] include/socket.h:318 NCCL WARN Net : Socket creation failed : Address family not supported by protocol\n\
                      h:1:2 [0] NCCL INFO transport/net_ib.cc:407 -> 2\n";
        assert_eq!(findings_of(caller)[0].1, Category::NetIb);
        let net = "h:1:2 [0] NCCL INFO Using network IB\n\
                   h:1:2 [0] transport/net.cc:700 NCCL WARN something new in the net transport\n";
        assert_eq!(findings_of(net)[0].1, Category::NetIb);
        let net = "h:1:2 [0] NCCL INFO Using network Socket\n\
                   h:1:2 [0] transport/net.cc:700 NCCL WARN something new in the net transport\n";
        assert_eq!(findings_of(net)[0].1, Category::NetSocket);
    }

    /// The socket layer's failure belongs to its caller also when NCCL printed no WARN (the
    /// first trace is in misc/socket.cc, a later frame in bootstrap.cc), and a peer closing a
    /// bootstrap connection is the bootstrap's consequence, not a generic remote error.
    #[test]
    fn socket_failures_take_their_callers_subsystem() {
        let silent = "h:1:2 [4] NCCL INFO misc/socket.cc:666 -> 2\n\
                      h:1:2 [4] NCCL INFO bootstrap.cc:280 -> 2\n\
                      h:1:2 [4] NCCL INFO init.cc:1388 -> 2\n";
        assert_eq!(
            findings_of(silent),
            vec![("loc-bootstrap".into(), Category::Bootstrap, "init".into())]
        );
        let closed = "[0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer 10.0.1.3<36138>\n\
                      [0] NCCL INFO misc/socket.cc:80 -> 6\n\
                      [0] NCCL INFO bootstrap.cc:701 -> 6\n";
        let s = explain_reader("t.log", closed.as_bytes()).unwrap();
        assert_eq!(s.findings.len(), 1, "{:?}", s.findings);
        assert_eq!(s.findings[0].category, Category::Bootstrap);
        assert_eq!(s.findings[0].severity, Severity::Consequence);
        assert!(s.findings[0].cause.contains("bootstrap.cc:701"));
        // The same close on the proxy's socket stays a consequence of a peer's failure.
        let proxy = closed.replace("bootstrap.cc:701", "proxy.cc:1200");
        assert_eq!(findings_of(&proxy)[0].1, Category::RemoteError);
    }

    /// A refused connect with no caller is the bootstrap's, unless the process ran channels
    /// over the socket transport.
    #[test]
    fn a_refusal_without_caller_is_the_bootstraps() {
        let refused = "node1:63799:64163 [7] include/socket.h:387 NCCL WARN Connect to 10.0.0.1<52473> failed : Connection refused\n";
        assert_eq!(findings_of(refused)[0].1, Category::Bootstrap);
        let transport = format!(
            "node1:63799:64163 [7] NCCL INFO Channel 00/0 : 7[7] -> 0[0] [send] via NET/Socket/0\n{refused}"
        );
        assert_eq!(findings_of(&transport)[0].1, Category::NetSocket);
    }

    /// A crash is placed where its process was last in NCCL; one whose process said nothing
    /// stays a crash at run.
    #[test]
    fn a_crash_is_placed_by_its_process_last_nccl_line() {
        let log = "node1:405884:407462 [0] NCCL INFO NCCL_IB_FIFO_TC set by environment to 224.\n\
                   node2:77:78 [7] NCCL INFO NET/IB: IbDev 4 Port 1 qpn 103534 set_ece={supported=1}\n\
                   node1:405884:407462 [0] NCCL INFO RAS client listening socket at ::1<28028>\n\
                   node2:77:78 [7] NCCL INFO NET/IB: IbDev 4 Port 1 qpn 103535 set_ece={supported=1}\n\
                   [node1:405884] *** Process received signal ***\n";
        let s = explain_reader("t.log", log.as_bytes()).unwrap();
        let f = &s.findings[0];
        assert_eq!((f.signature.as_str(), f.category), ("crash", Category::Ras));
        assert_eq!((f.host.as_deref(), f.pid), (Some("node1"), Some(405884)));
        assert!(f.cause.contains("line 3"), "{}", f.cause);
        let ucx = "h:5665:5801 [2] NCCL INFO Channel 00/0 : 2[2] -> 3[3] via NET/IB/0\n\
                   [h:5665 :0:5665] Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))\n";
        assert_eq!(findings_of(ucx)[0].1, Category::NetIb);
        let unknown = "Segmentation fault (core dumped)\n";
        assert_eq!(
            findings_of(unknown),
            vec![("crash".into(), Category::Run, "run".into())]
        );
    }

    /// NCCL_NET naming a network whose plugin failed to load: the plugin's failure is the
    /// cause, not only advice.
    #[test]
    fn a_plugin_that_did_not_load_fails_the_network_asked_for() {
        let log = "n:556:556 [1] NCCL INFO NET/Plugin: Plugin load returned 2 : /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by /usr/lib/libnccl-net.so) : when loading libnccl-net.so\n\
                   n:556:556 [1] net.cc:579 NCCL WARN Error: network gIB not found.\n";
        let s = explain_reader("t.log", log.as_bytes()).unwrap();
        let plugin = s
            .findings
            .iter()
            .find(|f| f.signature == "net-plugin-version")
            .unwrap();
        assert_eq!(plugin.severity, Severity::Fail);
        let v = super::super::job_verdict(std::slice::from_ref(&s));
        assert_eq!(
            v.root_cause.map(|r| r.signature).as_deref(),
            Some("net-plugin-version")
        );
        // Without NCCL_NET asking for it, the same line stays advice.
        let alone = log.lines().next().unwrap();
        let s = explain_reader("t.log", alone.as_bytes()).unwrap();
        assert_eq!(s.findings[0].severity, Severity::Advice);
    }

    /// An error line of the MPI family that no signature names is that family's finding; an
    /// error line of no known family stays unexplained and quoted.
    #[test]
    fn the_mpi_family_reads_its_own_unnamed_errors() {
        let mpi = "[node1][[1234,1],0][btl_tcp_endpoint.c:803:mca_btl_tcp_endpoint_complete_connect] connect() to 10.0.0.2 failed: No route to host (113)\n";
        let s = explain_reader("t.log", mpi.as_bytes()).unwrap();
        assert_eq!(s.findings[0].signature, "mpi-family");
        assert_eq!(s.unexplained_total, 0);
        let other = "frobnicator: fatal: the widget failed\n";
        let s = explain_reader("t.log", other.as_bytes()).unwrap();
        assert!(s.findings.is_empty());
        assert_eq!(s.unexplained_total, 1);
        let srun = "srun: error: node1: task 3: Exited with exit code 1\n";
        assert_eq!(findings_of(srun)[0].1, Category::RemoteError);
    }

    /// XLA's status quotes NCCL's last WARN: that text is read as the WARN it was.
    #[test]
    fn xla_quotes_the_last_nccl_warn() {
        let line = "INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL operation ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled cuda error (run with NCCL_DEBUG=INFO for details). Last NCCL warning(error) log entry (may be unrelated) 'Cuda failure 2 'out of memory''.";
        assert_eq!(xla_last_warn(line), Some("Cuda failure 2 'out of memory'"));
        assert_eq!(findings_of(line)[0].1, Category::Oom);
        assert_eq!(xla_last_warn("no quote here"), None);
    }

    /// ncclCommEnsureReady's refusal names an earlier failure, not a misuse at init.
    #[test]
    fn a_communicator_with_an_earlier_error_is_not_an_init_misuse() {
        let log = "n:1:1 [2] init.cc:303 NCCL WARN Attempt to use communicator before the previous operation returned ncclSuccess\n";
        assert_eq!(
            findings_of(log),
            vec![("comm-async-error".into(), Category::NcclError, "run".into())]
        );
    }

    /// A repeated socket WARN of one process is one finding; the trace after the repeat still
    /// places that finding (it once pointed past the end of the findings and panicked).
    #[test]
    fn a_repeated_socket_warn_keeps_its_caller() {
        let warn = "h:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<1> failed : Connection refused\n";
        let log = format!("{warn}{warn}h:1:2 [0] NCCL INFO transport/net_ib.cc:407 -> 2\n");
        let found = findings_of(&log);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].1, Category::NetIb);
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
