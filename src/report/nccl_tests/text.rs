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

/// Where the program a table came from was named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum From {
    Flag,
    Starting,
    Command,
    FileName,
}

impl From {
    fn says(self, line: Option<usize>) -> String {
        match (self, line) {
            (From::Flag, _) => "--nccl-tests-pattern".into(),
            (From::Starting, Some(n)) => format!("its 'Collective test starting' line ({n})"),
            (From::Command, Some(n)) => format!("the command in the log (line {n})"),
            (From::FileName, _) => "the file name".into(),
            (_, None) => "the log".into(),
        }
    }
}

/// At most this many unreadable rows are named one by one in the notes.
const NAMED_BAD_ROWS: usize = 3;

/// Parses nccl-tests text output. `flag` is `--nccl-tests-pattern`; `file_name` the pattern
/// the file's name gives. The program of each table comes from, in order: the flag, the
/// table's `# Collective test starting` line, a command line in the log naming a `*_perf`
/// program, the file name; a command line and a file name that disagree are refused.
pub fn parse(
    path: &Path,
    text: &str,
    flag: Option<&str>,
    file_name: Option<&str>,
) -> Result<Side, InputError> {
    let mut st = State {
        flag: flag.map(str::to_string),
        file_name: file_name.map(str::to_string),
        ..State::default()
    };
    for (i, line) in text.lines().enumerate() {
        st.line(path, i + 1, line)?;
    }
    let last = text.lines().count().max(1);
    if st.rows.is_empty() {
        if let Some(e) = st.first_bad.take() {
            return Err(e);
        }
        if st.in_table {
            return Err(InputError::at(
                path,
                last,
                "the log ends inside a results table before its first complete row: \
                 truncated, or the test died",
            ));
        }
        return Err(InputError::at(
            path,
            last,
            "no nccl-tests results table in this file (rows of size, count, type, time, \
             algbw, busbw under a '#  size  count  type' header)",
        ));
    }
    let mut notes = st.program_notes.clone();
    if st.in_table {
        notes.push(format!(
            "the log is cut short: it ends inside a results table at line {last}, with no \
             '# Avg bus bandwidth' footer; its {} complete row(s) are read",
            st.rows_read
        ));
    }
    if !st.bad_rows.is_empty() {
        let named: Vec<String> = st.bad_rows.iter().take(NAMED_BAD_ROWS).cloned().collect();
        let more = st.bad_rows.len().saturating_sub(NAMED_BAD_ROWS);
        notes.push(format!(
            "{} row(s) could not be read and were skipped: {}{}",
            st.bad_rows.len(),
            named.join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        ));
    }
    let mut hosts: Vec<String> = Vec::new();
    for (h, _) in &st.devices {
        if !hosts.contains(h) {
            hosts.push(h.clone());
        }
    }
    let ranks = match (st.ranks, st.info_nranks, st.command_ranks) {
        (0, Some(n), _) => {
            notes.push(format!(
                "{n} rank(s), from NCCL's INFO lines (no '#  Rank' line)"
            ));
            n
        }
        (0, None, Some(n)) => {
            notes.push(format!("{n} rank(s), from the command (no '#  Rank' line)"));
            n
        }
        (0, None, None) => {
            notes.push("the rank count is unknown (no '#  Rank' line): taken as 1".into());
            1
        }
        (n, _, _) => n,
    };
    Ok(Side {
        source: "nccl-tests text".into(),
        started_at: None,
        ranks,
        simulated: false,
        fingerprint: None,
        nccl_version: st.nccl_version,
        failed: None,
        rows: st.rows,
        gpus: st.devices.into_iter().map(|(_, g)| g).collect(),
        hosts,
        notes,
    })
}

/// The columns of a table, from its header line.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Columns {
    /// Words in the header: a row has as many.
    words: usize,
    dtype: usize,
    redop: Option<usize>,
    time: usize,
    busbw: usize,
    /// `#wrong` (a count; `N/A` unchecked), or `error` (before 2.x: the largest error, not a
    /// count: read as nothing wrong).
    wrong: Option<(usize, bool)>,
}

