//! The few driver calls the NCCL stand-in makes, found in the driver the process already
//! loaded (the harness opens it with RTLD_GLOBAL), else by its soname, as libnccl finds its
//! driver.

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

type HostFn = unsafe extern "C" fn(*mut c_void);
type LaunchHostFunc = unsafe extern "C" fn(*mut c_void, Option<HostFn>, *mut c_void) -> u32;
type CtxGetDevice = unsafe extern "C" fn(*mut c_int) -> u32;
type DeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> u32;
type GetPciBusId = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> u32;
type DriverGetVersion = unsafe extern "C" fn(*mut c_int) -> u32;

struct Driver {
    launch_host_func: LaunchHostFunc,
    ctx_get_device: CtxGetDevice,
    device_get: DeviceGet,
    get_pci_bus_id: GetPciBusId,
    driver_get_version: Option<DriverGetVersion>,
}

fn sym(handle: *mut c_void, name: &std::ffi::CStr) -> Option<*mut c_void> {
    // SAFETY: handle is RTLD_DEFAULT or a dlopen handle; name is NUL-terminated.
    let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

fn open() -> Option<Driver> {
    let mut handle = libc::RTLD_DEFAULT;
    if sym(handle, c"cuLaunchHostFunc").is_none() {
        // SAFETY: a library name; RTLD_NOLOAD only returns a library already loaded.
        handle =
            unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            // SAFETY: as above, loading it when nobody has yet.
            handle = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW) };
        }
        if handle.is_null() {
            return None;
        }
    }
    // SAFETY: the symbols have these prototypes in the CUDA driver API (cuda.h).
    unsafe {
        Some(Driver {
            launch_host_func: std::mem::transmute::<*mut c_void, LaunchHostFunc>(sym(
                handle,
                c"cuLaunchHostFunc",
            )?),
            ctx_get_device: std::mem::transmute::<*mut c_void, CtxGetDevice>(sym(
                handle,
                c"cuCtxGetDevice",
            )?),
            device_get: std::mem::transmute::<*mut c_void, DeviceGet>(sym(handle, c"cuDeviceGet")?),
            get_pci_bus_id: std::mem::transmute::<*mut c_void, GetPciBusId>(sym(
                handle,
                c"cuDeviceGetPCIBusId",
            )?),
            driver_get_version: sym(handle, c"cuDriverGetVersion")
                .map(|p| std::mem::transmute::<*mut c_void, DriverGetVersion>(p)),
        })
    }
}

/// The driver, once found (a miss is retried on the next call: the harness may load the
/// driver after this library).
fn driver() -> Option<&'static Driver> {
    static D: OnceLock<Driver> = OnceLock::new();
    if let Some(d) = D.get() {
        return Some(d);
    }
    let d = open()?;
    Some(D.get_or_init(|| d))
}

pub fn available() -> bool {
    driver().is_some()
}

/// The current context's device ordinal; `None` without a driver or a current context
/// (NCCL then uses device 0, as the runtime does).
pub fn current_device() -> Option<i32> {
    let d = driver()?;
    let mut dev = 0;
    // SAFETY: valid out-pointer.
    (unsafe { (d.ctx_get_device)(&mut dev) } == 0).then_some(dev)
}

/// `cuDriverGetVersion`, when the driver has it.
pub fn driver_version() -> Option<i32> {
    let f = driver()?.driver_get_version?;
    let mut v = 0;
    // SAFETY: valid out-pointer.
    (unsafe { f(&mut v) } == 0).then_some(v)
}

/// NCCL's busId of a device ordinal ("0000:18:00.0" → "18000"); "0" when unknown.
pub fn bus_id(ordinal: i32) -> String {
    let Some(d) = driver() else { return "0".into() };
    let mut cu = 0;
    let mut buf = [0 as c_char; 32];
    // SAFETY: valid out-pointers and the buffer's length.
    let ok = unsafe {
        (d.device_get)(&mut cu, ordinal) == 0
            && (d.get_pci_bus_id)(buf.as_mut_ptr(), buf.len() as c_int, cu) == 0
    };
    if !ok {
        return "0".into();
    }
    buf[buf.len() - 1] = 0;
    // SAFETY: NUL-terminated (by the driver, and by the line above at worst).
    let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy();
    bus_id_of(&s)
}

/// NCCL prints a bus id as the hex number its hex digits spell: "0000:18:00.0" → "18000".
pub fn bus_id_of(pci: &str) -> String {
    let digits: String = pci.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    format!("{:x}", u64::from_str_radix(&digits, 16).unwrap_or(0))
}

/// A task queued on a stream.
pub type Task = Box<dyn FnOnce() + Send>;

unsafe extern "C" fn trampoline(p: *mut c_void) {
    // SAFETY: `p` is the box leaked by `enqueue`, run exactly once by the driver.
    let task = unsafe { Box::from_raw(p as *mut Task) };
    // Nothing may unwind into the driver.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(task));
}

/// Queues `task` on `stream` with cuLaunchHostFunc. `Err` holds the driver's error code
/// (0 when there is no driver).
pub fn enqueue(stream: *mut c_void, task: Task) -> Result<(), u32> {
    let Some(d) = driver() else { return Err(0) };
    let p = Box::into_raw(Box::new(task)) as *mut c_void;
    // SAFETY: a stream handle from the caller, a C function and its data.
    let rc = unsafe { (d.launch_host_func)(stream, Some(trampoline), p) };
    if rc != 0 {
        // SAFETY: the driver did not take the task; reclaim it.
        drop(unsafe { Box::from_raw(p as *mut Task) });
        return Err(rc);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn bus_ids_print_like_nccl() {
        assert_eq!(super::bus_id_of("0000:18:00.0"), "18000");
        assert_eq!(super::bus_id_of("0001:AB:00.0"), "1ab000");
        assert_eq!(super::bus_id_of("xyz"), "0");
    }
}
