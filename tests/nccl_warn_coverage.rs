//! Every WARN format string of two NCCL releases (2.19.3 and the newest tag, 2.30.7), listed by
//! `scripts/nccl-warn-strings.py`, classified as the line NCCL would print. The listing of which
//! signature covers each one is committed next to the format strings, so a new release is a
//! diff; every WARN of bootstrap, transport/ and proxy must be covered.
//!
//! To refresh after changing signatures: `NCCL_SMOKE_BLESS=1 cargo test --test nccl_warn_coverage`.

use nccl_smoke::diagnose::classify::{LineKind, classify_line};
use std::path::PathBuf;

const RELEASES: [&str; 2] = ["v2.19.3-1", "v2.30.7-1"];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl-warns")
}

/// A printf format with each conversion replaced by a plausible value.
fn instantiate(fmt: &str) -> String {
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = String::new();
        while let Some(&n) = chars.peek() {
            chars.next();
            spec.push(n);
            if n.is_ascii_alphabetic() && !matches!(n, 'l' | 'h' | 'z' | 'j' | 't' | 'L' | 'q')
                || n == '%'
            {
                break;
            }
        }
        out.push_str(match spec.chars().last() {
            Some('%') => "%",
            Some('s') => "x",
            Some('p') => "0x7f00",
            Some('x' | 'X') => "1f",
            Some('f' | 'g' | 'e') => "1.0",
            Some('c') => "c",
            _ => "1",
        });
    }
    out
}

#[test]
fn every_warn_of_two_releases_is_listed_and_transport_warns_are_covered() {
    let bless = std::env::var_os("NCCL_SMOKE_BLESS").is_some();
    for tag in RELEASES {
        let formats = std::fs::read_to_string(dir().join(format!("{tag}.tsv")))
            .unwrap_or_else(|e| panic!("{tag}.tsv: {e}"));
        let mut listing = String::from("# location\tsignature\tseverity\tformat\n");
        let (mut total, mut by_phrase, mut by_location) = (0, 0, 0);
        let mut uncovered_transport = Vec::new();
        for row in formats.lines().filter(|l| !l.trim().is_empty()) {
            let (loc, fmt) = row.split_once('\t').expect("location<TAB>format");
            let (path, lineno) = loc.rsplit_once(':').expect("path:line");
            let short = path.strip_prefix("src/").unwrap_or(path);
            let line = format!(
                "host-a:100:101 [0] {short}:{lineno} NCCL WARN {}",
                instantiate(fmt)
            );
            let found = classify_line(&line, LineKind::of(&line));
            total += 1;
            let (sig, sev) = match &found {
                Some(f) => {
                    if f.signature.starts_with("loc-") || f.signature == "ras-warning" {
                        by_location += 1;
                    } else {
                        by_phrase += 1;
                    }
                    (f.signature, f.severity.name())
                }
                None => ("-", "-"),
            };
            if found.is_none()
                && (path == "src/bootstrap.cc"
                    || path.starts_with("src/transport/")
                    || path == "src/proxy.cc")
            {
                uncovered_transport.push(row.to_string());
            }
            listing.push_str(&format!("{loc}\t{sig}\t{sev}\t{fmt}\n"));
        }
        listing.push_str(&format!(
            "# {tag}: {total} WARN format strings; {by_phrase} named by a phrase signature, \
             {by_location} by their source file only, {} not covered\n",
            total - by_phrase - by_location
        ));
        let path = dir().join(format!("{tag}.coverage.tsv"));
        if bless {
            std::fs::write(&path, &listing).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == listing,
            "{} is out of date: rerun with NCCL_SMOKE_BLESS=1 and review the diff",
            path.display()
        );
        assert!(
            uncovered_transport.is_empty(),
            "{tag}: WARNs of bootstrap/transport/proxy no signature covers:\n{}",
            uncovered_transport.join("\n")
        );
        assert!(total > 300, "{tag}: only {total} format strings listed");
    }
}

#[test]
fn formats_are_instantiated() {
    assert_eq!(
        instantiate("Connect to %s failed : %s (%d%%) %lx %zu"),
        "Connect to x failed : x (1%) 1f 1"
    );
}
