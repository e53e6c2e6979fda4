//! cuMem virtual memory management: physical allocations are memfds, shareable between local
//! processes as POSIX file descriptors, and mapped with `mmap(MAP_FIXED)` into address ranges
//! reserved with `PROT_NONE` mappings.

use crate::device::{CUdevice, check_device, platform};
use crate::error::*;
use crate::fault;
use crate::memory::CUdeviceptr;
use nccl_smoke_fault::Where;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_int, c_uchar, c_uint, c_ushort, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

pub type CUmemGenericAllocationHandle = u64;

/// `CUmemLocation` (cuda.h 12.x).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CUmemLocation {
    pub type_: c_uint,
    pub id: c_int,
}

/// `CUmemAllocationProp::allocFlags`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CUmemAllocFlags {
    pub compression_type: c_uchar,
    pub gpu_direct_rdma_capable: c_uchar,
    pub usage: c_ushort,
    pub reserved: [c_uchar; 4],
}

/// `CUmemAllocationProp` (cuda.h 12.x).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CUmemAllocationProp {
    pub type_: c_uint,
    pub requested_handle_types: c_uint,
    pub location: CUmemLocation,
    pub win32_handle_meta_data: *mut c_void,
    pub alloc_flags: CUmemAllocFlags,
}

/// `CUmemAccessDesc` (cuda.h 12.x).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CUmemAccessDesc {
    pub location: CUmemLocation,
    pub flags: c_uint,
}

pub const CU_MEM_ALLOCATION_TYPE_PINNED: c_uint = 1;
pub const CU_MEM_LOCATION_TYPE_DEVICE: c_uint = 1;
pub const CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: c_uint = 1;
/// Both minimum and recommended granularity, as on a real GPU.
pub const GRANULARITY: usize = 2 << 20;

/// A physical allocation. Closed (and unaccounted) when the last handle and mapping go.
struct Phys {
    fd: OwnedFd,
    size: usize,
    /// Device it is accounted on (`None` for imports: the exporter accounts it).
    accounted: Option<CUdevice>,
    handle_types: c_uint,
    /// Where it lives: (location type, id) as asked at creation; imports say device 0 (a guess:
    /// a POSIX fd carries no device).
    location: (c_uint, c_int),
}

impl Drop for Phys {
    fn drop(&mut self) {
        if let (Some(dev), Ok(p)) = (self.accounted, platform()) {
            p.unreserve(dev, self.size as u64);
        }
    }
}

struct Mapping {
    size: usize,
    /// The handle it was mapped from (what `cuMemRetainAllocationHandle` gives back).
    handle: u64,
    _phys: Arc<Phys>,
}

#[derive(Default)]
struct Vmm {
    handles: HashMap<u64, Arc<Phys>>,
    /// References taken by `cuMemRetainAllocationHandle` beyond the one of creation or import:
    /// each needs its own `cuMemRelease` (NVIDIA CUDA driver API docs).
    retained: HashMap<u64, u32>,
    /// Reserved ranges: start → size.
    reserved: BTreeMap<usize, usize>,
    /// Mapped ranges: start → mapping.
    mapped: BTreeMap<usize, Mapping>,
}

impl Vmm {
    fn reservation_covers(&self, start: usize, size: usize) -> bool {
        self.reserved
            .range(..=start)
            .next_back()
            .is_some_and(|(&s, &n)| start + size <= s + n)
    }

    fn overlaps_mapping(&self, start: usize, size: usize) -> bool {
        let end = start + size;
        self.mapped
            .range(..end)
            .next_back()
            .is_some_and(|(&s, m)| s + m.size > start)
    }

    /// Whether [start, start+size) is entirely backed by mappings.
    fn fully_mapped(&self, start: usize, size: usize) -> bool {
        let end = start + size;
        let mut at = start;
        while at < end {
            match self.mapped.range(..=at).next_back() {
                Some((&s, m)) if s + m.size > at => at = s + m.size,
                _ => return false,
            }
        }
        true
    }
}

static VMM: LazyLock<Mutex<Vmm>> = LazyLock::new(Mutex::default);

fn vmm() -> MutexGuard<'static, Vmm> {
    VMM.lock().unwrap_or_else(|e| e.into_inner())
}