impl Columns {
    /// From the header's words (`#` and all): the out-of-place group's columns, the first
    /// of each name. `None` when it lacks a size, type, time or busbw column.
    fn of(words: &[&str]) -> Option<Columns> {
        let at = |name: &str| words.iter().position(|w| *w == name);
        if at("size")? != 0 || at("count")? != 1 {
            return None;
        }
        let time = at("time")?;
        let busbw = at("busbw")?;
        let wrong = words
            .iter()
            .enumerate()
            .skip(busbw)
            .find(|(_, w)| matches!(**w, "#wrong" | "error"))
            .map(|(i, w)| (i, *w == "error"));
        Some(Columns {
            words: words.len(),
            dtype: at("type")?,
            redop: at("redop"),
            time,
            busbw,
            wrong,
        })
    }

    /// The last column a row needs.
    fn needs(&self) -> usize {
        self.wrong.map_or(self.busbw, |(i, _)| i).max(self.time) + 1
    }

    /// The columns of a row that leaves its redop blank, as old all-to-all tables under a
    /// `redop` header do (one word fewer than the header, a number where the redop goes).
    fn for_row(&self, w: &[&str]) -> Columns {
        match self.redop {
            Some(r)
                if w.len() + 1 == self.words
                    && w.get(r).is_some_and(|x| x.parse::<f64>().is_ok()) =>
            {
                let left = |i: usize| if i > r { i - 1 } else { i };
                Columns {
                    words: self.words - 1,
                    dtype: self.dtype,
                    redop: None,
                    time: left(self.time),
                    busbw: left(self.busbw),
                    wrong: self.wrong.map(|(i, e)| (left(i), e)),
                }
            }
            _ => *self,
        }
    }
}

#[derive(Default)]
struct State {
    flag: Option<String>,
    file_name: Option<String>,
    /// The program of the current test: from its starting line, or a command line.
    starting: Option<(String, usize)>,
    command: Option<(String, usize)>,
    /// The pattern of the table being read.
    pattern: Option<String>,
    program_notes: Vec<String>,
    nccl_version: Option<String>,
    /// `#  Rank` lines of the first test.
    ranks: usize,
    /// (host, GPU model) of each of those ranks.
    devices: Vec<(String, String)>,
    /// The rank count other lines give where no `#  Rank` line does: NCCL's INFO lines
    /// (`nranks N`), or the command (`-np N` processes × `-g N` GPUs each).
    info_nranks: Option<usize>,
    command_ranks: Option<usize>,
    ranks_done: bool,
    in_table: bool,
    columns: Option<Columns>,
    rows: Vec<super::super::compare::Measured>,
    rows_read: usize,
    bad_rows: Vec<String>,
    first_bad: Option<InputError>,
}

impl State {
    fn line(&mut self, path: &Path, n: usize, line: &str) -> Result<(), InputError> {
        let line = untag_within(line);
        let t = unprefix(&line).trim();
        if let Some(rest) = t.strip_prefix('#') {
            self.comment(path, n, rest.trim())?;
            return Ok(());
        }
        // Logs pasted where `#` starts a heading lose it; their header and footer still read.
        if self.comment(path, n, t)? {
            return Ok(());
        }
        let first = t.split_whitespace().next().unwrap_or("");
        if !self.in_table || first.parse::<u64>().is_err() {
            // Not a row: a launcher's, the shell's or NCCL's line; a command naming the
            // program counts for the next table.
            if t.contains("NCCL INFO") {
                if let Some(k) = t
                    .split_once(" nranks ")
                    .and_then(|(_, r)| r.split_whitespace().next())
                    .and_then(|k| k.parse::<usize>().ok())
                {
                    self.info_nranks = Some(self.info_nranks.map_or(k, |m| m.max(k)));
                }
            } else if !self.in_table
                && !t.contains("NCCL WARN")
                && let Some(p) = super::program_in(t)
            {
                self.command = Some((p.to_string(), n));
                self.command_ranks = command_ranks(t).or(self.command_ranks);
            }
            return Ok(());
        }
        let (Some(pattern), Some(cols)) = (self.pattern.clone(), self.columns) else {
            return Ok(());
        };
        match row(t, &cols) {
            Ok(r) => {
                self.rows_read += 1;
                add(
                    &mut self.rows,
                    Row {
                        pattern: &pattern,
                        ..r
                    },
                );
            }
            Err(m) => {
                self.bad_rows.push(format!("line {n}: {m}"));
                if self.first_bad.is_none() {
                    self.first_bad = Some(InputError::at(path, n, m));
                }
            }
        }
        Ok(())
    }

