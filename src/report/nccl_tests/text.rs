//! nccl-tests' text output. Its shape (NVIDIA/nccl-tests v2.19.6 `src/util.cu`):
//!
//! - a header of `#` lines: `# nccl-tests version … nccl-library=CODE` and
//!   `# Collective test starting: PROGRAM` (2.14 and later), `# nThread … minBytes …`,
//!   `# Using devices`, one `#  Rank R Group G Pid P on HOST device D [BUS] NAME` per rank;
//! - the table: rows of `size count type redop root`, then the out-of-place group
//!   `time algbw busbw #wrong` and the in-place group (the root column is missing before
//!   2.10; with `-R`/per-iteration timing each group has four more columns; timestamps may
//!   follow); `#wrong` is `N/A` without checking;
//! - the footer `# Out of bounds values : N OK|FAILED`, `# Avg bus bandwidth : X`.
//!
//! Lines that are none of these (NCCL INFO lines, the launcher's) are skipped.

use super::super::compare::Side;
use super::{InputError, Row, add, version_of_code};
use std::path::Path;

/// Parses nccl-tests text output; `hint` names the pattern when the log does not.
pub fn parse(path: &Path, text: &str, hint: Option<&str>) -> Result<Side, InputError> {
    let mut st = State::default();
    for (i, line) in text.lines().enumerate() {
        st.line(path, i + 1, line, hint)?;
    }
    let last = text.lines().count().max(1);
    if st.in_table {
        return Err(InputError::at(
            path,
            last,
            "the log ends inside a results table (no '# Avg bus bandwidth' line after it): \
             truncated, or the test died",
        ));
    }
    if st.rows.is_empty() {
        return Err(InputError::at(
            path,
            last,
            "no nccl-tests results table in this file (rows of size, count, type, redop, \
             time, algbw, busbw under a '#  size  count  type' header)",
        ));
    }
    Ok(Side {
        source: "nccl-tests text".into(),
        started_at: None,
        ranks: st.ranks.max(1),
        simulated: false,
        fingerprint: None,
        nccl_version: st.nccl_version,
        failed: None,
        rows: st.rows,
    })
}

#[derive(Default)]
struct State {
    pattern: Option<String>,
    nccl_version: Option<String>,
    /// `#  Rank` lines of the first test.
    ranks: usize,
    ranks_done: bool,
    in_table: bool,
    /// The table has the four per-iteration columns per group.
    per_iter: bool,
    /// The table has a root column.
    has_root: bool,
    rows: Vec<super::super::compare::Measured>,
}

impl State {
    fn line(
        &mut self,
        path: &Path,
        n: usize,
        line: &str,
        hint: Option<&str>,
    ) -> Result<(), InputError> {
        let t = untag(line).trim();
        if let Some(rest) = t.strip_prefix('#') {
            self.comment(rest.trim(), hint);
            return Ok(());
        }
        // Logs pasted where `#` starts a heading lose it; their header and footer still read.
        if self.comment(t, hint) {
            return Ok(());
        }
        let first = t.split_whitespace().next().unwrap_or("");
        if !self.in_table || first.parse::<u64>().is_err() {
            return Ok(()); // not a row: a launcher's or NCCL's line
        }
        let pattern = self.pattern.clone().ok_or_else(|| {
            InputError::at(
                path,
                n,
                "this log does not say which nccl-tests program wrote it (no '# Collective \
                 test starting' line): name it in the file name (e.g. all_reduce_perf.log) or \
                 with --nccl-tests-pattern",
            )
        })?;
        let row = row(t, self.has_root, self.per_iter).map_err(|m| InputError::at(path, n, m))?;
        add(
            &mut self.rows,
            Row {
                pattern: &pattern,
                ..row
            },
        );
        Ok(())
    }

