//! nccl-tests-style text: the fingerprint header, one table per pattern, the slowest ranks.

use super::fingerprint::{DriverInfo, Fingerprint, NcclInfo};
use crate::bench::SizeResult;

/// Header lines describing the job (launcher, hosts, ranks, env), each starting with `#` like
/// nccl-tests.
pub fn fingerprint_lines(fp: &Fingerprint, simulated: bool) -> Vec<String> {
    let mut out = Vec::new();
    if simulated {
        out.push(
            "# SIMULATED run: nccl-smoke's CPU stand-ins for libnccl and libcuda; bandwidth and \
             latency below are CPU/TCP numbers, not GPU measurements"
                .to_string(),
        );
    }
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
            "# nccl capabilities: non-blocking init {}, ncclGetLastError {}, ncclCommFinalize {}, native ncclAlltoAll {}",
            yes_no(c.init_rank_config),
            yes_no(c.last_error),
            yes_no(c.finalize),
            yes_no(c.alltoall)
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
pub fn table_header(pattern: &str, nranks: u32, simulated: bool) -> Vec<String> {
    let label = if simulated { " — SIMULATED" } else { "" };
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

/// The footer nccl-tests ends its output with (`writeResultFooter`, `src/util.cu` of
/// NVIDIA/nccl-tests), over one pattern's rows: the number of sizes with wrong data, and the
/// mean bus bandwidth in GB/s printed as C's `%g`. Health checks parse both lines by regex, so
/// they keep nccl-tests' exact shape; a simulated run says so on a line of its own.
pub fn footer_lines(rows: &[SizeResult], simulated: bool) -> Vec<String> {
    let wrong_sizes = rows.iter().filter(|r| r.wrong > 0).count();
    let avg = if rows.is_empty() {
        0.0
    } else {
        rows.iter().map(|r| r.busbw_gbs).sum::<f64>() / rows.len() as f64
    };
    let mut out = vec![
        format!(
            "# {:<20} : {} {}",
            "Out of bounds values",
            wrong_sizes,
            if wrong_sizes > 0 { "FAILED" } else { "OK" }
        ),
        format!("# {:<20} : {} ", "Avg bus bandwidth", format_g(avg)),
    ];
    if let Some(line) = coverage_line(rows) {
        out.push(line);
    }
    if let Some(line) = rounding_line(rows) {
        out.push(line);
    }
    let launch_bound = rows
        .iter()
        .filter(|r| r.time_us.avg > r.time_us.max)
        .count();
    if launch_bound > 0 {
        out.push(format!(
            "# (time is host wall-clock per iteration, as nccl-tests times it; p50/p99 are the \
             GPU-event intervals between iterations: at {launch_bound} size(s) the host's launch \
             overhead put the time above every interval, i.e. those sizes are launch-bound)"
        ));
    }
    if simulated {
        out.push("# (SIMULATED: CPU/TCP figures, not a GPU measurement)".into());
    }
    out
}

/// Which sizes nccl-tests' average covers (all of them, latency-bound ones included), and the
/// average over the bandwidth-bound ones (≥ [`BANDWIDTH_BOUND_BYTES`]) when there are both.
fn coverage_line(rows: &[SizeResult]) -> Option<String> {
    let first = rows.first()?;
    let last = rows.last()?;
    let big: Vec<f64> = rows
        .iter()
        .filter(|r| r.size_bytes >= BANDWIDTH_BOUND_BYTES)
        .map(|r| r.busbw_gbs)
        .collect();
    let span = if first.size_bytes == last.size_bytes {
        binary_size(first.size_bytes)
    } else {
        format!(
            "{} to {}",
            binary_size(first.size_bytes),
            binary_size(last.size_bytes)
        )
    };
    let mut line = format!(
        "# (the average covers {} size(s), {span}, as nccl-tests averages",
        rows.len()
    );
    if !big.is_empty() && big.len() < rows.len() {
        line += &format!(
            "; over the {} size(s) from {}: {}",
            big.len(),
            binary_size(BANDWIDTH_BOUND_BYTES),
            format_g(big.iter().sum::<f64>() / big.len() as f64)
        );
    }
    line.push(')');
    Some(line)
}

/// The sizes the pattern rounded (to whole elements, or whole 16-byte chunks per peer as
/// nccl-tests' all-to-all does), asked → measured, so a size column that depends on the rank
/// count is never a surprise.
fn rounding_line(rows: &[SizeResult]) -> Option<String> {
    let rounded: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            let asked = r.requested_bytes?;
            (asked != r.size_bytes).then(|| format!("{asked} → {}", r.size_bytes))
        })
        .collect();
    if rounded.is_empty() {
        return None;
    }
    let shown = rounded
        .iter()
        .take(4)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    let more = if rounded.len() > 4 { ", …" } else { "" };
    Some(format!(
        "# (sizes rounded down as nccl-tests rounds them, to whole elements per peer: {} of {} \
         sizes, B asked → B measured: {shown}{more}; compare matches rows on the size asked)",
        rounded.len(),
        rows.len()
    ))
}

