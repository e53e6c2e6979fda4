//! The lines under each table: nccl-tests' footer (`# Out of bounds values`, `# Avg bus
//! bandwidth`), then nccl-smoke's own notes on what those numbers cover; and the number
//! formats they use.

use super::backing::Backing;
use crate::bench::SizeResult;

/// The footer nccl-tests ends its output with (`writeResultFooter`, `src/util.cu` of
/// NVIDIA/nccl-tests), over one pattern's rows: the number of sizes with wrong data, and the
/// mean bus bandwidth in GB/s printed as C's `%g`. Health checks parse both lines by regex, so
/// they keep nccl-tests' exact shape; a simulated run says so on a line of its own.
pub fn footer_lines(rows: &[SizeResult], backing: &Backing) -> Vec<String> {
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
    out.extend(backing.footer_note());
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
    use crate::elements::{DataType, RedOp};

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
            found: Default::default(),
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
        let f = footer_lines(&rows, &Backing::Real);
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
}
