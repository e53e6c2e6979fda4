//! `nccl-smoke compare BEFORE AFTER`

use crate::bench::sweep;
use crate::report::compare::{self, Call, Comparison, Options, Side, Verdict};
use crate::report::nccl_tests::{self, InputError};
use crate::report::plot;
use crate::stage::exit;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The first run: a results file (`run --json`), or nccl-tests output (its text log or
    /// its `-J` JSON file), e.g. before a driver upgrade. A log holding the same sweep several
    /// times (`-N` cycles, logs put together) gives each size several repeats.
    pub before: PathBuf,
    /// The second run, e.g. after it; any of the same kinds of file.
    pub after: PathBuf,
    /// Percent of bus bandwidth a size may lose before it counts as regressed.
    #[arg(long, default_value = "5", value_parser = threshold)]
    pub threshold: f64,
    /// Sizes below this are shown but not judged (latency-bound: their bandwidth is noise).
    /// Accepts the size suffixes of -b/-e.
    #[arg(long, default_value = "1M", value_parser = sweep::parse_size)]
    pub min_bytes: usize,
    /// Also draw bus bandwidth over size, both runs, as an SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// The nccl-tests program a text log comes from, when the log does not say (nccl-tests
    /// before 2.14) and its file name does not either: `all_reduce_perf`, `alltoall_perf`,
    /// `sendrecv_perf`, … (or nccl-smoke's name: `all_reduce`, `all_to_all`, `send_recv_ring`).
    #[arg(long, value_name = "PROGRAM")]
    pub nccl_tests_pattern: Option<String>,
    /// Compare a SIMULATED run with a GPU run (e.g. a nccl-tests log) anyway: the rows
    /// match, the verdict says nothing about the hardware.
    #[arg(long)]
    pub mixed_backends: bool,
    /// Confidence of the interval each size is judged with, percent. 95 needs 4 repeats a
    /// side; 90 needs 3.
    #[arg(long, default_value = "95", value_parser = confidence)]
    pub confidence: f64,
}

fn confidence(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(c) if (50.0..100.0).contains(&c) => Ok(c / 100.0),
        _ => Err(format!("'{s}' is no confidence from 50 to 99.9 (percent)")),
    }
}

fn threshold(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(t) if t.is_finite() && (0.0..100.0).contains(&t) => Ok(t),
        _ => Err(format!("'{s}' is no percentage between 0 and 100")),
    }
}

pub fn compare(args: &CompareArgs) -> u8 {
    if let Some(path) = &args.plot
        && let Err(e) = crate::report::output::check_target(path, "--plot")
    {
        eprintln!("nccl-smoke compare: {e}");
        return exit::USAGE;
    }
    let hint = args
        .nccl_tests_pattern
        .as_deref()
        .map(nccl_tests::pattern_of);
    let load = |p: &PathBuf| {
        nccl_tests::read_side(p, hint.as_deref()).map_err(|e| {
            eprintln!("nccl-smoke compare: {e}");
            match e {
                InputError::Io { .. } => exit::USAGE,
                InputError::Malformed { .. } => exit::MALFORMED_INPUT,
            }
        })
    };
    let before = match load(&args.before) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let after = match load(&args.after) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let opts = Options {
        threshold_pct: args.threshold,
        min_bytes: args.min_bytes,
        mixed_backends: args.mixed_backends,
        level: args.confidence,
    };
    let c = match compare::compare(&before, &after, &opts) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nccl-smoke compare: cannot compare: {e}");
            return exit::USAGE;
        }
    };
    print_header(args, &before, &after);
    print_changes(&c);
    print_rows(&c, opts.level);
    let plot_failed = args.plot.as_ref().is_some_and(|path| {
        let title = format!(
            "bus bandwidth: {} vs {}",
            args.before.display(),
            args.after.display()
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
    verdict(&c, &opts, plot_failed)
}

fn print_header(args: &CompareArgs, before: &Side, after: &Side) {
    let label = |s: &Side, p: &PathBuf| {
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
    println!("# first run : {}", label(before, &args.before));
    println!("# second run: {}", label(after, &args.after));
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

fn verdict(c: &Comparison, opts: &Options, plot_failed: bool) -> u8 {
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
    match c.verdict() {
        Verdict::Regressed => {
            println!("REGRESSED — {}", c.reasons.join("; "));
            exit::REGRESSED
        }
        Verdict::Inconclusive => {
            println!("INCONCLUSIVE — {}", c.doubts.join("; "));
            exit::INCONCLUSIVE
        }
        Verdict::NoRegression => {
            println!(
                "NO REGRESSION — {judged} size(s) of {} pattern(s) judged at {} B or more, none \
                 below -{}% beyond the noise",
                compare::patterns(&c.rows).len(),
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
    for pattern in compare::patterns(&c.rows) {
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
