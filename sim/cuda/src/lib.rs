//! CPU stand-in for the CUDA driver (`libcuda.so.1`), loaded by nccl-smoke and cudarc through
//! `dlopen` exactly like the real driver. See `sim/README.md` for the contract.
//!
//! Device memory is host memory, streams are in-order queues drained by worker threads, and
//! cuMem allocations are memfds that local processes share as file descriptors.
//!
//! It also hosts the real libnccl's statically linked CUDA runtime (`cuGetProcAddress`,
//! `cuGetExportTable` and the entry points it calls; kernels are recorded, not run): see
//! "Hosting the real libnccl" in `sim/README.md`.
//!
//! Every export has the exact CUDA 12 driver signature; the `# Safety` contract of each is that of
//! the CUDA driver API function of the same name.
// This crate implements the CUDA driver C ABI: unsafe is its job (the workspace denies it elsewhere).
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]

mod codes;
mod config;
mod context;
mod copy;
mod device;
mod error;
mod export;
mod fault;
mod ipc;
mod kernels;
mod memory;
mod module;
mod procaddr;
mod ranges;
mod runtime;
mod stream;
mod trace;
mod vmm;

use std::ffi::c_char;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Marker the harness looks for to recognise this library.
const MARKER: &str = concat!(
    "nccl-smoke simulated CUDA driver ",
    env!("CARGO_PKG_VERSION"),
    "\0"
);

/// `const char *ncclSmokeSimDriver(void)`: identifies the simulated driver.
#[unsafe(no_mangle)]
pub extern "C" fn ncclSmokeSimDriver() -> *const c_char {
    MARKER.as_ptr().cast()
}

/// `const char *ncclSmokeSimDriverLacking(void)`: the export tables the CUDA runtime asked
/// for that this driver lacks (see `export::lacking`), or NULL when none. The string stays
/// valid until the next call.
#[unsafe(no_mangle)]
pub extern "C" fn ncclSmokeSimDriverLacking() -> *const c_char {
    static LAST: std::sync::Mutex<Option<std::ffi::CString>> = std::sync::Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    *last = export::lacking().and_then(|s| std::ffi::CString::new(s).ok());
    last.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())
}

/// Run when the library is loaded, before any entry point can be called: gives the fault
/// module the export table's check of entry-point names (see `fault::know_exports`).
#[used]
#[unsafe(link_section = ".init_array")]
static AT_LOAD: extern "C" fn() = at_load;

extern "C" fn at_load() {
    fault::know_exports(procaddr::exports_family);
}

/// A fresh opaque handle (context, stream, event, allocation): never 0, 1 or 2 (reserved stream
/// handles), never reused, and never dereferenced.
pub(crate) fn next_handle() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0x5eed_0000);
    NEXT.fetch_add(0x10, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    #[test]
    fn marker_names_the_simulation() {
        // SAFETY: static NUL-terminated string.
        let s = unsafe { CStr::from_ptr(super::ncclSmokeSimDriver()) };
        let s = s.to_str().unwrap();
        assert!(s.starts_with("nccl-smoke simulated CUDA driver "), "{s}");
        assert!(s.ends_with(env!("CARGO_PKG_VERSION")));
    }
}
