//! `nccl-smoke explain`: the classifier applied offline to NCCL logs from any job.
//!
//! Logs are read as bytes, line by line, with a cap on line length, so truncated or huge input
//! gives a result in bounded memory. Input that is not text (NUL or control bytes at its
//! start) is refused with an error, and a size and time cap bound what one file may cost.
//!
//! Each log yields its findings (one per signature family and process), the processes it
//! shows (host, pid, rank, NCCL version, the last operation seen), and [`job_verdict`] joins
//! the logs of one job into one verdict: the root cause and the ranks that share it, the ranks
//! that only report consequences, and for hangs the ranks that fell silent first.

/// A substring search built once (`str::contains` rebuilds its searcher on every call).
macro_rules! has {
    ($line:expr, $needle:literal) => {{
        static F: std::sync::OnceLock<memchr::memmem::Finder<'static>> = std::sync::OnceLock::new();
        F.get_or_init(|| memchr::memmem::Finder::new($needle))
            .find($line.as_bytes())
            .is_some()
    }};
}

mod evidence;
mod prefix;
mod read;
mod summary;
mod verdict;

pub use prefix::{parse_prefix, wrapper_rank};
pub use read::{explain_reader, explain_reader_limited};
pub use summary::{LastOp, Limits, Located, LogSummary, Quoted, Who, clean};
pub use verdict::{HangReport, JobVerdict, PeerNamed, job_verdict};
