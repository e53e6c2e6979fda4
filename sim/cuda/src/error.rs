//! The helpers that turn Rust results into return codes without unwinding across the C ABI,
//! and the driver's own `cuGetErrorName` and `cuGetErrorString`. The codes are [`crate::codes`].

pub use crate::codes::*;
use std::ffi::{CStr, c_char, c_uint};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs the body of entry point `name`, mapping `Ok` to `CUDA_SUCCESS` and a panic (a bug) to
/// `CUDA_ERROR_UNKNOWN`, so that nothing unwinds into C. A fault injected at `name`
/// (`NCCL_SMOKE_SIM_CUDA_FAULT`, see [`crate::fault::entry`]) strikes first.
pub fn ffi(name: &str, body: impl FnOnce() -> CuResult) -> CUresult {
    if let Err(e) = crate::fault::entry(name) {
        return e;
    }
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => CUDA_SUCCESS,
        Ok(Err(e)) => e,
        Err(_) => CUDA_ERROR_UNKNOWN,
    }
}

/// Writes `v` through an out-pointer, or fails with `CUDA_ERROR_INVALID_VALUE` when it is null.
///
/// # Safety
/// `p` must be null or valid for a write of `T`.
pub unsafe fn put<T>(p: *mut T, v: T) -> CuResult {
    if p.is_null() {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: non-null, and the caller vouches for validity.
    unsafe { p.write(v) };
    Ok(())
}

/// Fails with `CUDA_ERROR_INVALID_VALUE` when an out-pointer is null (checked before any work).
pub fn non_null<T>(p: *const T) -> CuResult {
    if p.is_null() {
        Err(CUDA_ERROR_INVALID_VALUE)
    } else {
        Ok(())
    }
}

fn describe(
    code: c_uint,
    p_str: *mut *const c_char,
    pick: fn((&'static CStr, &'static CStr)) -> &'static CStr,
) -> CUresult {
    if p_str.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    let (ptr, rc) = match lookup(code) {
        Some(entry) => (pick(entry).as_ptr(), CUDA_SUCCESS),
        None => (std::ptr::null(), CUDA_ERROR_INVALID_VALUE),
    };
    // SAFETY: checked non-null; the caller passes a valid `const char **`.
    unsafe { p_str.write(ptr) };
    rc
}

/// `CUresult cuGetErrorName(CUresult error, const char **pStr)`; works before `cuInit`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorName(error: c_uint, p_str: *mut *const c_char) -> CUresult {
    describe(error, p_str, |(name, _)| name)
}

/// `CUresult cuGetErrorString(CUresult error, const char **pStr)`; works before `cuInit`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorString(error: c_uint, p_str: *mut *const c_char) -> CUresult {
    describe(error, p_str, |(_, text)| text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(code: c_uint) -> (CUresult, Option<String>) {
        let mut p: *const c_char = c"sentinel".as_ptr();
        // SAFETY: valid out-pointer.
        let rc = unsafe { cuGetErrorName(code, &mut p) };
        // SAFETY: the driver returns null or a static NUL-terminated string.
        let s = (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned());
        (rc, s)
    }

    fn string_of(code: c_uint) -> Option<String> {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: valid out-pointer.
        let rc = unsafe { cuGetErrorString(code, &mut p) };
        assert_eq!(rc, CUDA_SUCCESS);
        // SAFETY: static NUL-terminated string.
        Some(unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned())
    }

    #[test]
    fn every_returned_code_has_its_real_name_and_text() {
        let cases = [
            (CUDA_SUCCESS, "CUDA_SUCCESS", "no error"),
            (
                CUDA_ERROR_INVALID_VALUE,
                "CUDA_ERROR_INVALID_VALUE",
                "invalid argument",
            ),
            (
                CUDA_ERROR_OUT_OF_MEMORY,
                "CUDA_ERROR_OUT_OF_MEMORY",
                "out of memory",
            ),
            (
                CUDA_ERROR_NOT_INITIALIZED,
                "CUDA_ERROR_NOT_INITIALIZED",
                "initialization error",
            ),
            (
                CUDA_ERROR_NO_DEVICE,
                "CUDA_ERROR_NO_DEVICE",
                "no CUDA-capable device is detected",
            ),
            (
                CUDA_ERROR_INVALID_DEVICE,
                "CUDA_ERROR_INVALID_DEVICE",
                "invalid device ordinal",
            ),
            (
                CUDA_ERROR_INVALID_CONTEXT,
                "CUDA_ERROR_INVALID_CONTEXT",
                "invalid device context",
            ),
            (
                CUDA_ERROR_INVALID_HANDLE,
                "CUDA_ERROR_INVALID_HANDLE",
                "invalid resource handle",
            ),
            (
                CUDA_ERROR_NOT_READY,
                "CUDA_ERROR_NOT_READY",
                "device not ready",
            ),
            (
                CUDA_ERROR_NOT_SUPPORTED,
                "CUDA_ERROR_NOT_SUPPORTED",
                "operation not supported",
            ),
            (CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"),
        ];
        for (code, name, text) in cases {
            assert_eq!(name_of(code.0), (CUDA_SUCCESS, Some(name.to_owned())));
            assert_eq!(string_of(code.0).as_deref(), Some(text));
        }
    }

    #[test]
    fn unknown_code_gives_invalid_value_and_null() {
        assert_eq!(name_of(12345), (CUDA_ERROR_INVALID_VALUE, None));
        let mut p: *const c_char = c"x".as_ptr();
        // SAFETY: valid out-pointer.
        assert_eq!(
            unsafe { cuGetErrorString(12345, &mut p) },
            CUDA_ERROR_INVALID_VALUE
        );
        assert!(p.is_null());
        // SAFETY: a null out-pointer is rejected, not written.
        assert_eq!(
            unsafe { cuGetErrorName(0, std::ptr::null_mut()) },
            CUDA_ERROR_INVALID_VALUE
        );
    }

    #[test]
    fn panics_become_unknown_error() {
        assert_eq!(ffi("cuTest", || panic!("bug")), CUDA_ERROR_UNKNOWN);
        assert_eq!(
            ffi("cuTest", || Err(CUDA_ERROR_NOT_READY)),
            CUDA_ERROR_NOT_READY
        );
    }
}
