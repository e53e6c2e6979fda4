//! All-to-all: chunk j of every rank's buffer goes to rank j. Native `ncclAlltoAll` where the
//! library has it (NCCL >= 2.28.3), else one group of n sends and n receives, which is how
//! applications wrote it before and what the field report behind seed 003 ran.

use super::{Layout, Pattern, Source};
use crate::comm::{CommError, Communicator, Region};
use crate::elements::{DataType, RedOp};

pub struct AllToAll;

impl Pattern for AllToAll {
    fn name(&self) -> &'static str {
        "all_to_all"
    }

    fn layout(&self, bytes: usize, elem_size: usize, nranks: u32) -> Layout {
        let per_peer = super::per_peer_count(bytes, elem_size, nranks as usize);
        let count = per_peer * nranks as usize;
        Layout {
            count,
            recv_count: count,
            per_peer,
        }
    }

    fn busbw_factor(&self, nranks: u32) -> f64 {
        super::spread(nranks)
    }

    fn count_column(&self, layout: &Layout) -> usize {
        layout.per_peer
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
        if comm.nccl().caps.alltoall {
            return comm.all_to_all(send, recv, layout.per_peer, dtype.nccl());
        }
        let chunk = layout.per_peer * dtype.size();
        comm.group(|c| {
            for peer in 0..c.nranks {
                let at = peer as usize * chunk;
                c.send(send.slice(at, chunk)?, layout.per_peer, dtype.nccl(), peer)?;
                c.recv(recv.slice(at, chunk)?, layout.per_peer, dtype.nccl(), peer)?;
            }
            Ok(())
        })
    }

    fn source(&self, rank: u32, _nranks: u32, index: usize, layout: &Layout) -> Source {
        let (from, k) = (index / layout.per_peer, index % layout.per_peer);
        Source::Rank {
            rank: from as u32,
            index: rank as usize * layout.per_peer + k,
        }
    }
}
