//! End to end: the built libcuda.so (the driver stand-in, opened first with RTLD_GLOBAL, as
//! the harness opens it) and libnccl.so, loaded with dlopen; ranks are threads of this
//! process, one communicator each, as NCCL allows. Every element of every result is checked.
//!
//! Scenarios that need their own environment (faults, log settings, another release) run in
//! a child process: this test binary again, with `SIM_NCCL_E2E_CHILD` naming the scenario.
// This test calls the simulation through its C ABI, as a dlopen caller does: unsafe is its job (the workspace denies it elsewhere).
#![allow(unsafe_code)]

use half::{bf16, f16};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Loading

type Stream = *mut c_void;
type CommH = *mut c_void;

#[repr(C)]
#[derive(Clone, Copy)]
struct UniqueId([u8; 128]);

macro_rules! api {
    ($name:ident { $($f:ident : fn($($a:ty),*) -> $r:ty;)* }) => {
        #[allow(non_snake_case, dead_code)]
        struct $name { $($f: unsafe extern "C" fn($($a),*) -> $r,)* }
        impl $name {
            fn load(h: *mut c_void) -> $name {
                $name { $($f: {
                    let n = concat!(stringify!($f), "\0");
                    // SAFETY: a library handle and a NUL-terminated name.
                    let p = unsafe { libc::dlsym(h, n.as_ptr().cast()) };
                    assert!(!p.is_null(), "{} missing", stringify!($f));
                    // SAFETY: the symbol has this prototype (cuda.h / nccl.h).
                    unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($a),*) -> $r>(p) }
                },)* }
            }
        }
    };
}

api!(Cuda {
    cuInit: fn(u32) -> u32;
    cuDeviceGet: fn(*mut c_int, c_int) -> u32;
    cuDevicePrimaryCtxRetain: fn(*mut *mut c_void, c_int) -> u32;
    cuCtxSetCurrent: fn(*mut c_void) -> u32;
    cuStreamCreate: fn(*mut Stream, u32) -> u32;
    cuStreamSynchronize: fn(Stream) -> u32;
    cuStreamQuery: fn(Stream) -> u32;
});

api!(Nccl {
    ncclGetVersion: fn(*mut c_int) -> u32;
    ncclGetUniqueId: fn(*mut UniqueId) -> u32;
    ncclCommInitRank: fn(*mut CommH, c_int, UniqueId, c_int) -> u32;
    ncclCommInitRankConfig: fn(*mut CommH, c_int, UniqueId, c_int, *mut c_void) -> u32;
    ncclCommGetAsyncError: fn(CommH, *mut u32) -> u32;
    ncclCommAbort: fn(CommH) -> u32;
    ncclCommFinalize: fn(CommH) -> u32;
    ncclCommDestroy: fn(CommH) -> u32;
    ncclCommCount: fn(CommH, *mut c_int) -> u32;
    ncclCommCuDevice: fn(CommH, *mut c_int) -> u32;
    ncclCommUserRank: fn(CommH, *mut c_int) -> u32;
    ncclCommSplit: fn(CommH, c_int, c_int, *mut CommH, *mut c_void) -> u32;
    ncclAllReduce: fn(*const c_void, *mut c_void, usize, c_int, c_int, CommH, Stream) -> u32;
    ncclAlltoAll: fn(*const c_void, *mut c_void, usize, c_int, CommH, Stream) -> u32;
    ncclSend: fn(*const c_void, usize, c_int, c_int, CommH, Stream) -> u32;
    ncclRecv: fn(*mut c_void, usize, c_int, c_int, CommH, Stream) -> u32;
    ncclGroupStart: fn() -> u32;
    ncclGroupEnd: fn() -> u32;
    ncclGetErrorString: fn(u32) -> *const c_char;
    ncclGetLastError: fn(CommH) -> *const c_char;
    ncclSmokeSimulation: fn() -> *const c_char;
});

struct Libs {
    cu: Cuda,
    nccl: Nccl,
}

// SAFETY: plain function pointers.
unsafe impl Sync for Libs {}

/// `target/<profile>`, where cargo puts the libraries (this binary is in its `deps`).
fn out_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// Brings the two libraries up to date: cargo does not build a cdylib-only package's library
/// for its integration tests, nor the driver stand-in (a no-op when both are fresh).
fn ensure_built() {
    let dir = out_dir();
    let target = dir.parent().unwrap();
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "-p",
            "nccl-smoke-sim-cuda",
            "-p",
            "nccl-smoke-sim-nccl",
        ])
        .env("CARGO_TARGET_DIR", target);
    if dir.file_name().and_then(|n| n.to_str()) == Some("release") {
        cmd.arg("--release");
    }
    let st = cmd
        .status()
        .expect("cargo build of the simulation libraries");
    assert!(st.success(), "building the simulation libraries failed");
}

fn libs() -> &'static Libs {
    static L: OnceLock<Libs> = OnceLock::new();
    L.get_or_init(|| {
        // A child process uses what its parent built.
        if std::env::var_os(CHILD_ENV).is_none() {
            ensure_built();
        }
        let open = |name: &str, flags: c_int| {
            let p = out_dir().join(name);
            let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
            // SAFETY: a NUL-terminated path.
            let h = unsafe { libc::dlopen(c.as_ptr(), flags) };
            assert!(!h.is_null(), "dlopen {} failed", p.display());
            h
        };
        let cu = open("libcuda.so", libc::RTLD_NOW | libc::RTLD_GLOBAL);
        let nccl = open("libnccl.so", libc::RTLD_NOW);
        Libs {
            cu: Cuda::load(cu),
            nccl: Nccl::load(nccl),
        }
    })
}

fn cstr(p: *const c_char) -> String {
    assert!(!p.is_null());
    // SAFETY: the library's NUL-terminated string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn last_error() -> String {
    // SAFETY: no arguments of note.
    cstr(unsafe { (libs().nccl.ncclGetLastError)(std::ptr::null_mut()) })
}

// ---------------------------------------------------------------------------------------------
// Ranks as threads

const OK: u32 = 0;
const UNHANDLED_CUDA: u32 = 1;
const SYSTEM: u32 = 2;
const INTERNAL: u32 = 3;
const INVALID_ARGUMENT: u32 = 4;
const INVALID_USAGE: u32 = 5;
const REMOTE: u32 = 6;
const IN_PROGRESS: u32 = 7;

/// What one rank thread has: its communicator and its stream.
#[derive(Clone, Copy)]
struct Rank {
    rank: usize,
    n: usize,
    comm: CommH,
    stream: Stream,
}

// SAFETY: handles, used by one thread at a time (or by the library's thread-safe calls).
unsafe impl Send for Rank {}

