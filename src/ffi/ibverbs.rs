//! libibverbs, opened as NCCL opens it (`NCCL_IBVERBS_LIB`, else `libibverbs.so`, else
//! `libibverbs.so.1`: NVIDIA/nccl v2.30.7-1 src/misc/ibvsymbols.cc), for the two questions the
//! harness asks it: which RDMA devices this host has, by the names `NCCL_IB_HCA` selects, and
//! whether each registers GPU memory through DMA-BUF, probed as NCCL probes it.

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

fn open() -> Result<Library, IbverbsError> {
    let env = std::env::var("NCCL_IBVERBS_LIB").ok();
    let mut last = String::new();
    env.iter()
        .map(String::as_str)
        .chain(["libibverbs.so", "libibverbs.so.1"])
        .find_map(|name| {
            // SAFETY: loading libibverbs runs its initialisers, which only read the environment
            // and sysfs (rdma-core, libibverbs/init.c).
            unsafe { Library::new(name) }
                .map_err(|e| last = e.to_string())
                .ok()
        })
        .ok_or(IbverbsError::NotFound(last))
}

/// # Safety
/// `T` must be the C signature of `name` in `<infiniband/verbs.h>`.
unsafe fn sym<'l, T>(lib: &'l Library, name: &'static str) -> Result<Symbol<'l, T>, IbverbsError> {
    let c = format!("{name}\0");
    // SAFETY: the caller vouches for the signature.
    unsafe { lib.get(c.as_bytes()) }.map_err(|_| IbverbsError::MissingSymbol(name))
}

type GetList = unsafe extern "C" fn(*mut c_int) -> *mut *mut c_void;
type FreeList = unsafe extern "C" fn(*mut *mut c_void);
type Name = unsafe extern "C" fn(*mut c_void) -> *const c_char;

/// Calls `each` with every listed device and its name, the list freed after.
fn with_devices<T>(
    lib: &Library,
    mut each: impl FnMut(*mut c_void, String) -> T,
) -> Result<Vec<T>, IbverbsError> {
    // SAFETY: the signatures are rdma-core's (<infiniband/verbs.h>).
    unsafe {
        let get: Symbol<GetList> = sym(lib, "ibv_get_device_list")?;
        let free: Symbol<FreeList> = sym(lib, "ibv_free_device_list")?;
        let name: Symbol<Name> = sym(lib, "ibv_get_device_name")?;
        let mut n: c_int = 0;
        let list = get(&mut n);
        if list.is_null() {
            return Err(IbverbsError::List(
                std::io::Error::last_os_error().to_string(),
            ));
        }
        let out = (0..n.max(0) as usize)
            .map(|i| *list.add(i))
            .filter(|d| !d.is_null())
            .filter_map(|d| {
                let p = name(d);
                (!p.is_null()).then(|| (d, CStr::from_ptr(p).to_string_lossy().into_owned()))
            })
            .map(|(d, n)| each(d, n))
            .collect();
        free(list);
        Ok(out)
    }
}

/// The names of the RDMA devices libibverbs lists on this host, in its order.
pub fn device_names() -> Result<Vec<String>, IbverbsError> {
    with_devices(&open()?, |_, name| name)
}

/// For each device: whether the kernel registers DMA-BUF memory on it, asked as NCCL asks
/// (NVIDIA/nccl v2.19.3-1 src/transport/net_ib.cc `ncclIbDmaBufSupport`, v2.30.7-1
/// src/transport/net_ib/gdr.cc): `ibv_reg_dmabuf_mr` with descriptor -1 on a fresh protection
/// domain fails with `EOPNOTSUPP` or `EPROTONOSUPPORT` when it cannot (or the library lacks the
/// verb), with `EBADF` when it can. `None` where the device could not be opened.
pub fn dma_buf_support() -> Result<Vec<(String, Option<bool>)>, IbverbsError> {
    type Open = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
    type Close = unsafe extern "C" fn(*mut c_void) -> c_int;
    type AllocPd = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
    type DeallocPd = unsafe extern "C" fn(*mut c_void) -> c_int;
    type RegDmabuf =
        unsafe extern "C" fn(*mut c_void, u64, usize, u64, c_int, c_int) -> *mut c_void;
    let lib = open()?;
    // SAFETY: the signatures are rdma-core's (<infiniband/verbs.h>).
    let (open_dev, close, alloc_pd, dealloc_pd) = unsafe {
        (
            sym::<Open>(&lib, "ibv_open_device")?,
            sym::<Close>(&lib, "ibv_close_device")?,
            sym::<AllocPd>(&lib, "ibv_alloc_pd")?,
            sym::<DeallocPd>(&lib, "ibv_dealloc_pd")?,
        )
    };
    // SAFETY: as above; rdma-core before v34 has no such verb.
    let reg = unsafe { sym::<RegDmabuf>(&lib, "ibv_reg_dmabuf_mr") }.ok();
    with_devices(&lib, |dev, name| {
        // SAFETY: `dev` is a listed device; every object opened here is closed here.
        let supported = unsafe {
            let ctx = open_dev(dev);
            if ctx.is_null() {
                return (name, None);
            }
            let pd = alloc_pd(ctx);
            let supported = match (&reg, pd.is_null()) {
                (_, true) => None,
                (None, false) => Some(false),
                (Some(reg), false) => {
                    let mr = reg(pd, 0, 0, 0, -1, 0);
                    let errno = std::io::Error::last_os_error().raw_os_error();
                    // A descriptor -1 is never registered; were it, it is not NCCL's to keep.
                    debug_assert!(mr.is_null());
                    Some(!matches!(
                        errno,
                        Some(libc::EOPNOTSUPP) | Some(libc::EPROTONOSUPPORT)
                    ))
                }
            };
            if !pd.is_null() {
                dealloc_pd(pd);
            }
            close(ctx);
            supported
        };
        (name, supported)
    })
}
