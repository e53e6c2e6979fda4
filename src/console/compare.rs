//! What `nccl-smoke compare` does once its arguments are read: reads both runs, prints the
//! comparison (header, environment changes, rows, verdict), draws the plot, and picks the
//! exit code.

use crate::report::compare::{
    Call, Comparison, Options, Side, Verdict, compare, coverage, patterns,
};
use crate::report::nccl_tests::{self, InputError};
use crate::report::{atomic_file, plot};
use crate::stage::exit;
use std::path::Path;

/// The files `nccl-smoke compare` reads and writes.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The first run: a results file or nccl-tests output (text log or `-J` JSON).
    pub before: &'a Path,
    /// The second run, any of the same kinds of file.
    pub after: &'a Path,
    /// The nccl-tests program a text log comes from, when neither the log nor its file name
    /// says (nccl-tests' or nccl-smoke's name).
    pub nccl_tests_pattern: Option<&'a str>,
    /// Draw bus bandwidth over size, both runs, into this SVG file.
    pub plot: Option<&'a Path>,
}

/// `compare`'s exit codes for its `--help`, from the exit-code table the code returns them by.
pub fn exit_help() -> String {
    use crate::stage::exit;
    let codes = exit::of_command(
        "compare",
        &[
            (exit::PASS, "no regression"),
            (
                exit::USAGE,
                "bad input (an unreadable file, runs that cannot be compared)",
            ),
            (exit::WRITE_FAILED, "the --plot file could not be written"),
        ],
    );
    let list: Vec<String> = codes.iter().map(|(c, n)| format!("{c} {n}")).collect();
    format!(
        "Compare two runs' results files (e.g. before and after a driver upgrade): what changed \
         in the environment, bus bandwidth per pattern and size, and a verdict.\n\nExit codes: {}",
        list.join(" · ")
    )
}

/// Compares the two runs of `inputs`, prints the comparison and returns the exit code
/// (`stage::exit`): PASS, REGRESSED, INCONCLUSIVE, or why nothing could be compared.
pub fn run(inputs: &Inputs, opts: &Options) -> u8 {
    if let Some(path) = inputs.plot
        && let Err(e) = atomic_file::check_target(path, "--plot")
    {
        eprintln!("nccl-smoke compare: {e}");
        return exit::USAGE;
    }
    let hint = inputs.nccl_tests_pattern.map(nccl_tests::pattern_of);
    let load = |p: &Path| {
        nccl_tests::read_side(p, hint.as_deref()).map_err(|e| {
            eprintln!("nccl-smoke compare: {e}");
            match e {
                InputError::Io { .. } => exit::USAGE,
                InputError::Malformed { .. } => exit::MALFORMED_INPUT,
            }
        })
    };
    let before = match load(inputs.before) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let after = match load(inputs.after) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let c = match compare(&before, &after, opts) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nccl-smoke compare: cannot compare: {e}");
            return exit::USAGE;
        }
    };
    print_header(inputs, &before, &after);
    print_changes(&c);
    print_rows(&c, opts.level);
    let plot_failed = inputs.plot.is_some_and(|path| {
        let title = format!(
            "bus bandwidth: {} vs {}",
            inputs.before.display(),
            inputs.after.display()
        );
        match plot::busbw_svg(&c, &title, path) {
            Ok(()) => {
                println!("# plot: {}", path.display());
                false
            }
            Err(e) => {
                eprintln!("nccl-smoke compare: no plot: {e}");
                true
            }
        }
    });
    // A log cut short is said beside the verdict too: its sizes after the cut were not judged.
    let cut: Vec<String> = [("first", &before), ("second", &after)]
        .iter()
        .filter_map(|(which, side)| {
            side.notes
                .iter()
                .find(|n| n.starts_with("the log is cut short"))
                .and_then(|n| n.split_once(" at line "))
                .and_then(|(_, rest)| rest.split(',').next())
                .map(|line| format!("the {which} run's log was cut short at line {line}"))
        })
        .collect();
    let cut = if cut.is_empty() {
        String::new()
    } else {
        format!(" ({})", cut.join("; "))
    };
    verdict(&c, opts, plot_failed, &cut)
}

fn print_header(inputs: &Inputs, before: &Side, after: &Side) {
    let label = |s: &Side, p: &Path| {
        format!(
            "{} ({}{}, {} rank(s), {} repeat(s){})",
            p.display(),
            s.source,
            s.started_at
                .as_deref()
                .map(|t| format!(", {t}"))
                .unwrap_or_default(),
            s.ranks,
            s.repeats(),
            if s.simulated { ", SIMULATED" } else { "" }
        )
    };
    println!("# first run : {}", label(before, inputs.before));
    for n in &before.notes {
        println!("#   first run: {n}");
    }
    println!("# second run: {}", label(after, inputs.after));
    for n in &after.notes {
        println!("#   second run: {n}");
    }
    if let (Some(b), Some(a)) = (before.gpu_models(), after.gpu_models())
        && b != a
    {
        println!(
            "# warning: the runs had different GPUs ({b} against {a}): a change in bus \
             bandwidth is the hardware's as much as the software's"
        );
    }
    if before.simulated != after.simulated {
        println!("# warning: one run is SIMULATED: its figures are CPU figures (--mixed-backends)");
    }
    if before.ranks != after.ranks {
        println!(
            "# warning: the runs had {} and {} ranks: bus bandwidth is corrected for the rank \
             count, but the transports and topology differ; compare runs of one job shape",
            before.ranks, after.ranks
        );
    }
}

