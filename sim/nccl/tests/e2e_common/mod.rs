//! The end-to-end tests' harness: the built libcuda.so (the driver stand-in, opened first with
//! RTLD_GLOBAL, as the harness opens it) and libnccl.so, loaded with dlopen; ranks as threads
//! of the test process, one communicator each, as NCCL allows; the element types and their
//! expected values; and child processes for scenarios that need their own environment (this
//! test binary again, with `SIM_NCCL_E2E_CHILD` naming the scenario).
#![allow(dead_code)]

pub use half::{bf16, f16};
pub use std::ffi::{CStr, c_char, c_int, c_void};
pub use std::path::PathBuf;
pub use std::process::Command;
pub use std::sync::{Arc, OnceLock};
pub use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Loading

pub type Stream = *mut c_void;
pub type CommH = *mut c_void;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId(pub [u8; 128]);

macro_rules! api {
    ($name:ident { $($f:ident : fn($($a:ty),*) -> $r:ty;)* }) => {
        #[allow(non_snake_case, dead_code)]
        pub struct $name { $(pub $f: unsafe extern "C" fn($($a),*) -> $r,)* }
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

pub struct Libs {
    pub cu: Cuda,
    pub nccl: Nccl,
}

// SAFETY: plain function pointers.
unsafe impl Sync for Libs {}

/// `target/<profile>`, where cargo puts the libraries (this binary is in its `deps`).
pub fn out_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// Brings the two libraries up to date: cargo does not build a cdylib-only package's library
/// for its integration tests, nor the driver stand-in (a no-op when both are fresh).
pub fn ensure_built() {
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

pub fn libs() -> &'static Libs {
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

pub fn cstr(p: *const c_char) -> String {
    assert!(!p.is_null());
    // SAFETY: the library's NUL-terminated string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

pub fn last_error() -> String {
    // SAFETY: no arguments of note.
    cstr(unsafe { (libs().nccl.ncclGetLastError)(std::ptr::null_mut()) })
}

// ---------------------------------------------------------------------------------------------
// Ranks as threads

pub const OK: u32 = 0;
pub const UNHANDLED_CUDA: u32 = 1;
pub const SYSTEM: u32 = 2;
pub const INTERNAL: u32 = 3;
pub const INVALID_ARGUMENT: u32 = 4;
pub const INVALID_USAGE: u32 = 5;
pub const REMOTE: u32 = 6;
pub const IN_PROGRESS: u32 = 7;

/// What one rank thread has: its communicator and its stream.
#[derive(Clone, Copy)]
pub struct Rank {
    pub rank: usize,
    pub n: usize,
    pub comm: CommH,
    pub stream: Stream,
}

// SAFETY: handles, used by one thread at a time (or by the library's thread-safe calls).
unsafe impl Send for Rank {}

/// Makes device `rank % 8` current on this thread and gives it a stream.
pub fn bind_device(rank: usize) -> Stream {
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

pub fn unique_id() -> UniqueId {
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

pub fn sync(r: &Rank) {
    // SAFETY: the rank's stream.
    assert_eq!(unsafe { (libs().cu.cuStreamSynchronize)(r.stream) }, 0);
}

pub fn async_error(comm: CommH) -> u32 {
    let mut e = 99;
    // SAFETY: a live communicator and an out-pointer.
    assert_eq!(
        unsafe { (libs().nccl.ncclCommGetAsyncError)(comm, &mut e) },
        OK
    );
    e
}

/// Aborts the process when a scenario runs past `secs` (a deadlock must fail, not hang).
pub fn watchdog(what: &'static str, secs: u64) -> Arc<std::sync::atomic::AtomicBool> {
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
pub fn join(rank: usize, n: usize, id: UniqueId) -> Rank {
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

pub fn with_ranks<T: Send + 'static>(
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

pub const TYPES: [(c_int, &str, usize); 10] = [
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

pub fn signed(dtype: c_int) -> bool {
    matches!(dtype, 0 | 2 | 4 | 6 | 7 | 8 | 9)
}

/// `v` as an element of `dtype` (integers wrap, floats round to nearest).
pub fn encode(dtype: c_int, v: f64) -> Vec<u8> {
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
pub fn value(dtype: c_int, r: usize, i: usize) -> i128 {
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
pub fn expected(dtype: c_int, op: c_int, n: usize, i: usize) -> Vec<u8> {
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

pub fn wrap(dtype: c_int, v: i128) -> i128 {
    match dtype {
        0 => v as i8 as i128,
        1 => v as u8 as i128,
        2 => v as i32 as i128,
        3 => v as u32 as i128,
        4 => v as i64 as i128,
        _ => v as u64 as i128,
    }
}

pub fn ptr(v: &[u8]) -> *const c_void {
    v.as_ptr().cast()
}

pub fn ptr_mut(v: &mut [u8]) -> *mut c_void {
    v.as_mut_ptr().cast()
}

// ---------------------------------------------------------------------------------------------
// Child processes

pub const CHILD_ENV: &str = "SIM_NCCL_E2E_CHILD";

/// Runs scenario `name` in a child process with `env`; returns its combined output.
pub fn in_child(name: &str, env: &[(&str, &str)]) -> String {
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
