//! Host-side cost of making and checking data, per message size: what verification adds to a
//! sweep on top of the communication itself.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use nccl_smoke::bench::verify;
use nccl_smoke::data::{DataType, RedOp};
use nccl_smoke::patterns::select;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("verify");
    let n = 8;
    for (name, dtype) in [("float", DataType::Float), ("bfloat16", DataType::Bfloat16)] {
        for pattern in ["all_reduce", "all_to_all"] {
            let p = select(&[pattern.to_string()]).unwrap()[0];
            let bytes = 4 << 20;
            let layout = p.layout(bytes, dtype.size(), n);
            let mut buf = vec![0u8; layout.count * dtype.size()];
            verify::fill_send(&mut buf, &layout, dtype, Some(RedOp::Sum), 0, n, 1);
            g.throughput(Throughput::Bytes(bytes as u64));
            g.bench_with_input(
                BenchmarkId::new(format!("fill/{name}"), pattern),
                &(),
                |b, _| {
                    b.iter(|| {
                        verify::fill_send(&mut buf, &layout, dtype, Some(RedOp::Sum), 0, n, 1)
                    })
                },
            );
            g.bench_with_input(
                BenchmarkId::new(format!("check/{name}"), pattern),
                &(),
                |b, _| b.iter(|| verify::check(&buf, p, &layout, dtype, RedOp::Sum, 0, n, 1)),
            );
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
