//! Host-side cost of making and checking data, per message size: what verification adds to a
//! sweep on top of the communication itself.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use nccl_smoke::bench::verify;
use nccl_smoke::elements::{self, DataType, RedOp};
use nccl_smoke::patterns::{Source, select};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("verify");
    let n = 8;
    for (name, dtype) in [("float", DataType::Float), ("bfloat16", DataType::Bfloat16)] {
        for pattern in ["all_reduce", "all_to_all"] {
            let p = select(&[pattern.to_string()]).unwrap()[0];
            let bytes = 4 << 20;
            let layout = p.layout(bytes, dtype.size(), n);
            let mut buf = vec![0u8; layout.count * dtype.size()];
            verify::fill_send(
                &mut buf,
                &layout,
                dtype,
                verify::op_of(p, RedOp::Sum),
                0,
                n,
                1,
            );
            g.throughput(Throughput::Bytes(bytes as u64));
            g.bench_with_input(
                BenchmarkId::new(format!("fill/{name}"), pattern),
                &(),
                |b, _| {
                    b.iter(|| {
                        verify::fill_send(
                            &mut buf,
                            &layout,
                            dtype,
                            verify::op_of(p, RedOp::Sum),
                            0,
                            n,
                            1,
                        )
                    })
                },
            );
            // What a correct collective leaves in rank 0's receive buffer, and what a GPU that
            // ran nothing leaves (the fill): the two checks an operator's run makes most.
            let mut good = vec![0u8; layout.recv_count * dtype.size()];
            for (i, el) in good.chunks_exact_mut(dtype.size()).enumerate() {
                let v = match p.source(0, n, i, &layout) {
                    Source::Rank { rank, index } => elements::value(None, n, rank, index, 1),
                    Source::Reduced { index } => elements::reduced(RedOp::Sum, n, index, 1),
                };
                dtype.encode(v, el);
            }
            assert_eq!(
                verify::check(&good, p, &layout, dtype, RedOp::Sum, 0, n, 1).wrong,
                0
            );
            let unwritten = vec![elements::FILL_BYTE; good.len()];
            for (what, recv) in [("correct", &good), ("unwritten", &unwritten)] {
                g.bench_with_input(
                    BenchmarkId::new(format!("check-{what}/{name}"), pattern),
                    &(),
                    |b, _| b.iter(|| verify::check(recv, p, &layout, dtype, RedOp::Sum, 0, n, 1)),
                );
            }
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