    /// The pattern of a table whose header is at line `n`, and a note saying where its
    /// program's name came from.
    fn program(&mut self, path: &Path, n: usize) -> Result<String, InputError> {
        let pick = |p: &str| super::pattern_of(p);
        let (program, from, at) = if let Some(f) = &self.flag {
            (f.clone(), From::Flag, None)
        } else if let Some((p, at)) = &self.starting {
            (p.clone(), From::Starting, Some(*at))
        } else {
            match (&self.command, &self.file_name) {
                (Some((c, at)), Some(f)) if pick(c) != pick(f) => {
                    return Err(InputError::at(
                        path,
                        n,
                        format!(
                            "the command in the log (line {at}) runs {c}, but the file name \
                             says {f}: name the program with --nccl-tests-pattern"
                        ),
                    ));
                }
                (Some((c, at)), _) => (c.clone(), From::Command, Some(*at)),
                (None, Some(f)) => (f.clone(), From::FileName, None),
                (None, None) => {
                    return Err(InputError::at(
                        path,
                        n,
                        "this log does not say which nccl-tests program wrote it (no '# \
                         Collective test starting' line, no command naming a *_perf program): \
                         name it in the file name (e.g. all_reduce_perf.log) or with \
                         --nccl-tests-pattern",
                    ));
                }
            }
        };
        let pattern = pick(&program);
        let note = format!("{pattern}: the program named by {}", from.says(at));
        if !self
            .program_notes
            .iter()
            .any(|x| x.starts_with(&format!("{pattern}:")))
        {
            self.program_notes.push(note);
        }
        Ok(pattern)
    }

    /// Takes in a header or footer line (without its `#`); false when it is none.
    fn comment(&mut self, path: &Path, n: usize, c: &str) -> Result<bool, InputError> {
        if let Some(p) = c.strip_prefix("Collective test starting:") {
            self.starting = Some((p.trim().to_string(), n));
        } else if let Some(code) = c
            .split_whitespace()
            .find_map(|w| w.strip_prefix("nccl-library="))
            .and_then(|v| v.parse::<i64>().ok())
        {
            self.nccl_version = Some(version_of_code(code));
        } else if c.starts_with("Rank ") && c.contains(" on ") && !self.ranks_done {
            self.ranks += 1;
            if let Some(d) = device(c) {
                self.devices.push(d);
            }
        } else if c.starts_with("size") && c.contains("count") && c.contains("busbw") {
            let words: Vec<&str> = c.split_whitespace().collect();
            let Some(cols) = Columns::of(&words) else {
                return Ok(false);
            };
            self.pattern = Some(self.program(path, n)?);
            self.columns = Some(cols);
            self.in_table = true;
            self.ranks_done = true;
        } else if c.starts_with("Avg bus bandwidth") || c.starts_with("Collective test concluded:")
        {
            self.in_table = false;
            self.starting = None;
            self.command = None;
        } else {
            if self.nccl_version.is_none()
                && let Some(v) = c
                    .split_once("NCCL version ")
                    .and_then(|(_, r)| r.split_whitespace().next())
                    .map(|v| v.split('+').next().unwrap_or(v))
                    .filter(|v| v.split('.').count() == 3)
            {
                self.nccl_version = Some(v.to_string());
            }
            return Ok(false);
        }
        Ok(true)
    }
}

