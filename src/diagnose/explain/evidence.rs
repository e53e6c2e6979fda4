//! What a log says about its run besides the signatures: lines that read as errors (so that an
//! error no signature names is quoted, never dropped), evidence that the run finished, and a
//! nccl-tests sweep that the log ends inside.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use std::sync::OnceLock;

/// Words that make a line read as an error, in any family's output (Python tracebacks, C++
/// aborts, MPI, UCX, launchers). Matched ASCII case-insensitively, as whole words: "error" in
/// `TORCH_NCCL_ASYNC_ERROR_HANDLING` is a setting's name, not an error; a CamelCase class name
/// (`RuntimeError`, `DistBackendError`, `ncclSystemError`) is one.
const WORDS: &[&str] = &[
    "error",
    "exception",
    "failed",
    "failure",
    "fatal",
    "abort",
    "aborted",
    "aborting",
    "segmentation fault",
    "core dumped",
    "timed out",
    "timeout",
    "traceback",
    "killed",
    "refused",
    "unreachable",
    "no route to host",
    "cannot",
    "unable to",
    "terminate called",
    "assertion",
    "panicked",
    "illegal",
    "sigsegv",
    "sigabrt",
    "sigbus",
    "caught signal",
    "received signal",
    "non-zero exit",
    "exited with",
    "permission denied",
];

fn words() -> &'static AhoCorasick {
    static AC: OnceLock<AhoCorasick> = OnceLock::new();
    AC.get_or_init(|| {
        AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostLongest)
            .build(WORDS)
            .expect("the error words form a valid automaton")
    })
}

/// Whether a line (not an NCCL INFO line) reads as an error.
pub fn error_like(line: &str) -> bool {
    let b = line.as_bytes();
    let body = line.trim_start();
    // PyTorch's warning level (`[W socket.cpp:…]`, `[W1126 10:00:00.0 …]`): a client socket
    // retrying, an IPv6 attempt; not an error on its own.
    if body.starts_with("[W ") || body.starts_with("[W") && body.as_bytes().get(2) == Some(&b'1') {
        return false;
    }
    // nccl-tests' healthy footer and its column names (`#wrong`, or `error` in newer
    // releases).
    if has!(line, b"Out of bounds values") && line.trim_end().ends_with("OK") {
        return false;
    }
    if has!(line, b"busbw") && has!(line, b"algbw") {
        return false;
    }
    // libfabric's own log below its warning level (`libfabric:pid:time:prov:…<info> …`):
    // providers probed and skipped.
    if has!(line, b"libfabric:")
        && (has!(line, b"<info>") || has!(line, b"<debug>") || has!(line, b"<trace>"))
    {
        return false;
    }
    for m in words().find_iter(b) {
        let (s, e) = (m.start(), m.end());
        let before = s.checked_sub(1).map(|i| b[i]);
        let after = b.get(e).copied();
        let camel = b[s].is_ascii_uppercase()
            && before.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        let left = camel || before.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == b'_'));
        let right = after.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == b'_'));
        if left && right && !benign(line, s) {
            return true;
        }
    }
    false
}

/// An error word in a context that says there was none ("0 errors", "no error").
fn benign(line: &str, at: usize) -> bool {
    let head = line[..at].trim_end().to_ascii_lowercase();
    head.ends_with(" no") || head.ends_with(" 0") || head.ends_with("without") || head == "no"
}

/// The addresses a process says it uses (`Bootstrap : Using eth0:10.0.0.2<0>`, `NET/Socket :
/// Using [0]eth0:10.0.0.2<0>`, `… OOB eth0:10.0.0.2<0>`: NVIDIA/nccl v2.19.3-1 src/bootstrap.cc,
/// src/transport/net_socket.cc, src/transport/net_ib.cc): a peer named by one of them has its
/// log here.
pub fn own_addresses(line: &str) -> Vec<String> {
    if !(line.contains(" : Using ") || line.contains(" OOB ")) {
        return Vec::new();
    }
    line.match_indices('<')
        .filter_map(|(at, _)| {
            let head = &line[..at];
            // `<interface>:<address>`, the address IPv4 or IPv6.
            let token = &head[head.rfind([' ', ']'])? + 1..];
            let (_, ip) = token.split_once(':')?;
            ip.parse::<std::net::IpAddr>().ok().map(|_| ip.to_string())
        })
        .collect()
}

