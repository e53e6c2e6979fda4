//! The CUDA driver API, loaded at run time through `cudarc` (dynamic loading).
//!
//! cudarc panics when its library or a symbol is missing, and has no library-path option.
//! So this module opens the driver library itself first (`RTLD_GLOBAL`, so cudarc's own
//! lookups by soname resolve to the very same library), checks every symbol nccl-smoke will
//! call, and only then lets cudarc near it. A missing driver or symbol is a finding, not a crash.
//!
//! Safe wrappers own what they create: a [`Stream`], [`Event`] or [`DeviceBuffer`] releases
//! itself on drop.

use super::os;
use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys;
use std::ffi::{CStr, c_void};

/// The soname the dynamic linker resolves for the CUDA driver.
pub const DRIVER_SONAME: &str = "libcuda.so.1";

/// Every driver symbol nccl-smoke calls, checked at load so that cudarc never meets a missing one.
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetUuid",
    "cuDeviceGetPCIBusId",
    "cuDeviceTotalMem_v2",
    "cuMemGetInfo_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamQuery",
    "cuStreamSynchronize",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventElapsedTime",
    "cuEventDestroy_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemsetD8Async",
];

/// The cuMem (virtual memory management) calls of the shareable-buffer probe; a driver without
/// them has the probe skipped, not failed.
const VMM_SYMBOLS: &[&str] = &[
    "cuMemGetAllocationGranularity",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemExportToShareableHandle",
    "cuMemImportFromShareableHandle",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemSetAccess",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
];

/// A failure of the driver API, decoded by name.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CudaError {
    #[error("no CUDA driver library: cannot load {tried} ({detail})")]
    NotFound { tried: String, detail: String },
    #[error("the CUDA driver library {path} has no symbol {symbol}")]
    MissingSymbol { path: String, symbol: String },
    #[error(
        "two CUDA driver libraries: nccl-smoke loaded {ours}, but cudarc's calls go to {cudarc} \
         (it tries the name libcuda.so first, so a CUDA toolkit's stubs/ folder or a second driver on \
         the library path wins)"
    )]
    TwoDrivers { ours: String, cudarc: String },
    #[error("{call} failed: {name} ({code}): {message}")]
    Call {
        call: &'static str,
        code: i32,
        name: String,
        message: String,
    },
}

impl CudaError {
    fn call(call: &'static str, e: DriverError) -> CudaError {
        let name = e
            .error_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "CUDA_ERROR_UNKNOWN".into());
        let message = e
            .error_string()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "no description from the driver".into());
        CudaError::Call {
            call,
            code: e.0 as i32,
            name,
            message,
        }
    }

    /// The driver's error name (`CUDA_ERROR_…`), when the driver gave one.
    pub fn code_name(&self) -> Option<&str> {
        match self {
            CudaError::Call { name, .. } => Some(name),
            _ => None,
        }
    }
}

type Result<T> = std::result::Result<T, CudaError>;

fn check(call: &'static str, r: sys::CUresult) -> Result<()> {
    r.result().map_err(|e| CudaError::call(call, e))
}

/// The loaded and initialised driver.
#[derive(Debug)]
pub struct Driver {
    /// Absolute path of the library that was loaded.
    pub path: String,
    /// `cuDriverGetVersion`, e.g. 12080 for CUDA 12.8.
    pub version: i32,
    /// The library's marker when it is nccl-smoke's simulation, else `None`.
    pub simulated: Option<String>,
    /// Whether it has the cuMem calls [`SharedMem`] needs.
    pub vmm: bool,
    _lib: os::Library,
}

