//! What a log says across its lines rather than in one: NCCL failing without a WARN, a crash
//! placed at its process's last step, a refusal without its caller, a net plugin behind a
//! missing network.

use super::*;

impl State {
    /// A finding for each process whose log shows NCCL failing without a WARN of its own: the
    /// first error-return trace, placed by its source file; or connect retries the log ends in.
    pub(super) fn silent_failures(&mut self) {
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
        // The proxy's relay of a failed operation leaves the cause to the traces after it.
        let named = |s: &Self, key: &HostPid| {
            s.summary.findings.iter().any(|f| {
                f.severity >= Severity::Consequence
                    && f.signature != "proxy-relay"
                    && (f.host.clone(), f.pid) == *key
            })
        };
        let traces = std::mem::take(&mut self.traces);
        for (key, line, no) in traces {
            if named(self, &key) {
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

    /// A crash (the finding just added) is placed where its process was last: the newest
    /// NCCL line of the same pid (and host, when both say it) that names a subsystem. A crash
    /// report that names no process, or whose process has no such line, stays a crash at run
    /// until a stack frame after it names NCCL's source file ([`Self::place_crash_by_frame`]).
    /// With `relocate` false (a bus error names its own cause) only its process is recorded.
    pub(super) fn place_crash(&mut self, line: &str, relocate: bool) {
        let index = self.summary.findings.len() - 1;
        let Some((host, pid)) = crash_process(line) else {
            self.unplaced_crash = relocate.then_some(index);
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
        if !relocate {
            return;
        }
        self.unplaced_crash = place.is_none().then_some(index);
        if let Some((category, stage, no, last)) = place {
            place_at(
                f,
                category,
                stage,
                &format!("its last NCCL line before the crash (line {no})"),
            );
            f.cause = format!("{}: {last}", f.cause);
        }
    }

    /// A stack frame after a crash that no NCCL line placed, naming a source file of NCCL
    /// (gdb's `#0  0x… in pathDistance (…) at graph/topo.cc:618`, a symbolised backtrace's
    /// `(src/transport/p2p.cc:243)`): the innermost such frame places the crash, by the same
    /// table as a WARN's file.
    pub(super) fn place_crash_by_frame(&mut self, line: &str) {
        let Some(i) = self.unplaced_crash else {
            return;
        };
        let Some((file, (category, stage))) = classify::frame_source(line) else {
            return;
        };
        self.unplaced_crash = None;
        let why = format!("the innermost frame of its stack in NCCL's own source ({file})");
        place_at(&mut self.summary.findings[i], category, stage, &why);
    }

    /// An NCCL error a wrapper reports with no line naming its cause (`NCCL error: unhandled
    /// system error`) is at init when the log names the call that creates the communicator
    /// ([`names_init_call`]): the wrapper's own words do not say which call failed, its caller
    /// does.
    pub(super) fn wrapper_errors_at_init(&mut self) {
        if !self.init_call {
            return;
        }
        for f in self.summary.findings.iter_mut().filter(|f| {
            f.signature == "wrapper-nccl-error"
                && f.stage == Stage::Run.name()
                && called(&f.evidence).is_none()
        }) {
            restage(
                f,
                Stage::Init,
                "the log names the call that creates the communicator (ncclCommInitRank, \
                 init_process_group), so it failed at init",
            );
        }
    }

    /// A refused connection of the socket layer whose caller no trace names is the
    /// bootstrap's when the process never printed a channel over NCCL's socket transport: the
    /// transports connect to listeners their peer has just announced, the bootstrap to the
    /// root's address from the unique id, which nothing may be listening at yet or any more
    /// (guess: NCCL prints no caller with NCCL_DEBUG=WARN; the order of connects follows
    /// v2.19.3-1 src/bootstrap.cc and src/transport/net_socket.cc).
    pub(super) fn refusals_without_caller(&mut self) {
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

    /// NCCL's lines before a program's report that ncclGetUniqueId failed (nccl-tests' check
    /// at its file and line, a call named in the message) come from that call: it runs before
    /// any communicator exists (src/init.cc ncclGetUniqueId: ncclInit, then the bootstrap's
    /// network and root), so a bootstrap or socket failure they show is the unique id's, not
    /// init's. Only that report's host (every host when it names none).
    pub(super) fn unique_id_callers(&mut self) {
        let reports: Vec<(u64, Option<String>)> = self
            .summary
            .findings
            .iter()
            .filter(|f| WRAPPER_RESULTS.contains(&f.signature.as_str()))
            .filter(|f| f.stage == Stage::UniqueId.name())
            .map(|f| (f.line, f.host.clone()))
            .collect();
        for (at, host) in reports {
            for f in self.summary.findings.iter_mut().filter(|f| {
                f.line < at
                    && f.severity == Severity::Fail
                    && f.stage == Stage::Init.name()
                    && (host.is_none() || f.host == host)
            }) {
                restage(
                    f,
                    Stage::UniqueId,
                    "the program then reports that ncclGetUniqueId failed, so it happened there",
                );
            }
        }
    }

    /// Notes a net plugin's own report that its init failed: aws-ofi-nccl's "aws-ofi-nccl
    /// initialization failed" (src/nccl_ofi_net.cpp nccl_net_ofi_create_plugin, v1.9; called
    /// through the plugin's init, which NCCL runs while it creates a communicator).
    pub(super) fn plugin_init(&mut self, line: &str) {
        if line.contains("aws-ofi-nccl initialization failed")
            && let (host, Some(pid), _) = crate::diagnose::explain::prefix::parse_prefix(line)
        {
            self.plugin_init_failed.insert((host, pid));
        }
    }

    /// A network failure of a process whose net plugin then said its init failed happened in
    /// that init (creating the plugin's endpoints, completion queues and domains), not in a
    /// connection to a peer: it is at init.
    pub(super) fn network_at_plugin_init(&mut self) {
        for f in self.summary.findings.iter_mut().filter(|f| {
            f.stage == Stage::ConnectNet.name()
                && f.pid
                    .is_some_and(|p| self.plugin_init_failed.contains(&(f.host.clone(), p)))
        }) {
            restage(
                f,
                Stage::Init,
                "the net plugin then said its own init failed, so this was NCCL's init",
            );
        }
    }

    /// A net plugin that could not load is only advice while NCCL goes on with its own
    /// networks; when NCCL_NET then asks for a network that is not there ("Error: network %s
    /// not found.", src/net.cc ncclNetInit), the plugin's failure is what failed the init.
    pub(super) fn plugin_behind_missing_network(&mut self) {
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

/// The stage of a finding. nccl-tests' own failure line is placed by the call at its file and
/// line (`classify::nccl_tests`), a wrapper's quote of NCCL's result by the NCCL call it names
/// ([`called`]); an IB port's async event by how far its process had got. Out of memory says what went wrong but not where: on an NCCL WARN line the
/// source file NCCL printed places it (the generated table: `enqueue.cc` is a launch,
/// `transport/p2p.cc` a buffer import). A CUDA error in NCCL's own allocation code
/// (`include/alloc.h`, `allocator.cc`) is the allocation's, whatever the error (cudaMalloc,
/// cuMemCreate, cuMemMap fail there at once), and so is every allocation explain names: the
/// `alloc` stage of a log is GPU memory that could not be had, NCCL's own during its init or
/// the program's (unlike `run`, whose stages are its own steps). A CUDA error printed elsewhere
/// is not placed by its file, for the call that reports it may only be the first to see a sticky
/// error of earlier work (CUDA runtime API, "Error Handling").
pub(super) fn stage_of(f: &Finding, line: &str, init_done: impl FnOnce() -> bool) -> Stage {
    if let Some(check) = classify::nccl_tests::placed(line) {
        return check.stage;
    }
    if WRAPPER_RESULTS.contains(&f.signature)
        && let Some((_, stage)) = called(line)
    {
        return stage;
    }
    // NET/IB's async thread (ncclIbAsyncThreadMain) reports a port's events whenever they
    // come, from init on: the event is at the stage its process had reached. Its words by
    // release: "Got async event : %s" (src/transport/net_ib.cc v2.4.8-1 to v2.22.3-1), "Got
    // async error event" (v2.23.4-1 on), "Got non-fatal async event" (src/transport/net_ib/
    // common.cc v2.28 on). Fatal events have their own signature (net-ib-async-fatal).
    if f.signature == "loc-net-ib" && IB_ASYNC_EVENTS.iter().any(|w| line.contains(w)) {
        return if init_done() { Stage::Run } else { Stage::Init };
    }
    match classify::warn_source(line) {
        Some(row)
            if row.stage == Stage::Alloc
                && matches!(f.category, Category::Oom | Category::Cuda) =>
        {
            Stage::Alloc
        }
        Some(row) if f.category == Category::Oom => row.stage,
        _ => f.stage,
    }
}

/// NET/IB's async-event WARNs, every release (see [`stage_of`]).
const IB_ASYNC_EVENTS: &[&str] = &[
    "Got async event",
    "Got async error event",
    "Got non-fatal async event",
];

/// The signatures of NCCL's result as a program around it quotes it, with no cause of their
/// own: the call the program names places them.
const WRAPPER_RESULTS: &[&str] = &["wrapper-invalid-usage", "wrapper-nccl-error"];

/// NCCL's API by the stage its call belongs to (src/nccl.h.in, v2.4.8-1 to v2.30.7-1):
/// ncclGetUniqueId makes the id; the ncclCommInit* calls and ncclCommSplit/ncclCommShrink make
/// a communicator; ncclMemAlloc allocates; the collectives and point-to-point calls run (their
/// first call through a peer also connects, which only NCCL's own lines can tell); ncclCommFinalize,
/// ncclCommDestroy and ncclCommAbort tear down. ncclGroupEnd is left out: it ends a group of
/// inits as well as of operations.
const CALLS: &[(&str, Stage)] = &[
    ("ncclGetUniqueId", Stage::UniqueId),
    ("ncclCommInitRank", Stage::Init),
    ("ncclCommInitRankConfig", Stage::Init),
    ("ncclCommInitRankScalable", Stage::Init),
    ("ncclCommInitAll", Stage::Init),
    ("ncclCommSplit", Stage::Init),
    ("ncclCommShrink", Stage::Init),
    ("ncclMemAlloc", Stage::Alloc),
    ("ncclAllReduce", Stage::Run),
    ("ncclBroadcast", Stage::Run),
    ("ncclBcast", Stage::Run),
    ("ncclReduce", Stage::Run),
    ("ncclAllGather", Stage::Run),
    ("ncclReduceScatter", Stage::Run),
    ("ncclAlltoAll", Stage::Run),
    ("ncclGather", Stage::Run),
    ("ncclScatter", Stage::Run),
    ("ncclSend", Stage::Run),
    ("ncclRecv", Stage::Run),
    ("ncclCommFinalize", Stage::Finalize),
    ("ncclCommDestroy", Stage::Finalize),
    ("ncclCommAbort", Stage::Finalize),
];

/// The NCCL call a line names as the one that failed, written as a call (`NCCL operation
/// ncclAllReduce(…) failed`, XLA's nccl_utils; `call='ncclBroadcast(…)'`, RAPIDS RAFT's
/// RAFT_NCCL_TRY), and its stage: the first name of [`CALLS`] followed by `(`, not part of a
/// longer word.
pub(super) fn called(line: &str) -> Option<(&'static str, Stage)> {
    let mut from = 0;
    while let Some(at) = line[from..].find("nccl").map(|i| i + from) {
        from = at + 4;
        if line[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = &line[at..];
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if !rest[name_len..].starts_with('(') {
            continue;
        }
        if let Some(&(name, stage)) = CALLS.iter().find(|(n, _)| *n == &rest[..name_len]) {
            return Some((name, stage));
        }
    }
    None
}

/// Words of the callers that create a communicator, as a framework's traceback or message
/// names them when the call fails: NCCL's API (src/nccl.h.in v2.19-v2.30: ncclCommInitRank,
/// ncclCommInitRankConfig, ncclCommInitAll, ncclCommSplit), PyTorch's init_process_group (whose
/// barrier is the first collective, which creates the communicator) and the PyNcclCommunicator
/// of vLLM and SGLang. NCCL's own INFO lines (`ncclCommInitRank comm 0x… - Init COMPLETE`) are
/// not read here.
pub(super) fn names_init_call(line: &str) -> bool {
    [
        "ncclCommInitRank",
        "ncclCommInitAll",
        "ncclCommSplit",
        "init_process_group",
        "PyNcclCommunicator(",
    ]
    .iter()
    .any(|w| line.contains(w))
}

/// A crash's finding placed in `category` at `stage`, the cause saying what placed it.
fn place_at(f: &mut Located, category: Category, stage: Stage, what: &str) {
    f.category = category;
    restage(
        f,
        stage,
        &format!("{what} places it in {}", category.name()),
    );
}

/// A finding moved to `stage` (and its exit code), its cause saying why.
fn restage(f: &mut Located, stage: Stage, why: &str) {
    f.stage = stage.name().to_string();
    f.exit_code = stage.exit_code();
    f.cause = format!("{}; {why}", f.cause);
}