/// From this size up a message is taken as bandwidth-bound (the `compare` default too).
pub const BANDWIDTH_BOUND_BYTES: usize = 1 << 20;

/// `8 B`, `64 KiB`, `128 MiB`, `1.5 GiB`: powers of 1024, as `-b`/`-e` take them.
pub fn binary_size(bytes: usize) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else if (v * 10.0).fract() == 0.0 {
        format!("{v:.1} {}", UNITS[u])
    } else {
        // Not a round number of the unit (a rounded message size): the bytes themselves.
        format!("{bytes} B")
    }
}

/// C's `printf("%g")`: 6 significant digits, trailing zeros dropped, exponent form outside
/// 1e-4 ..< 1e6.
pub fn format_g(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return if x == 0.0 { "0".into() } else { x.to_string() };
    }
    let exp = x.abs().log10().floor() as i32;
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if !(-4..6).contains(&exp) {
        let s = format!("{:.5e}", x);
        let (mant, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        let sign = if e < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant.to_string()), e.abs())
    } else {
        let decimals = (5 - exp).max(0) as usize;
        trim(format!("{:.*}", decimals, x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Times;
    use crate::data::{DataType, RedOp};

    fn row(size: usize, busbw: f64, avg: f64, max: f64) -> SizeResult {
        SizeResult {
            pattern: "all_reduce".into(),
            size_bytes: size,
            count: size / 4,
            dtype: DataType::Float,
            redop: Some(RedOp::Sum),
            time_us: Times {
                avg,
                slowest: avg,
                p50: max,
                p99: max,
                max,
            },
            algbw_gbs: busbw / 2.0,
            busbw_gbs: busbw,
            wrong: 0,
            checked: true,
            slowest_rank: 0,
            rank_avg_us: vec![],
            first_wrong: None,
            repeats: Vec::new(),
            spread_pct: None,
            requested_bytes: None,
        }
    }

    /// The footer says which sizes nccl-tests' average covers and gives the bandwidth-bound
    /// average beside it; a time above every timed interval is explained, not left to look
    /// like a contradiction.
    #[test]
    fn the_footer_says_what_its_numbers_cover() {
        let rows = [
            row(8, 0.0, 7.0, 3.0),
            row(1 << 20, 10.0, 200.0, 250.0),
            row(4 << 20, 20.0, 400.0, 450.0),
        ];
        let f = footer_lines(&rows, false);
        assert_eq!(f[1], "# Avg bus bandwidth    : 10 ");
        assert_eq!(
            f[2],
            "# (the average covers 3 size(s), 8 B to 4 MiB, as nccl-tests averages; over the 2 \
             size(s) from 1 MiB: 15)"
        );
        assert!(
            f[3].contains("at 1 size(s) the host's launch overhead"),
            "{f:?}"
        );
        assert_eq!(f.len(), 4);
        assert_eq!(binary_size(1536), "1.5 KiB");
        assert_eq!(binary_size(128 << 20), "128 MiB");
        assert_eq!(binary_size(4080), "4080 B");
    }

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
            repeats: Vec::new(),
            spread_pct: None,
            requested_bytes: None,
        };
        let row = table_row(&r);
        let head = &table_header("all_reduce", 4, true)[2];
        assert_eq!(row.len(), head.len() - "slowest".len() + "3".len());
        assert!(row.contains("  123.46 ") && row.contains(" float ") && row.contains(" sum "));
        assert!(table_header("x", 2, true)[1].contains("SIMULATED"));
        assert!(!table_header("x", 2, false)[1].contains("SIMULATED"));
    }

    #[test]
    fn g_format_is_cs() {
        assert_eq!(format_g(4.321780282092239), "4.32178");
        assert_eq!(format_g(0.5076359900766167), "0.507636");
        assert_eq!(format_g(0.0), "0");
        assert_eq!(format_g(12.5), "12.5");
        assert_eq!(format_g(123456.7), "123457");
        assert_eq!(format_g(1234567.0), "1.23457e+06");
        assert_eq!(format_g(0.000012345), "1.2345e-05");
        assert_eq!(format_g(0.0001), "0.0001");
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
                    wrong: 0,
                    first_wrong: None,
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
            footer_lines(&mine, false)
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
        };
        let s = |rank, avg_us| RankSample {
            rank,
            avg_us,
            p50_us: avg_us,
            p99_us: avg_us,
            max_us: avg_us,
            wrong: 0,
            first_wrong: None,
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
            footer_lines(&[wrong], true)[0],
            "# Out of bounds values : 1 FAILED"
        );
    }
}