    /// Takes in a header or footer line (without its `#`); false when it is none.
    fn comment(&mut self, c: &str, hint: Option<&str>) -> bool {
        if let Some(p) = c.strip_prefix("Collective test starting:") {
            self.pattern = Some(super::pattern_of(p.trim()));
        } else if let Some(code) = c
            .split_whitespace()
            .find_map(|w| w.strip_prefix("nccl-library="))
            .and_then(|v| v.parse::<i64>().ok())
        {
            self.nccl_version = Some(version_of_code(code));
        } else if c.starts_with("Rank ") && c.contains(" on ") && !self.ranks_done {
            self.ranks += 1;
        } else if c.starts_with("size") && c.contains("count") && c.contains("busbw") {
            self.in_table = true;
            self.ranks_done = true;
            self.per_iter = c.contains("i_min");
            // The root column came with nccl-tests 2.10; a time may be printed as an integer.
            self.has_root = c.split_whitespace().any(|w| w == "root");
            if self.pattern.is_none() {
                self.pattern = hint.map(str::to_string);
            }
        } else if c.starts_with("Avg bus bandwidth") || c.starts_with("Collective test concluded:")
        {
            self.in_table = false;
        } else {
            return false;
        }
        true
    }
}

/// `line` less the prefix Open MPI's `mpirun --tag-output` puts before each line
/// (`[1,0]<stdout>:`).
fn untag(line: &str) -> &str {
    let Some(rest) = line.strip_prefix('[') else {
        return line;
    };
    match rest.split_once("]<") {
        Some((ids, tail)) if ids.chars().all(|c| c.is_ascii_digit() || c == ',') => {
            tail.split_once(">:").map(|(_, l)| l).unwrap_or(line)
        }
        _ => line,
    }
}