/// cudarc opens the driver by its own list of names, `libcuda.so` first: a stub driver from a
/// CUDA toolkit, or a second driver, on the library path would take cudarc's calls while
/// nccl-smoke (and NCCL, through the soname) use the one loaded here. Same `cuInit` address, or
/// a failure naming both files.
fn same_driver_as_cudarc(lib: &os::Library, ours: &str) -> Result<()> {
    let mine = lib.address("cuInit");
    // SAFETY: `is_culib_present` found a library, so `culib` returns instead of panicking; the
    // symbol is read as an address and never called here.
    let theirs = unsafe { sys::culib().get::<*mut std::ffi::c_void>(b"cuInit") }
        .ok()
        .map(|s| *s);
    if mine.is_some() && mine == theirs {
        return Ok(());
    }
    Err(CudaError::TwoDrivers {
        ours: ours.to_string(),
        cudarc: theirs
            .and_then(|p| os::file_of(p as usize))
            .unwrap_or_else(|| "a library without cuInit".into()),
    })
}

impl Driver {
    /// Opens the driver (`path`, else [`DRIVER_SONAME`] through the dynamic linker), checks its
    /// symbols and calls `cuInit(0)`.
    pub fn load(path: Option<&str>) -> Result<Driver> {
        let tried = path.unwrap_or(DRIVER_SONAME).to_string();
        let lib = os::Library::open_global(&tried).map_err(|detail| CudaError::NotFound {
            tried: tried.clone(),
            detail,
        })?;
        let resolved = lib.path_of("cuInit").unwrap_or_else(|| tried.clone());
        for symbol in REQUIRED_SYMBOLS {
            if !lib.has(symbol) {
                return Err(CudaError::MissingSymbol {
                    path: resolved,
                    symbol: (*symbol).into(),
                });
            }
        }
        // SAFETY: cudarc's loader panics only when no library or symbol is found; the library
        // is open with RTLD_GLOBAL under its soname and every symbol was checked above.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::NotFound {
                tried,
                detail: "cudarc could not find it by name after it was loaded".into(),
            });
        }
        same_driver_as_cudarc(&lib, &resolved)?;
        let simulated = lib.marker("ncclSmokeSimDriver");
        let mut version = 0;
        // SAFETY: valid out-pointer.
        check("cuDriverGetVersion", unsafe {
            sys::cuDriverGetVersion(&mut version)
        })?;
        result::init().map_err(|e| CudaError::call("cuInit", e))?;
        let vmm = VMM_SYMBOLS.iter().all(|s| lib.has(s));
        Ok(Driver {
            path: resolved,
            version,
            simulated,
            vmm,
            _lib: lib,
        })
    }

    pub fn device_count(&self) -> Result<i32> {
        result::device::get_count().map_err(|e| CudaError::call("cuDeviceGetCount", e))
    }
}

/// Formats a driver version code as `major.minor` (12080 → "12.8").
pub fn version_string(code: i32) -> String {
    format!("{}.{}", code / 1000, (code % 1000) / 10)
}

/// What identifies a GPU in a report.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct DeviceInfo {
    /// Ordinal as this process sees it (after CUDA_VISIBLE_DEVICES).
    pub ordinal: i32,
    pub name: String,
    /// `GPU-xxxxxxxx-xxxx-…`, as nvidia-smi prints it.
    pub uuid: String,
    /// PCI bus id, `0000:19:00.0` style.
    pub bus_id: String,
    /// Device memory in bytes.
    pub total_mem: u64,
}

/// A device with its primary context made current on this thread.
pub struct Device {
    pub info: DeviceInfo,
    cu: sys::CUdevice,
}

impl DeviceInfo {
    /// What identifies device `ordinal`, asked of the driver without creating a context (no
    /// GPU memory is touched).
    pub fn query(ordinal: i32) -> Result<DeviceInfo> {
        let cu = result::device::get(ordinal).map_err(|e| CudaError::call("cuDeviceGet", e))?;
        Self::of(ordinal, cu)
    }