/// Ranks a launch command starts: its process count (`-np N`, `-n N`, `--ntasks N` or
/// `--ntasks=N`) times nccl-tests' GPUs per process (`-g N`, default 1) and threads (`-t N`).
fn command_ranks(t: &str) -> Option<usize> {
    let w: Vec<&str> = t.split_whitespace().collect();
    let after = |flags: &[&str]| {
        w.iter().enumerate().find_map(|(i, x)| {
            flags.iter().find_map(|f| {
                if x == f {
                    w.get(i + 1).and_then(|v| v.parse::<usize>().ok())
                } else {
                    x.strip_prefix(&format!("{f}="))
                        .and_then(|v| v.parse::<usize>().ok())
                }
            })
        })
    };
    let procs = after(&["-np", "-n", "--ntasks", "--np"])?;
    let per = |f: &str| {
        // nccl-tests' own flags come after the program name.
        let at = w.iter().position(|x| super::program_in(x).is_some())?;
        w[at..]
            .iter()
            .position(|x| *x == f)
            .and_then(|i| w.get(at + i + 1))
            .and_then(|v| v.parse::<usize>().ok())
    };
    Some(procs * per("-g").unwrap_or(1) * per("-t").unwrap_or(1))
}

/// The host and GPU model of a device line (`Rank 0 Group 0 Pid 1 on HOST device 0 [BUS]
/// MODEL`; no Group before nccl-tests 2.10-ish).
fn device(c: &str) -> Option<(String, String)> {
    let (_, after_on) = c.split_once(" on ")?;
    let mut w = after_on.split_whitespace();
    let host = w.next()?.to_string();
    let rest = after_on.split_once(" device ")?.1.trim_start();
    // `0 [0x18] NVIDIA H100 80GB HBM3`: the ordinal, the bus id, then the model.
    let model = rest.split_once(']').map(|(_, m)| m.trim())?;
    (!model.is_empty()).then(|| (host, model.to_string()))
}

/// `line` less what a launcher puts before each line: Open MPI's `mpirun --tag-output`
/// (`[1,0]<stdout>:`) and Slurm's `srun --label` (`0: `, right-aligned).
fn unprefix(line: &str) -> &str {
    let line = untag(line);
    let t = line.trim_start();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0
        && let Some(rest) = t[digits..].strip_prefix(':')
        && (rest.is_empty() || rest.starts_with(' '))
    {
        return untag(rest.strip_prefix(' ').unwrap_or(rest));
    }
    line
}

