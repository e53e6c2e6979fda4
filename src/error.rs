//! The one error type that crosses layers: a failure pinned to a stage, a rank and a host.

use crate::stage::Stage;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Who is speaking: this process's rank (once known) and host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Who {
    pub rank: Option<u32>,
    pub host: String,
}

impl Who {
    pub fn rank_label(&self) -> String {
        match self.rank {
            Some(r) => format!("rank {r}"),
            None => "rank ?".into(),
        }
    }
}

/// What kind of failure a rank's is: how much it says about the rank itself. The job's verdict
/// names the failures of the most causal kind present (see `report::verdict::Blame`). It
/// travels with the failure (`kind` in the results file and on the status lines); a failure
/// written before it did gets its kind from its words ([`Kind::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The rank failed on its own: an error of its own, a supervisor that vanished or stopped
    /// answering.
    #[default]
    Own,
    /// The launcher stopped the rank (another rank failed, or the job was cancelled), or rank 0's
    /// supervisor ended the job because another rank was gone.
    Stopped,
    /// A peer went away first (`ncclRemoteError`, connections closed by the remote peer).
    PeerGone,
    /// A wait on other ranks ran out, with no sign of a peer leaving.
    Waited,
    /// The worker made no progress on its own (not while waiting on other ranks): killed.
    Hung,
    /// The worker died of a signal.
    Crashed,
}

/// `word` with every `0x`-prefixed run of hex digits cut to its `0x`.
fn without_hex(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i + 2]);
        rest = rest[i + 2..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
    }
    out.push_str(rest);
    out
}

/// `error` without the NCCL call that returned it: one communicator error reaches one rank as
/// the return of the collective it enqueues (`ncclAllReduce returned ncclSystemError …`) and
/// another, already waiting, through `ncclCommGetAsyncError`; the error is the same. NCCL's
/// `ncclEnqueueCheck` (`src/enqueue.cc`) first calls `ncclCommEnsureReady` (`src/init.cc`),
/// which returns the communicator's asynchronous error as the collective's own (NVIDIA/nccl
/// v2.19.3-1, v2.23.4-1, v2.28.3-1).
fn without_caller(error: &str) -> &str {
    match error.split_once(" returned ") {
        Some((call, _)) if call.starts_with("nccl") && !call.contains(' ') => &error[call.len()..],
        _ => error,
    }
}

/// How a supervisor's failure begins when the launcher stopped its rank.
pub const STOPPED: &str = "stopped by the launcher";
/// How rank 0's own failure begins when its supervisor ended the job because another rank
/// vanished or stopped answering (the launcher cannot know).
pub const ENDED_BY_RANK0: &str = "stopped by rank 0's supervisor";
/// Words a supervisor puts in a hang report when its worker was waiting on other ranks.
pub const WAITED_MARK: &str = "while waiting on other ranks";
/// How a supervisor's hang report ends.
pub const HUNG_MARK: &str = "it hung; the worker was killed";
/// How a supervisor's crash report begins.
pub const CRASHED_MARK: &str = "the worker died of ";
/// NCCL's words for a peer that closed its sockets.
pub const CLOSED_BY_PEER: &str = "Connection closed by remote peer";
/// NCCL's words for a peer whose process died with data unread (`ECONNRESET`, as
/// `socketProgressOpt` prints it: "Call to recv from … failed : Connection reset by peer",
/// src/misc/socket.cc v2.19.3-1).
pub const RESET_BY_PEER: &str = "failed : Connection reset by peer";
/// NCCL's words when a local peer's proxy socket has no listener any more (its process is
/// gone): `ncclIpcSocketSendMsg`'s "UDS: Sending data over socket … failed : Connection
/// refused (111)" (src/misc/ipcsocket.cc; seen from the real 2.32.3 wheel when rank 1 died in
/// its first import).
pub const UDS_SEND: &str = "UDS: Sending data over socket";
pub const REFUSED: &str = "failed : Connection refused";

impl Kind {
    /// The kind of a failure from its words alone, for a results file written before the kind
    /// travelled (and a finding re-worded after it was made): the words nccl-smoke's own
    /// reports begin or end with, and the library's words for a peer that went first. The one
    /// place a failure's text is read for its kind.
    pub fn read(error: &str, evidence: &[String]) -> Kind {
        if error.starts_with(STOPPED) || error.starts_with(ENDED_BY_RANK0) {
            Kind::Stopped
        } else if Kind::peer_words(error, evidence) {
            Kind::PeerGone
        } else if error.contains("did not complete within") || error.contains(WAITED_MARK) {
            Kind::Waited
        } else if error.contains(HUNG_MARK) {
            Kind::Hung
        } else if error.starts_with(CRASHED_MARK) {
            Kind::Crashed
        } else {
            Kind::Own
        }
    }

    /// Whether the library's words say a peer went away first.
    pub fn peer_words(error: &str, evidence: &[String]) -> bool {
        error.contains("ncclRemoteError")
            || error.contains(CLOSED_BY_PEER)
            || error.contains("(see rank 0's verdict)")
            || evidence.iter().any(|l| {
                l.contains(CLOSED_BY_PEER)
                    || l.contains(RESET_BY_PEER)
                    || (l.contains(UDS_SEND) && l.contains(REFUSED))
            })
    }
}

