//! Address ranges: reserved, mapped onto physical allocations, given access, and released.

use super::*;

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
