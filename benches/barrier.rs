//! The harness's own stage barrier over its TCP star (`bootstrap::tcp`), at 16, 128 and 1,024
//! stand-in ranks: one thread per rank in this process, each with its loopback connection to
//! rank 0, every rank calling the same `Bootstrap::barrier` a run calls between stages. What is
//! timed is rank 0's wall time per barrier (every rank has arrived and every rank has been
//! released). The star costs rank 0 one read and one write per rank, so the law to expect is
//! linear in the ranks; the bench measures its constant, beside the per-size results gather,
//! which must reach rank 0 from every rank anyway.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use nccl_smoke::bootstrap::Bootstrap;
use nccl_smoke::bootstrap::tcp::Tcp;
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `n` ranks: rank 0 here, the others on threads that run as many barriers as they are told.
struct Star {
    rank0: Tcp,
    go: Vec<mpsc::Sender<u64>>,
}

fn star(n: u32) -> Star {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut go = Vec::new();
    let mut accepted = Vec::new();
    for rank in 1..n {
        let s = TcpStream::connect(addr).unwrap();
        accepted.push(listener.accept().unwrap().0);
        let (tx, rx) = mpsc::channel::<u64>();
        go.push(tx);
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                let me = Tcp::from_star(rank, n, vec![s]);
                while let Ok(k) = rx.recv() {
                    for _ in 0..k {
                        me.barrier();
                    }
                }
            })
            .unwrap();
    }
    Star {
        rank0: Tcp::from_star(0, n, accepted),
        go,
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("stage barrier");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    for n in [16u32, 128, 1024] {
        let s = star(n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_custom(|iters| {
                for tx in &s.go {
                    tx.send(iters).unwrap();
                }
                let t = Instant::now();
                for _ in 0..iters {
                    s.rank0.barrier();
                }
                t.elapsed()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
