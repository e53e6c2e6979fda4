use super::*;
use crate::copy::*;
use crate::stream::tests::{new_stream, use_device};
use crate::stream::{cuStreamDestroy_v2, cuStreamSynchronize};
use std::ptr::null_mut;

fn alloc(n: usize) -> CUdeviceptr {
    let mut d: CUdeviceptr = 0;
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { cuMemAlloc_v2(&mut d, n) }, CUDA_SUCCESS);
    d
}

#[test]
fn memcpy_round_trip() {
    use_device(3);
    let n = 1 << 16;
    let src: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    let mut back = vec![0u8; n];
    let (a, b) = (alloc(n), alloc(n));
    assert_eq!(a % ALIGN as u64, 0);
    let s = new_stream();
    // SAFETY: buffers of `n` bytes, kept alive until the stream is synchronised.
    unsafe {
        assert_eq!(
            cuMemcpyHtoDAsync_v2(a, src.as_ptr().cast(), n, s),
            CUDA_SUCCESS
        );
        assert_eq!(cuMemcpyDtoDAsync_v2(b, a, n, s), CUDA_SUCCESS);
        assert_eq!(
            cuMemcpyDtoHAsync_v2(back.as_mut_ptr().cast(), b, n, s),
            CUDA_SUCCESS
        );
        assert_eq!(cuStreamSynchronize(s), CUDA_SUCCESS);
        assert_eq!(back, src);

        assert_eq!(cuMemsetD8Async(b, 0xab, n, s), CUDA_SUCCESS);
        assert_eq!(cuMemcpyAsync(a, b, n, s), CUDA_SUCCESS);
        assert_eq!(cuStreamSynchronize(s), CUDA_SUCCESS);
        assert_eq!(
            cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), a, n),
            CUDA_SUCCESS
        );
        assert!(back.iter().all(|&x| x == 0xab));

        assert_eq!(cuMemsetD32_v2(a, 0x0102_0304, n / 4), CUDA_SUCCESS);
        assert_eq!(cuMemcpyDtoD_v2(b, a, n), CUDA_SUCCESS);
        let mut words = vec![0u32; n / 4];
        assert_eq!(
            cuMemcpy(words.as_mut_ptr() as CUdeviceptr, b, n),
            CUDA_SUCCESS
        );
        assert!(words.iter().all(|&w| w == 0x0102_0304));
        assert_eq!(cuMemsetD32Async(a + 1, 0, 4, s), CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuMemsetD8_v2(a, 1, n), CUDA_SUCCESS);
        assert_eq!(cuMemcpyHtoD_v2(b, src.as_ptr().cast(), n), CUDA_SUCCESS);
        assert_eq!(
            cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), b, n),
            CUDA_SUCCESS
        );
        assert_eq!(back, src);
        assert_eq!(
            cuMemcpyHtoD_v2(0, src.as_ptr().cast(), 1),
            CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(cuMemcpyHtoD_v2(0, src.as_ptr().cast(), 0), CUDA_SUCCESS);

        assert_eq!(cuStreamDestroy_v2(s), CUDA_SUCCESS);
        assert_eq!(cuMemFree_v2(a), CUDA_SUCCESS);
        assert_eq!(cuMemFree_v2(b), CUDA_SUCCESS);
        assert_eq!(cuMemFree_v2(b), CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuMemFree_v2(0), CUDA_SUCCESS);
    }
}

#[test]
fn allocation_is_accounted_until_out_of_memory() {
    use_device(7);
    let (mut free0, mut total) = (0usize, 0usize);
    // SAFETY: valid out-pointers; the allocation is freed below.
    unsafe {
        assert_eq!(cuMemGetInfo_v2(&mut free0, &mut total), CUDA_SUCCESS);
        assert_eq!(total, 80 << 30);
        assert_eq!(free0, total);
        let a = alloc(3 << 20);
        let mut free1 = 0usize;
        assert_eq!(cuMemGetInfo_v2(&mut free1, &mut total), CUDA_SUCCESS);
        assert_eq!(free0 - free1, 3 << 20);
        // More than what is left: refused before any host memory is touched.
        let mut d: CUdeviceptr = 0;
        assert_eq!(cuMemAlloc_v2(&mut d, free1 + 1), CUDA_ERROR_OUT_OF_MEMORY);
        assert_eq!(cuMemAlloc_v2(&mut d, 0), CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuMemAlloc_v2(null_mut(), 16), CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuMemFree_v2(a), CUDA_SUCCESS);
        assert_eq!(cuMemGetInfo_v2(&mut free1, &mut total), CUDA_SUCCESS);
        assert_eq!(free1, free0);
    }
}

#[test]
fn host_memory_is_not_device_memory() {
    use_device(3);
    let mut p: *mut c_void = null_mut();
    let mut q: *mut c_void = null_mut();
    // SAFETY: valid out-pointers; freed below.
    unsafe {
        assert_eq!(cuMemAllocHost_v2(&mut p, 4096), CUDA_SUCCESS);
        assert_eq!(cuMemHostAlloc(&mut q, 4096, 1), CUDA_SUCCESS);
        assert_eq!(cuMemFree_v2(p as CUdeviceptr), CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuMemFreeHost(p), CUDA_SUCCESS);
        assert_eq!(cuMemFreeHost(q), CUDA_SUCCESS);
        assert_eq!(cuMemFreeHost(q), CUDA_ERROR_INVALID_VALUE);
    }
}

#[test]
fn dma_buf_export_of_a_device_range() {
    use crate::ranges::cuMemGetHandleForAddressRange;
    use_device(1);
    let d = alloc(1 << 16);
    let mut fd: std::ffi::c_int = -1;
    let out = (&raw mut fd).cast::<c_void>();
    // SAFETY: valid out-pointer (an int) throughout.
    unsafe {
        assert_eq!(
            cuMemGetHandleForAddressRange(out, d, 1 << 16, 1, 0),
            CUDA_SUCCESS
        );
        assert!(fd >= 0 && libc::fcntl(fd, libc::F_GETFD) >= 0);
        libc::close(fd);
        // Past the block's end, a host range, a type other than DMA_BUF_FD: refused.
        for (ptr, size, kind) in [(d, (1 << 16) + 1, 1), (d, 64, 0), (d + 64, 1 << 16, 1)] {
            assert_eq!(
                cuMemGetHandleForAddressRange(out, ptr, size, kind, 0),
                CUDA_ERROR_INVALID_VALUE
            );
        }
        let mut h: *mut c_void = null_mut();
        assert_eq!(cuMemAllocHost_v2(&mut h, 4096), CUDA_SUCCESS);
        assert_eq!(
            cuMemGetHandleForAddressRange(out, h as CUdeviceptr, 4096, 1, 0),
            CUDA_ERROR_INVALID_VALUE
        );
        assert_eq!(cuMemFreeHost(h), CUDA_SUCCESS);
        assert_eq!(cuMemFree_v2(d), CUDA_SUCCESS);
    }
}
