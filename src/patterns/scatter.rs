//! Scatter from rank [`ROOT`]: rank j ends with block j of the root's buffer. Native
//! `ncclScatter` where the library has it (NCCL >= 2.28.3), else one group of the root's sends
//! to each rank and a receive from the root on every rank: both as nccl-tests' `scatter_perf`
//! runs it (`ScatterRunColl`, `src/scatter.cu`, NVIDIA/nccl-tests v2.19.6), with its counts
//! (`ScatterGetCollByteCount`) and default root, 0.

use super::{Layout, Pattern, ROOT, Source};
use crate::comm::{Collective, CommError, Communicator, Region};
use crate::elements::{DataType, RedOp};

pub struct Scatter;

impl Pattern for Scatter {
    fn name(&self) -> &'static str {
        "scatter"
    }

    /// Each rank receives `(count / nranks)` elements rounded down to 16 bytes; the root sends
    /// `nranks` times that (every rank's send buffer is that size; the root's is read).
    fn layout(&self, bytes: usize, elem_size: usize, nranks: u32) -> Layout {
        Layout::scattered(bytes, elem_size, nranks)
    }

    /// `ScatterGetBw`: algbw over `nranks × count` elements, busbw factor
    /// `(nranks - 1) / nranks`.
    fn busbw_factor(&self, nranks: u32) -> f64 {
        super::spread(nranks)
    }

    /// nccl-tests' count column is recvcount (`paramcount`).
    fn count_column(&self, layout: &Layout) -> usize {
        layout.recv_count
    }

    fn launch(
        &self,
        comm: &Communicator,
        send: Region,
        recv: Region,
        layout: &Layout,
        dtype: DataType,
        op: RedOp,
    ) -> Result<(), CommError> {
        let n = layout.per_peer;
        if comm.nccl().caps.gather_scatter {
            let c = Collective::Scatter;
            return comm.collective(c, send, recv, n, dtype.nccl(), op.nccl_code(), ROOT);
        }
        let chunk = n * dtype.size();
        comm.group(|c| {
            if c.rank == ROOT {
                for peer in 0..c.nranks {
                    c.send(
                        send.slice(peer as usize * chunk, chunk)?,
                        n,
                        dtype.nccl(),
                        peer,
                    )?;
                }
            }
            c.recv(recv.slice(0, chunk)?, n, dtype.nccl(), ROOT)
        })
    }

    fn source(&self, rank: u32, _nranks: u32, index: usize, layout: &Layout) -> Source {
        Source::Rank {
            rank: ROOT,
            index: rank as usize * layout.per_peer + index,
        }
    }
}
