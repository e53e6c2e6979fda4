//! Point-to-point in a ring: each rank sends its buffer to rank r+1 and receives from r−1,
//! all in one group (isend/irecv style).

use super::{Layout, Pattern, Source};
use crate::comm::{CommError, Communicator, Region};
use crate::elements::{DataType, RedOp};

pub struct SendRecvRing;

impl Pattern for SendRecvRing {
    fn name(&self) -> &'static str {
        "send_recv_ring"
    }

    fn layout(&self, bytes: usize, elem_size: usize, _nranks: u32) -> Layout {
        let count = bytes / elem_size;
        Layout {
            count,
            recv_count: count,
            per_peer: count,
        }
    }

    fn busbw_factor(&self, _nranks: u32) -> f64 {
        1.0
    }

    fn launch(
        &self,
        comm: &Communicator,
        send: Region,
        recv: Region,
        layout: &Layout,
        dtype: DataType,
        _op: RedOp,
    ) -> Result<(), CommError> {
        let n = comm.nranks;
        let (next, prev) = ((comm.rank + 1) % n, (comm.rank + n - 1) % n);
        comm.group(|c| {
            c.send(send, layout.count, dtype.nccl(), next)?;
            c.recv(recv, layout.count, dtype.nccl(), prev)
        })
    }

    fn source(&self, rank: u32, nranks: u32, index: usize, _layout: &Layout) -> Source {
        Source::Rank {
            rank: (rank + nranks - 1) % nranks,
            index,
        }
    }
}
