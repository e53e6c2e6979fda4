//! Causes from codes, not phrases: CUDA errors by their number's string (what
//! `cudaGetErrorString` / `cuGetErrorString` print, which NCCL's `"Cuda failure %d '%s'"`,
//! nccl-tests' `"Test CUDA failure %s:%d '%s'"` and PyTorch's `"CUDA error: %s"` all quote),
//! each with what it means and its usual cause in a collective job.
//!
//! Source: the CUDA Runtime API's `enum cudaError` (driver_types.h); the numbers are checked
//! against cudarc 0.19's generated bindings (`cudaErrorIllegalAddress = 700`, …). The strings
//! are CUDA's, as public logs quote them; a signature whose string we have not seen in a log
//! says "guess" in its source.
//!
//! A code that names a cause by itself (an illegal address, a missing kernel image) wins over
//! the source file of the WARN that relayed it. A code that says little (`invalid argument`,
//! `unknown error`) is weak: the file NCCL printed names the subsystem first
//! (`transport/nvls.cc … Cuda failure 1 'invalid argument'` is an NVLS failure).

use super::finding::{Category, Severity};
use super::signature::{Match, Scope, Signature};
use crate::stage::Stage;

/// Ids of the code signatures that yield to a WARN line's source file.
pub(super) const WEAK: &[&str] = &["cuda-weak-code"];

const SRC: &str = "CUDA Runtime API enum cudaError (driver_types.h), numbers as in cudarc 0.19's bindings; the \
                   string is what NCCL's CUDACHECK/CUCHECK (src/include/checks.h, cudawrap.h, v2.4-v2.30) quote";

