//! `cuGetExportTable`: the undocumented tables the CUDA runtime (cudart, linked statically into
//! libnccl) asks the driver for. Which tables, their UUIDs, sizes, the slots that are called and
//! the integrity check follow `/work/shared/FACTS.md` ("The real libnccl on a CPU machine",
//! verified 2026-11-25 with cudart 12.2–12.9); the meaning of each slot follows the ZLUDA
//! project's documentation of these tables (vosen/ZLUDA, `dark_api/src/lib.rs`). Slots nobody
//! was seen calling are NULL.

use crate::context::{context_device, current_handle, primary_handle};
use crate::device::{CUdevice, CUuuid, driver_version, platform};
use crate::error::*;
use crate::trace;
use hmac::{Hmac, Mac};
use md2::Md2;
use std::collections::HashMap;
use std::ffi::{CStr, c_void};
use std::sync::{LazyLock, Mutex};

/// One export table: an array of pointers whose address the runtime keeps.
#[repr(transparent)]
pub struct Table<const N: usize>([*const c_void; N]);
// SAFETY: immutable after construction; holds only code addresses and integers.
unsafe impl<const N: usize> Sync for Table<N> {}

impl<const N: usize> Table<N> {
    fn addr(&'static self) -> *const c_void {
        self.0.as_ptr().cast()
    }
}

/// Slot 0 of most tables: the table's size in bytes (FACTS.md).
const fn size_of_table(n: usize) -> *const c_void {
    (n * size_of::<usize>()) as *const c_void
}

const NULL: *const c_void = std::ptr::null();

/// CUDART_INTERFACE, 13 slots; slot 2 is "the primary context of a device" (FACTS.md; ZLUDA's
/// `cudart_interface_fn2`).
pub static CUDART_INTERFACE: Table<13> = Table([
    size_of_table(13),
    NULL,
    cudart_primary_context as *const c_void,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
]);

/// TOOLS_TLS, 4 slots; nothing but the size was ever read (FACTS.md).
pub static TOOLS_TLS: Table<4> = Table([size_of_table(4), NULL, NULL, NULL]);

/// TOOLS_RUNTIME_CALLBACK_HOOKS, 7 slots; 2 and 6 hand back a zeroed buffer and its length
/// (FACTS.md; buffer lengths 1024 and 14 as in ZLUDA's implementation of the slots).
pub static TOOLS_RUNTIME_CALLBACK_HOOKS: Table<7> = Table([
    size_of_table(7),
    NULL,
    hooks_buffer1 as *const c_void,
    NULL,
    NULL,
    NULL,
    hooks_buffer2 as *const c_void,
]);

/// CONTEXT_LOCAL_STORAGE_V0301: put, delete, get, NULL — no size slot (FACTS.md, ZLUDA).
pub static CONTEXT_LOCAL_STORAGE: Table<4> = Table([
    cls_put as *const c_void,
    cls_delete as *const c_void,
    cls_get as *const c_void,
    NULL,
]);

/// CONTEXT_CHECKS, 4 slots; 2 and 3 write/return 0 (FACTS.md; ZLUDA: "bits that are never
/// observably set").
pub static CONTEXT_CHECKS: Table<4> = Table([
    size_of_table(4),
    NULL,
    context_check as *const c_void,
    context_check3 as *const c_void,
]);

/// INTEGRITY_CHECK, 3 slots; slot 1 is the check (FACTS.md).
pub static INTEGRITY_CHECK: Table<3> =
    Table([size_of_table(3), integrity_check as *const c_void, NULL]);

