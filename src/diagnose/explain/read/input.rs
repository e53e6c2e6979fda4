//! The bytes of a log before its lines: the binary check of its start, and line reads bounded
//! in length.

use super::MAX_LINE;
use std::io::BufRead;

/// Whether the start of a file is not text: a NUL byte, or many control bytes other than
/// tab, newline, carriage return, form feed and escape (colored logs).
pub(super) fn looks_binary(head: &[u8]) -> bool {
    if head.is_empty() {
        return false;
    }
    if head.contains(&0) {
        return true;
    }
    let odd = head
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b))
        .count();
    odd * 10 > head.len()
}

/// Reads up to a newline; keeps at most [`MAX_LINE`] bytes of it. Returns bytes consumed.
pub(super) fn read_capped_line(
    r: &mut impl BufRead,
    out: &mut Vec<u8>,
    truncated: &mut u64,
) -> std::io::Result<usize> {
    let mut consumed = 0;
    let mut cut = false;
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            if cut {
                *truncated += 1;
            }
            return Ok(consumed);
        }
        let (take, done) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = MAX_LINE.saturating_sub(out.len());
        if take > room {
            cut = true;
        }
        out.extend_from_slice(&chunk[..take.min(room)]);
        r.consume(take);
        consumed += take;
        if done {
            if cut {
                *truncated += 1;
            }
            return Ok(consumed);
        }
    }
}
