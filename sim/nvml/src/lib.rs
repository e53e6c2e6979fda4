//! CPU stand-in for NVML (`libnvidia-ml.so.1`): the calls the real libnccl makes at init (about
//! 30: FACTS.md, "The real libnccl on a CPU machine"; names as the 2.19.3 and 2.32.3 wheels ask
//! for them). Devices are the simulated CUDA driver's: the same count (`NCCL_SMOKE_SIM_GPUS`),
//! UUIDs and PCI bus ids, computed by the very same code (`sim/cuda/src/config.rs`). As real NVML,
//! it ignores `CUDA_VISIBLE_DEVICES`: indices are physical devices.
//!
//! Signatures and struct layouts follow NVIDIA's NVML API reference (`nvml.h`). There are no
//! NVLinks, no fabric and no confidential computing; what a real GPU would measure is a guess and
//! marked so.
// This crate implements the NVML C ABI: unsafe is its job (the workspace denies it elsewhere).
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

#[path = "../../cuda/src/config.rs"]
#[allow(dead_code)]
mod config;

use std::ffi::{CStr, c_char, c_int, c_uint, c_ulonglong, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// Marker the harness looks for to recognise this library.
const MARKER: &str = concat!(
    "nccl-smoke simulated NVML ",
    env!("CARGO_PKG_VERSION"),
    "\0"
);

/// `const char *ncclSmokeSimNvml(void)`: identifies the simulated NVML.
#[unsafe(no_mangle)]
pub extern "C" fn ncclSmokeSimNvml() -> *const c_char {
    MARKER.as_ptr().cast()
}

type NvmlReturn = c_int;
const NVML_SUCCESS: NvmlReturn = 0;
const NVML_ERROR_UNINITIALIZED: NvmlReturn = 1;
const NVML_ERROR_INVALID_ARGUMENT: NvmlReturn = 2;
const NVML_ERROR_NOT_SUPPORTED: NvmlReturn = 3;
const NVML_ERROR_NOT_FOUND: NvmlReturn = 6;
const NVML_ERROR_INSUFFICIENT_SIZE: NvmlReturn = 7;
const NVML_ERROR_DRIVER_NOT_LOADED: NvmlReturn = 9;
const NVML_ERROR_UNKNOWN: NvmlReturn = 999;

/// `nvmlDevice_t`: an opaque pointer; here `HANDLE_BASE + index` (never dereferenced).
type NvmlDevice = *mut c_void;
const HANDLE_BASE: usize = 0x4e56_4d4c_0000;

/// The host's devices, as the CUDA stand-in derives them.
struct Devices {
    uuids: Vec<[u8; 16]>,
}

fn devices() -> Result<&'static Devices, NvmlReturn> {
    static DEVICES: OnceLock<Result<Devices, NvmlReturn>> = OnceLock::new();
    DEVICES
        .get_or_init(|| {
            let n = config::parse_gpus(config::var(config::GPUS_ENV).as_deref()).map_err(|e| {
                eprintln!("nccl-smoke simulated NVML: {e}");
                NVML_ERROR_DRIVER_NOT_LOADED
            })?;
            let host = config::hostname();
            Ok(Devices {
                uuids: (0..n).map(|i| config::uuid_for(&host, i)).collect(),
            })
        })
        .as_ref()
        .map_err(|e| *e)
}

/// Balance of init and shutdown calls (NVML counts them).
static INITS: AtomicU32 = AtomicU32::new(0);

fn ready() -> Result<&'static Devices, NvmlReturn> {
    if INITS.load(Ordering::Acquire) == 0 {
        return Err(NVML_ERROR_UNINITIALIZED);
    }
    devices()
}

fn index_of(dev: NvmlDevice) -> Result<u32, NvmlReturn> {
    let d = ready()?;
    let i = (dev as usize)
        .checked_sub(HANDLE_BASE)
        .ok_or(NVML_ERROR_INVALID_ARGUMENT)?;
    if i < d.uuids.len() {
        Ok(i as u32)
    } else {
        Err(NVML_ERROR_INVALID_ARGUMENT)
    }
}

fn handle(i: u32) -> NvmlDevice {
    (HANDLE_BASE + i as usize) as NvmlDevice
}

