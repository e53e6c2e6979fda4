//! `cuGetProcAddress` (and `_v2`): how the CUDA runtime linked into libnccl finds every driver
//! entry point (FACTS.md: it asks for about 400 names, 401 with 2.19.3 and 415 with 2.32.3, and
//! tolerates `CUDA_ERROR_NOT_FOUND` for those a driver lacks; only about 60 are called).
//!
//! The runtime asks by base name (`cuMemAlloc`) with the CUDA version it was built against; the
//! driver answers the variant whose signature that version expects (NVIDIA CUDA driver API docs,
//! `cuGetProcAddress`; the per-version typedefs of `cudaTypedefs.h`). Here: the explicit table
//! `VERSIONED` for names whose signature changed, else `<name>_v2` when this driver has it
//! (every `_v2` here is the CUDA 3.2 / 11.x one, same arguments), else `<name>`. The per-thread
//! default stream flag is ignored: this driver has one default stream.

use crate::error::*;
use crate::trace;
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::LazyLock;

/// `CU_GET_PROC_ADDRESS_*` symbol status (cuda.h 12.5).
const STATUS_SUCCESS: c_int = 0;
const STATUS_SYMBOL_NOT_FOUND: c_int = 1;
const STATUS_VERSION_NOT_SUFFICIENT: c_int = 2;

/// Names whose signature changed with a CUDA version: (base name, [(first version, symbol)]),
/// ascending (NVIDIA CUDA driver API docs and cuda.h: `cuStreamGetCaptureInfo` 10.1 / 11.3 /
/// 12.3, `cuCtxCreate` 3.2 / 11.4 / 12.5, `cuStreamGetCtx` 9.2 / 12.5, `cuGetProcAddress` 11.3 /
/// 12.0 (`PFN_cuGetProcAddress_v12000` has `symbolStatus`; cudart 12.9 asks for it at 12000); FACTS.md names the first three as chosen by the version argument).
const VERSIONED: &[(&str, &[(c_int, &str)])] = &[
    (
        "cuStreamGetCaptureInfo",
        &[
            (10010, "cuStreamGetCaptureInfo"),
            (11030, "cuStreamGetCaptureInfo_v2"),
            (12030, "cuStreamGetCaptureInfo_v3"),
        ],
    ),
    (
        "cuCtxCreate",
        &[
            (3020, "cuCtxCreate_v2"),
            (11040, "cuCtxCreate_v3"),
            (12050, "cuCtxCreate_v4"),
        ],
    ),
    (
        "cuStreamGetCtx",
        &[(9020, "cuStreamGetCtx"), (12050, "cuStreamGetCtx_v2")],
    ),
    (
        "cuGetProcAddress",
        &[(11030, "cuGetProcAddress"), (12000, "cuGetProcAddress_v2")],
    ),
];

/// `module::function, …` → `[("function", address), …]`.
macro_rules! entries {
    ($($m:ident::$f:ident),* $(,)?) => {
        &[$((stringify!($f), crate::$m::$f as *const c_void)),*]
    };
}

