use super::*;
use crate::stream::tests::use_device;
use std::ptr::null_mut;

#[test]
fn modules_functions_globals_and_launches() {
    use_device(0);
    let image = [0u8; 16];
    // SAFETY: valid pointers throughout.
    unsafe {
        let mut lib: *mut c_void = null_mut();
        assert_eq!(
            cuLibraryLoadData(
                &mut lib,
                image.as_ptr().cast(),
                null_mut(),
                null_mut(),
                0,
                null_mut(),
                null_mut(),
                0
            ),
            CUDA_SUCCESS
        );
        let mut module: CUmodule = null_mut();
        assert_eq!(cuLibraryGetModule(&mut module, lib), CUDA_SUCCESS);
        let mut f: CUfunction = null_mut();
        let mut g: CUfunction = null_mut();
        assert_eq!(
            cuModuleGetFunction(&mut f, module, c"k".as_ptr()),
            CUDA_SUCCESS
        );
        assert_eq!(
            cuModuleGetFunction(&mut g, module, c"k".as_ptr()),
            CUDA_SUCCESS
        );
        assert_eq!(f, g);
        let mut pi = 0;
        assert_eq!(cuFuncGetAttribute(&mut pi, 0, f), CUDA_SUCCESS);
        assert_eq!(pi, 1024);
        assert_eq!(cuFuncSetAttribute(f, 8, 4096), CUDA_SUCCESS);
        assert_eq!(cuFuncGetAttribute(&mut pi, 8, f), CUDA_SUCCESS);
        assert_eq!(pi, 4096);
        let (mut d, mut n) = (0 as CUdeviceptr, 0usize);
        assert_eq!(
            cuModuleGetGlobal_v2(&mut d, &mut n, module, c"ncclDevFuncTable".as_ptr()),
            CUDA_SUCCESS
        );
        assert_ne!(d, 0);
        assert_eq!(n, GLOBAL_BYTES);
        assert_eq!(*(d as usize as *const u64), 0);
        let before = LAUNCHES.load(Ordering::Relaxed);
        assert_eq!(
            cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, null_mut(), null_mut(), null_mut()),
            CUDA_SUCCESS
        );
        assert!(LAUNCHES.load(Ordering::Relaxed) > before);
        assert_eq!(
            cuLaunchKernel(
                0x1234 as CUfunction,
                1,
                1,
                1,
                1,
                1,
                1,
                0,
                null_mut(),
                null_mut(),
                null_mut()
            ),
            CUDA_ERROR_INVALID_HANDLE
        );
        assert_eq!(cuLibraryUnload(lib), CUDA_SUCCESS);
        assert_eq!(cuFuncGetAttribute(&mut pi, 0, f), CUDA_ERROR_INVALID_HANDLE);
    }
}
