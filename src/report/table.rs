//! nccl-tests-style text: the fingerprint header, one table per pattern, the slowest ranks.

use super::backing::Backing;
use super::fingerprint::{DriverInfo, Fingerprint, NcclInfo};
use crate::bench::SizeResult;

/// Header lines describing the job (launcher, hosts, ranks, env), each starting with `#` like
/// nccl-tests.
pub fn fingerprint_lines(fp: &Fingerprint, backing: &Backing) -> Vec<String> {
    let mut out = Vec::new();
    out.extend(backing.header_line());
    out.push(format!("# launcher: {}", fp.launcher));
    out.push(format!(
        "# hosts: {} ({})",
        fp.hosts.len(),
        fp.hosts.join(", ")
    ));
    for r in &fp.ranks {
        out.push(format!(
            "#  Rank {:>3} Pid {:>7} on {:>12} device {:>2} [{}] {} {}",
            r.rank, r.pid, r.host, r.device.ordinal, r.device.bus_id, r.device.name, r.device.uuid
        ));
    }
    if !fp.env.is_empty() {
        let env: Vec<String> = fp.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push(format!("# env: {}", env.join(" ")));
    }
    out
}

/// The libnccl line(s), printed as soon as the library is loaded.
pub fn nccl_lines(n: &NcclInfo) -> Vec<String> {
    let sim = n
        .simulated
        .as_deref()
        .map(|s| format!(" [{s}]"))
        .unwrap_or_default();
    let c = &n.capabilities;
    vec![
        format!("# nccl: {} ({}){sim}", n.version, n.path),
        format!(
            "# nccl capabilities: non-blocking init {}, ncclGetLastError {}, ncclCommFinalize {}, native ncclAlltoAll {}, ncclCommSplit {}, native ncclGather/ncclScatter {}",
            yes_no(c.init_rank_config),
            yes_no(c.last_error),
            yes_no(c.finalize),
            yes_no(c.alltoall),
            yes_no(c.split),
            yes_no(c.gather_scatter)
        ),
    ]
}

/// The CUDA driver line, printed as soon as the driver is initialised.
pub fn driver_line(d: &DriverInfo) -> String {
    let sim = d
        .simulated
        .as_deref()
        .map(|s| format!(" [{s}]"))
        .unwrap_or_default();
    format!(
        "# cuda driver: {} ({}) ({}){sim}",
        d.cuda_version, d.version_code, d.path
    )
}

