//! nccl-smoke's own kernels (`nccl_smoke_kernels::PTX`): the fill of a send buffer and the
//! check of a receive buffer, JIT-compiled by the driver from PTX text (`cuModuleLoadData`)
//! and launched on a stream. nccl-tests fills and checks on the device too (`InitData`,
//! `CheckData`, NVIDIA/nccl-tests v2.19.6 `src/common.cu`), so the host touches no message
//! byte on a healthy run.

use super::error::{CudaError, Result};
use super::stream::Stream;
use cudarc::driver::{result, sys};
use nccl_smoke_kernels::args::{CheckArgs, FillArgs};
use nccl_smoke_kernels::{BLOCK, CHECK, FILL, PTX, grid};
use std::ffi::{CString, c_void};

/// The loaded module and its two functions, for the context current when it was loaded.
pub struct Kernels {
    module: sys::CUmodule,
    fill: sys::CUfunction,
    check: sys::CUfunction,
}

// SAFETY: module and function handles are plain driver handles, valid from any thread that
// makes their context current; nccl-smoke uses one context per process.
unsafe impl Send for Kernels {}

impl Kernels {
    /// Loads the PTX into the current context (the driver JIT-compiles it for its GPU).
    pub fn load() -> Result<Kernels> {
        let ptx = CString::new(PTX).expect("the PTX text has no NUL byte");
        // SAFETY: a context is current (Device::open); the image is a NUL-terminated PTX text
        // that outlives the call.
        let module = unsafe { result::module::load_data(ptx.as_ptr().cast()) }
            .map_err(|e| CudaError::call("cuModuleLoadData", e))?;
        let function = |name: &str| {
            // SAFETY: the module was just loaded and is not unloaded before `Kernels` drops.
            unsafe { result::module::get_function(module, CString::new(name).expect("no NUL")) }
                .map_err(|e| CudaError::call("cuModuleGetFunction", e))
        };
        let loaded = function(FILL).and_then(|fill| Ok((fill, function(CHECK)?)));
        match loaded {
            Ok((fill, check)) => Ok(Kernels {
                module,
                fill,
                check,
            }),
            Err(e) => {
                // SAFETY: loaded above, never used again.
                let _ = unsafe { result::module::unload(module) };
                Err(e)
            }
        }
    }

    /// Queues the fill: every address in `args` is device memory that stays allocated until
    /// the stream has passed this point.
    pub fn fill(&self, args: FillArgs, stream: &Stream) -> Result<()> {
        launch(self.fill, args, args.count, stream)
    }

    /// Queues the check (see [`Self::fill`]); its result lands in `args.result`.
    pub fn check(&self, args: CheckArgs, stream: &Stream) -> Result<()> {
        launch(self.check, args, args.count, stream)
    }
}

/// Launches `f` with its one by-value parameter `args` over `elements` elements.
fn launch<T>(f: sys::CUfunction, mut args: T, elements: u64, stream: &Stream) -> Result<()> {
    let mut params: [*mut c_void; 1] = [(&mut args as *mut T).cast()];
    // SAFETY: `f` is a function of the loaded module whose one parameter is `T`'s `#[repr(C)]`
    // layout (nccl_smoke_kernels::args, checked against the PTX's declaration in its tests);
    // the driver copies the parameter before returning.
    unsafe {
        result::launch_kernel(
            f,
            (grid(elements), 1, 1),
            (BLOCK, 1, 1),
            0,
            stream.0,
            &mut params,
        )
    }
    .map_err(|e| CudaError::call("cuLaunchKernel", e))
}

impl Drop for Kernels {
    fn drop(&mut self) {
        // SAFETY: loaded in `load`, unloaded once.
        let _ = unsafe { result::module::unload(self.module) };
    }
}
