//! Initialisation and the simulated devices: `cuInit`, `cuDriverGetVersion`, `cuDevice*`.

use crate::config::{self, Config};
use crate::error::*;
use crate::fault;
use nccl_smoke_fault::Where;
use std::ffi::{c_char, c_int, c_uint};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub type CUdevice = c_int;

/// `CUuuid` (cuda.h): 16 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CUuuid {
    pub bytes: [c_char; 16],
}

pub const DEVICE_NAME: &str = "NVIDIA Simulated GPU (nccl-smoke SIMULATED)";

/// One physical device, as seen through `CUDA_VISIBLE_DEVICES`.
#[derive(Debug)]
pub struct Gpu {
    /// Index among the host's physical devices.
    pub physical: u32,
    pub uuid: [u8; 16],
    /// Bytes allocated on it (cuMemAlloc and cuMemCreate).
    pub used: AtomicU64,
}

#[derive(Debug)]
pub struct Platform {
    /// Visible devices, by ordinal.
    pub gpus: Vec<Gpu>,
    /// Memory of each device.
    pub mem_bytes: u64,
    /// What every device reports as its compute capability.
    pub compute_cap: (i32, i32),
}

impl Platform {
    /// Builds the platform, or the code `cuInit` returns (reasons go to stderr).
    pub fn build(cfg: &Config) -> CuResult<Platform> {
        let report = |msg: &str| eprintln!("nccl-smoke simulated CUDA driver: {msg}");
        let gpus = cfg.gpus.clone().map_err(|e| {
            report(&e);
            CUDA_ERROR_NO_DEVICE
        })?;
        let mem_bytes = cfg.mem_bytes.clone().map_err(|e| {
            report(&e);
            CUDA_ERROR_NO_DEVICE
        })?;
        let compute_cap = cfg.compute_cap.clone().map_err(|e| {
            report(&e);
            CUDA_ERROR_NO_DEVICE
        })?;
        let uuids: Vec<[u8; 16]> = (0..gpus)
            .map(|i| config::uuid_for(&cfg.hostname, i))
            .collect();
        let visible = config::visible_devices(cfg.visible.as_deref(), &uuids);
        if visible.is_empty() {
            return Err(CUDA_ERROR_NO_DEVICE);
        }
        Ok(Platform {
            gpus: visible
                .into_iter()
                .map(|i| Gpu {
                    physical: i,
                    uuid: uuids[i as usize],
                    used: AtomicU64::new(0),
                })
                .collect(),
            mem_bytes,
            compute_cap,
        })
    }

    pub fn gpu(&self, dev: CUdevice) -> CuResult<&Gpu> {
        usize::try_from(dev)
            .ok()
            .and_then(|i| self.gpus.get(i))
            .ok_or(CUDA_ERROR_INVALID_DEVICE)
    }

    /// Accounts `bytes` on `dev`; `CUDA_ERROR_OUT_OF_MEMORY` when it does not fit.
    pub fn reserve(&self, dev: CUdevice, bytes: u64) -> CuResult {
        let gpu = self.gpu(dev)?;
        gpu.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&u| u <= self.mem_bytes)
            })
            .map(|_| ())
            .map_err(|_| CUDA_ERROR_OUT_OF_MEMORY)
    }

    pub fn unreserve(&self, dev: CUdevice, bytes: u64) {
        if let Ok(gpu) = self.gpu(dev) {
            let _ = gpu
                .used
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                    Some(u.saturating_sub(bytes))
                });
        }
    }

    pub fn free_bytes(&self, dev: CUdevice) -> CuResult<u64> {
        let used = self.gpu(dev)?.used.load(Ordering::Acquire);
        Ok(self.mem_bytes.saturating_sub(used))
    }
}

static PLATFORM: OnceLock<CuResult<Platform>> = OnceLock::new();
static READY: AtomicBool = AtomicBool::new(false);

/// The platform once `cuInit` has succeeded, else `CUDA_ERROR_NOT_INITIALIZED`.
pub fn platform() -> CuResult<&'static Platform> {
    if !READY.load(Ordering::Acquire) {
        return Err(CUDA_ERROR_NOT_INITIALIZED);
    }
    match PLATFORM.get() {
        Some(Ok(p)) => Ok(p),
        _ => Err(CUDA_ERROR_NOT_INITIALIZED),
    }
}

/// Checks that `dev` is a valid ordinal (and that the driver is initialised).
pub fn check_device(dev: CUdevice) -> CuResult<&'static Gpu> {
    platform()?.gpu(dev)
}

fn init_with(cfg: impl FnOnce() -> Config) -> CuResult {
    match PLATFORM.get_or_init(|| Platform::build(&cfg())) {
        Ok(_) => {
            READY.store(true, Ordering::Release);
            Ok(())
        }
        Err(e) => Err(*e),
    }
}

