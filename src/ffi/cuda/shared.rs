//! Device memory shareable with another process on this node through the cuMem API: the
//! buffer NCCL's P2P transport exports and its local peers import.

use super::device::Device;
use super::error::{Result, check};
use cudarc::driver::sys;
use std::ffi::c_void;

/// Device memory made with the cuMem API and shareable with another process on this node as a
/// POSIX file descriptor: what NCCL's P2P transport exports and its local peers import
/// (field report 000 is this import failing). Mapped and readable/writable here; unmapped and
/// released on drop. Only for drivers whose [`Driver::vmm`](super::Driver::vmm) is true.
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
