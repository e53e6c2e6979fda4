//! A communicator with its stream, and every wait bounded by a deadline.
//!
//! Waits on the stream poll it and the communicator's async error, within a deadline that
//! aborts the communicator when it passes; calls NCCL completes on a thread of its own
//! (`ncclInProgress`) are settled before the communicator is used again.

use crate::ffi::cuda::{CudaError, DevPtr, DeviceBuffer, Stream};
use crate::ffi::nccl::{CommHandle, Issued, Nccl, NcclError, ResultCode, UniqueId};

pub use crate::ffi::nccl::Collective;

mod ops;
use std::cell::Cell;
use std::time::{Duration, Instant};

/// Why a communicator call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CommError {
    #[error(transparent)]
    Nccl(#[from] NcclError),
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(
        "{what} did not complete within {after_s:.0} s (deadline); the communicator was aborted"
    )]
    Timeout {
        what: String,
        after_s: f64,
        /// What [`Communicator::before_timeout_abort`]'s hook found, before the abort.
        notes: Vec<String>,
    },
    #[error("{what} was given up before it completed; the communicator was aborted")]
    GivenUp { what: String },
    #[error("buffer too small for {what}: needs {needed} bytes, has {has}")]
    Bounds {
        what: &'static str,
        needed: usize,
        has: usize,
    },
}

impl CommError {
    /// The NCCL error inside, if any.
    pub fn nccl(&self) -> Option<&NcclError> {
        match self {
            CommError::Nccl(e) => Some(e),
            _ => None,
        }
    }
}

type Result<T> = std::result::Result<T, CommError>;

/// A region of a device buffer: `offset` and `len` in bytes.
#[derive(Clone, Copy)]
pub struct Region<'a> {
    buf: &'a DeviceBuffer,
    offset: usize,
    len: usize,
}

impl<'a> Region<'a> {
    pub fn whole(buf: &'a DeviceBuffer) -> Region<'a> {
        Region {
            buf,
            offset: 0,
            len: buf.len(),
        }
    }

    /// The sub-region `[offset, offset + len)`, bounds-checked.
    pub fn slice(&self, offset: usize, len: usize) -> Result<Region<'a>> {
        let end = offset.saturating_add(len);
        if end > self.len {
            return Err(CommError::Bounds {
                what: "region",
                needed: end,
                has: self.len,
            });
        }
        Ok(Region {
            buf: self.buf,
            offset: self.offset + offset,
            len,
        })
    }

    fn ptr(&self, needed: usize, what: &'static str) -> Result<DevPtr> {
        if needed > self.len {
            return Err(CommError::Bounds {
                what,
                needed,
                has: self.len,
            });
        }
        Ok(self.buf.ptr().offset(self.offset))
    }
}

/// An initialised communicator and the stream its operations run on.
///
/// Blocking by default, as nccl-tests makes its communicators: every call returns once its work
/// is on the stream, so the timed loop pays no thread and no poll per operation. A user's
/// `NCCL_COMM_BLOCKING=0` makes it non-blocking (NCCL reads the variable over the config); then
/// each call is settled (its async state polled back to `ncclSuccess`, whatever the call
/// returned) before the next, as NCCL requires (`ncclCommEnsureReady`, `src/init.cc`
/// v2.28.3-1). A blocking call that hangs (init, a first connection) is bounded by the rank's
/// supervisor, which names the step and kills the worker.
pub struct Communicator<'n> {
    nccl: &'n Nccl,
    handle: CommHandle,
    pub stream: Stream,
    pub rank: u32,
    pub nranks: u32,
    live: Cell<bool>,
    /// Whether NCCL made it non-blocking (asked for, or `NCCL_COMM_BLOCKING=0`): then every
    /// call is settled, whatever it returned (see [`Communicator::settle`]).
    nonblocking: bool,
    /// How long a call that returned `ncclInProgress` may take to settle.
    settle_deadline: Cell<Duration>,
    /// Asked, with the wait's deadline, when a wait times out, before the abort.
    on_timeout: Option<TimeoutHook<'n>>,
}