/// A line that shows the run finished healthy: nccl-tests' footer with no wrong value
/// (nccl-tests src/util.cu, `"# %-20s : %d %s", "Out of bounds values", …, "OK"`), NCCL's
/// own teardown (NVIDIA/nccl v2.12–v2.30 src/init.cc, `"… - Destroy COMPLETE"`), or this tool's
/// own verdict.
pub fn completion(line: &str) -> bool {
    (has!(line, b"Out of bounds values") && line.trim_end().ends_with(" 0 OK"))
        || has!(line, b" - Destroy COMPLETE")
        || line.trim_start().starts_with("VERDICT PASS")
}

/// nccl-tests' footer for wrong values (`# Out of bounds values : 12 FAILED`, src/util.cu):
/// the collective ran and delivered wrong data.
pub fn wrong_values(line: &str) -> bool {
    has!(line, b"Out of bounds values") && line.trim_end().ends_with("FAILED")
}

/// A nccl-tests result row whose `#wrong` count is not 0 (src/common.cu prints `size count type
/// redop [root] time algbw busbw #wrong` for out-of-place, then `time algbw busbw #wrong` for
/// in-place): wrong data at that size, whether or not the run lived to print its footer. The
/// oldest releases' `error` column (a largest difference, printed as a float) is no count and
/// never reads as one.
pub fn wrong_row(line: &str) -> bool {
    const TYPES: &[&str] = &[
        "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
        "bfloat16", "f8e4m3", "f8e5m2", "char", "int", "uint",
    ];
    const OPS: &[&str] = &[
        "sum",
        "prod",
        "max",
        "min",
        "avg",
        "none",
        "premulsum",
        "mulsum",
    ];
    let body = line.rsplit_once(">:").map_or(line, |(_, b)| b);
    let w: Vec<&str> = body.split_whitespace().collect();
    let count = |x: &str| x.parse::<u64>().ok();
    (w.len() == 12 || w.len() == 13)
        && count(w[0]).is_some()
        && count(w[1]).is_some()
        && TYPES.contains(&w[2])
        && OPS.contains(&w[3])
        && [w[w.len() - 5], w[w.len() - 1]]
            .iter()
            .any(|x| count(x).is_some_and(|n| n > 0))
}

/// nccl-tests' results header (`#  size  count  type  redop  root  time  algbw  busbw  #wrong`
/// under `out-of-place  in-place`).
pub fn sweep_header(line: &str) -> bool {
    has!(line, b"out-of-place") && has!(line, b"in-place")
}

/// nccl-tests' first line (`# nThread 1 nGpus 8 minBytes 8 maxBytes …`; without the `#` in
/// its oldest releases).
pub fn nccl_tests_start(line: &str) -> bool {
    has!(line, b"nThread ") && has!(line, b"nGpus ") && has!(line, b"minBytes ")
}

/// The end of a nccl-tests sweep (its footer, healthy or not).
pub fn sweep_footer(line: &str) -> bool {
    has!(line, b"Out of bounds values") || has!(line, b"Avg bus bandwidth")
}