/// Makes device `rank % 8` current on this thread and gives it a stream.
fn bind_device(rank: usize) -> Stream {
    let cu = &libs().cu;
    // SAFETY: the driver API with valid out-pointers.
    unsafe {
        assert_eq!((cu.cuInit)(0), 0);
        let mut dev = 0;
        assert_eq!((cu.cuDeviceGet)(&mut dev, (rank % 8) as c_int), 0);
        let mut ctx = std::ptr::null_mut();
        assert_eq!((cu.cuDevicePrimaryCtxRetain)(&mut ctx, dev), 0);
        assert_eq!((cu.cuCtxSetCurrent)(ctx), 0);
        let mut s = std::ptr::null_mut();
        assert_eq!((cu.cuStreamCreate)(&mut s, 0), 0);
        s
    }
}

fn unique_id() -> UniqueId {
    let mut id = UniqueId([0; 128]);
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { (libs().nccl.ncclGetUniqueId)(&mut id) },
        OK,
        "{}",
        last_error()
    );
    id
}

fn sync(r: &Rank) {
    // SAFETY: the rank's stream.
    assert_eq!(unsafe { (libs().cu.cuStreamSynchronize)(r.stream) }, 0);
}

fn async_error(comm: CommH) -> u32 {
    let mut e = 99;
    // SAFETY: a live communicator and an out-pointer.
    assert_eq!(
        unsafe { (libs().nccl.ncclCommGetAsyncError)(comm, &mut e) },
        OK
    );
    e
}

