//! The device queries NCCL makes of NVML: count and handles, identity and PCI information,
//! P2P and NVLink, fabric and platform, memory errors and PCIe links.

use super::*;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> NvmlReturn {
    run(|| {
        let n = ready()?.uuids.len() as c_uint;
        // SAFETY: null checked by `put`.
        unsafe { put(count, n) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount(count: *mut c_uint) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { nvmlDeviceGetCount_v2(count) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    run(|| {
        if index as usize >= ready()?.uuids.len() {
            return Err(NVML_ERROR_INVALID_ARGUMENT);
        }
        // SAFETY: null checked by `put`.
        unsafe { put(device, handle(index)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex(
    index: c_uint,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { nvmlDeviceGetHandleByIndex_v2(index, device) }
}

/// Parses `[domain:]bus:device[.function]` (hex, any case, any domain width).
pub(crate) fn parse_bus_id(s: &str) -> Option<(u32, u32, u32)> {
    let s = s.trim();
    let (head, _function) = s.rsplit_once('.').unwrap_or((s, "0"));
    let parts: Vec<&str> = head.split(':').collect();
    let hex = |p: &str| u32::from_str_radix(p, 16).ok();
    match parts.as_slice() {
        [d, b, v] => Some((hex(d)?, hex(b)?, hex(v)?)),
        [b, v] => Some((0, hex(b)?, hex(v)?)),
        _ => None,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    bus_id: *const c_char,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    run(|| {
        let d = ready()?;
        if bus_id.is_null() {
            return Err(NVML_ERROR_INVALID_ARGUMENT);
        }
        // SAFETY: checked non-null; a NUL-terminated string from the caller.
        let s = unsafe { CStr::from_ptr(bus_id) }.to_string_lossy();
        let want = parse_bus_id(&s).ok_or(NVML_ERROR_INVALID_ARGUMENT)?;
        let i = (0..d.uuids.len() as u32)
            .find(|&i| config::pci_location(i) == want)
            .ok_or(NVML_ERROR_NOT_FOUND)?;
        // SAFETY: null checked by `put`.
        unsafe { put(device, handle(i)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId(
    bus_id: *const c_char,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { nvmlDeviceGetHandleByPciBusId_v2(bus_id, device) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetIndex(device: NvmlDevice, index: *mut c_uint) -> NvmlReturn {
    run(|| {
        let i = index_of(device)?;
        // SAFETY: null checked by `put`.
        unsafe { put(index, i) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: NvmlDevice,
    uuid: *mut c_char,
    len: c_uint,
) -> NvmlReturn {
    run(|| {
        let i = index_of(device)?;
        let s = config::format_uuid(&ready()?.uuids[i as usize]);
        // SAFETY: the caller's buffer of `len` bytes.
        unsafe { put_str(uuid, len, &s) }
    })
}

/// The name the CUDA stand-in gives its devices.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: NvmlDevice,
    name: *mut c_char,
    len: c_uint,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        // SAFETY: the caller's buffer of `len` bytes.
        unsafe { put_str(name, len, "NVIDIA Simulated GPU (nccl-smoke SIMULATED)") }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(
    device: NvmlDevice,
    minor: *mut c_uint,
) -> NvmlReturn {
    run(|| {
        let i = index_of(device)?;
        // SAFETY: null checked by `put`.
        unsafe { put(minor, i) }
    })
}

/// `nvmlPciInfo_t` (nvml.h, `_v3` layout).
#[repr(C)]
pub struct NvmlPciInfo {
    pub bus_id_legacy: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub bus_id: [c_char; 32],
}

/// `nvmlPciInfoExt_t` (nvml.h, v1).
#[repr(C)]
pub struct NvmlPciInfoExt {
    pub version: c_uint,
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub base_class: c_uint,
    pub sub_class: c_uint,
    pub bus_id: [c_char; 32],
}

fn cstr_array<const N: usize>(s: &str) -> [c_char; N] {
    let mut a = [0 as c_char; N];
    for (d, b) in a.iter_mut().zip(s.bytes().take(N - 1)) {
        *d = b as c_char;
    }
    a
}

/// PCI ids of an H100 SXM5 (device 0x2330, subsystem 0x16c1), as the CUDA stand-in's attributes.
const PCI_DEVICE_ID: c_uint = 0x2330_10de;
const PCI_SUBSYSTEM_ID: c_uint = 0x16c1_10de;

fn pci_info(i: u32) -> NvmlPciInfo {
    let (domain, bus, device) = config::pci_location(i);
    NvmlPciInfo {
        bus_id_legacy: cstr_array(&format!("{domain:04X}:{bus:02X}:{device:02X}.0")),
        domain,
        bus,
        device,
        pci_device_id: PCI_DEVICE_ID,
        pci_sub_system_id: PCI_SUBSYSTEM_ID,
        bus_id: cstr_array(&format!("{domain:08X}:{bus:02X}:{device:02X}.0")),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: NvmlDevice,
    pci: *mut NvmlPciInfo,
) -> NvmlReturn {
    run(|| {
        let i = index_of(device)?;
        // SAFETY: null checked by `put`.
        unsafe { put(pci, pci_info(i)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v2(
    device: NvmlDevice,
    pci: *mut NvmlPciInfo,
) -> NvmlReturn {
    // SAFETY: same layout.
    unsafe { nvmlDeviceGetPciInfo_v3(device, pci) }
}

/// The caller sets `version`; base class 3 (display controller), subclass 2 (3D), as a data
/// centre GPU reports.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfoExt(
    device: NvmlDevice,
    pci: *mut NvmlPciInfoExt,
) -> NvmlReturn {
    run(|| {
        let i = index_of(device)?;
        if pci.is_null() {
            return Err(NVML_ERROR_INVALID_ARGUMENT);
        }
        let p = pci_info(i);
        // SAFETY: checked non-null; the version field is kept.
        unsafe {
            let version = (*pci).version;
            pci.write(NvmlPciInfoExt {
                version,
                domain: p.domain,
                bus: p.bus,
                device: p.device,
                pci_device_id: p.pci_device_id,
                pci_sub_system_id: p.pci_sub_system_id,
                base_class: 3,
                sub_class: 2,
                bus_id: p.bus_id,
            });
        }
        Ok(())
    })
}

/// 9.0, as the CUDA stand-in.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: NvmlDevice,
    major: *mut c_int,
    minor: *mut c_int,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        // SAFETY: null checked by `put`.
        unsafe {
            put(major, 9)?;
            put(minor, 0)
        }
    })
}

/// `nvmlDeviceGetP2PStatus(dev1, dev2, nvmlGpuP2PCapsIndex_t, nvmlGpuP2PStatus_t *)`: OK (0)
/// between two different devices for every capability (the CUDA stand-in lets every device
/// reach every other); `NOT_SUPPORTED` (5) for a device with itself.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetP2PStatus(
    dev1: NvmlDevice,
    dev2: NvmlDevice,
    _index: c_int,
    status: *mut c_int,
) -> NvmlReturn {
    run(|| {
        let (a, b) = (index_of(dev1)?, index_of(dev2)?);
        // SAFETY: null checked by `put`.
        unsafe { put(status, if a == b { 5 } else { 0 }) }
    })
}

/// No NVLinks: every link is inactive (`NVML_FEATURE_DISABLED`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: NvmlDevice,
    _link: c_uint,
    active: *mut c_int,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        // SAFETY: null checked by `put`.
        unsafe { put(active, 0) }
    })
}

/// No NVLinks: no capability.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkCapability(
    device: NvmlDevice,
    _link: c_uint,
    _capability: c_int,
    result: *mut c_uint,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        // SAFETY: null checked by `put`.
        unsafe { put(result, 0) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    device: NvmlDevice,
    _link: c_uint,
    _pci: *mut NvmlPciInfo,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        Err(NVML_ERROR_NOT_SUPPORTED)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo(
    device: NvmlDevice,
    link: c_uint,
    pci: *mut NvmlPciInfo,
) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { nvmlDeviceGetNvLinkRemotePciInfo_v2(device, link, pci) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemoteDeviceType(
    device: NvmlDevice,
    _link: c_uint,
    _kind: *mut c_int,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        Err(NVML_ERROR_NOT_SUPPORTED)
    })
}

/// `nvmlFieldValue_t` (nvml.h).
#[repr(C)]
pub struct NvmlFieldValue {
    pub field_id: c_uint,
    pub scope_id: c_uint,
    pub timestamp: i64,
    pub latency_usec: i64,
    pub value_type: c_int,
    pub nvml_return: NvmlReturn,
    pub value: u64,
}

/// Every field asked for reads 0 (no NVLinks, no C2C links), as an unsigned value (a guess
/// that matches "no links" for the NVLink and C2C fields NCCL reads).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: NvmlDevice,
    count: c_int,
    values: *mut NvmlFieldValue,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        if count < 0 || (count > 0 && values.is_null()) {
            return Err(NVML_ERROR_INVALID_ARGUMENT);
        }
        for k in 0..count as usize {
            // SAFETY: the caller passes `count` entries.
            let v = unsafe { &mut *values.add(k) };
            v.timestamp = 0;
            v.latency_usec = 0;
            v.value_type = 1; // NVML_VALUE_TYPE_UNSIGNED_INT
            v.nvml_return = NVML_SUCCESS;
            v.value = 0;
        }
        Ok(())
    })
}

/// No NVLink fabric (MNNVL) here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfoV(
    device: NvmlDevice,
    _info: *mut c_void,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        Err(NVML_ERROR_NOT_SUPPORTED)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuFabricInfo(
    device: NvmlDevice,
    info: *mut c_void,
) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { nvmlDeviceGetGpuFabricInfoV(device, info) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPlatformInfo(
    device: NvmlDevice,
    _info: *mut c_void,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        Err(NVML_ERROR_NOT_SUPPORTED)
    })
}

/// No memory errors.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryErrorCounter(
    device: NvmlDevice,
    _error_type: c_int,
    _counter_type: c_int,
    _location: c_int,
    count: *mut c_ulonglong,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        // SAFETY: null checked by `put`.
        unsafe { put(count, 0) }
    })
}

/// PCIe Gen5 x16, as an H100 SXM5's host link (a guess for what NCCL's topology wants).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrPcieLinkGeneration(
    device: NvmlDevice,
    gen_: *mut c_uint,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        // SAFETY: null checked by `put`.
        unsafe { put(gen_, 5) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxPcieLinkGeneration(
    device: NvmlDevice,
    gen_: *mut c_uint,
) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { nvmlDeviceGetCurrPcieLinkGeneration(device, gen_) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrPcieLinkWidth(
    device: NvmlDevice,
    width: *mut c_uint,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        // SAFETY: null checked by `put`.
        unsafe { put(width, 16) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxPcieLinkWidth(
    device: NvmlDevice,
    width: *mut c_uint,
) -> NvmlReturn {
    // SAFETY: same contract.
    unsafe { nvmlDeviceGetCurrPcieLinkWidth(device, width) }
}

/// `nvmlPcieLinkMaxSpeed_t`: 5 is `NVML_PCIE_LINK_MAX_SPEED_32000MBPS` (Gen5; nvml.h).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieLinkMaxSpeed(
    device: NvmlDevice,
    speed: *mut c_uint,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        // SAFETY: null checked by `put`.
        unsafe { put(speed, 5) }
    })
}

/// Current PCIe speed in MB/s per lane as NVML reports it (32000 for Gen5).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieSpeed(
    device: NvmlDevice,
    speed: *mut c_uint,
) -> NvmlReturn {
    run(|| {
        index_of(device)?;
        // SAFETY: null checked by `put`.
        unsafe { put(speed, 32000) }
    })
}