/// Whether a failure fails the run or only explains a slow one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    #[default]
    Fail,
    Warn,
}

impl Severity {
    fn is_fail(&self) -> bool {
        *self == Severity::Fail
    }
}

/// A failure, pinned down: the verdict line and the exit code come from it.
///
/// Its `kind` and `severity` travel with it, to the results file and between processes
/// (`Wire`): a failure read back is of the kind it was given. One made without a kind
/// (`Kind::Own`, the default) is written with the kind its words say ([`Kind::read`], once,
/// where it is made); one written before the kind travelled is read the same way.
#[derive(Debug, Clone, Serialize, Deserialize, thiserror::Error)]
#[serde(from = "Wire", into = "Wire")]
pub struct Failure {
    pub stage: Stage,
    /// The rank that failed (`None` when it failed before it knew its rank).
    pub rank: Option<u32>,
    pub host: String,
    /// What failed, in the library's own words where it gave any.
    pub error: String,
    /// The likely cause, when nccl-smoke can tell.
    pub cause: Option<String>,
    /// What to try.
    pub hint: Option<String>,
    /// Lines that support the diagnosis (library log lines, probe results).
    pub evidence: Vec<String>,
    /// This rank's own NCCL log names a failure that only happens locally (file descriptors,
    /// host or device memory, /dev/shm), so an error that looks like a peer's doing (a closed
    /// connection) is this rank's own.
    pub own_evidence: bool,
    /// What kind of failure it is.
    pub kind: Kind,
    /// A finding that explains a slow run without failing it, or a failure.
    pub severity: Severity,
}

/// A failure as the results file and the status lines carry it.
#[derive(Serialize, Deserialize)]
struct Wire {
    stage: Stage,
    rank: Option<u32>,
    host: String,
    error: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cause: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    evidence: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    own_evidence: bool,
    /// Absent in files written before the kind travelled.
    #[serde(default)]
    kind: Option<Kind>,
    /// `warn` for a finding that explains a slow run without failing it; absent for a failure.
    #[serde(default, skip_serializing_if = "Severity::is_fail")]
    severity: Severity,
}

impl From<Failure> for Wire {
    fn from(f: Failure) -> Wire {
        Wire {
            kind: Some(match f.kind {
                Kind::Own => Kind::read(&f.error, &f.evidence),
                k => k,
            }),
            severity: f.severity,
            stage: f.stage,
            rank: f.rank,
            host: f.host,
            error: f.error,
            cause: f.cause,
            hint: f.hint,
            evidence: f.evidence,
            own_evidence: f.own_evidence,
        }
    }
}

impl From<Wire> for Failure {
    fn from(w: Wire) -> Failure {
        Failure {
            kind: w.kind.unwrap_or_else(|| Kind::read(&w.error, &w.evidence)),
            severity: w.severity,
            stage: w.stage,
            rank: w.rank,
            host: w.host,
            error: w.error,
            cause: w.cause,
            hint: w.hint,
            evidence: w.evidence,
            own_evidence: w.own_evidence,
        }
    }
}

/// Two failures are the same when they say the same (the same words from two sources may
/// carry a kind told from the words on one side and known on the other).
impl PartialEq for Failure {
    fn eq(&self, o: &Failure) -> bool {
        (
            self.stage,
            self.rank,
            &self.host,
            &self.error,
            &self.cause,
            &self.hint,
        ) == (o.stage, o.rank, &o.host, &o.error, &o.cause, &o.hint)
            && self.evidence == o.evidence
            && self.own_evidence == o.own_evidence
    }
}

impl Failure {
    pub fn new(stage: Stage, who: &Who, error: impl fmt::Display) -> Failure {
        Failure {
            stage,
            rank: who.rank,
            host: who.host.clone(),
            error: error.to_string(),
            cause: None,
            hint: None,
            evidence: Vec::new(),
            own_evidence: false,
            kind: Kind::Own,
            severity: Severity::Fail,
        }
    }

