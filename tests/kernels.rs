//! nccl-smoke's fill and check kernels against the host's own fill and check, byte for byte:
//! on the simulated driver (which runs their host reference) here, and on a GPU's real driver,
//! which JIT-compiles the PTX (`--ignored`, run by scripts/gpu-check.sh). The GPU case is what
//! proves the PTX computes what the host computes.

mod common;
use clap::ValueEnum;
use nccl_smoke::elements::{self, DataType, RedOp};
use nccl_smoke::ffi::cuda::{Device, DeviceBuffer, Driver, Kernels, Stream};
use nccl_smoke_kernels::args::{Block, CheckArgs, CheckResult, FillArgs, blocks_bytes};

const OPS: [Option<RedOp>; 5] = [
    None,
    Some(RedOp::Sum),
    Some(RedOp::Prod),
    Some(RedOp::Max),
    Some(RedOp::Min),
];

fn wait(s: &Stream) {
    while !s.is_idle().expect("stream query") {
        std::thread::yield_now();
    }
}

fn upload(bytes: &[u8], s: &Stream) -> DeviceBuffer {
    let b = DeviceBuffer::alloc(bytes.len()).expect("alloc");
    b.copy_from_host(0, bytes, s).expect("copy down");
    wait(s);
    b
}

fn download(b: &DeviceBuffer, s: &Stream) -> Vec<u8> {
    let mut out = vec![0u8; b.len()];
    b.copy_to_host(0, &mut out, s).expect("copy back");
    wait(s);
    out
}

/// Runs the check kernel over `got` and returns its counts.
fn device_check(
    k: &Kernels,
    s: &Stream,
    dtype: DataType,
    args: CheckArgs,
    got: &[u8],
    blocks: &[Block],
) -> CheckResult {
    let got = upload(got, s);
    let table = upload(&elements::kernel_table(dtype), s);
    let blocks = upload(
        &blocks_bytes(blocks)
            .into_iter()
            .chain([0; 16])
            .collect::<Vec<_>>(),
        s,
    );
    let result = upload(&CheckResult::START.to_bytes(), s);
    k.check(
        CheckArgs {
            got: got.ptr().0,
            table: table.ptr().0,
            blocks: blocks.ptr().0,
            result: result.ptr().0,
            elsize: dtype.size() as u64,
            ..args
        },
        s,
    )
    .expect("check launch");
    wait(s);
    CheckResult::from_bytes(&download(&result, s).try_into().unwrap())
}

