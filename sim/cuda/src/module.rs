//! Modules, libraries, functions and kernel launches. Nothing is compiled or executed: an image
//! loads as an opaque handle, a function is a (module, name) handle, a global is zeroed host
//! memory, and a launch is counted (FACTS.md: `cuLibraryLoadData` about 76 times with cudart
//! 12.9, `cuModuleGetFunction`, `cuModuleGetGlobal("ncclDevFuncTable")`, `cuFuncGetAttribute`/
//! `SetAttribute`, `cuLaunchKernelEx`; "kernels recorded, not executed"). The one exception is
//! nccl-smoke's own fill and check kernels, whose host reference runs on the stream (see
//! `kernels.rs`).

use crate::context::current_device;
use crate::device::{CUdevice, platform};
use crate::error::*;
use crate::memory::CUdeviceptr;
use crate::stream::{CUstream, lookup};
use crate::trace;
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};

pub type CUmodule = *mut c_void;
pub type CUfunction = *mut c_void;

/// Size given to every global a module is asked for: its real size is unknown here (a guess
/// that covers NCCL's `ncclDevFuncTable`, a few KiB of function pointers).
pub const GLOBAL_BYTES: usize = 256 << 10;

struct Function {
    module: usize,
    name: CString,
    attrs: HashMap<c_int, c_int>,
}

#[derive(Default)]
struct Modules {
    /// Loaded modules and libraries (one handle serves as both).
    modules: HashMap<usize, HashMap<CString, usize>>,
    functions: HashMap<usize, Function>,
    /// (module, name) → (address, size).
    globals: HashMap<(usize, CString), (usize, usize)>,
}

static MODULES: LazyLock<Mutex<Modules>> = LazyLock::new(Mutex::default);

fn modules() -> MutexGuard<'static, Modules> {
    MODULES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Kernel launches recorded so far in this process.
pub static LAUNCHES: AtomicU64 = AtomicU64::new(0);