fn run(body: impl FnOnce() -> Result<(), NvmlReturn>) -> NvmlReturn {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(())) => NVML_SUCCESS,
        Ok(Err(e)) => e,
        Err(_) => NVML_ERROR_UNKNOWN,
    }
}

/// Writes through an out-pointer, or `NVML_ERROR_INVALID_ARGUMENT` when it is null.
///
/// # Safety
/// `p` must be null or valid for a write of `T`.
unsafe fn put<T>(p: *mut T, v: T) -> Result<(), NvmlReturn> {
    if p.is_null() {
        return Err(NVML_ERROR_INVALID_ARGUMENT);
    }
    // SAFETY: non-null; the caller vouches for validity.
    unsafe { p.write(v) };
    Ok(())
}

/// Copies `s` NUL-terminated into a caller buffer of `len` bytes; too small is
/// `NVML_ERROR_INSUFFICIENT_SIZE`, as NVML does.
///
/// # Safety
/// `buf` must be valid for `len` bytes.
unsafe fn put_str(buf: *mut c_char, len: c_uint, s: &str) -> Result<(), NvmlReturn> {
    if buf.is_null() {
        return Err(NVML_ERROR_INVALID_ARGUMENT);
    }
    if s.len() + 1 > len as usize {
        return Err(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    // SAFETY: `s.len() + 1 <= len` bytes, as the caller vouches.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, s.len());
        buf.add(s.len()).write(0);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Init, shutdown, errors, system

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> NvmlReturn {
    run(|| {
        devices()?;
        INITS.fetch_add(1, Ordering::AcqRel);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> NvmlReturn {
    nvmlInit_v2()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> NvmlReturn {
    nvmlInit_v2()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> NvmlReturn {
    run(|| {
        INITS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .map(|_| ())
            .map_err(|_| NVML_ERROR_UNINITIALIZED)
    })
}

/// `const char *nvmlErrorString(nvmlReturn_t)`: NVML's texts for the codes returned here.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: NvmlReturn) -> *const c_char {
    let s: &CStr = match result {
        NVML_SUCCESS => c"Success",
        NVML_ERROR_UNINITIALIZED => c"Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT => c"Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED => c"Not Supported",
        NVML_ERROR_NOT_FOUND => c"Not Found",
        NVML_ERROR_INSUFFICIENT_SIZE => c"Insufficient Size",
        NVML_ERROR_DRIVER_NOT_LOADED => c"Driver Not Loaded",
        _ => c"Unknown Error",
    };
    s.as_ptr()
}

/// A driver version of the 570 branch (a guess; nothing here depends on it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    len: c_uint,
) -> NvmlReturn {
    // SAFETY: the caller's buffer of `len` bytes.
    run(|| unsafe { put_str(version, len, "570.86.15") })
}

/// `nvmlSystemGetCudaDriverVersion(int *)`: as the CUDA stand-in's default (12080).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> NvmlReturn {
    run(|| {
        let v = config::parse_driver_version(config::var(config::VERSION_ENV).as_deref())
            .unwrap_or(config::DEFAULT_DRIVER_VERSION);
        // SAFETY: null checked by `put`.
        unsafe { put(version, v) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { nvmlSystemGetCudaDriverVersion(version) }
}

/// `nvmlConfComputeSystemState_t`: environment, ccFeature, devToolsMode; all off (0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetConfComputeState(state: *mut [c_uint; 3]) -> NvmlReturn {
    run(|| {
        ready()?;
        // SAFETY: null checked by `put`.
        unsafe { put(state, [0; 3]) }
    })
}

/// `nvmlSystemConfComputeSettings_t` (v1): version, environment, ccFeature, devToolsMode,
/// multiGpuMode; all off. The caller sets the version.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetConfComputeSettings(
    settings: *mut [c_uint; 5],
) -> NvmlReturn {
    run(|| {
        ready()?;
        if settings.is_null() {
            return Err(NVML_ERROR_INVALID_ARGUMENT);
        }
        // SAFETY: checked non-null; the version field is kept.
        unsafe {
            let version = (*settings)[0];
            settings.write([version, 0, 0, 0, 0]);
        }
        Ok(())
    })
}

mod devices;
pub use devices::*;

#[cfg(test)]
mod tests;
