//! A failure of the driver API, decoded by name, and the check that turns a `CUresult` into one.

use cudarc::driver::result::DriverError;
use cudarc::driver::sys;

/// A failure of the driver API, decoded by name.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CudaError {
    #[error("no CUDA driver library: cannot load {tried} ({detail})")]
    NotFound { tried: String, detail: String },
    #[error("the CUDA driver library {path} has no symbol {symbol}")]
    MissingSymbol { path: String, symbol: String },
    #[error(
        "two CUDA driver libraries: nccl-smoke loaded {ours}, but cudarc's calls go to {cudarc} \
         (it tries the name libcuda.so first, so a CUDA toolkit's stubs/ folder or a second driver on \
         the library path wins)"
    )]
    TwoDrivers { ours: String, cudarc: String },
    #[error("{call} failed: {name} ({code}): {message}")]
    Call {
        call: &'static str,
        code: i32,
        name: String,
        message: String,
    },
}

impl CudaError {
    pub(super) fn call(call: &'static str, e: DriverError) -> CudaError {
        let name = e
            .error_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "CUDA_ERROR_UNKNOWN".into());
        let message = e
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "no description from the driver".into());
        CudaError::Call {
            call,
            code: e.0 as i32,
            name,
            message,
        }
    }

    /// A failure to load a module or find its function: nccl-smoke's kernels, not memory.
    pub fn is_module_load(&self) -> bool {
        matches!(self, CudaError::Call { call, .. } if call.starts_with("cuModule"))
    }

    /// The driver's error name (`CUDA_ERROR_…`), when the driver gave one.
    pub fn code_name(&self) -> Option<&str> {
        match self {
            CudaError::Call { name, .. } => Some(name),
            _ => None,
        }
    }
}

pub(super) type Result<T> = std::result::Result<T, CudaError>;

pub(super) fn check(call: &'static str, r: sys::CUresult) -> Result<()> {
    r.result().map_err(|e| CudaError::call(call, e))
}
