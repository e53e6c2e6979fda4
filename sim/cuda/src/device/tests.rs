use super::*;
use std::ffi::CStr;

#[test]
fn init_and_device_queries() {
    init_for_tests();
    let mut v = 0;
    // SAFETY: valid out-pointers and buffers throughout.
    unsafe {
        assert_eq!(cuInit(0), CUDA_SUCCESS);
        assert_eq!(cuInit(1), CUDA_ERROR_INVALID_VALUE);
        assert_eq!(cuDriverGetVersion(&mut v), CUDA_SUCCESS);
        assert!(v > 0);
        let mut n = 0;
        assert_eq!(cuDeviceGetCount(&mut n), CUDA_SUCCESS);
        assert_eq!(n, 8);
        let mut d = -1;
        assert_eq!(cuDeviceGet(&mut d, 3), CUDA_SUCCESS);
        assert_eq!(d, 3);
        assert_eq!(cuDeviceGet(&mut d, 8), CUDA_ERROR_INVALID_DEVICE);
        assert_eq!(cuDeviceGet(&mut d, -1), CUDA_ERROR_INVALID_DEVICE);
        assert_eq!(
            cuDeviceGet(std::ptr::null_mut(), 0),
            CUDA_ERROR_INVALID_VALUE
        );

        let mut name = [0 as c_char; 128];
        assert_eq!(cuDeviceGetName(name.as_mut_ptr(), 128, 0), CUDA_SUCCESS);
        assert_eq!(CStr::from_ptr(name.as_ptr()).to_str().unwrap(), DEVICE_NAME);
        assert_eq!(cuDeviceGetName(name.as_mut_ptr(), 7, 0), CUDA_SUCCESS);
        assert_eq!(CStr::from_ptr(name.as_ptr()).to_str().unwrap(), "NVIDIA");

        let mut bus = [0 as c_char; 64];
        assert_eq!(cuDeviceGetPCIBusId(bus.as_mut_ptr(), 64, 1), CUDA_SUCCESS);
        assert_eq!(
            CStr::from_ptr(bus.as_ptr()).to_str().unwrap(),
            "0000:2A:00.0"
        );
        let mut pi = 0;
        assert_eq!(cuDeviceGetAttribute(&mut pi, 33, 1), CUDA_SUCCESS);
        assert_eq!(pi, 0x2a);
        assert_eq!(cuDeviceGetAttribute(&mut pi, 75, 1), CUDA_SUCCESS);
        assert_eq!(pi, 9);
        assert_eq!(cuDeviceGetAttribute(&mut pi, 16, 1), CUDA_SUCCESS);
        assert_eq!(pi, 132);
        assert_eq!(cuDeviceGetAttribute(&mut pi, 100_000, 1), CUDA_SUCCESS);
        assert_eq!(pi, 0);
        assert_eq!(
            cuDeviceGetAttribute(&mut pi, 16, 99),
            CUDA_ERROR_INVALID_DEVICE
        );

        let mut a = CUuuid { bytes: [0; 16] };
        let mut b = CUuuid { bytes: [0; 16] };
        assert_eq!(cuDeviceGetUuid(&mut a, 0), CUDA_SUCCESS);
        assert_eq!(cuDeviceGetUuid_v2(&mut b, 1), CUDA_SUCCESS);
        assert_ne!(a.bytes, b.bytes);

        let mut total = 0usize;
        assert_eq!(cuDeviceTotalMem_v2(&mut total, 0), CUDA_SUCCESS);
        assert_eq!(total, 80 << 30);
    }
}

#[test]
fn build_refuses_bad_or_empty_setups() {
    let cfg = |gpus, visible: Option<&str>| Config {
        gpus,
        mem_bytes: Ok(1 << 30),
        visible: visible.map(str::to_owned),
        hostname: "h".into(),
        compute_cap: Ok((9, 0)),
    };
    assert_eq!(
        Platform::build(&cfg(Err("bad".into()), None)).unwrap_err(),
        CUDA_ERROR_NO_DEVICE
    );
    assert_eq!(
        Platform::build(&cfg(Ok(0), None)).unwrap_err(),
        CUDA_ERROR_NO_DEVICE
    );
    assert_eq!(
        Platform::build(&cfg(Ok(4), Some(""))).unwrap_err(),
        CUDA_ERROR_NO_DEVICE
    );
    let p = Platform::build(&cfg(Ok(4), Some("3,1"))).unwrap();
    assert_eq!(
        p.gpus.iter().map(|g| g.physical).collect::<Vec<_>>(),
        vec![3, 1]
    );
}

#[test]
fn accounting_refuses_what_does_not_fit() {
    let p = Platform::build(&Config {
        gpus: Ok(2),
        mem_bytes: Ok(1 << 30),
        visible: None,
        hostname: "h".into(),
        compute_cap: Ok((9, 0)),
    })
    .unwrap();
    assert_eq!(p.reserve(0, 768 << 20), Ok(()));
    assert_eq!(p.free_bytes(0), Ok(256 << 20));
    assert_eq!(p.reserve(0, 512 << 20), Err(CUDA_ERROR_OUT_OF_MEMORY));
    assert_eq!(p.reserve(1, 512 << 20), Ok(()));
    p.unreserve(0, 768 << 20);
    assert_eq!(p.reserve(0, 1 << 30), Ok(()));
    assert_eq!(p.reserve(0, 1), Err(CUDA_ERROR_OUT_OF_MEMORY));
    assert_eq!(p.reserve(5, 1), Err(CUDA_ERROR_INVALID_DEVICE));
}
