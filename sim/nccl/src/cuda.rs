//! The few driver calls the NCCL stand-in makes, found in the driver the process already
//! loaded (the harness opens it with RTLD_GLOBAL), as the real libnccl finds its driver.

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

type LaunchHostFunc = unsafe extern "C" fn(
    *mut c_void,
    Option<unsafe extern "C" fn(*mut c_void)>,
    *mut c_void,
) -> u32;
type CtxGetDevice = unsafe extern "C" fn(*mut c_int) -> u32;
type DeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> u32;
type GetPciBusId = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> u32;

struct Driver {
    launch_host_func: LaunchHostFunc,
    ctx_get_device: CtxGetDevice,
    device_get: DeviceGet,
    get_pci_bus_id: GetPciBusId,
}

fn sym(handle: *mut c_void, name: &str) -> Option<*mut c_void> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: handle is RTLD_DEFAULT or a dlopen handle; name is NUL-terminated.
    let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
    (!p.is_null()).then_some(p)
}

fn driver() -> Option<&'static Driver> {
    static D: OnceLock<Option<Driver>> = OnceLock::new();
    D.get_or_init(|| {
        let mut handle = libc::RTLD_DEFAULT;
        if sym(handle, "cuLaunchHostFunc").is_none() {
            // SAFETY: a library name; RTLD_NOLOAD only returns an already loaded library.
            handle = unsafe {
                libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD)
            };
            if handle.is_null() {
                // SAFETY: as above, loading it if it is not there yet.
                handle = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW) };
            }
            if handle.is_null() {
                return None;
            }
        }
        // SAFETY: the symbols have these prototypes in the CUDA driver API.
        unsafe {
            Some(Driver {
                launch_host_func: std::mem::transmute::<*mut c_void, LaunchHostFunc>(sym(
                    handle,
                    "cuLaunchHostFunc",
                )?),
                ctx_get_device: std::mem::transmute::<*mut c_void, CtxGetDevice>(sym(
                    handle,
                    "cuCtxGetDevice",
                )?),
                device_get: std::mem::transmute::<*mut c_void, DeviceGet>(sym(
                    handle,
                    "cuDeviceGet",
                )?),
                get_pci_bus_id: std::mem::transmute::<*mut c_void, GetPciBusId>(sym(
                    handle,
                    "cuDeviceGetPCIBusId",
                )?),
            })
        }
    })
    .as_ref()
}

pub fn available() -> bool {
    driver().is_some()
}

/// The current context's device ordinal.
pub fn current_device() -> Option<i32> {
    let d = driver()?;
    let mut dev = 0;
    // SAFETY: valid out-pointer.
    (unsafe { (d.ctx_get_device)(&mut dev) } == 0).then_some(dev)
}

/// NCCL's busId form of a device ("0000:18:00.0" → "18000").
pub fn bus_id(ordinal: i32) -> String {
    let Some(d) = driver() else { return "0".into() };
    let mut cu = 0;
    let mut buf = [0 as c_char; 32];
    // SAFETY: valid out-pointers and the buffer length.
    let ok = unsafe {
        (d.device_get)(&mut cu, ordinal) == 0 && (d.get_pci_bus_id)(buf.as_mut_ptr(), 32, cu) == 0
    };
    if !ok {
        return "0".into();
    }
    // SAFETY: NUL-terminated by the driver.
    let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    bus_id_of(&s)
}

/// NCCL prints a bus id as the hex number its digits spell: "0000:18:00.0" → "18000".
pub fn bus_id_of(pci: &str) -> String {
    let digits: String = pci.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    format!("{:x}", u64::from_str_radix(&digits, 16).unwrap_or(0))
}

/// Queues `task` on `stream` (cuLaunchHostFunc). Returns false when the driver refused.
pub fn enqueue(stream: *mut c_void, task: Box<dyn FnOnce() + Send>) -> bool {
    let Some(d) = driver() else { return false };
    unsafe extern "C" fn trampoline(p: *mut c_void) {
        // SAFETY: `p` is the Box leaked below, run exactly once by the driver.
        let task = unsafe { Box::from_raw(p as *mut Box<dyn FnOnce() + Send>) };
        task();
    }
    let p = Box::into_raw(Box::new(task)) as *mut c_void;
    // SAFETY: a stream handle from the caller, a C function and its data.
    let rc = unsafe { (d.launch_host_func)(stream, Some(trampoline), p) };
    if rc != 0 {
        // SAFETY: the driver did not take the task; reclaim it.
        drop(unsafe { Box::from_raw(p as *mut Box<dyn FnOnce() + Send>) });
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    #[test]
    fn bus_ids_print_like_nccl() {
        assert_eq!(super::bus_id_of("0000:18:00.0"), "18000");
        assert_eq!(super::bus_id_of("0001:AB:00.0"), "1ab000");
    }
}
