use super::*;
use crate::stream::tests::{new_stream, use_device};

#[test]
fn capture_info_versions_say_not_capturing() {
    use_device(0);
    let s = new_stream();
    let (mut st, mut id, mut n) = (7, 9u64, 5usize);
    let mut g: *mut c_void = std::ptr::dangling_mut();
    let mut deps: *const c_void = std::ptr::dangling();
    let mut edges: *const c_void = std::ptr::dangling();
    // SAFETY: valid pointers.
    unsafe {
        assert_eq!(cuStreamGetCaptureInfo(s, &mut st, &mut id), CUDA_SUCCESS);
        assert_eq!((st, id), (0, 0));
        st = 7;
        assert_eq!(
            cuStreamGetCaptureInfo_v2(s, &mut st, &mut id, &mut g, &mut deps, &mut n),
            CUDA_SUCCESS
        );
        assert_eq!((st, n), (0, 0));
        assert!(g.is_null() && deps.is_null());
        n = 5;
        assert_eq!(
            cuStreamGetCaptureInfo_v3(s, &mut st, &mut id, &mut g, &mut deps, &mut edges, &mut n),
            CUDA_SUCCESS
        );
        assert!(edges.is_null());
        assert_eq!(n, 0);
        let mut mode = 2;
        assert_eq!(cuThreadExchangeStreamCaptureMode(&mut mode), CUDA_SUCCESS);
        assert_eq!(mode, 0);
        mode = 0;
        assert_eq!(cuThreadExchangeStreamCaptureMode(&mut mode), CUDA_SUCCESS);
        assert_eq!(mode, 2);
    }
}

#[test]
fn peers_and_pointer_attributes() {
    use_device(1);
    // SAFETY: valid pointers.
    unsafe {
        let mut can = -1;
        assert_eq!(cuDeviceCanAccessPeer(&mut can, 0, 1), CUDA_SUCCESS);
        assert_eq!(can, 1);
        assert_eq!(cuDeviceCanAccessPeer(&mut can, 1, 1), CUDA_SUCCESS);
        assert_eq!(can, 0);
        let mut d = -1;
        assert_eq!(
            cuDeviceGetByPCIBusId(&mut d, c"0000:2a:00.0".as_ptr()),
            CUDA_SUCCESS
        );
        assert_eq!(d, 1);
        let mut p: CUdeviceptr = 0;
        assert_eq!(crate::memory::cuMemAlloc_v2(&mut p, 1000), CUDA_SUCCESS);
        let (mut base, mut size) = (0 as CUdeviceptr, 0usize);
        assert_eq!(
            crate::ranges::cuMemGetAddressRange_v2(&mut base, &mut size, p + 10),
            CUDA_SUCCESS
        );
        assert_eq!((base, size), (p, 1000));
        let mut ty: c_uint = 0;
        let mut ord: c_int = -1;
        let attrs = [2, 9];
        let mut data = [(&raw mut ty).cast::<c_void>(), (&raw mut ord).cast()];
        assert_eq!(
            cuPointerGetAttributes(2, attrs.as_ptr(), data.as_mut_ptr(), p + 1),
            CUDA_SUCCESS
        );
        assert_eq!((ty, ord), (2, 1));
        assert_eq!(crate::memory::cuMemFree_v2(p), CUDA_SUCCESS);
    }
}
