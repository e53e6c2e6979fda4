//! Classifying lines: the kind of a line, the phrase automata, and the finding that names a line
//! or a rank's lines.

use super::finding::{Category, Finding, Severity};
use super::signature::{Match, Scope, Signature};
use super::table::SIGNATURES;
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use std::sync::OnceLock;

/// What kind of line a classifier sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// `… NCCL INFO …` / `… NCCL TRACE …`.
    Info,
    /// `… NCCL WARN …`, or error text a wrapper printed after "Last error:".
    Warn,
    /// Anything else (wrapper, launcher, application output).
    Other,
}

impl LineKind {
    /// The kind of one line by NCCL's level word.
    ///
    /// Every format NCCL has printed since 2.4 (`src/misc/utils.cc` in v2.4.8-1, `src/debug.cc`
    /// since): `host:pid:tid [dev] NCCL INFO`, `host:pid:tid [dev] file:line NCCL WARN` (2.28+
    /// with `(function)` before the level), `host:pid:tid [dev] time func:line NCCL TRACE`,
    /// `host:pid:tid NCCL CALL` (2.19+), and the bare `NCCL version …` line of
    /// `NCCL_LOG_VERSION` (2.2x+). The level word may follow a launcher's tag with no space
    /// (`[1,0]<stdout>:NCCL WARN`), a timestamp, or start the line (a prefix cut by the
    /// program that relayed it).
    pub fn of(line: &str) -> LineKind {
        static NCCL: OnceLock<memchr::memmem::Finder<'static>> = OnceLock::new();
        let finder = NCCL.get_or_init(|| memchr::memmem::Finder::new(b"NCCL "));
        let bytes = line.as_bytes();
        for at in finder.find_iter(bytes) {
            if at > 0 && bytes[at - 1].is_ascii_alphanumeric() {
                continue;
            }
            let rest = &bytes[at + 5..];
            // ATTN (2.32+, `[dev] file:line NCCL ATTN …` in the 2.32.3 wheel's format strings;
            // no public source yet): a notice NCCL goes on after ("Failed to initialize NET
            // plugin IB" on a host without InfiniBand), read like INFO.
            if rest.starts_with(b"INFO")
                || rest.starts_with(b"TRACE")
                || rest.starts_with(b"CALL")
                || rest.starts_with(b"ATTN")
            {
                return LineKind::Info;
            }
            if rest.starts_with(b"WARN") {
                return LineKind::Warn;
            }
            // NCCL_LOG_VERSION: the line is the version alone (after a launcher's tag at most;
            // PyTorch's ", NCCL version 2.x" ends an error message and is not one).
            if rest.starts_with(b"version ")
                && (at == 0 || (b":>]".contains(&bytes[at - 1]) && !bytes[..at].contains(&b' ')))
            {
                return LineKind::Info;
            }
        }
        LineKind::Other
    }
}

struct Matcher {
    ac: AhoCorasick,
    /// For each pattern of `ac`, the signature it belongs to.
    owner: Vec<usize>,
}

/// The phrases of every signature (for WARN and other lines), or of the signatures that
/// also read INFO lines (most lines of an INFO log: a much smaller automaton).
fn matcher(info_only: bool) -> &'static Matcher {
    static ALL: OnceLock<Matcher> = OnceLock::new();
    static INFO: OnceLock<Matcher> = OnceLock::new();
    let cell = if info_only { &INFO } else { &ALL };
    cell.get_or_init(|| {
        let mut patterns = Vec::new();
        let mut owner = Vec::new();
        for (i, sig) in SIGNATURES.iter().enumerate() {
            if info_only && sig.scope != Scope::Info {
                continue;
            }
            if let Match::Phrases(ps) = sig.what {
                for p in ps {
                    patterns.push(*p);
                    owner.push(i);
                }
            }
        }
        let ac = AhoCorasickBuilder::new()
            // INFO lines are NCCL's own text, in NCCL's own case: exact matching lets the
            // automaton skip ahead with a fast prefilter.
            .ascii_case_insensitive(!info_only)
            .match_kind(MatchKind::LeftmostFirst)
            .build(&patterns)
            .expect("the signature phrases form a valid automaton");
        Matcher { ac, owner }
    })
}