/// Every type, every op, several (ranks, sender, epoch, first, count): the device's fill equals
/// the host's; the device's check finds a correct buffer clean and counts each corruption.
fn kernels_agree_with_the_host(driver: Option<&str>) {
    let _driver = Driver::load(driver).expect("driver");
    let _dev = Device::open(0).expect("device 0");
    let s = Stream::new().expect("stream");
    let k = Kernels::load().expect("the kernels load (JIT from PTX)");
    let cases: [(u32, u32, u32, usize, usize); 5] = [
        (1, 0, 0, 0, 1),
        (2, 1, 3, 0, 1000),
        (5, 3, 7, 12_345, 4_099),
        (4096, 77, 1, 3_000_000_000, 333),
        (3, 2, 11, 0, 1_300_000), // more elements than one launch has threads
    ];
    for &dtype in DataType::value_variants() {
        let table = upload(&elements::kernel_table(dtype), &s);
        let sz = dtype.size();
        for op in OPS {
            for (n, sender, epoch, first, count) in cases {
                let out = DeviceBuffer::alloc(count * sz).unwrap();
                k.fill(
                    FillArgs {
                        out: out.ptr().0,
                        count: count as u64,
                        first: first as u64,
                        table: table.ptr().0,
                        elsize: sz as u64,
                        op: elements::kernel_op(op) as u64,
                        nranks: n as u64,
                        sender: sender as u64,
                        epoch: epoch as u64,
                    },
                    &s,
                )
                .unwrap();
                let got = download(&out, &s);
                let mut want = vec![0u8; count * sz];
                elements::fill(&mut want, dtype, op, n, sender, first, epoch);
                let at = got.iter().zip(&want).position(|(a, b)| a != b);
                assert_eq!(
                    at, None,
                    "fill {dtype:?} {op:?} n={n} s={sender} e={epoch} first={first}"
                );
            }
        }
        // A reduction's result, checked as received.
        for op in [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min] {
            let (n, epoch, count) = (5u32, 2u32, 70_001usize);
            let mut got = vec![0u8; count * sz];
            for (i, el) in got.chunks_exact_mut(sz).enumerate() {
                dtype.encode(elements::reduced(op, n, i, epoch), el);
            }
            let args = CheckArgs {
                count: count as u64,
                op: elements::kernel_op(Some(op)) as u64,
                nranks: n as u64,
                epoch: epoch as u64,
                per_peer: count as u64,
                ..Default::default()
            };
            let r = device_check(&k, &s, dtype, args, &got, &[]);
            assert_eq!(
                (r.checked, r.wrong, r.first),
                (count as u64, 0, u64::MAX),
                "{dtype:?} {op:?}"
            );
            got[9 * sz] ^= 0x01; // a wrong value
            got[(count - 1) * sz..].fill(elements::FILL_BYTE); // never written
            let r = device_check(&k, &s, dtype, args, &got, &[]);
            assert_eq!(
                (r.checked, r.wrong, r.first),
                (count as u64, 2, 9),
                "{dtype:?} {op:?}"
            );
        }
        // A copy in two blocks from two senders.
        let (n, epoch, per) = (4u32, 5u32, 600usize);
        let blocks = [
            Block {
                sender: 3,
                base: 100,
            },
            Block { sender: 0, base: 0 },
        ];
        let mut got = vec![0u8; 2 * per * sz];
        for (i, el) in got.chunks_exact_mut(sz).enumerate() {
            let b = blocks[i / per];
            let v = elements::value(None, n, b.sender as u32, b.base as usize + i % per, epoch);
            dtype.encode(v, el);
        }
        let args = CheckArgs {
            count: (2 * per) as u64,
            op: 0,
            nranks: n as u64,
            epoch: epoch as u64,
            per_peer: per as u64,
            ..Default::default()
        };
        let r = device_check(&k, &s, dtype, args, &got, &blocks);
        assert_eq!(
            (r.checked, r.wrong),
            ((2 * per) as u64, 0),
            "{dtype:?} copy"
        );
        // The second block's data where the first's was due: every element of it wrong but
        // those that happen to hold the same value.
        let (a, b) = got.split_at_mut(per * sz);
        a.copy_from_slice(b);
        let r = device_check(&k, &s, dtype, args, &got, &blocks);
        assert!(
            r.wrong > per as u64 / 2 && r.wrong <= per as u64,
            "{dtype:?} {r:?}"
        );
        assert!(r.first < per as u64, "{dtype:?} {r:?}");
    }
}

#[test]
fn on_the_simulated_driver_the_kernels_agree_with_the_host() {
    common::require_sim();
    let lib = common::bin().parent().unwrap().join("libcuda.so");
    kernels_agree_with_the_host(Some(lib.to_str().unwrap()));
}

#[test]
#[ignore = "needs GPU"]
fn on_a_gpu_the_ptx_kernels_agree_with_the_host() {
    kernels_agree_with_the_host(None);
}

/// A run fills and checks through the kernels (the simulated driver says which launches it ran);
/// with `-c 0` nothing is written or checked at all, as nccl-tests skips its data with `-c 0`.
#[test]
fn a_run_fills_and_checks_on_the_device_and_c_0_does_neither() {
    let trace = [("NCCL_SMOKE_SIM_CUDA_TRACE", "1")];
    let o = common::sim_run(2, &["--patterns", "all_reduce,all_to_all"], &trace);
    let t = common::text(&o);
    assert_eq!(common::code(&o), 0, "{t}");
    for k in ["ncclsmoke_fill", "ncclsmoke_check"] {
        assert!(t.contains(k), "{k}: {t}");
    }
    assert!(t.contains("] (run)"), "the driver ran them: {t}");
    assert!(
        t.contains("# data: written and checked on the GPU by nccl-smoke's kernels"),
        "{t}"
    );
    let o = common::sim_run(
        2,
        &["--patterns", "all_reduce,all_to_all", "-c", "0"],
        &trace,
    );
    let t = common::text(&o);
    assert_eq!(common::code(&o), 26, "{t}");
    assert!(!t.contains("ncclsmoke_"), "{t}");
    assert!(
        t.contains("# data: not written and not checked (-c 0"),
        "{t}"
    );
}

