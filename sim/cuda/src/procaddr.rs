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

/// Every entry point this driver exports, by exact symbol name.
static ENTRIES: LazyLock<HashMap<&'static str, usize>> = LazyLock::new(|| {
    let list: &[(&CStr, *const c_void)] = &[
        (
            c"cuCtxCreate_v2",
            crate::context::cuCtxCreate_v2 as *const c_void,
        ),
        (
            c"cuCtxCreate_v3",
            crate::runtime::cuCtxCreate_v3 as *const c_void,
        ),
        (
            c"cuCtxCreate_v4",
            crate::runtime::cuCtxCreate_v4 as *const c_void,
        ),
        (
            c"cuCtxDestroy_v2",
            crate::context::cuCtxDestroy_v2 as *const c_void,
        ),
        (
            c"cuCtxDisablePeerAccess",
            crate::runtime::cuCtxDisablePeerAccess as *const c_void,
        ),
        (
            c"cuCtxEnablePeerAccess",
            crate::runtime::cuCtxEnablePeerAccess as *const c_void,
        ),
        (
            c"cuCtxGetApiVersion",
            crate::runtime::cuCtxGetApiVersion as *const c_void,
        ),
        (
            c"cuCtxGetCacheConfig",
            crate::runtime::cuCtxGetCacheConfig as *const c_void,
        ),
        (
            c"cuCtxGetCurrent",
            crate::context::cuCtxGetCurrent as *const c_void,
        ),
        (
            c"cuCtxGetDevice",
            crate::context::cuCtxGetDevice as *const c_void,
        ),
        (
            c"cuCtxGetFlags",
            crate::runtime::cuCtxGetFlags as *const c_void,
        ),
        (c"cuCtxGetId", crate::runtime::cuCtxGetId as *const c_void),
        (
            c"cuCtxGetLimit",
            crate::runtime::cuCtxGetLimit as *const c_void,
        ),
        (
            c"cuCtxGetSharedMemConfig",
            crate::runtime::cuCtxGetSharedMemConfig as *const c_void,
        ),
        (
            c"cuCtxGetStreamPriorityRange",
            crate::runtime::cuCtxGetStreamPriorityRange as *const c_void,
        ),
        (
            c"cuCtxPopCurrent_v2",
            crate::context::cuCtxPopCurrent_v2 as *const c_void,
        ),
        (
            c"cuCtxPushCurrent_v2",
            crate::context::cuCtxPushCurrent_v2 as *const c_void,
        ),
        (
            c"cuCtxResetPersistingL2Cache",
            crate::runtime::cuCtxResetPersistingL2Cache as *const c_void,
        ),
        (
            c"cuCtxSetCacheConfig",
            crate::runtime::cuCtxSetCacheConfig as *const c_void,
        ),
        (
            c"cuCtxSetCurrent",
            crate::context::cuCtxSetCurrent as *const c_void,
        ),
        (
            c"cuCtxSetFlags",
            crate::runtime::cuCtxSetFlags as *const c_void,
        ),
        (
            c"cuCtxSetLimit",
            crate::runtime::cuCtxSetLimit as *const c_void,
        ),
        (
            c"cuCtxSynchronize",
            crate::stream::cuCtxSynchronize as *const c_void,
        ),
        (
            c"cuDeviceCanAccessPeer",
            crate::runtime::cuDeviceCanAccessPeer as *const c_void,
        ),
        (
            c"cuDeviceComputeCapability",
            crate::runtime::cuDeviceComputeCapability as *const c_void,
        ),
        (c"cuDeviceGet", crate::device::cuDeviceGet as *const c_void),
        (
            c"cuDeviceGetAttribute",
            crate::device::cuDeviceGetAttribute as *const c_void,
        ),
        (
            c"cuDeviceGetByPCIBusId",
            crate::runtime::cuDeviceGetByPCIBusId as *const c_void,
        ),
        (
            c"cuDeviceGetCount",
            crate::device::cuDeviceGetCount as *const c_void,
        ),
        (
            c"cuDeviceGetDefaultMemPool",
            crate::runtime::cuDeviceGetDefaultMemPool as *const c_void,
        ),
        (
            c"cuDeviceGetMemPool",
            crate::runtime::cuDeviceGetMemPool as *const c_void,
        ),
        (
            c"cuDeviceGetName",
            crate::device::cuDeviceGetName as *const c_void,
        ),
        (
            c"cuDeviceGetP2PAttribute",
            crate::runtime::cuDeviceGetP2PAttribute as *const c_void,
        ),
        (
            c"cuDeviceGetPCIBusId",
            crate::device::cuDeviceGetPCIBusId as *const c_void,
        ),
        (
            c"cuDeviceGetUuid",
            crate::device::cuDeviceGetUuid as *const c_void,
        ),
        (
            c"cuDeviceGetUuid_v2",
            crate::device::cuDeviceGetUuid_v2 as *const c_void,
        ),
        (
            c"cuDevicePrimaryCtxGetState",
            crate::runtime::cuDevicePrimaryCtxGetState as *const c_void,
        ),
        (
            c"cuDevicePrimaryCtxRelease",
            crate::context::cuDevicePrimaryCtxRelease as *const c_void,
        ),
        (
            c"cuDevicePrimaryCtxRelease_v2",
            crate::context::cuDevicePrimaryCtxRelease_v2 as *const c_void,
        ),
        (
            c"cuDevicePrimaryCtxReset",
            crate::context::cuDevicePrimaryCtxReset as *const c_void,
        ),
        (
            c"cuDevicePrimaryCtxReset_v2",
            crate::context::cuDevicePrimaryCtxReset_v2 as *const c_void,
        ),
        (
            c"cuDevicePrimaryCtxRetain",
            crate::context::cuDevicePrimaryCtxRetain as *const c_void,
        ),
        (
            c"cuDevicePrimaryCtxSetFlags",
            crate::runtime::cuDevicePrimaryCtxSetFlags as *const c_void,
        ),
        (
            c"cuDevicePrimaryCtxSetFlags_v2",
            crate::runtime::cuDevicePrimaryCtxSetFlags_v2 as *const c_void,
        ),
        (
            c"cuDeviceSetMemPool",
            crate::runtime::cuDeviceSetMemPool as *const c_void,
        ),
        (
            c"cuDeviceTotalMem_v2",
            crate::device::cuDeviceTotalMem_v2 as *const c_void,
        ),
        (
            c"cuDriverGetVersion",
            crate::device::cuDriverGetVersion as *const c_void,
        ),
        (
            c"cuEventCreate",
            crate::stream::cuEventCreate as *const c_void,
        ),
        (
            c"cuEventDestroy_v2",
            crate::stream::cuEventDestroy_v2 as *const c_void,
        ),
        (
            c"cuEventElapsedTime",
            crate::stream::cuEventElapsedTime as *const c_void,
        ),
        (
            c"cuEventElapsedTime_v2",
            crate::stream::cuEventElapsedTime_v2 as *const c_void,
        ),
        (
            c"cuEventQuery",
            crate::stream::cuEventQuery as *const c_void,
        ),
        (
            c"cuEventRecord",
            crate::stream::cuEventRecord as *const c_void,
        ),
        (
            c"cuEventRecordWithFlags",
            crate::stream::cuEventRecordWithFlags as *const c_void,
        ),
        (
            c"cuEventSynchronize",
            crate::stream::cuEventSynchronize as *const c_void,
        ),
        (
            c"cuFlushGPUDirectRDMAWrites",
            crate::runtime::cuFlushGPUDirectRDMAWrites as *const c_void,
        ),
        (
            c"cuFuncGetAttribute",
            crate::module::cuFuncGetAttribute as *const c_void,
        ),
        (
            c"cuFuncGetModule",
            crate::module::cuFuncGetModule as *const c_void,
        ),
        (
            c"cuFuncGetName",
            crate::module::cuFuncGetName as *const c_void,
        ),
        (
            c"cuFuncIsLoaded",
            crate::module::cuFuncIsLoaded as *const c_void,
        ),
        (c"cuFuncLoad", crate::module::cuFuncLoad as *const c_void),
        (
            c"cuFuncSetAttribute",
            crate::module::cuFuncSetAttribute as *const c_void,
        ),
        (
            c"cuFuncSetCacheConfig",
            crate::module::cuFuncSetCacheConfig as *const c_void,
        ),
        (
            c"cuFuncSetSharedMemConfig",
            crate::module::cuFuncSetSharedMemConfig as *const c_void,
        ),
        (
            c"cuGetErrorName",
            crate::error::cuGetErrorName as *const c_void,
        ),
        (
            c"cuGetErrorString",
            crate::error::cuGetErrorString as *const c_void,
        ),
        (
            c"cuGetExportTable",
            crate::export::cuGetExportTable as *const c_void,
        ),
        (
            c"cuGetProcAddress",
            crate::procaddr::cuGetProcAddress as *const c_void,
        ),
        (
            c"cuGetProcAddress_v2",
            crate::procaddr::cuGetProcAddress_v2 as *const c_void,
        ),
        (c"cuInit", crate::device::cuInit as *const c_void),
        (
            c"cuIpcCloseMemHandle",
            crate::ipc::cuIpcCloseMemHandle as *const c_void,
        ),
        (
            c"cuIpcGetMemHandle",
            crate::ipc::cuIpcGetMemHandle as *const c_void,
        ),
        (
            c"cuIpcOpenMemHandle",
            crate::ipc::cuIpcOpenMemHandle as *const c_void,
        ),
        (
            c"cuIpcOpenMemHandle_v2",
            crate::ipc::cuIpcOpenMemHandle_v2 as *const c_void,
        ),
        (
            c"cuKernelGetAttribute",
            crate::module::cuKernelGetAttribute as *const c_void,
        ),
        (
            c"cuKernelGetFunction",
            crate::module::cuKernelGetFunction as *const c_void,
        ),
        (
            c"cuKernelGetName",
            crate::module::cuKernelGetName as *const c_void,
        ),
        (
            c"cuKernelSetAttribute",
            crate::module::cuKernelSetAttribute as *const c_void,
        ),
        (
            c"cuKernelSetCacheConfig",
            crate::module::cuKernelSetCacheConfig as *const c_void,
        ),
        (
            c"cuLaunchCooperativeKernel",
            crate::module::cuLaunchCooperativeKernel as *const c_void,
        ),
        (
            c"cuLaunchHostFunc",
            crate::stream::cuLaunchHostFunc as *const c_void,
        ),
        (
            c"cuLaunchKernel",
            crate::module::cuLaunchKernel as *const c_void,
        ),
        (
            c"cuLaunchKernelEx",
            crate::module::cuLaunchKernelEx as *const c_void,
        ),
        (
            c"cuLibraryGetGlobal",
            crate::module::cuLibraryGetGlobal as *const c_void,
        ),
        (
            c"cuLibraryGetKernel",
            crate::module::cuLibraryGetKernel as *const c_void,
        ),
        (
            c"cuLibraryGetModule",
            crate::module::cuLibraryGetModule as *const c_void,
        ),
        (
            c"cuLibraryLoadData",
            crate::module::cuLibraryLoadData as *const c_void,
        ),
        (
            c"cuLibraryUnload",
            crate::module::cuLibraryUnload as *const c_void,
        ),
        (
            c"cuMemAddressFree",
            crate::vmm::cuMemAddressFree as *const c_void,
        ),
        (
            c"cuMemAddressReserve",
            crate::vmm::cuMemAddressReserve as *const c_void,
        ),
        (
            c"cuMemAllocAsync",
            crate::runtime::cuMemAllocAsync as *const c_void,
        ),
        (
            c"cuMemAllocFromPoolAsync",
            crate::runtime::cuMemAllocFromPoolAsync as *const c_void,
        ),
        (
            c"cuMemAllocHost_v2",
            crate::memory::cuMemAllocHost_v2 as *const c_void,
        ),
        (
            c"cuMemAlloc_v2",
            crate::memory::cuMemAlloc_v2 as *const c_void,
        ),
        (c"cuMemCreate", crate::vmm::cuMemCreate as *const c_void),
        (
            c"cuMemExportToShareableHandle",
            crate::vmm::cuMemExportToShareableHandle as *const c_void,
        ),
        (
            c"cuMemFreeAsync",
            crate::runtime::cuMemFreeAsync as *const c_void,
        ),
        (
            c"cuMemFreeHost",
            crate::memory::cuMemFreeHost as *const c_void,
        ),
        (
            c"cuMemFree_v2",
            crate::memory::cuMemFree_v2 as *const c_void,
        ),
        (
            c"cuMemGetAccess",
            crate::vmm::cuMemGetAccess as *const c_void,
        ),
        (
            c"cuMemGetAddressRange_v2",
            crate::memory::cuMemGetAddressRange_v2 as *const c_void,
        ),
        (
            c"cuMemGetAllocationGranularity",
            crate::vmm::cuMemGetAllocationGranularity as *const c_void,
        ),
        (
            c"cuMemGetAllocationPropertiesFromHandle",
            crate::vmm::cuMemGetAllocationPropertiesFromHandle as *const c_void,
        ),
        (
            c"cuMemGetInfo_v2",
            crate::memory::cuMemGetInfo_v2 as *const c_void,
        ),
        (
            c"cuMemHostAlloc",
            crate::memory::cuMemHostAlloc as *const c_void,
        ),
        (
            c"cuMemHostGetDevicePointer_v2",
            crate::memory::cuMemHostGetDevicePointer_v2 as *const c_void,
        ),
        (
            c"cuMemHostGetFlags",
            crate::memory::cuMemHostGetFlags as *const c_void,
        ),
        (
            c"cuMemHostRegister_v2",
            crate::memory::cuMemHostRegister_v2 as *const c_void,
        ),
        (
            c"cuMemHostUnregister",
            crate::memory::cuMemHostUnregister as *const c_void,
        ),
        (
            c"cuMemImportFromShareableHandle",
            crate::vmm::cuMemImportFromShareableHandle as *const c_void,
        ),
        (c"cuMemMap", crate::vmm::cuMemMap as *const c_void),
        (
            c"cuMemPoolGetAttribute",
            crate::runtime::cuMemPoolGetAttribute as *const c_void,
        ),
        (
            c"cuMemPoolSetAttribute",
            crate::runtime::cuMemPoolSetAttribute as *const c_void,
        ),
        (
            c"cuMemPoolTrimTo",
            crate::runtime::cuMemPoolTrimTo as *const c_void,
        ),
        (c"cuMemRelease", crate::vmm::cuMemRelease as *const c_void),
        (
            c"cuMemRetainAllocationHandle",
            crate::vmm::cuMemRetainAllocationHandle as *const c_void,
        ),
        (
            c"cuMemSetAccess",
            crate::vmm::cuMemSetAccess as *const c_void,
        ),
        (c"cuMemUnmap", crate::vmm::cuMemUnmap as *const c_void),
        (c"cuMemcpy", crate::memory::cuMemcpy as *const c_void),
        (
            c"cuMemcpyAsync",
            crate::memory::cuMemcpyAsync as *const c_void,
        ),
        (
            c"cuMemcpyDtoDAsync_v2",
            crate::memory::cuMemcpyDtoDAsync_v2 as *const c_void,
        ),
        (
            c"cuMemcpyDtoD_v2",
            crate::memory::cuMemcpyDtoD_v2 as *const c_void,
        ),
        (
            c"cuMemcpyDtoHAsync_v2",
            crate::memory::cuMemcpyDtoHAsync_v2 as *const c_void,
        ),
        (
            c"cuMemcpyDtoH_v2",
            crate::memory::cuMemcpyDtoH_v2 as *const c_void,
        ),
        (
            c"cuMemcpyHtoDAsync_v2",
            crate::memory::cuMemcpyHtoDAsync_v2 as *const c_void,
        ),
        (
            c"cuMemcpyHtoD_v2",
            crate::memory::cuMemcpyHtoD_v2 as *const c_void,
        ),
        (
            c"cuMemcpyPeer",
            crate::runtime::cuMemcpyPeer as *const c_void,
        ),
        (
            c"cuMemcpyPeerAsync",
            crate::runtime::cuMemcpyPeerAsync as *const c_void,
        ),
        (
            c"cuMemsetD16Async",
            crate::runtime::cuMemsetD16Async as *const c_void,
        ),
        (
            c"cuMemsetD16_v2",
            crate::runtime::cuMemsetD16_v2 as *const c_void,
        ),
        (
            c"cuMemsetD32Async",
            crate::memory::cuMemsetD32Async as *const c_void,
        ),
        (
            c"cuMemsetD32_v2",
            crate::memory::cuMemsetD32_v2 as *const c_void,
        ),
        (
            c"cuMemsetD8Async",
            crate::memory::cuMemsetD8Async as *const c_void,
        ),
        (
            c"cuMemsetD8_v2",
            crate::memory::cuMemsetD8_v2 as *const c_void,
        ),
        (
            c"cuModuleGetFunction",
            crate::module::cuModuleGetFunction as *const c_void,
        ),
        (
            c"cuModuleGetGlobal_v2",
            crate::module::cuModuleGetGlobal_v2 as *const c_void,
        ),
        (
            c"cuModuleGetLoadingMode",
            crate::module::cuModuleGetLoadingMode as *const c_void,
        ),
        (
            c"cuModuleLoadData",
            crate::module::cuModuleLoadData as *const c_void,
        ),
        (
            c"cuModuleLoadDataEx",
            crate::module::cuModuleLoadDataEx as *const c_void,
        ),
        (
            c"cuModuleLoadFatBinary",
            crate::module::cuModuleLoadFatBinary as *const c_void,
        ),
        (
            c"cuModuleUnload",
            crate::module::cuModuleUnload as *const c_void,
        ),
        (
            c"cuOccupancyMaxActiveBlocksPerMultiprocessor",
            crate::module::cuOccupancyMaxActiveBlocksPerMultiprocessor as *const c_void,
        ),
        (
            c"cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
            crate::module::cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags as *const c_void,
        ),
        (
            c"cuPointerGetAttribute",
            crate::runtime::cuPointerGetAttribute as *const c_void,
        ),
        (
            c"cuPointerGetAttributes",
            crate::runtime::cuPointerGetAttributes as *const c_void,
        ),
        (
            c"cuPointerSetAttribute",
            crate::runtime::cuPointerSetAttribute as *const c_void,
        ),
        (
            c"cuProfilerStart",
            crate::runtime::cuProfilerStart as *const c_void,
        ),
        (
            c"cuProfilerStop",
            crate::runtime::cuProfilerStop as *const c_void,
        ),
        (
            c"cuStreamAddCallback",
            crate::runtime::cuStreamAddCallback as *const c_void,
        ),
        (
            c"cuStreamCreate",
            crate::stream::cuStreamCreate as *const c_void,
        ),
        (
            c"cuStreamCreateWithPriority",
            crate::stream::cuStreamCreateWithPriority as *const c_void,
        ),
        (
            c"cuStreamDestroy_v2",
            crate::stream::cuStreamDestroy_v2 as *const c_void,
        ),
        (
            c"cuStreamGetCaptureInfo",
            crate::runtime::cuStreamGetCaptureInfo as *const c_void,
        ),
        (
            c"cuStreamGetCaptureInfo_v2",
            crate::runtime::cuStreamGetCaptureInfo_v2 as *const c_void,
        ),
        (
            c"cuStreamGetCaptureInfo_v3",
            crate::runtime::cuStreamGetCaptureInfo_v3 as *const c_void,
        ),
        (
            c"cuStreamGetCtx",
            crate::runtime::cuStreamGetCtx as *const c_void,
        ),
        (
            c"cuStreamGetCtx_v2",
            crate::runtime::cuStreamGetCtx_v2 as *const c_void,
        ),
        (
            c"cuStreamGetDevice",
            crate::runtime::cuStreamGetDevice as *const c_void,
        ),
        (
            c"cuStreamGetFlags",
            crate::runtime::cuStreamGetFlags as *const c_void,
        ),
        (
            c"cuStreamGetId",
            crate::runtime::cuStreamGetId as *const c_void,
        ),
        (
            c"cuStreamGetPriority",
            crate::runtime::cuStreamGetPriority as *const c_void,
        ),
        (
            c"cuStreamIsCapturing",
            crate::runtime::cuStreamIsCapturing as *const c_void,
        ),
        (
            c"cuStreamQuery",
            crate::stream::cuStreamQuery as *const c_void,
        ),
        (
            c"cuStreamSynchronize",
            crate::stream::cuStreamSynchronize as *const c_void,
        ),
        (
            c"cuStreamWaitEvent",
            crate::stream::cuStreamWaitEvent as *const c_void,
        ),
        (
            c"cuThreadExchangeStreamCaptureMode",
            crate::runtime::cuThreadExchangeStreamCaptureMode as *const c_void,
        ),
    ];
    list.iter()
        .map(|(n, f)| (n.to_str().expect("ASCII names"), *f as usize))
        .collect()
});

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
    ffi(|| lookup(symbol, pfn, cuda_version, flags, std::ptr::null_mut()))
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
    ffi(|| lookup(symbol, pfn, cuda_version, flags, symbol_status))
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
            assert_eq!(p as usize, crate::memory::cuMemcpyAsync as usize);
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
