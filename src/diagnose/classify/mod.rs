//! Signatures of known failures in NCCL's error text and log lines, and in the words of the
//! programs that wrap NCCL (PyTorch, nccl-tests, Open MPI).
//!
//! Each signature is a set of phrases taken from one failure's format string, with the NCCL
//! release tag and source path it follows and the releases that print it (checked with
//! `git grep` over NVIDIA/nccl's tags v2.16.2-1 … v2.30.7-1), and the finding it stands for:
//! the stage to name, the likely cause and what to try. A WARN line that no phrase names is
//! still placed by the source file NCCL printed in its prefix (`transport/shm.cc:114 NCCL
//! WARN …`): the location signatures. Phrases that are too common to name a cause alone (a
//! socket error, an NCCL error name) only count on WARN lines and error text, never on
//! arbitrary output.
//!
//! `scripts/nccl-warn-strings.py` lists one release's WARN format strings; the coverage test
//! (`tests/nccl_warn_coverage.rs`) classifies each and commits the listing, so the next release
//! is a diff.

mod causes;
pub mod codes;
mod families;
mod finding;
mod formats;
mod lines;
mod locations;
pub mod nccl_tests;
mod network;
mod others;
mod signature;
pub mod sources;
mod table;
mod topics;

pub use finding::{Category, Finding, Severity};
pub use lines::{
    LineKind, advise, classify, classify_line, family_finding, frame_source, is_generic,
    location_finding, place_of, rank_key, retry_finding, return_trace, trace_finding, warn_source,
    wrong_data_finding,
};
pub use table::signature_ids;
