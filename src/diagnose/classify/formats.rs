//! NCCL's own WARN format strings place a WARN text that comes without NCCL's `file:line`
//! prefix (PyTorch's line after "Last error:", a plugin's or an old release's format) in the
//! source file that prints it, and so in that file's stage and subsystem (`nccl-sources.tsv`).
//! The table (`nccl-warn-formats.tsv`) holds every WARN format of every release tag from v2.4
//! on with its file; `scripts/nccl-warn-formats.py` generates it from NVIDIA/nccl.

use aho_corasick::AhoCorasick;
use std::sync::LazyLock;

/// The generated table, as committed.
pub const TABLE_TSV: &str = include_str!("nccl-warn-formats.tsv");

/// A format's literal text must say this much (the pieces between its conversions together) to
/// place a line: "%s" or "%s: %d" would place anything.
const MIN_LITERAL: usize = 16;
/// ... and one piece this much: the piece the automaton looks for.
const MIN_PIECE: usize = 10;

struct Format {
    /// The literal pieces between the conversions, in order.
    pieces: Vec<&'static str>,
    /// The index of the longest piece (what the automaton finds).
    key: usize,
    path: &'static str,
}

struct Table {
    formats: Vec<Format>,
    ac: AhoCorasick,
}

/// Splits a printf format at its conversions (`%d`, `%s`, `%.*s`, `%lu`, `%zu`, `%p`, …); a
/// `%%` is a literal `%`, kept in the piece it ends.
fn pieces(fmt: &'static str) -> Vec<&'static str> {
    let b = fmt.as_bytes();
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        if b.get(i + 1) == Some(&b'%') {
            i += 2;
            continue;
        }
        out.push(&fmt[start..i]);
        let mut j = i + 1;
        while j < b.len() && b"-+ #0123456789.*hlLzjtq".contains(&b[j]) {
            j += 1;
        }
        i = (j + 1).min(b.len());
        start = i;
    }
    out.push(&fmt[start..]);
    out.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    let formats: Vec<Format> = TABLE_TSV
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (fmt, path) = l.split_once('\t')?;
            let pieces = pieces(fmt);
            let key = (0..pieces.len()).max_by_key(|&k| pieces[k].len())?;
            let literal: usize = pieces.iter().map(|p| p.trim().len()).sum();
            (literal >= MIN_LITERAL && pieces[key].len() >= MIN_PIECE).then_some(Format {
                pieces,
                key,
                path,
            })
        })
        .collect();
    let ac = AhoCorasick::new(formats.iter().map(|f| f.pieces[f.key]))
        .expect("the WARN formats build an automaton");
    Table { formats, ac }
});

/// Whether `f`'s pieces appear in `text` in order, the longest one at `at`.
fn fits(f: &Format, text: &str, at: usize) -> bool {
    let key = f.pieces[f.key];
    let before = &text[..at];
    let mut end = before.len();
    for p in f.pieces[..f.key].iter().rev() {
        match before[..end].rfind(p) {
            Some(i) => end = i,
            None => return false,
        }
    }
    let mut from = at + key.len();
    for p in &f.pieces[f.key + 1..] {
        match text[from..].find(p) {
            Some(i) => from += i + p.len(),
            None => return false,
        }
    }
    true
}

/// The NCCL source file (relative to `src/`) whose WARN format `text` was printed from: the
/// format with the most literal text that fits, when every format that says as much is printed
/// by files of one subsystem (`nccl-sources.tsv`); `None` when nothing fits or the files
/// disagree.
pub fn source_of(text: &str) -> Option<&'static str> {
    let t = &*TABLE;
    let text = text.split_once("NCCL WARN ").map_or(text, |(_, w)| w);
    let mut best: Option<(usize, &'static str)> = None;
    let mut agree = true;
    for m in t.ac.find_overlapping_iter(text) {
        let f = &t.formats[m.pattern().as_usize()];
        if !fits(f, text, m.start()) {
            continue;
        }
        let said: usize = f.pieces.iter().map(|p| p.len()).sum();
        let sub = |p: &str| super::sources::lookup(p).map(|r| r.subsystem);
        match best {
            Some((n, _)) if said < n => {}
            Some((n, path)) if said == n => agree &= sub(path) == sub(f.path),
            _ => {
                best = Some((said, f.path));
                agree = true;
            }
        }
    }
    best.filter(|_| agree).map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_split_at_their_conversions() {
        assert_eq!(
            pieces("Attribute %s of node %s not found"),
            vec!["Attribute ", " of node ", " not found"]
        );
        assert_eq!(pieces("%.*s: %lu%% done"), vec![": ", "%% done"]);
        assert!(TABLE.formats.len() > 500, "{}", TABLE.formats.len());
    }

    #[test]
    fn a_text_without_its_prefix_finds_its_file() {
        // NVIDIA/nccl v2.19.3-1 src/graph/xml.h:85, quoted by PyTorch after "Last error:".
        assert_eq!(
            source_of("Attribute busid of node nic not found"),
            Some("graph/xml.h")
        );
        assert_eq!(
            source_of("h:1:2 [0] NCCL WARN Attribute arch of node cpu not found"),
            Some("graph/xml.h")
        );
        assert_eq!(source_of("an error of the data loader"), None);
        assert_eq!(source_of("1"), None);
    }
}
