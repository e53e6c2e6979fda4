use super::*;
use crate::context::{CUcontext, cuCtxSetCurrent, cuDevicePrimaryCtxRetain};
use crate::device::init_for_tests;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Initialises the driver and makes `dev`'s primary context current on this thread.
pub fn use_device(dev: CUdevice) {
    init_for_tests();
    let mut ctx: CUcontext = null_mut();
    // SAFETY: valid out-pointer; the handle came from the driver.
    unsafe {
        assert_eq!(cuDevicePrimaryCtxRetain(&mut ctx, dev), CUDA_SUCCESS);
        assert_eq!(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
    }
}

pub fn new_stream() -> CUstream {
    let mut s: CUstream = null_mut();
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { cuStreamCreate(&mut s, 0) }, CUDA_SUCCESS);
    s
}

fn new_event() -> CUevent {
    let mut e: CUevent = null_mut();
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { cuEventCreate(&mut e, 0) }, CUDA_SUCCESS);
    e
}

/// Launches a Rust closure as a host function.
fn launch(stream: CUstream, f: impl FnOnce() + Send + 'static) -> CUresult {
    unsafe extern "C" fn tramp(data: *mut c_void) {
        // SAFETY: `data` is the box leaked below, run exactly once.
        let f = unsafe { Box::from_raw(data.cast::<Box<dyn FnOnce() + Send>>()) };
        f();
    }
    let data: Box<Box<dyn FnOnce() + Send>> = Box::new(Box::new(f));
    // SAFETY: the trampoline takes ownership of the box.
    unsafe { cuLaunchHostFunc(stream, Some(tramp), Box::into_raw(data).cast()) }
}

