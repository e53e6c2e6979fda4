//! Throughput of `explain` on a 100 MB INFO-level NCCL log, generated in memory (nothing is
//! written or committed): the reader, the per-line classifier and the job verdict together.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nccl_smoke::diagnose::explain::{explain_reader, job_verdict};

/// 100 MB of NCCL_DEBUG=INFO output from 8 ranks of two hosts: init, channel setup and
/// COLL-subsystem operation lines, with one WARN and one benign note near the end.
fn log(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 4096);
    let mut i: u64 = 0;
    while out.len() < bytes {
        let rank = i % 8;
        let host = if rank < 4 {
            "gpu-node-01"
        } else {
            "gpu-node-02"
        };
        let pid = 41000 + rank;
        let line = match i % 6 {
            0 => format!(
                "{host}:{pid}:{} [{}] NCCL INFO Channel {:02}/0 : {rank}[{rank}] -> {}[{}] via P2P/CUMEM/read\n",
                pid + 60,
                rank % 4,
                i % 32,
                (rank + 1) % 8,
                (rank + 1) % 4
            ),
            1 => format!(
                "{host}:{pid}:{pid} [{}] NCCL INFO AllReduce: opCount {:x} sendbuff 0x7f3a1c000000 recvbuff 0x7f3a1c000000 count 4194304 datatype 7 op 0 root 0 comm 0x55d0e1a3c2a0 [nranks=8] stream 0x55d0e0b1a0e0\n",
                rank % 4,
                i / 8
            ),
            2 => format!(
                "{host}:{pid}:{} [{}] NCCL INFO Channel {:02}/0 : {rank}[{rank}] -> {}[0] [send] via NET/IB/0/GDRDMA\n",
                pid + 61,
                rank % 4,
                i % 32,
                (rank + 4) % 8
            ),
            3 => format!(
                "{host}:{pid}:{} [{}] NCCL INFO ncclCommInitRank comm 0x55d0e1a3c2a0 rank {rank} nranks 8 cudaDev {} nvmlDev {} busId 1b000 commId 0x5c1f - Init COMPLETE\n",
                pid + 60,
                rank % 4,
                rank % 4,
                rank % 4
            ),
            4 => format!(
                "{host}:{pid}:{pid} [{}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.20.0.{}<0>\n",
                rank % 4,
                10 + rank
            ),
            _ => format!(
                "{host}:{pid}:{} [{}] NCCL INFO Connected all rings, use ring PXN 0 GDR 1\n",
                pid + 60,
                rank % 4
            ),
        };
        out.extend_from_slice(line.as_bytes());
        i += 1;
    }
    out.extend_from_slice(b"gpu-node-01:41000:41000 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n");
    out.extend_from_slice(b"gpu-node-02:41005:41066 [1] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-Hk20aB to 9637892 bytes, error: No space left on device (28)\n");
    out
}

fn bench(c: &mut Criterion) {
    let data = log(100 << 20);
    // The result is checked once so the benchmark measures a working classifier.
    let s = explain_reader("bench.log", &data[..]).unwrap();
    let v = job_verdict(std::slice::from_ref(&s));
    assert_eq!(v.root_cause.unwrap().category.name(), "shm");
    let mut g = c.benchmark_group("classify");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("explain_100MB_info_log", |b| {
        b.iter(|| {
            let s = explain_reader("bench.log", &data[..]).unwrap();
            job_verdict(std::slice::from_ref(&s))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
