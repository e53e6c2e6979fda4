//! The README's commands do what the README says they do.
//!
//! Every ```sh block in README.md is preceded by an HTML comment that says what running it must
//! give, and this test runs it (from the repository root, `bash -euo pipefail`, with the built
//! binary first on PATH and Open MPI's root refusal lifted, as the README tells root to do):
//!
//! ```text
//! <!-- readme-test: exit=0 expect="PASS [SIMULATED]" expect="…" timeout=120 -->
//! <!-- readme-test: skip="why it cannot run here" -->
//! ```
//!
//! `expect` strings must all appear in the block's stdout + stderr. A block without a comment
//! fails the test: a new command in the README needs a check or a stated reason.

mod common;

use common::{bin, bounded, require_sim, text};
use std::path::Path;
use std::process::Command;

#[derive(Debug, Default)]
struct Check {
    skip: Option<String>,
    exit: Option<i32>,
    expect: Vec<String>,
    timeout_s: u32,
}

#[derive(Debug)]
struct Block {
    line: usize,
    code: String,
    check: Option<Check>,
}

fn parse_check(comment: &str) -> Result<Check, String> {
    let mut check = Check {
        timeout_s: 120,
        ..Check::default()
    };
    let mut rest = comment.trim();
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once('=')
            .ok_or_else(|| format!("expected key=value at `{rest}`"))?;
        let (value, after) = if let Some(q) = after.strip_prefix('"') {
            let end = q
                .find('"')
                .ok_or_else(|| format!("unclosed quote at `{after}`"))?;
            (&q[..end], &q[end + 1..])
        } else {
            after.split_once(' ').unwrap_or((after, ""))
        };
        match key.trim() {
            "skip" => check.skip = Some(value.to_string()),
            "exit" => check.exit = Some(value.parse().map_err(|_| format!("exit={value}"))?),
            "expect" => check.expect.push(value.to_string()),
            "timeout" => check.timeout_s = value.parse().map_err(|_| format!("timeout={value}"))?,
            other => return Err(format!("unknown key `{other}`")),
        }
        rest = after.trim_start();
    }
    if check.skip.is_none() && check.exit.is_none() {
        return Err("a check needs exit=N (or skip=\"why\")".into());
    }
    Ok(check)
}

fn blocks(readme: &str) -> Result<Vec<Block>, String> {
    const TAG: &str = "<!-- readme-test:";
    let lines: Vec<&str> = readme.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "```sh" {
            let start = i;
            let mut code = String::new();
            i += 1;
            while i < lines.len() && lines[i].trim() != "```" {
                code.push_str(lines[i]);
                code.push('\n');
                i += 1;
            }
            let above = lines[..start].iter().rev().find(|l| !l.trim().is_empty());
            let check = match above.and_then(|l| l.trim().strip_prefix(TAG)) {
                Some(c) => Some(
                    parse_check(c.trim_end().trim_end_matches("-->"))
                        .map_err(|e| format!("README.md:{}: {e}", start))?,
                ),
                None => None,
            };
            out.push(Block {
                line: start + 1,
                code,
                check,
            });
        }
        i += 1;
    }
    Ok(out)
}

fn run_block(root: &Path, b: &Block, check: &Check) -> Result<(), String> {
    let bin_dir = bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-c", &b.code])
        .current_dir(root)
        .env("PATH", path)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let out = bounded(cmd, check.timeout_s);
    let text = text(&out);
    let code = out.status.code().unwrap_or(-1);
    if Some(code) != check.exit {
        return Err(format!("exit {code}, README says {:?}\n{text}", check.exit));
    }
    for e in &check.expect {
        if !text.contains(e.as_str()) {
            return Err(format!("output lacks `{e}`\n{text}"));
        }
    }
    Ok(())
}

#[test]
fn every_sh_block_in_the_readme_does_what_the_readme_says() {
    require_sim();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let blocks = blocks(&readme).unwrap();
    assert!(!blocks.is_empty(), "README.md has no ```sh block");
    let mut failures = Vec::new();
    for b in &blocks {
        let Some(check) = &b.check else {
            failures.push(format!(
                "README.md:{}: no readme-test comment above the block",
                b.line
            ));
            continue;
        };
        if check.skip.is_some() {
            continue;
        }
        if let Err(e) = run_block(root, b, check) {
            failures.push(format!("README.md:{}:\n{}\n=> {e}", b.line, b.code));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn checks_parse_and_bad_ones_are_refused() {
    let c = parse_check(r#" exit=30 expect="REGRESSED — x" expect=y timeout=9 "#).unwrap();
    assert_eq!(c.exit, Some(30));
    assert_eq!(c.expect, vec!["REGRESSED — x".to_string(), "y".to_string()]);
    assert_eq!(c.timeout_s, 9);
    assert!(
        parse_check(r#"skip="needs two hosts""#)
            .unwrap()
            .skip
            .is_some()
    );
    assert!(parse_check("expect=x").is_err());
    assert!(parse_check("exit=zero").is_err());
    assert!(parse_check("color=red exit=0").is_err());
}