#[test]
fn host_funcs_run_in_order() {
    use_device(0);
    let s = new_stream();
    let seen = Arc::new(Mutex::new(Vec::new()));
    for i in 0..200 {
        let seen = Arc::clone(&seen);
        if i % 50 == 0 {
            // Occasional slow item: order must hold regardless of timing.
            assert_eq!(
                launch(s, move || {
                    std::thread::sleep(Duration::from_millis(5));
                    seen.lock().unwrap().push(i)
                }),
                CUDA_SUCCESS
            );
        } else {
            assert_eq!(
                launch(s, move || seen.lock().unwrap().push(i)),
                CUDA_SUCCESS
            );
        }
    }
    // SAFETY: live handle.
    unsafe {
        assert_eq!(cuStreamSynchronize(s), CUDA_SUCCESS);
        assert_eq!(*seen.lock().unwrap(), (0..200).collect::<Vec<_>>());
        assert_eq!(cuStreamDestroy_v2(s), CUDA_SUCCESS);
        assert_eq!(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
        assert_eq!(cuStreamDestroy_v2(s), CUDA_ERROR_INVALID_HANDLE);
        assert_eq!(
            cuLaunchHostFunc(null_mut(), None, null_mut()),
            CUDA_ERROR_INVALID_VALUE
        );
    }
}

#[test]
fn query_is_not_ready_while_work_pends() {
    use_device(0);
    let s = new_stream();
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let g = Arc::clone(&gate);
    assert_eq!(
        launch(s, move || {
            let (m, cv) = &*g;
            let mut open = m.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
        }),
        CUDA_SUCCESS
    );
    let ev = new_event();
    // SAFETY: live handles.
    unsafe {
        assert_eq!(cuEventRecord(ev, s), CUDA_SUCCESS);
        assert_eq!(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
        assert_eq!(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        assert_eq!(cuStreamSynchronize(s), CUDA_SUCCESS);
        assert_eq!(cuStreamQuery(s), CUDA_SUCCESS);
        assert_eq!(cuEventQuery(ev), CUDA_SUCCESS);
        assert_eq!(cuEventDestroy_v2(ev), CUDA_SUCCESS);
        assert_eq!(cuEventQuery(ev), CUDA_ERROR_INVALID_HANDLE);
        assert_eq!(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    }
}

#[test]
fn elapsed_time_covers_a_sleeping_host_func() {
    use_device(1);
    let s = new_stream();
    let (a, b) = (new_event(), new_event());
    let mut ms: c_float = -1.0;
    // SAFETY: live handles, valid out-pointer.
    unsafe {
        assert_eq!(cuEventElapsedTime(&mut ms, a, b), CUDA_ERROR_INVALID_HANDLE);
        assert_eq!(cuEventQuery(a), CUDA_SUCCESS); // never recorded
        assert_eq!(cuEventRecord(a, s), CUDA_SUCCESS);
        assert_eq!(
            launch(s, || std::thread::sleep(Duration::from_millis(20))),
            CUDA_SUCCESS
        );
        assert_eq!(cuEventRecordWithFlags(b, s, 0), CUDA_SUCCESS);
        let rc = cuEventElapsedTime(&mut ms, a, b);
        assert!(rc == CUDA_ERROR_NOT_READY || rc == CUDA_SUCCESS);
        assert_eq!(cuEventSynchronize(b), CUDA_SUCCESS);
        assert_eq!(cuEventElapsedTime(&mut ms, a, b), CUDA_SUCCESS);
        assert!(ms >= 20.0, "{ms} ms");
        assert!(ms < 5000.0, "{ms} ms");
        assert_eq!(cuEventElapsedTime(&mut ms, b, a), CUDA_SUCCESS);
        assert!(ms <= -20.0, "{ms} ms");
        assert_eq!(
            cuEventElapsedTime(null_mut(), a, b),
            CUDA_ERROR_INVALID_VALUE
        );
        let mut nt: CUevent = null_mut();
        assert_eq!(
            cuEventCreate(&mut nt, CU_EVENT_DISABLE_TIMING),
            CUDA_SUCCESS
        );
        assert_eq!(cuEventRecord(nt, s), CUDA_SUCCESS);
        assert_eq!(cuEventSynchronize(nt), CUDA_SUCCESS);
        assert_eq!(
            cuEventElapsedTime(&mut ms, a, nt),
            CUDA_ERROR_INVALID_HANDLE
        );
        assert_eq!(
            cuEventRecord(0x1234 as CUevent, s),
            CUDA_ERROR_INVALID_HANDLE
        );
        assert_eq!(
            cuEventRecord(a, 0x1234 as CUstream),
            CUDA_ERROR_INVALID_HANDLE
        );
        for e in [a, b, nt] {
            assert_eq!(cuEventDestroy_v2(e), CUDA_SUCCESS);
        }
        assert_eq!(cuStreamDestroy_v2(s), CUDA_SUCCESS);
    }
}

#[test]
fn stream_waits_for_event_on_another_stream() {
    use_device(1);
    let (s1, s2) = (new_stream(), new_stream());
    let ev = new_event();
    let flag = Arc::new(AtomicBool::new(false));
    let f1 = Arc::clone(&flag);
    let f2 = Arc::clone(&flag);
    let saw = Arc::new(AtomicBool::new(false));
    let saw2 = Arc::clone(&saw);
    assert_eq!(
        launch(s1, move || {
            std::thread::sleep(Duration::from_millis(30));
            f1.store(true, Ordering::SeqCst);
        }),
        CUDA_SUCCESS
    );
    // SAFETY: live handles.
    unsafe {
        assert_eq!(cuEventRecord(ev, s1), CUDA_SUCCESS);
        assert_eq!(cuStreamWaitEvent(s2, ev, 0), CUDA_SUCCESS);
    }
    assert_eq!(
        launch(s2, move || saw2
            .store(f2.load(Ordering::SeqCst), Ordering::SeqCst)),
        CUDA_SUCCESS
    );
    // SAFETY: live handles.
    unsafe {
        assert_eq!(cuStreamSynchronize(s2), CUDA_SUCCESS);
        assert!(saw.load(Ordering::SeqCst));
        // The default stream (0, legacy, per-thread) works too.
        for h in [0, STREAM_LEGACY, STREAM_PER_THREAD] {
            let rc = cuStreamQuery(h as CUstream);
            assert!(rc == CUDA_SUCCESS || rc == CUDA_ERROR_NOT_READY, "{rc:?}");
        }
        assert_eq!(cuStreamSynchronize(null_mut()), CUDA_SUCCESS);
        for s in [s1, s2] {
            assert_eq!(cuStreamDestroy_v2(s), CUDA_SUCCESS);
        }
        assert_eq!(cuEventDestroy_v2(ev), CUDA_SUCCESS);
    }
}

#[test]
fn destroyed_stream_still_finishes_its_work() {
    use_device(1);
    let s = new_stream();
    let done = Arc::new(AtomicBool::new(false));
    let d = Arc::clone(&done);
    assert_eq!(
        launch(s, move || {
            std::thread::sleep(Duration::from_millis(10));
            d.store(true, Ordering::SeqCst);
        }),
        CUDA_SUCCESS
    );
    // SAFETY: live handle.
    assert_eq!(unsafe { cuStreamDestroy_v2(s) }, CUDA_SUCCESS);
    let t0 = Instant::now();
    while !done.load(Ordering::SeqCst) {
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(1));
    }
}
