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

mod lines;
use lines::{command_ranks, device, unprefix, untag_within};

#[cfg(test)]
mod tests;
