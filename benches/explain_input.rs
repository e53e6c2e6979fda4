//! What `explain` costs on input that is not a log: 64 MiB of random words (with error words
//! sprinkled in, so the unexplained-line path runs), 64 MiB of binary, one 64 MiB line with no
//! newline, and an empty file. Generated in memory; nothing is written. Each must end with a
//! clear result in bounded time; memory is bounded by the reader's caps (a 64 KiB line, 20
//! quoted lines per file), which the checks below hold.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nccl_smoke::diagnose::explain::{explain_reader, job_verdict};

const SIZE: usize = 64 << 20;

/// A deterministic stream of words (xorshift), one line in 40 with an error word.
fn garbage(bytes: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "lorem", "ipsum", "dolor", "sit", "amet", "tensor", "batch", "node", "rank", "step",
        "loss", "0.25", "[12]", "::", "->", "x86_64",
    ];
    let mut out = Vec::with_capacity(bytes + 128);
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let mut line = 0u64;
    while out.len() < bytes {
        for _ in 0..12 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.extend_from_slice(WORDS[(x % WORDS.len() as u64) as usize].as_bytes());
            out.push(b' ');
        }
        if line.is_multiple_of(40) {
            out.extend_from_slice(b"RuntimeError: something failed");
        }
        out.push(b'\n');
        line += 1;
    }
    out
}

fn binary(bytes: usize) -> Vec<u8> {
    (0..bytes as u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect()
}

fn bench(c: &mut Criterion) {
    let text = garbage(SIZE);
    let bin = binary(SIZE);
    let one_line = vec![b'a'; SIZE];

    // Once, outside the timing: each input ends as it should.
    let s = explain_reader("garbage", &text[..]).unwrap();
    assert!(s.unexplained.len() <= 20 && s.unexplained_total > 1000);
    assert_eq!(job_verdict(std::slice::from_ref(&s)).status, "unknown");
    assert!(explain_reader("binary", &bin[..]).is_err());
    let s = explain_reader("one-line", &one_line[..]).unwrap();
    assert_eq!((s.lines, s.truncated_lines), (1, 1));
    assert!(s.nothing_to_judge().is_some());
    let s = explain_reader("empty", &b""[..]).unwrap();
    assert_eq!(s.nothing_to_judge(), Some("empty: nothing to judge"));

    let mut g = c.benchmark_group("explain_input");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(SIZE as u64));
    g.bench_function("garbage_text_64MiB", |b| {
        b.iter(|| {
            let s = explain_reader("garbage", &text[..]).unwrap();
            job_verdict(std::slice::from_ref(&s))
        })
    });
    g.bench_function("binary_64MiB", |b| {
        b.iter(|| explain_reader("binary", &bin[..]).is_err())
    });
    g.bench_function("one_line_64MiB", |b| {
        b.iter(|| explain_reader("one-line", &one_line[..]).unwrap().lines)
    });
    g.finish();
    c.bench_function("explain_input/empty", |b| {
        b.iter(|| explain_reader("empty", &b""[..]).unwrap().lines)
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
