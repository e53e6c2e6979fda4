//! Device memory is host memory: allocation with per-device accounting (copies and fills are
//! in `copy`).

use crate::context::current_device;
use crate::device::{CUdevice, platform};
use crate::error::*;
use crate::fault;
use nccl_smoke_fault::Where;
use std::alloc::Layout;
use std::collections::BTreeMap;
use std::ffi::{c_uint, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{LazyLock, Mutex, MutexGuard};

pub type CUdeviceptr = u64;

/// Alignment of every allocation (cuMemAlloc guarantees at least 256 bytes).
pub const ALIGN: usize = 256;

struct Block {
    size: usize,
    /// Device it is accounted on; `None` for page-locked host memory.
    device: Option<CUdevice>,
    /// Device memory is a shared mapping of a memfd, so that another process can map it
    /// (legacy IPC names `/proc/<pid>/fd/<fd>`; FACTS.md, "The real libnccl on a CPU
    /// machine"); host memory comes from the Rust allocator.
    backing: Backing,
}

enum Backing {
    Heap(Layout),
    Memfd {
        fd: OwnedFd,
        len: usize,
    },
    /// A shared anonymous mapping: device memory allocated while the process had no descriptor
    /// left for a memfd. A real `cuMemAlloc` needs no descriptor, so the allocation succeeds;
    /// only a legacy IPC export of it fails (no memfd to name).
    Anonymous {
        len: usize,
    },
}

/// A shared anonymous mapping of `size` bytes, rounded up to pages: (address, length).
fn map_anonymous(size: usize) -> CuResult<(usize, usize)> {
    let len = size.div_ceil(4096) * 4096;
    // SAFETY: a fresh anonymous mapping.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(CUDA_ERROR_OUT_OF_MEMORY);
    }
    Ok((p as usize, len))
}

static BLOCKS: LazyLock<Mutex<BTreeMap<usize, Block>>> = LazyLock::new(Mutex::default);

fn blocks() -> MutexGuard<'static, BTreeMap<usize, Block>> {
    BLOCKS.lock().unwrap_or_else(|e| e.into_inner())
}

fn map_memfd(size: usize, dev: CUdevice) -> CuResult<(usize, OwnedFd, usize)> {
    let len = size.div_ceil(4096) * 4096;
    let fd = new_memfd(len, dev)?;
    // SAFETY: a fresh shared mapping of our own descriptor.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(CUDA_ERROR_OUT_OF_MEMORY);
    }
    Ok((p as usize, fd, len))
}

pub(crate) fn allocate(size: usize, device: Option<CUdevice>) -> CuResult<usize> {
    if size == 0 {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    let layout = Layout::from_size_align(size, ALIGN).map_err(|_| CUDA_ERROR_OUT_OF_MEMORY)?;
    let p = platform()?;
    if let Some(dev) = device {
        p.reserve(dev, size as u64)?;
        let mapped = map_memfd(size, dev).map(|(addr, fd, len)| (addr, Backing::Memfd { fd, len }));
        let out_of_descriptors = || {
            matches!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::EMFILE | libc::ENFILE)
            )
        };
        let mapped = match mapped {
            Err(_) if out_of_descriptors() => {
                map_anonymous(size).map(|(addr, len)| (addr, Backing::Anonymous { len }))
            }
            other => other,
        };
        return match mapped {
            Ok((addr, backing)) => {
                blocks().insert(
                    addr,
                    Block {
                        size,
                        device,
                        backing,
                    },
                );
                Ok(addr)
            }
            Err(e) => {
                p.unreserve(dev, size as u64);
                Err(e)
            }
        };
    }
    // SAFETY: the layout has a non-zero size.
    let ptr = unsafe { std::alloc::alloc(layout) };
    if ptr.is_null() {
        return Err(CUDA_ERROR_OUT_OF_MEMORY);
    }
    blocks().insert(
        ptr as usize,
        Block {
            size,
            device,
            backing: Backing::Heap(layout),
        },
    );
    Ok(ptr as usize)
}

pub(crate) fn release(addr: usize, host: bool) -> CuResult {
    platform()?;
    if addr == 0 {
        return Ok(());
    }
    let block = {
        let mut b = blocks();
        match b.get(&addr) {
            Some(blk) if blk.device.is_none() == host => b.remove(&addr),
            _ => None,
        }
    }
    .ok_or(CUDA_ERROR_INVALID_VALUE)?;
    match block.backing {
        // SAFETY: allocated by `allocate` with this layout, removed from the table so freed once.
        Backing::Heap(layout) => unsafe { std::alloc::dealloc(addr as *mut u8, layout) },
        // SAFETY: our own mapping, removed from the table so unmapped once; the fd closes on drop.
        Backing::Memfd { len, .. } | Backing::Anonymous { len } => unsafe {
            libc::munmap(addr as *mut c_void, len);
        },
    }
    if let (Some(dev), Ok(p)) = (block.device, platform()) {
        p.unreserve(dev, block.size as u64);
    }
    Ok(())
}

/// What an address belongs to: (base, size, device (None: host), memfd and its length).
pub(crate) struct Range {
    pub base: usize,
    pub size: usize,
    pub device: Option<CUdevice>,
    pub memfd: Option<(i32, usize)>,
}

