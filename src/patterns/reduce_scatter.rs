//! `ncclReduceScatter`: rank j ends with block j of the reduction of every rank's buffer.
//! Counts as nccl-tests' `reduce_scatter_perf` sets them: `ReduceScatterGetCollByteCount`,
//! `src/reduce_scatter.cu` (NVIDIA/nccl-tests v2.19.6).

use super::{Layout, Pattern, Source};
use crate::comm::Collective;

pub struct ReduceScatter;

impl Pattern for ReduceScatter {
    fn name(&self) -> &'static str {
        "reduce_scatter"
    }

    fn reduces(&self) -> bool {
        true
    }

    /// Each rank receives `(count / nranks)` elements rounded down to 16 bytes
    /// (`base = (count/nranks) & ~(16/eltSize - 1)`) and sends `nranks` times that.
    fn layout(&self, bytes: usize, elem_size: usize, nranks: u32) -> Layout {
        Layout::scattered(bytes, elem_size, nranks)
    }

    /// `ReduceScatterGetBw`: algbw over the `nranks × recvcount` elements each rank sends,
    /// busbw factor `(nranks - 1) / nranks`.
    fn busbw_factor(&self, nranks: u32) -> f64 {
        super::spread(nranks)
    }

    /// nccl-tests' count column is recvcount (`paramcount = base`).
    fn count_column(&self, layout: &Layout) -> usize {
        layout.recv_count
    }

    fn collective(&self) -> Option<Collective> {
        Some(Collective::ReduceScatter)
    }

    fn source(&self, rank: u32, _nranks: u32, index: usize, layout: &Layout) -> Source {
        Source::Reduced {
            index: rank as usize * layout.recv_count + index,
        }
    }
}
