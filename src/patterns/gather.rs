//! Gather to rank [`ROOT`]: the root ends with every rank's buffer, rank j's at `j × count`;
//! the other ranks receive nothing. Native `ncclGather` where the library has it (NCCL >=
//! 2.28.3), else one group of sends to the root and, on the root, a receive from each rank:
//! both as nccl-tests' `gather_perf` runs it (`GatherRunColl`, `src/gather.cu`,
//! NVIDIA/nccl-tests v2.19.6), with its counts (`GatherGetCollByteCount`) and default root, 0.

use super::{Layout, Pattern, ROOT, Source};
use crate::comm::{Collective, CommError, Communicator, Region};
use crate::elements::{DataType, RedOp};

pub struct Gather;

impl Pattern for Gather {
    fn name(&self) -> &'static str {
        "gather"
    }

    /// Each rank sends `(count / nranks)` elements rounded down to 16 bytes; the root receives
    /// `nranks` times that.
    fn layout(&self, bytes: usize, elem_size: usize, nranks: u32) -> Layout {
        Layout::gathered(bytes, elem_size, nranks)
    }

    /// `GatherGetBw`: algbw over `nranks × count` elements, busbw factor
    /// `(nranks - 1) / nranks`.
    fn busbw_factor(&self, nranks: u32) -> f64 {
        super::spread(nranks)
    }

    fn written(&self, rank: u32, layout: &Layout) -> usize {
        super::on_root_only(rank, layout)
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
            let c = Collective::Gather;
            return comm.collective(c, send, recv, n, dtype.nccl(), op.nccl_code(), ROOT);
        }
        let chunk = n * dtype.size();
        comm.group(|c| {
            c.send(send.slice(0, chunk)?, n, dtype.nccl(), ROOT)?;
            if c.rank == ROOT {
                for peer in 0..c.nranks {
                    c.recv(
                        recv.slice(peer as usize * chunk, chunk)?,
                        n,
                        dtype.nccl(),
                        peer,
                    )?;
                }
            }
            Ok(())
        })
    }

    fn source(&self, _rank: u32, _nranks: u32, index: usize, layout: &Layout) -> Source {
        Source::block(index, layout.per_peer)
    }
}
