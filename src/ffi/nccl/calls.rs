//! The calls on a loaded library: unique id, communicator life cycle and queries, groups, and
//! the collective and point-to-point operations. The caller checks the arguments.

use super::error::{NcclError, Result, ResultCode};
use super::sys::{self, ncclComm_t, ncclConfig_t, ncclResult_t, ncclUniqueId};
use super::{
    CollArgs, Collective, CommHandle, DataTypeCode, Issued, NCCL_UNIQUE_ID_BYTES, Nccl, SplitSlot,
    UniqueId,
};
use crate::ffi::cuda::{DevPtr, Stream};
use std::ffi::c_char;

impl Nccl {
    pub fn get_unique_id(&self) -> Result<UniqueId> {
        let mut id = ncclUniqueId {
            internal: [0; NCCL_UNIQUE_ID_BYTES as usize],
        };
        call!(self, ncclGetUniqueId(&mut id))?;
        Ok(id.internal.map(|b| b as u8))
    }

    /// Starts communicator init, asking for a blocking or a non-blocking communicator where
    /// the library has `ncclCommInitRankConfig` (`NCCL_COMM_BLOCKING` in the environment
    /// overrides the request: `parseCommConfig`, `src/init.cc` v2.28.3-1). A non-blocking
    /// init returns [`Issued::InProgress`]: poll [`Nccl::async_error`].
    pub fn comm_init_rank(
        &self,
        nranks: i32,
        id: &UniqueId,
        rank: i32,
        blocking: bool,
    ) -> Result<(CommHandle, Issued)> {
        let id = ncclUniqueId {
            internal: id.map(|b| b as c_char),
        };
        let mut comm: ncclComm_t = std::ptr::null_mut();
        let r = if self.caps.init_rank_config {
            let mut config = config_initializer();
            config.blocking = i32::from(blocking);
            call!(
                issue self,
                ncclCommInitRankConfig(&mut comm, nranks, id, rank, &mut config)
            )
        } else {
            call!(issue self, ncclCommInitRank(&mut comm, nranks, id, rank))
        };
        match r {
            Ok(issued) if !comm.is_null() => Ok((CommHandle(comm), issued)),
            Ok(_) => Err(self.call_error("ncclCommInitRank", ResultCode::InternalError)),
            Err(e) => {
                if !comm.is_null() {
                    let _ = self.comm_abort(CommHandle(comm));
                }
                Err(e)
            }
        }
    }

    /// `ncclCommSplit(parent, color, key, &newcomm, NULL)`: collective over `parent`; the child
    /// inherits the parent's config, blocking-ness included (`copyCommConfig` in
    /// `ncclCommInitChildComm`, `src/init.cc` v2.28.3-1). On a non-blocking parent it returns
    /// [`Issued::InProgress`] and the *parent's* state says when the child is ready; take the
    /// child from the slot then. A failed call aborts whatever child NCCL left in the slot (a
    /// blocking split stores the half-made child before it returns the error).
    pub fn comm_split(
        &self,
        parent: CommHandle,
        color: i32,
        key: i32,
    ) -> Result<(SplitSlot, Issued)> {
        if !self.caps.split {
            return Err(self.missing("ncclCommSplit"));
        }
        let slot = SplitSlot::new();
        let r = call!(
            issue self,
            ncclCommSplit(parent.0, color, key, slot.as_out(), std::ptr::null_mut())
        );
        match r {
            Ok(issued) => Ok((slot, issued)),
            Err(e) => {
                if let Some(child) = slot.take() {
                    let _ = self.comm_abort(child);
                }
                Err(e)
            }
        }
    }

    /// `ncclCommGetAsyncError`: `Ok(code)` is the communicator's state (success, in progress, or
    /// the error that struck it).
    pub fn async_error(&self, comm: CommHandle) -> Result<ResultCode> {
        let mut state = ncclResult_t(0);
        call!(self, ncclCommGetAsyncError(comm.0, &mut state))?;
        Ok(ResultCode::from_raw(state.0))
    }

    /// Builds the error value for a communicator whose async state is `code`.
    pub fn async_failure(&self, comm: CommHandle, code: ResultCode) -> NcclError {
        NcclError::Call {
            call: "ncclCommGetAsyncError",
            code,
            text: self.error_string(code),
            last_error: self.last_error(Some(comm)),
        }
    }

    pub fn comm_abort(&self, comm: CommHandle) -> Result<()> {
        call!(self, ncclCommAbort(comm.0))
    }

    pub fn comm_finalize(&self, comm: CommHandle) -> Result<Issued> {
        call!(issue self, ncclCommFinalize(comm.0))
    }

    pub fn comm_destroy(&self, comm: CommHandle) -> Result<()> {
        call!(self, ncclCommDestroy(comm.0))
    }

    pub fn comm_count(&self, comm: CommHandle) -> Result<i32> {
        let mut n = 0;
        call!(self, ncclCommCount(comm.0, &mut n))?;
        Ok(n)
    }

    pub fn comm_cu_device(&self, comm: CommHandle) -> Result<i32> {
        let mut d = 0;
        call!(self, ncclCommCuDevice(comm.0, &mut d))?;
        Ok(d)
    }

