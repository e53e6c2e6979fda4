//! Streams and events. A stream is an in-order queue of host closures drained by its own worker
//! thread; events record the moment the worker reaches them.

use crate::context::current_device;
use crate::device::{CUdevice, platform};
use crate::error::*;
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_float, c_int, c_uint, c_void};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::Instant;

pub type CUstream = *mut c_void;
pub type CUevent = *mut c_void;
pub type CUhostFn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// `CU_STREAM_LEGACY` and `CU_STREAM_PER_THREAD`; both, and 0, are the process default stream.
const STREAM_LEGACY: usize = 1;
const STREAM_PER_THREAD: usize = 2;
const CU_STREAM_NON_BLOCKING: c_uint = 1;
const CU_EVENT_DISABLE_TIMING: c_uint = 2;
const EVENT_FLAGS_ALL: c_uint = 0x1 | 0x2 | 0x4;

pub type Task = Box<dyn FnOnce() + Send + 'static>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Default)]
struct Queue {
    tasks: VecDeque<Task>,
    submitted: u64,
    completed: u64,
    closing: bool,
}

pub struct Stream {
    /// Device of the context it was created in; `None` for the default stream.
    device: Option<CUdevice>,
    queue: Mutex<Queue>,
    /// Signalled when work arrives or the stream closes.
    work: Condvar,
    /// Signalled when a task completes.
    done: Condvar,
}

