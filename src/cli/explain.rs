//! `nccl-smoke explain LOG…`

use crate::diagnose::explain::{self, LogSummary};
use crate::stage::exit;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// NCCL log files (NCCL_DEBUG=INFO or WARN output, NCCL_DEBUG_FILE files, or a job's whole
    /// stdout/stderr); `-` reads standard input.
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    /// Print the findings as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn explain(args: &ExplainArgs) -> u8 {
    let mut summaries: Vec<LogSummary> = Vec::new();
    let mut unreadable = false;
    for path in &args.logs {
        let name = path.display().to_string();
        let result = if name == "-" {
            explain::explain_reader("(stdin)", std::io::stdin().lock())
        } else {
            std::fs::File::open(path).and_then(|f| explain::explain_reader(&name, f))
        };
        match result {
            Ok(s) => summaries.push(s),
            Err(e) => {
                eprintln!("nccl-smoke explain: cannot read {name}: {e}");
                unreadable = true;
            }
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&summaries).unwrap_or_default()
        );
    } else {
        print_text(&summaries);
    }
    let first = summaries.iter().flat_map(|s| &s.findings).next();
    match (first, unreadable) {
        (_, true) => exit::USAGE,
        (Some(f), false) => f.exit_code,
        (None, false) => exit::PASS,
    }
}

fn print_text(summaries: &[LogSummary]) {
    let lines: u64 = summaries.iter().map(|s| s.lines).sum();
    let nccl: u64 = summaries.iter().map(|s| s.nccl_lines).sum();
    println!(
        "# explain: {} file(s), {lines} lines, {nccl} NCCL lines",
        summaries.len()
    );
    let mut any = false;
    for s in summaries {
        if s.lines > 0 && s.nccl_lines == 0 {
            println!(
                "# {}: no NCCL log lines (was NCCL_DEBUG set to WARN or INFO?)",
                s.file
            );
        }
        for f in &s.findings {
            any = true;
            let mut at = Vec::new();
            if let Some(h) = &f.host {
                at.push(format!("host {h}"));
            }
            if let Some(p) = f.pid {
                at.push(format!("pid {p}"));
            }
            if let Some(d) = f.device {
                at.push(format!("cuda device {d}"));
            }
            let at = if at.is_empty() {
                String::new()
            } else {
                format!(" on {}", at.join(", "))
            };
            println!("FINDING {}{at} ({}:{})", f.stage, f.file, f.line);
            println!("  evidence: {}", f.evidence);
            println!("  likely cause: {}", f.cause);
            println!("  try: {}", f.hint);
        }
    }
    if !any {
        println!("no known failure signature found");
    }
}
