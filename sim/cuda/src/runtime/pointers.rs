//! Memory as the runtime asks about it: pointer attributes, peer copies, 16-bit fills.

use super::*;

/// Writes one `CUpointer_attribute` (cuda.h 12.x numbering) for `ptr`; unknown memory gets
/// zeroes, as `cuPointerGetAttributes` documents. Booleans are written as one byte (a guess
/// that avoids writing past a `bool`).
///
/// # Safety
/// `data` must be valid for the attribute's type.
unsafe fn pointer_attribute(attr: c_int, ptr: usize, data: *mut c_void) -> CuResult {
    let r = find_range(ptr);
    let dev = r.as_ref().and_then(|r| r.device);
    let known = r.is_some();
    // SAFETY (whole body): the caller vouches for `data`'s type.
    unsafe {
        match attr {
            1 => {
                let ctx = match dev {
                    Some(d) => primary_handle(d)? as CUcontext,
                    None => std::ptr::null_mut(),
                };
                data.cast::<CUcontext>().write(ctx)
            }
            // MEMORY_TYPE: HOST 1, DEVICE 2.
            2 => data.cast::<c_uint>().write(match (&r, dev) {
                (_, Some(_)) => 2,
                (Some(_), None) => 1,
                (None, None) => 0,
            }),
            3 | 4 => data.cast::<usize>().write(if known { ptr } else { 0 }),
            5 => data.cast::<[u64; 2]>().write([0; 2]),
            6 | 8 | 10 | 13 | 15 => data.cast::<u8>().write(match attr {
                6 => 1,
                10 => u8::from(r.as_ref().is_some_and(|r| r.memfd.is_some())),
                13 | 15 => u8::from(known),
                _ => 0,
            }),
            7 | 20 => data
                .cast::<u64>()
                .write(r.as_ref().map_or(0, |r| r.base as u64)),
            9 => data.cast::<c_int>().write(dev.unwrap_or(-2)),
            11 | 19 => data.cast::<usize>().write(r.as_ref().map_or(0, |r| r.base)),
            12 | 18 => data.cast::<usize>().write(r.as_ref().map_or(0, |r| r.size)),
            14 => data.cast::<u64>().write(0),
            16 => data.cast::<c_uint>().write(if known { 3 } else { 0 }),
            17 => data.cast::<*mut c_void>().write(std::ptr::null_mut()),
            _ => return Err(CUDA_ERROR_INVALID_VALUE),
        }
    }
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuPointerGetAttribute(
    data: *mut c_void,
    attr: c_int,
    ptr: CUdeviceptr,
) -> CUresult {
    ffi("cuPointerGetAttribute", || {
        non_null(data)?;
        platform()?;
        if find_range(ptr as usize).is_none() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: the caller passes storage of the attribute's type.
        unsafe { pointer_attribute(attr, ptr as usize, data) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuPointerGetAttributes(
    num: c_uint,
    attrs: *const c_int,
    data: *mut *mut c_void,
    ptr: CUdeviceptr,
) -> CUresult {
    ffi("cuPointerGetAttributes", || {
        platform()?;
        if num == 0 || attrs.is_null() || data.is_null() {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        for i in 0..num as usize {
            // SAFETY: the caller passes `num` attributes and `num` destinations.
            unsafe {
                let d = *data.add(i);
                if !d.is_null() {
                    pointer_attribute(*attrs.add(i), ptr as usize, d)?;
                }
            }
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuPointerSetAttribute(
    _value: *const c_void,
    _attr: c_int,
    ptr: CUdeviceptr,
) -> CUresult {
    ffi("cuPointerSetAttribute", || {
        platform()?;
        find_range(ptr as usize)
            .map(|_| ())
            .ok_or(CUDA_ERROR_INVALID_VALUE)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyPeer(
    dst: CUdeviceptr,
    _dst_ctx: CUcontext,
    src: CUdeviceptr,
    _src_ctx: CUcontext,
    n: usize,
) -> CUresult {
    ffi("cuMemcpyPeer", || {
        copy::now(copy::copy(dst as usize, src as usize, n))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyPeerAsync(
    dst: CUdeviceptr,
    _dst_ctx: CUcontext,
    src: CUdeviceptr,
    _src_ctx: CUcontext,
    n: usize,
    stream: CUstream,
) -> CUresult {
    ffi("cuMemcpyPeerAsync", || {
        copy::queued(copy::copy(dst as usize, src as usize, n), stream)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD16_v2(dst: CUdeviceptr, us: c_ushort, n: usize) -> CUresult {
    ffi("cuMemsetD16_v2", || {
        copy::now(copy::Op::Set16 {
            dst: dst as usize,
            v: us,
            n,
        })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD16Async(
    dst: CUdeviceptr,
    us: c_ushort,
    n: usize,
    stream: CUstream,
) -> CUresult {
    ffi("cuMemsetD16Async", || {
        copy::queued(
            copy::Op::Set16 {
                dst: dst as usize,
                v: us,
                n,
            },
            stream,
        )
    })
}
