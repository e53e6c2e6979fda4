//! `nccl-smoke compare BEFORE AFTER`

use crate::bench::sweep;
use crate::report::compare::{self, Comparison, Options};
use crate::report::{plot, results};
use crate::stage::exit;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The first run's results file (`run --json`), e.g. before a driver upgrade.
    pub before: PathBuf,
    /// The second run's results file, e.g. after it.
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
    let load = |p: &PathBuf| {
        results::load(p).map_err(|e| {
            eprintln!("nccl-smoke compare: {e}");
        })
    };
    let (Ok(before), Ok(after)) = (load(&args.before), load(&args.after)) else {
        return exit::USAGE;
    };
    let opts = Options {
        threshold_pct: args.threshold,
        min_bytes: args.min_bytes,
    };
    let c = match compare::compare(&before, &after, &opts) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nccl-smoke compare: cannot compare: {e}");
            return exit::USAGE;
        }
    };
    let label = |d: &results::ResultsDoc, p: &PathBuf| {
        format!(
            "{} ({}, {} rank(s){})",
            p.display(),
            d.started_at,
            d.fingerprint.ranks.len(),
            if d.simulated { ", SIMULATED" } else { "" }
        )
    };
    println!("# first run : {}", label(&before, &args.before));
    println!("# second run: {}", label(&after, &args.after));
    let (nb, na) = (
        before.fingerprint.ranks.len(),
        after.fingerprint.ranks.len(),
    );
    if nb != na {
        println!(
            "# warning: the runs had {nb} and {na} ranks: bus bandwidth is corrected for the rank \
             count, but the transports and topology differ; compare runs of one job shape"
        );
    }
    print_changes(&c);
    print_rows(&c, &opts);
    let mut plot_failed = false;
    if let Some(path) = &args.plot {
        let title = format!(
            "bus bandwidth: {} vs {}",
            args.before.display(),
            args.after.display()
        );
        match plot::busbw_svg(&c, &title, path) {
            Ok(()) => println!("# plot: {}", path.display()),
            Err(e) => {
                eprintln!("nccl-smoke compare: no plot: {e}");
                plot_failed = true;
            }
        }
    }
    if c.regressed() {
        println!("REGRESSED — {}", c.reasons.join("; "));
        exit::REGRESSED
    } else {
        println!(
            "NO REGRESSION — {} size(s) of {} pattern(s) compared, none below -{}% at {} B or more",
            c.rows.len(),
            compare::patterns(&c.rows).len(),
            opts.threshold_pct,
            opts.min_bytes
        );
        if plot_failed {
            exit::WRITE_FAILED
        } else {
            exit::PASS
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

fn print_rows(c: &Comparison, opts: &Options) {
    for pattern in compare::patterns(&c.rows) {
        println!("#\n# {pattern}");
        println!(
            "# {:>10}  {:>12}  {:>12}  {:>8}  {:>10}  {:>10}",
            "size (B)", "busbw 1st", "busbw 2nd", "change", "time 1st", "time 2nd"
        );
        println!(
            "# {:>10}  {:>12}  {:>12}  {:>8}  {:>10}  {:>10}",
            "", "(GB/s)", "(GB/s)", "", "(us)", "(us)"
        );
        for r in c.rows.iter().filter(|r| r.pattern == pattern) {
            let change = r
                .change_pct
                .map(|p| format!("{p:+.1}%"))
                .unwrap_or_else(|| "-".into());
            let mark = if r.wrong_after > 0 {
                "  WRONG DATA"
            } else if r.regressed {
                "  REGRESSED"
            } else if r.size_bytes < opts.min_bytes {
                "  (not judged)"
            } else {
                ""
            };
            println!(
                "  {:>10}  {:>12.3}  {:>12.3}  {:>8}  {:>10.2}  {:>10.2}{mark}",
                r.size_bytes, r.before_busbw, r.after_busbw, change, r.before_us, r.after_us
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
