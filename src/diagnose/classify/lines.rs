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

/// The generated table's row for the source file an NCCL WARN line names, if NCCL's own.
pub fn warn_source(line: &str) -> Option<&'static super::sources::SourceFile> {
    warn_location(line).and_then(super::sources::lookup)
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
const WEAK: &[&str] = &[
    "cuda-failure",
    "wrapper-invalid-usage",
    "wrapper-nccl-error",
];

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
    // phrase, a consequence or a benign note; nor makes a CUDA error other than out-of-memory
    // in the allocation code ("Cuda failure 1 'invalid argument'" in include/alloc.h) an
    // exhausted memory. A WARN text without NCCL's prefix (a wrapper's "Last error:" quote, an
    // old format) is placed by the NCCL source file whose WARN format it fits, as a prefix
    // would place it.
    let weak = best.is_none_or(|b| is_weak(SIGNATURES[b].id));
    if kind == LineKind::Warn
        && weak
        && let Some(source) = warn_location(line).or_else(|| super::formats::source_of(line))
        && let Some(i) = location_index(source)
        && (best.is_none() || !matches!(SIGNATURES[i].category, Category::Init | Category::Oom))
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
    "mpi-rank-killed",
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

/// The NCCL source file a stack frame names (gdb's `… at graph/topo.cc:618`, a symbolised
/// backtrace's `(…/src/transport/p2p.cc:243)`), with its subsystem and stage by the generated
/// table; `None` for frames of other code (the table has only NCCL's files).
pub fn frame_source(line: &str) -> Option<(&str, (Category, crate::stage::Stage))> {
    let t = line.trim_start();
    if !(t.starts_with('#') || t.contains(" at ") || t.contains("(/")) {
        return None;
    }
    line.split([' ', '(', ')', '[', ']'])
        .filter(|w| w.contains(".c") || w.contains(".h"))
        .filter(|w| {
            w.rsplit_once(':')
                .is_some_and(|(_, n)| n.parse::<u32>().is_ok())
        })
        .find_map(|w| {
            let row = super::sources::lookup(w)?;
            let sig = SIGNATURES.iter().find(|s| s.id == row.subsystem)?;
            Some((w, (sig.category, sig.stage)))
        })
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
mod tests;
