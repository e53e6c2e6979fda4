//! The communication calls a pattern makes: one collective, the native all-to-all, a group,
//! send and receive; each checks its regions hold what NCCL reads and writes, and settles.

use super::{Collective, CommError, Communicator, Region, Result};
use crate::ffi::nccl::{CollArgs, DataTypeCode, RedOpCode};

impl Communicator<'_> {
    /// One collective (see [`Collective`]) with NCCL's `count`: the send and receive regions
    /// must hold what `nccl.h` says the collective reads and writes for it.
    #[allow(clippy::too_many_arguments)]
    pub fn collective(
        &self,
        c: Collective,
        send: Region,
        recv: Region,
        count: usize,
        dtype: (DataTypeCode, usize),
        op: RedOpCode,
        root: u32,
    ) -> Result<()> {
        let (bytes, n) = (count * dtype.1, self.nranks as usize);
        let (send_bytes, recv_bytes) = match c {
            Collective::AllGather | Collective::Gather => (bytes, bytes * n),
            Collective::ReduceScatter | Collective::Scatter => (bytes * n, bytes),
            Collective::AllReduce | Collective::Broadcast | Collective::Reduce => (bytes, bytes),
        };
        let args = CollArgs {
            send: send.ptr(send_bytes, "collective send")?,
            recv: recv.ptr(recv_bytes, "collective recv")?,
            count,
            dtype: dtype.0,
            op,
            root: root as i32,
        };
        let issued = self.nccl.collective(c, args, self.handle, &self.stream)?;
        self.settle(issued, c.symbol())
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
        let issued = self
            .nccl
            .all_to_all(s, r, count, dtype.0, self.handle, &self.stream)?;
        self.settle(issued, "ncclAlltoAll")
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
        let end = end.and_then(|issued| self.settle(issued, "ncclGroupEnd"));
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
        let issued = self
            .nccl
            .send(p, count, dtype.0, peer as i32, self.handle, &self.stream)?;
        self.settle(issued, "ncclSend")
    }

    pub fn recv(
        &self,
        buf: Region,
        count: usize,
        dtype: (DataTypeCode, usize),
        peer: u32,
    ) -> Result<()> {
        let p = buf.ptr(count * dtype.1, "recv")?;
        let issued = self
            .nccl
            .recv(p, count, dtype.0, peer as i32, self.handle, &self.stream)?;
        self.settle(issued, "ncclRecv")
    }
}
