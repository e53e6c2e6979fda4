//! Legacy CUDA IPC (`cuIpcGetMemHandle`, `cuIpcOpenMemHandle_v2`, `cuIpcCloseMemHandle`), used
//! by NCCL's P2P/IPC transport when cuMem is off (`NCCL_CUMEM_ENABLE=0`). `cuMemAlloc` memory is
//! a memfd, so the 64-byte handle names the exporter's descriptor as `/proc/<pid>/fd/<fd>`
//! (FACTS.md, "The real libnccl on a CPU machine"): same uid only, and only while the exporter
//! lives (after it died, opening fails with `CUDA_ERROR_INVALID_HANDLE`, this driver's choice).

use crate::context::current_device;
use crate::device::{CUdevice, platform};
use crate::error::*;
use crate::memory::{CUdeviceptr, find_allocated};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_uint, c_void};
use std::sync::{LazyLock, Mutex, MutexGuard};

/// `CUipcMemHandle` (cuda.h): 64 opaque bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUipcMemHandle {
    pub reserved: [c_char; 64],
}

/// What this driver puts in the handle.
const MAGIC: u32 = 0x5349_4d43; // "SIMC"

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Named {
    pid: u32,
    fd: i32,
    /// Length of the memfd mapping, and the allocation's size.
    len: u64,
    size: u64,
    device: i32,
}

fn encode(n: Named) -> CUipcMemHandle {
    let mut b = [0u8; 64];
    b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    b[4..8].copy_from_slice(&n.pid.to_le_bytes());
    b[8..12].copy_from_slice(&n.fd.to_le_bytes());
    b[12..20].copy_from_slice(&n.len.to_le_bytes());
    b[20..28].copy_from_slice(&n.size.to_le_bytes());
    b[28..32].copy_from_slice(&n.device.to_le_bytes());
    CUipcMemHandle {
        reserved: b.map(|x| x as c_char),
    }
}

fn decode(h: &CUipcMemHandle) -> Option<Named> {
    let b = h.reserved.map(|x| x as u8);
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    (u32_at(0) == MAGIC).then(|| Named {
        pid: u32_at(4),
        fd: u32_at(8) as i32,
        len: u64_at(12),
        size: u64_at(20),
        device: u32_at(28) as i32,
    })
}

struct Import {
    len: usize,
    size: usize,
    device: CUdevice,
}

/// Opened handles: mapped address → what it is.
static IMPORTS: LazyLock<Mutex<BTreeMap<usize, Import>>> = LazyLock::new(Mutex::default);

fn imports() -> MutexGuard<'static, BTreeMap<usize, Import>> {
    IMPORTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The opened IPC mapping holding `addr`: (base, size, device).
pub(crate) fn find_import(addr: usize) -> Option<(usize, usize, CUdevice)> {
    let m = imports();
    let (&base, imp) = m.range(..=addr).next_back()?;
    (addr < base + imp.size.max(1)).then_some((base, imp.size, imp.device))
}

/// `CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)`: names the
/// allocation holding `dptr` (NVIDIA CUDA driver API docs: the handle is for the whole
/// allocation, opened at its base).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuIpcGetMemHandle(
    p_handle: *mut CUipcMemHandle,
    dptr: CUdeviceptr,
) -> CUresult {
    ffi("cuIpcGetMemHandle", || {
        non_null(p_handle)?;
        platform()?;
        // Only cuMemAlloc's memory has a handle (a cuMem mapping is shared with
        // cuMemExportToShareableHandle, and an import is not this process's to name).
        let r = find_allocated(dptr as usize).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        let (fd, len) = r.memfd.ok_or(CUDA_ERROR_INVALID_VALUE)?;
        let h = encode(Named {
            pid: std::process::id(),
            fd,
            len: len as u64,
            size: r.size as u64,
            device: r.device.unwrap_or(0),
        });
        // SAFETY: checked non-null.
        unsafe { put(p_handle, h) }
    })
}

/// `CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int
/// Flags)`: maps the exporter's memfd through `/proc/<pid>/fd/<fd>`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuIpcOpenMemHandle_v2(
    pdptr: *mut CUdeviceptr,
    handle: CUipcMemHandle,
    _flags: c_uint,
) -> CUresult {
    ffi("cuIpcOpenMemHandle_v2", || {
        non_null(pdptr)?;
        current_device()?;
        let n = decode(&handle).ok_or(CUDA_ERROR_INVALID_VALUE)?;
        // Opening one's own handle is refused by CUDA too (NVIDIA CUDA driver API docs).
        if n.pid == std::process::id() {
            return Err(CUDA_ERROR_INVALID_CONTEXT);
        }
        let path = std::ffi::CString::new(format!("/proc/{}/fd/{}", n.pid, n.fd))
            .map_err(|_| CUDA_ERROR_INVALID_VALUE)?;
        // SAFETY: valid NUL-terminated path.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(CUDA_ERROR_INVALID_HANDLE);
        }
        let len = n.len as usize;
        // SAFETY: a fresh shared mapping of the descriptor just opened.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        // SAFETY: ours; the mapping keeps the memory.
        unsafe { libc::close(fd) };
        if p == libc::MAP_FAILED {
            return Err(CUDA_ERROR_MAP_FAILED);
        }
        imports().insert(
            p as usize,
            Import {
                len,
                size: n.size as usize,
                device: n.device,
            },
        );
        // SAFETY: checked non-null.
        unsafe { put(pdptr, p as CUdeviceptr) }
    })
}

/// The plain name has the same signature (cuda.h maps it to `_v2` since CUDA 11).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuIpcOpenMemHandle(
    pdptr: *mut CUdeviceptr,
    handle: CUipcMemHandle,
    flags: c_uint,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuIpcOpenMemHandle_v2(pdptr, handle, flags) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuIpcCloseMemHandle(dptr: CUdeviceptr) -> CUresult {
    ffi("cuIpcCloseMemHandle", || {
        platform()?;
        let imp = imports()
            .remove(&(dptr as usize))
            .ok_or(CUDA_ERROR_INVALID_VALUE)?;
        // SAFETY: our own mapping, removed from the table so unmapped once.
        unsafe { libc::munmap(dptr as usize as *mut c_void, imp.len) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_round_trips() {
        let n = Named {
            pid: 42,
            fd: 7,
            len: 8192,
            size: 5000,
            device: 3,
        };
        assert_eq!(decode(&encode(n)), Some(n));
        let zero = CUipcMemHandle { reserved: [0; 64] };
        assert_eq!(decode(&zero), None);
    }
}