/// Every entry point this driver exports, by exact symbol name (the test
/// `every_export_is_in_the_table` keeps the list complete).
static ENTRIES: LazyLock<HashMap<&'static str, usize>> = LazyLock::new(|| {
    let list: &[(&str, *const c_void)] = entries![
        context::cuCtxCreate_v2,
        runtime::cuCtxCreate_v3,
        runtime::cuCtxCreate_v4,
        context::cuCtxDestroy_v2,
        runtime::cuCtxDisablePeerAccess,
        runtime::cuCtxEnablePeerAccess,
        runtime::cuCtxGetApiVersion,
        runtime::cuCtxGetCacheConfig,
        context::cuCtxGetCurrent,
        context::cuCtxGetDevice,
        runtime::cuCtxGetFlags,
        runtime::cuCtxGetId,
        runtime::cuCtxGetLimit,
        runtime::cuCtxGetSharedMemConfig,
        runtime::cuCtxGetStreamPriorityRange,
        context::cuCtxPopCurrent_v2,
        context::cuCtxPushCurrent_v2,
        runtime::cuCtxResetPersistingL2Cache,
        runtime::cuCtxSetCacheConfig,
        context::cuCtxSetCurrent,
        runtime::cuCtxSetFlags,
        runtime::cuCtxSetLimit,
        stream::cuCtxSynchronize,
        runtime::cuDeviceCanAccessPeer,
        runtime::cuDeviceComputeCapability,
        device::cuDeviceGet,
        device::cuDeviceGetAttribute,
        runtime::cuDeviceGetByPCIBusId,
        device::cuDeviceGetCount,
        runtime::cuDeviceGetDefaultMemPool,
        runtime::cuDeviceGetMemPool,
        device::cuDeviceGetName,
        runtime::cuDeviceGetP2PAttribute,
        device::cuDeviceGetPCIBusId,
        device::cuDeviceGetUuid,
        device::cuDeviceGetUuid_v2,
        runtime::cuDevicePrimaryCtxGetState,
        context::cuDevicePrimaryCtxRelease,
        context::cuDevicePrimaryCtxRelease_v2,
        context::cuDevicePrimaryCtxReset,
        context::cuDevicePrimaryCtxReset_v2,
        context::cuDevicePrimaryCtxRetain,
        runtime::cuDevicePrimaryCtxSetFlags,
        runtime::cuDevicePrimaryCtxSetFlags_v2,
        runtime::cuDeviceSetMemPool,
        device::cuDeviceTotalMem_v2,
        device::cuDriverGetVersion,
        stream::cuEventCreate,
        stream::cuEventDestroy_v2,
        stream::cuEventElapsedTime,
        stream::cuEventElapsedTime_v2,
        stream::cuEventQuery,
        stream::cuEventRecord,
        stream::cuEventRecordWithFlags,
        stream::cuEventSynchronize,
        runtime::cuFlushGPUDirectRDMAWrites,
        module::cuFuncGetAttribute,
        module::cuFuncGetModule,
        module::cuFuncGetName,
        module::cuFuncIsLoaded,
        module::cuFuncLoad,
        module::cuFuncSetAttribute,
        module::cuFuncSetCacheConfig,
        module::cuFuncSetSharedMemConfig,
        error::cuGetErrorName,
        error::cuGetErrorString,
        export::cuGetExportTable,
        procaddr::cuGetProcAddress,
        procaddr::cuGetProcAddress_v2,
        device::cuInit,
        ipc::cuIpcCloseMemHandle,
        ipc::cuIpcGetMemHandle,
        ipc::cuIpcOpenMemHandle,
        ipc::cuIpcOpenMemHandle_v2,
        module::cuKernelGetAttribute,
        module::cuKernelGetFunction,
        module::cuKernelGetName,
        module::cuKernelSetAttribute,
        module::cuKernelSetCacheConfig,
        module::cuLaunchCooperativeKernel,
        stream::cuLaunchHostFunc,
        module::cuLaunchKernel,
        module::cuLaunchKernelEx,
        module::cuLibraryGetGlobal,
        module::cuLibraryGetKernel,
        module::cuLibraryGetModule,
        module::cuLibraryLoadData,
        module::cuLibraryUnload,
        vmm::cuMemAddressFree,
        vmm::cuMemAddressReserve,
        runtime::cuMemAllocAsync,
        runtime::cuMemAllocFromPoolAsync,
        memory::cuMemAllocHost_v2,
        memory::cuMemAlloc_v2,
        vmm::cuMemCreate,
        vmm::cuMemExportToShareableHandle,
        runtime::cuMemFreeAsync,
        memory::cuMemFreeHost,
        memory::cuMemFree_v2,
        vmm::cuMemGetAccess,
        ranges::cuMemGetAddressRange_v2,
        vmm::cuMemGetAllocationGranularity,
        ranges::cuMemGetHandleForAddressRange,
        vmm::cuMemGetAllocationPropertiesFromHandle,
        memory::cuMemGetInfo_v2,
        memory::cuMemHostAlloc,
        memory::cuMemHostGetDevicePointer_v2,
        ranges::cuMemHostGetFlags,
        memory::cuMemHostRegister_v2,
        memory::cuMemHostUnregister,
        vmm::cuMemImportFromShareableHandle,
        vmm::cuMemMap,
        runtime::cuMemPoolCreate,
        runtime::cuMemPoolDestroy,
        runtime::cuMemPoolGetAccess,
        runtime::cuMemPoolGetAttribute,
        runtime::cuMemPoolSetAccess,
        runtime::cuMemPoolSetAttribute,
        runtime::cuMemPoolTrimTo,
        vmm::cuMemRelease,
        vmm::cuMemRetainAllocationHandle,
        vmm::cuMemSetAccess,
        vmm::cuMemUnmap,
        copy::cuMemcpy,
        copy::cuMemcpyAsync,
        copy::cuMemcpyDtoDAsync_v2,
        copy::cuMemcpyDtoD_v2,
        copy::cuMemcpyDtoHAsync_v2,
        copy::cuMemcpyDtoH_v2,
        copy::cuMemcpyHtoDAsync_v2,
        copy::cuMemcpyHtoD_v2,
        runtime::cuMemcpyPeer,
        runtime::cuMemcpyPeerAsync,
        runtime::cuMemsetD16Async,
        runtime::cuMemsetD16_v2,
        copy::cuMemsetD32Async,
        copy::cuMemsetD32_v2,
        copy::cuMemsetD8Async,
        copy::cuMemsetD8_v2,
        module::cuModuleGetFunction,
        module::cuModuleGetGlobal_v2,
        module::cuModuleGetLoadingMode,
        module::cuModuleLoadData,
        module::cuModuleLoadDataEx,
        module::cuModuleLoadFatBinary,
        module::cuModuleUnload,
        module::cuOccupancyMaxActiveBlocksPerMultiprocessor,
        module::cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
        runtime::cuPointerGetAttribute,
        runtime::cuPointerGetAttributes,
        runtime::cuPointerSetAttribute,
        runtime::cuProfilerStart,
        runtime::cuProfilerStop,
        runtime::cuStreamAddCallback,
        stream::cuStreamCreate,
        stream::cuStreamCreateWithPriority,
        stream::cuStreamDestroy_v2,
        runtime::cuStreamGetCaptureInfo,
        runtime::cuStreamGetCaptureInfo_v2,
        runtime::cuStreamGetCaptureInfo_v3,
        runtime::cuStreamGetCtx,
        runtime::cuStreamGetCtx_v2,
        runtime::cuStreamGetDevice,
        runtime::cuStreamGetFlags,
        runtime::cuStreamGetId,
        runtime::cuStreamGetPriority,
        runtime::cuStreamIsCapturing,
        stream::cuStreamQuery,
        stream::cuStreamSynchronize,
        stream::cuStreamWaitEvent,
        runtime::cuThreadExchangeStreamCaptureMode,
    ];
    list.iter().map(|(n, f)| (*n, *f as usize)).collect()
});

