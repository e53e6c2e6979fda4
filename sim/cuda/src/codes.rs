//! `CUresult` codes, with the names and descriptions the real driver gives them: data alone,
//! below every module that returns one.

use std::ffi::{CStr, c_uint};

/// A `CUresult` (cuda.h, CUDA 12), passed by value as a C enum: any code of [`TABLE`] can be
/// returned (an injected fault chooses its own); the ones this driver gives on its own are
/// named below.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CUresult(pub u32);

pub const CUDA_SUCCESS: CUresult = CUresult(0);
pub const CUDA_ERROR_INVALID_VALUE: CUresult = CUresult(1);
pub const CUDA_ERROR_OUT_OF_MEMORY: CUresult = CUresult(2);
pub const CUDA_ERROR_NOT_INITIALIZED: CUresult = CUresult(3);
pub const CUDA_ERROR_NO_DEVICE: CUresult = CUresult(100);
pub const CUDA_ERROR_INVALID_DEVICE: CUresult = CUresult(101);
pub const CUDA_ERROR_INVALID_CONTEXT: CUresult = CUresult(201);
pub const CUDA_ERROR_MAP_FAILED: CUresult = CUresult(205);
pub const CUDA_ERROR_INVALID_HANDLE: CUresult = CUresult(400);
pub const CUDA_ERROR_NOT_FOUND: CUresult = CUresult(500);
pub const CUDA_ERROR_NOT_READY: CUresult = CUresult(600);
pub const CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: CUresult = CUresult(704);
pub const CUDA_ERROR_PEER_ACCESS_NOT_ENABLED: CUresult = CUresult(705);
pub const CUDA_ERROR_NOT_SUPPORTED: CUresult = CUresult(801);
pub const CUDA_ERROR_UNKNOWN: CUresult = CUresult(999);

/// Result of an API body: `Err` carries the code to return.
pub type CuResult<T = ()> = Result<T, CUresult>;