/// The source file NCCL printed before its level word: `transport/p2p.cc:275 NCCL WARN` or
/// `transport/p2p.cc:275 (func) NCCL WARN` (2.28+).
fn warn_location(line: &str) -> Option<&str> {
    let at = line.find(" NCCL WARN")?;
    line[..at]
        .split_whitespace()
        .rev()
        .take(3)
        .find(|w| w.contains(':') && (w.contains(".c") || w.contains(".h")))
}

fn contains_ignore_case(line: &str, phrase: &str) -> bool {
    let (l, p) = (line.as_bytes(), phrase.as_bytes());
    !p.is_empty() && l.windows(p.len()).any(|w| w.eq_ignore_ascii_case(p))
}

fn applies(sig: &Signature, kind: LineKind) -> bool {
    match (sig.scope, kind) {
        (Scope::Info, _) => true,
        (_, LineKind::Info) => false,
        (Scope::Any, _) => true,
        (Scope::Warn, k) => k == LineKind::Warn,
    }
}

/// Phrases so general that the source file of a WARN line says more.
const WEAK: &[&str] = &["cuda-failure", "wrapper-nccl-error"];

/// Whether a signature's words are so general that a WARN line's source file says more: the
/// generic phrases above and the generic CUDA codes.
fn is_weak(id: &str) -> bool {
    WEAK.contains(&id) || super::codes::WEAK.contains(&id)
}

/// The location signature for a source file NCCL printed (`transport/p2p.cc:243`): NCCL's own
/// files by the generated table, other code (a net plugin, an older layout) by the
/// signatures' path fragments.
fn location_index(printed: &str) -> Option<usize> {
    match super::sources::lookup(printed) {
        Some(row) => SIGNATURES.iter().position(|s| s.id == row.subsystem),
        None => SIGNATURES.iter().position(|s| match s.what {
            Match::Location(paths) => paths.iter().any(|p| printed.contains(p)),
            Match::Phrases(_) | Match::PhrasesIn { .. } => false,
        }),
    }
}

/// The signature that names one line, if any (the first in table order).
pub fn classify_line(line: &str, kind: LineKind) -> Option<Finding> {
    let m = matcher(kind == LineKind::Info);
    let mut best: Option<usize> = None;
    for hit in m.ac.find_iter(line) {
        let i = m.owner[hit.pattern().as_usize()];
        if best.is_some_and(|b| b <= i) {
            continue;
        }
        if applies(SIGNATURES[i], kind) {
            best = Some(i);
        }
    }
    // A generic phrase that one source file's calls make specific, placed in the table above
    // the signatures it must outrank.
    if kind == LineKind::Warn
        && let Some(loc) = warn_location(line)
        && let Some(i) = SIGNATURES.iter().position(|s| match s.what {
            Match::PhrasesIn { files, phrases } => {
                files.iter().any(|f| loc.contains(f))
                    && phrases.iter().any(|p| contains_ignore_case(line, p))
            }
            _ => false,
        })
        && best.is_none_or(|b| i < b)
    {
        best = Some(i);
    }
    // A WARN line's source file names its transport more precisely than a generic phrase
    // ("Cuda failure" in transport/p2p.cc is a P2P failure), but never overrides a specific
    // phrase, a consequence or a benign note.
    let weak = best.is_none_or(|b| is_weak(SIGNATURES[b].id));
    if kind == LineKind::Warn
        && weak
        && let Some(loc) = warn_location(line)
        && let Some(i) = location_index(loc)
        && (best.is_none() || SIGNATURES[i].category != Category::Init)
    {
        best = Some(i);
    }
    best.map(|i| finding(SIGNATURES[i], line))
}