/// The `cuMemAlloc`/`cuMemHostAlloc` block or registered host range holding `addr` (see
/// `ranges::find_range` for every kind of memory).
pub(crate) fn find_allocated(addr: usize) -> Option<Range> {
    if let Some((&base, blk)) = blocks().range(..=addr).next_back()
        && addr < base + blk.size.max(1)
    {
        return Some(Range {
            base,
            size: blk.size,
            device: blk.device,
            memfd: match &blk.backing {
                Backing::Memfd { fd, len } => Some((fd.as_raw_fd(), *len)),
                Backing::Heap(_) | Backing::Anonymous { .. } => None,
            },
        });
    }
    if let Some((&base, &size)) = registered().range(..=addr).next_back()
        && addr < base + size
    {
        return Some(Range {
            base,
            size,
            device: None,
            memfd: None,
        });
    }
    None
}

/// The CUDA error for the OS error just seen: out of memory when the OS says so.
pub(crate) fn os_error() -> CUresult {
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENOMEM) | Some(libc::ENOSPC) | Some(libc::EFBIG) => CUDA_ERROR_OUT_OF_MEMORY,
        _ => CUDA_ERROR_INVALID_VALUE,
    }
}

/// A memfd of `size` bytes for device `dev`'s memory, which local processes can share.
pub(crate) fn new_memfd(size: usize, dev: CUdevice) -> CuResult<OwnedFd> {
    let name = std::ffi::CString::new(format!("nccl-smoke-sim-cuda-dev{dev}"))
        .map_err(|_| CUDA_ERROR_UNKNOWN)?;
    // SAFETY: valid NUL-terminated name.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = libc::off_t::try_from(size).map_err(|_| CUDA_ERROR_OUT_OF_MEMORY)?;
    // SAFETY: valid descriptor.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
        return Err(os_error());
    }
    Ok(fd)
}

/// Host ranges registered with `cuMemHostRegister`: start → size.
static REGISTERED: LazyLock<Mutex<BTreeMap<usize, usize>>> = LazyLock::new(Mutex::default);

fn registered() -> MutexGuard<'static, BTreeMap<usize, usize>> {
    REGISTERED.lock().unwrap_or_else(|e| e.into_inner())
}

/// `cuMemHostRegister_v2(void *p, size_t bytesize, unsigned flags)`: the memory is already
/// accessible (device memory is host memory); the range is remembered for address queries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostRegister_v2(
    p: *mut c_void,
    bytesize: usize,
    _flags: c_uint,
) -> CUresult {
    ffi("cuMemHostRegister_v2", || {
        current_device()?;
        if p.is_null() || bytesize == 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let mut r = registered();
        if r.contains_key(&(p as usize)) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        r.insert(p as usize, bytesize);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostUnregister(p: *mut c_void) -> CUresult {
    ffi("cuMemHostUnregister", || {
        platform()?;
        registered()
            .remove(&(p as usize))
            .map(|_| ())
            .ok_or(CUDA_ERROR_INVALID_VALUE)
    })
}

/// Host memory is its own device address here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostGetDevicePointer_v2(
    pdptr: *mut CUdeviceptr,
    p: *mut c_void,
    flags: c_uint,
) -> CUresult {
    ffi("cuMemHostGetDevicePointer_v2", || {
        non_null(pdptr)?;
        platform()?;
        if flags != 0 || p.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: checked non-null.
        unsafe { put(pdptr, p as CUdeviceptr) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) -> CUresult {
    ffi("cuMemAlloc_v2", || {
        non_null(dptr)?;
        let dev = current_device()?;
        fault::strike(Where::Alloc, CUDA_ERROR_OUT_OF_MEMORY)?;
        let addr = allocate(bytesize, Some(dev))?;
        // SAFETY: checked non-null.
        unsafe { put(dptr, addr as CUdeviceptr) }
    })
}

/// Does not wait for streams still using the memory (the caller must have synchronised).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFree_v2(dptr: CUdeviceptr) -> CUresult {
    ffi("cuMemFree_v2", || release(dptr as usize, false))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CUresult {
    ffi("cuMemGetInfo_v2", || {
        non_null(free)?;
        non_null(total)?;
        let dev = current_device()?;
        let p = platform()?;
        let f = p.free_bytes(dev)? as usize;
        // SAFETY: both checked non-null.
        unsafe {
            put(free, f)?;
            put(total, p.mem_bytes as usize)
        }
    })
}

fn host_alloc(pp: *mut *mut c_void, bytesize: usize) -> CuResult {
    non_null(pp)?;
    current_device()?;
    let addr = allocate(bytesize, None)?;
    // SAFETY: checked non-null.
    unsafe { put(pp, addr as *mut c_void) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytesize: usize) -> CUresult {
    ffi("cuMemAllocHost_v2", || host_alloc(pp, bytesize))
}

/// Flags (portable, device-mapped, write-combined) are accepted; the memory is ordinary.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    bytesize: usize,
    flags: c_uint,
) -> CUresult {
    ffi("cuMemHostAlloc", || {
        if flags & !0x7 != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        host_alloc(pp, bytesize)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFreeHost(p: *mut c_void) -> CUresult {
    ffi("cuMemFreeHost", || release(p as usize, true))
}

#[cfg(test)]
mod tests;