fn load(out: *mut *mut c_void, image: *const c_void) -> CuResult {
    non_null(out)?;
    platform()?;
    if image.is_null() {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    let h = crate::next_handle();
    modules().modules.insert(h, HashMap::new());
    // SAFETY: checked non-null.
    unsafe { put(out, h as *mut c_void) }
}

fn unload(h: *mut c_void) -> CuResult {
    platform()?;
    let mut m = modules();
    let funcs = m
        .modules
        .remove(&(h as usize))
        .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
    for f in funcs.values() {
        m.functions.remove(f);
    }
    // Globals stay allocated: a device pointer handed out may still be in use (leaked).
    Ok(())
}

fn name_of<'a>(name: *const c_char) -> CuResult<&'a CStr> {
    non_null(name)?;
    // SAFETY: checked non-null; the caller passes a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(name) })
}

fn function(out: *mut *mut c_void, module: *mut c_void, name: *const c_char) -> CuResult {
    non_null(out)?;
    platform()?;
    let name = name_of(name)?.to_owned();
    let mut m = modules();
    let funcs = m
        .modules
        .get_mut(&(module as usize))
        .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
    let h = *funcs.entry(name.clone()).or_insert_with(crate::next_handle);
    m.functions.entry(h).or_insert(Function {
        module: module as usize,
        name,
        attrs: HashMap::new(),
    });
    // SAFETY: checked non-null.
    unsafe { put(out, h as *mut c_void) }
}

fn global(
    dptr: *mut CUdeviceptr,
    bytes: *mut usize,
    module: *mut c_void,
    name: *const c_char,
) -> CuResult {
    platform()?;
    let name = name_of(name)?.to_owned();
    let key = (module as usize, name);
    let mut m = modules();
    if !m.modules.contains_key(&key.0) {
        return Err(CUDA_ERROR_INVALID_HANDLE);
    }
    let (addr, size) = match m.globals.get(&key) {
        Some(&g) => g,
        None => {
            let layout = std::alloc::Layout::from_size_align(GLOBAL_BYTES, 4096)
                .map_err(|_| CUDA_ERROR_OUT_OF_MEMORY)?;
            // SAFETY: non-zero size; never freed (see `unload`).
            let p = unsafe { std::alloc::alloc_zeroed(layout) };
            if p.is_null() {
                return Err(CUDA_ERROR_OUT_OF_MEMORY);
            }
            trace::log(|| format!("module global {:?} at {p:p}", key.1));
            m.globals.insert(key, (p as usize, GLOBAL_BYTES));
            (p as usize, GLOBAL_BYTES)
        }
    };
    // SAFETY: each out-pointer is written only when non-null (both are optional in CUDA).
    unsafe {
        if !dptr.is_null() {
            dptr.write(addr as CUdeviceptr);
        }
        if !bytes.is_null() {
            bytes.write(size);
        }
    }
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleLoadData(module: *mut CUmodule, image: *const c_void) -> CUresult {
    ffi("cuModuleLoadData", || load(module, image))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleLoadDataEx(
    module: *mut CUmodule,
    image: *const c_void,
    _num_options: c_uint,
    _options: *mut c_int,
    _option_values: *mut *mut c_void,
) -> CUresult {
    ffi("cuModuleLoadDataEx", || load(module, image))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleLoadFatBinary(
    module: *mut CUmodule,
    fat: *const c_void,
) -> CUresult {
    ffi("cuModuleLoadFatBinary", || load(module, fat))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleUnload(module: CUmodule) -> CUresult {
    ffi("cuModuleUnload", || unload(module))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleGetFunction(
    hfunc: *mut CUfunction,
    module: CUmodule,
    name: *const c_char,
) -> CUresult {
    ffi("cuModuleGetFunction", || function(hfunc, module, name))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleGetGlobal_v2(
    dptr: *mut CUdeviceptr,
    bytes: *mut usize,
    module: CUmodule,
    name: *const c_char,
) -> CUresult {
    ffi("cuModuleGetGlobal_v2", || global(dptr, bytes, module, name))
}

/// `cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)`: eager (1).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleGetLoadingMode(mode: *mut c_int) -> CUresult {
    // SAFETY: null checked by `put`.
    ffi("cuModuleGetLoadingMode", || unsafe { put(mode, 1) })
}

/// `cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions, void
/// **jitOptionsValues, unsigned numJitOptions, CUlibraryOption *libraryOptions, void
/// **libraryOptionValues, unsigned numLibraryOptions)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLibraryLoadData(
    library: *mut *mut c_void,
    code: *const c_void,
    _jit_options: *mut c_int,
    _jit_values: *mut *mut c_void,
    _num_jit: c_uint,
    _lib_options: *mut c_int,
    _lib_values: *mut *mut c_void,
    _num_lib: c_uint,
) -> CUresult {
    ffi("cuLibraryLoadData", || load(library, code))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLibraryUnload(library: *mut c_void) -> CUresult {
    ffi("cuLibraryUnload", || unload(library))
}

/// A library is its own module here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLibraryGetModule(
    module: *mut CUmodule,
    library: *mut c_void,
) -> CUresult {
    ffi("cuLibraryGetModule", || {
        platform()?;
        if !modules().modules.contains_key(&(library as usize)) {
            return Err(CUDA_ERROR_INVALID_HANDLE);
        }
        // SAFETY: null checked by `put`.
        unsafe { put(module, library) }
    })
}

/// A kernel is its function here (CUDA 12 lets a `CUkernel` be launched as a `CUfunction`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLibraryGetKernel(
    kernel: *mut *mut c_void,
    library: *mut c_void,
    name: *const c_char,
) -> CUresult {
    ffi("cuLibraryGetKernel", || function(kernel, library, name))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLibraryGetGlobal(
    dptr: *mut CUdeviceptr,
    bytes: *mut usize,
    library: *mut c_void,
    name: *const c_char,
) -> CUresult {
    ffi("cuLibraryGetGlobal", || global(dptr, bytes, library, name))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuKernelGetFunction(
    func: *mut CUfunction,
    kernel: *mut c_void,
) -> CUresult {
    ffi("cuKernelGetFunction", || {
        platform()?;
        if !modules().functions.contains_key(&(kernel as usize)) {
            return Err(CUDA_ERROR_INVALID_HANDLE);
        }
        // SAFETY: null checked by `put`.
        unsafe { put(func, kernel) }
    })
}

/// `CUfunction_attribute` values for a function (numbers as in cuda.h 12.x); what was set
/// with `cuFuncSetAttribute` wins. Values are those of a plain H100 kernel (a guess).
fn func_attribute(f: &Function, attrib: c_int) -> c_int {
    if let Some(&v) = f.attrs.get(&attrib) {
        return v;
    }
    match attrib {
        0 => 1024,   // MAX_THREADS_PER_BLOCK
        4 => 64,     // NUM_REGS
        5 | 6 => 90, // PTX_VERSION, BINARY_VERSION
        9 => -1,     // PREFERRED_SHARED_MEMORY_CARVEOUT
        _ => 0,
    }
}

fn get_attr(pi: *mut c_int, attrib: c_int, func: *mut c_void) -> CuResult {
    non_null(pi)?;
    platform()?;
    let m = modules();
    let f = m
        .functions
        .get(&(func as usize))
        .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
    let v = func_attribute(f, attrib);
    // SAFETY: checked non-null.
    unsafe { put(pi, v) }
}

fn set_attr(func: *mut c_void, attrib: c_int, value: c_int) -> CuResult {
    platform()?;
    let mut m = modules();
    let f = m
        .functions
        .get_mut(&(func as usize))
        .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
    f.attrs.insert(attrib, value);
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncGetAttribute(
    pi: *mut c_int,
    attrib: c_int,
    func: CUfunction,
) -> CUresult {
    ffi("cuFuncGetAttribute", || get_attr(pi, attrib, func))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncSetAttribute(
    func: CUfunction,
    attrib: c_int,
    value: c_int,
) -> CUresult {
    ffi("cuFuncSetAttribute", || set_attr(func, attrib, value))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuKernelGetAttribute(
    pi: *mut c_int,
    attrib: c_int,
    kernel: *mut c_void,
    _dev: CUdevice,
) -> CUresult {
    ffi("cuKernelGetAttribute", || get_attr(pi, attrib, kernel))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuKernelSetAttribute(
    attrib: c_int,
    value: c_int,
    kernel: *mut c_void,
    _dev: CUdevice,
) -> CUresult {
    ffi("cuKernelSetAttribute", || set_attr(kernel, attrib, value))
}

fn known_function(func: *mut c_void) -> CuResult {
    platform()?;
    if modules().functions.contains_key(&(func as usize)) {
        Ok(())
    } else {
        Err(CUDA_ERROR_INVALID_HANDLE)
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncSetCacheConfig(func: CUfunction, _config: c_int) -> CUresult {
    ffi("cuFuncSetCacheConfig", || known_function(func))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncSetSharedMemConfig(func: CUfunction, _config: c_int) -> CUresult {
    ffi("cuFuncSetSharedMemConfig", || known_function(func))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuKernelSetCacheConfig(
    kernel: *mut c_void,
    _config: c_int,
    _dev: CUdevice,
) -> CUresult {
    ffi("cuKernelSetCacheConfig", || known_function(kernel))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncGetModule(module: *mut CUmodule, func: CUfunction) -> CUresult {
    ffi("cuFuncGetModule", || {
        platform()?;
        let m = modules()
            .functions
            .get(&(func as usize))
            .map(|f| f.module)
            .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        // SAFETY: null checked by `put`.
        unsafe { put(module, m as CUmodule) }
    })
}

/// The name stays valid while the module is loaded (it lives in the table).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncGetName(name: *mut *const c_char, func: CUfunction) -> CUresult {
    ffi("cuFuncGetName", || {
        platform()?;
        let p = modules()
            .functions
            .get(&(func as usize))
            .map(|f| f.name.as_ptr())
            .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        // SAFETY: null checked by `put`.
        unsafe { put(name, p) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuKernelGetName(
    name: *mut *const c_char,
    kernel: *mut c_void,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuFuncGetName(name, kernel) }
}

/// `cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction)`: always loaded (1).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncIsLoaded(state: *mut c_int, func: CUfunction) -> CUresult {
    ffi("cuFuncIsLoaded", || {
        known_function(func)?;
        // SAFETY: null checked by `put`.
        unsafe { put(state, 1) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncLoad(func: CUfunction) -> CUresult {
    ffi("cuFuncLoad", || known_function(func))
}

/// One block per multiprocessor, whatever is asked (a guess; nothing runs).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuOccupancyMaxActiveBlocksPerMultiprocessor(
    num_blocks: *mut c_int,
    func: CUfunction,
    _block_size: c_int,
    _dynamic_smem: usize,
) -> CUresult {
    ffi("cuOccupancyMaxActiveBlocksPerMultiprocessor", || {
        known_function(func)?;
        // SAFETY: null checked by `put`.
        unsafe { put(num_blocks, 1) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    num_blocks: *mut c_int,
    func: CUfunction,
    block_size: c_int,
    dynamic_smem: usize,
    _flags: c_uint,
) -> CUresult {
    // SAFETY: same contract.
    unsafe {
        cuOccupancyMaxActiveBlocksPerMultiprocessor(num_blocks, func, block_size, dynamic_smem)
    }
}

mod launch;
pub use launch::*;

#[cfg(test)]
mod tests;
