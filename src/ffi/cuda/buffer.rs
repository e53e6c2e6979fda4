//! Device memory: device addresses and buffers that copy to and from the host on a stream.

use super::error::{CudaError, Result};
use super::stream::Stream;
use cudarc::driver::{result, sys};
use std::ffi::c_void;

/// A device address. Only libraries dereference it; Rust code never does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevPtr(pub u64);

impl DevPtr {
    /// The address `bytes` further on.
    pub fn offset(self, bytes: usize) -> DevPtr {
        DevPtr(self.0 + bytes as u64)
    }

    pub(in crate::ffi) fn as_ptr(self) -> *mut c_void {
        self.0 as usize as *mut c_void
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
