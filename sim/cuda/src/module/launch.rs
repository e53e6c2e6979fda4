//! Kernel launches: recorded and counted on their stream (NCCL's kernels never run; nccl-smoke's
//! own fill and check kernels do).

use super::*;

/// Records a launch; one of nccl-smoke's own kernels (`crate::kernels`) also runs, on the
/// stream, with `params`.
fn record_launch(
    func: *mut c_void,
    stream: CUstream,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    params: *mut *mut c_void,
) -> CuResult {
    let stuck = crate::fault::take_stuck_launch();
    current_device()?;
    let queue = lookup(stream)?;
    let name = modules()
        .functions
        .get(&(func as usize))
        .map(|f| f.name.to_string_lossy().into_owned())
        .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
    if grid.contains(&0) || block.contains(&0) {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    let n = LAUNCHES.fetch_add(1, Ordering::Relaxed) + 1;
    if stuck {
        // An injected `hang`: a kernel that never finishes, so the stream never drains (as a
        // GPU kernel spinning on a flag its peer never sets).
        trace::log(|| format!("launch #{n} {name}: never finishes (injected hang)"));
        queue.enqueue(Box::new(|| {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }));
        return Ok(());
    }
    // SAFETY: `params` is the launch's parameter array (the CUDA caller's contract).
    if let Some(task) = unsafe { crate::kernels::task(&name, params)? } {
        trace::log(|| format!("launch #{n} {name} grid {grid:?} block {block:?} (run)"));
        queue.enqueue(task);
        return Ok(());
    }
    trace::log(|| format!("launch #{n} {name} grid {grid:?} block {block:?} (recorded, not run)"));
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLaunchKernel(
    f: CUfunction,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    _shared_mem: c_uint,
    stream: CUstream,
    params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> CUresult {
    ffi("cuLaunchKernel", || {
        record_launch(
            f,
            stream,
            [grid_x, grid_y, grid_z],
            [block_x, block_y, block_z],
            params,
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLaunchCooperativeKernel(
    f: CUfunction,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    _shared_mem: c_uint,
    stream: CUstream,
    params: *mut *mut c_void,
) -> CUresult {
    ffi("cuLaunchCooperativeKernel", || {
        record_launch(
            f,
            stream,
            [grid_x, grid_y, grid_z],
            [block_x, block_y, block_z],
            params,
        )
    })
}

/// `CUlaunchConfig` (cuda.h 12.x).
#[repr(C)]
pub struct CUlaunchConfig {
    pub grid: [c_uint; 3],
    pub block: [c_uint; 3],
    pub shared_mem_bytes: c_uint,
    pub stream: CUstream,
    pub attrs: *mut c_void,
    pub num_attrs: c_uint,
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLaunchKernelEx(
    config: *const CUlaunchConfig,
    f: CUfunction,
    params: *mut *mut c_void,
    _extra: *mut *mut c_void,
) -> CUresult {
    ffi("cuLaunchKernelEx", || {
        non_null(config)?;
        // SAFETY: checked non-null; the caller passes a valid config.
        let c = unsafe { &*config };
        record_launch(f, c.stream, c.grid, c.block, params)
    })
}
