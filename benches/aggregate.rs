//! Rank 0's cost as the job grows, at 1k, 4k and 16k simulated ranks, in one process:
//!
//! - **results**: one message size's aggregation as rank 0 does it after each size: every
//!   rank's sample arrives as JSON bytes (the bootstrap's gather), is parsed
//!   (`bootstrap::gather_json`'s step) and combined into the row (`bench::combine`). A sweep costs
//!   this once per pattern and size. Measured with criterion.
//! - **status side channel**: rank 0's supervisor's listener (`run::status::serve`) taking N
//!   connections, each sending the stage reports a rank's supervisor sends during a run, until
//!   rank 0's job view holds every rank at its last stage. One timed pass per N (each opens N
//!   connections and rank 0 keeps two threads per connection); printed with the process's peak
//!   memory (VmHWM, both ends of every connection included). It needs about 4 descriptors per
//!   rank in this process (rank 0's three per connection and the stand-in rank's one); an N
//!   the descriptor limit cannot hold is reported as not measured.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use nccl_smoke::bench::{RankSample, Timing, combine};
use nccl_smoke::bootstrap::tcp::listen_wide;
use nccl_smoke::data::{DataType, RedOp};
use nccl_smoke::patterns::select;
use nccl_smoke::progress::Event;
use nccl_smoke::run::status::{JobView, Report, serve};
use nccl_smoke::stage::Stage;
use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RANKS: [u32; 3] = [1024, 4096, 16384];

fn samples_as_sent(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|rank| {
            let s = RankSample {
                rank,
                avg_us: 1000.0 + (rank % 97) as f64,
                p50_us: 990.0 + (rank % 89) as f64,
                p99_us: 1200.0 + (rank % 83) as f64,
                max_us: 1400.0 + (rank % 79) as f64,
                wrong: 0,
                first_wrong: None,
            };
            serde_json::to_vec(&s).unwrap()
        })
        .collect()
}

fn results(c: &mut Criterion) {
    let pattern = select(&["all_reduce".to_string()]).unwrap()[0];
    let timing = Timing {
        warmup: 5,
        iters: 20,
        check: true,
        dtype: DataType::Float,
        op: RedOp::Sum,
        deadline: Duration::from_secs(60),
    };
    let mut g = c.benchmark_group("aggregate one size");
    for n in RANKS {
        let bytes = samples_as_sent(n);
        let layout = pattern.layout(1 << 20, 4, n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &bytes, |b, bytes| {
            b.iter(|| {
                let samples: Vec<RankSample> = bytes
                    .iter()
                    .filter_map(|b| serde_json::from_slice(b).ok())
                    .collect();
                combine(pattern, &layout, &timing, n, &samples)
            })
        });
    }
    g.finish();
}

/// The `field`-th word of the first line of /proc/self/`file` that starts with `key`.
fn proc_number(file: &str, key: &str, field: usize) -> u64 {
    std::fs::read_to_string(format!("/proc/self/{file}"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(field)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Peak resident memory of this process so far (VmHWM), KiB.
fn peak_kib() -> u64 {
    proc_number("status", "VmHWM:", 1)
}

/// The soft limit on open descriptors.
fn fd_limit() -> u64 {
    proc_number("limits", "Max open files", 3)
}

/// The reports one rank's supervisor sends over a run: every stage, then its end.
fn rank_lines(rank: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for stage in Stage::ALL {
        let r = Report {
            rank,
            host: format!("node-{:05}", rank / 8),
            event: Event::Stage {
                stage,
                rank: Some(rank),
            },
        };
        out.extend(serde_json::to_vec(&r).unwrap());
        out.push(b'\n');
    }
    out
}

fn side_channel() {
    let limit = fd_limit();
    for n in RANKS {
        let need = 4 * n as u64 + 64;
        if need > limit {
            println!(
                "status side channel, {n:>5} ranks: not measured: needs about {need} descriptors \
                 in one process, the limit is {limit}"
            );
            continue;
        }
        // Bound as rank 0's supervisor binds it (run::supervisor).
        let listener = listen_wide(([127, 0, 0, 1], 0).into()).unwrap();
        let addr = listener.local_addr().unwrap();
        let view = Arc::new(Mutex::new(JobView {
            nranks: n,
            ..Default::default()
        }));
        serve(listener, view.clone());
        let last = *Stage::ALL.last().unwrap();
        let start = Instant::now();
        let mut conns = Vec::with_capacity(n as usize);
        for rank in 1..n {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&rank_lines(rank)).unwrap();
            conns.push(s);
        }
        let connected = start.elapsed();
        let done = loop {
            let all = view
                .lock()
                .map(|v| {
                    v.ranks.len() as u32 == n - 1 && v.ranks.values().all(|r| r.stage == Some(last))
                })
                .unwrap_or(false);
            if all {
                break Some(start.elapsed());
            }
            if start.elapsed() > Duration::from_secs(120) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        match done {
            Some(t) => println!(
                "status side channel, {n:>5} ranks: all connected and sent after {:.3} s, every \
                 rank's {} reports applied in {:.3} s; peak memory so far {} MiB",
                connected.as_secs_f64(),
                Stage::ALL.len(),
                t.as_secs_f64(),
                peak_kib() / 1024
            ),
            None => println!("status side channel, {n:>5} ranks: not all reports within 120 s"),
        }
        if let Ok(mut v) = view.lock() {
            v.say_bye();
        }
        drop(conns);
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn all(c: &mut Criterion) {
    results(c);
    side_channel();
}

criterion_group!(benches, all);
criterion_main!(benches);
