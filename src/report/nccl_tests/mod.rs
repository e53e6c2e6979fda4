//! nccl-tests' own output as a side of `compare`: the text table (`text`) and the `-J` JSON
//! file (`json`), both learned from NVIDIA/nccl-tests v2.19.6 `src/util.cu`
//! (`writeDeviceReport`, `writeResultHeader`, `writeBenchmarkLine*`, `writeResultFooter`,
//! `jsonOutputInit`) and `src/common.cu` (`TimeTest`: `-N` cycles print the sweep again).
//!
//! A file that holds one test's sweep several times (`-N`, or logs concatenated) gives each
//! size several repeats, which is what the verdict needs to see the noise.

pub mod json;
pub mod text;

use super::compare::{self, Measured, Side};
use std::path::Path;

/// Why a file could not be read as a side of `compare`.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum InputError {
    /// The file could not be read at all.
    #[error("cannot read {path}: {msg}")]
    Io { path: String, msg: String },
    /// The file is of a known format, but broken or cut short at `line`.
    #[error("{path}:{line}: {msg}")]
    Malformed {
        path: String,
        line: usize,
        msg: String,
    },
}

impl InputError {
    fn at(path: &Path, line: usize, msg: impl Into<String>) -> InputError {
        InputError::Malformed {
            path: path.display().to_string(),
            line,
            msg: msg.into(),
        }
    }
}

/// nccl-tests' program names and nccl-smoke's pattern names for the same test; other
/// nccl-tests programs keep their name less `_perf` (and match only nccl-tests logs).
const NAMES: [(&str, &str); 3] = [
    ("all_reduce_perf", "all_reduce"),
    ("alltoall_perf", "all_to_all"),
    ("sendrecv_perf", "send_recv_ring"),
];

/// nccl-smoke's name for a nccl-tests program (a path or a bare name, `_mpi` builds too).
pub fn pattern_of(program: &str) -> String {
    let base = program.rsplit('/').next().unwrap_or(program);
    let base = base.strip_suffix("_mpi").unwrap_or(base);
    NAMES
        .iter()
        .find(|(t, _)| *t == base)
        .map(|(_, s)| s.to_string())
        .unwrap_or_else(|| base.strip_suffix("_perf").unwrap_or(base).to_string())
}

/// The nccl-tests program named in `s` (a file name such as `all_reduce_perf.log`), if any.
pub fn program_in(s: &str) -> Option<&'static str> {
    const PROGRAMS: [&str; 11] = [
        "all_reduce_perf",
        "all_gather_perf",
        "alltoall_perf",
        "broadcast_perf",
        "gather_perf",
        "hypercube_perf",
        "reduce_perf",
        "reduce_scatter_perf",
        "scatter_perf",
        "sendrecv_perf",
        "alltoallv_perf",
    ];
    // The longest name that matches, so `reduce_scatter_perf` is not read as `reduce_perf`.
    PROGRAMS
        .iter()
        .filter(|p| s.contains(*p))
        .max_by_key(|p| p.len())
        .copied()
}

/// One nccl-tests row, out-of-place figures (nccl-smoke's buffers are out of place).
pub(crate) struct Row<'a> {
    pub pattern: &'a str,
    pub size: usize,
    pub dtype: &'a str,
    pub redop: &'a str,
    pub time_us: f64,
    pub busbw: f64,
    pub wrong: u64,
}

/// Adds a row to `rows` (a further repeat when the size was seen before).
pub(crate) fn add(rows: &mut Vec<Measured>, r: Row) {
    // nccl-smoke keys non-reducing patterns without a reduction; nccl-tests prints "none" or
    // the op it was given.
    let reduces = !matches!(r.pattern, "all_to_all" | "send_recv_ring") && r.redop != "none";
    compare::add_measurement(
        rows,
        Measured {
            pattern: r.pattern.to_string(),
            size_bytes: r.size,
            kind: compare::kind(r.dtype, reduces.then_some(r.redop)),
            times_us: vec![r.time_us],
            busbw_gbs: vec![r.busbw],
            wrong: r.wrong,
        },
    );
}

/// A dotted NCCL version from `NCCL_VERSION_CODE` (21903 → 2.19.3; 2804 → 2.8.4).
pub fn version_of_code(code: i64) -> String {
    if code >= 10_000 {
        format!("{}.{}.{}", code / 10_000, code % 10_000 / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100)
    }
}

/// Reads `path` as a side of `compare`: a nccl-smoke results file, a nccl-tests `-J` JSON
/// file, or nccl-tests text output, told apart by content. `pattern` names the nccl-tests
/// program when a text log does not (logs before nccl-tests 2.14 print no program name).
pub fn read_side(path: &Path, pattern: Option<&str>) -> Result<Side, InputError> {
    let io = |msg: String| InputError::Io {
        path: path.display().to_string(),
        msg,
    };
    let bytes = super::results::read_bounded(path).map_err(|e| io(e.to_string()))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(io("it is empty".into()));
    }
    let text = String::from_utf8_lossy(&bytes);
    let head = text.trim_start();
    if head.starts_with('{') {
        if head.contains("\"schema\"") && head.contains("nccl-smoke/") {
            let doc = super::results::load(path).map_err(|e| io(e.to_string()))?;
            return Ok(Side::from_results(&doc));
        }
        return json::parse(path, &text);
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let from_name = name.as_deref().and_then(program_in);
    text::parse(path, &text, pattern, from_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_both_ways_and_versions_read() {
        assert_eq!(pattern_of("./build/all_reduce_perf"), "all_reduce");
        assert_eq!(pattern_of("alltoall_perf_mpi"), "all_to_all");
        assert_eq!(pattern_of("sendrecv_perf"), "send_recv_ring");
        assert_eq!(pattern_of("all_gather_perf"), "all_gather");
        assert_eq!(
            program_in("logs/reduce_scatter_perf.8gpu.txt"),
            Some("reduce_scatter_perf")
        );
        assert_eq!(program_in("before.log"), None);
        assert_eq!(version_of_code(21903), "2.19.3");
        assert_eq!(version_of_code(22705), "2.27.5");
        assert_eq!(version_of_code(2804), "2.8.4");
    }
}
