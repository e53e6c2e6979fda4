//! Loading the driver library: the symbols nccl-smoke calls, the check that cudarc uses the same
//! library, `cuInit`, and the driver's version.

use super::error::{CudaError, Result, check};
use crate::ffi::os;
use cudarc::driver::{result, sys};

/// The soname the dynamic linker resolves for the CUDA driver.
pub const DRIVER_SONAME: &str = "libcuda.so.1";

/// Every driver symbol nccl-smoke calls, checked at load so that cudarc never meets a missing one.
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetUuid",
    "cuDeviceGetPCIBusId",
    "cuDeviceTotalMem_v2",
    "cuDeviceGetAttribute",
    "cuMemGetInfo_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamQuery",
    "cuStreamSynchronize",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventElapsedTime",
    "cuEventDestroy_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemsetD8Async",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuLaunchKernel",
];

/// The cuMem (virtual memory management) calls of the shareable-buffer probe; a driver without
/// them has the probe skipped, not failed.
const VMM_SYMBOLS: &[&str] = &[
    "cuMemGetAllocationGranularity",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemExportToShareableHandle",
    "cuMemImportFromShareableHandle",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemSetAccess",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
];

/// The loaded and initialised driver.
#[derive(Debug)]
pub struct Driver {
    /// Absolute path of the library that was loaded.
    pub path: String,
    /// `cuDriverGetVersion`, e.g. 12080 for CUDA 12.8.
    pub version: i32,
    /// The library's marker when it is nccl-smoke's simulation, else `None`.
    pub simulated: Option<String>,
    /// Whether it has the cuMem calls [`SharedMem`](super::SharedMem) needs.
    pub vmm: bool,
    _lib: os::Library,
}

/// cudarc opens the driver by its own list of names, `libcuda.so` first: a stub driver from a
/// CUDA toolkit, or a second driver, on the library path would take cudarc's calls while
/// nccl-smoke (and NCCL, through the soname) use the one loaded here. Same `cuInit` address, or
/// a failure naming both files.
fn same_driver_as_cudarc(lib: &os::Library, ours: &str) -> Result<()> {
    let mine = lib.address("cuInit");
    // SAFETY: `is_culib_present` found a library, so `culib` returns instead of panicking; the
    // symbol is read as an address and never called here.
    let theirs = unsafe { sys::culib().get::<*mut std::ffi::c_void>(b"cuInit") }
        .ok()
        .map(|s| *s);
    if mine.is_some() && mine == theirs {
        return Ok(());
    }
    Err(CudaError::TwoDrivers {
        ours: ours.to_string(),
        cudarc: theirs
            .and_then(|p| os::file_of(p as usize))
            .unwrap_or_else(|| "a library without cuInit".into()),
    })
}

impl Driver {
    /// Opens the driver (`path`, else [`DRIVER_SONAME`] through the dynamic linker), checks its
    /// symbols and calls `cuInit(0)`.
    pub fn load(path: Option<&str>) -> Result<Driver> {
        let tried = path.unwrap_or(DRIVER_SONAME).to_string();
        let lib = os::Library::open_global(&tried).map_err(|detail| CudaError::NotFound {
            tried: tried.clone(),
            detail,
        })?;
        let resolved = lib.path_of("cuInit").unwrap_or_else(|| tried.clone());
        for symbol in REQUIRED_SYMBOLS {
            if !lib.has(symbol) {
                return Err(CudaError::MissingSymbol {
                    path: resolved,
                    symbol: (*symbol).into(),
                });
            }
        }
        // SAFETY: cudarc's loader panics only when no library or symbol is found; the library
        // is open with RTLD_GLOBAL under its soname and every symbol was checked above.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::NotFound {
                tried,
                detail: "cudarc could not find it by name after it was loaded".into(),
            });
        }
        same_driver_as_cudarc(&lib, &resolved)?;
        let simulated = lib.marker("ncclSmokeSimDriver");
        if simulated.is_some()
            && let Ok(again) = os::Library::open_global(&resolved)
        {
            let _ = SIM_DRIVER.set(again);
        }
        let mut version = 0;
        // SAFETY: valid out-pointer.
        check("cuDriverGetVersion", unsafe {
            sys::cuDriverGetVersion(&mut version)
        })?;
        result::init().map_err(|e| CudaError::call("cuInit", e))?;
        let vmm = VMM_SYMBOLS.iter().all(|s| lib.has(s));
        Ok(Driver {
            path: resolved,
            version,
            simulated,
            vmm,
            _lib: lib,
        })
    }

    pub fn device_count(&self) -> Result<i32> {
        result::device::get_count().map_err(|e| CudaError::call("cuDeviceGetCount", e))
    }
}

/// nccl-smoke's stand-in driver, once one is loaded: asked, when a run fails, which export
/// tables NCCL's CUDA runtime wanted that it lacks. The library is never unloaded
/// (`RTLD_NODELETE`), so its functions stay callable.
static SIM_DRIVER: std::sync::OnceLock<os::Library> = std::sync::OnceLock::new();

/// The export tables NCCL's CUDA runtime asked nccl-smoke's stand-in driver for that it lacks
/// (`{UUID}` or `{UUID} (NAME)`, comma-separated), when that driver is the one loaded and it
/// lacked any; `None` on a real driver.
pub fn sim_driver_lacking() -> Option<String> {
    SIM_DRIVER.get()?.marker("ncclSmokeSimDriverLacking")
}

/// Formats a driver version code as `major.minor` (12080 → "12.8").
pub fn version_string(code: i32) -> String {
    format!("{}.{}", code / 1000, (code % 1000) / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_codes_read_as_major_minor() {
        assert_eq!(version_string(12080), "12.8");
        assert_eq!(version_string(13000), "13.0");
        assert_eq!(version_string(12020), "12.2");
    }
}
