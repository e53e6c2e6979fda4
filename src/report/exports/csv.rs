//! `--csv FILE`: nccl-tests' columns (size, count, type, redop, root, time, algbw, busbw,
//! #wrong) with the pattern in front and rank and host behind, one row per rank per size, so a
//! spreadsheet can sort out the slow GPU. A rank's time is its own mean time per iteration; its
//! algbw and busbw are the row's bytes over that time (the row's own figures use the mean over
//! ranks, as nccl-tests does with `-a 1`); its #wrong is the wrong elements it received, `N/A`
//! for a size that was not checked (`-c 0`), as nccl-tests writes it.

use super::host_of;
use crate::bench::SizeResult;
use crate::comm::Collective;
use crate::patterns;
use crate::report::results::ResultsDoc;

/// The header row.
pub const COLUMNS: [&str; 12] = [
    "pattern",
    "size",
    "count",
    "type",
    "redop",
    "root",
    "time_us",
    "algbw_gbs",
    "busbw_gbs",
    "wrong",
    "rank",
    "host",
];

/// The whole file.
pub fn render(doc: &ResultsDoc) -> std::io::Result<Vec<u8>> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    w.write_record(COLUMNS)?;
    for row in &doc.results {
        for (rank, us) in row.rank_avg_us.iter().enumerate() {
            let rank = rank as u32;
            w.write_record(record(doc, row, rank, *us))?;
        }
    }
    w.into_inner()
        .map_err(|e| std::io::Error::other(e.to_string()))
}

fn record(doc: &ResultsDoc, row: &SizeResult, rank: u32, us: f64) -> [String; 12] {
    // The row's bytes moved per second at its mean time, scaled to this rank's time.
    let scale = if us > 0.0 { row.time_us.avg / us } else { 0.0 };
    let wrong = if row.checked {
        row.found
            .rank_wrong
            .iter()
            .find(|(r, _)| *r == rank)
            .map_or(0, |(_, n)| *n)
            .to_string()
    } else {
        "N/A".into()
    };
    [
        row.pattern.clone(),
        row.size_bytes.to_string(),
        row.count.to_string(),
        row.dtype.name().into(),
        row.redop.map_or("none", |o| o.name()).into(),
        root(&row.pattern),
        format!("{us:.2}"),
        format!("{:.2}", row.algbw_gbs * scale),
        format!("{:.2}", row.busbw_gbs * scale),
        wrong,
        rank.to_string(),
        host_of(doc, rank).into(),
    ]
}

/// nccl-tests' root column: the root of a rooted collective, else -1.
fn root(pattern: &str) -> String {
    let rooted = patterns::select(&[pattern.to_string()])
        .ok()
        .and_then(|p| p.first().and_then(|p| p.collective()))
        .is_some_and(|c| {
            matches!(
                c,
                Collective::Broadcast
                    | Collective::Reduce
                    | Collective::Gather
                    | Collective::Scatter
            )
        });
    if rooted {
        patterns::ROOT.to_string()
    } else {
        "-1".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::exports::tests::{doc_on, row};

    #[test]
    fn one_row_per_rank_with_its_own_time_wrong_count_and_host() {
        let mut doc = doc_on(&["a", "b"]);
        let mut r = row("all_reduce", 1024, &[10.0, 20.0]);
        r.found.rank_wrong = vec![(1, 3)];
        r.wrong = 3;
        doc.results.push(r);
        let text = String::from_utf8(render(&doc).unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], COLUMNS.join(","));
        // Mean time 15 µs: algbw 1024 B / 15 µs = 0.068 GB/s; rank 0 at 10 µs is 1.5× that.
        assert_eq!(lines.len(), 3, "{text}");
        let r0: Vec<&str> = lines[1].split(',').collect();
        let r1: Vec<&str> = lines[2].split(',').collect();
        assert_eq!(r0[..6], ["all_reduce", "1024", "256", "float", "sum", "-1"]);
        assert_eq!((r0[6], r0[9], r0[10], r0[11]), ("10.00", "0", "0", "a"));
        assert_eq!((r1[6], r1[9], r1[10], r1[11]), ("20.00", "3", "1", "b"));
        let algbw = |r: &[&str]| r[7].parse::<f64>().unwrap();
        assert!(algbw(&r0) > algbw(&r1), "{text}");
    }

    #[test]
    fn an_unchecked_size_says_n_a_and_a_rooted_collective_its_root() {
        let mut doc = doc_on(&["a"]);
        let mut r = row("broadcast", 64, &[1.0]);
        r.checked = false;
        doc.results.push(r);
        let text = String::from_utf8(render(&doc).unwrap()).unwrap();
        let r: Vec<&str> = text.lines().nth(1).unwrap().split(',').collect();
        assert_eq!((r[5], r[9]), ("0", "N/A"), "{text}");
    }
}