fn verdict(c: &Comparison, opts: &Options, plot_failed: bool, cut: &str) -> u8 {
    if let Some(b) = c.between_runs_pct {
        println!(
            "# between-run noise: {b:.1}% of time (how much the sizes from {} B up disagree \
             about the change); a regression must clear it too",
            (opts.min_bytes / 16).max(1)
        );
    }
    for n in &c.notes {
        println!("# note: {n}");
    }
    let judged = c.rows.iter().filter(|r| r.call != Call::NotJudged).count();
    let partial = coverage(c, opts.min_bytes)
        .map(|(j, of)| {
            format!(
                " (only {j} of the {of} sizes at {} B or more that either run holds were \
                 judged: the others are in one run only)",
                opts.min_bytes
            )
        })
        .unwrap_or_default();
    match c.verdict() {
        Verdict::Regressed => {
            println!("REGRESSED — {}{partial}{cut}", c.reasons.join("; "));
            exit::REGRESSED
        }
        Verdict::Inconclusive => {
            println!("INCONCLUSIVE — {}{partial}{cut}", c.doubts.join("; "));
            exit::INCONCLUSIVE
        }
        Verdict::NothingCompared => {
            println!("NOTHING COMPARED — {}{cut}", nothing_compared(c, opts));
            exit::NOTHING_COMPARED
        }
        Verdict::NoRegression => {
            println!(
                "NO REGRESSION — {judged} size(s) of {} pattern(s) judged at {} B or more, none \
                 below -{}% beyond the noise{partial}{cut}",
                patterns(&c.rows).len(),
                opts.min_bytes,
                opts.threshold_pct,
            );
            if plot_failed {
                exit::WRITE_FAILED
            } else {
                exit::PASS
            }
        }
    }
}

/// Why no size was judged: what each run holds, so the operator sees the mismatch.
fn nothing_compared(c: &Comparison, opts: &Options) -> String {
    let held = |only: &[(String, usize)]| {
        let mut by: Vec<(String, Vec<usize>)> = Vec::new();
        for (p, s) in only {
            match by.iter_mut().find(|(q, _)| q == p) {
                Some((_, v)) => v.push(*s),
                None => by.push((p.clone(), vec![*s])),
            }
        }
        if by.is_empty() {
            return "no size".to_string();
        }
        by.iter()
            .map(|(p, v)| {
                let (lo, hi) = (v.iter().min().unwrap_or(&0), v.iter().max().unwrap_or(&0));
                format!("{p} {lo}..{hi} B ({} size(s))", v.len())
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if c.rows.is_empty() {
        format!(
            "the runs have no pattern, size and data type in common: the first holds {}; the \
             second {}",
            held(&c.only_before),
            held(&c.only_after)
        )
    } else {
        format!(
            "the {} size(s) both runs hold are all below --min-bytes {} B, where bandwidth is \
             latency noise: lower --min-bytes to judge them, or measure larger sizes",
            c.rows.len(),
            opts.min_bytes
        )
    }
}

fn print_changes(c: &Comparison) {
    if c.changes.is_empty() {
        println!("# environment: no change in driver, NCCL, GPUs, hosts or NCCL_* settings");
    }
    for ch in &c.changes {
        println!("# changed: {ch}");
    }
}

fn print_rows(c: &Comparison, level: f64) {
    let interval = format!("{:.0}% interval", level * 100.0);
    for pattern in patterns(&c.rows) {
        println!("#\n# {pattern} (medians of the repeats; change and interval from the times)");
        println!(
            "# {:>10}  {:>10}  {:>10}  {:>8}  {:>17}  {:>10}  {:>10}",
            "size (B)", "busbw 1st", "busbw 2nd", "change", interval, "time 1st", "time 2nd"
        );
        println!(
            "# {:>10}  {:>10}  {:>10}  {:>8}  {:>17}  {:>10}  {:>10}",
            "", "(GB/s)", "(GB/s)", "", "", "(us)", "(us)"
        );
        for r in c.rows.iter().filter(|r| r.pattern == pattern) {
            let change = r
                .change_pct
                .map(|p| format!("{p:+.1}%"))
                .unwrap_or_else(|| "-".into());
            let interval = r
                .interval_pct
                .map(|(lo, hi)| format!("{lo:+.1}..{hi:+.1}%"))
                .unwrap_or_else(|| "-".into());
            let mark = if r.wrong_after > 0 {
                "  WRONG DATA".to_string()
            } else {
                match r.call {
                    Call::Regressed => "  REGRESSED".into(),
                    // Without repeats there is no noise figure, only the one measurement.
                    Call::Inconclusive { .. } if r.interval_pct.is_none() => {
                        "  INCONCLUSIVE (one measurement a side: noise unknown)".into()
                    }
                    Call::Inconclusive { noise_pct, .. } => {
                        format!("  INCONCLUSIVE (noise {noise_pct:.1}%)")
                    }
                    Call::NotJudged => "  (not judged)".into(),
                    Call::NoRegression => String::new(),
                }
            };
            // Bandwidth that rounds to 0.000 says so, rather than print a 0 beside a change
            // (which comes from the times).
            let bw = |x: f64| {
                if x < 0.0005 {
                    "<0.001".to_string()
                } else {
                    format!("{x:.3}")
                }
            };
            println!(
                "  {:>10}  {:>10}  {:>10}  {:>8}  {:>17}  {:>10.2}  {:>10.2}{mark}",
                r.size_bytes,
                bw(r.before_busbw),
                bw(r.after_busbw),
                change,
                interval,
                r.before_us,
                r.after_us
            );
        }
    }
    for (p, s) in &c.only_before {
        println!("# only in the first run: {p} {s} B");
    }
    for (p, s) in &c.only_after {
        println!("# only in the second run: {p} {s} B");
    }
}