/// NCCL's error-return trace in a line (`… NCCL INFO transport/net_ib.cc:395 -> 2`, NCCLCHECK
/// in src/include/checks.h since v2.4; `-> 2 (errno text)` from 2.19, `[Async thread]` from
/// group.cc): the source file as printed, and the result.
pub fn return_trace(line: &str) -> Option<(&str, u32)> {
    let at = line.find(" -> ")?;
    let printed = line[..at].rsplit(' ').next()?;
    if !(printed.contains(':') && (printed.contains(".c") || printed.contains(".h"))) {
        return None;
    }
    let code = line[at + 4..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    Some((printed, code))
}

/// The finding for NCCL's first error-return trace of a process when no WARN line of that
/// process names a failure: the source file places it, as it places an unnamed WARN.
pub fn trace_finding(line: &str) -> Option<Finding> {
    // The result NCCL returned (src/nccl.h.in): 6 is ncclRemoteError, a peer's failure seen
    // here; 1 is ncclUnhandledCudaError, a CUDA call's, whichever file relayed it.
    match return_trace(line)?.1 {
        6 => signature_finding("remote-error", line),
        1 => signature_finding("cuda-failure", line),
        _ => location_finding(line),
    }
}

/// The location signature's finding for the source file a return trace names, whatever the
/// result: where the failure passed through.
pub fn location_finding(line: &str) -> Option<Finding> {
    let (printed, _) = return_trace(line)?;
    Some(finding(SIGNATURES[location_index(printed)?], line))
}

/// Words that mark a line as the MPI layer's or the launcher's: Open MPI's components and
/// tools, PMIx, Slurm.
const MPI_MARKS: &[&str] = &[
    "ORTE_ERROR_LOG",
    "ORTE ",
    "PRTE ",
    "orted",
    "prterun",
    "mpirun",
    "mpiexec",
    "mca_",
    "btl_",
    "pml_",
    "oob_",
    "MPI_",
    "Open MPI",
    "OMPI_",
    "PMIx",
    "PMIX",
    "pmix",
    "srun: error",
    "slurmstepd: error",
];

/// Words that mark a line as CUDA's own error report (PyTorch's c10 CUDA check "CUDA error:
/// %s", its driver-API check "CUDA driver error: %s", the runtime's and the driver's enum
/// names).
const CUDA_MARKS: &[&str] = &[
    "CUDA error:",
    "CUDA driver error:",
    "CUDA_ERROR_",
    "cudaError",
];

/// The generic finding of a family for an error line no signature names, when the line
/// carries that family's marks: CUDA's, then the MPI layer's (one reader per family: a line
/// from an unknown family stays unexplained and is quoted).
pub fn family_finding(line: &str) -> Option<Finding> {
    // CUDA's marks all begin a longer word (an enum name, "CUDA error: …"); the MPI layer's
    // are words of their own unless they end in `_` or a space.
    let id = if CUDA_MARKS.iter().any(|m| has_mark(line, m, false)) {
        "cuda-family"
    } else if MPI_MARKS.iter().any(|m| has_mark(line, m, true)) {
        "mpi-family"
    } else {
        return None;
    };
    signature_finding(id, line)
}

/// Whether `mark` starts a word of `line` ("orted" the daemon, not "supported"); with `whole`,
/// also ends one, unless the mark ends in `_` or a space (a prefix such as `mca_`).
fn has_mark(line: &str, mark: &str, whole: bool) -> bool {
    let b = line.as_bytes();
    let open = !whole || mark.ends_with(['_', ' ']);
    line.match_indices(mark).any(|(at, _)| {
        let starts = at == 0 || !b[at - 1].is_ascii_alphanumeric();
        let end = at + mark.len();
        let ends = open || end == b.len() || !b[end].is_ascii_alphanumeric();
        starts && ends
    })
}

/// The finding for nccl-tests' footer of wrong values.
pub fn wrong_data_finding(line: &str) -> Option<Finding> {
    signature_finding("nccl-tests-wrong-data", line)
}

/// The finding for connect retries a process's log ends in (`Call to connect returned
/// Connection refused, retrying`): it never reached its peer.
pub fn retry_finding(line: &str) -> Option<Finding> {
    signature_finding("connect-retries", line)
}

/// The finding of the signature `id` for `line` (for what `explain` recognises beyond one
/// line's words).
fn signature_finding(id: &str, line: &str) -> Option<Finding> {
    SIGNATURES
        .iter()
        .find(|s| s.id == id)
        .map(|s| finding(s, line))
}

fn finding(sig: &Signature, line: &str) -> Finding {
    Finding {
        stage: sig.stage,
        cause: sig.cause,
        hint: sig.hint,
        evidence: line.trim().to_string(),
        category: sig.category,
        severity: sig.severity,
        signature: sig.id,
    }
}

/// Whether a signature only places a line (by its source file, a generic text such as "Cuda
/// failure" or an NCCL error name, a crash, a communicator refusing work after an earlier
/// error) rather than naming a cause: a job's root cause is a specific finding when it has one.
pub fn is_generic(signature: &str) -> bool {
    signature.starts_with("loc-") || GENERIC.contains(&signature) || is_weak(signature)
}

/// Signatures that place a failure without naming its cause (besides the location ones).
const GENERIC: &[&str] = &[
    "ras-warning",
    "crash",
    "comm-async-error",
    "mpi-family",
    "cuda-family",
];

/// The subsystem and stage one NCCL line of a process shows it in: the source file of a WARN
/// or of an error-return trace (the generated table), else the topic NCCL's INFO text begins
/// with. Used to place what the process did last before it crashed.
pub fn place_of(line: &str) -> Option<(Category, crate::stage::Stage)> {
    let printed = match LineKind::of(line) {
        LineKind::Warn => warn_location(line),
        LineKind::Info => return_trace(line).map(|(p, _)| p),
        LineKind::Other => return None,
    };
    if let Some(sig) = printed.and_then(location_index).map(|i| SIGNATURES[i]) {
        return Some((sig.category, sig.stage));
    }
    super::topics::info_topic(line)
}

/// Priority of a finding among others: more severe first, then earlier in the table.
pub fn rank_key(f: &Finding) -> (std::cmp::Reverse<Severity>, usize) {
    let idx = SIGNATURES
        .iter()
        .position(|s| s.id == f.signature)
        .unwrap_or(usize::MAX);
    (std::cmp::Reverse(f.severity), idx)
}

/// The first advisory (a cause of slowness, not a failure) among `lines`.
pub fn advise<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<Finding> {
    lines
        .into_iter()
        .find_map(|l| classify_line(l, LineKind::of(l)).filter(|f| f.severity == Severity::Advice))
}

/// The most telling failure among `lines` (an error text and the WARN lines of one rank):
/// failures before consequences, then the table's order. NCCL's INFO and TRACE lines describe
/// healthy progress ("NET/IB : Using mlx5_0"), so they never count as failure evidence; every
/// other line is read as error text.
pub fn classify<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<Finding> {
    lines
        .into_iter()
        .filter(|l| LineKind::of(l) != LineKind::Info)
        .filter_map(|l| classify_line(l, LineKind::Warn))
        .filter(|f| f.severity >= Severity::Consequence)
        .min_by_key(rank_key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::Stage;

    #[test]
    fn seed_000_import_failure() {
        let f = classify([
            "host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via P2P/CUMEM",
            "host:1:2 [0] transport/p2p.cc:275 NCCL WARN Cuda failure 101 'invalid device ordinal'",
        ])
        .unwrap();
        assert_eq!(f.stage, Stage::ConnectImport);
        assert!(f.evidence.contains("invalid device ordinal"));
    }

    /// NCCL 2.19.3 prints seed 000 without the function's name (the real wheel on the stand-in
    /// driver), and its proxy complains next: the import is the finding.
    #[test]
    fn seed_000_on_2_19_outranks_the_proxy() {
        let f = classify([
            "vm:4534:4555 [1] proxy.cc:1533 NCCL WARN [Service thread] Could not receive type from localRank 0, res=3, closed=0",
            "vm:4534:4549 [1] transport/p2p.cc:243 NCCL WARN Cuda failure 101 'invalid device ordinal'",
        ])
        .unwrap();
        assert_eq!(
            (f.signature, f.stage),
            ("p2p-import-cuda", Stage::ConnectImport)
        );
        // A specific phrase earlier in the table still wins on a line from that file, and the
        // generic text from another file is not an import.
        let oom = "h:1:2 [0] transport/p2p.cc:201 NCCL WARN Cuda failure 2 'out of memory'";
        assert_eq!(classify_line(oom, LineKind::Warn).unwrap().signature, "oom");
        let other =
            "h:1:2 [0] misc/cudawrap.cc:90 NCCL WARN Cuda failure 101 'invalid device ordinal'";
        assert_ne!(
            classify_line(other, LineKind::Warn).unwrap().stage,
            Stage::ConnectImport
        );
    }

    /// The families around NCCL, each by its own source's words: the loader, libfabric's EFA
    /// provider, libibverbs, PMIx, nccl-tests' CUDACHECK, PyTorch's CUDA checks.
    #[test]
    fn the_families_around_nccl_name_their_own_failures() {
        let cases = [
            (
                "ImportError: /x/torch/lib/libtorch_cuda.so: undefined symbol: ncclMemFree",
                "nccl-symbol-missing",
                Category::VersionMismatch,
                Severity::Fail,
            ),
            (
                "[1,2]<stdout>:n:199:263 [2] process_err_completion:1562 NCCL WARN NET/OFI Request 0x1 completed with error. RC: 5. Error: Invalid receiver queue pair number (QPN)",
                "ofi-peer-gone",
                Category::RemoteError,
                Severity::Consequence,
            ),
            (
                "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0",
                "ibverbs-no-provider",
                Category::NetIb,
                Severity::Advice,
            ),
            (
                "[node1:08575] PMIX ERROR: ERROR in file gds_ds12_lock_pthread.c at line 168",
                "pmix-lock-noise",
                Category::Mpi,
                Severity::Note,
            ),
            (
                "node1: Test CUDA failure common.cu:1045 'unknown error'",
                "nccl-tests-cuda",
                Category::Cuda,
                Severity::Fail,
            ),
            (
                "[rank0]: RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:276] ss1.ss_family == ss2.ss_family. 2 vs 10",
                "gloo-connect",
                Category::Bootstrap,
                Severity::Fail,
            ),
            (
                "RuntimeError: No CUDA GPUs are available",
                "cuda-no-device",
                Category::Cuda,
                Severity::Fail,
            ),
            (
                "RuntimeError: The NVIDIA driver on your system is too old (found version 10010).",
                "cuda-driver-too-old",
                Category::Cuda,
                Severity::Fail,
            ),
        ];
        for (line, id, category, severity) in cases {
            let f = classify_line(line, LineKind::of(line)).unwrap_or_else(|| panic!("{line}"));
            assert_eq!(
                (f.signature, f.category, f.severity),
                (id, category, severity),
                "{line}"
            );
        }
        // Family readers: CUDA's and the MPI layer's marks, as words ("orted" is not in
        // "supported").
        let family = |l: &str| family_finding(l).map(|f| f.signature);
        assert_eq!(
            family("RuntimeError: CUDA error: invalid argument"),
            Some("cuda-family")
        );
        assert_eq!(
            family("[node1:01234] orted: lost connection to mpirun"),
            Some("mpi-family")
        );
        assert_eq!(family("RuntimeError: operation not supported"), None);
        assert_eq!(family("the communicator was aborted"), None);
        let xid = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.";
        assert_eq!(
            classify_line(xid, LineKind::Other).unwrap().signature,
            "gpu-xid"
        );
        // The specific CUDA code still wins over nccl-tests' generic CUDACHECK line.
        let ordinal = "node1: Test CUDA failure common.cu:892 'invalid device ordinal'";
        assert_eq!(
            classify_line(ordinal, LineKind::Other).unwrap().signature,
            "cuda-invalid-device"
        );
    }

    #[test]
    fn seed_003_proxy_failure() {
        let f = classify(["proxy.cc:1473 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable"]).unwrap();
        assert_eq!(f.stage, Stage::ConnectProxy);
    }

    /// EMFILE in a socket WARN is the process's file descriptors, not the network; a closed
    /// connection beside it is what the peers did next.
    #[test]
    fn out_of_file_descriptors_is_not_the_network() {
        let f = classify([
            "socketProgress: Connection closed by remote peer h<1234>",
            "h:1:2 [0] misc/socket.cc:458 NCCL WARN socketTryAccept: Accept failed: Too many open files",
        ])
        .unwrap();
        assert_eq!(f.category, Category::OpenFiles);
        assert_eq!(f.severity, Severity::Fail);
        assert!(f.category.is_local() && !Category::NetSocket.is_local());
    }

    #[test]
    fn seed_004_shm_failure() {
        let f = classify([
            "unhandled system error",
            "shm.cc:114 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Zr3l1 (size 9637888)",
        ])
        .unwrap();
        assert_eq!(f.stage, Stage::ConnectShm);
        assert!(f.evidence.starts_with("shm.cc"));
    }

    #[test]
    fn seed_002_gdr_disabled_is_advice_not_failure() {
        let line = "n1:7:7 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'";
        assert_eq!(classify([line]), None);
        let a = advise([line]).unwrap();
        assert_eq!(a.stage, Stage::Run);
        assert!(a.hint.contains("nvidia_peermem"));
        assert_eq!(
            advise(["NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'"]),
            None
        );
    }

    #[test]
    fn every_nccl_line_format_since_2_4_is_an_nccl_line() {
        for (line, kind) in [
            ("h:1:2 [0] NCCL INFO Bootstrap : Using eth0", LineKind::Info),
            ("h:1:2 [0] misc/socket.cc:49 NCCL WARN x", LineKind::Warn),
            (
                "h:1:2 [0] transport/p2p.cc:243 (p2pMap) NCCL WARN x",
                LineKind::Warn,
            ),
            ("h:1:2 [0] 12.5 ncclSend:3 NCCL TRACE x", LineKind::Info),
            ("h:1:2 NCCL CALL ncclCommInitRank(…)", LineKind::Info),
            (
                "h:1:2 [0] plugin/net.cc:229 (ncclNetPluginInit) NCCL ATTN Failed to initialize NET plugin IB",
                LineKind::Info,
            ),
            ("NCCL version 2.28.9+cuda12.9", LineKind::Info),
            ("[1,0]<stdout>:NCCL version 2.4.8+cuda10.1", LineKind::Info),
            ("[1,0]<stderr>:h:1:2 [0] NCCL INFO x", LineKind::Info),
            (
                "[1,0]<stderr>:NCCL WARN Cuda failure 'out of memory'",
                LineKind::Warn,
            ),
            ("NCCL WARN Cuda failure 'out of memory'", LineKind::Warn),
            (
                "[2025-01-01 10:00:00] h:1:2 [0] NCCL INFO x",
                LineKind::Info,
            ),
            ("h:1:2 [0]NCCL WARN x", LineKind::Warn),
            (
                "RuntimeError: NCCL error in: x.cpp:1, unhandled system error, NCCL version 2.14.3",
                LineKind::Other,
            ),
            ("MYNCCL INFO is not NCCL", LineKind::Other),
        ] {
            assert_eq!(LineKind::of(line), kind, "{line}");
        }
    }

    #[test]
    fn healthy_lines_give_nothing() {
        assert_eq!(
            classify([
                "host:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.2<0>",
                "host:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>",
                "host:1:1 [0] NCCL INFO comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
            ]),
            None
        );
    }

    #[test]
    fn the_issue_examples_are_named() {
        for (line, cat, stage) in [
            (
                "h:1:2 [0] transport/p2p.cu:548 NCCL WARN failed to open CUDA IPC handle : 64 peer access is not supported between these two devices",
                Category::BufferImport,
                Stage::ConnectImport,
            ),
            (
                "h:1:2 [0] misc/cudawrap.cc:182 NCCL WARN Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'",
                Category::Cuda,
                Stage::Driver,
            ),
            (
                "h:1:2 [0] bootstrap.cc:37 NCCL WARN Bootstrap : no socket interface found",
                Category::Bootstrap,
                Stage::Init,
            ),
        ] {
            let f = classify_line(line, LineKind::of(line)).unwrap();
            assert_eq!((f.category, f.stage), (cat, stage), "{line}");
            assert_eq!(f.severity, Severity::Fail);
        }
    }

    #[test]
    fn generic_phrases_need_a_warn_line() {
        let app = "requests.exceptions.ConnectionError: Connection refused";
        assert_eq!(classify_line(app, LineKind::of(app)), None);
        let warn = "h:1:1 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<1> failed : Connection refused";
        assert_eq!(
            classify_line(warn, LineKind::of(warn)).unwrap().category,
            Category::NetSocket
        );
    }

    #[test]
    fn an_unnamed_warn_is_placed_by_its_source_file() {
        let l = "h:1:1 [0] transport/net_ib/connect.cc:99 (ncclIbConnect) NCCL WARN NET/IB : something new";
        let f = classify_line(l, LineKind::of(l)).unwrap();
        assert_eq!((f.signature, f.category), ("loc-net-ib", Category::NetIb));
    }

    #[test]
    fn failures_outrank_consequences() {
        let f = classify([
            "a:1:1 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer b<1>",
            "a:1:1 [0] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
        ])
        .unwrap();
        assert_eq!(f.category, Category::Oom);
        let c = classify(["a:1:1 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer b<1>"]).unwrap();
        assert_eq!(c.severity, Severity::Consequence);
    }

    #[test]
    fn benign_warns_are_notes() {
        let l = "h:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]";
        let f = classify_line(l, LineKind::of(l)).unwrap();
        assert_eq!(f.severity, Severity::Note);
        assert_eq!(classify([l]), None);
    }
}
