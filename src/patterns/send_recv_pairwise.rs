//! Point-to-point between all pairs, one exchange step at a time: in step s (1 ≤ s < n) rank r
//! sends chunk s−1 to r+s and receives chunk s−1 from r−s. Each step is its own group, so a
//! step that fails or hangs identifies the pair of ranks involved.

use super::{Layout, Pattern, Source};
use crate::comm::{CommError, Communicator, Region};
use crate::elements::{DataType, RedOp};

pub struct SendRecvPairwise;

impl Pattern for SendRecvPairwise {
    fn name(&self) -> &'static str {
        "send_recv_pairwise"
    }

    fn layout(&self, bytes: usize, elem_size: usize, nranks: u32) -> Layout {
        // A single rank exchanges with itself once.
        let steps = (nranks as usize).saturating_sub(1).max(1);
        // Rounded per peer as nccl-tests' all-to-all rounds (the same exchange, less the chunk
        // a rank keeps).
        let per_peer = super::per_peer_count(bytes, elem_size, steps);
        Layout {
            count: per_peer * steps,
            recv_count: per_peer * steps,
            per_peer,
        }
    }

    fn busbw_factor(&self, _nranks: u32) -> f64 {
        1.0
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
        let n = comm.nranks;
        let chunk = layout.per_peer * dtype.size();
        for s in 1..n.max(2) {
            let (to, from) = ((comm.rank + s) % n, (comm.rank + n - s % n) % n);
            let at = (s as usize - 1) * chunk;
            comm.group(|c| {
                c.send(send.slice(at, chunk)?, layout.per_peer, dtype.nccl(), to)?;
                c.recv(recv.slice(at, chunk)?, layout.per_peer, dtype.nccl(), from)
            })?;
        }
        Ok(())
    }

    fn source(&self, rank: u32, nranks: u32, index: usize, layout: &Layout) -> Source {
        let step = index / layout.per_peer + 1;
        let k = index % layout.per_peer;
        Source::Rank {
            rank: (rank + nranks - (step as u32 % nranks)) % nranks,
            index: (step - 1) * layout.per_peer + k,
        }
    }
}