fn check_prop(prop: *const CUmemAllocationProp) -> CuResult<CUmemAllocationProp> {
    non_null(prop)?;
    // SAFETY: checked non-null; the caller passes a valid struct.
    let p = unsafe { prop.read() };
    if p.type_ != CU_MEM_ALLOCATION_TYPE_PINNED {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    match p.location.type_ {
        CU_MEM_LOCATION_TYPE_DEVICE => {
            check_device(p.location.id)?;
        }
        // HOST, HOST_NUMA, HOST_NUMA_CURRENT (cuda.h 12.2+).
        2..=4 => {}
        _ => return Err(CUDA_ERROR_INVALID_VALUE),
    }
    Ok(p)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetAllocationGranularity(
    granularity: *mut usize,
    prop: *const CUmemAllocationProp,
    option: c_uint,
) -> CUresult {
    ffi("cuMemGetAllocationGranularity", || {
        non_null(granularity)?;
        platform()?;
        check_prop(prop)?;
        // CU_MEM_ALLOC_GRANULARITY_MINIMUM (0) or _RECOMMENDED (1).
        if option > 1 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: checked non-null.
        unsafe { put(granularity, GRANULARITY) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemCreate(
    handle: *mut CUmemGenericAllocationHandle,
    size: usize,
    prop: *const CUmemAllocationProp,
    flags: u64,
) -> CUresult {
    ffi("cuMemCreate", || {
        non_null(handle)?;
        platform()?;
        let p = check_prop(prop)?;
        if flags != 0 || size == 0 || !size.is_multiple_of(GRANULARITY) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // Host locations (HOST, HOST_NUMA, HOST_NUMA_CURRENT: NCCL 2.32 asks for HOST_NUMA,
        // FACTS.md) are memfds too, accounted on no device.
        let on_device = p.location.type_ == CU_MEM_LOCATION_TYPE_DEVICE;
        let dev = if on_device { p.location.id } else { 0 };
        if on_device {
            platform()?.reserve(dev, size as u64)?;
        }
        let fd = match crate::memory::new_memfd(size, dev) {
            Ok(fd) => fd,
            Err(e) => {
                if on_device {
                    platform()?.unreserve(dev, size as u64);
                }
                return Err(e);
            }
        };
        let phys = Arc::new(Phys {
            fd,
            size,
            accounted: on_device.then_some(dev),
            handle_types: p.requested_handle_types,
            location: (p.location.type_, p.location.id),
        });
        let h = crate::next_handle() as u64;
        vmm().handles.insert(h, phys);
        // SAFETY: checked non-null.
        unsafe { put(handle, h) }
    })
}

/// The memory stays while mapped, as in CUDA.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemRelease(handle: CUmemGenericAllocationHandle) -> CUresult {
    ffi("cuMemRelease", || {
        platform()?;
        let mut v = vmm();
        if !v.handles.contains_key(&handle) {
            return Err(CUDA_ERROR_INVALID_HANDLE);
        }
        match v.retained.get_mut(&handle) {
            Some(n) if *n > 0 => *n -= 1,
            _ => {
                v.retained.remove(&handle);
                v.handles.remove(&handle);
            }
        }
        Ok(())
    })
}

/// Writes a new descriptor (an `int`) into `*shareableHandle`; the caller closes it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemExportToShareableHandle(
    shareable_handle: *mut c_void,
    handle: CUmemGenericAllocationHandle,
    handle_type: c_uint,
    flags: u64,
) -> CUresult {
    ffi("cuMemExportToShareableHandle", || {
        non_null(shareable_handle)?;
        platform()?;
        if flags != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        if handle_type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR {
            return Err(CUDA_ERROR_NOT_SUPPORTED);
        }
        let phys = vmm()
            .handles
            .get(&handle)
            .cloned()
            .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        if phys.handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR == 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: valid descriptor; the duplicate belongs to the caller.
        let fd = unsafe { libc::fcntl(phys.fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if fd < 0 {
            return Err(crate::memory::os_error());
        }
        // SAFETY: checked non-null; for this handle type CUDA writes an `int`.
        unsafe { put(shareable_handle.cast::<c_int>(), fd) }
    })
}

/// `osHandle` is the descriptor cast to a pointer, as in CUDA; it stays the caller's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemImportFromShareableHandle(
    handle: *mut CUmemGenericAllocationHandle,
    os_handle: *mut c_void,
    sh_handle_type: c_uint,
) -> CUresult {
    ffi("cuMemImportFromShareableHandle", || {
        non_null(handle)?;
        platform()?;
        if sh_handle_type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR {
            return Err(CUDA_ERROR_NOT_SUPPORTED);
        }
        fault::strike(Where::Import, CUDA_ERROR_INVALID_DEVICE)?;
        let raw = c_int::try_from(os_handle as isize).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        if raw < 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: fstat only writes the struct; a bad descriptor gives an error.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid out-pointer.
        if unsafe { libc::fstat(raw, &mut st) } != 0 || st.st_size <= 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: `raw` is an open descriptor (fstat succeeded); the duplicate is ours.
        let dup = unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(crate::memory::os_error());
        }
        // SAFETY: a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(dup) };
        let phys = Arc::new(Phys {
            fd,
            size: st.st_size as usize,
            accounted: None,
            handle_types: CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            location: (
                CU_MEM_LOCATION_TYPE_DEVICE,
                crate::context::current_device().unwrap_or(0),
            ),
        });
        let h = crate::next_handle() as u64;
        vmm().handles.insert(h, phys);
        // SAFETY: checked non-null.
        unsafe { put(handle, h) }
    })
}

mod map;
pub use map::*;

#[cfg(test)]
mod tests;