    pub fn comm_user_rank(&self, comm: CommHandle) -> Result<i32> {
        let mut r = 0;
        call!(self, ncclCommUserRank(comm.0, &mut r))?;
        Ok(r)
    }

    pub fn group_start(&self) -> Result<()> {
        call!(self, ncclGroupStart())
    }

    pub fn group_end(&self) -> Result<Issued> {
        call!(issue self, ncclGroupEnd())
    }

    /// One collective call (see [`Collective`]): the one place each NCCL collective symbol is
    /// called. Pointers are device addresses sized by the caller as NCCL's API says for the
    /// collective and `count`; `op` is ignored by those that do not reduce, `root` by those
    /// without one.
    pub fn collective(
        &self,
        c: Collective,
        a: CollArgs,
        comm: CommHandle,
        stream: &Stream,
    ) -> Result<Issued> {
        let (send, recv) = (a.send.as_ptr(), a.recv.as_ptr());
        let (dtype, op, st) = (
            sys::ncclDataType_t(a.dtype),
            sys::ncclRedOp_t(a.op),
            stream.raw().cast(),
        );
        match c {
            Collective::AllReduce => call!(
                issue self,
                ncclAllReduce(send, recv, a.count, dtype, op, comm.0, st)
            ),
            Collective::AllGather => call!(
                issue self,
                ncclAllGather(send, recv, a.count, dtype, comm.0, st)
            ),
            Collective::ReduceScatter => call!(
                issue self,
                ncclReduceScatter(send, recv, a.count, dtype, op, comm.0, st)
            ),
            Collective::Broadcast => call!(
                issue self,
                ncclBroadcast(send, recv, a.count, dtype, a.root, comm.0, st)
            ),
            Collective::Reduce => call!(
                issue self,
                ncclReduce(send, recv, a.count, dtype, op, a.root, comm.0, st)
            ),
            Collective::Gather | Collective::Scatter => {
                let Some((gather, scatter)) = self.gather_scatter else {
                    return Err(self.missing(c.symbol()));
                };
                let f = if c == Collective::Gather {
                    gather
                } else {
                    scatter
                };
                // SAFETY: prototype of NCCL >= 2.28.3 (see newer.rs); the caller checks the
                // arguments.
                let r = unsafe {
                    f(
                        send,
                        recv,
                        a.count,
                        a.dtype,
                        a.root,
                        comm.0.cast(),
                        stream.raw(),
                    )
                };
                self.check_issued(c.symbol(), ncclResult_t(r))
            }
        }
    }

    /// Native `ncclAlltoAll` (`count` elements to and from each peer).
    pub fn all_to_all(
        &self,
        send: DevPtr,
        recv: DevPtr,
        count: usize,
        dtype: DataTypeCode,
        comm: CommHandle,
        stream: &Stream,
    ) -> Result<Issued> {
        let Some(f) = self.alltoall else {
            return Err(self.missing("ncclAlltoAll"));
        };
        // SAFETY: prototype of NCCL >= 2.28 (see newer.rs); the caller checks the arguments.
        let r = unsafe {
            f(
                send.as_ptr(),
                recv.as_ptr(),
                count,
                dtype,
                comm.0.cast(),
                stream.raw(),
            )
        };
        self.check_issued("ncclAlltoAll", ncclResult_t(r))
    }

    pub fn send(
        &self,
        buf: DevPtr,
        count: usize,
        dtype: DataTypeCode,
        peer: i32,
        comm: CommHandle,
        stream: &Stream,
    ) -> Result<Issued> {
        call!(
            issue self,
            ncclSend(
                buf.as_ptr(),
                count,
                sys::ncclDataType_t(dtype),
                peer,
                comm.0,
                stream.raw().cast()
            )
        )
    }

    pub fn recv(
        &self,
        buf: DevPtr,
        count: usize,
        dtype: DataTypeCode,
        peer: i32,
        comm: CommHandle,
        stream: &Stream,
    ) -> Result<Issued> {
        call!(
            issue self,
            ncclRecv(
                buf.as_ptr(),
                count,
                sys::ncclDataType_t(dtype),
                peer,
                comm.0,
                stream.raw().cast()
            )
        )
    }
}

/// `NCCL_CONFIG_INITIALIZER` of nccl.h: every tunable "undefined" so the library picks.
fn config_initializer() -> ncclConfig_t {
    const UNDEF_INT: i32 = i32::MIN;
    ncclConfig_t {
        size: std::mem::size_of::<ncclConfig_t>(),
        magic: 0xcafe_beef,
        version: (sys::NCCL_MAJOR * 10000 + sys::NCCL_MINOR * 100 + sys::NCCL_PATCH),
        blocking: UNDEF_INT,
        cgaClusterSize: UNDEF_INT,
        minCTAs: UNDEF_INT,
        maxCTAs: UNDEF_INT,
        netName: std::ptr::null(),
        splitShare: UNDEF_INT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_initializer_matches_nccl_h() {
        let c = config_initializer();
        assert_eq!(c.magic, 0xcafebeef);
        assert_eq!(c.size, std::mem::size_of::<ncclConfig_t>());
        assert_eq!(c.version, 21903);
        assert_eq!(c.blocking, i32::MIN);
    }
}