    pub fn cause(mut self, cause: impl Into<String>) -> Failure {
        self.cause = Some(cause.into());
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Failure {
        self.hint = Some(hint.into());
        self
    }

    pub fn kind(mut self, kind: Kind) -> Failure {
        self.kind = kind;
        self
    }

    pub fn exit_code(&self) -> u8 {
        self.stage.exit_code()
    }

    /// Whether the launcher (or rank 0's supervisor) stopped the rank: no failure of its own.
    pub fn is_stopped(&self) -> bool {
        self.kind == Kind::Stopped
    }

    /// The same finding as a warning: it explains a slow run instead of failing it.
    pub fn warning_line(&self) -> String {
        Failure {
            severity: Severity::Warn,
            ..self.clone()
        }
        .to_string()
    }

    /// The words after the rank and host: the error, the likely cause and what to try.
    pub fn detail(&self) -> String {
        let mut out = self.error.clone();
        if let Some(c) = &self.cause {
            out.push_str(&format!(" — likely cause: {c}"));
        }
        if let Some(h) = &self.hint {
            out.push_str(&format!(" — try: {h}"));
        }
        out
    }

    fn word(&self) -> &'static str {
        match self.severity {
            Severity::Fail => "FAIL",
            Severity::Warn => "WARN",
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rank = match self.rank {
            Some(r) => format!("rank {r}"),
            None => "rank ?".into(),
        };
        write!(
            f,
            "{} at {} on {} (host {}): {}",
            self.word(),
            self.stage,
            rank,
            self.host,
            self.detail()
        )
    }
}

/// Failures that are one failure seen on several ranks: the same stage, error, cause and hint
/// (numbers aside); the line quotes the first of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Group<'a> {
    /// The first of them, whose words the group speaks.
    pub first: &'a Failure,
    pub ranks: Vec<Option<u32>>,
    pub hosts: Vec<String>,
    /// How many ranks the job has, when known: a group of every one of them says so.
    pub world: Option<u32>,
}

impl Group<'_> {
    /// Alike: the same stage, and the same words but for numbers (ranks, ports, pids); or the
    /// supervisors of one host falling silent together, whatever stage each was last heard in
    /// (a host cut off mid-run silences ranks a step apart: one still in connect, one in run).
    fn same(a: &Failure, b: &Failure) -> bool {
        let silent = |f: &Failure| f.error.starts_with(SUPERVISOR_SILENT);
        if silent(a) && silent(b) && a.host == b.host {
            return true;
        }
        let words = |f: &Failure| {
            let text = format!(
                "{}|{}|{}",
                without_caller(&f.error),
                f.cause.as_deref().unwrap_or(""),
                f.hint.as_deref().unwrap_or("")
            );
            // NCCL names its /dev/shm segments `nccl-` and six random characters
            // (`ncclShmOpen`, src/misc/shmutils.cc v2.19.3-1): not a difference.
            // Nor is an address NCCL prints in hex, a communicator's say (`comm %p`, as
            // `ncclProxyStop`'s "comm 0x55a5… (rank = 3) destroys proxy resource error"):
            // numbers, which the split below drops, but for their letters.
            let text = text
                .split(' ')
                .map(|w| match w.find("/dev/shm/nccl-") {
                    Some(i) => w[..i].to_string(),
                    None => without_hex(w),
                })
                .collect::<Vec<_>>()
                .join(" ");
            text.split(|c: char| c.is_ascii_digit())
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join("#")
        };
        a.stage == b.stage && words(a) == words(b)
    }
}

/// How the failure of a rank whose supervisor stopped answering begins (see
/// `run::status::JobView::name_unresponsive`).
pub const SUPERVISOR_SILENT: &str = "its supervisor stopped answering";

/// Groups `failures` (in order of first appearance), so that eight ranks failing alike read as
/// one line naming eight ranks.
pub fn group(failures: &[Failure]) -> Vec<Group<'_>> {
    let mut out: Vec<Group> = Vec::new();
    for f in failures {
        match out.iter_mut().find(|g| Group::same(g.first, f)) {
            Some(g) => {
                if !g.ranks.contains(&f.rank) {
                    g.ranks.push(f.rank);
                }
                if !g.hosts.contains(&f.host) {
                    g.hosts.push(f.host.clone());
                }
            }
            None => out.push(Group {
                first: f,
                ranks: vec![f.rank],
                hosts: vec![f.host.clone()],
                world: None,
            }),
        }
    }
    out
}

impl fmt::Display for Group<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ranks.len() == 1 {
            return self.first.fmt(f);
        }
        let mut ranks: Vec<String> = self
            .ranks
            .iter()
            .map(|r| r.map(|r| r.to_string()).unwrap_or_else(|| "?".into()))
            .collect();
        ranks.sort_by_key(|r| r.parse::<u64>().unwrap_or(u64::MAX));
        // Every rank of the job, alike: one failure everywhere, not one rank and its victims.
        let every = self.world.filter(|&n| {
            n as usize == ranks.len() && (0..n).all(|r| self.ranks.contains(&Some(r)))
        });
        let ranks = match every {
            Some(n) => format!("all {n} ranks"),
            None => format!("ranks {}", ranks.join(", ")),
        };
        let hosts = if self.hosts.len() == 1 {
            "host"
        } else {
            "hosts"
        };
        write!(
            f,
            "{} at {} on {ranks} ({hosts} {}): {}",
            self.first.word(),
            self.first.stage,
            self.hosts.join(", "),
            self.first.detail()
        )
    }
}

/// Pins any displayable error to a stage.
pub trait AtStage<T> {
    fn at(self, stage: Stage, who: &Who) -> Result<T, Failure>;
}

impl<T, E: fmt::Display> AtStage<T> for Result<T, E> {
    fn at(self, stage: Stage, who: &Who) -> Result<T, Failure> {
        self.map_err(|e| Failure::new(stage, who, e))
    }
}

#[cfg(test)]
mod tests;