/// `line` without the Open MPI tags (`[1,0]<stdout>:`) that `--tag-output` puts inside it,
/// before each piece a rank printed (nccl-tests prints a row in pieces); the leading one is
/// left for [`unprefix`].
fn untag_within(line: &str) -> std::borrow::Cow<'_, str> {
    let body = untag(line);
    if !body.contains("]<std") {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    out.push_str(&line[..line.len() - body.len()]);
    let mut rest = body;
    while let Some(at) = rest.find('[') {
        let tail = untag(&rest[at..]);
        if tail.len() == rest.len() - at {
            out.push_str(&rest[..=at]);
            rest = &rest[at + 1..];
        } else {
            out.push_str(&rest[..at]);
            out.push(' ');
            rest = tail;
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
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

/// One table row (pattern left empty for the caller), its columns where the header put them.
fn row<'a>(t: &'a str, cols: &Columns) -> Result<Row<'a>, String> {
    let w: Vec<&str> = t.split_whitespace().collect();
    let cols = &cols.for_row(&w);
    if w.len() < cols.needs() {
        return Err(format!(
            "row cut short: {} columns, {} expected: '{t}'",
            w.len(),
            cols.needs()
        ));
    }
    let int = |i: usize, what: &str| -> Result<u64, String> {
        w[i].parse::<u64>()
            .map_err(|_| format!("'{}' is not a {what}: '{t}'", w[i]))
    };
    let size = int(0, "size")? as usize;
    int(1, "count")?;
    let word = |i: usize, what: &str| -> Result<&str, String> {
        let x = w[i];
        if x.parse::<f64>().is_ok() {
            Err(format!("'{x}' is a number where the {what} belongs: '{t}'"))
        } else {
            Ok(x)
        }
    };
    let dtype = word(cols.dtype, "type")?;
    let redop = match cols.redop {
        Some(i) => word(i, "redop")?,
        None => "none",
    };
    let num = |i: usize, what: &str| -> Result<f64, String> {
        w[i].parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| format!("'{}' is not a number ({what}): '{t}'", w[i]))
    };
    let time_us = num(cols.time, "time")?;
    let busbw = num(cols.busbw, "busbw")?;
    let wrong = match cols.wrong {
        None | Some((_, true)) => 0,
        Some((i, false)) => match w[i] {
            "N/A" => 0,
            x => x
                .parse::<u64>()
                .map_err(|_| format!("'{x}' is not a count of wrong elements: '{t}'"))?,
        },
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
        let s = parse(Path::new("x.log"), LOG, None, None).unwrap();
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
        let s = parse(Path::new("x.log"), &twice, None, None).unwrap();
        assert_eq!(s.rows[0].times_us, vec![10.5, 12.5]);
    }

    #[test]
    fn cut_logs_keep_their_complete_rows_and_say_where_they_end() {
        let cut: String = LOG.lines().take(13).collect::<Vec<_>>().join("\n");
        let s = parse(Path::new("cut.log"), &cut, None, None).unwrap();
        assert_eq!(s.rows.len(), 1);
        assert!(
            s.notes.iter().any(|n| n
                .starts_with("the log is cut short: it ends inside a results table at line 13")
                && n.ends_with("its 1 complete row(s) are read")),
            "{:?}",
            s.notes
        );
        // Cut before its first row: nothing to read, and it says so.
        let cut: String = LOG.lines().take(12).collect::<Vec<_>>().join("\n");
        let e = parse(Path::new("cut.log"), &cut, None, None).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "cut.log:12: the log ends inside a results table before its first complete row"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_bad_row_is_skipped_and_named_unless_every_row_is_bad() {
        // Only the out-of-place group is read: a row cut in its in-place group still is.
        let half = LOG.replace("10.20    0.00    0.00      0\n", "10.20\n");
        let s = parse(Path::new("half.log"), &half, None, None).unwrap();
        assert_eq!(s.rows.len(), 2);
        assert!(
            !s.notes.iter().any(|n| n.contains("skipped")),
            "{:?}",
            s.notes
        );
        let half = LOG.replace(
            "10.50    0.00    0.00      0    10.20    0.00    0.00      0\n",
            "10.50\n",
        );
        let s = parse(Path::new("half.log"), &half, None, None).unwrap();
        assert_eq!(s.rows.len(), 1);
        assert!(
            s.notes.iter().any(|n| n.starts_with(
                "1 row(s) could not be read and were skipped: line 13: row cut short"
            )),
            "{:?}",
            s.notes
        );
        let bad = LOG.replace("10.50", "ten").replace("11.00", "eleven");
        let e = parse(Path::new("bad.log"), &bad, None, None).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("bad.log:13: 'ten' is not a number (time)"),
            "{e}"
        );
        let e = parse(Path::new("e.log"), "hello\n", None, None).unwrap_err();
        assert!(e.to_string().contains("no nccl-tests results table"), "{e}");
    }

    #[test]
    fn the_columns_come_from_the_header_in_every_layout() {
        // nccl-tests before 2.10: an error column, no root; all_gather without redop;
        // broadcast with a root and no redop.
        let old = "\
#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)             (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024           256   float    34.27    0.03    0.02  0e+00    33.57    0.03    0.02  0e+00
# Avg bus bandwidth    : 0.02
";
        let s = parse(
            Path::new("all_gather_perf.log"),
            old,
            None,
            Some("all_gather_perf"),
        )
        .unwrap();
        let r = &s.rows[0];
        assert_eq!(
            (r.pattern.as_str(), r.kind.as_str()),
            ("all_gather", "float/-")
        );
        assert_eq!(
            (r.times_us.clone(), r.busbw_gbs.clone()),
            (vec![34.27], vec![0.02])
        );
        let bcast = old
            .replace("type     time", "type    root     time")
            .replace("float    34.27", "float       0    34.27");
        let s = parse(Path::new("b.log"), &bcast, Some("broadcast_perf"), None).unwrap();
        assert_eq!(s.rows[0].times_us, vec![34.27]);
    }

    #[test]
    fn the_program_comes_from_the_command_when_the_log_does_not_name_it() {
        let old = LOG.replace("# Collective test starting: all_reduce_perf\n", "");
        let cmd = format!("$ mpirun -np 2 ./build/alltoall_perf -b 8 -e 128 -f 2\n{old}");
        let s = parse(Path::new("run.log"), &cmd, None, None).unwrap();
        assert_eq!(s.rows[0].pattern, "all_to_all");
        assert!(
            s.notes[0]
                .starts_with("all_to_all: the program named by the command in the log (line 1)"),
            "{:?}",
            s.notes
        );
        // The command and the file name disagree: ask.
        let e = parse(Path::new("x.log"), &cmd, None, Some("all_reduce_perf")).unwrap_err();
        assert!(e.to_string().contains("--nccl-tests-pattern"), "{e}");
        // The file name alone.
        let s = parse(Path::new("x.log"), &old, None, Some("sendrecv_perf")).unwrap();
        assert_eq!(s.rows[0].pattern, "send_recv_ring");
        assert_eq!(
            s.notes[0],
            "send_recv_ring: the program named by the file name"
        );
    }

    #[test]
    fn devices_give_hosts_and_gpu_models_and_nccl_info_its_version() {
        let s = parse(Path::new("x.log"), LOG, None, None).unwrap();
        assert_eq!(s.hosts, vec!["node1".to_string()]);
        assert_eq!(s.gpu_models().as_deref(), Some("2 × NVIDIA H100 80GB HBM3"));
        let info = LOG
            .replace(" nccl-headers=22705 nccl-library=22705", "")
            .replace(
                "Bootstrap : Using eth0:10.0.0.1<0>",
                "NCCL version 2.26.2+cuda12.8",
            );
        let s = parse(Path::new("x.log"), &info, None, None).unwrap();
        assert_eq!(s.nccl_version.as_deref(), Some("2.26.2"));
    }

    #[test]
    fn open_mpi_tags_inside_a_row_and_blank_redops_read() {
        let row = "[1,0]<stdout>:           8             2     float     sum      -1[1,0]<stdout>:    85.14    0.00    0.00      0[1,0]<stdout>:    62.82    0.00    0.00      0";
        let clean = untag_within(row);
        assert_eq!(
            unprefix(&clean).split_whitespace().collect::<Vec<_>>(),
            [
                "8", "2", "float", "sum", "-1", "85.14", "0.00", "0.00", "0", "62.82", "0.00",
                "0.00", "0"
            ]
        );
        assert_eq!(untag_within("[a] [1,0]<x"), "[a] [1,0]<x");
        let a2a = "\
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
        1024           256   float             1.63    0.60    0.55    N/A     1.38    0.00    0.00    N/A
# Avg bus bandwidth    : 0.5
";
        let s = parse(Path::new("a.log"), a2a, Some("alltoall_perf"), None).unwrap();
        assert_eq!(
            (
                s.rows[0].kind.as_str(),
                s.rows[0].times_us.clone(),
                s.rows[0].busbw_gbs.clone()
            ),
            ("float/-", vec![1.63], vec![0.55])
        );
    }

    #[test]
    fn the_rank_count_comes_from_nccl_or_the_command_without_device_lines() {
        assert_eq!(
            command_ranks("mpirun -np 4 ./build/all_reduce_perf -b 8 -e 1G -g 2"),
            Some(8)
        );
        assert_eq!(
            command_ranks("srun --ntasks=16 all_reduce_perf -b 8"),
            Some(16)
        );
        assert_eq!(command_ranks("./build/all_reduce_perf -b 8 -g 8"), None);
        let bare: String = LOG
            .lines()
            .filter(|l| !l.starts_with("#  Rank"))
            .map(|l| format!("{l}\n"))
            .collect();
        let s = parse(Path::new("x.log"), &bare, None, None).unwrap();
        assert_eq!(s.ranks, 1);
        assert!(
            s.notes
                .iter()
                .any(|n| n.starts_with("the rank count is unknown")),
            "{:?}",
            s.notes
        );
        let info = bare.replace(
            "Bootstrap : Using eth0:10.0.0.1<0>",
            "comm 0x1 rank 0 nranks 16 cudaDev 0 busId 1000 - Init COMPLETE",
        );
        let s = parse(Path::new("x.log"), &info, None, None).unwrap();
        assert_eq!(s.ranks, 16);
        let cmd = format!("mpirun -np 2 ./all_reduce_perf -g 4\n{bare}");
        let s = parse(Path::new("x.log"), &cmd, None, None).unwrap();
        assert_eq!(s.ranks, 8);
    }

    #[test]
    fn srun_labels_are_stripped() {
        let labelled: String = LOG.lines().map(|l| format!("  0: {l}\n")).collect();
        let s = parse(Path::new("t.log"), &labelled, None, None).unwrap();
        assert_eq!((s.rows.len(), s.ranks), (2, 2));
        assert_eq!(unprefix("12: # x"), "# x");
        assert_eq!(unprefix("  0: "), "");
        // A row's size is no label; NCCL's host:pid:tid prefix neither.
        assert_eq!(
            unprefix("           8             2"),
            "           8             2"
        );
        assert_eq!(unprefix("10:1:2 [0] NCCL INFO x"), "10:1:2 [0] NCCL INFO x");
    }

    #[test]
    fn tagged_output_and_pasted_logs_without_hashes_read() {
        let tagged: String = LOG
            .lines()
            .map(|l| format!("[1,0]<stdout>:{l}\n"))
            .collect();
        let s = parse(Path::new("t.log"), &tagged, None, None).unwrap();
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
        let s = parse(Path::new("b.log"), &bare, None, None).unwrap();
        assert_eq!(s.rows.len(), 2);
    }

    #[test]
    fn an_old_log_without_program_or_root_needs_a_name() {
        let old = LOG
            .replace("# Collective test starting: all_reduce_perf\n", "")
            .replace("      -1 ", " ")
            .replace("    root", "");
        let e = parse(Path::new("old.log"), &old, None, None).unwrap_err();
        assert!(e.to_string().contains("--nccl-tests-pattern"), "{e}");
        let s = parse(Path::new("old.log"), &old, Some("all_to_all"), None).unwrap();
        assert_eq!(s.rows[0].kind, "float/-");
        assert_eq!(s.rows[0].times_us, vec![10.5]);
        // Without a root column, a time printed as an integer is still the time.
        let int = old.replace("10.50 ", "19340 ");
        let s = parse(Path::new("old.log"), &int, Some("all_reduce"), None).unwrap();
        assert_eq!(s.rows[0].times_us, vec![19340.0]);
    }
}