/// Which kind of communicator the run makes, and why it matters for the numbers.
pub fn comm_mode_line(blocking: bool) -> String {
    if blocking {
        "# nccl communicator: blocking, as nccl-tests makes it (NCCL_COMM_BLOCKING=0 makes it non-blocking)".into()
    } else {
        "# nccl communicator: non-blocking (NCCL_COMM_BLOCKING=0): every call is waited out of ncclInProgress before the next, a cost nccl-tests' blocking loop does not pay".into()
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// The heading of one pattern's table.
pub fn table_header(pattern: &str, nranks: u32, backing: &Backing) -> Vec<String> {
    let label = backing
        .label()
        .map(|l| format!(" — {l}"))
        .unwrap_or_default();
    vec![
        "#".into(),
        format!("# {pattern}, {nranks} ranks{label}"),
        format!(
            "# {:>10} {:>12} {:>8} {:>6} {:>10} {:>8} {:>8} {:>7} {:>9} {:>9}  {}",
            "size",
            "count",
            "type",
            "redop",
            "time",
            "algbw",
            "busbw",
            "#wrong",
            "p50",
            "p99",
            "slowest"
        ),
        format!(
            "# {:>10} {:>12} {:>8} {:>6} {:>10} {:>8} {:>8} {:>7} {:>9} {:>9}  {}",
            "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "rank"
        ),
    ]
}

/// One row, aligned with [`table_header`].
pub fn table_row(r: &SizeResult) -> String {
    let wrong = if r.checked {
        r.wrong.to_string()
    } else {
        "N/A".into()
    };
    let redop = r.redop.map(|o| o.name()).unwrap_or("none");
    format!(
        "  {:>10} {:>12} {:>8} {:>6} {:>10.2} {:>8.2} {:>8.2} {:>7} {:>9.2} {:>9.2}  {}",
        r.size_bytes,
        r.count,
        r.dtype.name(),
        redop,
        r.time_us.avg,
        r.algbw_gbs,
        r.busbw_gbs,
        wrong,
        r.time_us.p50,
        r.time_us.p99,
        r.slowest_rank
    )
}

pub use super::footer::{BANDWIDTH_BOUND_BYTES, binary_size, footer_lines, format_g};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Times;
    use crate::elements::{DataType, RedOp};

    #[test]
    fn rows_line_up_with_the_header() {
        let r = SizeResult {
            pattern: "all_reduce".into(),
            size_bytes: 1048576,
            count: 262144,
            dtype: DataType::Float,
            redop: Some(RedOp::Sum),
            time_us: Times {
                avg: 123.456,
                slowest: 130.0,
                p50: 120.0,
                p99: 130.0,
                max: 140.0,
            },
            algbw_gbs: 8.49,
            busbw_gbs: 12.74,
            wrong: 0,
            checked: true,
            slowest_rank: 3,
            rank_avg_us: vec![],
            first_wrong: None,
            found: Default::default(),
            repeats: Vec::new(),
            spread_pct: None,
            requested_bytes: None,
        };
        let row = table_row(&r);
        let head = &table_header("all_reduce", 4, &Backing::Simulated)[2];
        assert_eq!(row.len(), head.len() - "slowest".len() + "3".len());
        assert!(row.contains("  123.46 ") && row.contains(" float ") && row.contains(" sum "));
        assert!(table_header("x", 2, &Backing::Simulated)[1].contains("SIMULATED"));
        assert!(!table_header("x", 2, &Backing::Real)[1].contains("SIMULATED"));
        let gpus = Backing::of(false, true, Some("2.19.3"));
        assert!(table_header("x", 2, &gpus)[1].ends_with("— REAL NCCL 2.19.3 · SIMULATED GPUS"));
    }

    /// The arithmetic of a published nccl-tests run: 64 ranks (8 nodes of 8 V100), posted in
    /// NVIDIA/nccl-tests issue 78 (https://github.com/NVIDIA/nccl-tests/issues/78). Each row's
    /// time, and its out-of-place and in-place columns, go through nccl-smoke's layout, combine
    /// and footer; the size and count columns, algbw, busbw (to the two decimals printed) and
    /// the footer's `%g` average must come out as nccl-tests printed them.
    #[test]
    fn nccl_tests_arithmetic_matches_a_published_run() {
        use crate::bench::{RankSample, Timing, combine};
        use crate::patterns::select;
        let n = 64;
        let t = Timing {
            warmup: 5,
            iters: 20,
            check: true,
            dtype: DataType::Float,
            op: RedOp::Sum,
            deadline: std::time::Duration::from_secs(1),
            latency_floor: 0,
            data_on: crate::bench::DataOn::Device,
            kernel_floor: crate::bench::GPU_KERNEL_FLOOR,
            size_budget: std::time::Duration::ZERO,
        };
        // (pattern, size asked, time in µs, size, count, algbw, busbw) as printed.
        let published = [
            (
                "all_reduce",
                268435456,
                122131.0,
                268435456,
                67108864,
                2.20,
                4.33,
            ),
            (
                "all_reduce",
                268435456,
                122165.0,
                268435456,
                67108864,
                2.20,
                4.33,
            ),
            (
                "all_reduce",
                536870912,
                244833.0,
                536870912,
                134217728,
                2.19,
                4.32,
            ),
            (
                "all_reduce",
                536870912,
                244844.0,
                536870912,
                134217728,
                2.19,
                4.32,
            ),
            (
                "all_to_all",
                268435456,
                520935.0,
                268435456,
                1048576,
                0.52,
                0.51,
            ),
            (
                "all_to_all",
                268435456,
                519562.0,
                268435456,
                1048576,
                0.52,
                0.51,
            ),
            (
                "all_to_all",
                536870912,
                1041974.0,
                536870912,
                2097152,
                0.52,
                0.51,
            ),
            (
                "all_to_all",
                536870912,
                1041299.0,
                536870912,
                2097152,
                0.52,
                0.51,
            ),
        ];
        let mut rows: Vec<(&str, SizeResult)> = Vec::new();
        for (name, asked, us, size, count, algbw, busbw) in published {
            let p = select(&[name.to_string()]).unwrap()[0];
            let layout = p.layout(asked, 4, n);
            // Every rank measured the printed time: the mean over ranks is that time.
            let samples: Vec<RankSample> = (0..n)
                .map(|rank| RankSample {
                    rank,
                    avg_us: us,
                    p50_us: us,
                    p99_us: us,
                    max_us: us,
                    check: None,
                    below_timer: false,
                })
                .collect();
            let r = combine(p, &layout, &t, n, &samples);
            assert_eq!((r.size_bytes, r.count), (size, count), "{name} {asked}");
            assert_eq!(
                format!("{:.2}", r.algbw_gbs),
                format!("{algbw:.2}"),
                "{name}"
            );
            assert_eq!(
                format!("{:.2}", r.busbw_gbs),
                format!("{busbw:.2}"),
                "{name}"
            );
            rows.push((name, r));
        }
        let footer = |name: &str| {
            let mine: Vec<SizeResult> = rows
                .iter()
                .filter(|(n, _)| *n == name)
                .map(|(_, r)| r.clone())
                .collect();
            footer_lines(&mine, &Backing::Real)
        };
        assert!(
            footer("all_reduce")[2].starts_with("# (the average covers "),
            "{:?}",
            footer("all_reduce")
        );
        assert_eq!(
            footer("all_reduce")[..2],
            [
                "# Out of bounds values : 0 OK",
                "# Avg bus bandwidth    : 4.32178 "
            ]
        );
        assert_eq!(
            footer("all_to_all")[..2],
            [
                "# Out of bounds values : 0 OK",
                "# Avg bus bandwidth    : 0.507636 "
            ]
        );
    }

    /// nccl-tests' time is the mean over ranks (`-a 1`), not the slowest rank's.
    #[test]
    fn time_is_the_mean_over_ranks() {
        use crate::bench::{RankSample, Timing, combine};
        let p = crate::patterns::select(&["all_reduce".into()]).unwrap()[0];
        let t = Timing {
            warmup: 1,
            iters: 1,
            check: false,
            dtype: DataType::Float,
            op: RedOp::Sum,
            deadline: std::time::Duration::from_secs(1),
            latency_floor: 0,
            data_on: crate::bench::DataOn::Device,
            kernel_floor: crate::bench::GPU_KERNEL_FLOOR,
            size_budget: std::time::Duration::ZERO,
        };
        let s = |rank, avg_us| RankSample {
            rank,
            avg_us,
            p50_us: avg_us,
            p99_us: avg_us,
            max_us: avg_us,
            check: None,
            below_timer: false,
        };
        let r = combine(
            p,
            &p.layout(1 << 20, 4, 2),
            &t,
            2,
            &[s(0, 100.0), s(1, 300.0)],
        );
        assert_eq!(
            (r.time_us.avg, r.time_us.slowest, r.slowest_rank),
            (200.0, 300.0, 1)
        );
        let wrong = SizeResult { wrong: 3, ..r };
        assert_eq!(
            footer_lines(&[wrong], &Backing::Simulated)[0],
            "# Out of bounds values : 1 FAILED"
        );
    }
}
