//! Host time per iteration: nccl-smoke's launch path (the pattern, the communicator's checks,
//! the settle of a non-blocking call), which is all a timed iteration queues, and a latency-pass
//! iteration (the launch path and its boundary event), against the bare FFI call of the same
//! operation, on the simulation with a zero-byte all_reduce, so NCCL's own work is the same in
//! each and the difference is what the harness adds.
//!
//! Needs the simulation libraries built beside the benches (`cargo build --release
//! --workspace`). Prints the difference per iteration after criterion's own figures.

use criterion::{Criterion, criterion_group, criterion_main};
use nccl_smoke::comm::{Communicator, Region};
use nccl_smoke::elements::{DataType, RedOp};
use nccl_smoke::ffi::cuda::{Device, DeviceBuffer, Driver, Event};
use nccl_smoke::ffi::nccl::{CollArgs, Collective, Nccl};
use nccl_smoke::patterns::select;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn sim_lib(name: &str) -> String {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join("release");
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} missing: run `cargo build --release --workspace` first",
        p.display()
    );
    p.display().to_string()
}

/// Mean host time of `f` over `n` calls.
fn per_call(n: u32, mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed() / n
}

fn bench(c: &mut Criterion) {
    let _driver = Driver::load(Some(&sim_lib("libcuda.so"))).expect("simulated driver");
    let nccl: &'static Nccl = Box::leak(Box::new(
        Nccl::load(Some(&sim_lib("libnccl.so"))).expect("simulated NCCL"),
    ));
    let _device = Device::open(0).expect("device 0");
    let id = nccl.get_unique_id().expect("unique id");
    let comm = Communicator::init(nccl, &id, 0, 1, Duration::from_secs(30)).expect("init");
    let send = DeviceBuffer::alloc(64).unwrap();
    let recv = DeviceBuffer::alloc(64).unwrap();
    let event = Event::new().unwrap();
    let p = select(&["all_reduce".into()]).unwrap()[0];
    let (dtype, op) = (DataType::Float, RedOp::Sum);
    let layout = p.layout(0, dtype.size(), 1);
    let (dt, rop) = (dtype.nccl().0, op.nccl_code());

    let bare = || {
        let args = CollArgs {
            send: send.ptr(),
            recv: recv.ptr(),
            count: 0,
            dtype: dt,
            op: rop,
            root: 0,
        };
        nccl.collective(Collective::AllReduce, args, comm.handle(), &comm.stream)
            .unwrap();
    };
    let launch = || {
        p.launch(
            &comm,
            Region::whole(&send),
            Region::whole(&recv),
            &layout,
            dtype,
            op,
        )
        .unwrap();
    };
    let iteration = || {
        launch();
        event.record(&comm.stream).unwrap();
    };
    let record = || event.record(&comm.stream).unwrap();
    let mut g = c.benchmark_group("launch");
    g.bench_function("bare cuEventRecord", |b| b.iter(record));
    g.bench_function("bare ncclAllReduce (0 bytes)", |b| b.iter(bare));
    g.bench_function("nccl-smoke launch path", |b| b.iter(launch));
    g.bench_function(
        "nccl-smoke latency-pass iteration (launch + boundary event)",
        |b| b.iter(iteration),
    );
    g.finish();

    // The figure this bench stands for, from long runs of each.
    let n = 2_000_000;
    let (b, l, i) = (
        per_call(n, bare),
        per_call(n, launch),
        per_call(n, iteration),
    );
    let e = per_call(n, record);
    let ns = |d: Duration| d.as_nanos() as f64;
    println!(
        "overhead over the bare call: launch path (a timed iteration) {:.0} ns, latency-pass \
         iteration {:.0} ns, of which the driver's cuEventRecord {:.0} ns (bare ncclAllReduce {:.0} ns; {n} calls \
         each; target <= 1000 ns)",
        ns(l) - ns(b),
        ns(i) - ns(b),
        ns(e),
        ns(b),
    );
    comm.wait_idle(
        Duration::from_secs(30),
        "bench",
        nccl_smoke::comm::Poll::Relaxed,
    )
    .unwrap();
}

criterion_group!(benches, bench);
criterion_main!(benches);