// UUIDs as the bytes of the `CUuuid` the runtime passes (FACTS.md).
const UUID_CUDART_INTERFACE: [u8; 16] = [
    0x6B, 0xD5, 0xFB, 0x6C, 0x5B, 0xF4, 0xE7, 0x4A, 0x89, 0x87, 0xD9, 0x39, 0x12, 0xFD, 0x9D, 0xF9,
];
const UUID_TOOLS_TLS: [u8; 16] = [
    0x42, 0xD8, 0x5A, 0x81, 0x23, 0xF6, 0xCB, 0x47, 0x82, 0x98, 0xF6, 0xE7, 0x8A, 0x3A, 0xEC, 0xDC,
];
const UUID_TOOLS_RUNTIME_CALLBACK_HOOKS: [u8; 16] = [
    0xA0, 0x94, 0x79, 0x8C, 0x2E, 0x74, 0x2E, 0x74, 0x93, 0xF2, 0x08, 0x00, 0x20, 0x0C, 0x0A, 0x66,
];
const UUID_CONTEXT_LOCAL_STORAGE_V0301: [u8; 16] = [
    0xC6, 0x93, 0x33, 0x6E, 0x11, 0x21, 0xDF, 0x11, 0xA8, 0xC3, 0x68, 0xF3, 0x55, 0xD8, 0x95, 0x93,
];
const UUID_CONTEXT_CHECKS: [u8; 16] = [
    0x26, 0x3E, 0x88, 0x60, 0x7C, 0xD2, 0x61, 0x43, 0x92, 0xF6, 0xBB, 0xD5, 0x00, 0x6D, 0xFA, 0x7E,
];
const UUID_INTEGRITY_CHECK: [u8; 16] = [
    0xD4, 0x08, 0x20, 0x55, 0xBD, 0xE6, 0x70, 0x4B, 0x8D, 0x34, 0xBA, 0x12, 0x3C, 0x66, 0xE1, 0xF2,
];

/// The table for a UUID, if this driver has it.
pub fn table_for(uuid: &[u8; 16]) -> Option<*const c_void> {
    Some(match *uuid {
        UUID_CUDART_INTERFACE => CUDART_INTERFACE.addr(),
        UUID_TOOLS_TLS => TOOLS_TLS.addr(),
        UUID_TOOLS_RUNTIME_CALLBACK_HOOKS => TOOLS_RUNTIME_CALLBACK_HOOKS.addr(),
        UUID_CONTEXT_LOCAL_STORAGE_V0301 => CONTEXT_LOCAL_STORAGE.addr(),
        UUID_CONTEXT_CHECKS => CONTEXT_CHECKS.addr(),
        UUID_INTEGRITY_CHECK => INTEGRITY_CHECK.addr(),
        _ => return None,
    })
}

