//! A communicator with its stream, and every wait bounded by a deadline.
//!
//! Nothing here blocks without a limit: init is non-blocking where the library allows it and
//! polled with `ncclCommGetAsyncError`; operations are waited on by polling the stream and the
//! communicator's async error; a deadline that passes aborts the communicator.

use crate::ffi::cuda::{CudaError, DevPtr, DeviceBuffer, Stream};
use crate::ffi::nccl::{
    CommHandle, DataTypeCode, Nccl, NcclError, RedOpCode, ResultCode, UniqueId,
};
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
    Timeout { what: String, after_s: f64 },
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
pub struct Communicator<'n> {
    nccl: &'n Nccl,
    handle: CommHandle,
    pub stream: Stream,
    pub rank: u32,
    pub nranks: u32,
    live: bool,
}

/// Sleeps a little longer each time, up to 1 ms, so short waits stay short.
fn backoff(spins: &mut u32) {
    *spins += 1;
    let us = (*spins as u64 * 10).min(1000);
    std::thread::sleep(Duration::from_micros(us));
}

impl<'n> Communicator<'n> {
    /// `ncclCommInitRank[Config]`, non-blocking where the library has it, within `deadline`.
    pub fn init(
        nccl: &'n Nccl,
        id: &UniqueId,
        rank: u32,
        nranks: u32,
        deadline: Duration,
    ) -> Result<Communicator<'n>> {
        let stream = Stream::new()?;
        let blocking = !nccl.caps.init_rank_config;
        let handle = nccl.comm_init_rank(nranks as i32, id, rank as i32, blocking)?;
        let mut comm = Communicator {
            nccl,
            handle,
            stream,
            rank,
            nranks,
            live: true,
        };
        comm.wait_async_ready(deadline, "ncclCommInitRank")?;
        Ok(comm)
    }

    /// Polls the async state until it leaves `ncclInProgress`.
    fn wait_async_ready(&mut self, deadline: Duration, what: &str) -> Result<()> {
        let start = Instant::now();
        let mut spins = 0;
        loop {
            match self.nccl.async_error(self.handle)? {
                ResultCode::Success => return Ok(()),
                ResultCode::InProgress => {}
                code => {
                    let e = self.nccl.async_failure(self.handle, code);
                    self.abort();
                    return Err(e.into());
                }
            }
            if start.elapsed() > deadline {
                self.abort();
                return Err(CommError::Timeout {
                    what: what.into(),
                    after_s: deadline.as_secs_f64(),
                });
            }
            backoff(&mut spins);
        }
    }

    /// Waits until everything queued on the stream has run, within `deadline`, watching the
    /// communicator's async error meanwhile.
    pub fn wait_idle(&mut self, deadline: Duration, what: &str) -> Result<()> {
        let start = Instant::now();
        let mut spins = 0;
        loop {
            let idle = self.stream.is_idle()?;
            match self.nccl.async_error(self.handle)? {
                ResultCode::Success | ResultCode::InProgress => {}
                code => {
                    let e = self.nccl.async_failure(self.handle, code);
                    self.abort();
                    return Err(e.into());
                }
            }
            if idle {
                return Ok(());
            }
            if start.elapsed() > deadline {
                self.abort();
                return Err(CommError::Timeout {
                    what: what.into(),
                    after_s: deadline.as_secs_f64(),
                });
            }
            backoff(&mut spins);
        }
    }

    pub fn nccl(&self) -> &'n Nccl {
        self.nccl
    }

    /// `ncclGetLastError` for this communicator.
    pub fn last_error(&self) -> Option<String> {
        self.nccl.last_error(Some(self.handle))
    }

    pub fn all_reduce(
        &self,
        send: Region,
        recv: Region,
        count: usize,
        dtype: (DataTypeCode, usize),
        op: RedOpCode,
    ) -> Result<()> {
        let bytes = count * dtype.1;
        let s = send.ptr(bytes, "all_reduce send")?;
        let r = recv.ptr(bytes, "all_reduce recv")?;
        self.nccl
            .all_reduce(s, r, count, dtype.0, op, self.handle, &self.stream)?;
        Ok(())
    }

    /// Native `ncclAlltoAll`; `count` elements per peer.
    pub fn all_to_all(
        &self,
        send: Region,
        recv: Region,
        count: usize,
        dtype: (DataTypeCode, usize),
    ) -> Result<()> {
        let bytes = count * dtype.1 * self.nranks as usize;
        let s = send.ptr(bytes, "all_to_all send")?;
        let r = recv.ptr(bytes, "all_to_all recv")?;
        self.nccl
            .all_to_all(s, r, count, dtype.0, self.handle, &self.stream)?;
        Ok(())
    }

    /// Runs `body` between `ncclGroupStart` and `ncclGroupEnd`; the group is closed even when
    /// `body` fails, so NCCL is never left inside a group.
    pub fn group<F>(&self, body: F) -> Result<()>
    where
        F: FnOnce(&Self) -> Result<()>,
    {
        self.nccl.group_start()?;
        let inner = body(self);
        let end = self.nccl.group_end().map_err(CommError::from);
        inner.and(end)
    }

    pub fn send(
        &self,
        buf: Region,
        count: usize,
        dtype: (DataTypeCode, usize),
        peer: u32,
    ) -> Result<()> {
        let p = buf.ptr(count * dtype.1, "send")?;
        self.nccl
            .send(p, count, dtype.0, peer as i32, self.handle, &self.stream)?;
        Ok(())
    }

    pub fn recv(
        &self,
        buf: Region,
        count: usize,
        dtype: (DataTypeCode, usize),
        peer: u32,
    ) -> Result<()> {
        let p = buf.ptr(count * dtype.1, "recv")?;
        self.nccl
            .recv(p, count, dtype.0, peer as i32, self.handle, &self.stream)?;
        Ok(())
    }

    /// `ncclCommFinalize` (where the library has it, polled to completion) and
    /// `ncclCommDestroy`, within `deadline`.
    pub fn finalize(mut self, deadline: Duration) -> Result<()> {
        self.wait_idle(deadline, "work queued before finalize")?;
        if self.nccl.caps.finalize {
            if let Err(e) = self.nccl.comm_finalize(self.handle) {
                self.abort();
                return Err(e.into());
            }
            self.wait_async_ready(deadline, "ncclCommFinalize")?;
        }
        self.live = false;
        self.nccl.comm_destroy(self.handle)?;
        Ok(())
    }

    /// `ncclCommAbort`, once.
    pub fn abort(&mut self) {
        if std::mem::take(&mut self.live) {
            let _ = self.nccl.comm_abort(self.handle);
        }
    }
}

impl Drop for Communicator<'_> {
    fn drop(&mut self) {
        self.abort();
    }
}