/// One table row (pattern left empty for the caller).
fn row(t: &str, has_root: bool, per_iter: bool) -> Result<Row<'_>, String> {
    let w: Vec<&str> = t.split_whitespace().collect();
    let int = |i: usize, what: &str| -> Result<u64, String> {
        w.get(i)
            .ok_or_else(|| format!("row cut short before its {what} column: '{t}'"))?
            .parse::<u64>()
            .map_err(|_| format!("'{}' is not a {what}: '{t}'", w[i]))
    };
    let size = int(0, "size")? as usize;
    int(1, "count")?;
    let (dtype, redop) = match (w.get(2), w.get(3)) {
        (Some(d), Some(r)) if d.parse::<f64>().is_err() && r.parse::<f64>().is_err() => (*d, *r),
        _ => return Err(format!("no type and redop columns: '{t}'")),
    };
    let at = if has_root { 5 } else { 4 };
    let group = if per_iter { 8 } else { 4 };
    if w.len() < at + 2 * group {
        return Err(format!(
            "row cut short: {} columns, {} expected (out-of-place and in-place groups): '{t}'",
            w.len(),
            at + 2 * group
        ));
    }
    let num = |i: usize, what: &str| -> Result<f64, String> {
        w[i].parse::<f64>()
            .map_err(|_| format!("'{}' is not a number ({what}): '{t}'", w[i]))
    };
    let time_us = num(at, "time")?;
    num(at + 1, "algbw")?;
    let busbw = num(at + 2, "busbw")?;
    let wrong = match w[at + 3] {
        "N/A" => 0,
        x => x
            .parse::<f64>()
            .map_err(|_| format!("'{x}' is not a count of wrong elements: '{t}'"))?
            as u64,
    };
    Ok(Row {
        pattern: "",
        size,
        dtype,
        redop,
        time_us,
        busbw,
        wrong,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
# nccl-tests version 2.17.6 nccl-headers=22705 nccl-library=22705
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1234 on      node1 device  0 [0000:19:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   1235 on      node1 device  1 [0000:3b:00] NVIDIA H100 80GB HBM3
node1:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    10.50    0.00    0.00      0    10.20    0.00    0.00      0
         128            32     float     sum      -1    11.00    0.01    0.01    N/A    10.90    0.01    0.01    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.005
#
# Collective test concluded: all_reduce_perf
";

    #[test]
    fn a_log_gives_rows_ranks_and_version() {
        let s = parse(Path::new("x.log"), LOG, None).unwrap();
        assert_eq!(s.ranks, 2);
        assert_eq!(s.nccl_version.as_deref(), Some("2.27.5"));
        assert_eq!(s.rows.len(), 2);
        let r = &s.rows[1];
        assert_eq!(
            (r.pattern.as_str(), r.size_bytes, r.kind.as_str()),
            ("all_reduce", 128, "float/sum")
        );
        assert_eq!(
            (r.times_us.clone(), r.busbw_gbs.clone()),
            (vec![11.0], vec![0.01])
        );
    }

    #[test]
    fn cycles_become_repeats() {
        let twice = LOG.replace(
            "# Out of bounds",
            "           8             2     float     sum      -1    12.50    0.00    0.00      0    10.20    0.00    0.00      0\n# Out of bounds",
        );
        let s = parse(Path::new("x.log"), &twice, None).unwrap();
        assert_eq!(s.rows[0].times_us, vec![10.5, 12.5]);
    }

    #[test]
    fn truncated_and_malformed_logs_name_the_line() {
        let cut: String = LOG.lines().take(13).collect::<Vec<_>>().join("\n");
        let e = parse(Path::new("cut.log"), &cut, None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cut.log:13: the log ends inside a results table"),
            "{e}"
        );
        let half = LOG.replace("10.20    0.00    0.00      0\n", "10.20\n");
        let e = parse(Path::new("half.log"), &half, None).unwrap_err();
        assert!(
            e.to_string().starts_with("half.log:13: row cut short"),
            "{e}"
        );
        let bad = LOG.replace("10.50", "ten");
        let e = parse(Path::new("bad.log"), &bad, None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("bad.log:13: 'ten' is not a number (time)"),
            "{e}"
        );
        let e = parse(Path::new("e.log"), "hello\n", None).unwrap_err();
        assert!(e.to_string().contains("no nccl-tests results table"), "{e}");
    }

    #[test]
    fn tagged_output_and_pasted_logs_without_hashes_read() {
        let tagged: String = LOG
            .lines()
            .map(|l| format!("[1,0]<stdout>:{l}\n"))
            .collect();
        let s = parse(Path::new("t.log"), &tagged, None).unwrap();
        assert_eq!(s.rows.len(), 2);
        assert_eq!(untag("[1,12]<stderr>:x"), "x");
        assert_eq!(
            untag("[a0000:0:2916721 - context.c:589] INFO"),
            "[a0000:0:2916721 - context.c:589] INFO"
        );
        let bare: String = LOG
            .lines()
            .map(|l| format!("{}\n", l.trim_start_matches('#')))
            .collect();
        let s = parse(Path::new("b.log"), &bare, None).unwrap();
        assert_eq!(s.rows.len(), 2);
    }

    #[test]
    fn an_old_log_without_program_or_root_needs_a_name() {
        let old = LOG
            .replace("# Collective test starting: all_reduce_perf\n", "")
            .replace("      -1 ", " ")
            .replace("    root", "");
        let e = parse(Path::new("old.log"), &old, None).unwrap_err();
        assert!(e.to_string().contains("--nccl-tests-pattern"), "{e}");
        let s = parse(Path::new("old.log"), &old, Some("all_to_all")).unwrap();
        assert_eq!(s.rows[0].kind, "float/-");
        assert_eq!(s.rows[0].times_us, vec![10.5]);
        // Without a root column, a time printed as an integer is still the time.
        let int = old.replace("10.50 ", "19340 ");
        let s = parse(Path::new("old.log"), &int, Some("all_reduce")).unwrap();
        assert_eq!(s.rows[0].times_us, vec![19340.0]);
    }
}
