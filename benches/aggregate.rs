//! Rank 0's cost as the job grows, at 1k, 4k and 16k simulated ranks, in one process:
//!
//! - **results**: one message size's aggregation as rank 0 does it after each size: every
//!   rank's sample arrives as JSON bytes (the bootstrap's gather), is parsed
//!   (`bootstrap::gather_json`'s step) and combined into the row (`bench::combine`). A sweep costs
//!   this once per pattern and size. Measured with criterion.
//! - **status side channel**: rank 0's supervisor's listener (`run::status::serve`, one event
//!   loop, one descriptor per rank) taking N connections from stand-in ranks in helper
//!   processes (this bench's own binary, re-run; four at 16k, so that no process needs more
//!   than about 4k descriptors for their ends). Each stand-in sends the stage reports a rank's
//!   supervisor sends during a run; timed until rank 0's job view holds every rank at its last
//!   stage. Then every stand-in says it is alive every 100 ms, as supervisors do, for a few
//!   seconds: printed are rank 0's CPU time over that window (this process does nothing else),
//!   the longest any rank went unheard, and rank 0's peak memory (VmHWM) and descriptors.

use criterion::{BenchmarkId, Criterion, criterion_group};
use nccl_smoke::bench::{RankSample, Timing, combine};
use nccl_smoke::bootstrap::tcp::listen_wide;
use nccl_smoke::elements::{DataType, RedOp};
use nccl_smoke::events::Event;
use nccl_smoke::patterns::select;
use nccl_smoke::run::status::{JobView, Report, serve};
use nccl_smoke::stage::Stage;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
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
                check: None,
                below_timer: false,
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
        latency_floor: 0,
        data_on: nccl_smoke::bench::DataOn::Device,
        kernel_floor: nccl_smoke::bench::GPU_KERNEL_FLOOR,
        size_budget: Duration::ZERO,
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

/// Open descriptors of this process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// CPU time of this process so far (user + system), seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|w| w.parse().unwrap_or(0))
        .collect();
    // Fields 14 and 15 of stat (utime, stime), counted after the command's closing paren.
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    ticks as f64 / 100.0
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

/// How long the stand-ins beat, once every rank's reports are in.
const BEATING: Duration = Duration::from_secs(4);
/// Most stand-in ranks one helper process holds.
const PER_HELPER: u32 = 4096;
/// The environment variable that makes this binary a helper: `ADDR FIRST COUNT`.
const HELPER: &str = "NCCL_SMOKE_BENCH_STAND_IN";

/// A helper process: connects `count` stand-in ranks from `first` to `addr`, sends each one's
/// stage reports, then an `Alive` report per rank every 100 ms for [`BEATING`] after its
/// parent says go (a line on stdin), reading what rank 0 says back; ends when stdin closes.
fn stand_in(spec: &str) {
    let mut it = spec.split_whitespace();
    let (Some(addr), Some(first), Some(count)) = (it.next(), it.next(), it.next()) else {
        eprintln!("{HELPER}: want ADDR FIRST COUNT, got {spec:?}");
        std::process::exit(2);
    };
    let first: u32 = first.parse().unwrap();
    let count: u32 = count.parse().unwrap();
    nccl_smoke::ffi::os::raise_fd_limit(u64::from(count) + 64);
    let mut conns = Vec::with_capacity(count as usize);
    for rank in first..first + count {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&rank_lines(rank)).unwrap();
        s.set_nonblocking(true).unwrap();
        conns.push((rank, s));
    }
    let mut line = String::new();
    let stdin = std::io::stdin();
    let _ = stdin.read_line(&mut line);
    let start = Instant::now();
    let mut sink = [0u8; 4096];
    let (mut unsent, mut worst) = (0u64, Duration::ZERO);
    while start.elapsed() < BEATING {
        let turn = Instant::now();
        for (rank, s) in &mut conns {
            let r = Report {
                rank: *rank,
                host: format!("node-{:05}", *rank / 8),
                event: Event::Alive,
            };
            let mut text = serde_json::to_vec(&r).unwrap();
            text.push(b'\n');
            if !matches!(s.write(&text), Ok(n) if n == text.len()) {
                unsent += 1;
            }
            while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
        }
        worst = worst.max(turn.elapsed());
        std::thread::sleep(Duration::from_millis(100).saturating_sub(turn.elapsed()));
    }
    // For the parent: this stand-in's slowest turn (ms) and its beats not sent whole.
    println!("{} {unsent}", worst.as_millis());
    let _ = stdin.read_line(&mut line);
}