pub(super) const SIGNATURES: &[Signature] = &[
    Signature {
        id: "cuda-illegal-address",
        // A kernel that faulted while operations ran: the run failed, whichever CUDA call
        // (NCCL's included) returned the sticky error first (Category::Run).
        category: Category::Run,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "an illegal memory access was encountered",
            "cudaErrorIllegalAddress",
            "CUDA_ERROR_ILLEGAL_ADDRESS",
            "misaligned address",
            "an illegal instruction was encountered",
            "unspecified launch failure",
            "cudaErrorLaunchFailure",
            "CUDA_ERROR_LAUNCH_FAILED",
            "hardware stack error",
        ]),
        source: SRC,
        releases: "700 cudaErrorIllegalAddress, 716 cudaErrorMisalignedAddress, 715 cudaErrorIllegalInstruction, \
                   719 cudaErrorLaunchFailure, 714 cudaErrorHardwareStackError",
        cause: "a GPU kernel faulted (CUDA 700/715/716/719): the error is sticky, so every later CUDA call in the \
                process fails with it, NCCL's included; the faulting kernel is usually the application's own \
                (or a kernel reading a buffer freed while NCCL still used it), less often NCCL's or the GPU itself",
        hint: "CUDA_LAUNCH_BLOCKING=1 (or compute-sanitizer) names the kernel that faulted; check dmesg on that host \
               for Xid 13/31/43 (application) or 48/63/64/79/94/95 (hardware); keep buffers alive until the \
               collective's stream completes",
    },
    Signature {
        id: "cuda-device-assert",
        category: Category::Cuda,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&["device-side assert triggered", "cudaErrorAssert"]),
        source: SRC,
        releases: "710 cudaErrorAssert",
        cause: "a kernel's assert() failed on the GPU (CUDA 710), usually the application's (an index out of \
                range in an embedding or a loss); NCCL only reports the sticky error afterwards",
        hint: "CUDA_LAUNCH_BLOCKING=1 shows the failing kernel and its assert message; fix the application's input",
    },
    Signature {
        id: "cuda-no-kernel-image",
        category: Category::Cuda,
        stage: Stage::NcclLoad,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "no kernel image is available for execution on the device",
            "cudaErrorNoKernelImageForDevice",
            "CUDA_ERROR_NO_BINARY_FOR_GPU",
            "named symbol not found",
            "cudaErrorSymbolNotFound",
            "invalid device function",
            "cudaErrorInvalidDeviceFunction",
            "the provided PTX was compiled with an unsupported toolchain",
        ]),
        source: SRC,
        releases: "209 cudaErrorNoKernelImageForDevice, 500 cudaErrorSymbolNotFound, 98 \
                   cudaErrorInvalidDeviceFunction, 222 cudaErrorUnsupportedPtxVersion",
        cause: "the NCCL (or framework) build has no kernels for this GPU's architecture (CUDA 209/500/98), or its \
                PTX is newer than the driver can compile (222): a build for another CUDA version or GPU generation",
        hint: "use an NCCL/PyTorch build whose CUDA version and architectures (sm_XX) include this GPU, or upgrade \
               the driver; `nccl-smoke doctor` prints the library's and the driver's CUDA versions",
    },
    Signature {
        id: "cuda-invalid-device",
        category: Category::Cuda,
        stage: Stage::Device,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "invalid device ordinal",
            "cudaErrorInvalidDevice",
            "CUDA_ERROR_INVALID_DEVICE",
        ]),
        source: SRC,
        releases: "101 cudaErrorInvalidDevice",
        cause: "a rank asked for a GPU index its host does not have (CUDA 101): more local ranks (times nccl-tests' \
                -g) than visible GPUs, or CUDA_VISIBLE_DEVICES / the launcher's GPU binding leaves each rank one GPU \
                while the program picks device = local rank",
        hint: "match ranks per node × GPUs per rank to the GPUs visible (nvidia-smi -L, CUDA_VISIBLE_DEVICES); with \
               srun --gpus-per-task=1 each task sees only device 0",
    },
    Signature {
        id: "cuda-device-busy",
        category: Category::Cuda,
        stage: Stage::Device,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "busy or unavailable",
            "cudaErrorDevicesUnavailable",
            "CUDA_ERROR_DEVICE_UNAVAILABLE",
            "uncorrectable ECC error encountered",
            "cudaErrorECCUncorrectable",
            "uncorrectable NVLink error",
        ]),
        source: SRC,
        releases: "46 cudaErrorDevicesUnavailable, 214 cudaErrorECCUncorrectable, 220 cudaErrorNvlinkUncorrectable",
        cause: "the GPU refused this process (CUDA 46: compute mode EXCLUSIVE_PROCESS with another process on it, or \
                the GPU is lost) or reported an uncorrectable ECC/NVLink error (214/220): a device problem, not NCCL's",
        hint: "nvidia-smi -q on that host (compute mode, retired pages, Xid in dmesg); drain the node if ECC or NVLink \
               errors repeat",
    },
    Signature {
        id: "cuda-system-not-ready",
        category: Category::Cuda,
        stage: Stage::Driver,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "system not yet initialized",
            "cudaErrorSystemNotReady",
            "CUDA driver is a stub library",
            "cudaErrorStubLibrary",
            "CUDA_ERROR_SYSTEM_NOT_READY",
            "system has unsupported display driver / cuda driver combination",
            "cudaErrorSystemDriverMismatch",
            "forward compatibility was attempted on non supported HW",
            "cudaErrorCompatNotSupportedOnDevice",
        ]),
        source: SRC,
        releases: "802 cudaErrorSystemNotReady, 803 cudaErrorSystemDriverMismatch, 804 \
                   cudaErrorCompatNotSupportedOnDevice, 34 cudaErrorStubLibrary",
        cause: "the driver is not ready for CUDA (802: on NVSwitch systems the fabric manager is not running or not \
                done), or the user-mode and kernel-mode drivers differ (803), or a CUDA forward-compatibility package \
                is used on a GPU that does not support it (804), or the process loaded the CUDA toolkit's stub \
                libcuda instead of the driver's (34)",
        hint: "systemctl status nvidia-fabricmanager (its version must equal the driver's); nvidia-smi and the \
               libcuda the container mounts must come from the same driver",
    },
    Signature {
        id: "cuda-graph-capture",
        category: Category::Cuda,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "operation not permitted when stream is capturing",
            "cudaErrorStreamCaptureUnsupported",
            "operation would make the legacy stream depend on a capturing blocking stream",
            "cudaErrorStreamCaptureImplicit",
            "capturing stream has unjoined work",
            "operation failed due to a previous error during capture",
            "cudaErrorStreamCaptureInvalidated",
        ]),
        source: SRC,
        releases: "900 cudaErrorStreamCaptureUnsupported, 906 cudaErrorStreamCaptureImplicit, 904 \
                   cudaErrorStreamCaptureUnjoined, 901 cudaErrorStreamCaptureInvalidated",
        cause: "a CUDA call that graph capture forbids ran while a CUDA graph was being captured (CUDA 900-906): an \
                NCCL version without capture support for that path, or an allocation/synchronisation inside the \
                captured region",
        hint: "use an NCCL release that supports capture of this operation (2.9.6+; registration in capture 2.19+), \
               or run the first iterations (which set up NCCL's connections) before capturing",
    },
    Signature {
        id: "cuda-driver-shutting-down",
        category: Category::Cuda,
        stage: Stage::Finalize,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Phrases(&["driver shutting down", "cudaErrorCudartUnloading"]),
        source: SRC,
        releases: "4 cudaErrorCudartUnloading",
        cause: "the process was exiting (CUDA's runtime unloading, CUDA 4) while NCCL still made CUDA calls: the \
                communicator was not destroyed before exit, or another thread ended the process",
        hint: "destroy (or abort) communicators before the process exits (torch: dist.destroy_process_group())",
    },
    // Generic codes: the WARN's source file says more (see WEAK).
    Signature {
        id: "cuda-too-many-peers",
        category: Category::BufferImport,
        stage: Stage::Alloc,
        severity: Severity::Fail,
        scope: Scope::Any,
        what: Match::Phrases(&[
            "peer mapping resources exhausted",
            "cudaErrorTooManyPeers",
            "CUDA_ERROR_TOO_MANY_PEERS",
        ]),
        source: SRC,
        releases: "711 cudaErrorTooManyPeers",
        cause: "a GPU was asked to map more peers' memory than the hardware allows (CUDA 711; 8 peers per GPU on \
                PCIe systems): one process drives more GPUs than that with peer access, or NCCL's cuMem buffers are \
                mapped to every GPU of the process",
        hint: "drive at most 8 GPUs per process (one rank per GPU: nccl-tests with -g 1 under mpirun); \
               NCCL_P2P_DISABLE=1 does not lift it where NCCL's cuMem allocations map every peer, \
               NCCL_CUMEM_ENABLE=0 may",
    },
    Signature {
        id: "cuda-weak-code",
        category: Category::Cuda,
        stage: Stage::Run,
        severity: Severity::Fail,
        scope: Scope::Warn,
        what: Match::Phrases(&[
            "'invalid argument'",
            "'unknown error'",
            "'operation not supported'",
            "'invalid resource handle'",
            "'invalid device context'",
            "'OS call failed or operation not supported on this OS'",
            "'operation not permitted'",
        ]),
        source: SRC,
        releases: "1 cudaErrorInvalidValue, 999 cudaErrorUnknown, 801 cudaErrorNotSupported, 400 \
                   cudaErrorInvalidResourceHandle, 201 cudaErrorDeviceUninitialized, 304 cudaErrorOperatingSystem, \
                   800 cudaErrorNotPermitted",
        cause: "a CUDA call inside NCCL returned a generic error (invalid argument, unknown, not supported, not \
                permitted): the call that failed, not the code, says which feature (cuMem, multicast, IPC)",
        hint: "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALLOC to see the call; features that need driver \
               and kernel support (NVLS, cuMem, IPC in containers) can be turned off one at a time \
               (NCCL_NVLS_ENABLE=0, NCCL_CUMEM_ENABLE=0)",
    },
];

mod decode;
pub use decode::{PathFault, decode, path_fault};

#[cfg(test)]
mod tests;