/// Aborts the process when a scenario runs past `secs` (a deadlock must fail, not hang).
fn watchdog(what: &'static str, secs: u64) -> Arc<std::sync::atomic::AtomicBool> {
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = done.clone();
    std::thread::spawn(move || {
        let start = Instant::now();
        while !d.load(std::sync::atomic::Ordering::SeqCst) {
            if start.elapsed() > Duration::from_secs(secs) {
                eprintln!("{what}: no progress in {secs} s");
                std::process::exit(99);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    done
}

/// Runs `body` on `n` rank threads, each with its own blocking communicator; destroys them.
/// Binds this thread to `rank`'s device and makes its communicator (checked), as each rank of
/// a job does.
fn join(rank: usize, n: usize, id: UniqueId) -> Rank {
    let stream = bind_device(rank);
    let mut comm = std::ptr::null_mut();
    // SAFETY: valid out-pointer, id by value.
    let rc = unsafe { (libs().nccl.ncclCommInitRank)(&mut comm, n as c_int, id, rank as c_int) };
    assert_eq!(rc, OK, "init of rank {rank}: {}", last_error());
    Rank {
        rank,
        n,
        comm,
        stream,
    }
}

fn with_ranks<T: Send + 'static>(
    n: usize,
    body: impl Fn(Rank) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let done = watchdog("with_ranks", 120);
    let id = unique_id();
    let body = Arc::new(body);
    let handles: Vec<_> = (0..n)
        .map(|rank| {
            let body = body.clone();
            std::thread::spawn(move || {
                let nccl = &libs().nccl;
                let r = join(rank, n, id);
                let comm = r.comm;
                let out = body(r);
                sync(&r);
                // SAFETY: the rank's communicator, used no more.
                unsafe {
                    assert_eq!((nccl.ncclCommFinalize)(comm), OK);
                    assert_eq!((nccl.ncclCommDestroy)(comm), OK);
                }
                out
            })
        })
        .collect();
    let out = handles.into_iter().map(|h| h.join().unwrap()).collect();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    out
}

// ---------------------------------------------------------------------------------------------
// Element types

const TYPES: [(c_int, &str, usize); 10] = [
    (0, "int8", 1),
    (1, "uint8", 1),
    (2, "int32", 4),
    (3, "uint32", 4),
    (4, "int64", 8),
    (5, "uint64", 8),
    (6, "half", 2),
    (7, "float", 4),
    (8, "double", 8),
    (9, "bfloat16", 2),
];

fn signed(dtype: c_int) -> bool {
    matches!(dtype, 0 | 2 | 4 | 6 | 7 | 8 | 9)
}

/// `v` as an element of `dtype` (integers wrap, floats round to nearest).
fn encode(dtype: c_int, v: f64) -> Vec<u8> {
    let i = v as i128;
    match dtype {
        0 => (i as i8).to_le_bytes().to_vec(),
        1 => (i as u8).to_le_bytes().to_vec(),
        2 => (i as i32).to_le_bytes().to_vec(),
        3 => (i as u32).to_le_bytes().to_vec(),
        4 => (i as i64).to_le_bytes().to_vec(),
        5 => (i as u64).to_le_bytes().to_vec(),
        6 => f16::from_f64(v).to_le_bytes().to_vec(),
        7 => (v as f32).to_le_bytes().to_vec(),
        8 => v.to_le_bytes().to_vec(),
        _ => bf16::from_f64(v).to_le_bytes().to_vec(),
    }
}

/// Rank `r`'s element `i`: small integers (exact in every type), some negative, none zero
/// (a float product with a zero and a negative factor is -0.0, which integer arithmetic
/// cannot predict).
fn value(dtype: c_int, r: usize, i: usize) -> i128 {
    let base = ((r * 7 + i * 3) % 4) as i128 + 1;
    if signed(dtype) && i % 2 == 1 {
        [-2, -1, 1, 2][base as usize - 1]
    } else {
        base
    }
}

/// The all-reduce result of element `i` over `n` ranks, computed independently: exact
/// integer arithmetic wraps to the type, exact sums and products of small integers are
/// exact in every float type, and avg is the sum divided once, rounded to the type.
fn expected(dtype: c_int, op: c_int, n: usize, i: usize) -> Vec<u8> {
    let vals: Vec<i128> = (0..n).map(|r| value(dtype, r, i)).collect();
    let exact = match op {
        1 => vals.iter().product::<i128>(),
        2 => *vals.iter().max().unwrap(),
        3 => *vals.iter().min().unwrap(),
        _ => vals.iter().sum::<i128>(),
    };
    if op != 4 {
        return encode(dtype, exact as f64);
    }
    match dtype {
        // Integers: the (wrapped) sum divided, truncating toward zero.
        0..=5 => {
            let wrapped = wrap(dtype, exact);
            encode(dtype, (wrapped / n as i128) as f64)
        }
        _ => encode(dtype, exact as f64 / n as f64),
    }
}

fn wrap(dtype: c_int, v: i128) -> i128 {
    match dtype {
        0 => v as i8 as i128,
        1 => v as u8 as i128,
        2 => v as i32 as i128,
        3 => v as u32 as i128,
        4 => v as i64 as i128,
        _ => v as u64 as i128,
    }
}

fn ptr(v: &[u8]) -> *const c_void {
    v.as_ptr().cast()
}

fn ptr_mut(v: &mut [u8]) -> *mut c_void {
    v.as_mut_ptr().cast()
}

// ---------------------------------------------------------------------------------------------
// In-process scenarios

#[test]
fn library_identifies_itself() {
    let l = libs();
    // SAFETY: no arguments.
    let marker = cstr(unsafe { (l.nccl.ncclSmokeSimulation)() });
    assert!(marker.starts_with("nccl-smoke simulated NCCL "), "{marker}");
    let mut v = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { (l.nccl.ncclGetVersion)(&mut v) }, OK);
    assert_eq!(v, 22803);
    // SAFETY: any code.
    assert_eq!(
        cstr(unsafe { (l.nccl.ncclGetErrorString)(6) }),
        "remote process exited or there was a network error"
    );
}

#[test]
fn all_reduce_every_type_and_operation_on_four_ranks() {
    const COUNT: usize = 37;
    let results = with_ranks(4, |r| {
        let nccl = &libs().nccl;
        let mut bufs = Vec::new();
        for (dtype, _, size) in TYPES {
            for op in 0..5 {
                let send: Vec<u8> = (0..COUNT)
                    .flat_map(|i| encode(dtype, value(dtype, r.rank, i) as f64))
                    .collect();
                let mut recv = vec![0xAAu8; COUNT * size];
                // SAFETY: buffers of COUNT elements, live until the stream is synchronized.
                let rc = unsafe {
                    (nccl.ncclAllReduce)(
                        ptr(&send),
                        ptr_mut(&mut recv),
                        COUNT,
                        dtype,
                        op,
                        r.comm,
                        r.stream,
                    )
                };
                assert_eq!(rc, OK, "{}", last_error());
                bufs.push((dtype, op, send, recv));
            }
        }
        sync(&r);
        assert_eq!(async_error(r.comm), OK);
        bufs.into_iter()
            .map(|(d, o, _, recv)| (d, o, recv))
            .collect::<Vec<_>>()
    });
    for (rank, bufs) in results.iter().enumerate() {
        for (dtype, op, recv) in bufs {
            let name = TYPES.iter().find(|t| t.0 == *dtype).unwrap().1;
            let want: Vec<u8> = (0..COUNT)
                .flat_map(|i| expected(*dtype, *op, 4, i))
                .collect();
            assert_eq!(recv, &want, "rank {rank} {name} op {op}");
        }
    }
}

#[test]
fn all_reduce_in_place_and_empty() {
    with_ranks(3, |r| {
        let nccl = &libs().nccl;
        let mut buf: Vec<u8> = (0..1000u32)
            .flat_map(|i| ((i + r.rank as u32) as f32).to_le_bytes())
            .collect();
        let p = ptr_mut(&mut buf);
        // SAFETY: one buffer, in place; then a count-0 call with NULL buffers (a no-op).
        unsafe {
            assert_eq!((nccl.ncclAllReduce)(p, p, 1000, 7, 0, r.comm, r.stream), OK);
            assert_eq!(
                (nccl.ncclAllReduce)(
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    0,
                    7,
                    0,
                    r.comm,
                    r.stream
                ),
                OK
            );
        }
        sync(&r);
        for (i, c) in buf.chunks(4).enumerate() {
            let got = f32::from_le_bytes(c.try_into().unwrap());
            assert_eq!(got, (3 * i + 3) as f32, "rank {} element {i}", r.rank);
        }
    });
}

#[test]
fn all_to_all_chunks_go_to_their_ranks() {
    const COUNT: usize = 5;
    with_ranks(4, |r| {
        let nccl = &libs().nccl;
        let send: Vec<u8> = (0..r.n)
            .flat_map(|j| (0..COUNT).map(move |k| (r.rank * 1000 + j * 100 + k) as i32))
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut recv = vec![0u8; send.len()];
        // SAFETY: n * COUNT int32 in each buffer.
        let rc = unsafe {
            (nccl.ncclAlltoAll)(ptr(&send), ptr_mut(&mut recv), COUNT, 2, r.comm, r.stream)
        };
        assert_eq!(rc, OK, "{}", last_error());
        sync(&r);
        for i in 0..r.n {
            for k in 0..COUNT {
                let at = (i * COUNT + k) * 4;
                let got = i32::from_le_bytes(recv[at..at + 4].try_into().unwrap());
                assert_eq!(
                    got as usize,
                    i * 1000 + r.rank * 100 + k,
                    "rank {} chunk {i} [{k}]",
                    r.rank
                );
            }
        }
    });
}

#[test]
fn grouped_send_recv_with_every_peer_and_self() {
    const COUNT: usize = 6;
    with_ranks(3, |r| {
        let nccl = &libs().nccl;
        let sends: Vec<Vec<u8>> = (0..r.n)
            .map(|p| {
                (0..COUNT)
                    .flat_map(|k| ((r.rank * 100 + p * 10 + k) as f64).to_le_bytes())
                    .collect()
            })
            .collect();
        let mut recvs: Vec<Vec<u8>> = (0..r.n).map(|_| vec![0u8; COUNT * 8]).collect();
        // SAFETY: buffers of COUNT doubles, live until the stream is synchronized.
        unsafe {
            assert_eq!((nccl.ncclGroupStart)(), OK);
            for p in 0..r.n {
                assert_eq!(
                    (nccl.ncclSend)(ptr(&sends[p]), COUNT, 8, p as c_int, r.comm, r.stream),
                    OK
                );
                assert_eq!(
                    (nccl.ncclRecv)(
                        ptr_mut(&mut recvs[p]),
                        COUNT,
                        8,
                        p as c_int,
                        r.comm,
                        r.stream
                    ),
                    OK
                );
            }
            assert_eq!((nccl.ncclGroupEnd)(), OK, "{}", last_error());
        }
        sync(&r);
        for (p, buf) in recvs.iter().enumerate() {
            for (k, c) in buf.chunks(8).enumerate() {
                let got = f64::from_le_bytes(c.try_into().unwrap());
                assert_eq!(
                    got,
                    (p * 100 + r.rank * 10 + k) as f64,
                    "rank {} from {p} [{k}]",
                    r.rank
                );
            }
        }
    });
}

#[test]
fn a_group_can_mix_a_collective_with_point_to_point() {
    with_ranks(2, |r| {
        let nccl = &libs().nccl;
        let peer = (1 - r.rank) as c_int;
        let send = ((r.rank + 1) as i64 * 10).to_le_bytes().to_vec();
        let mut sum = vec![0u8; 8];
        let mut got = vec![0u8; 8];
        // SAFETY: one int64 per buffer. Rank 0 issues the send first, rank 1 the receive
        // first: point-to-point and collective traffic are matched separately.
        unsafe {
            assert_eq!((nccl.ncclGroupStart)(), OK);
            if r.rank == 0 {
                assert_eq!(
                    (nccl.ncclSend)(ptr(&send), 1, 4, peer, r.comm, r.stream),
                    OK
                );
                assert_eq!(
                    (nccl.ncclAllReduce)(ptr(&send), ptr_mut(&mut sum), 1, 4, 0, r.comm, r.stream),
                    OK
                );
                assert_eq!(
                    (nccl.ncclRecv)(ptr_mut(&mut got), 1, 4, peer, r.comm, r.stream),
                    OK
                );
            } else {
                assert_eq!(
                    (nccl.ncclRecv)(ptr_mut(&mut got), 1, 4, peer, r.comm, r.stream),
                    OK
                );
                assert_eq!(
                    (nccl.ncclAllReduce)(ptr(&send), ptr_mut(&mut sum), 1, 4, 0, r.comm, r.stream),
                    OK
                );
                assert_eq!(
                    (nccl.ncclSend)(ptr(&send), 1, 4, peer, r.comm, r.stream),
                    OK
                );
            }
            assert_eq!((nccl.ncclGroupEnd)(), OK);
        }
        sync(&r);
        assert_eq!(i64::from_le_bytes(sum.try_into().unwrap()), 30);
        assert_eq!(
            i64::from_le_bytes(got.try_into().unwrap()),
            (2 - r.rank) as i64 * 10
        );
    });
}

#[test]
fn one_rank_reduces_exchanges_and_sends_to_itself() {
    with_ranks(1, |r| {
        let nccl = &libs().nccl;
        let x: Vec<u8> = [1.5f32, -2.0, 3.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut sum = vec![0u8; 12];
        let mut avg = vec![0u8; 12];
        let mut a2a = vec![0u8; 12];
        let mut got = vec![0u8; 12];
        // SAFETY: three floats per buffer.
        unsafe {
            assert_eq!(
                (nccl.ncclAllReduce)(ptr(&x), ptr_mut(&mut sum), 3, 7, 0, r.comm, r.stream),
                OK
            );
            assert_eq!(
                (nccl.ncclAllReduce)(ptr(&x), ptr_mut(&mut avg), 3, 7, 4, r.comm, r.stream),
                OK
            );
            assert_eq!(
                (nccl.ncclAlltoAll)(ptr(&x), ptr_mut(&mut a2a), 3, 7, r.comm, r.stream),
                OK
            );
            assert_eq!((nccl.ncclGroupStart)(), OK);
            assert_eq!(
                (nccl.ncclRecv)(ptr_mut(&mut got), 3, 7, 0, r.comm, r.stream),
                OK
            );
            assert_eq!((nccl.ncclSend)(ptr(&x), 3, 7, 0, r.comm, r.stream), OK);
            assert_eq!((nccl.ncclGroupEnd)(), OK);
        }
        sync(&r);
        assert_eq!((&sum, &avg, &a2a, &got), (&x, &x, &x, &x));
    });
}

#[test]
fn properties_and_bad_arguments() {
    with_ranks(2, |r| {
        let nccl = &libs().nccl;
        let (mut n, mut rank, mut dev) = (0, 0, -1);
        let buf = [0u8; 8];
        let mut out = [0u8; 8];
        // SAFETY: a live communicator, valid out-pointers, and calls the library must refuse
        // without touching memory.
        unsafe {
            assert_eq!((nccl.ncclCommCount)(r.comm, &mut n), OK);
            assert_eq!((nccl.ncclCommUserRank)(r.comm, &mut rank), OK);
            assert_eq!((nccl.ncclCommCuDevice)(r.comm, &mut dev), OK);
            assert_eq!((n, rank as usize, dev as usize), (2, r.rank, r.rank % 8));
            let (s, d) = (ptr(&buf), ptr_mut(&mut out));
            assert_eq!(
                // 12 is ncclNumTypes from 2.24, which added the 8-bit floats (10, 11).
                (nccl.ncclAllReduce)(s, d, 1, 12, 0, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            assert_eq!(
                (nccl.ncclAllReduce)(s, d, 1, -1, 0, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            assert_eq!(
                (nccl.ncclAllReduce)(s, d, 1, 7, 5, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            assert_eq!(
                (nccl.ncclSend)(s, 1, 7, 2, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            assert_eq!(
                (nccl.ncclRecv)(d, 1, 7, -1, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            assert_eq!(
                (nccl.ncclAllReduce)(std::ptr::null(), d, 1, 7, 0, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            // An error inside a group is returned by its end too, and nothing is queued.
            assert_eq!((nccl.ncclGroupStart)(), OK);
            assert_eq!(
                (nccl.ncclSend)(s, 1, 7, 9, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            assert_eq!((nccl.ncclGroupEnd)(), INVALID_ARGUMENT);
            // A send to self without the matching receive.
            assert_eq!((nccl.ncclGroupStart)(), OK);
            assert_eq!(
                (nccl.ncclSend)(s, 1, 7, r.rank as c_int, r.comm, r.stream),
                OK
            );
            assert_eq!((nccl.ncclGroupEnd)(), INVALID_USAGE);
            assert_eq!((nccl.ncclGroupEnd)(), INVALID_USAGE);
        }
        assert_eq!(async_error(r.comm), OK);
    });
}

/// Polls a non-blocking communicator's state out of `ncclInProgress`; returns it.
fn settle(comm: CommH) -> u32 {
    let mut state = async_error(comm);
    while state == IN_PROGRESS {
        std::thread::yield_now();
        state = async_error(comm);
    }
    state
}

/// The non-blocking contract of the release `NCCL_SMOKE_SIM_NCCL_VERSION` names (run in a
/// child, where the variable is read): which calls return `ncclInProgress`, refusal of a call
/// made too early, finalize's progress, and `NCCL_COMM_BLOCKING` over the config.
fn child_nonblocking() {
    let done = watchdog("nonblocking", 60);
    let v: i32 = std::env::var("NCCL_SMOKE_SIM_NCCL_VERSION")
        .unwrap()
        .parse()
        .unwrap();
    let forced_blocking = std::env::var("NCCL_COMM_BLOCKING").as_deref() == Ok("1");
    let id = unique_id();
    let handles: Vec<_> = (0..2)
        .map(|rank| {
            std::thread::spawn(move || {
                let stream = bind_device(rank);
                let nccl = &libs().nccl;
                let mut cfg = config(false);
                let mut comm = std::ptr::null_mut();
                if rank == 1 {
                    std::thread::sleep(Duration::from_millis(200));
                }
                // SAFETY: a config shaped like ncclConfig_t; the calls below use valid buffers.
                unsafe {
                    let rc = (nccl.ncclCommInitRankConfig)(
                        &mut comm,
                        2,
                        id,
                        rank as c_int,
                        cfg.as_mut_ptr().cast(),
                    );
                    if forced_blocking {
                        assert_eq!(rc, OK);
                    } else {
                        assert_eq!(rc, IN_PROGRESS);
                        if rank == 0 {
                            // Rank 1 is not there yet: init is still in progress.
                            let mut n = 0;
                            assert_eq!((nccl.ncclCommCount)(comm, &mut n), INVALID_ARGUMENT);
                            assert!(
                                last_error().contains("Attempt to use communicator before the previous operation returned ncclSuccess"),
                                "{}",
                                last_error()
                            );
                        }
                        assert_eq!(settle(comm), OK, "{}", last_error());
                    }
                    let x = [rank as u8 + 1; 8];
                    let mut y = [0u8; 8];
                    let rc = (nccl.ncclAllReduce)(ptr(&x), ptr_mut(&mut y), 8, 1, 0, comm, stream);
                    let threaded = !forced_blocking && v >= 22300;
                    assert_eq!(rc, if threaded { IN_PROGRESS } else { OK }, "all_reduce at {v}");
                    assert_eq!(settle(comm), OK);
                    let r = Rank {
                        rank,
                        n: 2,
                        comm,
                        stream,
                    };
                    sync(&r);
                    assert_eq!(y, [3u8; 8], "1 + 2 on every element");
                    // Send/recv with the peer: a connection to make the first time.
                    let peer = 1 - rank;
                    for round in 0..2 {
                        assert_eq!((nccl.ncclGroupStart)(), OK);
                        assert_eq!((nccl.ncclSend)(ptr(&x), 8, 1, peer as c_int, comm, stream), OK);
                        assert_eq!(
                            (nccl.ncclRecv)(ptr_mut(&mut y), 8, 1, peer as c_int, comm, stream),
                            OK
                        );
                        let pending = !forced_blocking && (v >= 22300 || round == 0);
                        assert_eq!(
                            (nccl.ncclGroupEnd)(),
                            if pending { IN_PROGRESS } else { OK },
                            "send/recv round {round} at {v}"
                        );
                        assert_eq!(settle(comm), OK);
                    }
                    sync(&r);
                    assert_eq!(y, [peer as u8 + 1; 8]);
                    let rc = (nccl.ncclCommFinalize)(comm);
                    assert_eq!(rc, if forced_blocking { OK } else { IN_PROGRESS });
                    assert_eq!(settle(comm), OK);
                    assert_eq!((nccl.ncclCommFinalize)(comm), INVALID_ARGUMENT);
                    assert_eq!((nccl.ncclCommDestroy)(comm), OK);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn non_blocking_contract_by_release() {
    for v in ["21903", "22203", "22304", "22803", "23200"] {
        in_child("nonblocking", &[("NCCL_SMOKE_SIM_NCCL_VERSION", v)]);
    }
    in_child(
        "nonblocking",
        &[
            ("NCCL_SMOKE_SIM_NCCL_VERSION", "22803"),
            ("NCCL_COMM_BLOCKING", "1"),
        ],
    );
}

/// An ncclConfig_t as NCCL_CONFIG_INITIALIZER makes it, with `blocking` set.
fn config(blocking: bool) -> Vec<u8> {
    let mut c = vec![0u8; 128];
    c[0..8].copy_from_slice(&128usize.to_le_bytes());
    c[8..12].copy_from_slice(&0xcafe_beefu32.to_le_bytes());
    c[12..16].copy_from_slice(&22803u32.to_le_bytes());
    for f in (16..128).step_by(4) {
        c[f..f + 4].copy_from_slice(&i32::MIN.to_le_bytes());
    }
    c[16..20].copy_from_slice(&i32::from(blocking).to_le_bytes());
    c
}

#[test]
fn abort_ends_an_init_that_waits_for_a_missing_rank() {
    let done = watchdog("abort_during_init", 60);
    let id = unique_id();
    let _stream = bind_device(0);
    let nccl = &libs().nccl;
    let mut cfg = config(false);
    let mut comm = std::ptr::null_mut();
    // SAFETY: rank 0 of 2; rank 1 never comes.
    let rc = unsafe { (nccl.ncclCommInitRankConfig)(&mut comm, 2, id, 0, cfg.as_mut_ptr().cast()) };
    assert_eq!(rc, IN_PROGRESS);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(async_error(comm), IN_PROGRESS);
    let t = Instant::now();
    // SAFETY: the communicator, consumed here.
    assert_eq!(unsafe { (nccl.ncclCommAbort)(comm) }, OK);
    assert!(t.elapsed() < Duration::from_secs(5));
    let mut e = 0;
    // SAFETY: a handle that is gone: refused, not followed.
    assert_eq!(
        unsafe { (nccl.ncclCommGetAsyncError)(comm, &mut e) },
        INVALID_ARGUMENT
    );

    // A blocking init aborted from another thread returns too.
    let id = unique_id();
    let slot = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let s2 = slot.clone();
    let t = std::thread::spawn(move || {
        let _stream = bind_device(1);
        let mut comm: CommH = std::ptr::null_mut();
        let p: *mut CommH = &mut comm;
        s2.store(p as usize, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: rank 1 of 2, blocking; rank 0 never comes.
        unsafe { (libs().nccl.ncclCommInitRank)(p, 2, id, 1) }
    });
    // NCCL writes the handle before init completes; wait for it, then abort.
    let handle = loop {
        let p = slot.load(std::sync::atomic::Ordering::SeqCst);
        if p != 0 {
            // SAFETY: the other thread's variable, written by the library.
            let h = unsafe { std::ptr::read_volatile(p as *const CommH) };
            if !h.is_null() {
                break h;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // SAFETY: the communicator the library handed out.
    assert_eq!(unsafe { (nccl.ncclCommAbort)(handle) }, OK);
    assert_ne!(t.join().unwrap(), OK);
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

// ---------------------------------------------------------------------------------------------
// Child-process scenarios

const CHILD_ENV: &str = "SIM_NCCL_E2E_CHILD";

/// Runs scenario `name` in a child process with `env`; returns its combined output.
fn in_child(name: &str, env: &[(&str, &str)]) -> String {
    libs(); // builds the libraries first, once
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, name);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(_st) = child.try_wait().unwrap() {
            break;
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child {name} failed:\n{text}");
    text
}

/// The entry point of child processes; does nothing in a normal run.
#[test]
fn child() {
    let Ok(name) = std::env::var(CHILD_ENV) else {
        return;
    };
    match name.as_str() {
        "verify" => child_verify(),
        "run_error" => child_run_error(),
        "run_hang" => child_run_hang(),
        "import" => child_import(),
        "proxy" => child_proxy(),
        "bad_spec" => child_bad_spec(),
        "no_interface" => child_no_interface(),
        "logs" => child_logs(),
        "mismatch" => child_mismatch(),
        "nonblocking" => child_nonblocking(),
        other => panic!("no scenario {other}"),
    }
}

/// Two ranks, each all-reducing `ops` int32 buffers of 9 elements (value rank + 1); returns
/// per rank the results and the final async state.
fn two_rank_all_reduces(ops: usize) -> Vec<(Vec<Vec<i32>>, u32)> {
    let done = watchdog("two_rank_all_reduces", 60);
    let id = unique_id();
    let out: Vec<_> = (0..2)
        .map(|rank| {
            std::thread::spawn(move || {
                let nccl = &libs().nccl;
                let Rank { comm, stream, .. } = join(rank, 2, id);
                let r = Rank {
                    rank,
                    n: 2,
                    comm,
                    stream,
                };
                let send: Vec<u8> = (0..9)
                    .flat_map(|_| (rank as i32 + 1).to_le_bytes())
                    .collect();
                let mut recvs: Vec<Vec<u8>> = (0..ops).map(|_| vec![0u8; 36]).collect();
                for recv in recvs.iter_mut() {
                    // SAFETY: 9 int32 each; an error state makes later calls return it.
                    let rc = unsafe {
                        (nccl.ncclAllReduce)(ptr(&send), ptr_mut(recv), 9, 2, 0, comm, stream)
                    };
                    assert!(rc == OK || rc == SYSTEM || rc == REMOTE, "rc {rc}");
                }
                sync(&r);
                let state = async_error(comm);
                // SAFETY: the communicator, consumed.
                unsafe { (nccl.ncclCommAbort)(comm) };
                let vals = recvs
                    .iter()
                    .map(|b| {
                        b.chunks(4)
                            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                            .collect()
                    })
                    .collect();
                (vals, state)
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    out
}

fn child_verify() {
    let res = two_rank_all_reduces(3);
    // Rank 1 spoils the middle element of what it sends from its second operation on; rank
    // 0 receives it, rank 1's own result is right.
    for (op, vals) in res[0].0.iter().enumerate() {
        let want: Vec<i32> = (0..9)
            .map(|i| {
                if op >= 1 && i == 4 {
                    1 + (2 ^ 0x5a5a_5a5a)
                } else {
                    3
                }
            })
            .collect();
        assert_eq!(vals, &want, "rank 0 op {op}");
    }
    for vals in &res[1].0 {
        assert_eq!(vals, &vec![3; 9]);
    }
    assert_eq!((res[0].1, res[1].1), (OK, OK));
}

fn child_run_error() {
    let res = two_rank_all_reduces(4);
    // Operation 1 fails on rank 0 (its link drops): the first result is whole, rank 0 holds
    // a system error, rank 1 sees the connection close.
    assert_eq!(res[0].0[0], vec![3; 9]);
    assert_eq!(res[1].0[0], vec![3; 9]);
    assert_eq!(res[0].1, SYSTEM);
    assert_eq!(res[1].1, REMOTE);
}

fn child_run_hang() {
    let done = watchdog("run_hang", 60);
    let id = unique_id();
    let both = Arc::new(Barrier::new(2));
    let hs: Vec<_> = (0..2)
        .map(|rank| {
            let both = both.clone();
            std::thread::spawn(move || {
                let nccl = &libs().nccl;
                let cu = &libs().cu;
                let Rank { comm, stream, .. } = join(rank, 2, id);
                let x = [1u8; 4];
                let mut y = [0u8; 4];
                // SAFETY: 4 uint8; operation 0 hangs on rank 1 until it is aborted.
                unsafe {
                    assert_eq!(
                        (nccl.ncclAllReduce)(ptr(&x), ptr_mut(&mut y), 4, 1, 0, comm, stream),
                        OK
                    );
                    std::thread::sleep(Duration::from_millis(300));
                    assert_eq!(
                        (cu.cuStreamQuery)(stream),
                        600,
                        "rank {rank}: the stream should still be busy"
                    );
                    // Neither aborts before both have looked.
                    both.wait();
                    assert_eq!((nccl.ncclCommAbort)(comm), OK);
                    assert_eq!((cu.cuStreamSynchronize)(stream), 0);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

fn child_import() {
    let done = watchdog("import", 60);
    let id = unique_id();
    let hs: Vec<_> = (0..2)
        .map(|rank| {
            std::thread::spawn(move || {
                let nccl = &libs().nccl;
                let Rank { comm, stream, .. } = join(rank, 2, id);
                let x = [1u8; 4];
                let mut y = [0u8; 4];
                // SAFETY: 4 uint8.
                let rc = unsafe {
                    (nccl.ncclAllReduce)(ptr(&x), ptr_mut(&mut y), 4, 1, 0, comm, stream)
                };
                if rank == 1 {
                    assert_eq!(rc, UNHANDLED_CUDA);
                    assert_eq!(last_error(), "Cuda failure 101 'invalid device ordinal'");
                    // SAFETY: the communicator, consumed: rank 0's peer goes away.
                    unsafe { (nccl.ncclCommAbort)(comm) };
                    return;
                }
                assert_eq!(rc, OK);
                // SAFETY: the rank's stream.
                unsafe { (libs().cu.cuStreamSynchronize)(stream) };
                assert_eq!(async_error(comm), REMOTE);
                // SAFETY: consumed.
                unsafe { (nccl.ncclCommAbort)(comm) };
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

fn child_proxy() {
    let codes = with_ranks(2, |r| {
        let nccl = &libs().nccl;
        let x = [0u8; 8];
        let mut y = [0u8; 8];
        let peer = (1 - r.rank) as c_int;
        // SAFETY: 8 bytes each; the first send/recv group fails at proxy connect on rank 0,
        // so rank 0 queues nothing and rank 1 must not wait for it: rank 1 groups nothing.
        unsafe {
            let x8 = [7u8; 8];
            let mut all = [0u8; 8];
            assert_eq!(
                (nccl.ncclAllReduce)(ptr(&x8), ptr_mut(&mut all), 8, 1, 0, r.comm, r.stream),
                OK
            );
            sync(&r);
            assert_eq!(all, [14u8; 8]);
            if r.rank == 0 {
                assert_eq!((nccl.ncclGroupStart)(), OK);
                assert_eq!((nccl.ncclSend)(ptr(&x), 8, 1, peer, r.comm, r.stream), OK);
                assert_eq!(
                    (nccl.ncclRecv)(ptr_mut(&mut y), 8, 1, peer, r.comm, r.stream),
                    OK
                );
                let rc = (nccl.ncclGroupEnd)();
                (rc, last_error())
            } else {
                (OK, String::new())
            }
        }
    });
    assert_eq!(codes[0].0, INTERNAL);
    assert_eq!(
        codes[0].1,
        "[Proxy Service 0] Failed to execute operation Close from rank 0, retcode 3"
    );
}

fn child_bad_spec() {
    let mut id = UniqueId([0; 128]);
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { (libs().nccl.ncclGetUniqueId)(&mut id) },
        INVALID_USAGE
    );
    assert!(last_error().contains("'imprt'"), "{}", last_error());
}

fn child_no_interface() {
    let mut id = UniqueId([0; 128]);
    let want = if std::env::var("NCCL_SMOKE_SIM_NCCL_VERSION").as_deref() == Ok("21903") {
        INTERNAL
    } else {
        INVALID_USAGE
    };
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { (libs().nccl.ncclGetUniqueId)(&mut id) }, want);
    assert_eq!(last_error(), "Bootstrap : no socket interface found");
}

fn child_logs() {
    with_ranks(2, |r| {
        let nccl = &libs().nccl;
        let x = [1u8; 4];
        let mut y = [0u8; 4];
        // SAFETY: 4 uint8.
        unsafe { (nccl.ncclAllReduce)(ptr(&x), ptr_mut(&mut y), 4, 1, 0, r.comm, r.stream) };
    });
}

fn child_mismatch() {
    let done = watchdog("mismatch", 60);
    let id = unique_id();
    let handles: Vec<_> = [(0, 2), (1, 3)]
        .into_iter()
        .map(|(rank, n)| {
            std::thread::spawn(move || {
                let _s = bind_device(rank);
                let mut comm = std::ptr::null_mut();
                // SAFETY: valid out-pointer.
                let rc = unsafe { (libs().nccl.ncclCommInitRank)(&mut comm, n, id, rank as c_int) };
                (rc, comm.is_null())
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), (INVALID_USAGE, true));
    }
    assert!(
        last_error().contains("Bootstrap Root : mismatch in info from procs"),
        "{}",
        last_error()
    );
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn mismatched_rank_counts_are_refused() {
    in_child("mismatch", &[]);
}

#[test]
fn verify_corrupts_what_the_faulty_rank_sends() {
    in_child("verify", &[("NCCL_SMOKE_SIM_FAULT", "verify@1:corrupt")]);
}

#[test]
fn run_error_fails_the_rank_and_its_peer_sees_the_link_drop() {
    let out = in_child(
        "run_error",
        &[
            ("NCCL_SMOKE_SIM_FAULT", "run@0:error"),
            ("NCCL_SMOKE_SIM_RUN_FAULT_OP", "1"),
            ("NCCL_DEBUG", "WARN"),
        ],
    );
    assert!(
        out.contains(" NCCL WARN socketProgressOpt: Call to send to "),
        "{out}"
    );
    assert!(out.contains("failed : Connection timed out"), "{out}");
    assert!(
        out.contains(" NCCL WARN socketProgress: Connection closed by remote peer "),
        "{out}"
    );
}

#[test]
fn run_hang_holds_the_stream_until_abort() {
    in_child(
        "run_hang",
        &[
            ("NCCL_SMOKE_SIM_FAULT", "run@1:hang"),
            ("NCCL_SMOKE_SIM_RUN_FAULT_OP", "0"),
        ],
    );
}

#[test]
fn import_fails_the_first_operation_with_a_local_peer() {
    let out = in_child(
        "import",
        &[
            ("NCCL_SMOKE_SIM_FAULT", "import@1:error"),
            ("NCCL_DEBUG", "WARN"),
        ],
    );
    assert!(
        out.contains(" transport/p2p.cc:275 NCCL WARN Cuda failure 101 'invalid device ordinal'"),
        "{out}"
    );
}

#[test]
fn proxy_fails_the_first_send_recv_group() {
    let out = in_child(
        "proxy",
        &[
            ("NCCL_SMOKE_SIM_FAULT", "proxy@0:error"),
            ("NCCL_DEBUG", "WARN"),
        ],
    );
    assert!(
        out.contains("NCCL WARN [Service thread] Accept failed Resource temporarily unavailable"),
        "{out}"
    );
    assert!(
        out.contains(
            "NCCL WARN [Service thread] Could not receive type from localRank 0, res=3, closed=0"
        ),
        "{out}"
    );
}

#[test]
fn a_bad_fault_spec_is_invalid_usage() {
    in_child("bad_spec", &[("NCCL_SMOKE_SIM_FAULT", "imprt@1")]);
}

#[test]
fn no_interface_depends_on_the_release() {
    in_child("no_interface", &[("NCCL_SOCKET_IFNAME", "=no-such-if0")]);
    in_child(
        "no_interface",
        &[
            ("NCCL_SOCKET_IFNAME", "=no-such-if0"),
            ("NCCL_SMOKE_SIM_NCCL_VERSION", "21903"),
        ],
    );
}

#[test]
fn logs_go_to_the_debug_file_in_nccls_shape() {
    let dir = std::env::temp_dir().join(format!("sim-nccl-e2e-logs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pattern = dir.join("nccl.%h.%p.log");
    in_child(
        "logs",
        &[
            ("NCCL_DEBUG", "INFO"),
            ("NCCL_DEBUG_SUBSYS", "INIT,COLL,BOOTSTRAP"),
            ("NCCL_DEBUG_FILE", pattern.to_str().unwrap()),
        ],
    );
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1);
    let name = files[0].file_name().to_string_lossy().into_owned();
    assert!(
        name.starts_with("nccl.") && name.ends_with(".log"),
        "{name}"
    );
    let text = std::fs::read_to_string(files[0].path()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    for want in [
        "] NCCL INFO NCCL version 2.28.3+sim",
        "] NCCL INFO Bootstrap: Using ",
        "] NCCL INFO ncclCommInitRank comm 0x",
        " - Init START",
        " - Init COMPLETE",
        "] NCCL INFO Channel 00/02 : 0 1",
        "] NCCL INFO Connected all rings, use ring PXN 0 GDR 0",
        "] NCCL INFO AllReduce: opCount 0 sendbuff 0x",
        " - Destroy COMPLETE",
    ] {
        assert!(text.contains(want), "no '{want}' in:\n{text}");
    }
    let line = text.lines().find(|l| l.contains("Init COMPLETE")).unwrap();
    let (prefix, _) = line.split_once(" NCCL INFO ").unwrap();
    let mut words = prefix.split(' ');
    let who: Vec<&str> = words.next().unwrap().split(':').collect();
    assert_eq!(who.len(), 3, "{line}");
    assert_eq!(
        who[1],
        name.split('.').nth(2).unwrap(),
        "pid in the line and the file name"
    );
    assert!(words.next().unwrap().starts_with('['), "{line}");
}

// ---------------------------------------------------------------------------------------------
// ncclCommSplit

const NOCOLOR: c_int = -1;

/// Per parent rank: (color, key). Color 7 gets parent ranks 0, 2, 4 ordered by key then parent
/// rank (2, 4, 0); color 3 gets parent rank 1 alone; parent rank 3 sits out.
const SPLIT: [(c_int, c_int); 5] = [(7, 5), (3, 0), (7, 2), (NOCOLOR, 0), (7, 2)];

/// What a rank found in its child: (child rank, child size, all-reduce of parent rank + 1).
type ChildView = Option<(c_int, c_int, Vec<i32>)>;

/// Checks a child: its rank and size, and an all-reduce of (parent rank + 1) over it.
fn use_child(child: CommH, parent_rank: usize, stream: Stream) -> ChildView {
    if child.is_null() {
        return None;
    }
    let nccl = &libs().nccl;
    let (mut rank, mut n) = (-1, -1);
    let x = [parent_rank as i32 + 1; 6];
    let mut y = [0i32; 6];
    // SAFETY: a live communicator, out-pointers and buffers of 6 int32.
    unsafe {
        assert_eq!((nccl.ncclCommUserRank)(child, &mut rank), OK);
        assert_eq!((nccl.ncclCommCount)(child, &mut n), OK);
        let rc = (nccl.ncclAllReduce)(
            x.as_ptr().cast(),
            y.as_mut_ptr().cast(),
            6,
            2,
            0,
            child,
            stream,
        );
        assert!(rc == OK || rc == IN_PROGRESS, "{rc}: {}", last_error());
        assert_eq!(settle(child), OK);
        assert_eq!((libs().cu.cuStreamSynchronize)(stream), 0);
        assert_eq!((nccl.ncclCommDestroy)(child), OK);
    }
    Some((rank, n, y.to_vec()))
}

fn check_split(views: &[ChildView]) {
    // Color 7: parent ranks 2, 4, 0 are child ranks 0, 1, 2; sum of (parent rank + 1) = 9.
    assert_eq!(views[2], Some((0, 3, vec![9; 6])));
    assert_eq!(views[4], Some((1, 3, vec![9; 6])));
    assert_eq!(views[0], Some((2, 3, vec![9; 6])));
    assert_eq!(views[1], Some((0, 1, vec![2; 6])));
    assert_eq!(views[3], None);
}

#[test]
fn split_groups_by_color_and_orders_by_key() {
    let views = with_ranks(5, |r| {
        let nccl = &libs().nccl;
        let (color, key) = SPLIT[r.rank];
        let mut child: CommH = 8 as CommH; // NCCL clears it first
        // SAFETY: a live parent, an out-pointer; NULL config inherits the parent's.
        let rc =
            unsafe { (nccl.ncclCommSplit)(r.comm, color, key, &mut child, std::ptr::null_mut()) };
        assert_eq!(rc, OK, "{}", last_error());
        use_child(child, r.rank, r.stream)
    });
    check_split(&views);
}

#[test]
fn split_of_a_non_blocking_parent_is_in_progress_until_the_parent_says() {
    let done = watchdog("split non-blocking", 60);
    let id = unique_id();
    let handles: Vec<_> = (0..5)
        .map(|rank| {
            std::thread::spawn(move || {
                let stream = bind_device(rank);
                let nccl = &libs().nccl;
                let mut cfg = config(false);
                let mut parent = std::ptr::null_mut();
                // SAFETY: a config shaped like ncclConfig_t and out-pointers; `child` outlives
                // the split job (the parent settles before it goes).
                unsafe {
                    let rc = (nccl.ncclCommInitRankConfig)(
                        &mut parent,
                        5,
                        id,
                        rank as c_int,
                        cfg.as_mut_ptr().cast(),
                    );
                    assert_eq!(rc, IN_PROGRESS);
                    assert_eq!(settle(parent), OK, "{}", last_error());
                    let (color, key) = SPLIT[rank];
                    let mut child: CommH = std::ptr::null_mut();
                    let rc =
                        (nccl.ncclCommSplit)(parent, color, key, &mut child, std::ptr::null_mut());
                    assert_eq!(rc, IN_PROGRESS, "{}", last_error());
                    // The parent is busy with the job: a second split is refused.
                    let mut other: CommH = std::ptr::null_mut();
                    if settle_now(parent) == IN_PROGRESS {
                        assert_eq!(
                            (nccl.ncclCommSplit)(
                                parent,
                                color,
                                key,
                                &mut other,
                                std::ptr::null_mut()
                            ),
                            INVALID_ARGUMENT
                        );
                    }
                    assert_eq!(settle(parent), OK, "{}", last_error());
                    let child = std::ptr::read_volatile(&child);
                    // The child inherits non-blocking: its all-reduce may be in progress.
                    let view = use_child(child, rank, stream);
                    assert_eq!((nccl.ncclCommAbort)(parent), OK);
                    view
                }
            })
        })
        .collect();
    let views: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    check_split(&views);
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The state now, without waiting.
fn settle_now(comm: CommH) -> u32 {
    async_error(comm)
}

#[test]
fn abort_ends_a_split_that_waits_for_a_rank_that_never_splits() {
    let done = watchdog("split abort", 60);
    let id = unique_id();
    let handles: Vec<_> = (0..2)
        .map(|rank| {
            std::thread::spawn(move || {
                let _stream = bind_device(rank);
                let nccl = &libs().nccl;
                let mut cfg = config(false);
                let mut parent = std::ptr::null_mut();
                // SAFETY: as above; the abort waits for the split job before `child` goes.
                unsafe {
                    let rc = (nccl.ncclCommInitRankConfig)(
                        &mut parent,
                        2,
                        id,
                        rank as c_int,
                        cfg.as_mut_ptr().cast(),
                    );
                    assert_eq!(rc, IN_PROGRESS);
                    assert_eq!(settle(parent), OK, "{}", last_error());
                    if rank == 0 {
                        let mut child: CommH = std::ptr::null_mut();
                        let rc =
                            (nccl.ncclCommSplit)(parent, 0, 0, &mut child, std::ptr::null_mut());
                        assert_eq!(rc, IN_PROGRESS);
                        std::thread::sleep(Duration::from_millis(300));
                        assert_eq!(async_error(parent), IN_PROGRESS, "rank 1 never joins");
                        let t = Instant::now();
                        assert_eq!((nccl.ncclCommAbort)(parent), OK);
                        assert!(t.elapsed() < Duration::from_secs(5));
                        assert!(std::ptr::read_volatile(&child).is_null());
                    } else {
                        std::thread::sleep(Duration::from_millis(600));
                        assert_eq!((nccl.ncclCommAbort)(parent), OK);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}
