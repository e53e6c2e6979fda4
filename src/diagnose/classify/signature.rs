//! The signature record and the table in priority order, joined from its parts.

use super::finding::{Category, Severity};
use crate::stage::Stage;

/// Which lines a signature may match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// NCCL WARN lines and the error text a wrapper prints after "Last error:".
    Warn,
    /// Any line that is not an NCCL INFO/TRACE line (wrapper messages, launcher output).
    Any,
    /// INFO lines too (advice, benign notes).
    Info,
}

/// How a signature recognises its lines.
pub(super) enum Match {
    /// Any of these phrases (ASCII case-insensitive).
    Phrases(&'static [&'static str]),
    /// A WARN line whose source file (from NCCL's prefix) contains one of these.
    Location(&'static [&'static str]),
    /// Any of `phrases` (ASCII case-insensitive) on a WARN line whose source file contains one
    /// of `files`: for a generic text ("Cuda failure") that one file's calls make specific.
    /// Ranked by its place in the table, like a phrase.
    PhrasesIn {
        files: &'static [&'static str],
        phrases: &'static [&'static str],
    },
}

pub(super) struct Signature {
    pub(super) id: &'static str,
    pub(super) category: Category,
    pub(super) stage: Stage,
    pub(super) severity: Severity,
    pub(super) scope: Scope,
    pub(super) what: Match,
    /// The NCCL tag and path whose format string the phrases follow (or the wrapper's source;
    /// "guess" where no source was checked).
    #[allow(dead_code)]
    pub(super) source: &'static str,
    /// NCCL releases that print it (from tag v2.16.2-1 to v2.30.7-1).
    #[allow(dead_code)]
    pub(super) releases: &'static str,
    pub(super) cause: &'static str,
    pub(super) hint: &'static str,
}

pub(super) const HINT_DEBUG: &str = "rerun with NCCL_DEBUG=INFO (NCCL_DEBUG_FILE=nccl.%h.%p for one file per rank) and \
                          run `nccl-smoke explain` on the logs of every rank";