/// Every code of the CUDA 12.8 driver, with the name and the description `cuGetErrorName` and
/// `cuGetErrorString` give for it.
const TABLE: &[(u32, &CStr, &CStr)] = &[
    (0, c"CUDA_SUCCESS", c"no error"),
    (1, c"CUDA_ERROR_INVALID_VALUE", c"invalid argument"),
    (2, c"CUDA_ERROR_OUT_OF_MEMORY", c"out of memory"),
    (3, c"CUDA_ERROR_NOT_INITIALIZED", c"initialization error"),
    (4, c"CUDA_ERROR_DEINITIALIZED", c"driver shutting down"),
    (5, c"CUDA_ERROR_PROFILER_DISABLED", c"profiler disabled while using external profiling tool"),
    (6, c"CUDA_ERROR_PROFILER_NOT_INITIALIZED", c"profiler not initialized: call cudaProfilerInitialize()"),
    (7, c"CUDA_ERROR_PROFILER_ALREADY_STARTED", c"profiler already started"),
    (8, c"CUDA_ERROR_PROFILER_ALREADY_STOPPED", c"profiler already stopped"),
    (34, c"CUDA_ERROR_STUB_LIBRARY", c"CUDA driver is a stub library"),
    (46, c"CUDA_ERROR_DEVICE_UNAVAILABLE", c"CUDA-capable device(s) is/are busy or unavailable"),
    (100, c"CUDA_ERROR_NO_DEVICE", c"no CUDA-capable device is detected"),
    (101, c"CUDA_ERROR_INVALID_DEVICE", c"invalid device ordinal"),
    (102, c"CUDA_ERROR_DEVICE_NOT_LICENSED", c"device doesn't have valid Grid license"),
    (200, c"CUDA_ERROR_INVALID_IMAGE", c"device kernel image is invalid"),
    (201, c"CUDA_ERROR_INVALID_CONTEXT", c"invalid device context"),
    (202, c"CUDA_ERROR_CONTEXT_ALREADY_CURRENT", c"context already current"),
    (205, c"CUDA_ERROR_MAP_FAILED", c"mapping of buffer object failed"),
    (206, c"CUDA_ERROR_UNMAP_FAILED", c"unmapping of buffer object failed"),
    (207, c"CUDA_ERROR_ARRAY_IS_MAPPED", c"array is mapped"),
    (208, c"CUDA_ERROR_ALREADY_MAPPED", c"resource already mapped"),
    (209, c"CUDA_ERROR_NO_BINARY_FOR_GPU", c"no kernel image is available for execution on the device"),
    (210, c"CUDA_ERROR_ALREADY_ACQUIRED", c"resource already acquired"),
    (211, c"CUDA_ERROR_NOT_MAPPED", c"resource not mapped"),
    (212, c"CUDA_ERROR_NOT_MAPPED_AS_ARRAY", c"resource not mapped as array"),
    (213, c"CUDA_ERROR_NOT_MAPPED_AS_POINTER", c"resource not mapped as pointer"),
    (214, c"CUDA_ERROR_ECC_UNCORRECTABLE", c"uncorrectable ECC error encountered"),
    (215, c"CUDA_ERROR_UNSUPPORTED_LIMIT", c"limit is not supported on this architecture"),
    (216, c"CUDA_ERROR_CONTEXT_ALREADY_IN_USE", c"exclusive-thread device already in use by a different thread"),
    (217, c"CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", c"peer access is not supported between these two devices"),
    (218, c"CUDA_ERROR_INVALID_PTX", c"a PTX JIT compilation failed"),
    (219, c"CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", c"invalid OpenGL or DirectX context"),
    (220, c"CUDA_ERROR_NVLINK_UNCORRECTABLE", c"uncorrectable NVLink error detected during the execution"),
    (221, c"CUDA_ERROR_JIT_COMPILER_NOT_FOUND", c"PTX JIT compiler library not found"),
    (222, c"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", c"the provided PTX was compiled with an unsupported toolchain."),
    (223, c"CUDA_ERROR_JIT_COMPILATION_DISABLED", c"PTX JIT compilation was disabled"),
    (224, c"CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", c"the provided execution affinity is not supported"),
    (225, c"CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", c"the provided PTX contains unsupported call to cudaDeviceSynchronize"),
    (226, c"CUDA_ERROR_CONTAINED", c"Invalid access of peer GPU memory over nvlink or a hardware error"),
    (300, c"CUDA_ERROR_INVALID_SOURCE", c"device kernel image is invalid"),
    (301, c"CUDA_ERROR_FILE_NOT_FOUND", c"file not found"),
    (302, c"CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", c"shared object symbol not found"),
    (303, c"CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", c"shared object initialization failed"),
    (304, c"CUDA_ERROR_OPERATING_SYSTEM", c"OS call failed or operation not supported on this OS"),
    (400, c"CUDA_ERROR_INVALID_HANDLE", c"invalid resource handle"),
    (401, c"CUDA_ERROR_ILLEGAL_STATE", c"the operation cannot be performed in the present state"),
    (402, c"CUDA_ERROR_LOSSY_QUERY", c"attempted introspection would be semantically lossy"),
    (500, c"CUDA_ERROR_NOT_FOUND", c"named symbol not found"),
    (600, c"CUDA_ERROR_NOT_READY", c"device not ready"),
    (700, c"CUDA_ERROR_ILLEGAL_ADDRESS", c"an illegal memory access was encountered"),
    (701, c"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", c"too many resources requested for launch"),
    (702, c"CUDA_ERROR_LAUNCH_TIMEOUT", c"the launch timed out and was terminated"),
    (703, c"CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", c"launch uses incompatible texturing mode"),
    (704, c"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", c"peer access is already enabled"),
    (705, c"CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", c"peer access has not been enabled"),
    (708, c"CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", c"cannot set while device is active in this process"),
    (709, c"CUDA_ERROR_CONTEXT_IS_DESTROYED", c"context is destroyed"),
    (710, c"CUDA_ERROR_ASSERT", c"device-side assert triggered"),
    (711, c"CUDA_ERROR_TOO_MANY_PEERS", c"peer mapping resources exhausted"),
    (712, c"CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", c"part or all of the requested memory range is already mapped"),
    (713, c"CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", c"pointer does not correspond to a registered memory region"),
    (714, c"CUDA_ERROR_HARDWARE_STACK_ERROR", c"hardware stack error"),
    (715, c"CUDA_ERROR_ILLEGAL_INSTRUCTION", c"an illegal instruction was encountered"),
    (716, c"CUDA_ERROR_MISALIGNED_ADDRESS", c"misaligned address"),
    (717, c"CUDA_ERROR_INVALID_ADDRESS_SPACE", c"operation not supported on global/shared address space"),
    (718, c"CUDA_ERROR_INVALID_PC", c"invalid program counter"),
    (719, c"CUDA_ERROR_LAUNCH_FAILED", c"unspecified launch failure"),
    (720, c"CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", c"too many blocks in cooperative launch"),
    (721, c"CUDA_ERROR_TENSOR_MEMORY_LEAK", c"tensor memory not completely freed"),
    (800, c"CUDA_ERROR_NOT_PERMITTED", c"operation not permitted"),
    (801, c"CUDA_ERROR_NOT_SUPPORTED", c"operation not supported"),
    (802, c"CUDA_ERROR_SYSTEM_NOT_READY", c"system not yet initialized"),
    (803, c"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", c"system has unsupported display driver / cuda driver combination"),
    (804, c"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", c"forward compatibility was attempted on non supported HW"),
    (805, c"CUDA_ERROR_MPS_CONNECTION_FAILED", c"MPS client failed to connect to the MPS control daemon or the MPS server"),
    (806, c"CUDA_ERROR_MPS_RPC_FAILURE", c"the remote procedural call between the MPS server and the MPS client failed"),
    (807, c"CUDA_ERROR_MPS_SERVER_NOT_READY", c"MPS server is not ready to accept new MPS client requests"),
    (808, c"CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", c"the hardware resources required to create MPS client have been exhausted"),
    (809, c"CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", c"the hardware resources required to support device connections have been exhausted"),
    (810, c"CUDA_ERROR_MPS_CLIENT_TERMINATED", c"the MPS client has been terminated by the server"),
    (811, c"CUDA_ERROR_CDP_NOT_SUPPORTED", c"is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it"),
    (812, c"CUDA_ERROR_CDP_VERSION_MISMATCH", c"CUDA Dynamic Parallelism is not supported with this version of the module"),
    (900, c"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", c"operation not permitted when stream is capturing"),
    (901, c"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", c"operation failed due to a previous error during capture"),
    (902, c"CUDA_ERROR_STREAM_CAPTURE_MERGE", c"operation would result in a merge of separate capture sequences"),
    (903, c"CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", c"capture was not ended in the same stream as it began"),
    (904, c"CUDA_ERROR_STREAM_CAPTURE_UNJOINED", c"capturing stream has unjoined work"),
    (905, c"CUDA_ERROR_STREAM_CAPTURE_ISOLATION", c"dependency created on uncaptured work in another stream"),
    (906, c"CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", c"operation would make the legacy stream depend on a capturing blocking stream"),
    (907, c"CUDA_ERROR_CAPTURED_EVENT", c"operation not permitted on an event last recorded in a capturing stream"),
    (908, c"CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", c"attempt to terminate a thread-local capture sequence from another thread"),
    (909, c"CUDA_ERROR_TIMEOUT", c"wait operation timed out"),
    (910, c"CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", c"the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"),
    (911, c"CUDA_ERROR_EXTERNAL_DEVICE", c"an async error has occured in external entity outside of CUDA"),
    (912, c"CUDA_ERROR_INVALID_CLUSTER_SIZE", c"a kernel launch error has occurred due to cluster misconfiguration"),
    (913, c"CUDA_ERROR_FUNCTION_NOT_LOADED", c"the function handle is not loaded when calling an API that requires a loaded function"),
    (914, c"CUDA_ERROR_INVALID_RESOURCE_TYPE", c"one or more resources passed in are not valid resource types for the operation"),
    (915, c"CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", c"one or more resources are insufficient or non-applicable for the operation"),
    (916, c"CUDA_ERROR_KEY_ROTATION", c"an error happened during the key rotation sequence"),
    (999, c"CUDA_ERROR_UNKNOWN", c"unknown error"),
];

/// The code of [`TABLE`] named `name` (`CUDA_ERROR_OUT_OF_MEMORY`).
pub fn code_named(name: &str) -> Option<u32> {
    TABLE
        .iter()
        .find(|(_, n, _)| n.to_bytes() == name.as_bytes())
        .map(|(c, _, _)| *c)
}

/// The name and description of `code`, if [`TABLE`] has it.
pub fn lookup(code: c_uint) -> Option<(&'static CStr, &'static CStr)> {
    TABLE
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, name, text)| (*name, *text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_no_duplicate_codes() {
        let mut codes: Vec<_> = TABLE.iter().map(|e| e.0).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), TABLE.len());
    }
}
