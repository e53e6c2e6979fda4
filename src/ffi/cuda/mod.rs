//! The CUDA driver API, loaded at run time through `cudarc` (dynamic loading).
//!
//! cudarc panics when its library or a symbol is missing, and has no library-path option.
//! So this module opens the driver library itself first (`RTLD_GLOBAL`, so cudarc's own
//! lookups by soname resolve to the very same library), checks every symbol nccl-smoke will
//! call, and only then lets cudarc near it. A missing driver or symbol is a finding, not a crash.
//!
//! Safe wrappers own what they create: a [`Stream`], [`Event`] or [`DeviceBuffer`] releases
//! itself on drop.

mod buffer;
mod device;
mod driver;
mod error;
mod kernels;
mod shared;
mod stream;

pub use buffer::{DevPtr, DeviceBuffer};
pub use device::{Device, DeviceInfo};
pub use driver::{DRIVER_SONAME, Driver, sim_driver_lacking, version_string};
pub use error::CudaError;
pub use kernels::Kernels;
pub use shared::SharedMem;
pub use stream::{Event, Stream};