fn side_channel() {
    nccl_smoke::ffi::os::raise_fd_limit(u64::from(*RANKS.last().unwrap()) + 256);
    let limit = fd_limit();
    let exe = std::env::current_exe().unwrap();
    for n in RANKS {
        let need = n as u64 + 64;
        if need > limit {
            println!(
                "status side channel, {n:>5} ranks: not measured: needs about {need} descriptors \
                 in rank 0's process, the limit is {limit}"
            );
            continue;
        }
        let fds_before = open_fds();
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
        let connect_cpu0 = cpu_seconds();
        let mut helpers: Vec<Child> = (1..n)
            .step_by(PER_HELPER as usize)
            .map(|first| {
                let count = PER_HELPER.min(n - first);
                Command::new(&exe)
                    .env(HELPER, format!("{addr} {first} {count}"))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
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
        let Some(t) = done else {
            println!("status side channel, {n:>5} ranks: not all reports within 120 s");
            for mut h in helpers {
                let _ = h.kill();
                let _ = h.wait();
            }
            continue;
        };
        let connect_cpu = cpu_seconds() - connect_cpu0;
        let fds = open_fds().saturating_sub(fds_before);
        // Every stand-in beats; rank 0 reads the beats and says alive back.
        for h in &mut helpers {
            let _ = h.stdin.as_mut().unwrap().write_all(b"go\n");
        }
        let cpu0 = cpu_seconds();
        let heard0 = view.lock().map(|v| v.heard).unwrap_or(0);
        let beat_start = Instant::now();
        let mut unheard = Duration::ZERO;
        while beat_start.elapsed() < BEATING {
            std::thread::sleep(Duration::from_millis(50));
            if let Ok(v) = view.lock() {
                let oldest = v.ranks.values().map(|r| r.last_heard.elapsed()).max();
                // The first beats start when each helper reads its go.
                if beat_start.elapsed() > Duration::from_millis(500) {
                    unheard = unheard.max(oldest.unwrap_or_default());
                }
            }
        }
        let cpu = cpu_seconds() - cpu0;
        let wall = beat_start.elapsed().as_secs_f64();
        let heard = view.lock().map(|v| v.heard).unwrap_or(0) - heard0;
        if let Ok(mut v) = view.lock() {
            v.say_bye(None);
        }
        // The stand-ins' own pace: their slowest turn, and beats not sent whole.
        let (mut slowest, mut unsent) = (0u64, 0u64);
        for mut h in helpers {
            drop(h.stdin.take());
            let mut out = String::new();
            let _ = h.stdout.take().unwrap().read_to_string(&mut out);
            let _ = h.wait();
            let mut w = out
                .split_whitespace()
                .map(|x| x.parse::<u64>().unwrap_or(0));
            slowest = slowest.max(w.next().unwrap_or(0));
            unsent += w.next().unwrap_or(0);
        }
        println!(
            "status side channel, {n:>5} ranks: every rank's {} reports applied {:.3} s after \
             the stand-ins started (rank 0's CPU meanwhile {connect_cpu:.2} s); rank 0 holds {fds} descriptors for them; beating every \
             100 ms for {:.0} s: {heard} reports heard, rank 0's CPU {:.1} % of one core \
             ({:.2} µs a report), longest any rank went unheard {:.0} ms (the stand-ins' \
             slowest turn {slowest} ms, {unsent} beats not sent whole); peak memory so far \
             {} MiB",
            Stage::ALL.len(),
            t.as_secs_f64(),
            wall,
            100.0 * cpu / wall,
            1e6 * cpu / heard.max(1) as f64,
            unheard.as_secs_f64() * 1000.0,
            peak_kib() / 1024
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn all(c: &mut Criterion) {
    results(c);
    side_channel();
}

criterion_group!(benches, all);

fn main() {
    if let Ok(spec) = std::env::var(HELPER) {
        stand_in(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