/// Whether this driver exports an entry point of the family `base` (a name without its `_vN`
/// suffix: `cuIpcOpenMemHandle` covers `cuIpcOpenMemHandle_v2`).
pub fn exports_family(base: &str) -> bool {
    ENTRIES
        .keys()
        .any(|k| crate::fault::family(k) == crate::fault::family(base))
}

/// Whether this driver exports `symbol` (exact name).
#[cfg(test)]
pub fn has(symbol: &str) -> bool {
    ENTRIES.contains_key(symbol)
}

/// The symbol answering a request for `name` from a runtime built for `version`:
/// `Ok(symbol)`, or `Err(status)` (not found, or only in a newer version than asked).
pub fn resolve(name: &str, version: c_int) -> Result<&'static str, c_int> {
    if let Some((_, versions)) = VERSIONED.iter().find(|(n, _)| *n == name) {
        return versions
            .iter()
            .rev()
            .find(|(v, _)| *v <= version)
            .map(|(_, s)| *s)
            .ok_or(STATUS_VERSION_NOT_SUFFICIENT);
    }
    for candidate in [format!("{name}_v2"), name.to_owned()] {
        if let Some((k, _)) = ENTRIES.get_key_value(candidate.as_str()) {
            return Ok(k);
        }
    }
    Err(STATUS_SYMBOL_NOT_FOUND)
}

fn lookup(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CuResult {
    non_null(symbol)?;
    non_null(pfn)?;
    // SAFETY: checked non-null; the caller passes a NUL-terminated name.
    let name = unsafe { CStr::from_ptr(symbol) }.to_string_lossy();
    // SAFETY: checked non-null; cleared first, as the real driver does on failure.
    unsafe { pfn.write(std::ptr::null_mut()) };
    let found = resolve(&name, version)
        .and_then(|s| ENTRIES.get(s).copied().ok_or(STATUS_SYMBOL_NOT_FOUND));
    let st = match found {
        Ok(addr) => {
            trace::verbose(|| {
                format!("cuGetProcAddress {name} (version {version}, flags {flags})")
            });
            // SAFETY: checked non-null.
            unsafe { pfn.write(addr as *mut c_void) };
            STATUS_SUCCESS
        }
        Err(st) => {
            trace::log(|| {
                format!(
                    "cuGetProcAddress {name} (version {version}, flags {flags}): not found (slot {pfn:p})"
                )
            });
            st
        }
    };
    if !status.is_null() {
        // SAFETY: checked non-null.
        unsafe { status.write(st) };
    }
    if st == STATUS_SUCCESS {
        Ok(())
    } else {
        Err(CUDA_ERROR_NOT_FOUND)
    }
}

/// `CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t
/// flags)` (CUDA 11.3 signature).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
) -> CUresult {
    ffi("cuGetProcAddress", || {
        lookup(symbol, pfn, cuda_version, flags, std::ptr::null_mut())
    })
}

