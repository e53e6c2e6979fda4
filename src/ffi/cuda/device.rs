//! A GPU: what identifies it in a report, and a handle that keeps its primary context current.

use super::error::{CudaError, Result, check};
use cudarc::driver::{result, sys};
use std::ffi::CStr;

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
    /// Compute capability (major, minor), e.g. (9, 0) for Hopper; absent in results written
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<(i32, i32)>,
}

/// A device with its primary context made current on this thread.
pub struct Device {
    pub info: DeviceInfo,
    pub(super) cu: sys::CUdevice,
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
        let attr = |a| {
            // SAFETY: `cu` came from cuDeviceGet; the attribute is one of the driver's.
            unsafe { result::device::get_attribute(cu, a) }
                .map_err(|e| CudaError::call("cuDeviceGetAttribute", e))
        };
        use sys::CUdevice_attribute::*;
        let compute_capability = Some((
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ));
        Ok(DeviceInfo {
            ordinal,
            name,
            uuid,
            bus_id,
            total_mem,
            compute_capability,
        })
    }
}

impl DeviceInfo {
    /// Whether the driver says device `ordinal` exports memory as DMA-BUF
    /// (`CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`, CUDA 11.7+), as NCCL asks before it registers
    /// GPU memory with a NIC through DMA-BUF (NVIDIA/nccl v2.19.3-1 src/init.cc,
    /// `dmaBufSupported`). A driver too old to know the attribute refuses it: `false`.
    pub fn dma_buf_supported(ordinal: i32) -> Result<bool> {
        Self::flag(
            ordinal,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
        )
    }

    /// Whether the driver says device `ordinal` supports GPUDirect RDMA
    /// (`CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED`, CUDA 11.3+): NCCL's "gdr" for the GPU,
    /// without which no network channel of it uses GPUDirect RDMA (NVIDIA/nccl v2.19.3-1
    /// src/net.cc `ncclGpuGdrSupport`, src/graph/paths.cc `ncclTopoCheckGdr`).
    pub fn gpu_direct_rdma_supported(ordinal: i32) -> Result<bool> {
        Self::flag(
            ordinal,
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED,
        )
    }

    /// A yes/no attribute; one the driver refuses (too old to know it) is no.
    fn flag(ordinal: i32, attr: sys::CUdevice_attribute) -> Result<bool> {
        let cu = result::device::get(ordinal).map_err(|e| CudaError::call("cuDeviceGet", e))?;
        // SAFETY: `cu` came from cuDeviceGet.
        Ok(unsafe { result::device::get_attribute(cu, attr) }.is_ok_and(|v| v != 0))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_is_formatted_like_nvidia_smi() {
        let b: [u8; 16] = core::array::from_fn(|i| i as u8);
        assert_eq!(format_uuid(&b), "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f");
    }
}
