//! `ncclAllGather`: every rank ends with every rank's buffer, rank j's at `j × count`.
//! Counts as nccl-tests' `all_gather_perf` sets them: `AllGatherGetCollByteCount`, `src/all_gather.cu`
//! (NVIDIA/nccl-tests v2.19.6).

use super::{Layout, Pattern, Source};
use crate::comm::Collective;

pub struct AllGather;

impl Pattern for AllGather {
    fn name(&self) -> &'static str {
        "all_gather"
    }

    /// Each rank sends `(count / nranks)` elements rounded down to 16 bytes
    /// (`base = (count/nranks) & ~(16/eltSize - 1)`) and receives `nranks` times that.
    fn layout(&self, bytes: usize, elem_size: usize, nranks: u32) -> Layout {
        Layout::gathered(bytes, elem_size, nranks)
    }

    /// `AllGatherGetBw`: algbw over the `nranks × count` elements each rank receives, busbw
    /// factor `(nranks - 1) / nranks`.
    fn busbw_factor(&self, nranks: u32) -> f64 {
        super::spread(nranks)
    }

    fn collective(&self) -> Option<Collective> {
        Some(Collective::AllGather)
    }

    fn source(&self, _rank: u32, _nranks: u32, index: usize, layout: &Layout) -> Source {
        Source::block(index, layout.per_peer)
    }
}
