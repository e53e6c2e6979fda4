//! The per-host table rank 0 prints for `isolate`.

use super::IsolateReport;

/// The table rank 0 prints: one line per host, then the verdict.
pub fn table(r: &IsolateReport, label: Option<&str>) -> Vec<String> {
    let gb = |x: Option<f64>| x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
    let mut out = vec![
        format!(
            "# isolate: per host{}",
            label.map(|l| format!(" — {l}")).unwrap_or_default()
        ),
        format!(
            "# {:<20} {:>6} {:>6} {:>10} {:>10} {:>7}  {:<9} {:<10} evidence",
            "host", "ranks", "rounds", "alone", "paired", "vs med", "status", "stage"
        ),
        format!(
            "# {:<20} {:>6} {:>6} {:>10} {:>10} {:>7}",
            "", "", "", "(GB/s)", "(GB/s)", ""
        ),
    ];
    for v in &r.hosts {
        out.push(format!(
            "  {:<20} {:>6} {:>6} {:>10} {:>10} {:>7}  {:<9} {:<10} {}",
            v.host,
            v.ranks.len(),
            v.rounds,
            gb(v.alone_busbw_gbs),
            gb(v.paired_busbw_gbs),
            v.vs_median
                .map(|x| format!("{:.2}", x))
                .unwrap_or_else(|| "-".into()),
            v.status.name(),
            v.stage.map(|s| s.name()).unwrap_or("-"),
            v.evidence.first().map(String::as_str).unwrap_or("")
        ));
        for e in v.evidence.iter().skip(1) {
            out.push(format!("  {:<20} {e}", ""));
        }
    }
    out.extend(r.unchecked_floors.iter().map(|f| {
        format!("# expect: not checked (no group of that size or rank count passed): {f}")
    }));
    out
}