    fn of(ordinal: i32, cu: sys::CUdevice) -> Result<DeviceInfo> {
        let name =
            result::device::get_name(cu).map_err(|e| CudaError::call("cuDeviceGetName", e))?;
        let uuid = result::device::get_uuid(cu)
            .map(|u| format_uuid(&u.bytes.map(|b| b as u8)))
            .map_err(|e| CudaError::call("cuDeviceGetUuid", e))?;
        let mut bus = [0 as std::ffi::c_char; 64];
        // SAFETY: the buffer is 64 bytes and its length is passed.
        check("cuDeviceGetPCIBusId", unsafe {
            sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as i32, cu)
        })?;
        // SAFETY: the driver NUL-terminates within the length given.
        let bus_id = unsafe { CStr::from_ptr(bus.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: `cu` came from cuDeviceGet.
        let total_mem = unsafe { result::device::total_mem(cu) }
            .map_err(|e| CudaError::call("cuDeviceTotalMem", e))? as u64;
        Ok(DeviceInfo {
            ordinal,
            name,
            uuid,
            bus_id,
            total_mem,
        })
    }
}

impl Device {
    /// Device `ordinal` with its primary context retained and current on this thread.
    pub fn open(ordinal: i32) -> Result<Device> {
        let cu = result::device::get(ordinal).map_err(|e| CudaError::call("cuDeviceGet", e))?;
        let info = DeviceInfo::of(ordinal, cu)?;
        // SAFETY: `cu` is a valid device; the primary context is released in Drop.
        let ctx = unsafe { result::primary_ctx::retain(cu) }
            .map_err(|e| CudaError::call("cuDevicePrimaryCtxRetain", e))?;
        // SAFETY: `ctx` was just retained.
        unsafe { result::ctx::set_current(ctx) }
            .map_err(|e| CudaError::call("cuCtxSetCurrent", e))?;
        Ok(Device { info, cu })
    }
}

impl Device {
    /// `cuMemGetInfo`: (free, total) bytes of this device, in its (current) context.
    pub fn memory(&self) -> Result<(usize, usize)> {
        result::mem_get_info().map_err(|e| CudaError::call("cuMemGetInfo_v2", e))
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: retained in `open`. A failure here cannot be acted on.
        let _ = unsafe { result::primary_ctx::release(self.cu) };
    }
}

fn format_uuid(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A device address. Only libraries dereference it; Rust code never does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevPtr(pub u64);

impl DevPtr {
    /// The address `bytes` further on.
    pub fn offset(self, bytes: usize) -> DevPtr {
        DevPtr(self.0 + bytes as u64)
    }

    pub(super) fn as_ptr(self) -> *mut c_void {
        self.0 as usize as *mut c_void
    }
}

/// An in-order work queue on the current device.
pub struct Stream(sys::CUstream);

impl Stream {
    pub fn new() -> Result<Stream> {
        result::stream::create(result::stream::StreamKind::NonBlocking)
            .map(Stream)
            .map_err(|e| CudaError::call("cuStreamCreate", e))
    }

    /// The raw handle, for NCCL calls.
    pub(super) fn raw(&self) -> *mut c_void {
        self.0 as *mut c_void
    }

    /// `true` when all work queued so far has completed; never blocks.
    pub fn is_idle(&self) -> Result<bool> {
        // SAFETY: the stream is alive while `self` is.
        match unsafe { sys::cuStreamQuery(self.0) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => check("cuStreamQuery", other).map(|_| false),
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: created in `new`; destroying with work pending is allowed.
        let _ = unsafe { result::stream::destroy(self.0) };
    }
}

/// A timing event.
pub struct Event(sys::CUevent);

impl Event {
    pub fn new() -> Result<Event> {
        result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map(Event)
            .map_err(|e| CudaError::call("cuEventCreate", e))
    }

    pub fn record(&self, stream: &Stream) -> Result<()> {
        // SAFETY: both handles are alive.
        unsafe { result::event::record(self.0, stream.0) }
            .map_err(|e| CudaError::call("cuEventRecord", e))
    }

    /// Milliseconds between `start` and `self`; both must have completed.
    pub fn elapsed_ms_since(&self, start: &Event) -> Result<f32> {
        // SAFETY: both events are alive and were recorded on one stream.
        unsafe { result::event::elapsed(start.0, self.0) }
            .map_err(|e| CudaError::call("cuEventElapsedTime", e))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created in `new`.
        let _ = unsafe { result::event::destroy(self.0) };
    }
}

/// Device memory.
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    len: usize,
}

impl DeviceBuffer {
    pub fn alloc(len: usize) -> Result<DeviceBuffer> {
        // SAFETY: a context is current (Device::open); freed in Drop.
        let ptr = unsafe { result::malloc_sync(len.max(1)) }
            .map_err(|e| CudaError::call("cuMemAlloc", e))?;
        Ok(DeviceBuffer { ptr, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address, for NCCL calls.
    pub fn ptr(&self) -> DevPtr {
        DevPtr(self.ptr)
    }

    /// Queues a copy of `src` into the buffer at byte `offset`. `src` must stay untouched
    /// until the stream has passed this point; callers synchronise before reusing it.
    pub fn copy_from_host(&self, offset: usize, src: &[u8], stream: &Stream) -> Result<()> {
        assert!(
            offset
                .checked_add(src.len())
                .is_some_and(|end| end <= self.len),
            "host slice beyond the device buffer"
        );
        // SAFETY: bounds checked; the caller keeps `src` alive until the stream is idle.
        unsafe { result::memcpy_htod_async(self.ptr + offset as u64, src, stream.0) }
            .map_err(|e| CudaError::call("cuMemcpyHtoDAsync", e))
    }

    /// Queues a copy of the buffer from byte `offset` into `dst` (see [`Self::copy_from_host`]).
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8], stream: &Stream) -> Result<()> {
        assert!(
            offset
                .checked_add(dst.len())
                .is_some_and(|end| end <= self.len),
            "host slice beyond the device buffer"
        );
        // SAFETY: bounds checked; the caller keeps `dst` alive until the stream is idle.
        unsafe { result::memcpy_dtoh_async(dst, self.ptr + offset as u64, stream.0) }
            .map_err(|e| CudaError::call("cuMemcpyDtoHAsync", e))
    }

    /// Queues filling the buffer with `byte`.
    pub fn fill(&self, byte: u8, stream: &Stream) -> Result<()> {
        // SAFETY: the whole allocation.
        unsafe { result::memset_d8_async(self.ptr, byte, self.len, stream.0) }
            .map_err(|e| CudaError::call("cuMemsetD8Async", e))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `alloc`, freed once.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// Device memory made with the cuMem API and shareable with another process on this node as a
/// POSIX file descriptor: what NCCL's P2P transport exports and its local peers import
/// (field report 000 is this import failing). Mapped and readable/writable here; unmapped and
/// released on drop. Only for drivers whose [`Driver::vmm`] is true.
pub struct SharedMem {
    handle: sys::CUmemGenericAllocationHandle,
    ptr: sys::CUdeviceptr,
    pub size: usize,
}

fn location(dev: &Device) -> sys::CUmemLocation {
    sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: dev.cu,
    }
}

impl SharedMem {
    /// Allocates at least `bytes` on `dev`, exportable as a file descriptor, and maps it.
    pub fn create(dev: &Device, bytes: usize) -> Result<SharedMem> {
        // SAFETY: a plain C struct; every field a valid value when zeroed, then set.
        let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
        prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.requestedHandleTypes =
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        prop.location = location(dev);
        let mut granularity = 0usize;
        // SAFETY: valid out-pointer and property struct.
        check("cuMemGetAllocationGranularity", unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut granularity,
                &prop,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        })?;
        let g = granularity.max(1);
        let size = bytes.div_ceil(g) * g;
        let mut handle = 0;
        // SAFETY: valid out-pointer and property struct; released in Drop (or below).
        check("cuMemCreate", unsafe {
            sys::cuMemCreate(&mut handle, size, &prop, 0)
        })?;
        Self::map(dev, handle, size)
    }

    /// Maps an allocation handle into this process, read-write for `dev`.
    fn map(dev: &Device, handle: sys::CUmemGenericAllocationHandle, size: usize) -> Result<Self> {
        let release = |e| {
            // SAFETY: the handle came from cuMemCreate/cuMemImport and is not mapped.
            unsafe { sys::cuMemRelease(handle) };
            e
        };
        let mut ptr = 0;
        // SAFETY: valid out-pointer; freed in Drop.
        check("cuMemAddressReserve", unsafe {
            sys::cuMemAddressReserve(&mut ptr, size, 0, 0, 0)
        })
        .map_err(release)?;
        let mem = SharedMem { handle, ptr, size };
        // SAFETY: the range was reserved above with this size; `mem`'s Drop undoes both.
        check("cuMemMap", unsafe {
            sys::cuMemMap(ptr, size, 0, handle, 0)
        })?;
        let access = sys::CUmemAccessDesc {
            location: location(dev),
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: the range is mapped; one descriptor.
        check("cuMemSetAccess", unsafe {
            sys::cuMemSetAccess(ptr, size, &access, 1)
        })?;
        Ok(mem)
    }

    /// A file descriptor another process on this node can import with [`SharedMem::import`].
    pub fn export(&self) -> Result<std::os::fd::OwnedFd> {
        use std::os::fd::FromRawFd;
        let mut fd: std::ffi::c_int = -1;
        // SAFETY: for POSIX_FILE_DESCRIPTOR the out-parameter is an int.
        check("cuMemExportToShareableHandle", unsafe {
            sys::cuMemExportToShareableHandle(
                (&mut fd as *mut std::ffi::c_int).cast(),
                self.handle,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0,
            )
        })?;
        // SAFETY: the driver returned a new descriptor that this process now owns.
        Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
    }

    /// Imports what another process exported (`fd`, `size` bytes) and maps it for `dev`.
    pub fn import(dev: &Device, fd: std::os::fd::BorrowedFd, size: usize) -> Result<SharedMem> {
        use std::os::fd::AsRawFd;
        let mut handle = 0;
        // SAFETY: for POSIX_FILE_DESCRIPTOR the OS handle is the descriptor itself, passed by
        // value in the pointer argument; the driver duplicates what it keeps.
        check("cuMemImportFromShareableHandle", unsafe {
            sys::cuMemImportFromShareableHandle(
                &mut handle,
                fd.as_raw_fd() as isize as *mut c_void,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            )
        })?;
        Self::map(dev, handle, size)
    }

    /// Copies `data` to the start of the buffer (synchronously).
    pub fn write(&self, data: &[u8]) -> Result<()> {
        let n = data.len().min(self.size);
        // SAFETY: the mapped range holds at least `n` bytes; `data` is valid for `n`.
        check("cuMemcpyHtoD", unsafe {
            sys::cuMemcpyHtoD_v2(self.ptr, data.as_ptr().cast(), n)
        })
    }

    /// Copies the start of the buffer into `out` (synchronously).
    pub fn read(&self, out: &mut [u8]) -> Result<()> {
        let n = out.len().min(self.size);
        // SAFETY: the mapped range holds at least `n` bytes; `out` is valid for `n`.
        check("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), self.ptr, n)
        })
    }
}

impl Drop for SharedMem {
    fn drop(&mut self) {
        // SAFETY: the range was reserved and (maybe) mapped by `map`; unmapping an unmapped
        // range only returns an error, ignored on this path.
        unsafe {
            sys::cuMemUnmap(self.ptr, self.size);
            sys::cuMemAddressFree(self.ptr, self.size);
            sys::cuMemRelease(self.handle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_is_formatted_like_nvidia_smi() {
        let b: [u8; 16] = core::array::from_fn(|i| i as u8);
        assert_eq!(format_uuid(&b), "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f");
    }

    #[test]
    fn version_codes_read_as_major_minor() {
        assert_eq!(version_string(12080), "12.8");
        assert_eq!(version_string(13000), "13.0");
        assert_eq!(version_string(12020), "12.2");
    }
}
