//! The harness's own stage barrier over its TCP bootstrap (`bootstrap::tcp`), at 16, 128 and
//! 1,024 stand-in ranks, two ways: through the star the rendezvous builds (rank 0 reads from and
//! writes to every rank in turn) and through the combining tree a run uses beyond 9 ranks
//! (`bootstrap::tree`: fan-out 8, arrivals up, release down). One thread per rank in this
//! process, each with its loopback connections, every rank calling the same
//! `Bootstrap::barrier` a run calls between sizes. What is timed is rank 0's wall time per
//! barrier (every rank has arrived and every rank has been released).
//!
//! Read the figures with the machine in mind: every stand-in shares this machine's cores, so
//! a barrier here costs at least the CPU time of waking every thread once, whatever the
//! algorithm; on a cluster each rank has its own cores and a barrier costs its critical path
//! (tree: 2 × depth hops of at most 8 messages each; star: 2 × N messages at rank 0). So
//! after criterion's wall times the bench prints rank 0's own CPU time per barrier (its
//! thread's, from `/proc/thread-self/schedstat`), the hot spot the tree removes.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use nccl_smoke::bootstrap::Bootstrap;
use nccl_smoke::bootstrap::tcp::Tcp;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `n` ranks: rank 0 here, the others on threads that run as many barriers as they are told.
struct Job {
    rank0: Tcp,
    go: Vec<mpsc::Sender<u64>>,
}

fn job(n: u32, tree: bool) -> Job {
    let mut ranks = Tcp::loopback_star(n).unwrap().into_iter();
    let mut rank0 = ranks.next().unwrap();
    let mut go = Vec::new();
    for mut me in ranks {
        let (tx, rx) = mpsc::channel::<u64>();
        go.push(tx);
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                if tree {
                    me.grow_tree(Duration::from_secs(30));
                }
                while let Ok(k) = rx.recv() {
                    for _ in 0..k {
                        me.barrier();
                    }
                }
            })
            .unwrap();
    }
    if tree {
        rank0.grow_tree(Duration::from_secs(30));
        assert!(
            rank0.describe().contains("a tree") || n <= 9,
            "{}",
            rank0.describe()
        );
    }
    Job { rank0, go }
}

/// This thread's CPU time so far, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Rank 0's CPU time and wall time per barrier, over `k` barriers.
fn rank0_share(n: u32, tree: bool, k: u64) -> (f64, f64) {
    let j = job(n, tree);
    for tx in &j.go {
        tx.send(k + 10).unwrap();
    }
    for _ in 0..10 {
        j.rank0.barrier();
    }
    let (cpu, wall) = (thread_cpu_ns(), Instant::now());
    for _ in 0..k {
        j.rank0.barrier();
    }
    let per = |ns: f64| ns / k as f64 / 1e3;
    (
        per((thread_cpu_ns() - cpu) as f64),
        per(wall.elapsed().as_nanos() as f64),
    )
}

fn bench(c: &mut Criterion) {
    // Star and tree at 1,024 ranks: about 4,300 descriptors at once.
    nccl_smoke::ffi::os::raise_fd_limit(8192);
    for (name, tree) in [
        ("stage barrier (star)", false),
        ("stage barrier (tree)", true),
    ] {
        let mut g = c.benchmark_group(name);
        g.sample_size(10);
        g.measurement_time(Duration::from_secs(5));
        for n in [16u32, 128, 1024] {
            let j = job(n, tree);
            g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
                b.iter_custom(|iters| {
                    for tx in &j.go {
                        tx.send(iters).unwrap();
                    }
                    let t = Instant::now();
                    for _ in 0..iters {
                        j.rank0.barrier();
                    }
                    t.elapsed()
                })
            });
        }
        g.finish();
    }
    println!("rank 0's CPU time per barrier (wall time beside it), µs:");
    println!("{:>6} {:>20} {:>20}", "ranks", "star", "tree");
    for n in [16u32, 128, 1024] {
        let k = if n > 128 { 100 } else { 1000 };
        let (sc, sw) = rank0_share(n, false, k);
        let (tc, tw) = rank0_share(n, true, k);
        println!("{n:>6} {sc:>9.1} ({sw:>8.1}) {tc:>9.1} ({tw:>8.1})");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
