use super::*;
use crate::stream::tests::use_device;

fn prop(dev: CUdevice) -> CUmemAllocationProp {
    CUmemAllocationProp {
        type_: CU_MEM_ALLOCATION_TYPE_PINNED,
        requested_handle_types: CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        location: CUmemLocation {
            type_: CU_MEM_LOCATION_TYPE_DEVICE,
            id: dev,
        },
        win32_handle_meta_data: std::ptr::null_mut(),
        alloc_flags: CUmemAllocFlags {
            compression_type: 0,
            gpu_direct_rdma_capable: 0,
            usage: 0,
            reserved: [0; 4],
        },
    }
}

#[test]
fn layouts_match_cuda_h() {
    assert_eq!(std::mem::size_of::<CUmemAllocationProp>(), 32);
    assert_eq!(
        std::mem::offset_of!(CUmemAllocationProp, win32_handle_meta_data),
        16
    );
    assert_eq!(std::mem::offset_of!(CUmemAllocationProp, alloc_flags), 24);
    assert_eq!(std::mem::size_of::<CUmemAccessDesc>(), 12);
}

#[test]
fn export_import_share_the_same_memory() {
    use_device(6);
    let p = prop(6);
    let mut gran = 0usize;
    let mut free_before = 0usize;
    let mut total = 0usize;
    // SAFETY: valid out-pointers; every resource is released below.
    unsafe {
        assert_eq!(
            cuMemGetAllocationGranularity(&mut gran, &p, 1),
            CUDA_SUCCESS
        );
        assert_eq!(gran, GRANULARITY);
        assert_eq!(
            crate::memory::cuMemGetInfo_v2(&mut free_before, &mut total),
            CUDA_SUCCESS
        );
        let size = 2 * gran;
        let mut h1 = 0u64;
        assert_eq!(cuMemCreate(&mut h1, size, &p, 0), CUDA_SUCCESS);
        assert_eq!(
            cuMemCreate(&mut h1, size + 1, &p, 0),
            CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(
            cuMemCreate(&mut h1, size, &prop(99), 0),
            CUDA_ERROR_INVALID_DEVICE
        );
        let mut free_now = 0usize;
        assert_eq!(
            crate::memory::cuMemGetInfo_v2(&mut free_now, &mut total),
            CUDA_SUCCESS
        );
        assert_eq!(free_before - free_now, size);

        let mut fd: c_int = -1;
        assert_eq!(
            cuMemExportToShareableHandle(
                (&mut fd as *mut c_int).cast(),
                h1,
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0
            ),
            CUDA_SUCCESS
        );
        assert!(fd >= 0);
        let mut h2 = 0u64;
        assert_eq!(
            cuMemImportFromShareableHandle(
                &mut h2,
                fd as isize as *mut c_void,
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            ),
            CUDA_SUCCESS
        );
        assert_ne!(h1, h2);
        libc::close(fd);

        let (mut a, mut b) = (0u64, 0u64);
        assert_eq!(cuMemAddressReserve(&mut a, size, 0, 0, 0), CUDA_SUCCESS);
        assert_eq!(cuMemAddressReserve(&mut b, size, 0, 0, 0), CUDA_SUCCESS);
        assert_eq!(a % gran as u64, 0);
        assert_eq!(cuMemMap(a, size, 0, h1, 0), CUDA_SUCCESS);
        assert_eq!(cuMemMap(a, size, 0, h1, 0), CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuMemMap(b, size, 0, h2, 0), CUDA_SUCCESS);
        let access = CUmemAccessDesc {
            location: p.location,
            flags: 3,
        };
        assert_eq!(cuMemSetAccess(a, size, &access, 1), CUDA_SUCCESS);
        assert_eq!(cuMemSetAccess(b, size, &access, 1), CUDA_SUCCESS);
        // Released handles stay alive while mapped.
        assert_eq!(cuMemRelease(h1), CUDA_SUCCESS);
        assert_eq!(cuMemRelease(h1), CUDA_ERROR_INVALID_HANDLE);

        let pa = std::slice::from_raw_parts_mut(a as usize as *mut u8, size);
        let pb = std::slice::from_raw_parts(b as usize as *const u8, size);
        for (i, x) in pa.iter_mut().enumerate() {
            *x = (i % 253) as u8;
        }
        assert!(pb.iter().enumerate().all(|(i, &x)| x == (i % 253) as u8));

        assert_eq!(cuMemUnmap(a, size), CUDA_SUCCESS);
        assert_eq!(
            cuMemSetAccess(a, size, &access, 1),
            CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(cuMemUnmap(b, size), CUDA_SUCCESS);
        assert_eq!(cuMemUnmap(b, size), CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuMemAddressFree(a, size), CUDA_SUCCESS);
        assert_eq!(cuMemAddressFree(b, size), CUDA_SUCCESS);
        assert_eq!(cuMemAddressFree(b, size), CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuMemRelease(h2), CUDA_SUCCESS);
        assert_eq!(
            crate::memory::cuMemGetInfo_v2(&mut free_now, &mut total),
            CUDA_SUCCESS
        );
        assert_eq!(free_now, free_before);
        assert_eq!(
            cuMemImportFromShareableHandle(
                &mut h2,
                -1isize as *mut c_void,
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            ),
            CUDA_ERROR_INVALID_VALUE
        );
    }
}