/// What a timed-out wait asks before it aborts the communicator (while every rank's state is
/// still there to be seen): lines for the failure's evidence.
pub type TimeoutHook<'n> = Box<dyn Fn(Duration) -> Vec<String> + 'n>;

/// How a wait polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// Busy-poll with a yield, never sleeping: a timed region's end is seen when it happens
    /// (nccl-tests' `testStreamSynchronize`, `src/common.cu`).
    Spin,
    /// Spin briefly, then sleep a little longer each time (up to 1 ms): for waits outside a
    /// timed region, which may last seconds on a loaded node.
    Relaxed,
}

/// Spins of a relaxed wait before it starts sleeping.
const RELAXED_SPINS: u32 = 200;

fn pause(poll: Poll, spins: &mut u32) {
    *spins = spins.saturating_add(1);
    if poll == Poll::Spin || *spins <= RELAXED_SPINS {
        std::thread::yield_now();
    } else {
        let us = ((*spins - RELAXED_SPINS) as u64 * 10).min(1000);
        std::thread::sleep(Duration::from_micros(us));
    }
}

/// `NCCL_COMM_BLOCKING` as NCCL reads it: 0 or 1 override the config, anything else is unset
/// (`parseCommConfig`, `src/init.cc` v2.28.3-1).
pub fn blocking_override() -> Option<bool> {
    match std::env::var("NCCL_COMM_BLOCKING")
        .ok()?
        .trim()
        .parse::<i64>()
        .ok()?
    {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// Whether the communicator [`Communicator::init`] makes with `nccl` is blocking: always
/// without the config API (< 2.14), else unless `NCCL_COMM_BLOCKING=0` overrides the request.
pub fn makes_blocking(nccl: &Nccl) -> bool {
    !nccl.caps.init_rank_config || blocking_override() != Some(false)
}

impl<'n> Communicator<'n> {
    /// `ncclCommInitRank[Config]` asking for a blocking communicator; a non-blocking one (the
    /// user's `NCCL_COMM_BLOCKING=0`) is polled to completion within `deadline`.
    pub fn init(
        nccl: &'n Nccl,
        id: &UniqueId,
        rank: u32,
        nranks: u32,
        deadline: Duration,
    ) -> Result<Communicator<'n>> {
        Self::init_as(nccl, id, rank, nranks, deadline, true, &|| false)
    }

    /// As [`Communicator::init`], asking for a non-blocking communicator where the library has
    /// `ncclCommInitRankConfig`, so that an init waiting on a peer that never comes ends at
    /// `deadline` (with `ncclCommAbort`) instead of blocking in the library.
    pub fn init_nonblocking(
        nccl: &'n Nccl,
        id: &UniqueId,
        rank: u32,
        nranks: u32,
        deadline: Duration,
    ) -> Result<Communicator<'n>> {
        Self::init_as(nccl, id, rank, nranks, deadline, false, &|| false)
    }

    /// As [`Communicator::init_nonblocking`], given up (aborted) as soon as `stop` says so,
    /// which it is asked between polls.
    pub fn init_nonblocking_unless(
        nccl: &'n Nccl,
        id: &UniqueId,
        rank: u32,
        nranks: u32,
        deadline: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<Communicator<'n>> {
        Self::init_as(nccl, id, rank, nranks, deadline, false, stop)
    }

    fn init_as(
        nccl: &'n Nccl,
        id: &UniqueId,
        rank: u32,
        nranks: u32,
        deadline: Duration,
        blocking: bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<Communicator<'n>> {
        let stream = Stream::new()?;
        let (handle, _) = nccl.comm_init_rank(nranks as i32, id, rank as i32, blocking)?;
        // What NCCL made of the request: `NCCL_COMM_BLOCKING` overrides the config, and
        // without the config API every communicator blocks.
        let nonblocking = nccl.caps.init_rank_config && !blocking_override().unwrap_or(blocking);
        let comm = Communicator {
            nccl,
            handle,
            stream,
            rank,
            nranks,
            live: Cell::new(true),
            nonblocking,
            settle_deadline: Cell::new(deadline),
            on_timeout: None,
        };
        comm.wait_async_ready_unless(deadline, "ncclCommInitRank", Poll::Relaxed, stop)?;
        Ok(comm)
    }

    /// `ncclCommSplit`: collective over this communicator (every rank calls it, those with
    /// `color` [`SPLIT_NOCOLOR`](crate::ffi::nccl::SPLIT_NOCOLOR) too, and get `None`); ranks
    /// of one color form a child, ordered by `key` then by rank here (`commGetSplitInfo`,
    /// `src/init.cc` v2.28.3-1). The child inherits this communicator's blocking-ness. On a
    /// non-blocking one the split runs on NCCL's thread and this one's state is polled within
    /// `deadline`; when it passes, or the split fails, this communicator is aborted (which ends
    /// a child still coming up) and cannot be split again.
    pub fn split(
        &self,
        color: i32,
        key: i32,
        deadline: Duration,
    ) -> Result<Option<Communicator<'n>>> {
        let stream = Stream::new()?;
        let (slot, issued) = self.nccl.comm_split(self.handle, color, key)?;
        if issued == Issued::InProgress {
            self.wait_async_ready(deadline, "ncclCommSplit", Poll::Relaxed)?;
        }
        let Some(handle) = slot.take() else {
            return Ok(None);
        };
        let mut child = Communicator {
            nccl: self.nccl,
            handle,
            stream,
            rank: 0,
            nranks: 0,
            live: Cell::new(true),
            nonblocking: self.nonblocking,
            settle_deadline: Cell::new(deadline),
            on_timeout: None,
        };
        // The job is done; a non-blocking child's own state is read once more.
        child.wait_async_ready(deadline, "ncclCommSplit", Poll::Relaxed)?;
        child.rank = self.nccl.comm_user_rank(handle)? as u32;
        child.nranks = self.nccl.comm_count(handle)? as u32;
        Ok(Some(child))
    }

    /// How long later calls that return `ncclInProgress` may take to settle (each stage sets
    /// its own).
    pub fn set_settle_deadline(&self, deadline: Duration) {
        self.settle_deadline.set(deadline);
    }

    /// Polls the async state until it leaves `ncclInProgress`.
    fn wait_async_ready(&self, deadline: Duration, what: &str, poll: Poll) -> Result<()> {
        self.wait_async_ready_unless(deadline, what, poll, &|| false)
    }

    /// As [`Communicator::wait_async_ready`], aborting as soon as `stop` says so.
    fn wait_async_ready_unless(
        &self,
        deadline: Duration,
        what: &str,
        poll: Poll,
        stop: &dyn Fn() -> bool,
    ) -> Result<()> {
        let start = Instant::now();
        let mut spins = 0;
        loop {
            match self.nccl.async_error(self.handle)? {
                ResultCode::Success => return Ok(()),
                ResultCode::InProgress => {}
                code => return Err(self.fail_async(code)),
            }
            if start.elapsed() > deadline {
                return Err(self.timed_out(what, deadline));
            }
            if stop() {
                self.abort();
                return Err(CommError::GivenUp { what: what.into() });
            }
            pause(poll, &mut spins);
        }
    }

    /// A call's outcome; `ncclInProgress` is waited out before the communicator is used again.
    ///
    /// On a non-blocking communicator the async state is polled even after `ncclSuccess`: NCCL
    /// 2.21 to 2.23 return `ncclSuccess` from a stand-alone collective whose launch is still
    /// running on NCCL's thread (`NCCLCHECK(ncclEnqueueCheck(&info)); return ncclSuccess;` in
    /// `ncclAllReduce` and the other collectives, `src/collectives.cc` v2.23.4-1, where
    /// `NCCLCHECK` lets `ncclInProgress` through; `ncclSend`/`ncclRecv` likewise return the
    /// enqueue's result, not their `ncclGroupEnd`'s), while `ncclGroupEndInternal` has set the
    /// communicator's state to `ncclInProgress` (`src/group.cc` v2.23.4-1, the "nonblocking
    /// group" branch). The next call then fails in `ncclCommEnsureReady` with
    /// `ncclInvalidArgument` ("Attempt to use communicator before the previous operation
    /// returned ncclSuccess", `src/init.cc` v2.23.4-1). NCCL's contract is the state, read
    /// with `ncclCommGetAsyncError`, not the return code; 2.19 and 2.24+ return the enqueue's
    /// result (`return ncclEnqueueCheck(&info);`), and polling a settled state costs one read.
    fn settle(&self, issued: Issued, what: &'static str) -> Result<()> {
        match issued {
            Issued::Done if !self.nonblocking => Ok(()),
            Issued::Done | Issued::InProgress => {
                self.wait_async_ready(self.settle_deadline.get(), what, Poll::Spin)
            }
        }
    }

    fn fail_async(&self, code: ResultCode) -> CommError {
        let e = self.nccl.async_failure(self.handle, code);
        self.abort();
        e.into()
    }

    fn timed_out(&self, what: &str, deadline: Duration) -> CommError {
        let notes = self
            .on_timeout
            .as_ref()
            .map(|h| h(deadline))
            .unwrap_or_default();
        self.abort();
        CommError::Timeout {
            what: what.into(),
            after_s: deadline.as_secs_f64(),
            notes,
        }
    }

    /// Sets what a wait that times out asks before it aborts the communicator.
    pub fn before_timeout_abort(&mut self, hook: TimeoutHook<'n>) {
        self.on_timeout = Some(hook);
    }

    /// Waits until everything queued on the stream has run, within `deadline`, watching the
    /// communicator's async error meanwhile.
    pub fn wait_idle(&self, deadline: Duration, what: &str, poll: Poll) -> Result<()> {
        let start = Instant::now();
        let mut spins = 0;
        loop {
            let idle = self.stream.is_idle()?;
            match self.nccl.async_error(self.handle)? {
                ResultCode::Success | ResultCode::InProgress => {}
                code => return Err(self.fail_async(code)),
            }
            if idle {
                return Ok(());
            }
            if start.elapsed() > deadline {
                return Err(self.timed_out(what, deadline));
            }
            pause(poll, &mut spins);
        }
    }

    pub fn nccl(&self) -> &'n Nccl {
        self.nccl
    }

    /// The handle, for callers that time the bare library call (benches).
    pub fn handle(&self) -> CommHandle {
        self.handle
    }

    /// `ncclGetLastError` for this communicator.
    pub fn last_error(&self) -> Option<String> {
        self.nccl.last_error(Some(self.handle))
    }

    /// `ncclCommFinalize` (where the library has it, polled to completion) and
    /// `ncclCommDestroy`, within `deadline`.
    pub fn finalize(self, deadline: Duration) -> Result<()> {
        self.set_settle_deadline(deadline);
        self.wait_idle(deadline, "work queued before finalize", Poll::Relaxed)?;
        if self.nccl.caps.finalize {
            match self.nccl.comm_finalize(self.handle) {
                Ok(Issued::Done) => {}
                Ok(Issued::InProgress) => {
                    self.wait_async_ready(deadline, "ncclCommFinalize", Poll::Relaxed)?
                }
                Err(e) => {
                    self.abort();
                    return Err(e.into());
                }
            }
        }
        self.live.set(false);
        self.nccl.comm_destroy(self.handle)?;
        Ok(())
    }

    /// `ncclCommAbort` as the chosen end of a communicator (not a failure's clean-up): its
    /// result. For `--backend control-plane`, where no kernel ever runs, so that the work NCCL's
    /// proxies hold for the first collectives can never drain and `ncclCommFinalize` would
    /// wait for it.
    pub fn abort_now(self, deadline: Duration) -> Result<()> {
        self.wait_idle(deadline, "work queued before ncclCommAbort", Poll::Relaxed)?;
        self.abort_together()
    }

    /// `ncclCommAbort` of a communicator every rank has already waited idle on and left
    /// together (the caller met the others after [`Communicator::wait_idle`]): no wait here,
    /// so a peer whose own abort closed its connections first is no error of this one.
    pub fn abort_together(self) -> Result<()> {
        self.live.set(false);
        self.nccl.comm_abort(self.handle)?;
        Ok(())
    }

    /// `ncclCommAbort`, once.
    pub fn abort(&self) {
        if self.live.replace(false) {
            let _ = self.nccl.comm_abort(self.handle);
        }
    }
}

impl Drop for Communicator<'_> {
    fn drop(&mut self) {
        self.abort();
    }
}
