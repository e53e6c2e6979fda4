//! libibverbs, opened as NCCL opens it (`NCCL_IBVERBS_LIB`, else `libibverbs.so`, else
//! `libibverbs.so.1`: NVIDIA/nccl v2.30.7-1 src/misc/ibvsymbols.cc), for the one question the
//! harness asks it: which RDMA devices this host has, by the names `NCCL_IB_HCA` selects.

use libloading::{Library, Symbol};
use std::ffi::{CStr, c_char, c_int, c_void};

/// Why the device list could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum IbverbsError {
    #[error("libibverbs could not be opened ({0})")]
    NotFound(String),
    #[error("libibverbs has no {0}")]
    MissingSymbol(&'static str),
    #[error("ibv_get_device_list failed: {0}")]
    List(String),
}

/// The names of the RDMA devices libibverbs lists on this host, in its order.
pub fn device_names() -> Result<Vec<String>, IbverbsError> {
    let env = std::env::var("NCCL_IBVERBS_LIB").ok();
    let mut last = String::new();
    let lib = env
        .iter()
        .map(String::as_str)
        .chain(["libibverbs.so", "libibverbs.so.1"])
        .find_map(|name| {
            // SAFETY: loading libibverbs runs its initialisers, which only read the environment
            // and sysfs (rdma-core, libibverbs/init.c).
            unsafe { Library::new(name) }
                .map_err(|e| last = e.to_string())
                .ok()
        })
        .ok_or(IbverbsError::NotFound(last))?;
    type GetList = unsafe extern "C" fn(*mut c_int) -> *mut *mut c_void;
    type FreeList = unsafe extern "C" fn(*mut *mut c_void);
    type Name = unsafe extern "C" fn(*mut c_void) -> *const c_char;
    // SAFETY: the signatures are rdma-core's (<infiniband/verbs.h>).
    unsafe {
        let get: Symbol<GetList> = lib
            .get(b"ibv_get_device_list\0")
            .map_err(|_| IbverbsError::MissingSymbol("ibv_get_device_list"))?;
        let free: Symbol<FreeList> = lib
            .get(b"ibv_free_device_list\0")
            .map_err(|_| IbverbsError::MissingSymbol("ibv_free_device_list"))?;
        let name: Symbol<Name> = lib
            .get(b"ibv_get_device_name\0")
            .map_err(|_| IbverbsError::MissingSymbol("ibv_get_device_name"))?;
        let mut n: c_int = 0;
        let list = get(&mut n);
        if list.is_null() {
            return Err(IbverbsError::List(
                std::io::Error::last_os_error().to_string(),
            ));
        }
        let names = (0..n.max(0) as usize)
            .map(|i| *list.add(i))
            .filter(|d| !d.is_null())
            .map(|d| name(d))
            .filter(|p| !p.is_null())
            .map(|p| CStr::from_ptr(p).to_string_lossy().into_owned())
            .collect();
        free(list);
        Ok(names)
    }
}
