use super::*;
use crate::devices::parse_bus_id;
use std::ptr::null_mut;

#[test]
fn devices_match_the_cuda_stand_in() {
    // SAFETY: valid pointers throughout.
    unsafe {
        let mut n = 0;
        assert_eq!(nvmlDeviceGetCount_v2(&mut n), NVML_ERROR_UNINITIALIZED);
        assert_eq!(nvmlInit_v2(), NVML_SUCCESS);
        assert_eq!(nvmlDeviceGetCount_v2(&mut n), NVML_SUCCESS);
        assert!(n >= 2, "needs the default 8 devices");
        let mut d: NvmlDevice = null_mut();
        assert_eq!(
            nvmlDeviceGetHandleByPciBusId_v2(c"0000:2a:00.0".as_ptr(), &mut d),
            NVML_SUCCESS
        );
        let mut i = 99;
        assert_eq!(nvmlDeviceGetIndex(d, &mut i), NVML_SUCCESS);
        assert_eq!(i, 1);
        let mut pci: NvmlPciInfo = std::mem::zeroed();
        assert_eq!(nvmlDeviceGetPciInfo_v3(d, &mut pci), NVML_SUCCESS);
        assert_eq!((pci.domain, pci.bus, pci.device), (0, 0x2a, 0));
        let bus = CStr::from_ptr(pci.bus_id.as_ptr()).to_str().unwrap();
        assert_eq!(bus, "00000000:2A:00.0");
        assert_eq!(parse_bus_id(bus), Some((0, 0x2a, 0)));
        let mut uuid = [0 as c_char; 96];
        assert_eq!(nvmlDeviceGetUUID(d, uuid.as_mut_ptr(), 96), NVML_SUCCESS);
        let uuid = CStr::from_ptr(uuid.as_ptr()).to_str().unwrap();
        assert_eq!(
            uuid,
            config::format_uuid(&config::uuid_for(&config::hostname(), 1))
        );
        let mut d0: NvmlDevice = null_mut();
        assert_eq!(nvmlDeviceGetHandleByIndex_v2(0, &mut d0), NVML_SUCCESS);
        let mut st = -1;
        assert_eq!(nvmlDeviceGetP2PStatus(d0, d, 0, &mut st), NVML_SUCCESS);
        assert_eq!(st, 0);
        let mut active = -1;
        assert_eq!(nvmlDeviceGetNvLinkState(d0, 0, &mut active), NVML_SUCCESS);
        assert_eq!(active, 0);
        assert_eq!(
            nvmlDeviceGetHandleByPciBusId_v2(c"0000:01:00.0".as_ptr(), &mut d),
            NVML_ERROR_NOT_FOUND
        );
        assert_eq!(nvmlShutdown(), NVML_SUCCESS);
    }
}

#[test]
fn marker_names_the_simulation() {
    // SAFETY: static NUL-terminated string.
    let s = unsafe { CStr::from_ptr(ncclSmokeSimNvml()) }
        .to_str()
        .unwrap();
    assert!(s.starts_with("nccl-smoke simulated NVML "));
}
