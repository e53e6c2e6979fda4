//! Throughput of `compare`'s nccl-tests text reader on a 200 MB log generated in memory
//! (nothing is written): 16 ranks' NCCL INFO lines, Open MPI tags on every line, and the
//! same all_reduce table over and over (as `-N` cycles print it), so that every line kind the
//! reader meets is in the mix. The reader keeps one row per size with its repeats; what it
//! holds besides the file's bytes (at most 256 MiB, `report::atomic_file::MAX_READ`) grows with
//! the repeats, not with the noise around them.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::path::Path;

fn log(bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 4096);
    out.push_str(
        "[1,0]<stdout>:# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\n",
    );
    out.push_str("[1,0]<stdout>:# Collective test starting: all_reduce_perf\n");
    for r in 0..16 {
        out.push_str(&format!(
            "[1,0]<stdout>:#  Rank {r:2} Group  0 Pid {:6} on gpu-node-{:02} device {:2} [0000:{:02x}:00] NVIDIA H100 80GB HBM3\n",
            40000 + r,
            r / 8,
            r % 8,
            0x18 + r
        ));
    }
    let mut i = 0u64;
    while out.len() < bytes {
        out.push_str("[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n");
        for k in 3..=30 {
            let size = 1u64 << k;
            for r in 0..4 {
                out.push_str(&format!(
                    "[1,{r}]<stdout>:gpu-node-00:{}:{} [{r}] NCCL INFO AllReduce: opCount {i:x} sendbuff 0x7f3a1c000000 recvbuff 0x7f3a1c000000 count {} datatype 7 op 0 root 0 comm 0x55d0e1a3c2a0 [nranks=16] stream 0x55d0e0b1a0e0\n",
                    40000 + r,
                    40060 + r,
                    size / 4
                ));
                i += 1;
            }
            let us = 10.0 + size as f64 / 150_000.0;
            let algbw = size as f64 / us / 1e3;
            out.push_str(&format!(
                "[1,0]<stdout>:{size:12} {:13}     float     sum      -1 {us:8.2} {algbw:7.2} {:7.2}      0 {us:8.2} {algbw:7.2} {:7.2}      0\n",
                size / 4,
                algbw * 1.875,
                algbw * 1.875
            ));
        }
        out.push_str("[1,0]<stdout>:# Out of bounds values : 0 OK\n[1,0]<stdout>:# Avg bus bandwidth    : 100.5\n");
    }
    out
}

fn bench(c: &mut Criterion) {
    let text = log(200 << 20);
    let mut g = c.benchmark_group("nccl-tests text reader");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("200 MB tagged log with NCCL INFO lines", |b| {
        b.iter(|| {
            let s = nccl_smoke::report::nccl_tests::text::parse(
                Path::new("all_reduce_perf.log"),
                &text,
                None,
                // As `compare` passes the file's name: the tables after the first have no
                // starting line of their own.
                Some("all_reduce_perf"),
            )
            .unwrap();
            assert_eq!(s.rows.len(), 28);
            s
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