/// A driver that cannot load the kernels (here the stand-in's `cuModuleLoadData` answering as an
/// old driver does to a newer PTX) is named at alloc as such, with the way around it; and
/// `--data-on host` does not need them.
#[test]
fn a_driver_that_cannot_load_the_kernels_is_named_and_data_on_host_runs_without_them() {
    let old = [(
        "NCCL_SMOKE_SIM_CUDA_FAULT",
        "cuModuleLoadData:CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    )];
    let o = common::sim_run(2, &[], &old);
    let t = common::text(&o);
    assert_eq!(common::code(&o), 14, "{t}");
    assert!(
        t.contains("cuModuleLoadData failed: CUDA_ERROR_UNSUPPORTED_PTX_VERSION"),
        "{t}"
    );
    assert!(
        t.contains("could not load nccl-smoke's fill and check kernels"),
        "{t}"
    );
    assert!(
        t.contains("--data-on host fills and checks on the host instead"),
        "{t}"
    );
    let o = common::sim_run(2, &["--data-on", "host"], &old);
    let t = common::text(&o);
    assert_eq!(common::code(&o), 0, "{t}");
    assert!(t.contains("# data: written and checked by the host"), "{t}");
}

/// What crosses between host and device at a gibibyte, as the simulated driver counts it
/// (`NCCL_SMOKE_SIM_CUDA_TRACE=1` logs every kernel launch and every host↔device copy with its
/// bytes), under a deadline of 1 s that the fill and check kernels outlast on the simulated
/// driver (it runs them on one CPU core: about 1.7 s each over 1 GiB on an idle machine), so
/// that their waits must carry their own budget not to be called a hang:
/// - `-c 0`, either `--data-on`: no kernel, no copy; measured, never checked, never a hang;
/// - `-c 1 --data-on device`: one fill and one check per size, and the host reads counts only;
/// - `-c 1 --data-on host`: every byte of both buffers crosses, once each way.
///
/// 1 GiB is as large as this goes here: the simulated all-reduce itself writes its receive
/// buffer in host memory, 2 GiB resident at this size, 32 GiB at the 16 GiB the property is
/// meant for. Nothing in the count depends on the size.
#[test]
fn a_gibibyte_without_a_check_crosses_nothing_and_its_kernels_are_no_hang() {
    common::require_sim();
    let run = |c: &str, on: &str| {
        let mut cmd = std::process::Command::new(common::bin());
        cmd.args(["launch", "-n", "1", "run", "--backend", "sim"])
            .args(["-b", "64M", "-e", "1G", "-f", "16", "-n", "1", "-w", "0"])
            .args(["--patterns", "all_reduce", "--timeout", "1"])
            // The first all_reduce (connect) touches the simulated device memory of both
            // 1 GiB buffers for the first time: 2.4 s measured on a fresh 2-core VM, where
            // a 1 s deadline (+ 1.5 s) failed about half the runs. Only the stages the
            // kernels run in keep the 1 s deadline this test is about.
            .args(["--stage-timeout", "connect=10"])
            .args(["-c", c, "--data-on", on])
            .env("NCCL_SMOKE_SIM_CUDA_TRACE", "1");
        let o = common::bounded(cmd, 120);
        let t = common::text(&o);
        let launches: Vec<&str> = t.lines().filter(|l| l.contains("] (run)")).collect();
        let copied: Vec<u64> = t
            .lines()
            .filter(|l| l.contains("cuMemcpyHtoD") || l.contains("cuMemcpyDtoH"))
            .filter_map(|l| l.rsplit(' ').nth(1)?.parse().ok())
            .collect();
        (common::code(&o), t.clone(), launches.len(), copied)
    };
    const GIB: u64 = 1 << 30;
    for on in ["device", "host"] {
        let (code, t, launches, copied) = run("0", on);
        assert_eq!(code, 26, "{t}");
        assert!(
            t.contains("UNVERIFIED [SIMULATED] — 1 patterns × 2 sizes"),
            "{t}"
        );
        assert_eq!((launches, copied.len()), (0, 0), "--data-on {on}: {t}");
    }
    let (code, t, launches, copied) = run("1", "device");
    assert_eq!(code, 0, "{t}");
    assert_eq!(launches, 4, "a fill and a check per size: {t}");
    assert!(copied.iter().all(|&b| b < 4096), "counts only: {copied:?}");
    let (code, t, launches, copied) = run("1", "host");
    assert_eq!(code, 0, "{t}");
    assert_eq!(launches, 0, "{t}");
    assert_eq!(copied.iter().sum::<u64>(), 2 * (GIB + GIB / 16), "{t}");
}
