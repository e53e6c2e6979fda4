//! `ncclReduce` to rank [`ROOT`](super::ROOT): the root ends with the reduction of every
//! rank's buffer; the other ranks' receive buffers are not written (`nccl.h`), so only the
//! root's is checked.
//! Counts as nccl-tests' `reduce_perf` sets them (`ReduceGetCollByteCount`, `src/reduce.cu`,
//! NVIDIA/nccl-tests v2.19.6), with its default root, 0.

use super::{Layout, Pattern, Source};
use crate::comm::Collective;

pub struct Reduce;

impl Pattern for Reduce {
    fn name(&self) -> &'static str {
        "reduce"
    }

    fn reduces(&self) -> bool {
        true
    }

    fn layout(&self, bytes: usize, elem_size: usize, _nranks: u32) -> Layout {
        Layout::whole(bytes, elem_size)
    }

    /// `ReduceGetBw`: busbw equals algbw.
    fn busbw_factor(&self, _nranks: u32) -> f64 {
        1.0
    }

    fn written(&self, rank: u32, layout: &Layout) -> usize {
        super::on_root_only(rank, layout)
    }

    fn collective(&self) -> Option<Collective> {
        Some(Collective::Reduce)
    }

    fn source(&self, _rank: u32, _nranks: u32, index: usize, _layout: &Layout) -> Source {
        Source::Reduced { index }
    }
}