/// A results row of nccl-tests: the size in bytes first, then numbers and words (after a
/// launcher's tag). Returns the size.
pub fn sweep_row(line: &str) -> Option<u64> {
    let body = line.rsplit_once(">:").map_or(line, |(_, b)| b);
    let body = body.rsplit_once("] ").map_or(body, |(_, b)| b);
    let mut words = body.split_whitespace();
    let size: u64 = words.next()?.parse().ok()?;
    let rest: Vec<&str> = words.collect();
    (rest.len() >= 6 && rest.iter().filter(|w| w.contains('.')).count() >= 2).then_some(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_addresses_from_nccl_using_lines() {
        for (line, want) in [
            (
                "h:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>",
                vec!["10.0.0.2"],
            ),
            (
                "h:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:192.0.2.2<0> [1]ib0:10.1.0.2<0>",
                vec!["192.0.2.2", "10.1.0.2"],
            ),
            (
                "h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:fd00::2<0>",
                vec!["fd00::2"],
            ),
            (
                "h:1:2 [0] NCCL WARN Call to recv from 10.0.0.9<4> failed",
                vec![],
            ),
        ] {
            assert_eq!(own_addresses(line), want, "{line}");
        }
    }

    #[test]
    fn errors_read_as_errors() {
        for l in [
            "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled system error",
            "torch.distributed.DistBackendError: NCCL error",
            "[1,0]<stderr>:TL_SHM ERROR Child failed to attach to shmseg",
            "NET/OFI Unable to register memory (type = 2) for device 0. RC: -12, Error: Cannot allocate memory",
            "Traceback (most recent call last):",
            "srun: error: node1: task 3: Exited with exit code 1",
            "[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout",
            "socketPollConnect: connect returned No route to host, retrying (34/34)",
            "Segmentation fault (core dumped)",
            "nccl-tests: Test CUDA failure common.cu:892 'invalid device ordinal'",
        ] {
            assert!(error_like(l), "{l}");
        }
    }

    #[test]
    fn settings_and_healthy_lines_do_not() {
        for l in [
            "TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
            "# Out of bounds values : 0 OK",
            "# Avg bus bandwidth    : 12.5",
            "[W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
            "Epoch 1: loss 0.25, no errors",
            "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error",
            "libfabric:83322:1726684535:ofi_rxm:core:core:fi_getinfo_():1185<info> fi_getinfo: provider udp returned -61 (No data available)",
            "  errorHandler = default",
            "0 errors, 0 warnings",
        ] {
            assert!(!error_like(l), "{l}");
        }
    }

    #[test]
    fn completion_and_sweeps() {
        assert!(completion("# Out of bounds values : 0 OK"));
        assert!(!completion("# Out of bounds values : 3 FAILED"));
        assert!(completion(
            "h:1:2 [0] NCCL INFO comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1000 - Destroy COMPLETE"
        ));
        assert!(!completion(
            "h:1:2 [0] NCCL INFO comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1000 - Abort COMPLETE"
        ));
        assert_eq!(
            sweep_row(
                "     1048576        262144     float     sum      -1    58.68   17.87   33.51      0    57.90   18.11   33.96      0"
            ),
            Some(1048576)
        );
        assert_eq!(
            sweep_row("#  Rank  0 Group  0 Pid  1 on node1 device  0 [0x07] NVIDIA A100"),
            None
        );
        assert!(sweep_header(
            "#                                                              out-of-place                       in-place"
        ));
    }

    #[test]
    fn result_rows_with_wrong_elements() {
        // A row as nccl-tests 2.x prints it, and one under mpirun's tag.
        let bad = "      524288        131072     float     sum      -1    663.1    0.79    0.79  237858    569.4    0.92    0.92  238038";
        assert!(wrong_row(bad));
        assert!(wrong_row(&format!("[1,0]<stdout>:{bad}")));
        let good = "      262144         65536     float     sum      -1    325.1    0.81    0.81      0    325.3    0.81    0.81      0";
        assert!(!wrong_row(good));
        // In-place only wrong; no root column (all_gather before 2.x-style root).
        assert!(wrong_row(
            "  1048576  262144  float  none  1.0  1.0  1.0  0  1.0  1.0  1.0  3"
        ));
        // Unchecked (-c 0) and the oldest releases' float error column are no count.
        assert!(!wrong_row(
            "  8  2  float  sum  -1  10.1  0.00  0.00  N/A  9.9  0.00  0.00  N/A"
        ));
        assert!(!wrong_row(
            "  8  2  float  sum  10.1  0.00  0.00  1e-07  9.9  0.00  0.00  0e+00"
        ));
        assert!(!wrong_row("12 results in 3 files"));
    }
}