/// `CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t
/// flags, CUdriverProcAddressQueryResult *symbolStatus)` (CUDA 12.0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cuda_version: c_int,
    flags: u64,
    symbol_status: *mut c_int,
) -> CUresult {
    ffi("cuGetProcAddress_v2", || {
        lookup(symbol, pfn, cuda_version, flags, symbol_status)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_names_follow_the_version() {
        assert_eq!(
            resolve("cuStreamGetCaptureInfo", 10020),
            Ok("cuStreamGetCaptureInfo")
        );
        assert_eq!(
            resolve("cuStreamGetCaptureInfo", 11030),
            Ok("cuStreamGetCaptureInfo_v2")
        );
        assert_eq!(
            resolve("cuStreamGetCaptureInfo", 12090),
            Ok("cuStreamGetCaptureInfo_v3")
        );
        assert_eq!(resolve("cuCtxCreate", 12000), Ok("cuCtxCreate_v3"));
        assert_eq!(resolve("cuCtxCreate", 12080), Ok("cuCtxCreate_v4"));
        assert_eq!(resolve("cuStreamGetCtx", 12020), Ok("cuStreamGetCtx"));
        assert_eq!(resolve("cuStreamGetCtx", 12090), Ok("cuStreamGetCtx_v2"));
        assert_eq!(resolve("cuMemAlloc", 12000), Ok("cuMemAlloc_v2"));
        assert_eq!(resolve("cuInit", 12000), Ok("cuInit"));
        assert_eq!(
            resolve("cuNoSuchThing", 12000),
            Err(STATUS_SYMBOL_NOT_FOUND)
        );
        assert_eq!(
            resolve("cuStreamGetCaptureInfo", 9000),
            Err(STATUS_VERSION_NOT_SUFFICIENT)
        );
    }

    #[test]
    fn both_abis_answer_and_report_status() {
        let mut p: *mut c_void = std::ptr::null_mut();
        let mut st = -1;
        // SAFETY: valid pointers.
        unsafe {
            assert_eq!(
                cuGetProcAddress(c"cuMemcpyAsync".as_ptr(), &mut p, 12020, 0),
                CUDA_SUCCESS
            );
            assert_eq!(p as usize, crate::copy::cuMemcpyAsync as *const () as usize);
            assert_eq!(
                cuGetProcAddress_v2(c"cuGraphLaunch".as_ptr(), &mut p, 12090, 0, &mut st),
                CUDA_ERROR_NOT_FOUND
            );
            assert!(p.is_null());
            assert_eq!(st, STATUS_SYMBOL_NOT_FOUND);
            assert_eq!(
                cuGetProcAddress_v2(c"cuGetExportTable".as_ptr(), &mut p, 12090, 0, &mut st),
                CUDA_SUCCESS
            );
            assert_eq!(st, STATUS_SUCCESS);
        }
    }

    /// Every `cu*` entry point defined in this crate is reachable through cuGetProcAddress.
    #[test]
    fn every_export_is_in_the_table() {
        let sources = [
            include_str!("context.rs"),
            include_str!("device.rs"),
            include_str!("error.rs"),
            include_str!("export.rs"),
            include_str!("ipc.rs"),
            include_str!("memory.rs"),
            include_str!("module.rs"),
            include_str!("procaddr.rs"),
            include_str!("runtime.rs"),
            include_str!("stream.rs"),
            include_str!("vmm.rs"),
        ];
        let marker = ["extern ", "\"C\" fn cu"].concat();
        for src in sources {
            for (i, _) in src.match_indices(&marker) {
                let rest = &src[i + marker.len() - 2..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name.starts_with("cu") && name.as_bytes()[2].is_ascii_uppercase() {
                    assert!(
                        has(&name),
                        "{name} is exported but not in cuGetProcAddress's table"
                    );
                }
            }
        }
    }
}
