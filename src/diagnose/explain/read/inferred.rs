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
        for f in self
            .summary
            .findings
            .iter_mut()
            .filter(|f| f.signature == "wrapper-nccl-error" && f.stage == Stage::Run.name())
        {
            f.stage = Stage::Init.name().to_string();
            f.exit_code = Stage::Init.exit_code();
            f.cause = format!(
                "{}; the log names the call that creates the communicator (ncclCommInitRank, \
                 init_process_group), so it failed at init",
                f.cause
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
/// line (`classify::nccl_tests`). Out of memory says what went wrong but not where: on an NCCL
/// WARN line the source file NCCL printed places it (the generated table: `enqueue.cc` is a
/// launch, `transport/p2p.cc` a buffer import). NCCL's own allocator (`include/alloc.h`,
/// `allocator.cc`) allocates for init and for connections, as [`own_allocation_stage`] says,
/// whatever CUDA error it returns (cudaMalloc, cuMemCreate, cuMemMap fail there at once); a CUDA
/// error printed elsewhere is not placed by its file, for the call that reports it may only be
/// the first to see a sticky error of earlier work (CUDA runtime API, "Error Handling").
pub(super) fn stage_of(f: &Finding, line: &str, init_done: impl FnOnce() -> bool) -> Stage {
    if let Some(check) = classify::nccl_tests::placed(line) {
        return check.stage;
    }
    match classify::warn_source(line) {
        Some(row)
            if row.stage == Stage::Alloc
                && matches!(f.category, Category::Oom | Category::Cuda) =>
        {
            own_allocation_stage(Stage::Alloc, line, init_done)
        }
        Some(row) if f.category == Category::Oom => row.stage,
        _ => own_allocation_stage(f.stage, line, init_done),
    }
}

/// The stage of a finding: an allocation that NCCL itself reports (an `NCCL WARN` line) failed
/// inside NCCL, not in nccl-smoke's own buffer allocation, so it is at init before this
/// process's "Init COMPLETE", and at connect after it (buffers per peer are made on the first
/// operation through it); `run` names it the same way (a failed `ncclCommInitRank` is init).
/// Other findings keep their signature's stage.
pub(super) fn own_allocation_stage(
    stage: Stage,
    line: &str,
    init_done: impl FnOnce() -> bool,
) -> Stage {
    if stage != Stage::Alloc || !line.contains("NCCL WARN") {
        return stage;
    }
    if init_done() {
        Stage::Connect
    } else {
        Stage::Init
    }
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
    f.stage = stage.name().to_string();
    f.exit_code = stage.exit_code();
    f.cause = format!("{}; {what} places it in {}", f.cause, category.name());
}
