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

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAddressReserve(
    ptr: *mut CUdeviceptr,
    size: usize,
    alignment: usize,
    addr: CUdeviceptr,
    flags: u64,
) -> CUresult {
    ffi("cuMemAddressReserve", || {
        non_null(ptr)?;
        platform()?;
        let align = if alignment == 0 {
            GRANULARITY
        } else {
            alignment
        };
        if flags != 0 || size == 0 || !size.is_multiple_of(GRANULARITY) || !align.is_power_of_two()
        {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let span = size.checked_add(align).ok_or(CUDA_ERROR_OUT_OF_MEMORY)?;
        // SAFETY: an anonymous PROT_NONE mapping; `addr` is only a hint.
        let base = unsafe {
            libc::mmap(
                addr as usize as *mut c_void,
                span,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(CUDA_ERROR_OUT_OF_MEMORY);
        }
        let base = base as usize;
        let start = (base + align - 1) & !(align - 1);
        let (head, tail) = (start - base, base + span - (start + size));
        // SAFETY: trimming the parts of our own mapping outside [start, start+size).
        unsafe {
            if head > 0 {
                libc::munmap(base as *mut c_void, head);
            }
            if tail > 0 {
                libc::munmap((start + size) as *mut c_void, tail);
            }
        }
        vmm().reserved.insert(start, size);
        // SAFETY: checked non-null.
        unsafe { put(ptr, start as CUdeviceptr) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAddressFree(ptr: CUdeviceptr, size: usize) -> CUresult {
    ffi("cuMemAddressFree", || {
        platform()?;
        let start = ptr as usize;
        let mut v = vmm();
        if v.reserved.get(&start) != Some(&size) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        v.reserved.remove(&start);
        let inside: Vec<usize> = v
            .mapped
            .range(start..start + size)
            .map(|(&s, _)| s)
            .collect();
        for s in inside {
            v.mapped.remove(&s);
        }
        // SAFETY: the whole range is ours (reservation and any mappings in it).
        unsafe { libc::munmap(start as *mut c_void, size) };
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemMap(
    ptr: CUdeviceptr,
    size: usize,
    offset: usize,
    handle: CUmemGenericAllocationHandle,
    flags: u64,
) -> CUresult {
    ffi("cuMemMap", || {
        platform()?;
        let start = ptr as usize;
        let page = GRANULARITY.min(4096);
        if flags != 0 || size == 0 || !start.is_multiple_of(page) || !offset.is_multiple_of(page) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let mut v = vmm();
        let phys = v
            .handles
            .get(&handle)
            .cloned()
            .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        let end = offset.checked_add(size).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        if end > phys.size || !v.reservation_covers(start, size) || v.overlaps_mapping(start, size)
        {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let off = libc::off_t::try_from(offset).map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        // SAFETY: replaces part of our own PROT_NONE reservation (checked above) with the memfd.
        let got = unsafe {
            libc::mmap(
                start as *mut c_void,
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                phys.fd.as_raw_fd(),
                off,
            )
        };
        if got == libc::MAP_FAILED {
            return Err(CUDA_ERROR_OUT_OF_MEMORY);
        }
        v.mapped.insert(
            start,
            Mapping {
                size,
                handle,
                _phys: phys,
            },
        );
        Ok(())
    })
}

/// The range must cover whole mappings; it goes back to being reserved.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemUnmap(ptr: CUdeviceptr, size: usize) -> CUresult {
    ffi("cuMemUnmap", || {
        platform()?;
        let start = ptr as usize;
        let end = start.checked_add(size).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        let mut v = vmm();
        if size == 0 || !v.fully_mapped(start, size) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let hit: Vec<(usize, usize)> = v
            .mapped
            .range(..end)
            .filter(|(s, m)| *s + m.size > start)
            .map(|(&s, m)| (s, m.size))
            .collect();
        if hit.iter().any(|&(s, n)| s < start || s + n > end) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: turns our own mappings back into a PROT_NONE reservation.
        let got = unsafe {
            libc::mmap(
                start as *mut c_void,
                size,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if got == libc::MAP_FAILED {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        for (s, _) in hit {
            v.mapped.remove(&s);
        }
        Ok(())
    })
}

/// Checks the descriptors and that the range is mapped; mappings are always read-write here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemSetAccess(
    ptr: CUdeviceptr,
    size: usize,
    desc: *const CUmemAccessDesc,
    count: usize,
) -> CUresult {
    ffi("cuMemSetAccess", || {
        platform()?;
        if desc.is_null() || count == 0 || size == 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: the caller passes `count` descriptors.
        let descs = unsafe { std::slice::from_raw_parts(desc, count) };
        for d in descs {
            if !matches!(d.flags, 0 | 1 | 3) {
                return Err(CUDA_ERROR_INVALID_VALUE);
            }
            match d.location.type_ {
                CU_MEM_LOCATION_TYPE_DEVICE => {
                    check_device(d.location.id)?;
                }
                2..=4 => {}
                _ => return Err(CUDA_ERROR_INVALID_VALUE),
            }
        }
        let start = ptr as usize;
        start.checked_add(size).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        if !vmm().fully_mapped(start, size) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        Ok(())
    })
}

/// The cuMem mapping holding `addr`: (start, size, device of its allocation).
pub(crate) fn find_mapping(addr: usize) -> Option<(usize, usize, CUdevice)> {
    let v = vmm();
    let (&s, m) = v.mapped.range(..=addr).next_back()?;
    (addr < s + m.size).then(|| (s, m.size, m._phys.location.1.max(0)))
}

/// `cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)`: the handle
/// the allocation mapped at `addr` was mapped from, with one more reference (NVIDIA CUDA driver
/// API docs; NCCL's `ncclCuMemFree` retains, releases, unmaps, then releases again).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemRetainAllocationHandle(
    handle: *mut CUmemGenericAllocationHandle,
    addr: *mut c_void,
) -> CUresult {
    ffi("cuMemRetainAllocationHandle", || {
        non_null(handle)?;
        platform()?;
        let mut v = vmm();
        let a = addr as usize;
        let (h, phys) = match v.mapped.range(..=a).next_back() {
            Some((&s, m)) if a < s + m.size => (m.handle, Arc::clone(&m._phys)),
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        };
        match v.handles.entry(h) {
            std::collections::hash_map::Entry::Occupied(_) => {
                *v.retained.entry(h).or_insert(0) += 1;
            }
            // Released already, still mapped: the handle lives again.
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(phys);
            }
        }
        // SAFETY: checked non-null.
        unsafe { put(handle, h) }
    })
}

/// `cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, handle)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetAllocationPropertiesFromHandle(
    prop: *mut CUmemAllocationProp,
    handle: CUmemGenericAllocationHandle,
) -> CUresult {
    ffi("cuMemGetAllocationPropertiesFromHandle", || {
        non_null(prop)?;
        platform()?;
        let phys = vmm()
            .handles
            .get(&handle)
            .cloned()
            .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        let p = CUmemAllocationProp {
            type_: CU_MEM_ALLOCATION_TYPE_PINNED,
            requested_handle_types: phys.handle_types,
            location: CUmemLocation {
                type_: phys.location.0,
                id: phys.location.1,
            },
            win32_handle_meta_data: std::ptr::null_mut(),
            alloc_flags: CUmemAllocFlags {
                compression_type: 0,
                gpu_direct_rdma_capable: 0,
                usage: 0,
                reserved: [0; 4],
            },
        };
        // SAFETY: checked non-null.
        unsafe { put(prop, p) }
    })
}

/// `cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)`:
/// every mapping is read-write for every device here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetAccess(
    flags: *mut u64,
    location: *const CUmemLocation,
    ptr: CUdeviceptr,
) -> CUresult {
    ffi("cuMemGetAccess", || {
        non_null(flags)?;
        non_null(location)?;
        platform()?;
        if !vmm().fully_mapped(ptr as usize, 1) {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: checked non-null. CU_MEM_ACCESS_FLAGS_PROT_READWRITE.
        unsafe { put(flags, 3) }
    })
}

#[cfg(test)]
mod tests;