impl Stream {
    fn spawn(device: Option<CUdevice>) -> CuResult<Arc<Stream>> {
        let s = Arc::new(Stream {
            device,
            queue: Mutex::default(),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        let worker = Arc::clone(&s);
        std::thread::Builder::new()
            .name("sim-cuda-stream".into())
            .spawn(move || worker.run())
            .map_err(|_| CUDA_ERROR_OUT_OF_MEMORY)?;
        Ok(s)
    }

    fn run(&self) {
        loop {
            let task = {
                let mut q = lock(&self.queue);
                loop {
                    if let Some(t) = q.tasks.pop_front() {
                        break t;
                    }
                    if q.closing {
                        return;
                    }
                    q = self.work.wait(q).unwrap_or_else(|e| e.into_inner());
                }
            };
            // A panicking task (a bug) must not kill the worker and leave waiters hanging.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(task));
            lock(&self.queue).completed += 1;
            self.done.notify_all();
        }
    }

    /// Queues `task` behind everything queued so far.
    pub fn enqueue(&self, task: Task) {
        let mut q = lock(&self.queue);
        q.tasks.push_back(task);
        q.submitted += 1;
        drop(q);
        self.work.notify_one();
    }

    /// Waits until everything queued before this call has run.
    pub fn synchronize(&self) {
        let mut q = lock(&self.queue);
        let target = q.submitted;
        while q.completed < target {
            q = self.done.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    pub fn is_idle(&self) -> bool {
        let q = lock(&self.queue);
        q.completed == q.submitted
    }

    fn close(&self) {
        lock(&self.queue).closing = true;
        self.work.notify_all();
    }
}

static DEFAULT: Mutex<Option<Arc<Stream>>> = Mutex::new(None);
static STREAMS: LazyLock<Mutex<HashMap<usize, Arc<Stream>>>> = LazyLock::new(Mutex::default);

/// The process-wide default stream (handles 0, `CU_STREAM_LEGACY`, `CU_STREAM_PER_THREAD`).
pub fn default_stream() -> CuResult<Arc<Stream>> {
    let mut d = lock(&DEFAULT);
    if let Some(s) = d.as_ref() {
        return Ok(Arc::clone(s));
    }
    let s = Stream::spawn(None)?;
    *d = Some(Arc::clone(&s));
    Ok(s)
}

/// The stream behind a handle; `CUDA_ERROR_INVALID_HANDLE` for an unknown one.
pub fn lookup(h: CUstream) -> CuResult<Arc<Stream>> {
    platform()?;
    match h as usize {
        0 | STREAM_LEGACY | STREAM_PER_THREAD => default_stream(),
        id => lock(&STREAMS)
            .get(&id)
            .cloned()
            .ok_or(CUDA_ERROR_INVALID_HANDLE),
    }
}

/// The device a stream was created on (the current one for the default stream).
pub fn stream_device(h: CUstream) -> CuResult<CUdevice> {
    match lookup(h)?.device {
        Some(d) => Ok(d),
        None => current_device(),
    }
}

/// Waits for the default stream and every stream created on `dev`.
pub fn synchronize_device(dev: CUdevice) {
    let mut streams: Vec<Arc<Stream>> = lock(&STREAMS)
        .values()
        .filter(|s| s.device == Some(dev))
        .cloned()
        .collect();
    if let Ok(d) = default_stream() {
        streams.push(d);
    }
    for s in streams {
        s.synchronize();
    }
}

/// Lives with the streams it waits for (the context only names the device).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxSynchronize() -> CUresult {
    ffi("cuCtxSynchronize", || {
        let dev = current_device()?;
        synchronize_device(dev);
        Ok(())
    })
}

fn create_stream(ph: *mut CUstream, flags: c_uint) -> CuResult {
    non_null(ph)?;
    let dev = current_device()?;
    if flags & !CU_STREAM_NON_BLOCKING != 0 {
        return Err(CUDA_ERROR_INVALID_VALUE);
    }
    let s = Stream::spawn(Some(dev))?;
    let id = crate::next_handle();
    lock(&STREAMS).insert(id, s);
    // SAFETY: checked non-null.
    unsafe { put(ph, id as CUstream) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamCreate(ph_stream: *mut CUstream, flags: c_uint) -> CUresult {
    ffi("cuStreamCreate", || create_stream(ph_stream, flags))
}

/// Priorities are accepted and ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamCreateWithPriority(
    ph_stream: *mut CUstream,
    flags: c_uint,
    _priority: c_int,
) -> CUresult {
    ffi("cuStreamCreateWithPriority", || {
        create_stream(ph_stream, flags)
    })
}

/// Returns at once; the worker finishes the queued work, then exits.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamDestroy_v2(h_stream: CUstream) -> CUresult {
    ffi("cuStreamDestroy_v2", || {
        platform()?;
        let s = lock(&STREAMS)
            .remove(&(h_stream as usize))
            .ok_or(CUDA_ERROR_INVALID_HANDLE)?;
        s.close();
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamSynchronize(h_stream: CUstream) -> CUresult {
    ffi("cuStreamSynchronize", || {
        lookup(h_stream)?.synchronize();
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamQuery(h_stream: CUstream) -> CUresult {
    ffi("cuStreamQuery", || {
        if lookup(h_stream)?.is_idle() {
            Ok(())
        } else {
            Err(CUDA_ERROR_NOT_READY)
        }
    })
}

/// A pointer handed to a worker thread; the API contract keeps what it points to alive.
#[derive(Clone, Copy)]
pub struct SendPtr(pub *mut c_void);
// SAFETY: only an address; the CUDA API contract makes the caller responsible for the pointee.
unsafe impl Send for SendPtr {}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLaunchHostFunc(
    h_stream: CUstream,
    func: CUhostFn,
    user_data: *mut c_void,
) -> CUresult {
    ffi("cuLaunchHostFunc", || {
        let f = func.ok_or(CUDA_ERROR_INVALID_VALUE)?;
        let s = lookup(h_stream)?;
        let data = SendPtr(user_data);
        s.enqueue(Box::new(move || {
            let data = data;
            // SAFETY: the caller's function with the caller's data, as cuLaunchHostFunc promises.
            unsafe { f(data.0) }
        }));
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Events

#[derive(Default)]
struct EventState {
    /// Number of the latest record call (0: never recorded).
    recorded: u64,
    /// Number of the latest record the stream has reached.
    reached: u64,
    at: Option<Instant>,
}

pub struct Event {
    timing: bool,
    state: Mutex<EventState>,
    cv: Condvar,
}

impl Event {
    fn complete(&self) -> bool {
        let st = lock(&self.state);
        st.reached >= st.recorded
    }

    /// Waits until the stream has reached record number `upto`.
    fn wait_for(&self, upto: u64) {
        let mut st = lock(&self.state);
        while st.reached < upto {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }
}

static EVENTS: LazyLock<Mutex<HashMap<usize, Arc<Event>>>> = LazyLock::new(Mutex::default);

fn event(h: CUevent) -> CuResult<Arc<Event>> {
    platform()?;
    lock(&EVENTS)
        .get(&(h as usize))
        .cloned()
        .ok_or(CUDA_ERROR_INVALID_HANDLE)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventCreate(ph_event: *mut CUevent, flags: c_uint) -> CUresult {
    ffi("cuEventCreate", || {
        non_null(ph_event)?;
        current_device()?;
        if flags & !EVENT_FLAGS_ALL != 0 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let ev = Arc::new(Event {
            timing: flags & CU_EVENT_DISABLE_TIMING == 0,
            state: Mutex::default(),
            cv: Condvar::new(),
        });
        let id = crate::next_handle();
        lock(&EVENTS).insert(id, ev);
        // SAFETY: checked non-null.
        unsafe { put(ph_event, id as CUevent) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventDestroy_v2(h_event: CUevent) -> CUresult {
    ffi("cuEventDestroy_v2", || {
        platform()?;
        lock(&EVENTS)
            .remove(&(h_event as usize))
            .map(|_| ())
            .ok_or(CUDA_ERROR_INVALID_HANDLE)
    })
}

fn record(h_event: CUevent, h_stream: CUstream) -> CuResult {
    let ev = event(h_event)?;
    let s = lookup(h_stream)?;
    let n = {
        let mut st = lock(&ev.state);
        st.recorded += 1;
        st.recorded
    };
    s.enqueue(Box::new(move || {
        let now = Instant::now();
        let mut st = lock(&ev.state);
        if n > st.reached {
            st.reached = n;
            st.at = Some(now);
        }
        drop(st);
        ev.cv.notify_all();
    }));
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventRecord(h_event: CUevent, h_stream: CUstream) -> CUresult {
    ffi("cuEventRecord", || record(h_event, h_stream))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventRecordWithFlags(
    h_event: CUevent,
    h_stream: CUstream,
    flags: c_uint,
) -> CUresult {
    ffi("cuEventRecordWithFlags", || {
        // CU_EVENT_RECORD_DEFAULT (0) or CU_EVENT_RECORD_EXTERNAL (1).
        if flags > 1 {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        record(h_event, h_stream)
    })
}

/// `CUDA_SUCCESS` once the stream has reached the latest record (or when never recorded).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventQuery(h_event: CUevent) -> CUresult {
    ffi("cuEventQuery", || {
        if event(h_event)?.complete() {
            Ok(())
        } else {
            Err(CUDA_ERROR_NOT_READY)
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventSynchronize(h_event: CUevent) -> CUresult {
    ffi("cuEventSynchronize", || {
        let ev = event(h_event)?;
        let upto = lock(&ev.state).recorded;
        ev.wait_for(upto);
        Ok(())
    })
}

/// Milliseconds between the moments the stream workers reached the two records.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventElapsedTime(
    p_milliseconds: *mut c_float,
    h_start: CUevent,
    h_end: CUevent,
) -> CUresult {
    ffi("cuEventElapsedTime", || {
        non_null(p_milliseconds)?;
        let (start, end) = (event(h_start)?, event(h_end)?);
        if !start.timing || !end.timing {
            return Err(CUDA_ERROR_INVALID_HANDLE);
        }
        let moment = |ev: &Event| -> CuResult<Instant> {
            let st = lock(&ev.state);
            if st.recorded == 0 {
                Err(CUDA_ERROR_INVALID_HANDLE)
            } else if st.reached < st.recorded {
                Err(CUDA_ERROR_NOT_READY)
            } else {
                st.at.ok_or(CUDA_ERROR_NOT_READY)
            }
        };
        let (t0, t1) = (moment(&start)?, moment(&end)?);
        let ms = if t1 >= t0 {
            (t1 - t0).as_secs_f64() * 1e3
        } else {
            -((t0 - t1).as_secs_f64() * 1e3)
        };
        // SAFETY: checked non-null.
        unsafe { put(p_milliseconds, ms as c_float) }
    })
}

/// The CUDA 13 spelling of the same call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventElapsedTime_v2(
    p_milliseconds: *mut c_float,
    h_start: CUevent,
    h_end: CUevent,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuEventElapsedTime(p_milliseconds, h_start, h_end) }
}

/// Later work on `h_stream` waits until the event's latest record (at the time of this call)
/// has been reached; a never-recorded event is no dependency.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamWaitEvent(
    h_stream: CUstream,
    h_event: CUevent,
    _flags: c_uint,
) -> CUresult {
    ffi("cuStreamWaitEvent", || {
        let s = lookup(h_stream)?;
        let ev = event(h_event)?;
        let upto = lock(&ev.state).recorded;
        if upto > 0 {
            s.enqueue(Box::new(move || ev.wait_for(upto)));
        }
        Ok(())
    })
}

#[cfg(test)]
pub(crate) mod tests;