/// Initialises the driver for unit tests with a fixed configuration (8 devices of 80 GiB,
/// every device visible), whatever the environment says.
#[cfg(test)]
pub fn init_for_tests() {
    let r = init_with(|| Config {
        gpus: Ok(8),
        mem_bytes: Ok(80 << 30),
        visible: None,
        hostname: "unit-test-host".into(),
        compute_cap: Ok((9, 0)),
    });
    assert_eq!(r, Ok(()));
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuInit(flags: c_uint) -> CUresult {
    ffi("cuInit", || {
        if flags != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        fault::spec_ok()?;
        fault::strike(Where::Driver, CUDA_ERROR_NO_DEVICE)?;
        init_with(Config::from_env)
    })
}

/// What `cuDriverGetVersion` reports (`NCCL_SMOKE_SIM_DRIVER_VERSION`, read once).
pub fn driver_version() -> c_int {
    static VERSION: OnceLock<c_int> = OnceLock::new();
    *VERSION.get_or_init(|| {
        config::parse_driver_version(config::var(config::VERSION_ENV).as_deref()).unwrap_or_else(
            |e| {
                eprintln!(
                    "nccl-smoke simulated CUDA driver: {e}; reporting {}",
                    config::DEFAULT_DRIVER_VERSION
                );
                config::DEFAULT_DRIVER_VERSION
            },
        )
    })
}

/// Works before `cuInit`, as in the real driver.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CUresult {
    ffi("cuDriverGetVersion", || {
        let v = driver_version();
        // SAFETY: out-pointer from the caller, null checked by `put`.
        unsafe { put(version, v) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CUresult {
    ffi("cuDeviceGetCount", || {
        non_null(count)?;
        let n = platform()?.gpus.len() as c_int;
        // SAFETY: checked non-null.
        unsafe { put(count, n) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> CUresult {
    ffi("cuDeviceGet", || {
        non_null(device)?;
        platform()?;
        fault::strike(Where::Device, CUDA_ERROR_INVALID_DEVICE)?;
        check_device(ordinal)?;
        // SAFETY: checked non-null.
        unsafe { put(device, ordinal) }
    })
}

/// Copies `s` into a caller buffer of `len` bytes, truncating, always NUL-terminated.
///
/// # Safety
/// `buf` must be valid for `len` bytes of writes.
unsafe fn copy_cstr(buf: *mut c_char, len: c_int, s: &str) -> CuResult {
    if buf.is_null() || len <= 0 {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    let n = s.len().min(len as usize - 1);
    // SAFETY: `n + 1 <= len` bytes, as the caller vouches.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, n);
        buf.add(n).write(0);
    }
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult {
    ffi("cuDeviceGetName", || {
        check_device(dev)?;
        // SAFETY: the caller passes a buffer of `len` bytes.
        unsafe { copy_cstr(name, len, DEVICE_NAME) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice) -> CUresult {
    ffi("cuDeviceGetUuid", || {
        non_null(uuid)?;
        let gpu = check_device(dev)?;
        let bytes = gpu.uuid.map(|b| b as c_char);
        // SAFETY: checked non-null.
        unsafe { put(uuid, CUuuid { bytes }) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetUuid_v2(uuid: *mut CUuuid, dev: CUdevice) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuDeviceGetUuid(uuid, dev) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetPCIBusId(
    bus_id: *mut c_char,
    len: c_int,
    dev: CUdevice,
) -> CUresult {
    ffi("cuDeviceGetPCIBusId", || {
        let gpu = check_device(dev)?;
        // SAFETY: the caller passes a buffer of `len` bytes.
        unsafe { copy_cstr(bus_id, len, &config::bus_id_string(gpu.physical)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) -> CUresult {
    ffi("cuDeviceTotalMem_v2", || {
        non_null(bytes)?;
        check_device(dev)?;
        let total = platform()?.mem_bytes as usize;
        // SAFETY: checked non-null.
        unsafe { put(bytes, total) }
    })
}

/// A capability the devices have unless `var` is `0` (read once).
fn capability(var: &str, cell: &'static std::sync::OnceLock<bool>) -> bool {
    *cell.get_or_init(|| std::env::var(var).map_or(true, |v| v.trim() != "0"))
}

/// `NCCL_SMOKE_SIM_DMA_BUF`: whether the devices export memory as DMA-BUF
/// (`CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`); `0` acts out a driver that does not (default 1).
fn dma_buf() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    capability("NCCL_SMOKE_SIM_DMA_BUF", &ON)
}

/// `NCCL_SMOKE_SIM_GPU_DIRECT_RDMA`: whether the devices support GPUDirect RDMA
/// (`CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED`, which NCCL reads as the GPU's own "gdr":
/// NVIDIA/nccl v2.19.3-1 src/net.cc `ncclGpuGdrSupport`); `0` acts out a GPU or platform
/// without it (default 1).
fn gpu_direct_rdma() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    capability("NCCL_SMOKE_SIM_GPU_DIRECT_RDMA", &ON)
}

/// The value of a `CUdevice_attribute` (numbers as in cuda.h 12.8) for an H100-like device;
/// attributes not listed are 0.
pub fn attribute(attrib: c_uint, gpu: &Gpu, ordinal: CUdevice, cc: (i32, i32)) -> c_int {
    let (domain, bus, dev) = config::pci_location(gpu.physical);
    match attrib {
        1 => 1024,                         // MAX_THREADS_PER_BLOCK
        2 | 3 => 1024,                     // MAX_BLOCK_DIM_X/Y
        4 => 64,                           // MAX_BLOCK_DIM_Z
        5 => i32::MAX,                     // MAX_GRID_DIM_X
        6 | 7 => 65535,                    // MAX_GRID_DIM_Y/Z
        8 => 49152,                        // MAX_SHARED_MEMORY_PER_BLOCK
        9 => 65536,                        // TOTAL_CONSTANT_MEMORY
        10 => 32,                          // WARP_SIZE
        11 => i32::MAX,                    // MAX_PITCH
        12 => 65536,                       // MAX_REGISTERS_PER_BLOCK
        13 => 1_980_000,                   // CLOCK_RATE (kHz)
        14 => 512,                         // TEXTURE_ALIGNMENT
        15 => 1,                           // GPU_OVERLAP
        16 => 132,                         // MULTIPROCESSOR_COUNT
        19 => 1,                           // CAN_MAP_HOST_MEMORY
        30 => 512,                         // SURFACE_ALIGNMENT
        31 => 1,                           // CONCURRENT_KERNELS
        32 => 1,                           // ECC_ENABLED
        33 => bus as c_int,                // PCI_BUS_ID
        34 => dev as c_int,                // PCI_DEVICE_ID
        36 => 2_619_000,                   // MEMORY_CLOCK_RATE (kHz)
        37 => 5120,                        // GLOBAL_MEMORY_BUS_WIDTH
        38 => 50 << 20,                    // L2_CACHE_SIZE
        39 => 2048,                        // MAX_THREADS_PER_MULTIPROCESSOR
        40 => 3,                           // ASYNC_ENGINE_COUNT
        41 => 1,                           // UNIFIED_ADDRESSING
        50 => domain as c_int,             // PCI_DOMAIN_ID
        51 => 32,                          // TEXTURE_PITCH_ALIGNMENT
        75 => cc.0,                        // COMPUTE_CAPABILITY_MAJOR
        76 => cc.1,                        // COMPUTE_CAPABILITY_MINOR
        78..=80 => 1,                      // STREAM_PRIORITIES / GLOBAL_L1 / LOCAL_L1 supported
        81 => 233_472,                     // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
        82 => 65536,                       // MAX_REGISTERS_PER_MULTIPROCESSOR
        83 => 1,                           // MANAGED_MEMORY
        85 => ordinal,                     // MULTI_GPU_BOARD_GROUP_ID
        87 => 2,                           // SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO
        89..=91 => 1, // CONCURRENT_MANAGED_ACCESS, COMPUTE_PREEMPTION, HOST_POINTER_FOR_REGISTERED_MEM
        95 | 96 => 1, // COOPERATIVE_LAUNCH, COOPERATIVE_MULTI_DEVICE_LAUNCH
        97 => 232_448, // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        99 => 1,      // HOST_REGISTER_SUPPORTED
        102 | 103 => 1, // VIRTUAL_MEMORY_MANAGEMENT, HANDLE_TYPE_POSIX_FILE_DESCRIPTOR supported
        106 => 32,    // MAX_BLOCKS_PER_MULTIPROCESSOR
        108 => 32 << 20, // MAX_PERSISTING_L2_CACHE_SIZE
        109 => 128 << 20, // MAX_ACCESS_POLICY_WINDOW_SIZE
        110 => 1,     // GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
        111 => 1024,  // RESERVED_SHARED_MEMORY_PER_BLOCK
        116 => gpu_direct_rdma() as c_int, // GPU_DIRECT_RDMA_SUPPORTED
        112..=115 => 1, // sparse arrays ... memory pools
        117 => 1,     // GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS (host)
        118 => 0,     // GPU_DIRECT_RDMA_WRITES_ORDERING (none)
        119 => 1,     // MEMPOOL_SUPPORTED_HANDLE_TYPES (posix fd)
        124 => dma_buf() as c_int, // DMA_BUF_SUPPORTED
        120..=125 => 1, // cluster launch ... IPC events
        126 => 4,     // MEM_SYNC_DOMAIN_COUNT
        127 => 1,     // TENSOR_MAP_ACCESS_SUPPORTED
        129 => 1,     // UNIFIED_FUNCTION_POINTERS
        131 | 134 => -1, // NUMA_ID, HOST_NUMA_ID
        132 => 1,     // MULTICAST_SUPPORTED
        139 => 0x2330_10de, // GPU_PCI_DEVICE_ID (H100 SXM5, NVIDIA)
        140 => 0x16c1_10de, // GPU_PCI_SUBSYSTEM_ID
        _ => 0,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetAttribute(
    pi: *mut c_int,
    attrib: c_uint,
    dev: CUdevice,
) -> CUresult {
    ffi("cuDeviceGetAttribute", || {
        non_null(pi)?;
        let gpu = check_device(dev)?;
        let cc = platform()?.compute_cap;
        // SAFETY: checked non-null.
        unsafe { put(pi, attribute(attrib, gpu, dev, cc)) }
    })
}

#[cfg(test)]
mod tests;