/// `{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}`, the bytes in order (as ZLUDA writes table UUIDs).
pub fn format_table_uuid(b: &[u8; 16]) -> String {
    let h: Vec<String> = b.iter().map(|x| format!("{x:02X}")).collect();
    format!(
        "{{{}-{}-{}-{}-{}}}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

/// The table cudart 12.9 asks for that no driver documentation names; `CUDA_ERROR_INVALID_VALUE`
/// for it is tolerated (FACTS.md).
const UUID_TOLERATED_UNKNOWN: [u8; 16] = [
    0xF8, 0xCF, 0xF9, 0x51, 0x21, 0x46, 0x8B, 0x4E, 0xB9, 0xE2, 0xFB, 0x46, 0x9E, 0x7C, 0x0D, 0xD9,
];

/// Tables asked for and not answered (other than the tolerated one), in the order first asked.
static LACKING: Mutex<Vec<[u8; 16]>> = Mutex::new(Vec::new());

/// The tables `NCCL_SMOKE_SIM_CUDA_HIDE_TABLES` names, read once.
static HIDDEN: LazyLock<Vec<String>> = LazyLock::new(|| {
    crate::config::parse_hidden_tables(
        crate::config::var(crate::config::HIDE_TABLES_ENV).as_deref(),
    )
});

/// Whether `uuid` is a table this driver answers, `NCCL_SMOKE_SIM_CUDA_HIDE_TABLES` aside.
fn hidden(uuid: &[u8; 16]) -> bool {
    table_name(uuid)
        .and_then(|n| n.to_str().ok())
        .is_some_and(|n| HIDDEN.iter().any(|h| h == n))
}

/// The tables the runtime asked for that this driver lacks, as `{UUID}` or `{UUID} (NAME)`,
/// comma-separated; `None` when it lacked none (the tolerated table aside).
pub fn lacking() -> Option<String> {
    let l = LACKING.lock().unwrap_or_else(|e| e.into_inner());
    if l.is_empty() {
        return None;
    }
    let names: Vec<String> = l
        .iter()
        .map(|id| match table_name(id) {
            Some(n) => format!("{} ({})", format_table_uuid(id), n.to_string_lossy()),
            None => format_table_uuid(id),
        })
        .collect();
    Some(names.join(", "))
}

/// `CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)`.
/// An unknown table answers `CUDA_ERROR_INVALID_VALUE` (tolerated by cudart 12.9 for the one
/// extra table it asks, FACTS.md), is logged by UUID when tracing, and is kept for
/// [`lacking`], which the harness asks when a run fails.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetExportTable(
    pp_export_table: *mut *const c_void,
    p_export_table_id: *const CUuuid,
) -> CUresult {
    ffi("cuGetExportTable", || {
        non_null(pp_export_table)?;
        non_null(p_export_table_id)?;
        // SAFETY: checked non-null; a CUuuid is 16 bytes.
        let id: [u8; 16] = unsafe { (*p_export_table_id).bytes }.map(|b| b as u8);
        match table_for(&id).filter(|_| !hidden(&id)) {
            Some(t) => {
                trace::log(|| {
                    let name = table_name(&id)
                        .map(|n| n.to_string_lossy())
                        .unwrap_or_default();
                    format!("cuGetExportTable {} ({name})", format_table_uuid(&id))
                });
                // SAFETY: checked non-null.
                unsafe { put(pp_export_table, t) }
            }
            None => {
                trace::log(|| {
                    format!(
                        "cuGetExportTable {}: unknown table, CUDA_ERROR_INVALID_VALUE",
                        format_table_uuid(&id)
                    )
                });
                if id != UUID_TOLERATED_UNKNOWN {
                    let mut l = LACKING.lock().unwrap_or_else(|e| e.into_inner());
                    if !l.contains(&id) {
                        l.push(id);
                    }
                }
                Err(CUDA_ERROR_INVALID_VALUE)
            }
        }
    })
}

// ---------------------------------------------------------------------------------------------
// CUDART_INTERFACE

/// Slot 2: `CUresult (CUcontext *pctx, CUdevice dev)`.
unsafe extern "C" fn cudart_primary_context(pctx: *mut *mut c_void, dev: CUdevice) -> CUresult {
    ffi("cudart_primary_context", || {
        non_null(pctx)?;
        let h = primary_handle(dev)?;
        // SAFETY: checked non-null.
        unsafe { put(pctx, h as *mut c_void) }
    })
}

// ---------------------------------------------------------------------------------------------
// TOOLS_RUNTIME_CALLBACK_HOOKS

struct Buffer<const N: usize>(std::cell::UnsafeCell<[u8; N]>);
// SAFETY: the driver never touches it; whoever asks for it owns its contents.
unsafe impl<const N: usize> Sync for Buffer<N> {}

/// The lengths reported are ZLUDA's (1024 and 14), but the zeroed memory behind each is larger:
/// cudart 12.9 (NCCL 2.32.3) reads a flag at offset 0x658 of the first buffer in
/// `cudaGetDriverEntryPoint` (seen here with gdb: beyond 1024 bytes it read our neighbouring
/// static, took the tools-callback path and called the NULL TOOLS_TLS slot 2).
static HOOKS_BUFFER1: Buffer<8192> = Buffer(std::cell::UnsafeCell::new([0; 8192]));
static HOOKS_BUFFER2: Buffer<4096> = Buffer(std::cell::UnsafeCell::new([0; 4096]));

/// Slot 2: `void (void **ptr, size_t *size)`.
unsafe extern "C" fn hooks_buffer1(ptr: *mut *mut c_void, size: *mut usize) {
    if !ptr.is_null() && !size.is_null() {
        // SAFETY: checked non-null; the caller passes out-pointers.
        unsafe {
            ptr.write(HOOKS_BUFFER1.0.get().cast());
            size.write(1024);
        }
    }
}

/// Slot 6: `void (void **ptr, size_t *size)`.
unsafe extern "C" fn hooks_buffer2(ptr: *mut *mut c_void, size: *mut usize) {
    if !ptr.is_null() && !size.is_null() {
        // SAFETY: checked non-null; the caller passes out-pointers.
        unsafe {
            ptr.write(HOOKS_BUFFER2.0.get().cast());
            size.write(14);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// CONTEXT_LOCAL_STORAGE_V0301: per context, keyed by pointer (FACTS.md). A NULL context means
// the current one (ZLUDA). The destructor callback is kept but never called: contexts of this
// driver are never reset under the runtime (a guess that nothing needs it).

type ClsDtor = Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void)>;

#[allow(dead_code)]
struct ClsEntry {
    value: usize,
    dtor: ClsDtor,
}

static CLS: LazyLock<Mutex<HashMap<(usize, usize), ClsEntry>>> = LazyLock::new(Mutex::default);

fn cls_context(ctx: *mut c_void) -> CuResult<usize> {
    platform()?;
    let h = if ctx.is_null() {
        current_handle().ok_or(CUDA_ERROR_INVALID_CONTEXT)?
    } else {
        ctx as usize
    };
    context_device(h)?;
    Ok(h)
}

/// Slot 0: `CUresult (CUcontext ctx, void *key, void *value, dtor)`.
unsafe extern "C" fn cls_put(
    ctx: *mut c_void,
    key: *mut c_void,
    value: *mut c_void,
    dtor: ClsDtor,
) -> CUresult {
    ffi("cls_put", || {
        let h = cls_context(ctx)?;
        let mut m = CLS.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(
            (h, key as usize),
            ClsEntry {
                value: value as usize,
                dtor,
            },
        );
        Ok(())
    })
}

/// Slot 1: `CUresult (CUcontext ctx, void *key)`.
unsafe extern "C" fn cls_delete(ctx: *mut c_void, key: *mut c_void) -> CUresult {
    ffi("cls_delete", || {
        let h = cls_context(ctx)?;
        CLS.lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(h, key as usize));
        Ok(())
    })
}

/// Slot 2: `CUresult (void **value, CUcontext ctx, void *key)`; a missing key answers
/// `CUDA_ERROR_INVALID_HANDLE` (as ZLUDA's implementation does).
unsafe extern "C" fn cls_get(
    value: *mut *mut c_void,
    ctx: *mut c_void,
    key: *mut c_void,
) -> CUresult {
    ffi("cls_get", || {
        non_null(value)?;
        let h = cls_context(ctx)?;
        let v = CLS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(h, key as usize))
            .map(|e| e.value)
            .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        // SAFETY: checked non-null.
        unsafe { put(value, v as *mut c_void) }
    })
}

// ---------------------------------------------------------------------------------------------
// CONTEXT_CHECKS

/// Slot 2: `CUresult (CUcontext ctx, unsigned *result, const void **result2)`: writes 0.
unsafe extern "C" fn context_check(
    _ctx: *mut c_void,
    result: *mut u32,
    _result2: *mut *const c_void,
) -> CUresult {
    if !result.is_null() {
        // SAFETY: checked non-null.
        unsafe { result.write(0) };
    }
    CUDA_SUCCESS
}

/// Slot 3: `unsigned (void)`: 0.
unsafe extern "C" fn context_check3() -> u32 {
    0
}

// ---------------------------------------------------------------------------------------------
// INTEGRITY_CHECK (FACTS.md): for version endings 0 and 1 a fixed pair; otherwise
// HMAC-MD2 with a fixed 16-byte key over {driver version, version, pid, (u32)pthread_self(),
// &CUDART_INTERFACE, &INTEGRITY_CHECK, &check function, time} then per device {UUID, PCI
// domain, bus, device}, all packed little-endian.

const INTEGRITY_KEY: [u8; 16] = [
    0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52, 0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F,
];

/// What is hashed, and the key: everything the check depends on.
pub struct IntegrityInput {
    pub driver_version: u32,
    pub version: u32,
    pub pid: u32,
    pub thread: u32,
    pub cudart_table: u64,
    pub integrity_table: u64,
    pub check_fn: u64,
    pub time: u64,
    /// Per visible device, in ordinal order: UUID, PCI domain, bus, device.
    pub devices: Vec<([u8; 16], i32, i32, i32)>,
}

impl IntegrityInput {
    pub fn message(&self) -> Vec<u8> {
        let mut m = Vec::with_capacity(48 + 28 * self.devices.len());
        for v in [self.driver_version, self.version, self.pid, self.thread] {
            m.extend_from_slice(&v.to_le_bytes());
        }
        for v in [
            self.cudart_table,
            self.integrity_table,
            self.check_fn,
            self.time,
        ] {
            m.extend_from_slice(&v.to_le_bytes());
        }
        for (uuid, domain, bus, dev) in &self.devices {
            m.extend_from_slice(uuid);
            for v in [domain, bus, dev] {
                m.extend_from_slice(&v.to_le_bytes());
            }
        }
        m
    }
}

/// The 16 bytes of the answer, as two native (little-endian) u64.
pub fn integrity_answer(input: &IntegrityInput) -> [u64; 2] {
    match input.version % 10 {
        0 => return [0x3341_181C_03CB_675C, 0x8ED3_83AA_1F4C_D1E8],
        1 => return [0x1841_181C_03CB_675C, 0x8ED3_83AA_1F4C_D1E8],
        _ => {}
    }
    let mut mac = <Hmac<Md2> as Mac>::new_from_slice(&INTEGRITY_KEY).expect("any key length");
    mac.update(&input.message());
    let out = mac.finalize().into_bytes();
    [
        u64::from_le_bytes(out[0..8].try_into().expect("16 bytes")),
        u64::from_le_bytes(out[8..16].try_into().expect("16 bytes")),
    ]
}

/// Slot 1: `CUresult (unsigned version, unsigned long long time, unsigned long long out[2])`.
unsafe extern "C" fn integrity_check(version: u32, time: u64, out: *mut [u64; 2]) -> CUresult {
    ffi("integrity_check", || {
        non_null(out)?;
        let devices = match platform() {
            Ok(p) => p
                .gpus
                .iter()
                .map(|g| {
                    let (d, b, v) = crate::config::pci_location(g.physical);
                    (g.uuid, d as i32, b as i32, v as i32)
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        let input = IntegrityInput {
            driver_version: driver_version() as u32,
            version,
            pid: std::process::id(),
            // SAFETY: no preconditions.
            thread: unsafe { libc::pthread_self() } as u32,
            cudart_table: CUDART_INTERFACE.addr() as u64,
            integrity_table: INTEGRITY_CHECK.addr() as u64,
            check_fn: integrity_check as *const c_void as u64,
            time,
            devices,
        };
        let answer = integrity_answer(&input);
        trace::log(|| format!("integrity check version {version}"));
        // SAFETY: checked non-null.
        unsafe { put(out, answer) }
    })
}

/// The name of a table, for logs.
pub fn table_name(uuid: &[u8; 16]) -> Option<&'static CStr> {
    Some(match *uuid {
        UUID_CUDART_INTERFACE => c"CUDART_INTERFACE",
        UUID_TOOLS_TLS => c"TOOLS_TLS",
        UUID_TOOLS_RUNTIME_CALLBACK_HOOKS => c"TOOLS_RUNTIME_CALLBACK_HOOKS",
        UUID_CONTEXT_LOCAL_STORAGE_V0301 => c"CONTEXT_LOCAL_STORAGE_V0301",
        UUID_CONTEXT_CHECKS => c"CONTEXT_CHECKS",
        UUID_INTEGRITY_CHECK => c"INTEGRITY_CHECK",
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
