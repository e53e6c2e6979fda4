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

/// The average bus bandwidth line nccl-tests ends with, over the given rows.
pub fn avg_busbw_line(rows: &[SizeResult], simulated: bool) -> String {
    let avg = if rows.is_empty() {
        0.0
    } else {
        rows.iter().map(|r| r.busbw_gbs).sum::<f64>() / rows.len() as f64
    };
    let label = if simulated { " (SIMULATED)" } else { "" };
    format!("# Avg bus bandwidth    : {avg:.3} GB/s{label}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Times;
    use crate::data::{DataType, RedOp};

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
        };
        let row = table_row(&r);
        let head = &table_header("all_reduce", 4, true)[2];
        assert_eq!(row.len(), head.len() - "slowest".len() + "3".len());
        assert!(row.contains("  123.46 ") && row.contains(" float ") && row.contains(" sum "));
        assert!(table_header("x", 2, true)[1].contains("SIMULATED"));
        assert!(!table_header("x", 2, false)[1].contains("SIMULATED"));
    }
}
