//! Ordered work queues and the timing events recorded on them.

use super::error::{CudaError, Result, check};
use cudarc::driver::{result, sys};
use std::ffi::c_void;

/// An in-order work queue on the current device.
pub struct Stream(pub(super) sys::CUstream);

impl Stream {
    pub fn new() -> Result<Stream> {
        result::stream::create(result::stream::StreamKind::NonBlocking)
            .map(Stream)
            .map_err(|e| CudaError::call("cuStreamCreate", e))
    }

    /// The raw handle, for NCCL calls.
    pub(in crate::ffi) fn raw(&self) -> *mut c_void {
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
